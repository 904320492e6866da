#!/usr/bin/env bash
# Checks the Debian package in a clean Debian 12 root, as root (minutes: not part of
# scripts/test.sh; scripts/release.sh runs it):
#
#   scripts/check-package.sh [DEB]     DEB: the package to check (default: scripts/package.sh's)
#
# A minimal bookworm root is made with debootstrap from Debian's archive (kept as a tarball,
# target/check-package/bookworm-minbase.tar.gz, so that a second run skips it; remove it to start
# over), unpacked into a folder of /var/tmp, with /proc, /sys and /dev of the host. apt installs
# the package there, with OpenJDK 17's runtime, man-db and systemd (for `systemd-analyze`). Then, inside that root: `--version`
# says the version; `man joularcode-bpf` shows the page; the completions and docs are there; the
# unit is enabled, not started, and `systemd-analyze verify` passes it; `joularcode-bpf record --
# java DemoShop` writes the demo's energy per branch, and the agent the binary carries is loaded
# from /run/joularcode-bpf. Everything is unmounted and removed at the end, passed or failed.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$JOULAR_ROOT"
[ "$(id -u)" -eq 0 ] || setup_fail "check-package mounts and chroots: run it as root"
deb=${1:-$(scripts/package.sh)}
[ -f "$deb" ] || setup_fail "no package $deb"
apt_install debootstrap

check_fail() {
    echo "check-package: FAILED: $*" >&2
    exit 1
}

root=$(mktemp -d /var/tmp/joularcode-bpf-bookworm.XXXXXX)
cleanup() {
    local mount
    for mount in proc sys dev; do
        if mountpoint -q "$root/$mount"; then
            umount -R "$root/$mount" || umount -R -l "$root/$mount"
        fi
    done
    rm -rf --one-file-system "$root"
}
trap cleanup EXIT

cache=target/check-package/bookworm-minbase.tar.gz
if [ ! -f "$cache" ]; then
    echo "== debootstrap --variant=minbase bookworm (kept in $cache)"
    debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/dev/null \
        || setup_fail "debootstrap failed (is http://deb.debian.org reachable?)"
    mkdir -p "$(dirname "$cache")"
    tar -C "$root" -czf "$cache.part" . && mv "$cache.part" "$cache"
else
    echo "== the bookworm root of $cache"
    tar -C "$root" -xzf "$cache"
fi
chmod 755 "$root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys" && mount --make-rslave "$root/sys"
mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev"
cp /etc/resolv.conf "$root/etc/resolv.conf"
in_root() {
    chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

echo "== apt-get install $(basename "$deb") openjdk-17-jre-headless man-db systemd"
cp "$deb" "$root/tmp/"
in_root apt-get update -qq
in_root apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless man-db systemd \
    "/tmp/$(basename "$deb")" >/dev/null || check_fail "apt-get install in the Debian 12 root"

echo "== joularcode-bpf --version"
version=$(in_root joularcode-bpf --version)
echo "$version"
[[ "$version" == "joularcode-bpf $JOULAR_VERSION (commit "* ]] || check_fail "--version says: $version"

echo "== man joularcode-bpf"
page=$(in_root env MANPAGER=cat MANWIDTH=100 man joularcode-bpf 2>&1) || check_fail "man: $page"
echo "$page" | head -n 12
for text in "Energy per Java execution branch" "joularcode-bpf-record(1)" "joularcode-bpf-daemon(1)" "--version"; do
    grep -qF -- "$text" <<<"$page" || check_fail "the manual page does not say '$text'"
done
in_root env MANPAGER=cat man joularcode-bpf-record | grep -qF -- "--results-path" \
    || check_fail "no manual page for joularcode-bpf-record"

echo "== completions, docs and the unit"
for file in usr/share/bash-completion/completions/joularcode-bpf usr/share/zsh/vendor-completions/_joularcode-bpf \
    usr/share/fish/vendor_completions.d/joularcode-bpf.fish usr/share/doc/joularcode-bpf/README.md \
    usr/share/doc/joularcode-bpf/docs/security.md usr/share/doc/joularcode-bpf/copyright \
    lib/systemd/system/joularcode-bpf.service; do
    [ -f "$root/$file" ] || check_fail "the package installed no /$file"
done
[ -L "$root/etc/systemd/system/multi-user.target.wants/joularcode-bpf.service" ] \
    || check_fail "the unit is not enabled"
if grep -qE "deb-systemd-invoke +(start|restart) " "$root/var/lib/dpkg/info/joularcode-bpf.postinst"; then
    check_fail "the package starts the unit"
fi
# Inside the root, where its targets and the manual page it names are (systemd is not running)
in_root systemd-analyze verify joularcode-bpf.service || check_fail "systemd-analyze verify the unit"

echo "== joularcode-bpf record -- java DemoShop 5"
mkdir -p "$root/opt/demo"
"$JOULAR_JDK17/bin/javac" --release 17 -d "$root/opt/demo" testkit/java/DemoShop.java
in_root joularcode-bpf record --results-path /tmp/results --methods-filtering-prefix DemoShop \
    -- java -cp /opt/demo DemoShop 5 || check_fail "record in the Debian 12 root"
in_root joularcode-bpf report /tmp/results | tee "$root/tmp/report.txt"
grep -q "DemoShop.serve" "$root/tmp/report.txt" || check_fail "no DemoShop branch in the report"
ls "$root"/run/joularcode-bpf/libjvm_symbolizer_agent-*.so >/dev/null 2>&1 \
    || check_fail "the agent was not written to /run/joularcode-bpf"
echo "check-package: the package works in a clean Debian 12 root"

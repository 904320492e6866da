#!/usr/bin/env bash
# Builds a release of joularcode-bpf, as root, with the version of Cargo.toml, into
# target/release-artifacts/:
#
#   joularcode-bpf-<version>-<arch>            the binary (it carries the agent and the BPF
#                                              programs), without its debug information
#   joularcode-bpf_<version>-1_<debian arch>.deb   the Debian package (scripts/package.sh)
#   joularcode-bpf-<version>-image.tar         the container image, an OCI archive
#                                              (scripts/image.sh; `podman load -i` reads it)
#   SHA256SUMS                                 their SHA-256 sums (`sha256sum -c SHA256SUMS`)
#
# Before it writes the sums, it checks the package in a clean Debian 12 root
# (scripts/check-package.sh) and the image under podman with Prometheus (scripts/check-image.sh);
# `--no-check` leaves the checks out.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$JOULAR_ROOT"
check=yes
case "${1:-}" in
    "") ;;
    --no-check) check=no ;;
    *) setup_fail "usage: $0 [--no-check]" ;;
esac
[ "$(id -u)" -eq 0 ] || setup_fail "the image and the checks need root: sudo $0"
out=target/release-artifacts
rm -rf "$out"
mkdir -p "$out"

build_profiler
objcopy --strip-debug target/release/joularcode-bpf "$out/joularcode-bpf-$JOULAR_VERSION-$(uname -m)"
deb=$(scripts/package.sh)
cp "$deb" "$out/"
image=$(scripts/image.sh)
buildah push --quiet "$image" "oci-archive:$out/joularcode-bpf-$JOULAR_VERSION-image.tar:$image" >/dev/null \
    || setup_fail "buildah push $image to an OCI archive failed"
if [ "$check" = yes ]; then
    scripts/check-package.sh "$out/$(basename "$deb")"
    scripts/check-image.sh "$image"
fi
(cd "$out" && sha256sum -- * >SHA256SUMS)
echo "== $out/SHA256SUMS"
cat "$out/SHA256SUMS"

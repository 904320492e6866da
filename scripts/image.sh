#!/usr/bin/env bash
# Builds the container image of joularcode-bpf with buildah (installed when missing), as root:
# deploy/Containerfile, `FROM scratch`, over a root of target/image/rootfs that holds the release
# binary (its debug information left out) and the shared libraries and loader `ldd` lists for it
# (libelf, zlib, libgcc_s, glibc): nothing else runs in the container.
#
#   scripts/image.sh          prints the image's name, localhost/joularcode-bpf:<version>
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$JOULAR_ROOT"
[ "$(id -u)" -eq 0 ] || setup_fail "buildah builds the image as root here: sudo $0"
apt_install buildah
build_profiler
context=target/image
rm -rf "$context"
mkdir -p "$context/rootfs/usr/bin" "$context/rootfs/tmp" "$context/rootfs/run"
chmod 1777 "$context/rootfs/tmp"
chmod 755 "$context/rootfs" "$context/rootfs/run"
objcopy --strip-debug target/release/joularcode-bpf "$context/rootfs/usr/bin/joularcode-bpf"
# `ldd` names each library (`name => /path (address)`) and the loader (`/path (address)`)
libraries=$(ldd target/release/joularcode-bpf | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
[ -n "$libraries" ] || setup_fail "ldd lists no library for target/release/joularcode-bpf"
for library in $libraries; do
    mkdir -p "$context/rootfs$(dirname "$library")"
    cp -L "$library" "$context/rootfs$library"
done
cp deploy/Containerfile "$context/"
image="localhost/joularcode-bpf:$JOULAR_VERSION"
# The image of an earlier build of this version, which the new one would leave without a name
buildah rmi "$image" >/dev/null 2>&1 || true
buildah bud --quiet --build-arg "VERSION=$JOULAR_VERSION" -t "$image" "$context" >&2 \
    || setup_fail "buildah bud $context failed"
echo "$image"

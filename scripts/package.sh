#!/usr/bin/env bash
# Builds the Debian package of joularcode-bpf with cargo-deb (installed from crates.io when
# missing): the binary (which carries the agent and the BPF programs), its manual pages and shell
# completions (`joularcode-bpf generate`), the docs, and the systemd unit, enabled but not started
# (the assets are listed in userspace/Cargo.toml, [package.metadata.deb]).
#
#   scripts/package.sh        prints the path of the .deb, target/debian/joularcode-bpf_<version>-1_<arch>.deb
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$JOULAR_ROOT"
if ! command -v cargo-deb >/dev/null 2>&1; then
    echo "setup: installing cargo-deb from crates.io" >&2
    cargo install --locked --quiet cargo-deb >&2 || setup_fail "cargo install cargo-deb failed"
fi
build_profiler
rm -rf target/generated
target/release/joularcode-bpf generate target/generated \
    || setup_fail "joularcode-bpf generate could not write the manual pages and completions"
# Built above, as the binary is: cargo-deb only gathers the files, the binary without its debug
# information
cargo deb --quiet --no-build --strip -p joularcode-bpf --output target/debian >&2 \
    || setup_fail "cargo deb failed"
deb=$(ls -t target/debian/joularcode-bpf_"$JOULAR_VERSION"-*.deb | head -n 1)
echo "$JOULAR_ROOT/$deb"

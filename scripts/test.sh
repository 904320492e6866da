#!/usr/bin/env bash
# Runs every test of joularcode-bpf, after installing what they need (scripts/setup.sh).
# The end-to-end tests load BPF programs into the kernel, so this runs as root.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$JOULAR_ROOT"

if [ "$(id -u)" -ne 0 ]; then
    echo "test: the end-to-end tests load BPF programs and need root: sudo $0" >&2
    exit 1
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
# The agent's sampling mode and core on the other platforms: built for Windows (and run under
# Wine by the tests), type-checked for macOS (no Apple linker here); the three targets in one
# Cargo run, which builds their crates side by side
targets=(x86_64-pc-windows-gnu aarch64-apple-darwin x86_64-apple-darwin)
echo "== cargo clippy ${targets[*]/#/--target } (the agent and core)"
cargo clippy "${targets[@]/#/--target=}" -p jvm-symbolizer-agent -p joularcode-core --quiet -- -D warnings
echo "== cargo test"
cargo test --workspace --no-fail-fast -- --test-threads=1 2>&1

#!/usr/bin/env bash
# Runs every test of joularcode-bpf, after installing what they need (scripts/test-setup.sh), in two tiers with cargo-nextest (settings in .config/nextest.toml):
#
#   the unit tier      what `cargo test` runs without root: fakes, memory images, files;
#   the end-to-end tier the test programs that need the `e2e` feature (userspace/Cargo.toml): the
#                      real BPF programs against real JVMs, a browser, Wine, Prometheus, as root.
#
# Each tier's JUnit report is under target/nextest/<profile>/junit.xml; the ten slowest tests are
# printed at the end.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/test-setup.sh"
cd "$JOULAR_ROOT"

if [ "$(id -u)" -ne 0 ]; then
    echo "test: the end-to-end tests load BPF programs and need root: sudo $0 (cargo test runs the unit tier without root)" >&2
    exit 1
fi

# Both tiers are built once, with the end-to-end feature, and told apart by a filter of the test
# programs that require it (read from Cargo's metadata, so the list is kept in one place)
features=(--workspace --features joularcode-bpf/e2e)
e2e=$(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
print(" | ".join("binary_id(%s::%s)" % (p["name"], t["name"]) for p in json.load(sys.stdin)["packages"]
                 for t in p["targets"] if "e2e" in t.get("required-features", [])))')
[ -n "$e2e" ] || setup_fail "no test program requires the e2e feature: userspace/Cargo.toml lost its [[test]] entries"
rm -rf target/nextest

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== building every test"
cargo nextest run "${features[@]}" --no-run --cargo-quiet
status=0
echo "== cargo clippy"
cargo clippy --workspace --all-targets --all-features --quiet -- -D warnings || status=1
# The agent's sampling mode and core on the other platforms: built for Windows (and run under
# Wine by the tests), type-checked for macOS (no Apple linker here); the three targets in one
# Cargo run, which builds their crates side by side
targets=(x86_64-pc-windows-gnu aarch64-apple-darwin x86_64-apple-darwin)
echo "== cargo clippy ${targets[*]/#/--target } (the agent and core)"
cargo clippy "${targets[@]/#/--target=}" -p jvm-symbolizer-agent -p joularcode-core --quiet -- -D warnings \
    || status=1
echo "== the unit tier"
cargo nextest run "${features[@]}" --cargo-quiet -E "not ($e2e)" || status=1
echo "== the end-to-end tier"
cargo nextest run "${features[@]}" --cargo-quiet --profile e2e -E "$e2e" || status=1
echo "== the ten slowest tests"
python3 scripts/slowest.py 10 target/nextest/*/junit.xml
exit "$status"

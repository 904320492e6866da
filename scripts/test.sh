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
echo "== cargo test --no-run (builds every test)"
cargo test --workspace --no-run --quiet
# The daemon's ten-minute churn test runs beside the rest of the suite. Its daemon watches only the
# cgroup its JVMs are started in (--cgroup), so it reaches no other test's JVM. Its JVMs are not
# hidden from the others: the tests that profile every JVM of the host (record/stacks/raw --all,
# top without --pid, the daemon's tests without --cgroup) see them too, and judge only their own
# JVMs; and they load the CPUs that the rest of the suite runs on
churn_log="$(mktemp)"
echo "== the daemon's churn test, in the background (its output comes at the end)"
cargo test -p joularcode-bpf --test daemon -- --test-threads=1 --nocapture churn >"$churn_log" 2>&1 &
churn=$!
status=0
echo "== cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings || status=1
# The agent's sampling mode and core on the other platforms: built for Windows (and run under
# Wine by the tests), type-checked for macOS (no Apple linker here); the three targets in one
# Cargo run, which builds their crates side by side
targets=(x86_64-pc-windows-gnu aarch64-apple-darwin x86_64-apple-darwin)
echo "== cargo clippy ${targets[*]/#/--target } (the agent and core)"
cargo clippy "${targets[@]/#/--target=}" -p jvm-symbolizer-agent -p joularcode-core --quiet -- -D warnings \
    || status=1
echo "== cargo test (all but the churn test)"
cargo test --workspace --no-fail-fast -- --test-threads=1 --skip churn 2>&1 || status=1
echo "== the daemon's churn test"
churn_status=0
wait "$churn" || churn_status=$?
cat "$churn_log"
rm -f "$churn_log"
if [ "$churn_status" -ne 0 ]; then
    echo "test: the daemon's churn test failed (exit $churn_status)" >&2
    status=1
fi
exit "$status"

#!/usr/bin/env bash
# The daemon's ten-minute churn soak (bench/README.md): the test of userspace/tests/daemon/churn.rs,
# built only with the `soak` feature, run alone with cargo-nextest's `churn` profile. As root:
#
#   sudo -E bash bench/churn.sh
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/test-setup.sh"
cd "$JOULAR_ROOT"
if [ "$(id -u)" -ne 0 ]; then
    echo "churn: the soak loads BPF programs and makes cgroups: sudo -E $0" >&2
    exit 1
fi
exec cargo nextest run -p joularcode-bpf --features soak --profile churn --no-capture \
    -E 'binary_id(joularcode-bpf::daemon) & test(churn)'

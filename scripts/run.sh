#!/usr/bin/env bash
# The main job: builds joularcode-bpf (after installing what it needs) and runs it.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$JOULAR_ROOT"
cargo build --release --quiet --workspace
exec target/release/joularcode-bpf "$@"

#!/usr/bin/env bash
# Runs every fuzz target of core/fuzz and userspace/fuzz in turn, SECONDS each (default 600), on
# the committed seeds and the corpus kept from earlier runs, and prints one line per target.
# Needs nightly Rust and cargo-fuzz (cargo install cargo-fuzz); exits non-zero on a crash, whose
# input libFuzzer keeps in <crate>/fuzz/artifacts/<target>/.
set -euo pipefail
seconds="${1:-600}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz: needs nightly Rust and cargo-fuzz: rustup toolchain install nightly && cargo install cargo-fuzz" >&2
    exit 1
fi
status=0
for crate in core/fuzz userspace/fuzz; do
    cd "$root/$crate"
    cargo +nightly fuzz build -O
    for target in $(cargo +nightly fuzz list); do
        mkdir -p "corpus/$target"
        log="$(mktemp)"
        if cargo +nightly fuzz run -O "$target" "corpus/$target" "seeds/$target" -- \
            -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1; then
            result=ok
        else
            result=CRASH
            status=1
            tail -40 "$log" >&2
        fi
        runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")"
        echo "$crate $target: $result, ${runs:-?} runs in ${seconds} s"
        rm -f "$log"
    done
done
exit "$status"

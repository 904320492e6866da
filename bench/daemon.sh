#!/usr/bin/env bash
# The daemon's own CPU and memory at the default rate, with 20 idle JVMs and with 2 busy ones
# (docs/daemon.md). Run by hand as root, after `cargo build --release`:
#
#   sudo -E bash bench/daemon.sh [SECONDS]      # default 60 s measured per case, after 10 s
#
# JOULAR_BENCH_BIN may name several binaries, separated by spaces (say, a build before a change and
# one after): each case is then run with each of them in turn, in the same run.
# JOULAR_BENCH_IDLE_JVMS sets the number of idle JVMs (default 20; say 100 for a crowded host), and
# JOULAR_BENCH_CASES the cases run (default "idle busy").
#
# Each case starts its JVMs (testkit/java/RecordBusy: 0 busy threads and 4 sleeping ones, about 20
# threads in all with the JVM's own, or 2 busy threads each), waits for them to start (a second
# per 5 JVMs, 3 s at least), then the daemon (vm power source, 100 W), lets it settle for 10 s
# and a second per 5 JVMs more (it opens each JVM), and reads its CPU time (/proc/PID/stat,
# utime + stime) over the next SECONDS and its RSS at the end.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/test-setup.sh"
cd "$JOULAR_ROOT"
seconds=${1:-60}
read -r -a bins <<< "${JOULAR_BENCH_BIN:-target/release/joularcode-bpf}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$JOULAR_JDK17/bin/javac" --release 17 -d "$work/classes" testkit/java/RecordBusy.java
echo 100 > "$work/watts"
ticks=$(getconf CLK_TCK)

cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

run_case() {
    local name=$1 count=$2 busy=$3 bin=$4 pids=()
    for _ in $(seq "$count"); do
        "$JOULAR_JDK17/bin/java" -XX:+PreserveFramePointer -cp "$work/classes" RecordBusy "$busy" \
            $((seconds + 30 + 2 * count / 5)) > /dev/null &
        pids+=($!)
    done
    sleep $((count / 5 > 3 ? count / 5 : 3))
    "$bin" daemon --power-source-type vm --vm-power-format watts --vm-power-file "$work/watts" \
        --listen 127.0.0.1:0 2> "$work/$name.log" &
    local daemon=$!
    sleep $((10 + count / 5))
    local before after rss
    before=$(cpu_ticks "$daemon")
    sleep "$seconds"
    after=$(cpu_ticks "$daemon")
    rss=$(awk '/VmRSS/ { print $2 }' "/proc/$daemon/status")
    kill -TERM "$daemon"; wait "$daemon" || true
    kill "${pids[@]}" 2> /dev/null || true
    wait "${pids[@]}" 2> /dev/null || true
    awk -v n="$name" -v t=$((after - before)) -v hz="$ticks" -v s="$seconds" -v rss="$rss" \
        'BEGIN { printf "%-14s CPU %.2f%% of a core, RSS %.1f MiB\n", n, 100 * t / hz / s, rss / 1024 }'
}

idle=${JOULAR_BENCH_IDLE_JVMS:-20}
read -r -a cases <<< "${JOULAR_BENCH_CASES:-idle busy}"
for bin in "${bins[@]}"; do
    echo "== $bin"
    for case in "${cases[@]}"; do
        case $case in
            idle) run_case "$idle idle JVMs" "$idle" 0 "$bin" ;;
            busy) run_case "2 busy JVMs" 2 2 "$bin" ;;
            *) echo "unknown case $case (give idle, busy)" >&2; exit 2 ;;
        esac
    done
done

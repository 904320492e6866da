# Sourced by the bench scripts that read the run time of the BPF programs a process holds.

# run_time_ns of the BPF programs process $1 holds, each program once (from /proc/PID/fdinfo,
# kept while kernel.bpf_stats_enabled is 1).
bpf_ns() {
    for fd in /proc/"$1"/fdinfo/*; do
        awk '/^prog_id:/ { id = $2 } /^run_time_ns:/ { t = $2 } END { if (id) print id, t }' \
            "$fd" 2> /dev/null
    done | sort -u -k1,1 | awk '{ s += $2 } END { print s + 0 }'
}

# Sourced by the bench scripts that measure what a profiler's process costs: the run time of the
# BPF programs it holds, and its own CPU time.

# run_time_ns of the BPF programs process $1 holds, each program once (from /proc/PID/fdinfo,
# kept while kernel.bpf_stats_enabled is 1).
bpf_ns() {
    for fd in /proc/"$1"/fdinfo/*; do
        awk '/^prog_id:/ { id = $2 } /^run_time_ns:/ { t = $2 } END { if (id) print id, t }' \
            "$fd" 2> /dev/null
    done | sort -u -k1,1 | awk '{ s += $2 } END { print s + 0 }'
}

# The CPU time of process $1's threads in ns (sum_exec_runtime, from their schedstat): exact,
# where utime + stime counts in clock ticks.
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2> /dev/null | awk '{ s += $1 } END { print s + 0 }'; }

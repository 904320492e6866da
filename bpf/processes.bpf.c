// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * Process events for the discovery of JVMs (userspace/src/discovery/events.rs): which processes
 * exec'd a program and which ended, so that userspace reads /proc only for those instead of
 * rescanning every process of the host.
 *
 * - jp_on_exec: a process exec'd (its pid, as the host sees it, whatever its namespaces).
 * - jp_on_process_exit: the last thread of a process exited.
 *
 * Each event is 8 bytes in a ring buffer that userspace consumes on its own timer (no wakeup).
 * An event that finds the buffer full is counted in lost_events: userspace then rescans /proc.
 * Needs Linux 5.8 (ring buffer) and BTF.
 */
#include "jp_vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

enum jp_process_event_kind {
	JP_PROCESS_EXEC = 1,
	JP_PROCESS_EXIT = 2,
};

struct jp_process_event {
	__u32 pid;
	__u32 kind;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} process_events SEC(".maps");

/* Events that found the ring buffer full. */
__u64 lost_events = 0;

static __always_inline void emit(__u32 pid, __u32 kind)
{
	struct jp_process_event *event =
		bpf_ringbuf_reserve(&process_events, sizeof(*event), 0);

	if (!event) {
		__sync_fetch_and_add(&lost_events, 1);
		return;
	}
	event->pid = pid;
	event->kind = kind;
	bpf_ringbuf_submit(event, BPF_RB_NO_WAKEUP);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(jp_on_exec, struct task_struct *task)
{
	emit(task->tgid, JP_PROCESS_EXEC);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(jp_on_process_exit, struct task_struct *task)
{
	if (task->signal->live.counter == 0)
		emit(task->tgid, JP_PROCESS_EXIT);
	return 0;
}

// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The joularcode-bpf sampler.
 *
 * - jp_on_sample: a perf_event program on one cpu-clock event per CPU. For threads of tracked
 *   processes it writes a jp_sample (user registers and a frame-pointer walk) straight into the
 *   ring buffer, without waking userspace (which consumes on a timer).
 * - jp_on_switch, jp_on_exit, and jp_on_sample too: the cumulative on-CPU time of every thread of a tracked
 *   process, read from task->se.sum_exec_runtime (the scheduler's own counter), with the value at
 *   first sight as a baseline.
 * - jp_on_fork: children of followed processes become followed and tracked.
 *
 * Needs Linux 5.15; walks with bpf_loop from 5.17 on (jp_on_sample), with a bounded loop before
 * (jp_on_sample_bounded). Checked on 6.18.
 */
#include "jp_vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "sampler.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* task->flags: the task is exiting. */
#define PF_EXITING 0x00000004

/* tgids whose threads are sampled and accounted (filled by userspace and on_fork). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} tracked SEC(".maps");

/* tgids whose new child processes are followed and tracked too. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} followed SEC(".maps");

/* On-CPU time per tid. Userspace deletes exited threads once it has read them. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct jp_thread);
} threads SEC(".maps");

/* Userspace sizes it to the rate and the number of CPUs before loading. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} samples SEC(".maps");

/* Samples lost because the ring buffer was full. */
__u64 ring_drops = 0;
/* Threads not accounted because the threads map was full. */
__u64 thread_drops = 0;

static __always_inline bool is_tracked(__u32 tgid)
{
	return bpf_map_lookup_elem(&tracked, &tgid) != 0;
}

/* Refreshes the on-CPU time of a thread of a tracked process, adding it at first sight. */
static __always_inline void account(struct task_struct *task, __u32 tgid, __u32 tid, bool exiting)
{
	__u64 runtime = task->se.sum_exec_runtime;
	struct jp_thread *t = bpf_map_lookup_elem(&threads, &tid);

	if (t) {
		/* A thread that exited and is not read yet, and a new thread reusing its tid. */
		if (t->exited && !(task->flags & PF_EXITING))
			return;
		t->runtime = runtime;
		bpf_probe_read_kernel(t->comm, sizeof(t->comm), task->comm);
		if (exiting)
			t->exited = 1;
		return;
	}
	/* Its last switch-out after userspace deleted it: nothing left to count. */
	if ((task->flags & PF_EXITING) && !exiting)
		return;
	struct jp_thread fresh = {
		.pid = tgid,
		.exited = exiting,
		.baseline = runtime,
		.runtime = runtime,
	};
	bpf_probe_read_kernel(fresh.comm, sizeof(fresh.comm), task->comm);
	if (bpf_map_update_elem(&threads, &tid, &fresh, BPF_NOEXIST) == -7 /* E2BIG: full */)
		__sync_fetch_and_add(&thread_drops, 1);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(jp_on_switch, bool preempt, struct task_struct *prev)
{
	__u32 tgid = prev->tgid;

	if (is_tracked(tgid))
		account(prev, tgid, prev->pid, false);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(jp_on_exit, struct task_struct *task)
{
	__u32 tgid = task->tgid;

	if (!is_tracked(tgid))
		return 0;
	account(task, tgid, task->pid, true);
	/* The last thread of the process: it is no longer tracked nor followed (its threads'
	 * times stay until userspace reads them). */
	if (task->signal->live.counter == 0) {
		bpf_map_delete_elem(&tracked, &tgid);
		bpf_map_delete_elem(&followed, &tgid);
	}
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(jp_on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 parent_tgid = parent->tgid;
	__u32 child_tgid = child->tgid;
	__u8 yes = 1;

	if (child_tgid != parent_tgid && bpf_map_lookup_elem(&followed, &parent_tgid)) {
		bpf_map_update_elem(&followed, &child_tgid, &yes, BPF_ANY);
		bpf_map_update_elem(&tracked, &child_tgid, &yes, BPF_ANY);
	}
	if (is_tracked(child_tgid))
		account(child, child_tgid, child->pid, false);
	return 0;
}

struct walk {
	struct jp_sample *rec;
	__u64 fp;
};

/* One step of the frame-pointer walk: records frame i, whose frame pointer is w->fp. */
static long walk_frame(__u64 i, struct walk *w)
{
	/* Words fp-8 .. fp+1: bcp at 0, Method* at 5, saved fp at 8, return address at 9. */
	__u64 words[10];
	__u64 fp = w->fp;

	if (i >= JP_MAX_FRAMES || fp == 0 || (fp & 7))
		return 1;
	struct jp_frame *f = &w->rec->frames[i];
	if (bpf_probe_read_user(words, sizeof(words), (void *)(fp - 64)) == 0) {
		f->bcp_slot = words[0];
		f->method_slot = words[5];
	} else if (bpf_probe_read_user(&words[8], 16, (void *)fp) == 0) {
		f->bcp_slot = 0;
		f->method_slot = 0;
	} else {
		return 1;
	}
	f->fp = fp;
	f->return_address = words[9];
	w->rec->nframes = i + 1;
	if (words[9] == 0 || words[8] <= fp)
		return 1;
	w->fp = words[8];
	return 0;
}

/*
 * The start of a sample of the current thread, if its process is tracked: its time refreshed,
 * and a ring-buffer record filled up to its frames (nframes 0). NULL if there is nothing to
 * sample, or no room (counted).
 */
static __always_inline struct jp_sample *begin_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	__u32 tid = (__u32)id;

	if (!is_tracked(tgid))
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	account(task, tgid, tid, false);

	struct jp_sample *rec = bpf_ringbuf_reserve(&samples, sizeof(*rec), 0);
	if (!rec) {
		__sync_fetch_and_add(&ring_drops, 1);
		return 0;
	}
	/* Read the context first, unconditionally: see docs/sampler.md (verifier). */
	__u64 ip = ctx->regs.ip;
	__u64 sp = ctx->regs.sp;
	__u64 bp = ctx->regs.bp;
	__u32 flags = 0;
	if ((__s64)ip < 0) {
		struct pt_regs *user = (struct pt_regs *)bpf_task_pt_regs(task);
		ip = BPF_CORE_READ(user, ip);
		sp = BPF_CORE_READ(user, sp);
		bp = BPF_CORE_READ(user, bp);
		flags = JP_SAMPLE_KERNEL;
	}
	rec->pid = tgid;
	rec->tid = tid;
	rec->cpu = bpf_get_smp_processor_id();
	rec->flags = flags;
	rec->time_ns = bpf_ktime_get_ns();
	rec->ip = ip;
	rec->sp = sp;
	rec->bp = bp;
	rec->nframes = 0;
	rec->pad = 0;
	return rec;
}

/*
 * One sample: the record begun, the walk, the record submitted. `bounded` is a constant in each
 * program, so each keeps one way of walking: a program with the bounded loop does not call
 * bpf_loop, and loads on kernels without it.
 */
static __always_inline int sample(struct bpf_perf_event_data *ctx, bool bounded)
{
	struct jp_sample *rec = begin_sample(ctx);

	if (!rec)
		return 0;
	struct walk w = { .rec = rec, .fp = rec->bp };
	if (bounded) {
		for (__u32 i = 0; i < JP_MAX_FRAMES; i++) {
			if (walk_frame(i, &w))
				break;
		}
	} else {
		bpf_loop(JP_MAX_FRAMES, walk_frame, &w, 0);
	}
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	return 0;
}

/* The sampler, walking with bpf_loop (Linux 5.17 and later). */
SEC("perf_event")
int jp_on_sample(struct bpf_perf_event_data *ctx)
{
	return sample(ctx, false);
}

/* The same sampler for kernels without bpf_loop (5.15, 5.16): a bounded loop. */
SEC("perf_event")
int jp_on_sample_bounded(struct bpf_perf_event_data *ctx)
{
	return sample(ctx, true);
}

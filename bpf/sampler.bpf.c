// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The joularcode-bpf sampler.
 *
 * - jp_on_sample: a perf_event program on one cpu-clock event per CPU. For threads of tracked
 *   processes it walks the stack (unwind.h: native frames by frame pointer, HotSpot frames by
 *   the kind of their code) and writes a jp_sample to the ring buffer, without waking userspace
 *   (which consumes on a timer).
 * - jp_iter_threads, jp_on_exit, jp_on_free, and jp_on_sample too: the cumulative on-CPU time of
 *   every thread of a tracked process, read from task->se.sum_exec_runtime (the scheduler's own
 *   counter), with the value at first sight as a baseline. Nothing runs at context switches:
 *   userspace reads the live threads' times from the task iterator jp_iter_threads, and the
 *   exited ones' from the map `exited`.
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
#include "unwind.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* The layouts userspace reads and writes by offset (sampler.h). */
_Static_assert(sizeof(struct jp_frame) == 24, "jp_frame");
_Static_assert(__builtin_offsetof(struct jp_sample, frames) == 64, "jp_sample header");
_Static_assert(sizeof(struct jp_thread) == 48, "jp_thread");
_Static_assert(sizeof(struct jp_field) == 4, "jp_field");
_Static_assert(__builtin_offsetof(struct jp_jvm, blob_size) == 184, "jp_jvm fields");
_Static_assert(__builtin_offsetof(struct jp_jvm, name) == 216, "jp_jvm name");
_Static_assert(__builtin_offsetof(struct jp_jvm, java_thread_vtable) == 232, "jp_jvm thread");
_Static_assert(sizeof(struct jp_jvm) == 240, "jp_jvm");
_Static_assert(sizeof(struct jp_java_thread) == 32, "jp_java_thread");

/* task->flags: the task is exiting. */
#define PF_EXITING 0x00000004

/* tgids whose threads are sampled and accounted (filled by userspace and on_fork). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} tracked SEC(".maps");

/*
 * The tracked processes whose threads have all begun to exit, by tgid: the start time of the
 * group leader, which tells the process from a later one given the same pid. Each exiting thread
 * decrements signal->live before its sched_process_exit, so a thread can reach jp_on_exit after
 * a sibling saw the group dead and untracked it; its final time is still counted. LRU: bounded,
 * the oldest forgotten.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} ending SEC(".maps");

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

/*
 * Exited threads' entries, by tid, moved out of `threads` at exit: userspace takes them all at
 * each read, a walk of a map a sixteenth the size of `threads`. When it is full, or holds an
 * entry of the same tid, the entry stays in `threads` and exited_left counts it.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct jp_thread);
} exited SEC(".maps");

/* Userspace sizes it to the rate and the number of CPUs before loading. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} samples SEC(".maps");

/*
 * The Java threads of the JVMs the walker knows, by tid: those userspace listed, and those the
 * sampler found in r15 before userspace listed them (jp_thread_in_r15). An exiting thread's entry
 * goes (jp_on_exit).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct jp_java_thread);
} java_threads SEC(".maps");

/* Samples lost because the ring buffer was full. */
__u64 ring_drops = 0;
/* Threads not accounted because the threads map was full. */
__u64 thread_drops = 0;
/* Exited threads' entries that stayed in `threads` (userspace then reads it whole). */
__u64 exited_left = 0;

static __always_inline bool is_tracked(__u32 tgid)
{
	return bpf_map_lookup_elem(&tracked, &tgid) != 0;
}

/*
 * Refreshes the on-CPU time of a thread of a tracked process, adding it at first sight, and
 * returns the thread's entry in `threads` (NULL if it has none: the map is full, or the thread
 * was read after its exit).
 */
static __always_inline struct jp_thread *account(struct task_struct *task, __u32 tgid, __u32 tid,
						 bool exiting)
{
	__u64 runtime = task->se.sum_exec_runtime;
	struct jp_thread *t = bpf_map_lookup_elem(&threads, &tid);

	if (t) {
		/* A thread that exited and is not read yet, and a new thread reusing its tid. */
		if (t->exited && !(task->flags & PF_EXITING))
			return t;
		t->runtime = runtime;
		bpf_probe_read_kernel(t->comm, sizeof(t->comm), task->comm);
		if (exiting)
			t->exited = 1;
		return t;
	}
	/* Seen exiting after userspace read and deleted it: nothing left to count. */
	if ((task->flags & PF_EXITING) && !exiting)
		return NULL;
	struct jp_thread fresh = {
		.pid = tgid,
		.tid = tid,
		.exited = exiting,
		.baseline = runtime,
		.runtime = runtime,
	};
	bpf_probe_read_kernel(fresh.comm, sizeof(fresh.comm), task->comm);
	if (bpf_map_update_elem(&threads, &tid, &fresh, BPF_NOEXIST) == -7 /* E2BIG: full */)
		__sync_fetch_and_add(&thread_drops, 1);
	return bpf_map_lookup_elem(&threads, &tid);
}

/*
 * Refreshes the time of every thread of the tracked processes it meets and writes the entry of
 * each live one. Userspace reads it to its end at each cycle, over the threads
 * of each tracked process or over the host's tasks: one pass a cycle instead of a program at
 * every context switch of the host.
 */
SEC("iter/task")
int jp_iter_threads(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;

	if (!task)
		return 0;
	__u32 tgid = task->tgid;
	if (!is_tracked(tgid))
		return 0;
	struct jp_thread *t = account(task, tgid, task->pid, false);
	if (t && !t->exited)
		bpf_seq_write(ctx->meta->seq, t, sizeof(*t));
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(jp_on_exit, struct task_struct *task)
{
	__u32 tgid = task->tgid;
	__u64 leader_start = task->group_leader->start_time;
	__u64 *ended = bpf_map_lookup_elem(&ending, &tgid);

	if (!is_tracked(tgid) && !(ended && *ended == leader_start))
		return 0;
	__u32 tid = task->pid;
	struct jp_thread *t = account(task, tgid, tid, true);
	if (t && t->exited) {
		if (bpf_map_update_elem(&exited, &tid, t, BPF_NOEXIST) == 0)
			bpf_map_delete_elem(&threads, &tid);
		else
			__sync_fetch_and_add(&exited_left, 1);
	}
	bpf_map_delete_elem(&java_threads, &tid);
	/* Every thread of the process is exiting: it is no longer tracked nor followed (its
	 * threads' times stay until userspace reads them), and the threads still on their way
	 * here are counted through `ending`. */
	if (task->signal->live.counter == 0) {
		bpf_map_update_elem(&ending, &tgid, &leader_start, BPF_ANY);
		bpf_map_delete_elem(&tracked, &tgid);
		bpf_map_delete_elem(&followed, &tgid);
	}
	return 0;
}

/*
 * A task freed, after its last switch-out: the final time of an exited thread not read yet,
 * with what it ran after its sched_process_exit (the rest of its exit, and the stretch since the
 * scheduler last updated its counter). An exited entry of the task's process is taken for its
 * own: a new thread does not take over an exited entry until userspace has read it, and the
 * kernel gives a tid again only once it has gone round its pid space.
 */
SEC("tp_btf/sched_process_free")
int BPF_PROG(jp_on_free, struct task_struct *task)
{
	__u32 tid = task->pid;
	struct jp_thread *t = bpf_map_lookup_elem(&exited, &tid);

	if (!t)
		t = bpf_map_lookup_elem(&threads, &tid);
	if (t && t->exited && t->pid == (__u32)task->tgid)
		t->runtime = task->se.sum_exec_runtime;
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

/*
 * The current thread's JavaThread, taken from r15 when userspace has not listed the thread yet
 * (it has just started): HotSpot keeps the current JavaThread* in r15 in Java code, and native
 * code it calls keeps r15 unless it saves and reuses it. The candidate is taken only if it is a
 * JavaThread (its vtable), its stack holds sp and its OS thread is this tid; then it is added to
 * java_threads, for the samples that find r15 reused.
 */
static __always_inline bool jp_thread_in_r15(const struct jp_jvm *jvm, __u32 tgid, __u32 tid,
					     __u64 r15, __u64 sp, struct jp_java_thread *found)
{
	__u64 vtable, base, size, os_thread;
	__u32 os_tid;

	if (jvm->java_thread_vtable == 0 || r15 == 0 || (r15 & 7) ||
	    jp_read(&vtable, sizeof(vtable), r15) || vtable != jvm->java_thread_vtable ||
	    jp_read(&base, sizeof(base), r15 + jvm->thread_stack_base) ||
	    jp_read(&size, sizeof(size), r15 + jvm->thread_stack_size) || size > base ||
	    sp >= base || sp < base - size ||
	    jp_read(&os_thread, sizeof(os_thread), r15 + jvm->thread_osthread) || os_thread == 0 ||
	    jp_read(&os_tid, sizeof(os_tid), os_thread + jvm->osthread_tid) || os_tid != tid)
		return false;
	found->pid = tgid;
	found->pad = 0;
	found->thread = r15;
	found->stack_low = base - size;
	found->stack_high = base;
	bpf_map_update_elem(&java_threads, &tid, found, BPF_ANY);
	return true;
}

/*
 * The start of a sample of the current thread, if its process is tracked: its time refreshed,
 * the record's header filled in the CPU's scratch, and the walk set at the sampled registers
 * (with the thread's anchor, for a Java thread that has left Java code). NULL if there is
 * nothing to sample.
 */
static __always_inline struct jp_scratch *begin_sample(struct bpf_perf_event_data *ctx,
							  struct jp_walk_ctx *c)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	__u32 tid = (__u32)id;
	__u32 zero = 0;

	if (!is_tracked(tgid))
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	account(task, tgid, tid, false);

	struct jp_scratch *s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 0;
	/* Read the context first, unconditionally: see docs/sampler.md (verifier). */
	__u64 ip = ctx->regs.ip;
	__u64 sp = ctx->regs.sp;
	__u64 bp = ctx->regs.bp;
	__u64 bx = ctx->regs.bx;
	__u64 r13 = ctx->regs.r13;
	__u64 ax = ctx->regs.ax;
	__u64 r15 = ctx->regs.r15;
	__u32 flags = 0;
	if ((__s64)ip < 0) {
		struct pt_regs *user = (struct pt_regs *)bpf_task_pt_regs(task);
		ip = BPF_CORE_READ(user, ip);
		sp = BPF_CORE_READ(user, sp);
		bp = BPF_CORE_READ(user, bp);
		bx = BPF_CORE_READ(user, bx);
		r13 = BPF_CORE_READ(user, r13);
		ax = BPF_CORE_READ(user, ax);
		r15 = BPF_CORE_READ(user, r15);
		flags = JP_SAMPLE_KERNEL;
	}
	struct jp_walk *w = &s->w;
	w->pc = ip;
	w->sp = sp;
	w->fp = bp;
	w->bx = bx;
	w->r13 = r13;
	w->ax = ax;
	w->anchor_sp = 0;
	w->anchor_pc = 0;
	w->anchor_fp = 0;
	w->stack_high = 0;
	w->leaf = 1;
	w->stop = 0;
	w->java_frames = 0;
	w->scanned = 0;
	c->s = s;
	c->jvm = bpf_map_lookup_elem(&jvms, &tgid);
	if (c->jvm) {
		flags |= JP_SAMPLE_JVM;
		struct jp_java_thread *thread = bpf_map_lookup_elem(&java_threads, &tid);
		struct jp_java_thread found;
		if (!(thread && thread->pid == tgid && sp >= thread->stack_low &&
		      sp < thread->stack_high)) {
			thread = 0;
			if (jp_thread_in_r15(c->jvm, tgid, tid, r15, sp, &found)) {
				thread = &found;
				flags |= JP_SAMPLE_THREAD_R15;
			}
		}
		if (thread) {
			flags |= JP_SAMPLE_JAVA_THREAD;
			w->stack_high = thread->stack_high;
			if (jp_read_anchor(w, thread->thread + c->jvm->thread_anchor))
				w->anchor_sp = 0;
		}
	}
	struct jp_sample *rec = &s->rec;
	rec->pid = tgid;
	rec->tid = tid;
	rec->cpu = bpf_get_smp_processor_id();
	rec->flags = flags;
	rec->time_ns = bpf_ktime_get_ns();
	rec->ip = ip;
	rec->sp = sp;
	rec->bp = bp;
	rec->nframes = 0;
	rec->stop = 0;
	return s;
}

/* Ends a sample: its record, up to its last frame, goes to the ring buffer. */
static __always_inline void end_sample(struct jp_scratch *s)
{
	__u32 n = s->rec.nframes;

	if (n > JP_MAX_FRAMES)
		n = JP_MAX_FRAMES;
	s->rec.stop = s->w.stop ? s->w.stop : JP_STOP_MAX_FRAMES;
	s->rec.stack_end = s->w.sp;
	__u64 size = sizeof(struct jp_sample) - sizeof(s->rec.frames) + n * sizeof(struct jp_frame);
	if (bpf_ringbuf_output(&samples, &s->rec, size, BPF_RB_NO_WAKEUP))
		__sync_fetch_and_add(&ring_drops, 1);
}

/* The sampler, walking with bpf_loop (Linux 5.17 and later). */
SEC("perf_event")
int jp_on_sample(struct bpf_perf_event_data *ctx)
{
	struct jp_walk_ctx c;
	struct jp_scratch *s = begin_sample(ctx, &c);

	if (!s)
		return 0;
	bpf_loop(JP_MAX_FRAMES, jp_walk_step, &c, 0);
	end_sample(s);
	return 0;
}

/*
 * The same sampler for kernels without bpf_loop (5.15, 5.16): a walk of JP_STEPS_PER_PROG frames
 * per program, continued by tail calls into jp_walk_more (the verifier checks a few steps, where a
 * loop of JP_MAX_FRAMES steps would be too complex for it).
 */
#define JP_STEPS_PER_PROG 8

/* jp_walk_more, at index 0 (userspace sets it when it loads the bounded sampler). */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} walk_more SEC(".maps");

/* JP_STEPS_PER_PROG steps of the walk in scratch; then the next program, or the end. */
static __always_inline int walk_bounded(struct bpf_perf_event_data *ctx, struct jp_walk_ctx *c)
{
	for (__u32 i = 0; i < JP_STEPS_PER_PROG; i++) {
		if (jp_walk_step(i, c)) {
			end_sample(c->s);
			return 0;
		}
	}
	bpf_tail_call(ctx, &walk_more, 0);
	/* No more tail calls allowed: the walk is cut there. */
	end_sample(c->s);
	return 0;
}

SEC("perf_event")
int jp_on_sample_bounded(struct bpf_perf_event_data *ctx)
{
	struct jp_walk_ctx c;

	if (!begin_sample(ctx, &c))
		return 0;
	return walk_bounded(ctx, &c);
}

/* The rest of a walk that jp_on_sample_bounded began on this CPU. */
SEC("perf_event")
int jp_walk_more(struct bpf_perf_event_data *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u32 zero = 0;
	struct jp_walk_ctx c = {
		.s = bpf_map_lookup_elem(&scratch, &zero),
		.jvm = bpf_map_lookup_elem(&jvms, &tgid),
	};

	if (!c.s)
		return 0;
	return walk_bounded(ctx, &c);
}

// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The alternative to walking stacks in BPF, measured by bench/benches/walk_cost.rs: copy the top
 * of the sampled thread's user stack (16, 32 or 64 KiB from sp) into the ring buffer for
 * userspace to walk. One program per size, since a ring-buffer reservation has a constant size.
 * A copy that would cross the top of the stack fails whole: it is retried at half the size, twice.
 */
#include "jp_vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* The process whose threads are copied (set before loading). */
const volatile __u32 target_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 26);
} copies SEC(".maps");

/* Samples lost because the ring buffer was full, and copies that could not be made whole. */
__u64 drops = 0;
__u64 short_copies = 0;

struct copy_header {
	__u64 sp;
	__u64 len;
};

static __always_inline int copy(struct bpf_perf_event_data *ctx, void *record, __u32 size)
{
	struct copy_header *header = record;
	__u8 *data = (__u8 *)record + sizeof(*header);
	__u64 sp = ctx->regs.sp;

	if ((__s64)ctx->regs.ip < 0) {
		struct pt_regs *user = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
		sp = BPF_CORE_READ(user, sp);
	}
	header->sp = sp;
	header->len = size;
	if (bpf_probe_read_user(data, size, (void *)sp) == 0)
		return 0;
	__sync_fetch_and_add(&short_copies, 1);
	header->len = size / 2;
	if (bpf_probe_read_user(data, size / 2, (void *)sp) == 0)
		return 0;
	header->len = size / 4;
	if (bpf_probe_read_user(data, size / 4, (void *)sp) == 0)
		return 0;
	header->len = 0;
	return 0;
}

#define STACK_COPY(kib)                                                                     \
	SEC("perf_event")                                                                   \
	int copy_##kib##k(struct bpf_perf_event_data *ctx)                                  \
	{                                                                                   \
		if (bpf_get_current_pid_tgid() >> 32 != target_tgid)                       \
			return 0;                                                           \
		void *record = bpf_ringbuf_reserve(&copies,                                 \
						   sizeof(struct copy_header) + kib * 1024, 0); \
		if (!record) {                                                              \
			__sync_fetch_and_add(&drops, 1);                                    \
			return 0;                                                           \
		}                                                                           \
		copy(ctx, record, kib * 1024);                                              \
		bpf_ringbuf_submit(record, BPF_RB_NO_WAKEUP);                              \
		return 0;                                                                   \
	}

STACK_COPY(16)
STACK_COPY(32)
STACK_COPY(64)

/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Records the sampler shares with userspace. userspace/src/sampler/record.rs reads them by the
 * offsets noted here: change both together (docs/sampler.md describes the layout).
 */
#ifndef JP_SAMPLER_H
#define JP_SAMPLER_H

/* Frames walked per sample, at most. */
#define JP_MAX_FRAMES 128

/* jp_sample.flags: the sample interrupted the thread in kernel mode. */
#define JP_SAMPLE_KERNEL 1

/* One frame of the frame-pointer chain (32 bytes). */
struct jp_frame {
	__u64 fp;             /* the frame pointer of this frame */
	__u64 return_address; /* the word at fp + 8: the pc in the caller */
	__u64 method_slot;    /* the word at fp - 24: an interpreter frame's Method* */
	__u64 bcp_slot;       /* the word at fp - 64: an interpreter frame's bcp */
};

/* One sample (48-byte header, then nframes valid frames of the 128 reserved). */
struct jp_sample {
	__u32 pid;     /* 0 */
	__u32 tid;     /* 4 */
	__u32 cpu;     /* 8 */
	__u32 flags;   /* 12: JP_SAMPLE_* */
	__u64 time_ns; /* 16: CLOCK_MONOTONIC */
	__u64 ip;      /* 24: user registers */
	__u64 sp;      /* 32 */
	__u64 bp;      /* 40 */
	__u32 nframes; /* 48 */
	__u32 pad;     /* 52 */
	struct jp_frame frames[JP_MAX_FRAMES]; /* 56 */
};

/* Per-thread on-CPU time (the value of map `threads`, keyed by tid). */
struct jp_thread {
	__u32 pid;      /* 0 */
	__u32 exited;   /* 4: 1 once the thread has exited */
	__u64 baseline; /* 8: sum_exec_runtime when the thread was first seen */
	__u64 runtime;  /* 16: sum_exec_runtime at the last update */
	char comm[16];  /* 24 */
};

#endif /* JP_SAMPLER_H */

/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The few kernel types the sampler reads, written by hand instead of a 3 MB vmlinux.h.
 * Every struct is marked preserve_access_index, so clang emits CO-RE relocations and libbpf
 * moves each field to its real offset in the running kernel (from its BTF). Only the fields
 * used are declared; x86_64 only.
 */
#ifndef __VMLINUX_H__
#define __VMLINUX_H__

typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
#define true 1
#define false 0

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_PROG_ARRAY = 3,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_RINGBUF = 27,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
};

enum {
	BPF_RB_NO_WAKEUP = 1,
};

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

/* x86_64 user registers, in the kernel's order (ip at 128, as the perf_event context has it). */
struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};

struct bpf_perf_event_data {
	struct pt_regs regs;
	__u64 sample_period;
	__u64 addr;
};

struct sched_entity {
	__u64 sum_exec_runtime;
};

typedef struct {
	int counter;
} atomic_t;

struct signal_struct {
	atomic_t live; /* threads of the process not yet past do_exit's accounting */
};

struct task_struct {
	unsigned int flags;
	struct sched_entity se;
	int pid;
	int tgid;
	char comm[16];
	struct signal_struct *signal;
	struct task_struct *group_leader;
	__u64 start_time; /* monotonic ns at the task's start */
};

struct seq_file;

/* What every iterator's program is given: the output its records are written to. */
struct bpf_iter_meta {
	union {
		struct seq_file *seq;
	};
};

/* The context of a task iterator's program (iter/task): task is NULL at the end. */
struct bpf_iter__task {
	union {
		struct bpf_iter_meta *meta;
	};
	union {
		struct task_struct *task;
	};
};

#pragma clang attribute pop

#endif /* __VMLINUX_H__ */

/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * What the sampler shares with userspace: the records it writes (jp_sample, jp_thread) and the
 * descriptions userspace gives it (jp_jvm, jp_java_thread). userspace/src/sampler/wire.rs mirrors
 * each as a #[repr(C)] struct, checked when the crate builds against the skeleton's types, which
 * libbpf-cargo generates from this header's BTF: a field changed here and not there does not
 * build. docs/sampler.md ("Record layout") says what each field holds.
 */
#ifndef JP_SAMPLER_H
#define JP_SAMPLER_H

/* Frames walked per sample, at most (a power of two). */
#define JP_MAX_FRAMES 256

/* Code heaps of one JVM, at most (HotSpot has 1 or 3). */
#define JP_MAX_HEAPS 4

/* jp_sample.flags */
#define JP_SAMPLE_KERNEL 1      /* the sample interrupted the thread in kernel mode */
#define JP_SAMPLE_JVM 2         /* the process is a JVM the walker knows (map jvms) */
#define JP_SAMPLE_JAVA_THREAD 4 /* the thread's JavaThread is known (map java_threads) */
#define JP_SAMPLE_SCANNED 8     /* native code without frame pointers was left by a stack scan */
#define JP_SAMPLE_THREAD_R15 16 /* the JavaThread was not in java_threads: it was found in r15 */
#define JP_SAMPLE_LEAF_UNBUILT 32 /* the sampled frame's pc lay where its frame was not built */

/* jp_sample.stop: why the walk ended (userspace's WalkEnd, userspace/src/sampler/wire.rs). */
enum jp_stop {
	JP_STOP_ENTRY = 1,      /* at the call stub of the thread's first Java call: whole */
	JP_STOP_CHAIN_END = 2,  /* a native frame pointer chain ended (null, or not above) */
	JP_STOP_MAX_FRAMES = 3, /* JP_MAX_FRAMES frames */
	JP_STOP_READ = 4,       /* memory that could not be read */
	JP_STOP_NO_BLOB = 5,    /* a pc in a code heap that is in no code blob */
	JP_STOP_BAD_FRAME = 6,  /* a Java frame whose caller is implausible */
};

/* jp_frame.kind */
#define JP_FRAME_NATIVE 0      /* outside the code cache (id 0) */
#define JP_FRAME_INTERPRETED 1 /* the template interpreter (id: Method*) */
#define JP_FRAME_COMPILED 2    /* an nmethod: compiled Java or a native method's wrapper (id: CodeBlob*) */
#define JP_FRAME_STUB 3        /* any other code blob: stubs, adapters, runtime blobs (id: CodeBlob*) */

/* jp_frame.flags */
#define JP_FRAME_CALLER 1 /* pc is a return address (frames after the first) */
#define JP_FRAME_DEOPT 2  /* a deoptimised frame: pc is its original pc, not the deopt handler */

/* One frame of a walk. */
struct jp_frame {
	__u64 pc;
	__u64 id;     /* Method* or CodeBlob*, by kind */
	__u32 cookie; /* a compiled frame's nmethod compile id */
	__u8 kind;    /* JP_FRAME_* */
	__u8 flags;   /* JP_FRAME_CALLER, JP_FRAME_DEOPT */
	__u16 pad;
};

/* One sample: a header, then nframes frames (only those are written to the ring). */
struct jp_sample {
	__u32 pid;       /* tgid */
	__u32 tid;
	__u32 cpu;
	__u32 flags;     /* JP_SAMPLE_* */
	__u64 time_ns;   /* CLOCK_MONOTONIC */
	__u64 ip;        /* user registers */
	__u64 sp;
	__u64 bp;
	__u64 stack_end; /* the stack pointer of the deepest frame reached */
	__u16 nframes;
	__u8 stop;       /* enum jp_stop, 0 while the walk goes on */
	__u8 pad[5];
	struct jp_frame frames[JP_MAX_FRAMES];
};

/*
 * Per-thread on-CPU time: the value of maps `threads` and `exited`, keyed by tid, and the record
 * the task iterator jp_iter_threads writes for each live thread.
 */
struct jp_thread {
	__u32 pid;
	__u32 exited;   /* 1 once the thread has exited */
	__u64 baseline; /* sum_exec_runtime when the thread was first seen */
	__u64 runtime;  /* sum_exec_runtime at the last update */
	char comm[16];
	__u32 tid;
	__u32 pad;
};

/* Where a field of a HotSpot object is, and how to read it. */
struct jp_field {
	__u16 offset;   /* bytes from the object's start */
	__u8 size;      /* 2, 4 or 8 (signed) */
	__u8 relative;  /* an offset from the object's start rather than an address */
};

/* One code heap. */
struct jp_code_heap {
	__u64 low;          /* its reserved range [low, high) */
	__u64 high;
	__u64 segmap;       /* its segment map, one byte per segment */
	__u64 log2_segment; /* bytes per segment, as a power of two */
};

/*
 * What the walker needs of one JVM (the value of map `jvms`, keyed by tgid), from its
 * VMStructs (userspace/src/hotspot/unwind.rs). All offsets are in bytes. A JavaFrameAnchor is
 * read as three words: _last_Java_sp, _last_Java_pc, _last_Java_fp (userspace checks it).
 */
struct jp_jvm {
	struct jp_code_heap heaps[JP_MAX_HEAPS];
	__u64 interpreter_begin;                 /* the template interpreter's code */
	__u64 interpreter_end;
	__u64 call_stub_return;                  /* StubRoutines::_call_stub_return_address */
	__u64 code_low;         /* the lowest heap's low: every heap lies in [code_low, */
	__u64 code_high;        /* code_high), and nothing else when they are contiguous */
	__u32 nheaps;
	__u16 heap_block;       /* sizeof(HeapBlock): a blob follows its block's header */
	__u16 nmethod_size;     /* sizeof(nmethod), the _header_size of every nmethod */
	__u16 blob_read;        /* bytes of a blob read at once; every field below fits */
	__s16 call_wrapper;     /* the call stub's JavaCallWrapper*, from its fp */
	__u16 wrapper_anchor;   /* JavaCallWrapper::_anchor */
	__u16 thread_anchor;    /* JavaThread::_anchor */
	struct jp_field blob_size;      /* CodeBlob::_size */
	struct jp_field header_size;    /* CodeBlob::_header_size */
	struct jp_field frame_size;     /* CodeBlob::_frame_size (words) */
	struct jp_field frame_complete; /* CodeBlob::_frame_complete_offset (from code begin) */
	struct jp_field code_begin;     /* CodeBlob::_code_begin or _code_offset */
	struct jp_field compile_id;     /* nmethod::_compile_id */
	struct jp_field orig_pc;        /* nmethod::_orig_pc_offset (from a frame's sp) */
	struct jp_field deopt_handler;  /* the deopt handler's address or offset */
	struct jp_field name;           /* CodeBlob::_name */
	/*
	 * How to check that r15 holds the current thread's JavaThread (jp_thread_in_r15): the
	 * vtable pointer of a plain JavaThread (0: never check, java_threads only) and offsets in
	 * Thread and OSThread.
	 */
	__u16 thread_stack_base; /* Thread::_stack_base */
	__u16 thread_stack_size; /* Thread::_stack_size */
	__u16 thread_osthread;   /* Thread::_osthread */
	__u16 osthread_tid;      /* OSThread::_thread_id (4 bytes) */
	__u32 pad;
	__u64 java_thread_vtable;
};

/* A Java thread of a JVM (the value of map `java_threads`, keyed by tid): listed by userspace,
 * or found in r15 by the sampler. */
struct jp_java_thread {
	__u32 pid;         /* its process */
	__u32 pad;
	__u64 thread;      /* its JavaThread* */
	__u64 stack_low;   /* its stack [stack_low, stack_high) */
	__u64 stack_high;
};

#endif /* JP_SAMPLER_H */

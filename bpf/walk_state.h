/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * What the stack walker (unwind.h) works on: its state and per-CPU scratch, the JVMs userspace
 * described, reads of the target's memory, the code cache's heaps and segment map, and the
 * moves from a frame to its caller or to the thread's JavaFrameAnchor.
 */
#ifndef JP_WALK_STATE_H
#define JP_WALK_STATE_H

#include "sampler.h"

/* Bytes of a code blob's header read at once (jp_jvm.blob_read is at most this). */
#define JP_BLOB_READ 512
/* Segment map bytes read at once (a power of two). */
#define JP_SEGMAP_CHUNK 64
/* Segment map hops before giving up: a hop goes back up to 254 segments. */
#define JP_MAX_HOPS 16
/* The largest step from one frame's stack pointer to its caller's. */
#define JP_MAX_FRAME_BYTES (1 << 20)
/* The largest distance from an interpreted frame's sp to its fp. */
#define JP_MAX_INTERPRETER_FRAME (1 << 18)
/* The farthest a stub's frame pointer lies above its sp when the stub has set up a frame. */
#define JP_MAX_STUB_FRAME 4096
/*
 * The farthest r13 lies above sp when it holds the caller's sp (the arguments an adapter or an
 * interpreter entry moved); anything else in r13 is not taken for it.
 */
#define JP_MAX_SENDER_GAP 4096
/* Words above sp scanned for a return address into Java code (jp_scan). */
#define JP_SCAN_WORDS 64
/* Words on top of the stack where a stub without a frame may have its return address. */
#define JP_STUB_WORDS 6
/* Code cache words found by a scan that are checked, at most. */
#define JP_SCAN_TRIES 4
/* Interpreter frame slots, in words below fp (x86_64, JDK 9+; checked by userspace). */
#define JP_INTERPRETER_METHOD 3
#define JP_INTERPRETER_SENDER_SP 1

/* Where the walk is. */
struct jp_walk {
	__u64 pc;
	__u64 sp;
	__u64 fp;
	__u64 bx;        /* the sampled rbx: the Method* at an interpreter method's entry */
	__u64 r13;       /* the sampled r13: the caller's sp in adapters and interpreter entries */
	__u64 ax;        /* the sampled rax: where an adapter keeps the return address a while */
	__u64 anchor_sp; /* the thread's last Java frame, when it has left Java code (0: none) */
	__u64 anchor_pc;
	__u64 anchor_fp;
	__u64 stack_high; /* one past the thread's stack, when known (0: unknown) */
	__u32 leaf;        /* the frame is the sampled one: pc is exact, and may be in a prologue */
	__u32 stop;        /* enum jp_stop, once the walk has ended (0 before) */
	__u32 java_frames; /* Java frames pushed so far */
	__u32 scanned;     /* the stack was scanned for a return into Java code (jp_scan) */
};

/* Per-CPU working memory: the walk, the blob read last, the stack words scanned, and the
 * sample being written. */
struct jp_scratch {
	struct jp_walk w;
	__u8 blob[JP_BLOB_READ];
	__u8 segmap[JP_SEGMAP_CHUNK];
	__u64 scan[JP_SCAN_WORDS];
	struct jp_sample rec;
};

/* What a step needs, passed through bpf_loop. */
struct jp_walk_ctx {
	struct jp_scratch *s;
	struct jp_jvm *jvm; /* NULL for a process that is not a known JVM */
};

/* The JVMs the walker knows, by tgid (userspace fills it once it has read a JVM). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct jp_jvm);
} jvms SEC(".maps");

/*
 * The nmethods the return addresses of earlier walks on this CPU were found in, so that a caller's
 * frame in the same code skips the segment map and the blob's header (jp_known_nmethod): one
 * slot per hash of the pc and the process, the last one found there kept.
 */
#define JP_KNOWN_NMETHODS 1024
struct jp_known_nmethod {
	__u64 pc;          /* the return address */
	__u64 blob;        /* the nmethod it lies in */
	__u32 tgid;        /* the process */
	__u32 compile_id;  /* the nmethod's, when it was found */
	__u32 frame_bytes; /* its fixed frame's size */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, JP_KNOWN_NMETHODS);
	__type(key, __u32);
	__type(value, struct jp_known_nmethod);
} known_nmethods SEC(".maps");

/* Working memory of the walk, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct jp_scratch);
} scratch SEC(".maps");

/*
 * The walk's state, for the current thread: its CPU's scratch and its JVM (NULL if the process
 * is not a JVM the walker knows). False if there is no scratch.
 */
static __always_inline bool jp_walk_ctx(struct jp_walk_ctx *c)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u32 zero = 0;

	c->s = bpf_map_lookup_elem(&scratch, &zero);
	c->jvm = bpf_map_lookup_elem(&jvms, &tgid);
	return c->s != 0;
}

static __always_inline int jp_read(void *dst, __u32 size, __u64 addr)
{
	return bpf_probe_read_user(dst, size, (const void *)addr);
}

static __always_inline __u64 jp_read_word(__u64 addr, bool *ok)
{
	__u64 word = 0;

	if (jp_read(&word, sizeof(word), addr))
		*ok = false;
	return word;
}

/* The code heap holding pc, or -1. */
static __always_inline int jp_heap_of(const struct jp_jvm *jvm, __u64 pc)
{
	for (int i = 0; i < JP_MAX_HEAPS; i++) {
		if (i < jvm->nheaps && pc >= jvm->heaps[i].low && pc < jvm->heaps[i].high)
			return i;
	}
	return -1;
}

/* Whether pc lies in the template interpreter. */
static __always_inline bool jp_in_interpreter(const struct jp_jvm *jvm, __u64 pc)
{
	return pc >= jvm->interpreter_begin && pc < jvm->interpreter_end;
}

/* Whether pc lies in the code cache (between its heaps, if they are not contiguous). */
static __always_inline bool jp_in_code(const struct jp_jvm *jvm, __u64 pc)
{
	return jvm && pc >= jvm->code_low && pc < jvm->code_high;
}

/*
 * The CodeBlob holding pc in heap `h`, through the heap's segment map; 0 if none. The map is read
 * JP_SEGMAP_CHUNK bytes at a time, ending at the segment to look at (or from the map's start):
 * a hop back to the start of a block of fewer segments stays within one read. The bytes before a
 * segment of the committed heap are the map's own, committed from its start.
 */
static __always_inline __u64 jp_find_blob(struct jp_scratch *s, const struct jp_jvm *jvm, int h,
					  __u64 pc)
{
	const struct jp_code_heap *heap = &jvm->heaps[h & (JP_MAX_HEAPS - 1)];
	__u64 shift = heap->log2_segment & 31;
	__u64 segment = (pc - heap->low) >> shift;
	__u8 *map = s->segmap;
	/* The segment of map[0], and one past the last segment read (none yet). */
	__u64 first = 0, end = 0;

	for (int hop = 0; hop < JP_MAX_HOPS; hop++) {
		if (segment < first || segment >= end) {
			first = segment >= JP_SEGMAP_CHUNK ? segment - (JP_SEGMAP_CHUNK - 1) : 0;
			end = first + JP_SEGMAP_CHUNK;
			if (jp_read(map, JP_SEGMAP_CHUNK, heap->segmap + first))
				return 0;
		}
		__u8 step = map[(segment - first) & (JP_SEGMAP_CHUNK - 1)];

		if (step == 0)
			return heap->low + (segment << shift) + jvm->heap_block;
		if (step == 0xFF || segment < step)
			return 0;
		segment -= step;
	}
	return 0;
}

/* The slot of known_nmethods for the return address pc in process tgid. */
static __always_inline __u32 jp_known_slot(__u32 tgid, __u64 pc)
{
	__u32 mixed = (__u32)(pc ^ (pc >> 29)) ^ (tgid * 0x9E3779B1U);

	return (mixed * 0x85EBCA6BU) >> 22;
}

/*
 * The nmethod that holds the return address pc of process tgid, as an earlier walk found it, if
 * it is still there: the nmethod at the same address has the same compile id (HotSpot frees an
 * nmethod only once no frame returns into it, and gives each compilation its own id). Fills
 * blob and compile_id; returns its frame's bytes, or 0 if it is not known.
 */
static __always_inline __u32 jp_known_nmethod(const struct jp_jvm *jvm, __u32 tgid, __u64 pc,
					      __u64 *blob, __u32 *compile_id)
{
	__u32 slot = jp_known_slot(tgid, pc);
	struct jp_known_nmethod *k = bpf_map_lookup_elem(&known_nmethods, &slot);
	__u32 id = 0;

	if (!k || k->pc != pc || k->tgid != tgid || jvm->compile_id.size != 4 ||
	    jvm->compile_id.relative || jp_read(&id, 4, k->blob + jvm->compile_id.offset) ||
	    id != k->compile_id)
		return 0;
	*blob = k->blob;
	*compile_id = id;
	return k->frame_bytes;
}

/* Keeps what jp_known_nmethod finds again: the nmethod of return address pc. */
static __always_inline void jp_remember_nmethod(__u32 tgid, __u64 pc, __u64 blob,
						__u32 compile_id, __u32 frame_bytes)
{
	__u32 slot = jp_known_slot(tgid, pc);
	struct jp_known_nmethod *k = bpf_map_lookup_elem(&known_nmethods, &slot);

	if (!k || compile_id == 0)
		return;
	k->pc = pc;
	k->blob = blob;
	k->tgid = tgid;
	k->compile_id = compile_id;
	k->frame_bytes = frame_bytes;
}

/* A field of the blob in s->blob (read from address `blob`). */
static __always_inline __s64 jp_field(const struct jp_scratch *s, struct jp_field f, __u64 blob)
{
	__u32 at = f.offset;
	__s64 value;

	if (at > JP_BLOB_READ - 8)
		return 0;
	if (f.size == 8)
		value = *(const __s64 *)&s->blob[at];
	else if (f.size == 4)
		value = *(const __s32 *)&s->blob[at];
	else
		value = *(const __s16 *)&s->blob[at];
	return f.relative ? (__s64)blob + value : value;
}

/* Appends a frame; false when the record is full. */
static __always_inline bool jp_push(struct jp_scratch *s, __u64 pc, __u64 id, __u32 cookie,
				    __u8 kind, __u8 flags)
{
	__u32 n = s->rec.nframes;

	if (n >= JP_MAX_FRAMES) {
		s->w.stop = JP_STOP_MAX_FRAMES;
		return false;
	}
	struct jp_frame *f = &s->rec.frames[n & (JP_MAX_FRAMES - 1)];
	f->pc = pc;
	f->id = id;
	f->cookie = cookie;
	f->kind = kind;
	f->flags = flags | (s->w.leaf ? 0 : JP_FRAME_CALLER);
	f->pad = 0;
	s->rec.nframes = n + 1;
	if (kind == JP_FRAME_INTERPRETED || kind == JP_FRAME_COMPILED)
		s->w.java_frames++;
	return true;
}

/* Moves to the caller: pc, sp, fp. Ends the walk (false) if sp does not climb plausibly. */
static __always_inline bool jp_move(struct jp_walk *w, __u64 pc, __u64 sp, __u64 fp)
{
	if (sp <= w->sp || sp - w->sp > JP_MAX_FRAME_BYTES || (sp & 7) || pc == 0 ||
	    (w->stack_high && sp > w->stack_high)) {
		w->stop = JP_STOP_BAD_FRAME;
		return false;
	}
	w->pc = pc;
	w->sp = sp;
	w->fp = fp;
	w->leaf = 0;
	return true;
}

/* Reads a JavaFrameAnchor (sp, pc, fp) into the walk; non-zero if it cannot be read. */
static __always_inline int jp_read_anchor(struct jp_walk *w, __u64 anchor)
{
	__u64 words[3];

	if (jp_read(words, sizeof(words), anchor))
		return -1;
	w->anchor_sp = words[0];
	w->anchor_pc = words[1];
	w->anchor_fp = words[2];
	return 0;
}

/* Goes on from the thread's anchor, once; false if there is none (left) to go to. */
static __always_inline bool jp_take_anchor(struct jp_walk *w)
{
	if (w->anchor_sp == 0 || w->anchor_sp < w->sp)
		return false;
	__u64 pc = w->anchor_pc;
	if (pc == 0) {
		bool ok = true;
		pc = jp_read_word(w->anchor_sp - 8, &ok);
		if (!ok)
			return false;
	}
	w->pc = pc;
	w->sp = w->anchor_sp;
	w->fp = w->anchor_fp;
	w->leaf = 0;
	w->anchor_sp = 0;
	return true;
}

/* Ends the walk with `stop`, unless the thread's anchor leads back into its Java frames. */
static __always_inline long jp_end_or_anchor(struct jp_walk *w, enum jp_stop stop)
{
	if (jp_take_anchor(w))
		return 0;
	w->stop = stop;
	return 1;
}

#endif /* JP_WALK_STATE_H */

/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The stack walker: one frame per step, from the sampled registers to the thread's first Java
 * frame (or the end of its frame-pointer chain). Native code is left through its frame pointer;
 * HotSpot code, when the process is a JVM userspace described (struct jp_jvm), by the kind of
 * its code blob, as HotSpot itself walks (docs/sampler.md, "How frames are unwound"):
 *
 * - interpreted frames through their frame pointer, with the Method* slot;
 * - nmethods and stubs with a fixed frame by CodeBlob::_frame_size, so that compiled code needs
 *   no -XX:+PreserveFramePointer; stubs without one through the frame pointer;
 * - the sampled frame, whose pc can lie in a prologue or an epilogue, by the instructions at pc;
 * - native code that a Java thread runs (JNI, the VM, libc) up to the thread's JavaFrameAnchor,
 *   and the call stub up to the anchor saved in its JavaCallWrapper.
 *
 * Every read goes through bpf_probe_read_user: a bad pointer fails the read and ends the walk.
 */
#ifndef JP_UNWIND_H
#define JP_UNWIND_H

#include "walk_state.h"

/*
 * Whether a compiled frame at pc with stack pointer sp returns into the code cache: checks where
 * a caller's sp may be (r13 holds it only in part of an adapter). 1 if it does; 2 or 3 if it
 * does with sp one or two words higher (the frame pushed arguments for a stub it calls); 0 if
 * not. Reads over s->blob. A global function, checked once by the verifier (see
 * jp_step_native).
 */
__noinline int jp_frame_fits(__u64 pc, __u64 sp)
{
	struct jp_walk_ctx c;

	if (!jp_walk_ctx(&c) || !c.jvm)
		return 0;
	struct jp_scratch *s = c.s;
	const struct jp_jvm *jvm = c.jvm;
	int heap = jp_heap_of(jvm, pc);

	if (heap < 0 || (pc >= jvm->interpreter_begin && pc < jvm->interpreter_end))
		return false;
	__u64 blob = jp_find_blob(jvm, heap, pc);
	__u32 read = jvm->blob_read;
	if (blob == 0 || read > JP_BLOB_READ || jp_read(s->blob, read, blob))
		return false;
	__s64 words = jp_field(s, jvm->frame_size, blob);
	__u64 ra[3];
	if (words <= 0 || words >= JP_MAX_FRAME_BYTES / 8 ||
	    jp_read(ra, sizeof(ra), sp + words * 8 - 8))
		return 0;
	for (int i = 0; i < 3; i++) {
		if (jp_in_code(jvm, ra[i]))
			return i + 1;
	}
	return 0;
}

/*
 * Where a Java thread that runs native code without having left Java code (a leaf call from
 * compiled code: System.nanoTime's clock_gettime, a math routine) comes back to Java: the first
 * word above sp that lies in the code cache, the return address of the call (native code keeps
 * no code cache address in its frames otherwise). Once per walk, before any Java frame.
 */
__noinline int jp_scan(void)
{
	struct jp_walk_ctx c;

	if (!jp_walk_ctx(&c) || !c.jvm)
		return 0;
	struct jp_scratch *s = c.s;
	struct jp_walk *w = &s->w;
	__u64 *words = s->scan;
	__u32 tries = 0;

	if (w->scanned || w->java_frames || !(s->rec.flags & JP_SAMPLE_JAVA_THREAD))
		return false;
	w->scanned = 1;
	if (jp_read(words, sizeof(s->scan), w->sp))
		return false;
	for (__u32 i = 0; i < JP_SCAN_WORDS; i++) {
		if (!jp_in_code(c.jvm, words[i]))
			continue;
		/* A stale return address left by an earlier call may lie above the live one: the
		 * frame it leads to must itself return into the code cache. */
		__u64 sp = w->sp + 8 * i + 8;
		if (jp_frame_fits(words[i], sp) == 1) {
			s->rec.flags |= JP_SAMPLE_SCANNED;
			w->pc = words[i];
			w->sp = sp;
			w->leaf = 0;
			return true;
		}
		if (++tries >= JP_SCAN_TRIES)
			break;
	}
	return false;
}

/* Ends a walk in native code with `stop`, unless the thread's anchor or a scan of the stack
 * leads back into its Java frames. */
static __always_inline long jp_native_end(struct jp_walk_ctx *c, __u32 stop)
{
	if (jp_take_anchor(&c->s->w) || jp_scan())
		return 0;
	c->s->w.stop = stop;
	return 1;
}

/*
 * A frame in native code, left through its frame pointer. A Java thread that runs native code
 * has an anchor: once the chain reaches the code cache, passes the anchor's frame or breaks,
 * the walk goes on from the anchor.
 */
static __always_inline long jp_native(struct jp_walk_ctx *c)
{
	struct jp_scratch *s = c->s;
	struct jp_walk *w = &s->w;
	__u64 fp = w->fp;
	__u64 sp = fp + 16;
	__u64 link[2];
	__u64 method_slot = 0;
	__u32 stop;

	/*
	 * A JVM not registered yet (its first tenths of a second) is walked by frame pointers: keep
	 * the word where an interpreter frame holds its Method*, which names the frame if userspace
	 * finds the pc in the interpreter.
	 */
	if (!c->jvm && fp >= w->sp && !(fp & 7))
		jp_read(&method_slot, sizeof(method_slot), fp - 8 * JP_INTERPRETER_METHOD);
	if (!jp_push(s, w->pc, method_slot, 0, JP_FRAME_NATIVE, 0))
		return 1;
	if (fp == 0 || fp < w->sp) {
		stop = JP_STOP_CHAIN_END;
	} else if ((fp & 7) || jp_read(link, sizeof(link), fp)) {
		stop = JP_STOP_READ;
	} else if (link[1] == 0) {
		stop = JP_STOP_CHAIN_END;
	} else if (jp_in_code(c->jvm, link[1])) {
		/* Back in the code cache: the caller's fp is whatever Java code kept in rbp. */
		if (jp_take_anchor(w) || jp_move(w, link[1], sp, link[0]))
			return 0;
		stop = JP_STOP_BAD_FRAME;
	} else if (link[0] <= fp) {
		stop = JP_STOP_CHAIN_END;
	} else if (w->anchor_sp && sp > w->anchor_sp) {
		stop = JP_STOP_BAD_FRAME;
	} else if (jp_move(w, link[1], sp, link[0])) {
		return 0;
	} else {
		stop = JP_STOP_BAD_FRAME;
	}
	return jp_native_end(c, stop);
}

/*
 * The caller's sp when the sampled pc is where HotSpot passes it in r13 (an adapter, an
 * interpreter entry) and the return address is on top of the stack: r13 if plausible, else just
 * above the return address.
 */
static __always_inline __u64 jp_sender_sp(const struct jp_walk *w)
{
	if (w->r13 > w->sp + 8 && w->r13 - w->sp <= JP_MAX_SENDER_GAP && !(w->r13 & 7))
		return w->r13;
	return w->sp + 8;
}

/* An interpreted frame: Method* and caller from the slots around its frame pointer. */
static __always_inline long jp_interpreted(struct jp_walk_ctx *c)
{
	struct jp_scratch *s = c->s;
	struct jp_walk *w = &s->w;
	__u64 fp = w->fp;
	/* fp-3 words: Method*, fp-1: sender sp, fp: caller's fp, fp+1: return address. */
	__u64 slots[5];

	if (fp >= w->sp && fp - w->sp < JP_MAX_INTERPRETER_FRAME && !(fp & 7) &&
	    jp_read(slots, sizeof(slots), fp - 8 * JP_INTERPRETER_METHOD) == 0 &&
	    slots[2] > fp && jp_in_code(c->jvm, slots[4])) {
		if (!jp_push(s, w->pc, slots[0], 0, JP_FRAME_INTERPRETED, 0))
			return 1;
		return jp_move(w, slots[4], slots[2], slots[3]) ? 0 : 1;
	}
	/*
	 * The sampled frame, in a method's entry before its frame is built: the Method* is in rbx,
	 * the return address still on top of the stack, and the caller's sp in r13. Or returning,
	 * its frame removed: jmp *r13 to the caller, whose sp is sp.
	 */
	if (w->leaf) {
		bool ok = true;
		__u64 ra = jp_read_word(w->sp, &ok);
		__u8 op[3];

		if (jp_read(op, sizeof(op), w->pc) == 0 && op[0] == 0x41 && op[1] == 0xFF &&
		    op[2] == 0xE5 && jp_in_code(c->jvm, w->r13)) {
			w->pc = w->r13;
			w->leaf = 0;
			return 0;
		}
		if (ok && jp_in_code(c->jvm, ra)) {
			if (!jp_push(s, w->pc, w->bx, 0, JP_FRAME_INTERPRETED, 0))
				return 1;
			return jp_move(w, ra, jp_sender_sp(w), fp) ? 0 : 1;
		}
	}
	/* A frame that cannot be unwound still names where the thread was. */
	jp_push(s, w->pc, 0, 0, JP_FRAME_INTERPRETED, 0);
	return jp_end_or_anchor(w, JP_STOP_BAD_FRAME);
}

/*
 * Where the caller of the sampled frame is, when the frame's pc lies where its frame is not (or
 * no longer) built: in an nmethod's prologue, before its frame is complete, or in an epilogue
 * after the frame is popped, recognised by its instructions; in a stub without a fixed frame.
 * Each guess is checked: the return address it finds must lie in the code cache (or, for a stub,
 * be non-zero), and the saved fp it finds must be the fp the frame still has. Returns the number
 * of bytes above sp where the return address is, with rbp saved just below it when `saved_fp`
 * is set; -1 to unwind the frame normally.
 */
static __always_inline int jp_leaf_guess(struct jp_walk_ctx *c, __u64 code_begin, __s64 complete,
					 __u32 frame_bytes, bool nmethod, bool *saved_fp)
{
	struct jp_walk *w = &c->s->w;
	__u8 b[16];
	__u64 top[2];
	int guess = -1;

	*saved_fp = false;
	/* b[0] is the byte before pc. */
	if (jp_read(b, sizeof(b), w->pc - 1) || jp_read(top, sizeof(top), w->sp))
		return -1;
	if (b[1] == 0xC3 || (b[1] == 0x49 && b[2] == 0x3B && (b[3] == 0xA7 || b[3] == 0x67)) ||
	    (b[1] == 0x0F && (b[2] == 0x87 || b[2] == 0x85) && b[7] == 0xC3) ||
	    (b[0] == 0x5D && b[1] == 0xE9) ||
	    (b[1] == 0x49 && b[2] == 0x81 && b[3] == 0x7F && b[9] == 0x0F && b[10] == 0x85) ||
	    (b[1] == 0x89 && b[2] == 0x84 && b[3] == 0x24)) {
		/* ret; the return poll after `pop rbp` (cmp rsp,[r15+disp]; ja), or a native
		 * wrapper's pending exception check after `leave` (cmpq $0,[r15+disp8]; jne); jmp
		 * after `pop rbp`; the stack bang that starts a frame (mov [rsp-disp32],eax). */
		guess = 0;
	} else if (b[1] == 0x5D) {
		/* pop rbp: the frame is gone but for the saved rbp. */
		guess = 8;
	} else if (!nmethod) {
		/* A stub: push rbp or mov rbp,rsp of its prologue; without a fixed frame, nothing
		 * pushed (a return address on top), else a frame pointer set up just above sp. */
		if (b[1] == 0x55)
			guess = 0;
		else if (b[0] == 0x55 && b[1] == 0x48 &&
			 ((b[2] == 0x89 && b[3] == 0xE5) || (b[2] == 0x8B && b[3] == 0xEC)))
			guess = 8;
	} else if (!frame_bytes) {
		/* A method handle intrinsic: no frame, it jumps to its target. */
		guess = 0;
	} else if (b[1] == 0x48 && (b[2] == 0x83 || b[2] == 0x81) && b[3] == 0xEC) {
		/* sub rsp,imm of a prologue: after push rbp, or with nothing pushed yet. */
		guess = b[0] == 0x55 ? 8 : 0;
	} else if (b[1] == 0x48 && b[2] == 0x89 && (b[3] == 0x6C || b[3] == 0xAC) && b[4] == 0x24) {
		/* mov [rsp+disp],rbp of a prologue: the frame is allocated, rbp not saved yet. */
		guess = frame_bytes - 8;
	} else if (complete < 0 || w->pc - code_begin < (__u64)complete) {
		/* Before the frame is complete: built (entry barrier), rbp pushed, or nothing yet. */
		__u64 built[2];
		if (jp_read(built, sizeof(built), w->sp + frame_bytes - 16) == 0 &&
		    built[0] == w->fp && jp_in_code(c->jvm, built[1]))
			guess = -1;
		else if ((top[0] == w->fp || w->fp == w->sp) && jp_in_code(c->jvm, top[1]))
			guess = 8;
		else if (jp_in_code(c->jvm, top[0]))
			guess = 0;
	}
	/* Java code returns into the code cache only. */
	if (guess >= 0 && guess <= 8 && nmethod && !jp_in_code(c->jvm, guess ? top[1] : top[0]))
		guess = -1;
	*saved_fp = guess == 8;
	return guess;
}

/*
 * Where the return address of a stub without a fixed frame is: -1 through its frame pointer,
 * which it set up if it lies just above sp and leads to a frame that fits (maybe past the entry
 * barrier's -1, see jp_code_blob); else the offset from sp of the first of the words on top of
 * the stack that leads to a frame that fits (a stub that calls the VM without a frame, or pushed
 * registers, or aligned the stack; *args are the bytes of arguments its caller pushed), or
 * returns into the interpreter from one of the first two; else -1 through the frame pointer
 * again, for a stub that native code called; -2 if nothing is plausible. Reads over s->blob.
 */
static __always_inline int jp_frameless_stub(struct jp_walk_ctx *c, __u64 *args)
{
	struct jp_walk *w = &c->s->w;
	const struct jp_jvm *jvm = c->jvm;
	__u64 words[JP_STUB_WORDS];
	bool fp_ok = w->fp >= w->sp && !(w->fp & 7);

	*args = 0;
	if (fp_ok && w->fp - w->sp < JP_MAX_STUB_FRAME && jp_read(words, 24, w->fp) == 0) {
		bool cookie = words[1] == ~0ULL;
		__u64 ra = cookie ? words[2] : words[1];
		if (jp_in_code(jvm, ra) && (jp_in_interpreter(jvm, ra) ||
					    jp_frame_fits(ra, w->fp + (cookie ? 24 : 16)) == 1))
			return -1;
	}
	if (jp_read(words, sizeof(words), w->sp))
		return fp_ok ? -1 : -2;
	for (int i = 0; i < JP_STUB_WORDS; i++) {
		if (!jp_in_code(jvm, words[i]))
			continue;
		if (i < 2 && jp_in_interpreter(jvm, words[i]))
			return 8 * i;
		int fits = jp_frame_fits(words[i], w->sp + 8 * i + 8);
		if (fits > 0) {
			*args = 8 * (fits - 1);
			return 8 * i;
		}
	}
	if (jp_in_code(jvm, words[0]))
		return 0;
	return fp_ok ? -1 : -2;
}

/*
 * The sampled frame of an nmethod or a stub with a fixed frame whose caller, found the usual
 * way, is not in the code cache (a stub saving registers before its frame is complete):
 * the first return address into it of the frame pointer's, the top of the stack's and the word
 * above it. Fills link (caller's fp, return address) and ra_at; false if none is.
 */
static __always_inline bool jp_leaf_fallback(struct jp_walk_ctx *c, __u32 frame_bytes,
					     __u64 *link, __u64 *ra_at)
{
	struct jp_walk *w = &c->s->w;
	__u64 top[2];

	if (w->fp >= w->sp && w->fp - w->sp <= frame_bytes && !(w->fp & 7) &&
	    jp_read(link, 16, w->fp) == 0 && jp_in_code(c->jvm, link[1])) {
		*ra_at = w->fp + 8;
		return true;
	}
	if (jp_read(top, sizeof(top), w->sp))
		return false;
	if (jp_in_code(c->jvm, top[0])) {
		link[0] = w->fp;
		link[1] = top[0];
		*ra_at = w->sp;
		return true;
	}
	if (jp_in_code(c->jvm, top[1])) {
		link[0] = top[0];
		link[1] = top[1];
		*ra_at = w->sp + 8;
		return true;
	}
	return false;
}

/* Whether the blob in s->blob is the i2c/c2i adapters' ("I2C/C2I adapters"). */
static __always_inline bool jp_is_adapter(const struct jp_scratch *s, const struct jp_jvm *jvm,
					  __u64 blob)
{
	__u64 name = 0;

	jp_read(&name, sizeof(name), (__u64)jp_field(s, jvm->name, blob));
	/* "I2C/C2I " as a little-endian word. */
	return name == 0x204932432F433249ULL;
}

/* A frame in a code blob other than the interpreter: an nmethod or a stub. */
static __always_inline long jp_code_blob(struct jp_walk_ctx *c, int heap)
{
	struct jp_scratch *s = c->s;
	struct jp_walk *w = &s->w;
	const struct jp_jvm *jvm = c->jvm;
	__u64 blob = jp_find_blob(jvm, heap, w->pc);
	__u32 read = jvm->blob_read;
	bool ok = true;

	if (blob == 0)
		return jp_end_or_anchor(w, JP_STOP_NO_BLOB);
	if (read > JP_BLOB_READ)
		read = JP_BLOB_READ;
	if (jp_read(s->blob, read, blob))
		return jp_end_or_anchor(w, JP_STOP_READ);
	__s64 size = jp_field(s, jvm->blob_size, blob);
	if (size <= 0 || w->pc >= blob + size)
		return jp_end_or_anchor(w, JP_STOP_NO_BLOB);
	bool nmethod = jp_field(s, jvm->header_size, blob) == jvm->nmethod_size;
	__s64 words = jp_field(s, jvm->frame_size, blob);
	__u32 frame_bytes = words > 0 && words < JP_MAX_FRAME_BYTES / 8 ? words * 8 : 0;
	__u64 pc = w->pc;
	__u8 flags = 0;

	if (nmethod) {
		/* A deoptimised frame returns to the deopt handler; its pc is kept in the frame. */
		if (!w->leaf && (__u64)jp_field(s, jvm->deopt_handler, blob) == pc) {
			__u64 orig = jp_read_word(w->sp + jp_field(s, jvm->orig_pc, blob), &ok);
			if (ok && orig > blob && orig < blob + size) {
				pc = orig;
				flags = JP_FRAME_DEOPT;
			}
		}
		if (!jp_push(s, pc, blob, jp_field(s, jvm->compile_id, blob), JP_FRAME_COMPILED,
			     flags))
			return 1;
	} else {
		if (!jp_push(s, pc, blob, 0, JP_FRAME_STUB, 0))
			return 1;
		/* The call stub: the first Java frame of a call from the VM ends here. */
		if (pc == jvm->call_stub_return) {
			__u64 wrapper = jp_read_word(w->fp + jvm->call_wrapper, &ok);
			/* The frame that called into the VM before this call, if any. */
			if (!ok || jp_read_anchor(w, wrapper + jvm->wrapper_anchor)) {
				w->stop = JP_STOP_READ;
				return 1;
			}
			return jp_end_or_anchor(w, JP_STOP_ENTRY);
		}
	}

	/*
	 * The i2c/c2i adapters have no frame: the return address is on top of the stack, or in
	 * rax while the adapter moves it, and the caller's sp in r13.
	 */
	if (w->leaf && !nmethod && !frame_bytes && jp_is_adapter(s, jvm, blob)) {
		__u64 ra = jp_read_word(w->sp, &ok);
		if (!ok || !jp_in_code(jvm, ra))
			ra = w->ax;
		__u64 sp = jp_sender_sp(w);
		if (sp != w->sp + 8 && jp_frame_fits(ra, sp) != 1)
			sp = w->sp + 8;
		if (jp_in_code(jvm, ra) && jp_move(w, ra, sp, w->fp))
			return 0;
		return jp_end_or_anchor(w, JP_STOP_BAD_FRAME);
	}

	__u64 ra_at;
	bool saved_fp = false;
	int guess = w->leaf ? jp_leaf_guess(c, (__u64)jp_field(s, jvm->code_begin, blob),
					    jp_field(s, jvm->frame_complete, blob), frame_bytes,
					    nmethod, &saved_fp)
			    : -1;
	bool by_fp = false;
	__u64 args = 0;
	if (guess >= 0) {
		ra_at = w->sp + guess;
	} else if (frame_bytes) {
		ra_at = w->sp + frame_bytes - 8;
		saved_fp = true;
	} else {
		/* No fixed frame: through the frame pointer the stub set up, else the return
		 * address on top of the stack (or one word above, after an alignment). */
		int at = jp_frameless_stub(c, &args);
		if (at == -2)
			return jp_end_or_anchor(w, JP_STOP_BAD_FRAME);
		if (at < 0) {
			ra_at = w->fp + 8;
			saved_fp = true;
			by_fp = true;
		} else {
			ra_at = w->sp + at;
		}
	}
	/* The caller's fp, then the return address. */
	__u64 link[2] = {w->fp, 0};
	if (saved_fp ? jp_read(link, 16, ra_at - 8) : jp_read(&link[1], 8, ra_at))
		return jp_end_or_anchor(w, JP_STOP_READ);
	/* The nmethod entry barrier stub pushes a word (-1) before its frame (JDK 21+). */
	if (by_fp && link[1] == ~0ULL) {
		ra_at += 8;
		if (jp_read(&link[1], 8, ra_at))
			return jp_end_or_anchor(w, JP_STOP_READ);
	}
	/* Java code, and stubs with a fixed frame, return into the code cache only. */
	if ((nmethod || frame_bytes) && !jp_in_code(jvm, link[1]) &&
	    !(w->leaf && jp_leaf_fallback(c, frame_bytes, link, &ra_at)))
		return jp_end_or_anchor(w, JP_STOP_BAD_FRAME);
	if (!jp_move(w, link[1], ra_at + 8 + args, link[0]))
		return jp_end_or_anchor(w, JP_STOP_BAD_FRAME);
	return 0;
}

/*
 * One step by the kind of frame. These are global functions: the verifier checks each once, on
 * its own, rather than every combination of their paths with their callers'. They find the
 * walk's state again from the maps, since only scalars can be passed to them.
 */
__noinline int jp_step_native(void)
{
	struct jp_walk_ctx c;

	return jp_walk_ctx(&c) ? jp_native(&c) : 1;
}

__noinline int jp_step_interpreted(void)
{
	struct jp_walk_ctx c;

	return jp_walk_ctx(&c) && c.jvm ? jp_interpreted(&c) : 1;
}

__noinline int jp_step_code_blob(__u32 heap)
{
	struct jp_walk_ctx c;

	return jp_walk_ctx(&c) && c.jvm ? jp_code_blob(&c, heap & (JP_MAX_HEAPS - 1)) : 1;
}

/* One step of the walk (a bpf_loop callback): 0 to go on, 1 once it has ended. */
static long jp_walk_step(__u64 i, struct jp_walk_ctx *c)
{
	struct jp_scratch *s = c->s;
	struct jp_jvm *jvm = c->jvm;

	int heap = jvm ? jp_heap_of(jvm, s->w.pc) : -1;
	int end;

	if (s->w.stop)
		return 1;
	if (heap < 0)
		end = jp_step_native();
	else if (s->w.pc >= jvm->interpreter_begin && s->w.pc < jvm->interpreter_end)
		end = jp_step_interpreted();
	else
		end = jp_step_code_blob(heap);
	return end ? 1 : 0;
}

#endif /* JP_UNWIND_H */

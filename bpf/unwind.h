/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The stack walker: one frame per step, from the sampled registers to the thread's first Java
 * frame (or the end of its frame-pointer chain). Native code is left through its frame pointer;
 * HotSpot code, when the process is a JVM userspace described (struct jp_jvm), by the kind of
 * its code blob, as HotSpot itself walks (docs/sampler.md, "How frames are unwound"):
 *
 * - interpreted frames through their frame pointer, with the Method* slot;
 * - nmethods and stubs with a fixed frame by CodeBlob::_frame_size, so that compiled code needs
 *   no -XX:+PreserveFramePointer; stubs without one through the frame pointer; a caller's frame
 *   in an nmethod this CPU met before by what it kept of it (jp_known_nmethod);
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
	__u64 blob = jp_find_blob(s, jvm, heap, pc);
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
static __always_inline long jp_native_end(struct jp_walk_ctx *c, enum jp_stop stop)
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
	enum jp_stop stop;

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

/* jmp r13 (41 FF E5), `op` holding the bytes at pc: an interpreted method's return
 * (TemplateTable::_return), once InterpreterMacroAssembler::remove_activation has removed its
 * frame and left the return address in r13 (rbcp). */
static __always_inline bool jp_at_interpreter_return(const __u8 *op)
{
	return op[0] == 0x41 && op[1] == 0xFF && op[2] == 0xE5;
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

		if (jp_read(op, sizeof(op), w->pc) == 0 && jp_at_interpreter_return(op) &&
		    jp_in_code(c->jvm, w->r13)) {
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
 * The machine-code patterns that tell where the sampled frame's return address is when its pc
 * lies where the frame is not (or no longer) built (x86_64, as HotSpot's assemblers emit them;
 * docs/sampler.md, "How frames are unwound"). Each reads `b`, the bytes from pc - 1: b[0] is the
 * byte before pc, b[1] the first of the instruction at pc.
 */

/* ret (C3): the last instruction of an epilogue, C2's (x86_64.ad, MachEpilogNode), C1's
 * (LIR_Assembler::return_op), a native wrapper's or a stub's: the frame is gone. */
static __always_inline bool jp_at_ret(const __u8 *b)
{
	return b[1] == 0xC3;
}

/* cmp rsp,[r15+disp] (49 3B A7 disp32, or 49 3B 67 disp8): the return poll that C1 and C2 emit
 * after `pop rbp` (MacroAssembler::safepoint_poll with at_return, against the thread's polling
 * word): the frame is gone. */
static __always_inline bool jp_at_return_poll(const __u8 *b)
{
	return b[1] == 0x49 && b[2] == 0x3B && (b[3] == 0xA7 || b[3] == 0x67);
}

/* ja or jne rel32, then ret (0F 87|85 rel32, C3): the return poll's branch, or the branch of a
 * native wrapper's pending exception check (SharedRuntime::generate_native_wrapper, after
 * `leave`): the frame is gone. */
static __always_inline bool jp_at_branch_before_ret(const __u8 *b)
{
	return b[1] == 0x0F && (b[2] == 0x87 || b[2] == 0x85) && b[7] == 0xC3;
}

/* jmp rel32 just after pop rbp (5D, E9 rel32): a jump out of compiled code once its frame is
 * popped, as C2 leaves for the rethrow stub (x86_64.ad, RethrowException): the frame is gone. */
static __always_inline bool jp_at_jmp_after_pop_rbp(const __u8 *b)
{
	return b[0] == 0x5D && b[1] == 0xE9;
}

/* cmpq [r15+disp8],imm32 then jne (49 81 7F disp8 imm32, 0F 85): a native wrapper's pending
 * exception check after `leave` (SharedRuntime::generate_native_wrapper): the frame is gone. */
static __always_inline bool jp_at_pending_exception_check(const __u8 *b)
{
	return b[1] == 0x49 && b[2] == 0x81 && b[3] == 0x7F && b[9] == 0x0F && b[10] == 0x85;
}

/* mov [rsp-disp32],eax (89 84 24 disp32): the stack bang that starts a frame
 * (MacroAssembler::bang_stack_with_offset, in C1's, C2's and the native wrappers' entries):
 * nothing is pushed yet. */
static __always_inline bool jp_at_stack_bang(const __u8 *b)
{
	return b[1] == 0x89 && b[2] == 0x84 && b[3] == 0x24;
}

/* pop rbp (5D): the end of an epilogue (C2's MachEpilogNode, C1's remove_frame): only the
 * saved rbp is left of the frame. */
static __always_inline bool jp_at_pop_rbp(const __u8 *b)
{
	return b[1] == 0x5D;
}

/* push rbp (55): the first instruction of a stub's frame (MacroAssembler::enter): nothing is
 * pushed yet. */
static __always_inline bool jp_at_push_rbp(const __u8 *b)
{
	return b[1] == 0x55;
}

/* mov rbp,rsp just after push rbp (55, then 48 89 E5 or 48 8B EC): the second instruction of a
 * stub's frame (MacroAssembler::enter): rbp is pushed. */
static __always_inline bool jp_at_mov_rbp_rsp_after_push(const __u8 *b)
{
	return b[0] == 0x55 && b[1] == 0x48 &&
	       ((b[2] == 0x89 && b[3] == 0xE5) || (b[2] == 0x8B && b[3] == 0xEC));
}

/* sub rsp,imm (48 83 EC imm8, or 48 81 EC imm32): a prologue allocating its frame, C1's
 * (MacroAssembler::build_frame) after push rbp, or C2's without a stack bang
 * (MacroAssembler::verified_entry) with nothing pushed; `b[0] == 0x55` tells them apart. */
static __always_inline bool jp_at_sub_rsp(const __u8 *b)
{
	return b[1] == 0x48 && (b[2] == 0x83 || b[2] == 0x81) && b[3] == 0xEC;
}

/* mov [rsp+disp],rbp (48 89 6C 24 disp8, or 48 89 AC 24 disp32): C2's prologue without a stack
 * bang (MacroAssembler::verified_entry), its frame allocated but rbp not saved yet. */
static __always_inline bool jp_at_save_rbp_in_frame(const __u8 *b)
{
	return b[1] == 0x48 && b[2] == 0x89 && (b[3] == 0x6C || b[3] == 0xAC) && b[4] == 0x24;
}

/* Where the sampled frame's return address is. */
enum jp_leaf_at {
	/* The frame is built: by its frame size, as any frame. */
	JP_LEAF_BUILT,
	/* Gone or not begun: on top of the stack; the caller's fp is still in rbp. */
	JP_LEAF_RA_ON_TOP,
	/* Only the saved rbp is left, on top of the stack: the return address one word up. */
	JP_LEAF_RBP_ON_TOP,
	/* Allocated, rbp not saved yet: at sp + frame size - 1 word; the caller's fp in rbp. */
	JP_LEAF_RBP_UNSAVED,
};

/*
 * Where the caller of the sampled frame is, when the frame's pc lies where its frame is not (or
 * no longer) built: in an nmethod's prologue, before its frame is complete, or in an epilogue
 * after the frame is popped, recognised by the patterns above; in a stub without a fixed frame.
 * Each guess is checked: the return address it finds must lie in the code cache (or, for a stub,
 * be non-zero), and the saved fp it finds must be the fp the frame still has.
 */
static __always_inline enum jp_leaf_at jp_leaf_guess(struct jp_walk_ctx *c, __u64 code_begin,
						     __s64 complete, __u32 frame_bytes,
						     bool nmethod)
{
	struct jp_walk *w = &c->s->w;
	__u8 b[16];
	__u64 top[2];
	enum jp_leaf_at at = JP_LEAF_BUILT;

	if (jp_read(b, sizeof(b), w->pc - 1) || jp_read(top, sizeof(top), w->sp))
		return JP_LEAF_BUILT;
	if (jp_at_ret(b) || jp_at_return_poll(b) || jp_at_branch_before_ret(b) ||
	    jp_at_jmp_after_pop_rbp(b) || jp_at_pending_exception_check(b) || jp_at_stack_bang(b)) {
		at = JP_LEAF_RA_ON_TOP;
	} else if (jp_at_pop_rbp(b)) {
		at = JP_LEAF_RBP_ON_TOP;
	} else if (!nmethod) {
		/* A stub: without a fixed frame, nothing pushed yet or a frame pointer being set up
		 * just above sp. */
		if (jp_at_push_rbp(b))
			at = JP_LEAF_RA_ON_TOP;
		else if (jp_at_mov_rbp_rsp_after_push(b))
			at = JP_LEAF_RBP_ON_TOP;
	} else if (!frame_bytes) {
		/* A method handle intrinsic (MethodHandles::generate_method_handle_dispatch): no
		 * frame, it jumps to its target. */
		at = JP_LEAF_RA_ON_TOP;
	} else if (jp_at_sub_rsp(b)) {
		at = b[0] == 0x55 ? JP_LEAF_RBP_ON_TOP : JP_LEAF_RA_ON_TOP;
	} else if (jp_at_save_rbp_in_frame(b)) {
		at = JP_LEAF_RBP_UNSAVED;
	} else if (complete < 0 || w->pc - code_begin < (__u64)complete) {
		/* Before the frame is complete (the nmethod entry barrier of JDK 21+): built, rbp
		 * pushed, or nothing yet, the first whose return address lies in the code cache. */
		__u64 built[2];
		if (jp_read(built, sizeof(built), w->sp + frame_bytes - 16) == 0 &&
		    built[0] == w->fp && jp_in_code(c->jvm, built[1]))
			at = JP_LEAF_BUILT;
		else if ((top[0] == w->fp || w->fp == w->sp) && jp_in_code(c->jvm, top[1]))
			at = JP_LEAF_RBP_ON_TOP;
		else if (jp_in_code(c->jvm, top[0]))
			at = JP_LEAF_RA_ON_TOP;
	}
	/* Java code returns into the code cache only. */
	if (nmethod && ((at == JP_LEAF_RA_ON_TOP && !jp_in_code(c->jvm, top[0])) ||
			(at == JP_LEAF_RBP_ON_TOP && !jp_in_code(c->jvm, top[1]))))
		at = JP_LEAF_BUILT;
	return at;
}

/* Where the return address of a stub without a fixed frame is. */
enum jp_stub_at {
	/* Through the frame pointer the stub set up: at fp + 1 word. */
	JP_STUB_BY_FP,
	/* In one of the words on top of the stack, at the offset given. */
	JP_STUB_ON_STACK,
	/* Nowhere plausible: the walk ends here. */
	JP_STUB_LOST,
};

/*
 * Where the return address of a stub without a fixed frame is: through its frame pointer, which
 * it set up if it lies just above sp and leads to a frame that fits (maybe past the entry
 * barrier's -1, see jp_code_blob); else on the stack, at the first of the words on top of it
 * that leads to a frame that fits (a stub that calls the VM without a frame, or pushed
 * registers, or aligned the stack; *args are the bytes of arguments its caller pushed), or
 * returns into the interpreter from one of the first two, *offset bytes above sp; else through
 * the frame pointer again, for a stub that native code called. Reads over s->blob.
 */
static __always_inline enum jp_stub_at jp_frameless_stub(struct jp_walk_ctx *c, __u64 *offset,
							 __u64 *args)
{
	struct jp_walk *w = &c->s->w;
	const struct jp_jvm *jvm = c->jvm;
	__u64 words[JP_STUB_WORDS];
	bool fp_ok = w->fp >= w->sp && !(w->fp & 7);

	*offset = 0;
	*args = 0;
	if (fp_ok && w->fp - w->sp < JP_MAX_STUB_FRAME && jp_read(words, 24, w->fp) == 0) {
		bool cookie = words[1] == ~0ULL;
		__u64 ra = cookie ? words[2] : words[1];
		if (jp_in_code(jvm, ra) && (jp_in_interpreter(jvm, ra) ||
					    jp_frame_fits(ra, w->fp + (cookie ? 24 : 16)) == 1))
			return JP_STUB_BY_FP;
	}
	if (jp_read(words, sizeof(words), w->sp))
		return fp_ok ? JP_STUB_BY_FP : JP_STUB_LOST;
	for (int i = 0; i < JP_STUB_WORDS; i++) {
		if (!jp_in_code(jvm, words[i]))
			continue;
		if (i < 2 && jp_in_interpreter(jvm, words[i])) {
			*offset = 8 * i;
			return JP_STUB_ON_STACK;
		}
		int fits = jp_frame_fits(words[i], w->sp + 8 * i + 8);
		if (fits > 0) {
			*offset = 8 * i;
			*args = 8 * (fits - 1);
			return JP_STUB_ON_STACK;
		}
	}
	if (jp_in_code(jvm, words[0]))
		return JP_STUB_ON_STACK;
	return fp_ok ? JP_STUB_BY_FP : JP_STUB_LOST;
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

/*
 * Goes from a frame in a code blob to its caller, whose return address is at ra_at: with the
 * caller's fp saved below it if saved_fp, else the fp kept; args words of arguments pushed
 * above it. fixed: the blob is Java code or has a fixed frame, so it returns into the code
 * cache only.
 */
static __always_inline long jp_blob_caller(struct jp_walk_ctx *c, __u64 ra_at, bool saved_fp,
					   bool by_fp, __u64 args, bool fixed, __u32 frame_bytes)
{
	struct jp_walk *w = &c->s->w;
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
	if (fixed && !jp_in_code(c->jvm, link[1]) &&
	    !(w->leaf && jp_leaf_fallback(c, frame_bytes, link, &ra_at)))
		return jp_end_or_anchor(w, JP_STOP_BAD_FRAME);
	if (!jp_move(w, link[1], ra_at + 8 + args, link[0]))
		return jp_end_or_anchor(w, JP_STOP_BAD_FRAME);
	return 0;
}

/* A frame in a code blob other than the interpreter: an nmethod or a stub. */
static __always_inline long jp_code_blob(struct jp_walk_ctx *c, int heap)
{
	struct jp_scratch *s = c->s;
	struct jp_walk *w = &s->w;
	const struct jp_jvm *jvm = c->jvm;
	__u32 tgid = s->rec.pid;
	__u32 known_id = 0;
	__u64 blob = 0;

	/* A caller's frame in an nmethod met before: its frame's size is known. */
	if (!w->leaf) {
		__u32 known_bytes = jp_known_nmethod(jvm, tgid, w->pc, &blob, &known_id);
		if (known_bytes) {
			if (!jp_push(s, w->pc, blob, known_id, JP_FRAME_COMPILED, 0))
				return 1;
			return jp_blob_caller(c, w->sp + known_bytes - 8, true, false, 0, true,
					      known_bytes);
		}
	}
	blob = jp_find_blob(s, jvm, heap, w->pc);
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
		bool at_deopt = (__u64)jp_field(s, jvm->deopt_handler, blob) == pc;
		if (!w->leaf && at_deopt) {
			__u64 orig = jp_read_word(w->sp + jp_field(s, jvm->orig_pc, blob), &ok);
			if (ok && orig > blob && orig < blob + size) {
				pc = orig;
				flags = JP_FRAME_DEOPT;
			}
		}
		__u32 compile_id = jp_field(s, jvm->compile_id, blob);
		if (!jp_push(s, pc, blob, compile_id, JP_FRAME_COMPILED, flags))
			return 1;
		if (!w->leaf && !at_deopt && frame_bytes)
			jp_remember_nmethod(tgid, pc, blob, compile_id, frame_bytes);
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
	enum jp_leaf_at leaf = w->leaf ? jp_leaf_guess(c, (__u64)jp_field(s, jvm->code_begin, blob),
						       jp_field(s, jvm->frame_complete, blob),
						       frame_bytes, nmethod)
				       : JP_LEAF_BUILT;
	if (leaf != JP_LEAF_BUILT)
		s->rec.flags |= JP_SAMPLE_LEAF_UNBUILT;
	bool by_fp = false;
	__u64 args = 0;
	if (leaf == JP_LEAF_RA_ON_TOP) {
		ra_at = w->sp;
	} else if (leaf == JP_LEAF_RBP_ON_TOP) {
		ra_at = w->sp + 8;
		saved_fp = true;
	} else if (leaf == JP_LEAF_RBP_UNSAVED) {
		ra_at = w->sp + frame_bytes - 8;
	} else if (frame_bytes) {
		ra_at = w->sp + frame_bytes - 8;
		saved_fp = true;
	} else {
		/* No fixed frame: through the frame pointer the stub set up, else the return
		 * address on top of the stack (or one word above, after an alignment). */
		__u64 offset;
		enum jp_stub_at at = jp_frameless_stub(c, &offset, &args);
		if (at == JP_STUB_LOST)
			return jp_end_or_anchor(w, JP_STOP_BAD_FRAME);
		if (at == JP_STUB_BY_FP) {
			ra_at = w->fp + 8;
			saved_fp = true;
			by_fp = true;
		} else {
			ra_at = w->sp + offset;
		}
	}
	/* Java code, and stubs with a fixed frame, return into the code cache only. */
	return jp_blob_caller(c, ra_at, saved_fp, by_fp, args, nmethod || frame_bytes, frame_bytes);
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

//! Walking a thread's Java frames the way HotSpot does, from a known frame such as the thread's
//! `JavaFrameAnchor`: an interpreted frame keeps its Method*, bcp and sender's sp at fixed slots
//! below its frame pointer; a compiled frame (or a stub with a fixed frame) is stepped over with
//! `CodeBlob::_frame_size`, so no -XX:+PreserveFramePointer is needed; a blob without a fixed
//! frame (the call stub) is left through its saved frame pointer. Every pc reached from an
//! anchor is a call site, so no prologue or epilogue guessing is needed here.

use super::codecache::{CodeBlob, CodeCache};
use super::memory::ProcessMemory;
use super::threads::FrameAnchor;
use super::vmstructs::VmStructs;
use super::HotSpotError;

/// Bytes per stack slot on x86_64.
const WORD: u64 = 8;
/// The interpreter frame's Method* slot, in words below fp (x86_64, JDK 9+).
pub const INTERPRETER_METHOD_SLOT: u64 = 3;
/// The interpreter frame's bcp slot, in words below fp (x86_64, JDK 9+).
pub const INTERPRETER_BCP_SLOT: u64 = 8;
/// The interpreter frame's sender sp slot, in words below fp (checked against VMStructs).
const INTERPRETER_SENDER_SP_SLOT: u64 = 1;
/// The largest step accepted from one frame to its caller.
const MAX_FRAME_BYTES: u64 = 1 << 20;

/// Checks that the JVM's interpreter frames have the x86_64 layout the slots above assume, from
/// the two slot offsets VMStructs publishes (sender sp at fp-1, last sp at fp-2 words).
pub fn check_interpreter_layout(vm: &VmStructs) -> Result<(), HotSpotError> {
    for (name, expected) in [
        ("frame::interpreter_frame_sender_sp_offset", -1),
        ("frame::interpreter_frame_last_sp_offset", -2),
    ] {
        match vm.constant(name) {
            Some(value) if value == expected => {}
            found => {
                return Err(HotSpotError::BadTable(format!(
                    "{name} is {found:?}, not {expected}: not an x86_64 interpreter frame layout"
                )))
            }
        }
    }
    Ok(())
}

/// Where a frame is: a pc in it, its stack pointer and its frame pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameState {
    /// A pc in the frame: the current one for the first frame, a return address for the others.
    pub pc: u64,
    /// The frame's (unextended) stack pointer.
    pub sp: u64,
    /// The frame pointer (for compiled frames without PreserveFramePointer, whatever rbp held).
    pub fp: u64,
}

/// What a frame runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameKind {
    /// An interpreted Java method.
    Interpreted {
        /// Its Method*.
        method: u64,
        /// Its bytecode pointer (for a caller frame: the invoke being executed).
        bcp: u64,
    },
    /// Other code of the code cache: compiled Java code (`blob.is_nmethod()`) or a stub.
    Code {
        /// The blob that holds the pc.
        blob: CodeBlob,
    },
}

/// One frame of a walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Where the frame is.
    pub state: FrameState,
    /// What it runs.
    pub kind: FrameKind,
}

/// Walks from `start`, newest first, while the pcs are in the code cache and each caller's stack
/// pointer lies above its callee's; at most `max_frames` frames.
pub fn walk(
    mem: &ProcessMemory,
    code: &CodeCache,
    start: FrameState,
    max_frames: usize,
) -> Vec<Frame> {
    let mut frames = Vec::new();
    let mut state = start;
    while frames.len() < max_frames && state.sp % WORD == 0 && code.contains(state.pc) {
        let Some((kind, caller)) = step(mem, code, state) else {
            break;
        };
        frames.push(Frame { state, kind });
        if caller.sp <= state.sp || caller.sp - state.sp > MAX_FRAME_BYTES {
            break;
        }
        state = caller;
    }
    frames
}

/// What the frame at `state` runs, and where its caller is.
fn step(
    mem: &ProcessMemory,
    code: &CodeCache,
    state: FrameState,
) -> Option<(FrameKind, FrameState)> {
    let fp = state.fp;
    let slot = |words: u64| fp.checked_sub(words * WORD).and_then(|a| mem.read_u64(a));
    let by_frame_pointer = |sp: u64| -> Option<FrameState> {
        if fp == 0 || fp % WORD != 0 || fp < state.sp {
            return None;
        }
        Some(FrameState {
            pc: mem.read_u64(fp.checked_add(WORD)?)?,
            sp,
            fp: mem.read_u64(fp)?,
        })
    };
    if code.is_interpreter(state.pc) {
        let kind = FrameKind::Interpreted {
            method: slot(INTERPRETER_METHOD_SLOT)?,
            bcp: slot(INTERPRETER_BCP_SLOT)?,
        };
        return Some((kind, by_frame_pointer(slot(INTERPRETER_SENDER_SP_SLOT)?)?));
    }
    let blob = code.blob_at(mem, state.pc)?;
    let caller = match u64::from(blob.frame_size) * WORD {
        0 => by_frame_pointer(fp.checked_add(2 * WORD)?)?,
        size => {
            let sender_sp = state.sp.checked_add(size)?;
            FrameState {
                pc: mem.read_u64(sender_sp - WORD)?,
                sp: sender_sp,
                fp: mem.read_u64(sender_sp - 2 * WORD)?,
            }
        }
    };
    Some((FrameKind::Code { blob }, caller))
}

/// Walks a thread's Java stack from its anchor; empty while the thread runs Java code (its
/// anchor is clear).
pub fn walk_from_anchor(
    mem: &ProcessMemory,
    code: &CodeCache,
    anchor: FrameAnchor,
    max_frames: usize,
) -> Vec<Frame> {
    if anchor.sp == 0 {
        return Vec::new();
    }
    let pc = match anchor.pc {
        0 => match anchor.sp.checked_sub(WORD).and_then(|a| mem.read_u64(a)) {
            Some(pc) => pc,
            None => return Vec::new(),
        },
        pc => pc,
    };
    let start = FrameState {
        pc,
        sp: anchor.sp,
        fp: anchor.fp,
    };
    walk(mem, code, start, max_frames)
}

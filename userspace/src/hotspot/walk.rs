//! Walking a thread's Java frames along the saved frame-pointer chain, from a known frame (the
//! thread's `JavaFrameAnchor`, or a sampled pc/fp). Interpreted frames always keep a frame
//! pointer and hold their Method* and bcp at fixed slots; compiled frames keep one only under
//! -XX:+PreserveFramePointer. This is the reference walk that a HotSpot-aware walker (CodeBlob
//! frame sizes) will extend.

use super::codecache::CodeCache;
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
/// The largest frame accepted between two saved frame pointers.
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

/// What a frame runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// An interpreted Java method.
    Interpreted {
        /// Its Method*.
        method: u64,
        /// Its bytecode pointer (for a caller frame: the invoke being executed).
        bcp: u64,
    },
    /// Code in the code cache other than the interpreter: compiled Java code or a stub.
    CodeCache,
}

/// One frame of a walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// A pc in the frame: the current one for the first frame, a return address for the others.
    pub pc: u64,
    /// The frame pointer.
    pub fp: u64,
    /// What it runs.
    pub kind: FrameKind,
}

/// Walks from the frame described by `pc` and `fp`, newest first, while the pcs are in the code
/// cache and the frame pointers go up the stack; at most `max_frames` frames.
pub fn walk_frame_pointers(
    mem: &ProcessMemory,
    code: &CodeCache,
    mut pc: u64,
    mut fp: u64,
    max_frames: usize,
) -> Vec<Frame> {
    let mut frames = Vec::new();
    while frames.len() < max_frames && fp != 0 && fp % WORD == 0 && code.contains(pc) {
        let kind = if code.is_interpreter(pc) {
            let slot = |words: u64| fp.checked_sub(words * WORD).and_then(|a| mem.read_u64(a));
            match (slot(INTERPRETER_METHOD_SLOT), slot(INTERPRETER_BCP_SLOT)) {
                (Some(method), Some(bcp)) => FrameKind::Interpreted { method, bcp },
                _ => break,
            }
        } else {
            FrameKind::CodeCache
        };
        frames.push(Frame { pc, fp, kind });
        let (Some(next_fp), Some(next_pc)) = (mem.read_u64(fp), mem.read_u64(fp + WORD)) else {
            break;
        };
        if next_fp <= fp || next_fp - fp > MAX_FRAME_BYTES {
            break;
        }
        (pc, fp) = (next_pc, next_fp);
    }
    frames
}

/// Walks a thread's Java stack from its anchor; empty while the thread runs Java code (its
/// anchor is clear) or when the anchor has no frame pointer (it left from compiled code).
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
    walk_frame_pointers(mem, code, pc, anchor.fp, max_frames)
}

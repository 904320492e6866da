//! The records the BPF sampler writes into its ring buffer (`bpf/sampler.h`), read back into Rust.
//!
//! The bytes come from the kernel, but every length is still checked: a short or inconsistent
//! record is rejected, never trusted.

/// What a frame of a walk runs, with what names it (`jp_frame.kind` and `id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// Code outside the JVM's code cache (the JVM itself, libc, JNI libraries, the vDSO), or any
    /// frame of a JVM the walker was not told of yet, walked by frame pointers.
    Native {
        /// For a JVM the walker was not told of yet, the word at fp-3 words: the `Method*` if
        /// the pc is in the interpreter; 0 otherwise.
        method_slot: u64,
    },
    /// A method run by the template interpreter.
    Interpreted {
        /// The frame's `Method*`.
        method: u64,
    },
    /// An nmethod: a compiled Java method (with the methods inlined into it), or the wrapper of
    /// a native method.
    Compiled {
        /// The nmethod (`CodeBlob*`).
        nmethod: u64,
        /// Its compile id, to tell it from a later nmethod at the same address.
        compile_id: u32,
    },
    /// Another code blob of the code cache: a stub, an adapter, a runtime blob.
    Stub {
        /// The blob (`CodeBlob*`).
        blob: u64,
    },
}

/// One frame of a walk, newest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackFrame {
    /// A pc in the frame: the sampled one for the first frame, a return address (the pc after
    /// the call) for the others (`caller`), the original pc of a deoptimised frame.
    pub pc: u64,
    /// What the frame runs.
    pub kind: FrameKind,
    /// `pc` is a return address: the call instruction is just before it.
    pub caller: bool,
    /// The frame was deoptimised: `pc` is where it was, not the handler it now returns to.
    pub deoptimized: bool,
}

impl StackFrame {
    /// The address to look the frame's code up at: the call instruction for a return address.
    pub fn lookup_pc(&self) -> u64 {
        if self.caller {
            self.pc.saturating_sub(1)
        } else {
            self.pc
        }
    }
}

/// Why a walk ended (`jp_sample.stop`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WalkEnd {
    /// At the call stub of the thread's first call into Java: the walk holds every Java frame.
    Entry,
    /// A frame-pointer chain in native code ended (a null frame pointer, or one not above).
    ChainEnd,
    /// [`MAX_FRAMES`] frames.
    MaxFrames,
    /// Memory that could not be read.
    Unreadable,
    /// A pc in a code heap that lies in no code blob.
    NoBlob,
    /// A Java frame whose caller was not plausible.
    BadFrame,
    /// A value this version does not know.
    Other(u8),
}

impl WalkEnd {
    fn from_code(code: u8) -> WalkEnd {
        match code {
            1 => WalkEnd::Entry,
            2 => WalkEnd::ChainEnd,
            3 => WalkEnd::MaxFrames,
            4 => WalkEnd::Unreadable,
            5 => WalkEnd::NoBlob,
            6 => WalkEnd::BadFrame,
            other => WalkEnd::Other(other),
        }
    }
}

/// One stack sample of one thread of a tracked process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// The process (tgid).
    pub pid: u32,
    /// The thread (the kernel's pid of the task).
    pub tid: u32,
    /// The CPU the thread ran on.
    pub cpu: u32,
    /// When the sample was taken, CLOCK_MONOTONIC nanoseconds.
    pub time_ns: u64,
    /// The sample interrupted the thread in kernel mode (ip, sp and bp are still the user
    /// registers, from the task's saved user state).
    pub kernel: bool,
    /// The walker knew the process as a JVM: its HotSpot frames were unwound by kind.
    pub jvm: bool,
    /// The walker knew the thread as a Java thread (its JavaThread, and so its anchor).
    pub java_thread: bool,
    /// Native code without frame pointers, called from Java code, was left by scanning the
    /// stack for the return address into Java code.
    pub scanned: bool,
    /// User instruction pointer.
    pub ip: u64,
    /// User stack pointer.
    pub sp: u64,
    /// User frame pointer (rbp).
    pub bp: u64,
    /// The stack pointer of the deepest frame the walk reached (`stack_end - sp` bytes of stack
    /// hold the frames).
    pub stack_end: u64,
    /// Why the walk ended.
    pub end: WalkEnd,
    /// The frames, newest first.
    pub frames: Vec<StackFrame>,
}

/// The most frames one sample holds (`JP_MAX_FRAMES`).
pub const MAX_FRAMES: usize = 256;
/// Bytes of `struct jp_sample` before its frames.
const HEADER_LEN: usize = 64;
/// Bytes of one `struct jp_frame`.
const FRAME_LEN: usize = 24;
/// Bytes of a record of `frames` frames in the ring buffer.
pub const fn record_len(frames: usize) -> usize {
    HEADER_LEN + frames * FRAME_LEN
}

/// `jp_sample.flags`.
const FLAG_KERNEL: u32 = 1;
const FLAG_JVM: u32 = 2;
const FLAG_JAVA_THREAD: u32 = 4;
const FLAG_SCANNED: u32 = 8;
/// `jp_frame.flags`.
const FRAME_CALLER: u8 = 1;
const FRAME_DEOPT: u8 = 2;

fn u16_at(bytes: &[u8], offset: usize) -> u16 {
    u16::from_ne_bytes(bytes[offset..offset + 2].try_into().expect("2 bytes"))
}

fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    u32::from_ne_bytes(bytes[offset..offset + 4].try_into().expect("4 bytes"))
}

fn u64_at(bytes: &[u8], offset: usize) -> u64 {
    u64::from_ne_bytes(bytes[offset..offset + 8].try_into().expect("8 bytes"))
}

impl StackFrame {
    /// One `struct jp_frame`; `None` for a kind this version does not know.
    fn parse(bytes: &[u8]) -> Option<StackFrame> {
        let id = u64_at(bytes, 8);
        let kind = match bytes[20] {
            0 => FrameKind::Native { method_slot: id },
            1 => FrameKind::Interpreted { method: id },
            2 => FrameKind::Compiled {
                nmethod: id,
                compile_id: u32_at(bytes, 16),
            },
            3 => FrameKind::Stub { blob: id },
            _ => return None,
        };
        let flags = bytes[21];
        Some(StackFrame {
            pc: u64_at(bytes, 0),
            kind,
            caller: flags & FRAME_CALLER != 0,
            deoptimized: flags & FRAME_DEOPT != 0,
        })
    }
}

impl Sample {
    /// Reads one ring-buffer record. `None` if it is shorter than its header, claims more than
    /// [`MAX_FRAMES`] frames, is shorter than the frames it claims, or holds a frame of an
    /// unknown kind.
    pub fn parse(bytes: &[u8]) -> Option<Sample> {
        if bytes.len() < HEADER_LEN {
            return None;
        }
        let nframes = usize::from(u16_at(bytes, 56));
        if nframes > MAX_FRAMES || bytes.len() < HEADER_LEN + nframes * FRAME_LEN {
            return None;
        }
        let frames = bytes[HEADER_LEN..HEADER_LEN + nframes * FRAME_LEN]
            .chunks_exact(FRAME_LEN)
            .map(StackFrame::parse)
            .collect::<Option<Vec<_>>>()?;
        let flags = u32_at(bytes, 12);
        Some(Sample {
            pid: u32_at(bytes, 0),
            tid: u32_at(bytes, 4),
            cpu: u32_at(bytes, 8),
            kernel: flags & FLAG_KERNEL != 0,
            jvm: flags & FLAG_JVM != 0,
            java_thread: flags & FLAG_JAVA_THREAD != 0,
            scanned: flags & FLAG_SCANNED != 0,
            time_ns: u64_at(bytes, 16),
            ip: u64_at(bytes, 24),
            sp: u64_at(bytes, 32),
            bp: u64_at(bytes, 40),
            stack_end: u64_at(bytes, 48),
            end: WalkEnd::from_code(bytes[58]),
            frames,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(pc: u64, id: u64, cookie: u32, kind: u8, flags: u8) -> Vec<u8> {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&pc.to_ne_bytes());
        bytes.extend_from_slice(&id.to_ne_bytes());
        bytes.extend_from_slice(&cookie.to_ne_bytes());
        bytes.extend_from_slice(&[kind, flags, 0, 0]);
        bytes
    }

    fn record(nframes: u16, flags: u32, frames: &[Vec<u8>]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for word in [7u32, 9, 1, flags] {
            bytes.extend_from_slice(&word.to_ne_bytes());
        }
        for word in [1_000u64, 0x40_1000, 0x7ff0_0000, 0x7ff0_0100, 0x7ff0_2000] {
            bytes.extend_from_slice(&word.to_ne_bytes());
        }
        bytes.extend_from_slice(&nframes.to_ne_bytes());
        bytes.extend_from_slice(&[1, 0, 0, 0, 0, 0]);
        for frame in frames {
            bytes.extend_from_slice(frame);
        }
        bytes
    }

    fn frames() -> Vec<Vec<u8>> {
        vec![
            frame(0x40_1000, 0, 0, 0, 0),
            frame(0x50_2000, 0xa000, 0, 1, FRAME_CALLER),
            frame(0x50_3000, 0xb000, 77, 2, FRAME_CALLER | FRAME_DEOPT),
            frame(0x50_4000, 0xc000, 0, 3, FRAME_CALLER),
        ]
    }

    #[test]
    fn reads_the_header_and_every_kind_of_frame() {
        let sample = Sample::parse(&record(4, 1 | 2 | 4 | 8, &frames())).expect("a valid record");
        assert_eq!((sample.pid, sample.tid, sample.cpu), (7, 9, 1));
        assert!(sample.kernel && sample.jvm && sample.java_thread && sample.scanned);
        assert_eq!(sample.time_ns, 1_000);
        assert_eq!(
            (sample.ip, sample.sp, sample.bp, sample.stack_end),
            (0x40_1000, 0x7ff0_0000, 0x7ff0_0100, 0x7ff0_2000)
        );
        assert_eq!(sample.end, WalkEnd::Entry);
        let kinds: Vec<FrameKind> = sample.frames.iter().map(|f| f.kind).collect();
        assert_eq!(
            kinds,
            [
                FrameKind::Native { method_slot: 0 },
                FrameKind::Interpreted { method: 0xa000 },
                FrameKind::Compiled {
                    nmethod: 0xb000,
                    compile_id: 77
                },
                FrameKind::Stub { blob: 0xc000 },
            ]
        );
        assert!(!sample.frames[0].caller && sample.frames[1].caller);
        assert!(sample.frames[2].deoptimized && !sample.frames[1].deoptimized);
        assert_eq!(sample.frames[0].lookup_pc(), 0x40_1000);
        assert_eq!(sample.frames[1].lookup_pc(), 0x50_1fff);
        let plain = Sample::parse(&record(0, 0, &[])).expect("no frames");
        assert!(!plain.kernel && !plain.jvm && !plain.java_thread && !plain.scanned);
        assert!(plain.frames.is_empty());
    }

    #[test]
    fn rejects_short_or_inconsistent_records() {
        assert_eq!(Sample::parse(&record(2, 0, &frames())[..40]), None);
        assert_eq!(Sample::parse(&record(257, 0, &frames())), None);
        assert_eq!(Sample::parse(&record(5, 0, &frames())), None);
        let unknown = vec![frame(1, 2, 3, 9, 0)];
        assert_eq!(Sample::parse(&record(1, 0, &unknown)), None);
        assert!(Sample::parse(&record(3, 0, &frames())).is_some());
    }
}

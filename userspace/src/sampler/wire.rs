//! The records the BPF sampler and userspace exchange (`bpf/sampler.h`), as `#[repr(C)]` structs
//! read and written with bytemuck: the samples of the ring buffer (`struct jp_sample`, then its
//! frames), the on-CPU times of the map `threads` (`struct jp_thread`), and what userspace tells
//! the walker of a JVM (`struct jp_jvm`, `struct jp_java_thread`).
//!
//! Each struct is checked when the crate builds against the type the BPF skeleton generates from
//! the C header's BTF: the same size, and every field at the same offset with the same width. A
//! change to one side that the other lacks does not build.
//!
//! The bytes come from the kernel, but every length is still checked: a short or inconsistent
//! sample is rejected, never trusted.

use bytemuck::{Pod, Zeroable};

use super::skel::types as c;
use crate::hotspot::unwind::MAX_HEAPS;

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
    /// ...having found its JavaThread in r15, as userspace had not listed the thread yet.
    pub thread_in_r15: bool,
    /// Native code without frame pointers, called from Java code, was left by scanning the
    /// stack for the return address into Java code.
    pub scanned: bool,
    /// The sampled frame's pc lay where its frame was not built, or no longer: in the prologue
    /// of an nmethod or a stub before its frame was complete, or in an epilogue after it was
    /// popped (see docs/sampler.md, "How frames are unwound").
    pub leaf_unbuilt: bool,
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
const HEADER_LEN: usize = std::mem::size_of::<SampleHeader>();
/// Bytes of one `struct jp_frame`.
const FRAME_LEN: usize = std::mem::size_of::<Frame>();
/// Bytes of a record of `frames` frames in the ring buffer.
pub const fn record_len(frames: usize) -> usize {
    HEADER_LEN + frames * FRAME_LEN
}

/// `jp_sample.flags`.
const FLAG_KERNEL: u32 = 1;
const FLAG_JVM: u32 = 2;
const FLAG_JAVA_THREAD: u32 = 4;
const FLAG_SCANNED: u32 = 8;
const FLAG_THREAD_R15: u32 = 16;
const FLAG_LEAF_UNBUILT: u32 = 32;
/// `jp_frame.flags`.
const FRAME_CALLER: u8 = 1;
const FRAME_DEOPT: u8 = 2;

/// The width of a field, from a function that borrows it (the layout checks below).
const fn width<T, F>(_: fn(&T) -> &F) -> usize {
    std::mem::size_of::<F>()
}

/// Checks at compile time that `$ours` has the layout of the skeleton's `$c` for the fields
/// named: the same offset and width of each, and (with `size`) the same size in all.
macro_rules! same_layout {
    ($ours:ty, $c:ty, size, $($field:ident),+ $(,)?) => {
        same_layout!($ours, $c, $($field),+);
        const _: () = assert!(std::mem::size_of::<$ours>() == std::mem::size_of::<$c>());
    };
    ($ours:ty, $c:ty, $($field:ident),+ $(,)?) => {
        $(
            const _: () = assert!(
                std::mem::offset_of!($ours, $field) == std::mem::offset_of!($c, $field)
                    && width(|s: &$ours| &s.$field) == width(|s: &$c| &s.$field),
                concat!(stringify!($ours), ".", stringify!($field), " is not where bpf/sampler.h has it")
            );
        )+
    };
}

/// `struct jp_sample` up to its frames.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct SampleHeader {
    pid: u32,
    tid: u32,
    cpu: u32,
    flags: u32,
    time_ns: u64,
    ip: u64,
    sp: u64,
    bp: u64,
    stack_end: u64,
    nframes: u16,
    stop: u8,
    pad: [u8; 5],
}
same_layout!(
    SampleHeader,
    c::jp_sample,
    pid,
    tid,
    cpu,
    flags,
    time_ns,
    ip,
    sp,
    bp,
    stack_end,
    nframes,
    stop,
    pad
);
const _: () = assert!(HEADER_LEN == std::mem::offset_of!(c::jp_sample, frames));
const _: () = assert!(MAX_FRAMES * FRAME_LEN == width(|s: &c::jp_sample| &s.frames));

/// `struct jp_frame`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct Frame {
    pc: u64,
    id: u64,
    cookie: u32,
    kind: u8,
    flags: u8,
    pad: u16,
}
same_layout!(Frame, c::jp_frame, size, pc, id, cookie, kind, flags, pad);

impl StackFrame {
    /// One `struct jp_frame`; `None` for a kind this version does not know.
    fn from_wire(frame: &Frame) -> Option<StackFrame> {
        let kind = match frame.kind {
            0 => FrameKind::Native {
                method_slot: frame.id,
            },
            1 => FrameKind::Interpreted { method: frame.id },
            2 => FrameKind::Compiled {
                nmethod: frame.id,
                compile_id: frame.cookie,
            },
            3 => FrameKind::Stub { blob: frame.id },
            _ => return None,
        };
        Some(StackFrame {
            pc: frame.pc,
            kind,
            caller: frame.flags & FRAME_CALLER != 0,
            deoptimized: frame.flags & FRAME_DEOPT != 0,
        })
    }
}

impl Sample {
    /// Reads one ring-buffer record. `None` if it is shorter than its header, claims more than
    /// [`MAX_FRAMES`] frames, is shorter than the frames it claims, or holds a frame of an
    /// unknown kind.
    pub fn parse(bytes: &[u8]) -> Option<Sample> {
        let header: SampleHeader = bytemuck::pod_read_unaligned(bytes.get(..HEADER_LEN)?);
        let nframes = usize::from(header.nframes);
        if nframes > MAX_FRAMES {
            return None;
        }
        let frames = bytes
            .get(HEADER_LEN..record_len(nframes))?
            .chunks_exact(FRAME_LEN)
            .map(|chunk| StackFrame::from_wire(&bytemuck::pod_read_unaligned(chunk)))
            .collect::<Option<Vec<_>>>()?;
        Some(Sample {
            pid: header.pid,
            tid: header.tid,
            cpu: header.cpu,
            kernel: header.flags & FLAG_KERNEL != 0,
            jvm: header.flags & FLAG_JVM != 0,
            java_thread: header.flags & FLAG_JAVA_THREAD != 0,
            scanned: header.flags & FLAG_SCANNED != 0,
            thread_in_r15: header.flags & FLAG_THREAD_R15 != 0,
            leaf_unbuilt: header.flags & FLAG_LEAF_UNBUILT != 0,
            time_ns: header.time_ns,
            ip: header.ip,
            sp: header.sp,
            bp: header.bp,
            stack_end: header.stack_end,
            end: WalkEnd::from_code(header.stop),
            frames,
        })
    }
}

/// `struct jp_thread`: a thread's on-CPU time (the value of map `threads`, keyed by tid).
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub(super) struct ThreadRecord {
    /// Its process.
    pub pid: u32,
    /// Not 0 once the thread has exited.
    pub exited: u32,
    /// Its `sum_exec_runtime` when it was first seen.
    pub baseline: u64,
    /// Its `sum_exec_runtime` at the last update.
    pub runtime: u64,
    /// Its name (comm), NUL-padded.
    pub comm: [u8; 16],
    /// The thread.
    pub tid: u32,
    pub pad: u32,
}
same_layout!(
    ThreadRecord,
    c::jp_thread,
    size,
    pid,
    exited,
    baseline,
    runtime,
    comm,
    tid,
    pad
);

impl ThreadRecord {
    /// Thread `tid` of `pid`, which has run `runtime` ns so far (its baseline), named `name` (cut
    /// to 15 bytes, as the kernel's comm).
    pub fn new(pid: u32, tid: u32, runtime: u64, name: &str) -> ThreadRecord {
        let mut comm = [0; 16];
        let name = &name.as_bytes()[..name.len().min(15)];
        comm[..name.len()].copy_from_slice(name);
        ThreadRecord {
            pid,
            exited: 0,
            baseline: runtime,
            runtime,
            comm,
            tid,
            pad: 0,
        }
    }

    /// Reads a map value; `None` if it is too short.
    pub fn parse(bytes: &[u8]) -> Option<ThreadRecord> {
        Some(bytemuck::pod_read_unaligned(
            bytes.get(..std::mem::size_of::<ThreadRecord>())?,
        ))
    }

    /// The records of the task iterator's output `bytes`, one after another; a short tail (which
    /// the kernel never writes) is left out.
    pub fn parse_all(bytes: &[u8]) -> impl Iterator<Item = ThreadRecord> + '_ {
        bytes
            .chunks_exact(std::mem::size_of::<ThreadRecord>())
            .map(bytemuck::pod_read_unaligned)
    }

    /// The name, up to its first NUL.
    pub fn name(&self) -> String {
        let len = self.comm.iter().position(|&b| b == 0).unwrap_or(16);
        String::from_utf8_lossy(&self.comm[..len]).into_owned()
    }
}

/// `struct jp_field`: where a field of a HotSpot object is, and how to read it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub(super) struct FieldRecord {
    pub offset: u16,
    pub size: u8,
    pub relative: u8,
}
same_layout!(FieldRecord, c::jp_field, size, offset, size, relative);

/// `struct jp_code_heap`: one code heap.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub(super) struct CodeHeapRecord {
    pub low: u64,
    pub high: u64,
    pub segmap: u64,
    pub log2_segment: u64,
}
same_layout!(
    CodeHeapRecord,
    c::jp_code_heap,
    size,
    low,
    high,
    segmap,
    log2_segment
);

/// `struct jp_jvm`: what the walker needs of one JVM (the value of map `jvms`, keyed by tgid).
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub(super) struct JvmRecord {
    pub heaps: [CodeHeapRecord; MAX_HEAPS],
    pub interpreter_begin: u64,
    pub interpreter_end: u64,
    pub call_stub_return: u64,
    pub code_low: u64,
    pub code_high: u64,
    pub nheaps: u32,
    pub heap_block: u16,
    pub nmethod_size: u16,
    pub blob_read: u16,
    pub call_wrapper: i16,
    pub wrapper_anchor: u16,
    pub thread_anchor: u16,
    pub blob_size: FieldRecord,
    pub header_size: FieldRecord,
    pub frame_size: FieldRecord,
    pub frame_complete: FieldRecord,
    pub code_begin: FieldRecord,
    pub compile_id: FieldRecord,
    pub orig_pc: FieldRecord,
    pub deopt_handler: FieldRecord,
    pub name: FieldRecord,
    pub thread_stack_base: u16,
    pub thread_stack_size: u16,
    pub thread_osthread: u16,
    pub osthread_tid: u16,
    pub pad: u32,
    pub java_thread_vtable: u64,
}
same_layout!(
    JvmRecord,
    c::jp_jvm,
    size,
    heaps,
    interpreter_begin,
    interpreter_end,
    call_stub_return,
    code_low,
    code_high,
    nheaps,
    heap_block,
    nmethod_size,
    blob_read,
    call_wrapper,
    wrapper_anchor,
    thread_anchor,
    blob_size,
    header_size,
    frame_size,
    frame_complete,
    code_begin,
    compile_id,
    orig_pc,
    deopt_handler,
    name,
    thread_stack_base,
    thread_stack_size,
    thread_osthread,
    osthread_tid,
    pad,
    java_thread_vtable,
);

/// `struct jp_java_thread`: a Java thread of a JVM (the value of map `java_threads`, keyed by
/// tid).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub(super) struct JavaThreadRecord {
    /// Its process.
    pub pid: u32,
    pub pad: u32,
    /// Its `JavaThread*`.
    pub thread: u64,
    /// Its stack, `[stack_low, stack_high)`.
    pub stack_low: u64,
    pub stack_high: u64,
}
same_layout!(
    JavaThreadRecord,
    c::jp_java_thread,
    size,
    pid,
    pad,
    thread,
    stack_low,
    stack_high
);

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
        let sample =
            Sample::parse(&record(4, 1 | 2 | 4 | 8 | 16, &frames())).expect("a valid record");
        assert_eq!((sample.pid, sample.tid, sample.cpu), (7, 9, 1));
        assert!(sample.kernel && sample.jvm && sample.java_thread && sample.scanned);
        assert!(sample.thread_in_r15);
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
        assert!(!plain.thread_in_r15);
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

    #[test]
    fn thread_records_round_trip() {
        let record = ThreadRecord::new(42, 43, 1_500, "a-very-long-thread-name");
        let bytes = bytemuck::bytes_of(&record);
        let read = ThreadRecord::parse(bytes).expect("48 bytes");
        assert_eq!(
            (read.pid, read.tid, read.baseline, read.runtime),
            (42, 43, 1_500, 1_500)
        );
        assert_eq!(read.name(), "a-very-long-thr");
        assert_eq!(read.exited, 0);
        assert!(ThreadRecord::parse(&bytes[..47]).is_none());
    }

    #[test]
    fn the_iterators_output_is_read_record_by_record() {
        let records = [
            ThreadRecord::new(7, 7, 10, "main"),
            ThreadRecord::new(7, 9, 20, "worker"),
        ];
        let mut output = bytemuck::bytes_of(&records).to_vec();
        output.extend_from_slice(&[1, 2, 3]);
        let read: Vec<(u32, u64, String)> = ThreadRecord::parse_all(&output)
            .map(|record| (record.tid, record.runtime, record.name()))
            .collect();
        assert_eq!(read, [(7, 10, "main".into()), (9, 20, "worker".into())]);
    }
}

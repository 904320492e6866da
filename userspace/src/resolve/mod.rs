//! Turning one stack sample of a JVM thread into Java frames and a branch of
//! `joularcode_core::branch` (architecture decision 4). For each pc of the sampled frame-pointer
//! walk, newest first:
//!
//! - a pc in the template interpreter: the frame's `Method*` (the slot the sampler read at fp-3
//!   words) names it through VMStructs;
//! - a pc in JIT-compiled code: the symbolizer agent's code map, at the sample's time, names the
//!   compiled method and the methods inlined into it; without an entry valid at that time (the
//!   agent is missing, or its load line is not written yet), the nmethod's own `Method*` read
//!   from the live code cache names the outer method, then the JDK's perf map if there is one;
//! - a stub or adapter of the code cache is no Java frame and is left out;
//! - a pc outside the code cache is native code: left out of the branch, and named by blazesym
//!   when native frames are asked for (the native frames newer than the newest Java frame).
//!
//! A virtual thread's stack is its own: the frames of its carrier thread, older than the
//! continuation that runs it, are left out, as are the continuation's entry frames that Java's own
//! stack traces hide; its branch starts at `java.lang.VirtualThread.run` ([`Boundary`]).
//!
//! A Java frame that cannot be named becomes [`UNKNOWN`] (a run of them, one), counted in
//! [`ResolveStats::unknown_frames`]. A sample of an application thread without any Java frame
//! gets the branch `[unknown]` when it was in Java code that could not be named, or
//! [`NATIVE`] when all its frames were native. A sample of one of the JVM's own threads gets its
//! pseudo-frame (`[GC]`, `[JIT compiler]`, `[VM]`) as its whole branch.
//!
//! Samples that arrive after the JVM ended (its memory is gone) name their interpreted frames
//! with the names their Method*s had when last read.
//!
//! Everything read from the target is untrusted: a bad pointer gives `[unknown]`, never a panic.

pub mod native;

use std::collections::HashMap;
use std::sync::Arc;

use joularcode_core::branch::{BranchId, Branches, FrameId, UNKNOWN};

use crate::discovery;
use crate::hotspot::{HotSpot, JavaMethod};
use crate::jit::codemap::{CodeKind, CodeMap};
use crate::jit::perfmap::PerfMap;
use crate::sampler::{monotonic_ns, FrameKind, Sample};
use crate::threads::JvmThread;
use native::NativeNames;

/// Pseudo-frame of an application thread's sample whose frames were all native code (JNI, the
/// JVM's own code called outside any Java method, a thread that has not entered Java yet).
pub const NATIVE: &str = "[native]";

/// Where the names of JIT-compiled frames come from.
#[derive(Debug)]
pub enum JitNames {
    /// The symbolizer agent's code map (with inlined methods and validity times), then the live
    /// code cache for code not in it yet.
    Agent(Box<CodeMap>),
    /// The JDK's perf map (`Compiler.perfmap`), for code the live code cache cannot name.
    PerfMap(PerfMap),
    /// Only the live code cache: each compiled frame named by its nmethod's outer method.
    CodeCache,
}

impl JitNames {
    /// A short description, for messages.
    pub fn describe(&self) -> &'static str {
        match self {
            JitNames::Agent(_) => "the symbolizer agent's code map",
            JitNames::PerfMap(_) => "the JVM's perf map (Compiler.perfmap) and its code cache",
            JitNames::CodeCache => "the JVM's code cache (VMStructs)",
        }
    }
}

/// What resolving has met so far, for one JVM.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResolveStats {
    /// Samples resolved.
    pub samples: u64,
    /// Java frames named.
    pub java_frames: u64,
    /// Java frames named from the agent's inline records (methods inlined into compiled code).
    pub inlined_frames: u64,
    /// Compiled frames named from the live code cache, because no code map entry was valid at
    /// the sample's time.
    pub code_cache_frames: u64,
    /// Frames in Java code (interpreter or compiled) that could not be named: `[unknown]`.
    pub unknown_frames: u64,
    /// Samples of application threads without a single named Java frame.
    pub without_java_frame: u64,
}

impl ResolveStats {
    /// Adds `other`'s counts to these.
    fn add(&mut self, other: &ResolveStats) {
        self.samples += other.samples;
        self.java_frames += other.java_frames;
        self.inlined_frames += other.inlined_frames;
        self.code_cache_frames += other.code_cache_frames;
        self.unknown_frames += other.unknown_frames;
        self.without_java_frame += other.without_java_frame;
    }
}

/// One resolved sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Its branch, in the [`Branches`] given to [`Resolver::resolve`].
    pub branch: BranchId,
    /// With native frames asked for: the native functions newer than the newest Java frame
    /// (for a JVM thread, or a sample without Java frames: all of them), oldest first.
    pub native: Vec<Arc<str>>,
}

/// Resolves the samples of one JVM.
#[derive(Debug)]
pub struct Resolver {
    hotspot: HotSpot,
    jit: JitNames,
    native: Option<NativeNames>,
    stats: ResolveStats,
    /// What the sample being resolved met, added to `stats` once it is resolved.
    tally: ResolveStats,
    /// The sample being resolved holds compiled Java code the agent has not reported yet.
    unreported: bool,
    /// Code map entries (start, load time) checked against the live code cache: when, and
    /// whether the code there still had the entry's name.
    verified: HashMap<(u64, u64), (u64, bool)>,
    /// What each Method* was when last read from the target (see [`MethodRead`]).
    methods: HashMap<u64, MethodRead>,
    /// When `verified` and `methods` were last rid of what no sample needed for [`KEEP_NS`].
    swept_ns: u64,
    /// Scratch space reused by every sample: frames newest first, leaf-side native pcs.
    frames: Stack,
    native_pcs: Vec<u64>,
}

/// A pc of a sample: where it is, and whether it is a return address (a caller's frame).
#[derive(Debug, Clone, Copy)]
struct Pc {
    pc: u64,
    caller: bool,
    /// The frame's Method*, if the walker found it interpreted, or (walked by frame pointers
    /// before the JVM was registered) the word at fp-3 words, which is the Method* if the pc is
    /// in the interpreter.
    method_slot: Option<u64>,
}

impl Pc {
    /// The address of the instruction: a return address follows its call instruction.
    fn instruction(self) -> u64 {
        if self.caller {
            self.pc.saturating_sub(1)
        } else {
            self.pc
        }
    }
}

/// The pcs of a sample's frames, newest first, with the Method* of the interpreted ones.
fn pcs(sample: &Sample) -> impl Iterator<Item = Pc> + '_ {
    sample.frames.iter().map(|frame| Pc {
        pc: frame.pc,
        caller: frame.caller,
        method_slot: match frame.kind {
            FrameKind::Interpreted { method } => Some(method),
            FrameKind::Native { method_slot } if method_slot != 0 => Some(method_slot),
            _ => None,
        },
    })
}

impl Resolver {
    /// A resolver for the JVM read by `hotspot`, naming compiled code through `jit`, and native
    /// code too when `native_frames` is set.
    pub fn new(hotspot: HotSpot, jit: JitNames, native_frames: bool) -> Resolver {
        let native = native_frames.then(|| NativeNames::new(hotspot.pid()));
        Resolver {
            hotspot,
            jit,
            native,
            stats: ResolveStats::default(),
            tally: ResolveStats::default(),
            unreported: false,
            verified: HashMap::new(),
            methods: HashMap::new(),
            swept_ns: 0,
            frames: Stack::default(),
            native_pcs: Vec::with_capacity(16),
        }
    }

    /// The JVM read.
    pub fn hotspot(&self) -> &HotSpot {
        &self.hotspot
    }

    /// Where compiled frames get their names.
    pub fn jit(&self) -> &JitNames {
        &self.jit
    }

    /// Changes where compiled frames get their names (once an agent has been attached, or has
    /// been refused).
    pub fn set_jit(&mut self, jit: JitNames) {
        self.jit = jit;
    }

    /// Reads what the agent appended to its code map since the last refresh; call it before
    /// resolving samples, so that code loaded before them is known. Returns the error of an
    /// unreadable map (the caller says it once; resolving goes on with the code cache).
    pub fn refresh(&mut self) -> Result<(), crate::jit::codemap::CodeMapError> {
        match &mut self.jit {
            JitNames::Agent(map) => map.refresh().map(|_| ()),
            _ => Ok(()),
        }
    }

    /// What was met so far.
    pub fn stats(&self) -> ResolveStats {
        self.stats
    }

    /// Resolves `sample` into a branch of `branches`. `thread` is the JVM's own thread it was
    /// taken on, if it was one (its branch is then the thread's pseudo-frame).
    pub fn resolve(
        &mut self,
        sample: &Sample,
        thread: Option<JvmThread>,
        branches: &mut Branches,
    ) -> Resolved {
        let resolved = self.resolve_now(sample, thread, branches);
        self.stats.add(&self.tally);
        resolved
    }

    /// As [`Resolver::resolve`], but `None` (and nothing counted) when a compiled frame of the
    /// sample would be named from the code cache, by its outer method only, because the agent's
    /// code map does not hold that compiled Java code yet: HotSpot reports new code to the agent
    /// a moment after it runs it. Resolve it again after the next [`Resolver::refresh`], with
    /// [`Resolver::resolve`].
    pub fn resolve_or_wait(
        &mut self,
        sample: &Sample,
        thread: Option<JvmThread>,
        branches: &mut Branches,
    ) -> Option<Resolved> {
        let resolved = self.resolve_now(sample, thread, branches);
        if self.unreported {
            return None;
        }
        self.stats.add(&self.tally);
        Some(resolved)
    }

    /// Every [`KEEP_NS`] / 3 of samples' time, drops the Method* reads and code map checks that no
    /// sample needed for [`KEEP_NS`]: those of classes unloaded since, in a JVM that loads
    /// ever-new ones, would otherwise pile up to the caps.
    fn forget_unused(&mut self, now_ns: u64) {
        if now_ns < self.swept_ns.saturating_add(KEEP_NS / 3) {
            return;
        }
        self.swept_ns = now_ns;
        let cutoff = now_ns.saturating_sub(KEEP_NS);
        self.methods.retain(|_, read| read.at_ns >= cutoff);
        self.verified.retain(|_, (at, _)| *at >= cutoff);
    }

    /// Resolves `sample`, counting what it meets in `tally`.
    fn resolve_now(
        &mut self,
        sample: &Sample,
        thread: Option<JvmThread>,
        branches: &mut Branches,
    ) -> Resolved {
        self.tally = ResolveStats {
            samples: 1,
            ..ResolveStats::default()
        };
        self.forget_unused(sample.time_ns);
        self.unreported = false;
        self.frames.clear();
        self.native_pcs.clear();
        if let Some(thread) = thread {
            if self.native.is_some() {
                self.native_pcs.extend(pcs(sample).map(Pc::instruction));
            }
            let frame = branches.jvm_frame(thread.frame());
            return Resolved {
                branch: branches.branch(&[frame]),
                native: self.native_names(),
            };
        }
        let mut in_java_code = false;
        let mut named_java = false;
        let mut last_unknown = false;
        for pc in pcs(sample) {
            if self.frames.complete {
                break;
            }
            if !self.hotspot.in_code_cache(pc.pc) {
                if !in_java_code && self.native.is_some() {
                    self.native_pcs.push(pc.instruction());
                }
                continue;
            }
            in_java_code = true;
            let before = self.frames.ids.len();
            let named = if self.hotspot.is_interpreter(pc.pc) {
                self.interpreted(pc, sample.time_ns, branches)
            } else {
                self.compiled(pc, sample.time_ns, branches)
            };
            match named {
                Named::Frames => {
                    self.tally.java_frames += (self.frames.ids.len() - before) as u64;
                    named_java = true;
                    last_unknown = false;
                }
                Named::Stub => {}
                Named::Frozen => {
                    self.tally.unknown_frames += 1;
                    self.tally.java_frames += 1;
                    self.frames.frozen(branches);
                }
                Named::Unknown => {
                    self.tally.unknown_frames += 1;
                    if !last_unknown {
                        self.frames.ids.push(branches.jvm_frame(UNKNOWN));
                    }
                    last_unknown = true;
                }
            }
        }
        if !named_java {
            self.tally.without_java_frame += 1;
            self.frames.clear();
            let pseudo = if in_java_code { UNKNOWN } else { NATIVE };
            self.frames.ids.push(branches.jvm_frame(pseudo));
        }
        self.frames.ids.reverse();
        Resolved {
            branch: branches.branch(&self.frames.ids),
            native: self.native_names(),
        }
    }

    /// Names the native pcs gathered for this sample, oldest first.
    fn native_names(&mut self) -> Vec<Arc<str>> {
        let Some(native) = self.native.as_mut() else {
            return Vec::new();
        };
        let mut names = native.names(&self.native_pcs);
        names.reverse();
        names
    }

    /// An interpreted frame, by the Method* in its frame, taken at `time_ns`.
    ///
    /// A read of the Method* made after the sample's time answers for it, as a read made now
    /// would: so each Method* is read from the target about once per batch of samples, not once
    /// per frame.
    fn interpreted(&mut self, pc: Pc, time_ns: u64, branches: &mut Branches) -> Named {
        let Some(method_ptr) = pc.method_slot else {
            return Named::Unknown;
        };
        let fresh = self
            .methods
            .get(&method_ptr)
            .is_some_and(|read| read.at_ns >= time_ns);
        if !fresh {
            let at_ns = monotonic_ns();
            let readable = self.hotspot.method(method_ptr);
            if self.methods.len() >= MAX_METHODS {
                self.methods.clear();
            }
            let read = self.methods.entry(method_ptr).or_default();
            read.at_ns = at_ns;
            read.readable = readable.is_some();
            if readable.is_some() {
                read.name = readable;
            }
        }
        let read = &self.methods[&method_ptr];
        // An unreadable Method* is named only in the last samples of a JVM that has ended: its
        // memory is gone, but nothing can have reused its Methods since they were last read.
        let name = match &read.name {
            Some(name) if read.readable || !discovery::alive(self.hotspot.pid()) => name,
            _ => return Named::Unknown,
        };
        self.frames.push(branches, &name.class, &name.name);
        Named::Frames
    }

    /// A frame in compiled code (or a stub), at the sample's time.
    fn compiled(&mut self, pc: Pc, time_ns: u64, branches: &mut Branches) -> Named {
        let at = pc.instruction();
        if let JitNames::Agent(map) = &self.jit {
            let code = map.lookup(at, time_ns);
            if pc.caller
                && code.is_none_or(|code| code.kind == CodeKind::Stub)
                && returns_to_barrier(map, pc.pc, time_ns)
            {
                return Named::Frozen;
            }
            if let Some(code) = code {
                if code.kind == CodeKind::Stub {
                    return Named::Stub;
                }
                let key = (code.start, code.load_ns);
                let unloaded_late = code
                    .unload_ns
                    .is_some_and(|unload| unload >= time_ns.saturating_add(UNLOAD_LAG_NS));
                let root = code.frames().next().unwrap_or_default();
                if !unloaded_late
                    && !still_there(&self.hotspot, &mut self.verified, key, pc.pc, root, time_ns)
                {
                    return Named::Unknown;
                }
                let before = self.frames.ids.len();
                for name in code.frames().rev() {
                    let (class, method) = name.rsplit_once('.').unwrap_or(("", name));
                    self.frames.push(branches, class, method);
                }
                let pushed = self.frames.ids.len() - before;
                self.tally.inlined_frames += pushed.saturating_sub(1) as u64;
                return if pushed > 0 {
                    Named::Frames
                } else {
                    Named::Stub
                };
            }
        }
        match self.hotspot.blob_at(pc.pc) {
            Some(blob) if !blob.is_nmethod() => Named::Stub,
            Some(blob) => match self.hotspot.compiled_method_at(pc.pc) {
                Some(compiled) => {
                    // Native methods' wrappers are not reported to agents: only compiled Java
                    // code is worth waiting for.
                    self.unreported |=
                        matches!(self.jit, JitNames::Agent(_)) && blob.name == "nmethod";
                    self.tally.code_cache_frames += 1;
                    self.frames
                        .push(branches, &compiled.method.class, &compiled.method.name);
                    Named::Frames
                }
                None => self.named_by_perf_map(at, branches),
            },
            None => self.named_by_perf_map(at, branches),
        }
    }

    /// The last resort for compiled code: the JDK's perf map, when there is one.
    fn named_by_perf_map(&mut self, at: u64, branches: &mut Branches) -> Named {
        let JitNames::PerfMap(map) = &self.jit else {
            return Named::Unknown;
        };
        match map.lookup(at).and_then(|entry| entry.name.rsplit_once('.')) {
            Some((class, method)) => {
                self.frames.push(branches, class, method);
                Named::Frames
            }
            None => Named::Unknown,
        }
    }
}

/// How late the agent may write an unload line after HotSpot freed the code: HotSpot posts the
/// event from its service thread, and the agent writes its buffer every 20 ms.
const UNLOAD_LAG_NS: u64 = 250_000_000;

/// Most code map entries whose presence in the live code cache is remembered.
const MAX_VERIFIED: usize = 100_000;

/// Most Method* reads remembered.
const MAX_METHODS: usize = 100_000;

/// How long a Method* read or a code map check that no sample needs is remembered.
const KEEP_NS: u64 = 30_000_000_000;

/// The last read of one Method* from the target.
#[derive(Debug, Default)]
struct MethodRead {
    /// When it was read ([`monotonic_ns`], the samples' clock).
    at_ns: u64,
    /// Whether it was a readable Method then.
    readable: bool,
    /// Its name when it was last readable: what the samples that arrive after the JVM ended get.
    name: Option<JavaMethod>,
}

/// Whether the code map's entry `key` (named `root`), which holds `pc`, was still the code at `pc`
/// at the sample's time `time_ns`, as far as can be told.
///
/// The map's load and unload times are when the agent heard of them, after the fact: when code
/// is freed and its addresses given to new code, the new code can run (and be sampled) before the
/// map shows the unload or the new load. So an entry not known to be unloaded well after the
/// sample is checked against the live code cache: if the code at `pc` now still has the entry's
/// name, it had it at the sample's time too (it was loaded before then); if no code is there any
/// more, or compiled code whose method cannot be read (unloaded with its class), nothing else
/// ran there; if other code is there, it replaced the entry at some point the
/// map cannot place, and the frame is `[unknown]` rather than perhaps misnamed. A check made after the sample's time answers for it, so each entry is read
/// from the target about once per batch of samples.
fn still_there(
    hotspot: &HotSpot,
    verified: &mut HashMap<(u64, u64), (u64, bool)>,
    key: (u64, u64),
    pc: u64,
    root: &str,
    time_ns: u64,
) -> bool {
    if let Some(&(at, same)) = verified.get(&key) {
        if at >= time_ns {
            return same;
        }
    }
    let now = monotonic_ns();
    let same = match hotspot.compiled_method_at(pc) {
        Some(live) => {
            root.rsplit_once('.') == Some((live.method.class.as_str(), live.method.name.as_str()))
        }
        // Freed and not reused (or the JVM is gone), or compiled code whose method is gone (its
        // class was unloaded, the code awaits flushing): nothing else can have run there.
        None => hotspot.blob_at(pc).is_none_or(|blob| blob.is_nmethod()),
    };
    if verified.len() >= MAX_VERIFIED {
        verified.clear();
    }
    verified.insert(key, (now, same));
    same
}

/// The Java frames of the sample being resolved, newest first.
#[derive(Debug, Default)]
struct Stack {
    ids: Vec<FrameId>,
    /// The stack has reached its oldest frame: the start of a virtual thread. The older frames
    /// are its carrier's, not part of it.
    complete: bool,
}

impl Stack {
    fn clear(&mut self) {
        self.ids.clear();
        self.complete = false;
    }

    /// Completes the stack of a virtual thread whose older frames are frozen in its stack chunk
    /// (see [`returns_to_barrier`]): they are `[unknown]`, and its oldest frame is
    /// `java.lang.VirtualThread.run`, as for every virtual thread.
    fn frozen(&mut self, branches: &mut Branches) {
        if self.complete {
            return;
        }
        self.ids.push(branches.jvm_frame(UNKNOWN));
        self.ids
            .push(branches.frame(VIRTUAL_THREAD_RUN.0, VIRTUAL_THREAD_RUN.1));
        self.complete = true;
    }

    /// Adds the next older frame, unless the stack is complete; a virtual thread's boundary
    /// completes it.
    fn push(&mut self, branches: &mut Branches, class: &str, method: &str) {
        if self.complete {
            return;
        }
        match Boundary::of(class, method) {
            Some(Boundary::First) => {
                self.ids.push(branches.frame(class, method));
                self.complete = true;
            }
            Some(Boundary::Below) => self.complete = true,
            None => self.ids.push(branches.frame(class, method)),
        }
    }
}

/// Where a virtual thread's stack begins, on its carrier thread's stack.
///
/// A carrier thread (a ForkJoinPool worker) runs a virtual thread through its continuation:
/// `...ForkJoinWorkerThread.run;...;jdk.internal.vm.Continuation.run` (the carrier's frames),
/// then `Continuation.enterSpecial;Continuation.enter;Continuation.enter0;
/// java.lang.VirtualThread$VThreadContinuation$1.run` (the continuation's entry, frames that
/// Java's own stack traces hide), then `java.lang.VirtualThread.run` and the virtual thread's own
/// code. The branch is the virtual thread's stack, from `VirtualThread.run` on, as
/// `Thread.getStackTrace` shows it and as JFR samples it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Boundary {
    /// The oldest frame of a virtual thread's stack: it is kept, the older ones are not.
    First,
    /// A frame of the continuation's entry, met when `VirtualThread.run` was not (compiled into
    /// one of them and named by the outer method only): it and the older frames are left out.
    Below,
}

/// The oldest frame of every virtual thread's stack: `java.lang.VirtualThread.run`.
const VIRTUAL_THREAD_RUN: (&str, &str) = ("java.lang.VirtualThread", "run");

impl Boundary {
    fn of(class: &str, method: &str) -> Option<Boundary> {
        match (class, method) {
            VIRTUAL_THREAD_RUN => Some(Boundary::First),
            ("java.lang.VirtualThread$VThreadContinuation$1", "run")
            | ("jdk.internal.vm.Continuation", "enter0" | "enter" | "enterSpecial") => {
                Some(Boundary::Below)
            }
            _ => None,
        }
    }
}

/// Names of the continuation return barrier in the code map: the stub that thaws a virtual
/// thread's next frames (`Cont thaw return barrier` on Java 21, `cont_returnBarrier` on 25).
const RETURN_BARRIERS: [&str; 2] = ["Cont thaw return barrier", "cont_returnBarrier"];

/// Whether `return_address` is the entry of the continuation return barrier.
///
/// When a virtual thread is mounted again, HotSpot copies only its newest frames back from its
/// stack chunk (on the heap) to the carrier's stack when the chunk is large or holds interpreted
/// frames, and makes the oldest frame copied return into this barrier, which copies the next ones
/// when it is reached. A frame returning there is the oldest of the virtual thread's frames on
/// the stack: the older ones are in the chunk, which the sampler's walker does not read, and
/// the frames after it are the carrier's.
fn returns_to_barrier(map: &CodeMap, return_address: u64, time_ns: u64) -> bool {
    map.lookup(return_address, time_ns).is_some_and(|code| {
        code.kind == CodeKind::Stub
            && code.start == return_address
            && code
                .frames()
                .next()
                .is_some_and(|name| RETURN_BARRIERS.contains(&name))
    })
}

/// What became of one pc in Java code.
enum Named {
    /// One or more Java frames were pushed.
    Frames,
    /// A stub or adapter: no Java frame.
    Stub,
    /// The return barrier of a virtual thread whose older frames are frozen in its stack chunk
    /// ([`returns_to_barrier`]).
    Frozen,
    /// Java code that could not be named.
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::{StackFrame, WalkEnd};

    /// The branch name of `frames` (newest first) pushed onto a stack, and whether it completed;
    /// `frozen` stands for a return into the continuation's return barrier.
    fn stack_of(frames: &[&str]) -> (String, bool) {
        let mut branches = Branches::default();
        let mut stack = Stack::default();
        for &name in frames {
            if name == "frozen" {
                stack.frozen(&mut branches);
            } else {
                let (class, method) = name.rsplit_once('.').expect("class.method");
                stack.push(&mut branches, class, method);
            }
        }
        stack.ids.reverse();
        let branch = branches.branch(&stack.ids);
        (branches.name(branch).to_string(), stack.complete)
    }

    const CARRIER: [&str; 3] = [
        "jdk.internal.vm.Continuation.run",
        "java.lang.VirtualThread.runContinuation",
        "java.util.concurrent.ForkJoinWorkerThread.run",
    ];

    #[test]
    fn a_virtual_thread_is_its_own_stack_from_its_run_method() {
        let mut frames = vec![
            "T.alpha",
            "T$$Lambda/0x10.run",
            "java.lang.Thread.runWith",
            "java.lang.VirtualThread.run",
            "java.lang.VirtualThread$VThreadContinuation$1.run",
            "jdk.internal.vm.Continuation.enter0",
            "jdk.internal.vm.Continuation.enter",
            "jdk.internal.vm.Continuation.enterSpecial",
        ];
        frames.extend(CARRIER);
        assert_eq!(
            stack_of(&frames),
            (
                "java.lang.VirtualThread.run;java.lang.Thread.runWith;T$$Lambda/0x10.run;T.alpha"
                    .to_string(),
                true
            )
        );
        // VirtualThread.run compiled into its caller and named by the outer method only.
        assert_eq!(
            stack_of(&[
                "T.alpha",
                "java.lang.VirtualThread$VThreadContinuation$1.run",
                CARRIER[0]
            ]),
            ("T.alpha".to_string(), true)
        );
        // Mounted again, its older frames still frozen in its stack chunk.
        let mut thawed = vec!["T.beta", "T.lambda$main$0", "frozen"];
        thawed.extend(CARRIER);
        assert_eq!(
            stack_of(&thawed),
            (
                "java.lang.VirtualThread.run;[unknown];T.lambda$main$0;T.beta".to_string(),
                true
            )
        );
    }

    #[test]
    fn a_platform_thread_keeps_every_frame() {
        let frames = ["T.work", "java.lang.Thread.run"];
        assert_eq!(
            stack_of(&frames),
            ("java.lang.Thread.run;T.work".to_string(), false)
        );
        // The carrier's own frames, when it runs no virtual thread.
        assert_eq!(
            stack_of(&CARRIER),
            (
                "java.util.concurrent.ForkJoinWorkerThread.run;java.lang.VirtualThread.runContinuation;jdk.internal.vm.Continuation.run"
                    .to_string(),
                false
            )
        );
    }

    #[test]
    fn each_pc_gets_the_method_of_its_interpreted_frame() {
        let frame = |pc, kind, caller| StackFrame {
            pc,
            kind,
            caller,
            deoptimized: false,
        };
        let sample = Sample {
            pid: 1,
            tid: 1,
            cpu: 0,
            time_ns: 5,
            kernel: false,
            jvm: true,
            java_thread: true,
            scanned: false,
            ip: 0x1000,
            sp: 0x7000,
            bp: 0x7100,
            stack_end: 0x7200,
            end: WalkEnd::Entry,
            frames: vec![
                frame(0x1000, FrameKind::Interpreted { method: 0xa }, false),
                frame(0x2000, FrameKind::Native { method_slot: 0 }, true),
                frame(0x3000, FrameKind::Stub { blob: 0xb }, true),
            ],
        };
        let found: Vec<(u64, u64, Option<u64>)> = pcs(&sample)
            .map(|pc| (pc.pc, pc.instruction(), pc.method_slot))
            .collect();
        assert_eq!(
            found,
            [
                (0x1000, 0x1000, Some(0xa)),
                (0x2000, 0x1fff, None),
                (0x3000, 0x2fff, None),
            ]
        );
    }
}

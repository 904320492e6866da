//! Turning one stack sample of a JVM thread into Java frames and a branch of
//! `joularcode_core::branch` (docs/architecture.md, "Decisions, and why", 4). For each pc of the
//! sampled frame-pointer walk, newest first:
//!
//! - a pc in the template interpreter: the frame's `Method*` (the slot the sampler read at fp-3
//!   words) names it through VMStructs;
//! - a pc in JIT-compiled code: the symbolizer agent's code map, at the sample's time, names the
//!   compiled method and the methods inlined into it; without an entry valid at that time (the
//!   agent is missing, or its load line is not written yet), the nmethod's debug information in
//!   the live code cache names the compiled method and the methods inlined at that pc (its
//!   scopes, [`crate::hotspot::scopes`]), else its own `Method*` the outer method alone, then the
//!   JDK's perf map if there is one;
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

mod compiled;
mod interpreted;
pub mod native;
mod scopes;
mod stack;

use std::collections::HashMap;
use std::sync::Arc;

use joularcode_core::branch::{BranchId, Branches, UNKNOWN};

use crate::hotspot::HotSpot;
use crate::jit::codemap::CodeMap;
use crate::jit::perfmap::PerfMap;
use crate::sampler::{FrameKind, Sample};
use crate::thread_names::JvmThread;
use interpreted::MethodRead;
use native::NativeNames;
use scopes::ScopeCache;
use stack::Stack;

/// How long a Method* read or a code map check that no sample needs is remembered.
const KEEP_NS: u64 = 30_000_000_000;

/// Pseudo-frame of an application thread's sample whose frames were all native code (JNI, the
/// JVM's own code called outside any Java method, a thread that has not entered Java yet).
pub const NATIVE: &str = "[native]";

/// With native frames: the newest native frame of a sample whose newest code was a stub of the
/// code cache (an adapter, a vtable stub, an arraycopy routine), not a Java frame.
pub const STUB: &str = "[stub]";

/// With native frames: the newest native frame of a sample taken in compiled code where its frame
/// was not built, or no longer (a prologue before its frame is complete, an epilogue after it is
/// popped). Its Java frames are whole and named; HotSpot's own samplers (JFR, AsyncGetCallTrace)
/// cannot walk such a stack and drop the sample.
pub const FRAME_NOT_BUILT: &str = "[frame not built]";

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
    /// Java frames of methods inlined into compiled code, named from the agent's inline records
    /// or from the nmethods' scopes in memory.
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
    /// (for a JVM thread, or a sample without Java frames: all of them), oldest first; or, when
    /// the newest code was in the code cache, [`STUB`] or [`FRAME_NOT_BUILT`] if it was one.
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
    /// what the code there was.
    verified: HashMap<(u64, u64), compiled::Verified>,
    /// What each Method* was when last read from the target (see [`MethodRead`]).
    methods: HashMap<u64, MethodRead>,
    /// The debug information of the nmethods met, when no code map names their code.
    scopes: ScopeCache,
    /// When `verified` and `methods` were last rid of what no sample needed for [`KEEP_NS`].
    swept_ns: u64,
    /// Scratch space reused by every sample: frames newest first, leaf-side native pcs.
    frames: Stack,
    native_pcs: Vec<u64>,
    /// [`STUB`] or [`FRAME_NOT_BUILT`] when the sample being resolved is one.
    leaf_pseudo: Option<&'static str>,
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
    /// The nmethod (its address and compile id) the walker found the frame in, at the sample's
    /// time, if it found it compiled.
    nmethod: Option<(u64, u32)>,
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

    /// The address at which compiled code's debug information (the code map's inline ranges)
    /// describes this frame, by HotSpot's rules (`nmethod.cpp`, `pc_desc_near`). A descriptor at
    /// offset P closes the instruction that ends at P, so its range is `[previous P + 1, P + 1)`
    /// (docs/code-map.md). A caller's pc is a return address, the end of its call instruction:
    /// `pc - 1` is in the call's range. The newest frame's pc is the start of the next
    /// instruction to run, which is the end of the one before: HotSpot's samplers (JFR,
    /// AsyncGetCallTrace) look it up as `pc + 1`, in the range of the instruction at `pc`; at
    /// `pc` itself, with a descriptor at nearly every instruction (the agent's
    /// `DebugNonSafepoints`), it would get the inlined methods of the instruction before.
    fn debug_info_address(self) -> u64 {
        if self.caller {
            self.pc.saturating_sub(1)
        } else {
            self.pc.saturating_add(1)
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
        nmethod: match frame.kind {
            FrameKind::Compiled {
                nmethod,
                compile_id,
            } if nmethod != 0 && compile_id != 0 => Some((nmethod, compile_id)),
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
            scopes: ScopeCache::default(),
            swept_ns: 0,
            frames: Stack::default(),
            native_pcs: Vec::with_capacity(16),
            leaf_pseudo: None,
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
    /// resolving samples, so that code loaded before them is known. The samples still to resolve
    /// were all taken at or after `oldest_sample_ns` (`u64::MAX`: none older than now): code
    /// unloaded well before it is forgotten. Returns the error of an unreadable map (the caller
    /// says it once; resolving goes on with the code cache).
    pub fn refresh(
        &mut self,
        oldest_sample_ns: u64,
    ) -> Result<(), crate::jit::codemap::CodeMapError> {
        match &mut self.jit {
            JitNames::Agent(map) => map.refresh(oldest_sample_ns).map(|_| ()),
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

    /// Every [`KEEP_NS`] / 3 of samples' time, drops the Method* reads, code map checks and
    /// nmethods' tables that no sample needed for [`KEEP_NS`]: those of classes unloaded since, in a JVM that loads
    /// ever-new ones, would otherwise pile up to the caps.
    fn forget_unused(&mut self, now_ns: u64) {
        if now_ns < self.swept_ns.saturating_add(KEEP_NS / 3) {
            return;
        }
        self.swept_ns = now_ns;
        let cutoff = now_ns.saturating_sub(KEEP_NS);
        self.methods.retain(|_, read| read.at_ns >= cutoff);
        self.verified.retain(|_, check| check.at_ns >= cutoff);
        self.scopes.forget_unused(cutoff);
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
        self.leaf_pseudo = None;
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
            if !pc.caller {
                self.leaf_pseudo = match named {
                    Named::Stub => Some(STUB),
                    _ if sample.leaf_unbuilt => Some(FRAME_NOT_BUILT),
                    _ => None,
                };
            }
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
        names.extend(self.leaf_pseudo.map(Arc::from));
        names
    }
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
mod tests;

//! Compiled frames: named by the symbolizer agent's code map (with the methods inlined into them)
//! when an entry was valid at the sample's time and the live code cache agrees (a native nmethod
//! the map misnames, such as a method-handle intrinsic, by its own `Method*`), else by the
//! nmethod's scopes in the code cache (with the methods inlined at the pc) or its outer method,
//! else by the JDK's perf map; stubs are no Java frame, and the continuation's return barrier
//! ends a virtual thread's frames on the stack.

use std::collections::HashMap;

use joularcode_core::branch::Branches;

use super::{JitNames, Named, Pc, Resolver};
use crate::hotspot::codecache::NMethodInfo;
use crate::hotspot::{HotSpot, JavaMethod};
use crate::jit::codemap::{CodeKind, CodeMap};
use crate::sampler::monotonic_ns;

impl Resolver {
    /// A frame in compiled code (or a stub), at the sample's time.
    pub(super) fn compiled(&mut self, pc: Pc, time_ns: u64, branches: &mut Branches) -> Named {
        let at = pc.debug_info_address();
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
                if !unloaded_late {
                    match live_code(&self.hotspot, &mut self.verified, key, pc, root, time_ns) {
                        Live::Same => {}
                        Live::Replaced => return self.replaced(pc, time_ns, branches),
                        Live::Native(method) => {
                            self.frames.push(branches, &method.class, &method.name);
                            return Named::Frames;
                        }
                    }
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
        // Compiled code the map does not hold yet: worth waiting for the agent's report of it,
        // unless it is a stub or a native nmethod (no method is inlined into those), and the
        // more so when the code is gone from the code cache already.
        let agent = matches!(self.jit, JitNames::Agent(_));
        match self.hotspot.blob_at(pc.pc) {
            Some(blob) if !blob.is_nmethod() => Named::Stub,
            Some(blob) => match self.hotspot.compiled_method(&blob) {
                Some(compiled) => {
                    self.unreported |= agent && compiled.comp_level != NATIVE_TIER;
                    self.named_by_nmethod(&blob, &compiled, pc, time_ns, branches)
                }
                None => {
                    self.unreported |= agent;
                    self.named_by_perf_map(at, branches)
                }
            },
            None => {
                self.unreported |= agent;
                self.named_by_perf_map(at, branches)
            }
        }
    }

    /// A frame whose code map entry other code replaced (the live check's [`Live::Replaced`]):
    /// named from the code cache when the nmethod at its pc is the one the walker found it in
    /// at the sample's time (the same address and compile id: compile ids are not reused), else
    /// `[unknown]`.
    fn replaced(&mut self, pc: Pc, time_ns: u64, branches: &mut Branches) -> Named {
        let Some((address, compile_id)) = pc.nmethod else {
            return Named::Unknown;
        };
        let walked = self
            .hotspot
            .blob_at(pc.pc)
            .filter(|blob| blob.address == address)
            .and_then(|blob| Some((self.hotspot.compiled_method(&blob)?, blob)))
            .filter(|(compiled, _)| compiled.compile_id == compile_id);
        match walked {
            Some((compiled, blob)) => {
                self.named_by_nmethod(&blob, &compiled, pc, time_ns, branches)
            }
            None => Named::Unknown,
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

/// What the live code cache says of a code map entry at a sample's pc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Live {
    /// The entry was the code at the pc, as far as can be told: the map names the frame.
    Same,
    /// The entry is a native nmethod (a method-handle intrinsic such as `invokeBasic` or
    /// `linkToStatic`, or a native method's wrapper) that the map names after another method of
    /// its class: the code cache's own record names it.
    Native(JavaMethod),
    /// Other code replaced the entry at a time the map cannot place: the frame is `[unknown]`,
    /// unless the walker found it in the nmethod now at the pc ([`Resolver::replaced`]).
    Replaced,
}

/// A code map entry's last check against the live code cache.
#[derive(Debug, Clone)]
pub(super) struct Verified {
    /// When it was made ([`monotonic_ns`], the samples' clock).
    pub(super) at_ns: u64,
    /// What it found.
    live: Live,
    /// The nmethod found at the pc then (its address and what it compiles), if there was one.
    nmethod: Option<(u64, NMethodInfo)>,
}

/// Whether the code map's entry `key` (named `root`), which holds `pc`, was still the code at `pc`
/// at the sample's time `time_ns`, as far as can be told, and which name is right for it.
///
/// The map's load and unload times are when the agent heard of them, after the fact: when code
/// is freed and its addresses given to new code, the new code can run (and be sampled) before the
/// map shows the unload or the new load. So an entry not known to be unloaded well after the
/// sample is checked against the live code cache: if the code at `pc` now still has the entry's
/// name, it had it at the sample's time too (it was loaded before then); if no code is there any
/// more, or compiled code whose method cannot be read (unloaded with its class), nothing else
/// ran there; if other code is there, it replaced the entry at some point the map cannot place,
/// and the frame is not named after the entry. One exception: JVMTI reports every
/// method-handle intrinsic of a class under one method's name, so a native nmethod (tier 0: no
/// method is inlined into it) of the entry's class is named by its own `Method*`.
///
/// A check made after the sample's time answers for it. So does a check that found the very
/// nmethod the walker found the frame in at the sample's time (the same address and compile id:
/// compile ids are not reused): then nothing is read. Otherwise the entry is read from the target
/// about once per batch of samples, starting from the nmethod the last check found
/// ([`HotSpot::blob_at_near`]: one system call while the pc is still in it); and when the pc is
/// still in the very nmethod found by the last check (same address, `Method*`, compile id and
/// tier), that check's answer holds without reading the method's name again.
fn live_code(
    hotspot: &HotSpot,
    verified: &mut HashMap<(u64, u64), Verified>,
    key: (u64, u64),
    pc: Pc,
    root: &str,
    time_ns: u64,
) -> Live {
    let last = verified.get(&key);
    let walked_in = |last: &Verified| {
        pc.nmethod.is_some()
            && last
                .nmethod
                .map(|(address, info)| (address, info.compile_id))
                == pc.nmethod
    };
    if let Some(last) = last.filter(|last| last.at_ns >= time_ns || walked_in(last)) {
        return last.live.clone();
    }
    let pc = pc.pc;
    let now = monotonic_ns();
    let blob = match last.and_then(|last| last.nmethod) {
        Some((near, _)) => hotspot.blob_at_near(pc, near),
        None => hotspot.blob_at(pc),
    };
    let nmethod = blob
        .as_ref()
        .and_then(|blob| Some((blob.address, hotspot.nmethod(blob)?)));
    let live = match last {
        Some(last) if nmethod.is_some() && last.nmethod == nmethod => last.live.clone(),
        _ => match nmethod.and_then(|(_, info)| Some((hotspot.method(info.method)?, info))) {
            Some((method, info)) => {
                let (class, name) = root.rsplit_once('.').unwrap_or(("", root));
                if (class, name) == (method.class.as_str(), method.name.as_str()) {
                    Live::Same
                } else if info.comp_level == NATIVE_TIER && class == method.class {
                    Live::Native(method)
                } else {
                    Live::Replaced
                }
            }
            // Freed and not reused (or the JVM is gone), or compiled code whose method is gone
            // (its class was unloaded, the code awaits flushing): nothing else can have run there.
            None if blob.is_none_or(|blob| blob.is_nmethod()) => Live::Same,
            None => Live::Replaced,
        },
    };
    if verified.len() >= MAX_VERIFIED {
        verified.clear();
    }
    verified.insert(
        key,
        Verified {
            at_ns: now,
            live: live.clone(),
            nmethod,
        },
    );
    live
}

/// The tier of a native nmethod (HotSpot's `CompLevel_none`): a native method's wrapper or a
/// method-handle intrinsic, whose code holds no inlined method.
const NATIVE_TIER: u8 = 0;

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

//! Resolution of recorded samples against a JVM's memory image ([`crate::hotspot::fake`]):
//! interpreted, compiled, inlined, stub, native and unknown frames, without root and without a JVM.

use super::*;
use crate::hotspot::fake::FakeJvm;
use crate::sampler::{StackFrame, WalkEnd};

/// A sample of `frames` (newest first) taken at `time_ns`.
fn sample(time_ns: u64, frames: Vec<StackFrame>) -> Sample {
    Sample {
        pid: std::process::id(),
        tid: 1,
        cpu: 0,
        time_ns,
        kernel: false,
        jvm: true,
        java_thread: true,
        scanned: false,
        thread_in_r15: false,
        leaf_unbuilt: false,
        ip: frames.first().map_or(0, |frame| frame.pc),
        sp: 0x7000,
        bp: 0x7100,
        stack_end: 0x7200,
        end: WalkEnd::Entry,
        frames,
    }
}

/// A frame at `pc` of `kind`; every frame but the newest is a caller's (its pc a return address).
fn frame(pc: u64, kind: FrameKind, caller: bool) -> StackFrame {
    StackFrame {
        pc,
        kind,
        caller,
        deoptimized: false,
    }
}

fn interpreted(pc: u64, method: u64, caller: bool) -> StackFrame {
    frame(pc, FrameKind::Interpreted { method }, caller)
}

fn native(pc: u64, caller: bool) -> StackFrame {
    frame(pc, FrameKind::Native { method_slot: 0 }, caller)
}

fn compiled(pc: u64, caller: bool) -> StackFrame {
    frame(
        pc,
        FrameKind::Compiled {
            nmethod: 0,
            compile_id: 0,
        },
        caller,
    )
}

/// A JVM image with `demo.Main.run` (interpreted), `demo.Hot.compute` compiled, into which
/// `demo.Hot.square` is inlined at code offsets 0x40..0x80, and a stub.
///
/// How its compiled code is named: by the agent's code map, by the nmethod's scopes, or by the
/// nmethod's outer method alone (an nmethod without scopes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Naming {
    Agent,
    Scopes,
    Outer,
}

struct Image {
    resolver: Resolver,
    branches: Branches,
    run: u64,
    interpreter: u64,
    compute: (u64, u64),
    stub: u64,
    free: u64,
}

/// When the agent reported `compute`'s code (1 s: more than the lag a load may be reported
/// with, after time 0).
const LOADED_NS: u64 = 1_000_000_000;

/// The code map the agent would write for `compute`'s code, loaded at [`LOADED_NS`].
fn code_map(compute: (u64, u64)) -> JitNames {
    use joularcode_core::code_map as format;
    let mut map = CodeMap::new("fake.map");
    let mut text = Vec::new();
    format::header(&mut text, 1);
    format::method(&mut text, 0, "demo.Hot.compute");
    format::method(&mut text, 1, "demo.Hot.square");
    let inlined = format::InlineRange {
        from: 0x40,
        to: 0x80,
        chain: vec![0, 1],
    };
    let size = u32::try_from(compute.1 - compute.0).expect("a small method");
    format::compiled_load(&mut text, false, LOADED_NS, compute.0, size, 0, &[inlined]);
    map.feed(&text).expect("a well-formed code map");
    JitNames::Agent(Box::new(map))
}

impl Image {
    fn new(naming: Naming) -> Image {
        Image::with_native_frames(naming, false)
    }

    /// An image whose resolver names native frames too, with `native_frames`.
    fn with_native_frames(naming: Naming, native_frames: bool) -> Image {
        let mut jvm = FakeJvm::default();
        let run = jvm.method("demo/Main", "run");
        let compute_method = jvm.method("demo/Hot", "compute");
        let square = jvm.method("demo/Hot", "square");
        let compute = jvm.nmethod(compute_method, 7, 0x100);
        if naming == Naming::Scopes {
            jvm.scopes(compute.0, 0x40..0x80, &[compute_method, square]);
        }
        let (stub, _) = jvm.stub("StubRoutines (1)", 0x40);
        let interpreter = jvm.interpreter().0 + 0x10;
        let free = jvm.free_code();
        let jit = if naming == Naming::Agent {
            code_map(compute)
        } else {
            JitNames::CodeCache
        };
        Image {
            resolver: Resolver::new(jvm.open(std::process::id()), jit, native_frames),
            branches: Branches::new(&["demo."]),
            run,
            interpreter,
            compute,
            stub,
            free,
        }
    }

    /// The branch of `frames` resolved at time 1000, and the stats it added.
    fn resolve(&mut self, frames: Vec<StackFrame>) -> (String, ResolveStats) {
        let before = self.resolver.stats();
        let resolved =
            self.resolver
                .resolve(&sample(LOADED_NS + 900, frames), None, &mut self.branches);
        let after = self.resolver.stats();
        let added = ResolveStats {
            samples: after.samples - before.samples,
            java_frames: after.java_frames - before.java_frames,
            inlined_frames: after.inlined_frames - before.inlined_frames,
            code_cache_frames: after.code_cache_frames - before.code_cache_frames,
            unknown_frames: after.unknown_frames - before.unknown_frames,
            without_java_frame: after.without_java_frame - before.without_java_frame,
        };
        (self.branches.name(resolved.branch).to_string(), added)
    }
}

#[test]
fn an_interpreted_frame_is_named_by_its_method() {
    let mut image = Image::new(Naming::Outer);
    let (run, pc) = (image.run, image.interpreter);
    let (branch, stats) = image.resolve(vec![interpreted(pc, run, false), native(0x1000, true)]);
    assert_eq!(branch, "demo.Main.run");
    assert_eq!((stats.samples, stats.java_frames), (1, 1));
}

#[test]
fn a_compiled_frame_without_the_agent_or_scopes_is_named_by_its_nmethod() {
    let mut image = Image::new(Naming::Outer);
    let (run, pc, code) = (image.run, image.interpreter, image.compute.0);
    let (branch, stats) = image.resolve(vec![
        compiled(code + 0x50, false),
        interpreted(pc, run, true),
    ]);
    // Neither the agent nor the nmethod's scopes say that square is inlined: the outer method
    // names the frame.
    assert_eq!(branch, "demo.Main.run;demo.Hot.compute");
    assert_eq!((stats.java_frames, stats.code_cache_frames), (2, 1));
}

#[test]
fn the_agents_code_map_or_the_nmethods_scopes_name_the_inlined_methods() {
    for naming in [Naming::Agent, Naming::Scopes] {
        let mut image = Image::new(naming);
        let (run, pc, code) = (image.run, image.interpreter, image.compute.0);
        let (branch, stats) = image.resolve(vec![
            compiled(code + 0x50, false),
            interpreted(pc, run, true),
        ]);
        assert_eq!(branch, "demo.Main.run;demo.Hot.compute;demo.Hot.square");
        assert_eq!(
            (
                stats.java_frames,
                stats.inlined_frames,
                stats.code_cache_frames
            ),
            (3, 1, u64::from(naming == Naming::Scopes)),
            "{naming:?}"
        );
        // A return address right after the inlined range is the call's: still in square.
        let (branch, _) = image.resolve(vec![
            native(0x1000, false),
            compiled(code + 0x80, true),
            interpreted(pc, run, true),
        ]);
        assert_eq!(branch, "demo.Main.run;demo.Hot.compute;demo.Hot.square");
        // Outside the inlined range, compute alone.
        let (branch, _) = image.resolve(vec![compiled(code + 0x10, false)]);
        assert_eq!(branch, "demo.Hot.compute", "{naming:?}");
    }
}

#[test]
fn the_newest_frame_is_looked_up_as_hotspot_does_and_a_caller_at_its_call() {
    // Descriptors at every instruction, as with the agent: the inline range [0x40, 0x80) is
    // square's instructions from the one ending at 0x40 to the one ending at 0x7f. The code map
    // and the nmethod's scopes are looked up alike.
    for naming in [Naming::Agent, Naming::Scopes] {
        let mut image = Image::new(naming);
        let code = image.compute.0;
        let resolve = |image: &mut Image, pc: u64, caller: bool| {
            let frames = if caller {
                vec![native(0x1000, false), compiled(code + pc, true)]
            } else {
                vec![compiled(code + pc, false)]
            };
            image.resolve(frames).0
        };
        let (square, compute) = ("demo.Hot.compute;demo.Hot.square", "demo.Hot.compute");
        // The newest frame is about to run the instruction at its pc: 0x3f starts square's
        // first instruction, 0x7f starts the first one after square.
        assert_eq!(resolve(&mut image, 0x3f, false), square, "{naming:?}");
        assert_eq!(resolve(&mut image, 0x7f, false), compute, "{naming:?}");
        // A caller's pc is the end of its call: at 0x40 the call was compute's, at 0x80
        // square's.
        assert_eq!(resolve(&mut image, 0x40, true), compute, "{naming:?}");
        assert_eq!(resolve(&mut image, 0x80, true), square, "{naming:?}");
    }
}

#[test]
fn compiled_code_the_agent_has_not_reported_yet_waits() {
    let mut image = Image::new(Naming::Agent);
    // A sample well before the code map's load line: the agent had not reported the code yet.
    let early = sample(LOADED_NS / 2, vec![compiled(image.compute.0 + 0x50, false)]);
    assert_eq!(
        image
            .resolver
            .resolve_or_wait(&early, None, &mut image.branches),
        None
    );
    assert_eq!(image.resolver.stats().samples, 0, "nothing counted");
    let resolved = image.resolver.resolve(&early, None, &mut image.branches);
    assert_eq!(image.branches.name(resolved.branch), "demo.Hot.compute");
    assert_eq!(image.resolver.stats().code_cache_frames, 1);
    // A sample shortly before it: the code ran before HotSpot reported it, and the map names it
    // whole, the inlined method included.
    let reported_late = sample(
        LOADED_NS - 100_000_000,
        vec![compiled(image.compute.0 + 0x50, false)],
    );
    let resolved = image
        .resolver
        .resolve_or_wait(&reported_late, None, &mut image.branches)
        .expect("named by the map");
    assert_eq!(
        image.branches.name(resolved.branch),
        "demo.Hot.compute;demo.Hot.square"
    );
}

#[test]
fn compiled_code_gone_from_the_code_cache_waits_for_the_agent() {
    let mut image = Image::new(Naming::Agent);
    // No code at the pc any more, and none in the map at the sample's time: the agent may
    // still report it.
    let gone = sample(LOADED_NS / 2, vec![compiled(image.free + 0x10, false)]);
    assert_eq!(
        image
            .resolver
            .resolve_or_wait(&gone, None, &mut image.branches),
        None
    );
    let resolved = image.resolver.resolve(&gone, None, &mut image.branches);
    assert_eq!(image.branches.name(resolved.branch), UNKNOWN);
}

#[test]
fn stubs_and_native_frames_are_left_out() {
    let mut image = Image::new(Naming::Outer);
    let (run, pc, stub) = (image.run, image.interpreter, image.stub);
    let (branch, stats) = image.resolve(vec![
        native(0x1000, false),
        frame(stub + 1, FrameKind::Stub { blob: 0 }, true),
        interpreted(pc, run, true),
    ]);
    assert_eq!(branch, "demo.Main.run");
    assert_eq!((stats.java_frames, stats.unknown_frames), (1, 0));
    // Native frames only: the sample is native code's.
    let (branch, stats) = image.resolve(vec![native(0x1000, false), native(0x2000, true)]);
    assert_eq!(branch, NATIVE);
    assert_eq!(stats.without_java_frame, 1);
}

/// A sample whose newest code was a stub, or compiled code where its frame was not built, says so
/// as its newest native frame; one whose newest frames were native code names them only.
#[test]
fn a_stub_or_a_frame_not_built_at_the_leaf_is_its_native_frame() {
    let mut image = Image::with_native_frames(Naming::Outer, true);
    let (run, pc, stub, compute) = (image.run, image.interpreter, image.stub, image.compute.0);
    let mut native_of = |leaf_unbuilt: bool, frames: Vec<StackFrame>| {
        let mut sample = sample(LOADED_NS + 900, frames);
        sample.leaf_unbuilt = leaf_unbuilt;
        let resolved = image.resolver.resolve(&sample, None, &mut image.branches);
        resolved
            .native
            .iter()
            .map(|name| name.to_string())
            .collect::<Vec<_>>()
    };
    let in_stub = vec![
        frame(stub + 1, FrameKind::Stub { blob: 0 }, false),
        interpreted(pc, run, true),
    ];
    assert_eq!(native_of(false, in_stub), [STUB]);
    let in_compiled = || vec![compiled(compute + 0x10, false), interpreted(pc, run, true)];
    assert_eq!(native_of(true, in_compiled()), [FRAME_NOT_BUILT]);
    assert!(native_of(false, in_compiled()).is_empty());
    let under_native = vec![
        native(0x1000, false),
        frame(stub + 1, FrameKind::Stub { blob: 0 }, true),
        interpreted(pc, run, true),
    ];
    let names = native_of(false, under_native);
    assert_eq!(names.len(), 1);
    assert_ne!(names[0], STUB);
}

#[test]
fn frames_that_cannot_be_named_are_unknown() {
    let mut image = Image::new(Naming::Outer);
    let (run, pc, free) = (image.run, image.interpreter, image.free);
    // A Method* that is no Method, then a run of two pcs in no blob: one [unknown] each run.
    let (branch, stats) = image.resolve(vec![
        interpreted(pc, run + 8, false),
        compiled(free, true),
        compiled(free + 8, true),
        interpreted(pc, run, true),
    ]);
    assert_eq!(branch, "demo.Main.run;[unknown]");
    assert_eq!((stats.java_frames, stats.unknown_frames), (1, 3));
    // No Java frame could be named, but the sample was in Java code.
    let (branch, stats) = image.resolve(vec![compiled(free, false)]);
    assert_eq!(branch, UNKNOWN);
    assert_eq!(stats.without_java_frame, 1);
}

#[test]
fn a_jvm_thread_gets_its_pseudo_frame() {
    let mut image = Image::new(Naming::Outer);
    let resolved = image.resolver.resolve(
        &sample(1000, vec![native(0x1000, false)]),
        Some(JvmThread::Gc),
        &mut image.branches,
    );
    assert_eq!(image.branches.name(resolved.branch), "[GC]");
}

#[test]
fn each_pc_gets_the_method_of_its_interpreted_frame() {
    let sample = sample(
        5,
        vec![
            frame(0x1000, FrameKind::Interpreted { method: 0xa }, false),
            frame(0x2000, FrameKind::Native { method_slot: 0 }, true),
            frame(0x3000, FrameKind::Stub { blob: 0xb }, true),
        ],
    );
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

#[test]
fn native_nmethods_the_code_map_misnames_are_named_by_the_code_cache() {
    // JVMTI reports every method-handle intrinsic under one name: the agent's map calls both
    // intrinsics (native nmethods) invokeBasic. A compiled (tier 4) method of the same class, and
    // a native nmethod of another class, at an address the map gives to another method, are code
    // that replaced the map's entry: [unknown].
    let mut jvm = FakeJvm::default();
    let handle = "java/lang/invoke/MethodHandle";
    let basic = jvm.method(handle, "invokeBasic");
    let basic = jvm.native_nmethod(basic, 11, 0x40);
    let link = jvm.method(handle, "linkToStatic");
    let link = jvm.native_nmethod(link, 12, 0x40);
    let compiled_code = jvm.method(handle, "asType");
    let compiled_code = jvm.nmethod(compiled_code, 13, 0x40);
    let other = jvm.method("demo/Main", "nativeWork");
    let other = jvm.native_nmethod(other, 14, 0x40);
    let unmapped = jvm.method(handle, "linkToVirtual");
    let unmapped = jvm.native_nmethod(unmapped, 15, 0x40);
    let mut text = Vec::new();
    joularcode_core::code_map::header(&mut text, 1);
    joularcode_core::code_map::method(&mut text, 0, "java.lang.invoke.MethodHandle.invokeBasic");
    for code in [basic, link, compiled_code, other] {
        joularcode_core::code_map::compiled_load(&mut text, false, 100, code.0, 0x40, 0, &[]);
    }
    let mut map = CodeMap::new("fake.map");
    map.feed(&text).expect("a well-formed code map");
    let jit = JitNames::Agent(Box::new(map));
    let mut resolver = Resolver::new(jvm.open(std::process::id()), jit, false);
    let mut branches = Branches::new::<&str>(&[]);
    let mut branch = |code: (u64, u64)| {
        let resolved = resolver.resolve(
            &sample(1000, vec![compiled(code.0 + 8, false)]),
            None,
            &mut branches,
        );
        branches.name(resolved.branch).to_string()
    };
    assert_eq!(branch(basic), "java.lang.invoke.MethodHandle.invokeBasic");
    assert_eq!(branch(link), "java.lang.invoke.MethodHandle.linkToStatic");
    assert_eq!(branch(compiled_code), UNKNOWN);
    assert_eq!(branch(other), UNKNOWN);
    // Not in the map yet: nothing inlined to wait for, the code cache names it at once.
    let early = sample(1000, vec![compiled(unmapped.0 + 8, false)]);
    let resolved = resolver
        .resolve_or_wait(&early, None, &mut branches)
        .expect("a native nmethod does not wait for the agent");
    assert_eq!(
        branches.name(resolved.branch),
        "java.lang.invoke.MethodHandle.linkToVirtual"
    );
}

/// `demo.Hot.compute`'s nmethod (compile 7), in a code map, and in memory that a test changes as
/// HotSpot does when it compiles other code at the same address.
struct Recompiled {
    resolver: Resolver,
    branches: Branches,
    mem: crate::hotspot::fake::SharedMemory,
    compute: (u64, u64),
    compute_method: u64,
    other: u64,
    /// The nmethod's address: what the walker gives a frame in it.
    nmethod: u64,
}

impl Recompiled {
    fn new() -> Recompiled {
        let mut jvm = FakeJvm::default();
        let compute_method = jvm.method("demo/Hot", "compute");
        let other = jvm.method("demo/Cold", "other");
        let compute = jvm.nmethod(compute_method, 7, 0x100);
        let (hotspot, mem) = jvm.open_shared(std::process::id());
        let nmethod = hotspot.blob_at(compute.0).expect("the nmethod").address;
        Recompiled {
            resolver: Resolver::new(hotspot, code_map(compute), false),
            branches: Branches::new(&["demo."]),
            mem,
            compute,
            compute_method,
            other,
            nmethod,
        }
    }

    /// The pc of the frames sampled.
    fn pc(&self) -> u64 {
        self.compute.0 + 0x10
    }

    /// The branch of a sample taken now of a frame at the pc, of `kind`.
    fn branch(&mut self, kind: FrameKind) -> String {
        let now = crate::sampler::monotonic_ns().max(LOADED_NS + 900);
        let sample = sample(now, vec![frame(self.pc(), kind, false)]);
        let resolved = self.resolver.resolve(&sample, None, &mut self.branches);
        self.branches.name(resolved.branch).to_string()
    }

    /// The branch of a frame the walker found in the nmethod at its address, as compile
    /// `compile_id`.
    fn walked(&mut self, compile_id: u32) -> String {
        let nmethod = self.nmethod;
        self.branch(FrameKind::Compiled {
            nmethod,
            compile_id,
        })
    }

    /// HotSpot compiles `method` at the nmethod's address, as compile `compile_id`.
    fn compile_into(&self, method: u64, compile_id: u32) {
        self.mem.0.lock().expect("the fake memory").compile_into(
            self.compute.0,
            method,
            compile_id,
            4,
        );
    }
}

#[test]
fn a_code_map_entry_names_its_pc_until_other_code_is_compiled_there() {
    // Checked once per batch of samples: a later batch finds the very nmethod (address, method,
    // compile id) checked before and keeps its answer; once HotSpot has put other code there (the
    // same address, another method and compile id), the entry's name no longer holds.
    let mut image = Recompiled::new();
    let unwalked = compiled(image.pc(), false).kind;
    assert_eq!(image.branch(unwalked), "demo.Hot.compute");
    assert_eq!(image.branch(unwalked), "demo.Hot.compute");
    image.compile_into(image.other, 8);
    assert_eq!(image.branch(unwalked), UNKNOWN);
    image.compile_into(image.compute_method, 9);
    assert_eq!(image.branch(unwalked), "demo.Hot.compute");
}

#[test]
fn a_frame_in_the_nmethod_a_check_found_keeps_that_checks_answer() {
    // The walker gives a compiled frame the address and compile id of its nmethod at the
    // sample's time. A check that found that very nmethod answers for the later samples in it
    // without reading the target again, even once other code has taken its place; a frame the
    // walker found in the new code (another compile id) is checked, and the entry's name no
    // longer holds there: the frame is named from the new nmethod, which the walker found it
    // in, as long as that nmethod is at the pc.
    let mut image = Recompiled::new();
    assert_eq!(image.walked(7), "demo.Hot.compute");
    image.compile_into(image.other, 8);
    assert_eq!(image.walked(7), "demo.Hot.compute");
    assert_eq!(image.walked(8), "demo.Cold.other");
    image.compile_into(image.compute_method, 9);
    assert_eq!(
        image.walked(8),
        UNKNOWN,
        "compile 8 is gone: nothing names its frame"
    );
}

//! Speed of `Resolver::resolve`, which runs for every sample: a live JVM (Java 17) runs
//! `testkit/java/StacksDeep.java` with the symbolizer agent, a stack of 22 Java frames where
//! interpreted and compiled (C1/C2, nothing inlined) methods alternate; samples of it are
//! recorded with the BPF sampler, then resolved again and again against the live JVM (Method*
//! reads from its memory, code map lookups). Then the cost of naming inlined methods: a live JVM
//! (Java 17) runs `testkit/java/AgentHot.java` with the agent, whose hot chain (work, outer,
//! middle, inner) C2 compiles into one nmethod; its samples are resolved with the agent's code map
//! and with the code cache alone, where each nmethod's scopes are read from memory once and kept.
//! Needs root and the JDKs of scripts/test-setup.sh:
//!
//! ```sh
//! sudo -E bash -c '. scripts/test-setup.sh && cargo bench -p joularcode-bench --bench resolve_sample'
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use joularcode_bpf::hotspot::HotSpot;
use joularcode_bpf::jit::codemap::CodeMap;
use joularcode_bpf::resolve::{JitNames, Resolver};
use joularcode_bpf::sampler::{FrameKind, Sample, Sampler, WalkedJvm};
use joularcode_core::branch::Branches;
use joularcode_testkit::{agent_library, jdk, Jvm};

/// Samples of the deep thread: at least this many frames in the walk.
const DEEP: usize = 20;

/// Refreshes `resolvers` every 100 ms for `time`: they read the code the agent reports, and
/// keep its lease on the map (the agent stops writing after 5 s without a reader).
fn keep_reading(resolvers: &mut [Resolver], time: Duration) {
    let start = Instant::now();
    while start.elapsed() < time {
        std::thread::sleep(Duration::from_millis(100));
        for resolver in resolvers.iter_mut() {
            resolver.refresh(u64::MAX).expect("the agent's code map");
        }
    }
}

/// Records the samples of JVM `pid` that `keep` keeps, for two seconds, while `resolvers` read
/// the agent's code map.
fn record(pid: u32, keep: impl Fn(&Sample) -> bool, resolvers: &mut [Resolver]) -> Vec<Sample> {
    let sampler = Sampler::new(1000).expect("the sampler needs root");
    let hotspot = HotSpot::open(pid).expect("read the JVM");
    let _walked = WalkedJvm::register(&sampler, &hotspot).expect("the walker takes the JVM");
    sampler.track(pid).expect("track the JVM");
    let start = Instant::now();
    let mut samples = Vec::new();
    while start.elapsed() < Duration::from_secs(2) {
        keep_reading(resolvers, Duration::from_millis(100));
        samples.extend(
            sampler
                .samples()
                .try_iter()
                .flatten()
                .filter(|s| s.pid == pid && keep(s)),
        );
    }
    assert!(samples.len() >= 100, "{} samples", samples.len());
    samples
}

/// A resolver of JVM `pid`, with its agent's code map when `agent` is set, else its code cache
/// alone.
fn resolver(pid: u32, agent: bool, native: bool) -> Resolver {
    let hotspot = HotSpot::open(pid).expect("open the JVM");
    let jit = if agent {
        JitNames::Agent(Box::new(CodeMap::of_process(pid, pid)))
    } else {
        JitNames::CodeCache
    };
    let mut resolver = Resolver::new(hotspot, jit, native);
    resolver.refresh(u64::MAX).expect("the agent's code map");
    resolver
}

/// For each resolver and its name: resolves `samples` once, says the deepest branch and the
/// resolver's counts, then measures resolving them in turn.
fn measure(c: &mut Criterion, resolvers: [Resolver; 2], names: [&str; 2], samples: &[Sample]) {
    for (resolver, name) in resolvers.into_iter().zip(names) {
        measure_one(c, name, resolver, samples);
    }
}

/// Resolves `samples` once with `resolver`, says what it found, then measures it as `name`.
fn measure_one(c: &mut Criterion, name: &str, mut resolver: Resolver, samples: &[Sample]) {
    let mut branches = Branches::new(&[] as &[&str]);
    let resolved: Vec<_> = samples
        .iter()
        .map(|s| resolver.resolve(s, None, &mut branches).branch)
        .collect();
    let deepest = resolved
        .into_iter()
        .max_by_key(|&b| branches.frames(b).count())
        .expect("samples");
    eprintln!(
        "{name}: {} samples; deepest branch ({} frames): {}",
        samples.len(),
        branches.frames(deepest).count(),
        branches.name(deepest)
    );
    eprintln!("{:?}", resolver.stats());
    let mut next = samples.iter().cycle();
    c.bench_function(name, |b| {
        b.iter(|| {
            let sample = next.next().expect("cycle");
            black_box(resolver.resolve(black_box(sample), None, &mut branches))
        })
    });
}

fn bench(c: &mut Criterion) {
    let agent = format!("-agentpath:{}", agent_library().display());
    let jvm = Jvm::start(
        &jdk(17),
        &[
            &agent,
            "-XX:CompileCommand=quiet",
            "-XX:CompileCommand=exclude,StacksDeep.i",
            "-XX:CompileCommand=dontinline,StacksDeep::*",
        ],
        "StacksDeep",
        &[],
    );
    let pid = jvm.pid();
    let mut resolvers = [resolver(pid, true, false), resolver(pid, true, true)];
    // Let the JIT compile c and leaf.
    keep_reading(&mut resolvers, Duration::from_secs(3));
    let samples = record(pid, |s| s.frames.len() >= DEEP, &mut resolvers);
    let names = [
        "resolve a 22-frame mixed sample",
        "resolve a 22-frame mixed sample, native frames named",
    ];
    measure(c, resolvers, names, &samples);
    drop(jvm);
}

fn bench_inlined(c: &mut Criterion) {
    let agent = format!("-agentpath:{}=perfmap=no", agent_library().display());
    let jvm = Jvm::start(&jdk(17), &[&agent], "AgentHot", &[]);
    let pid = jvm.pid();
    let mut resolvers = [resolver(pid, true, false), resolver(pid, false, false)];
    let compiled = |s: &Sample| {
        s.frames
            .iter()
            .any(|f| matches!(f.kind, FrameKind::Compiled { .. }))
    };
    let samples = record(pid, compiled, &mut resolvers);
    let names = [
        "resolve an inlined sample from the code map",
        "resolve an inlined sample from the nmethods' scopes",
    ];
    measure(c, resolvers, names, &samples);
    drop(jvm);
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5));
    targets = bench, bench_inlined
}
criterion_main!(benches);

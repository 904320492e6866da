//! Speed of `Resolver::resolve`, which runs for every sample: a live JVM (Java 17) runs
//! `testkit/java/StacksDeep.java` with the symbolizer agent, a stack of 22 Java frames where
//! interpreted and compiled (C1/C2, nothing inlined) methods alternate; samples of it are
//! recorded with the BPF sampler, then resolved again and again against the live JVM (Method*
//! reads from its memory, code map lookups). Needs root and the JDKs of scripts/test-setup.sh:
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
use joularcode_bpf::sampler::{Sample, Sampler, WalkedJvm};
use joularcode_core::branch::Branches;
use joularcode_testkit::{agent_library, jdk, Jvm};

/// Samples of the deep thread: at least this many frames in the walk.
const DEEP: usize = 20;

/// Records samples of the main thread's deep stack for two seconds.
fn record(pid: u32) -> Vec<Sample> {
    let sampler = Sampler::new(1000).expect("the sampler needs root");
    let hotspot = HotSpot::open(pid).expect("read the JVM");
    let _walked = WalkedJvm::register(&sampler, &hotspot).expect("the walker takes the JVM");
    sampler.track(pid).expect("track the JVM");
    let start = Instant::now();
    let mut samples = Vec::new();
    while start.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(100));
        samples.extend(
            sampler
                .samples()
                .try_iter()
                .filter(|s| s.pid == pid && s.frames.len() >= DEEP),
        );
    }
    assert!(samples.len() >= 100, "{} deep samples", samples.len());
    samples
}

fn resolver(pid: u32, native: bool) -> Resolver {
    let hotspot = HotSpot::open(pid).expect("open the JVM");
    let map = CodeMap::of_process(pid, pid);
    let mut resolver = Resolver::new(hotspot, JitNames::Agent(Box::new(map)), native);
    resolver.refresh(u64::MAX).expect("the agent's code map");
    resolver
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
    // Let the JIT compile c and leaf.
    std::thread::sleep(Duration::from_secs(3));
    let samples = record(jvm.pid());
    let mut branches = Branches::new(&[] as &[&str]);
    for native in [false, true] {
        let mut resolver = resolver(jvm.pid(), native);
        let resolved: Vec<_> = samples
            .iter()
            .map(|s| resolver.resolve(s, None, &mut branches).branch)
            .collect();
        let deepest = resolved
            .into_iter()
            .max_by_key(|&b| branches.frames(b).count())
            .expect("samples");
        eprintln!(
            "{} samples; deepest branch ({} frames): {}",
            samples.len(),
            branches.frames(deepest).count(),
            branches.name(deepest)
        );
        eprintln!("{:?}", resolver.stats());
        let name = if native {
            "resolve a 22-frame mixed sample, native frames named"
        } else {
            "resolve a 22-frame mixed sample"
        };
        let mut next = samples.iter().cycle();
        c.bench_function(name, |b| {
            b.iter(|| {
                let sample = next.next().expect("cycle");
                black_box(resolver.resolve(black_box(sample), None, &mut branches))
            })
        });
    }
    drop(jvm);
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5));
    targets = bench
}
criterion_main!(benches);

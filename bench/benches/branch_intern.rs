//! The per-sample path: interning a stack into a branch, and counting the sample.
//!
//! `cargo bench -p joularcode-bench --bench branch_intern`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use joularcode_core::attribution::CycleThreads;
use joularcode_core::branch::{Branches, FrameId};

const DEPTH: usize = 30;

/// A table with many branches already, and a 30-frame stack of frames it knows.
fn table_and_stack() -> (Branches, Vec<FrameId>) {
    let mut branches = Branches::new(&["com.example"]);
    let stack: Vec<FrameId> = (0..DEPTH)
        .map(|i| {
            let class = if i % 2 == 0 {
                "java.util.concurrent.ThreadPoolExecutor"
            } else {
                "com.example.service.Worker"
            };
            branches.frame(class, &format!("method{i}"))
        })
        .collect();
    // Ten thousand other branches, so the lookups are in a table of a realistic size
    for top in 0..10_000 {
        let frame = branches.frame("com.example.Leaf", &format!("leaf{top}"));
        let mut other = stack[..DEPTH - 1].to_vec();
        other.push(frame);
        branches.branch(&other);
    }
    (branches, stack)
}

fn intern(c: &mut Criterion) {
    let (mut branches, stack) = table_and_stack();
    branches.branch(&stack);
    c.bench_function("intern a 30-frame stack already seen", |b| {
        b.iter(|| branches.branch(black_box(&stack)))
    });

    let (mut branches, mut stack) = table_and_stack();
    // The three newest frames are drawn from a pool, so that every stack measured is a new one
    let pool: Vec<FrameId> = (0..1000)
        .map(|i| branches.frame("com.example.New", &format!("m{i}")))
        .collect();
    let mut n = 0usize;
    c.bench_function("intern a new 30-frame stack", |b| {
        b.iter_batched(
            || {
                n += 1;
                for (k, slot) in stack[DEPTH - 3..].iter_mut().enumerate() {
                    *slot = pool[n / 1000usize.pow(k as u32) % 1000];
                }
                stack.clone()
            },
            |new| branches.branch(&new),
            BatchSize::SmallInput,
        )
    });

    c.bench_function("intern a seen frame by name", |b| {
        b.iter(|| {
            branches.frame(
                black_box("com.example.service.Worker"),
                black_box("method1"),
            )
        })
    });

    let (mut branches, stack) = table_and_stack();
    let branch = branches.branch(&stack);
    let mut samples = CycleThreads::default();
    for tid in 0..200 {
        samples.count(tid, branch, 1);
    }
    c.bench_function("count a sample", |b| {
        b.iter(|| samples.count(black_box(117), black_box(branch), 1))
    });
}

criterion_group!(benches, intern);
criterion_main!(benches);

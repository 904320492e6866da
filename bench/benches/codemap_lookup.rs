//! Speed of `CodeMap::lookup`, which runs for every JIT frame of every sample.
//!
//! The map is crafted like a big application's: 20,000 compiled methods of 1 KiB with 8 inline
//! ranges each, laid out in a 32 MiB code cache, a quarter of them unloaded and their addresses
//! reused by later code. Run with `cargo bench -p joularcode-bench --bench codemap_lookup`.

use std::fmt::Write;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use joularcode_bpf::jit::codemap::CodeMap;

const METHODS: u64 = 20_000;
const BASE: u64 = 0x7f00_0000_0000;
const SLOT: u64 = 0x600;

fn crafted_map() -> CodeMap {
    let mut text = String::from("joularcode-code-map 2 monotonic 1\n");
    for id in 0..METHODS {
        writeln!(text, "M {id} demo.pkg.Class{}.method{id}", id % 500).unwrap();
    }
    for id in 0..METHODS {
        let start = BASE + id * SLOT;
        write!(text, "L {} {start:x} 400 {id}", 1000 + id).unwrap();
        for r in 0..8u64 {
            let callee = (id + r + 1) % METHODS;
            write!(text, " {:x}-{:x}:{id},{callee}", r * 0x80, r * 0x80 + 0x40).unwrap();
        }
        text.push('\n');
        if id % 4 == 0 {
            writeln!(text, "U {} {start:x}", 50_000 + id).unwrap();
            writeln!(
                text,
                "L {} {start:x} 200 {}",
                60_000 + id,
                (id + 7) % METHODS
            )
            .unwrap();
        }
    }
    let mut map = CodeMap::new("crafted.map");
    map.feed(text.as_bytes()).unwrap();
    map
}

fn lookups(c: &mut Criterion) {
    let map = crafted_map();
    // Pseudo-random pcs across the code cache, some in gaps, at a time after the reuses.
    let pcs: Vec<u64> = (0..4096u64)
        .map(|i| BASE + (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 7) % (METHODS * SLOT))
        .collect();
    let found = pcs
        .iter()
        .filter(|&&pc| map.lookup(pc, 100_000).is_some())
        .count();
    assert!(found > pcs.len() / 2, "the crafted pcs mostly hit code");
    c.bench_function("codemap lookup (4096 pcs)", |b| {
        b.iter(|| {
            pcs.iter()
                .filter_map(|&pc| map.lookup(black_box(pc), 100_000))
                .map(|frames| frames.frames().len())
                .sum::<usize>()
        })
    });
    c.bench_function("codemap lookup_return_address, old time (4096 pcs)", |b| {
        b.iter(|| {
            pcs.iter()
                .filter_map(|&pc| map.lookup_return_address(black_box(pc), 20_000))
                .count()
        })
    });
}

criterion_group!(benches, lookups);
criterion_main!(benches);

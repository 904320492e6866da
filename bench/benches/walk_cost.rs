//! What walking a stack in BPF costs per sample, against copying the stack for userspace to walk:
//! `cargo bench -p joularcode-bench --bench walk_cost` as root (see bench/README.md).
//!
//! A Java 17 JVM runs `testkit/java/StacksDeep.java` at a given depth, without
//! -XX:+PreserveFramePointer, nothing inlined, every other method kept interpreted (or, for the
//! "compiled" rows, none). For each depth the sampler walks its stacks at 1000 Hz for a few
//! seconds, with kernel.bpf_stats_enabled on: the kernel's run time / run count of the sampling
//! program is its cost per sample. Then the stack-copy programs of `bench/bpf/stack_copy.bpf.c`
//! copy 16, 32 and 64 KiB from sp instead, on the same JVM, measured the same way.
//!
//! Per row it prints: frames walked (mean), whole walks (reached the thread's first Java frame),
//! BPF time per sample, bytes per sample in the ring buffer, bytes of stack the frames span (what a
//! copy must hold), and samples lost.

use std::fs;
use std::os::fd::{AsRawFd, IntoRawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use joularcode_bpf::hotspot::HotSpot;
use joularcode_bpf::sampler::{perf, Sampler, WalkEnd, WalkedJvm};
use joularcode_testkit::{jdk, Jvm};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, RingBufferBuilder};

mod skel {
    include!(concat!(env!("OUT_DIR"), "/stack_copy.skel.rs"));
}
use skel::StackCopySkelBuilder;

const BPF_STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";
const RATE_HZ: u64 = 1000;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What the walker did over one window.
struct WalkRow {
    frames: f64,
    whole: f64,
    ns_per_sample: f64,
    bytes_per_sample: f64,
    span_mean: f64,
    span_max: u64,
    samples: u64,
    lost: u64,
}

/// Samples `pid` with the walker for `seconds`; the samples of its busiest thread (the deep one)
/// are measured.
fn walk(pid: u32, seconds: u64) -> WalkRow {
    let sampler = Sampler::new(RATE_HZ).expect("load the sampler (run as root)");
    let hotspot = HotSpot::open(pid).expect("read the JVM");
    let _walked = WalkedJvm::register(&sampler, &hotspot).expect("the walker takes the JVM");
    sampler.track(pid).expect("track the JVM");
    std::thread::sleep(Duration::from_millis(300));
    let _ = sampler.samples().try_iter().count();
    let before = sampler.program_stats().expect("the program's statistics");
    let start = Instant::now();
    let mut all = Vec::new();
    while start.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_millis(100));
        all.extend(sampler.samples().try_iter().flatten());
    }
    let after = sampler.program_stats().expect("the program's statistics");
    let mut per_thread = std::collections::HashMap::<u32, usize>::new();
    for sample in &all {
        *per_thread.entry(sample.tid).or_default() += 1;
    }
    let busiest = per_thread
        .iter()
        .max_by_key(|(_, &n)| n)
        .map(|(&tid, _)| tid);
    let samples: Vec<_> = all.into_iter().filter(|s| Some(s.tid) == busiest).collect();
    let runs = (after.run_count - before.run_count).max(1);
    let n = samples.len().max(1) as f64;
    let spans: Vec<u64> = samples.iter().map(|s| s.stack_end - s.sp).collect();
    WalkRow {
        frames: samples.iter().map(|s| s.frames.len()).sum::<usize>() as f64 / n,
        whole: samples.iter().filter(|s| s.end == WalkEnd::Entry).count() as f64 / n,
        ns_per_sample: (after.run_time_ns - before.run_time_ns) as f64 / runs as f64,
        bytes_per_sample: samples
            .iter()
            .map(|s| joularcode_bpf::sampler::record_len(s.frames.len()))
            .sum::<usize>() as f64
            / n,
        span_mean: spans.iter().sum::<u64>() as f64 / n,
        span_max: spans.iter().copied().max().unwrap_or(0),
        samples: samples.len() as u64,
        lost: sampler.drops(),
    }
}

/// Copies `kib` KiB of `pid`'s stacks at every sample for `seconds`: nanoseconds per sample,
/// and the share of copies that had to shrink (the thread's stack ends less than `kib` above sp).
fn copy(pid: u32, kib: u32, seconds: u64) -> (f64, f64) {
    let mut storage = std::mem::MaybeUninit::uninit();
    let mut open = StackCopySkelBuilder::default()
        .open(&mut storage)
        .expect("open the stack-copy object");
    open.maps
        .rodata_data
        .as_deref_mut()
        .expect("rodata")
        .target_tgid = pid;
    let skel = open.load().expect("load the stack-copy programs");
    let program = match kib {
        16 => &skel.progs.copy_16k,
        32 => &skel.progs.copy_32k,
        _ => &skel.progs.copy_64k,
    };
    let links: Vec<Link> = perf::online_cpus()
        .expect("the online CPUs")
        .into_iter()
        .map(|cpu| {
            let fd = perf::open_cpu_clock(cpu, RATE_HZ).expect("a cpu-clock perf event");
            let link = program
                .attach_perf_event(fd.as_raw_fd())
                .expect("attach a stack-copy program");
            let _ = fd.into_raw_fd();
            link
        })
        .collect();
    let copied = Arc::new(AtomicU64::new(0));
    let counter = copied.clone();
    let mut builder = RingBufferBuilder::new();
    builder
        .add(&skel.maps.copies, move |_bytes: &[u8]| {
            counter.fetch_add(1, Ordering::Relaxed);
            0
        })
        .expect("read the copies");
    let ring = builder.build().expect("map the ring buffer");
    let stats = || {
        let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
        let mut len = std::mem::size_of_val(&info) as u32;
        // SAFETY: the kernel fills at most `len` bytes of a plain C struct.
        let ret = unsafe {
            libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(
                std::os::fd::AsFd::as_fd(program).as_raw_fd(),
                &mut info,
                &mut len,
            )
        };
        assert_eq!(ret, 0, "the stack-copy program's statistics");
        (info.run_time_ns, info.run_cnt)
    };
    let before = stats();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_millis(100));
        let _ = ring.consume();
    }
    let after = stats();
    drop(links);
    let _ = ring.consume();
    let runs = (after.1 - before.1).max(1);
    let short = skel
        .maps
        .bss_data
        .as_deref()
        .map_or(0, |bss| bss.short_copies);
    (
        (after.0 - before.0) as f64 / runs as f64,
        short as f64 / copied.load(Ordering::Relaxed).max(1) as f64,
    )
}

fn main() {
    let seconds = env_or("JOULAR_BENCH_SECONDS", 5);
    let stats_before =
        fs::read_to_string(BPF_STATS).expect("read kernel.bpf_stats_enabled (run as root)");
    fs::write(BPF_STATS, "1").expect("enable kernel.bpf_stats_enabled (run as root)");
    println!(
        "{:<10} {:>7} {:>6} {:>9} {:>9} {:>10} {:>10} {:>8} {:>5} {:>9} {:>9} {:>9} {:>9}",
        "stack",
        "frames",
        "whole",
        "walk ns",
        "rec bytes",
        "span mean",
        "span max",
        "samples",
        "lost",
        "copy16 ns",
        "copy32 ns",
        "copy64 ns",
        "64 shrunk"
    );
    for (mix, depth) in [
        ("mixed", 16),
        ("mixed", 56),
        ("mixed", 116),
        ("compiled", 56),
    ] {
        let mut flags = vec![
            "-XX:CompileCommand=quiet",
            "-XX:CompileCommand=dontinline,StacksDeep::*",
        ];
        if mix == "mixed" {
            flags.push("-XX:CompileCommand=exclude,StacksDeep.i");
        }
        let jvm = Jvm::start(&jdk(17), &flags, "StacksDeep", &[&depth.to_string()]);
        std::thread::sleep(Duration::from_secs(3));
        let row = walk(jvm.pid(), seconds);
        let copies: Vec<(f64, f64)> = [16, 32, 64]
            .into_iter()
            .map(|kib| copy(jvm.pid(), kib, seconds))
            .collect();
        println!(
            "{:<10} {:>7.1} {:>5.1}% {:>9.0} {:>9.0} {:>10.0} {:>10} {:>8} {:>5} {:>9.0} {:>9.0} {:>9.0} {:>8.1}%",
            format!("{mix} {depth}"),
            row.frames,
            row.whole * 100.0,
            row.ns_per_sample,
            row.bytes_per_sample,
            row.span_mean,
            row.span_max,
            row.samples,
            row.lost,
            copies[0].0,
            copies[1].0,
            copies[2].0,
            copies[2].1 * 100.0,
        );
    }
    fs::write(BPF_STATS, stats_before.trim()).expect("restore kernel.bpf_stats_enabled");
}

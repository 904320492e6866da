//! Overhead of the sampler on a profiled JVM: `cargo bench -p joularcode-bench --bench overhead`
//! as root (see bench/README.md).
//!
//! The workload (tests/java/SamplerOverhead.java) runs two busy threads doing fixed work units
//! beside hundreds of idle threads that wake every 100 ms. Phases without (A) and with (B) the
//! sampler attached at 100 Hz alternate, A B A B ..., in one JVM. Each phase gives two figures
//! the JVM reports: work units per second (wall), which other load on the machine moves, and work
//! units per CPU second of the two workers, which it does not: the sampler's interrupts and BPF
//! programs run on the workers' CPU time, so they show in both. During B phases the bench does what the profiler's
//! cycle does with the sampler (drain the samples, read the thread times once a second), and
//! measures its own CPU time (getrusage), the BPF programs' run time (kernel.bpf_stats_enabled)
//! and its peak RSS.

use std::fs;
use std::time::{Duration, Instant};

use joularcode_bpf::sampler::Sampler;
use joularcode_tests::{jdk, Jvm};

const BPF_STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What the workload reports once a second.
#[derive(Clone, Copy)]
struct Progress {
    units: u64,
    time_ns: u64,
    worker_cpu_ns: u64,
}

/// The next "UNITS <units> <nanoTime> <workers' CPU ns>" line.
fn next_progress(jvm: &mut Jvm) -> Progress {
    let line = jvm.wait_for_line("UNITS", Duration::from_secs(10));
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().expect("a number"))
        .collect();
    Progress {
        units: fields[0],
        time_ns: fields[1],
        worker_cpu_ns: fields[2],
    }
}

/// Work units per second of wall time, and per second of the workers' CPU time.
#[derive(Clone, Copy)]
struct Throughput {
    wall: f64,
    cpu: f64,
}

/// This process's CPU time (user + system) and peak RSS in KiB.
fn rusage() -> (Duration, u64) {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(
            libc::getrusage(libc::RUSAGE_SELF, &mut usage),
            0,
            "getrusage"
        );
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (
        time(usage.ru_utime) + time(usage.ru_stime),
        usage.ru_maxrss as u64,
    )
}

/// This process's resident memory now (VmRSS), in KiB.
fn rss_kib() -> u64 {
    let status = fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line")
}

/// Total run time of the sampler's BPF programs so far (with kernel.bpf_stats_enabled on).
fn bpf_run_time() -> Duration {
    let ns = libbpf_rs::query::ProgInfoIter::default()
        .filter(|prog| {
            prog.name
                .to_str()
                .is_some_and(|name| name.starts_with("jp_on_"))
        })
        .map(|prog| prog.run_time_ns)
        .sum();
    Duration::from_nanos(ns)
}

/// Throughput over `seconds` lines of the workload; `each_second` runs after every line.
fn phase(jvm: &mut Jvm, seconds: u64, mut each_second: impl FnMut()) -> Throughput {
    let first = next_progress(jvm);
    let mut last = first;
    for _ in 0..seconds {
        last = next_progress(jvm);
        each_second();
    }
    let units = (last.units - first.units) as f64;
    Throughput {
        wall: units / ((last.time_ns - first.time_ns) as f64 / 1e9),
        cpu: units / ((last.worker_cpu_ns - first.worker_cpu_ns) as f64 / 1e9),
    }
}

struct Round {
    without: Throughput,
    with: Throughput,
    profiler_cpu: Duration,
    bpf_cpu: Duration,
    wall: Duration,
    samples: u64,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let rounds = env_or("JOULAR_BENCH_ROUNDS", 5);
    let seconds = env_or("JOULAR_BENCH_SECONDS", 10);
    let idle = env_or("JOULAR_BENCH_IDLE_THREADS", 300).to_string();
    let stats_before =
        fs::read_to_string(BPF_STATS).expect("read kernel.bpf_stats_enabled (run as root)");
    fs::write(BPF_STATS, "1").expect("enable kernel.bpf_stats_enabled (run as root)");

    let mut jvm = Jvm::start(
        &jdk(17),
        &["-XX:+PreserveFramePointer"],
        "SamplerOverhead",
        &[&idle],
    );
    println!(
        "warming up the JVM (pid {}, {idle} idle threads) for {seconds} s",
        jvm.pid()
    );
    phase(&mut jvm, seconds, || {});

    let mut results = Vec::new();
    let mut rss_growth = 0;
    for round in 1..=rounds {
        let without = phase(&mut jvm, seconds, || {});
        let rss_before = rss_kib();
        let sampler = Sampler::new(100).expect("load the sampler (run as root)");
        sampler.track(jvm.pid()).expect("track the JVM");
        let (cpu0, bpf0, start) = (rusage().0, bpf_run_time(), Instant::now());
        let mut samples = 0;
        let with = phase(&mut jvm, seconds, || {
            samples += sampler.samples().try_iter().count() as u64;
            sampler.thread_times();
        });
        let result = Round {
            without,
            with,
            profiler_cpu: rusage().0 - cpu0,
            bpf_cpu: bpf_run_time() - bpf0,
            wall: start.elapsed(),
            samples,
        };
        rss_growth = rss_growth.max(rss_kib().saturating_sub(rss_before));
        drop(sampler);
        println!(
            "round {round}: units/s {:.1} -> {:.1} (x{:.4}), units per CPU s {:.1} -> {:.1} (x{:.4}); \
             profiler {:.3}% of a core, BPF {:.3}% of a core, {} samples",
            result.without.wall,
            result.with.wall,
            result.with.wall / result.without.wall,
            result.without.cpu,
            result.with.cpu,
            result.with.cpu / result.without.cpu,
            100.0 * result.profiler_cpu.as_secs_f64() / result.wall.as_secs_f64(),
            100.0 * result.bpf_cpu.as_secs_f64() / result.wall.as_secs_f64(),
            result.samples
        );
        results.push(result);
    }
    fs::write(BPF_STATS, stats_before.trim()).expect("restore kernel.bpf_stats_enabled");

    let ratio = |of: fn(&Throughput) -> f64| {
        median(
            results
                .iter()
                .map(|r| of(&r.with) / of(&r.without))
                .collect(),
        )
    };
    let (wall_ratio, cpu_ratio) = (ratio(|t| t.wall), ratio(|t| t.cpu));
    let wall: f64 = results.iter().map(|r| r.wall.as_secs_f64()).sum();
    let profiler: f64 = results.iter().map(|r| r.profiler_cpu.as_secs_f64()).sum();
    let bpf: f64 = results.iter().map(|r| r.bpf_cpu.as_secs_f64()).sum();
    println!("median over {rounds} rounds, with / without the sampler:");
    println!(
        "  units per second:         x{wall_ratio:.4} ({:+.2}%)",
        100.0 * (wall_ratio - 1.0)
    );
    println!(
        "  units per worker CPU s:   x{cpu_ratio:.4} ({:+.2}%)",
        100.0 * (cpu_ratio - 1.0)
    );
    println!(
        "profiler CPU: {:.3}% of one core; BPF programs: {:.3}% of one core",
        100.0 * profiler / wall,
        100.0 * bpf / wall
    );
    println!(
        "RSS: +{rss_growth} KiB at most with the sampler loaded (the bench's peak RSS: {} KiB)",
        rusage().1
    );
}

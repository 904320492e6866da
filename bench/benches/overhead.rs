//! Overhead of the profiler on a profiled JVM: `cargo bench -p joularcode-bench --bench overhead`
//! as root (see bench/README.md).
//!
//! The workload (testkit/java/SamplerOverhead.java) runs two busy threads doing fixed work units
//! beside hundreds of idle threads that wake every 100 ms. Phases without (A) and with (B) the
//! profiler alternate, A B A B ..., in one JVM. Each phase gives two figures
//! the JVM reports: work units per second (wall), which other load on the machine moves, and work
//! units per CPU second of the two workers, which it does not: the sampler's interrupts and BPF
//! programs run on the workers' CPU time, so they show in both.
//!
//! `JOULAR_BENCH_MODE` says what runs in B phases:
//! - `sampler` (default): the sampler alone, in this process, at 100 Hz, doing what the
//!   profiler's cycle does with it (drain the samples, read the thread times once a second);
//! - `record`: the whole `joularcode-bpf record --pid` command (release build), at
//!   `JOULAR_BENCH_RATE_MS` (stack-monitoring-sample-rate, default 10), with the vm power source;
//! - `agent`: the agent's sampling mode in the JVM (the fallback mode, release build), attached
//!   for the phase (`sample`) and stopped at its end (`stop`), at `JOULAR_BENCH_RATE_MS`, with
//!   `JOULAR_BENCH_SAMPLER` (signals or jvmti, default signals) and the vm power source; the idle
//!   threads park for good (`JOULAR_BENCH_IDLE=park`, the default in this mode).
//!
//! It measures the profiler's CPU time (getrusage, /proc/PID/stat of the record process, or the
//! agent's threads in the JVM), the BPF programs' run time (kernel.bpf_stats_enabled), its
//! memory, and the samples taken and lost.
use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use joularcode_bpf::attach;
use joularcode_bpf::hotspot::HotSpot;
use joularcode_bpf::sampler::{Sampler, WalkedJvm};
use joularcode_testkit::{bpf_programs_of, jdk, target_dir, Jvm};

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

/// Total run time so far of the BPF programs process `pid` holds ("self" for this one), with
/// kernel.bpf_stats_enabled on: the profiler's own, whatever other BPF users run beside it.
fn bpf_run_time(pid: &str) -> Duration {
    let ids = bpf_programs_of(pid);
    let ns = libbpf_rs::query::ProgInfoIter::default()
        .filter(|prog| ids.contains(&prog.id))
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

/// What runs during the B phases.
enum Profiler {
    /// The sampler in this process; the RSS before it was loaded, the samples drained.
    Sampler {
        sampler: Box<Sampler>,
        walked: WalkedJvm,
        rss_before: u64,
        samples: u64,
    },
    /// `joularcode-bpf record`, in the folder of its files.
    Record {
        child: Child,
        dir: tempfile::TempDir,
    },
    /// The agent's sampling mode in the JVM `jvm`, whose RSS was `rss_before`, writing in `dir`.
    Agent {
        jvm: u32,
        rss_before: u64,
        dir: tempfile::TempDir,
    },
}

/// The agent library (release build) the agent mode attaches.
fn agent_library() -> PathBuf {
    let library = record_binary().with_file_name("libjvm_symbolizer_agent.so");
    assert!(
        library.is_file(),
        "no {}: build it with cargo build --release -p jvm-symbolizer-agent",
        library.display()
    );
    library
}

/// The `joularcode-bpf` binary the record mode runs.
fn record_binary() -> PathBuf {
    let binary = std::env::var_os("JOULAR_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("release/joularcode-bpf"));
    assert!(
        binary.is_file(),
        "no {}: build it with cargo build --release -p joularcode-bpf, or set JOULAR_BENCH_BIN",
        binary.display()
    );
    binary
}

/// utime + stime of a process, or of a thread (`PID/task/TID`), from its stat.
fn process_cpu(pid: &str) -> Duration {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).expect("the profiler's stat");
    let fields: Vec<u64> = stat
        .rsplit_once(')')
        .expect("a stat line")
        .1
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|f| f.parse().expect("ticks"))
        .collect();
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_nanos((fields[0] + fields[1]) * 1_000_000_000 / ticks)
}

/// The CPU time of the agent's threads (`joularcode-*`) in JVM `pid`.
fn agent_threads_cpu(pid: u32) -> Duration {
    fs::read_dir(format!("/proc/{pid}/task"))
        .expect("the JVM's threads")
        .filter_map(|entry| {
            let tid = entry.ok()?.file_name().into_string().ok()?;
            let comm = fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).ok()?;
            comm.starts_with("joularcode-")
                .then(|| process_cpu(&format!("{pid}/task/{tid}")))
        })
        .sum()
}

/// A `Vm...:` line of /proc/PID/status, in KiB.
fn status_kib(pid: &str, key: &str) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("read a status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("a {key} line"))
}

impl Profiler {
    fn start(mode: &str, pid: u32, rate_ms: u64) -> Profiler {
        if mode == "sampler" {
            let rss_before = status_kib("self", "VmRSS:");
            let sampler =
                Box::new(Sampler::new(1000 / rate_ms).expect("load the sampler (run as root)"));
            let hotspot = HotSpot::open(pid).expect("read the JVM");
            let walked = WalkedJvm::register(&sampler, &hotspot).expect("the walker takes it");
            sampler.track(pid).expect("track the JVM");
            return Profiler::Sampler {
                sampler,
                walked,
                rss_before,
                samples: 0,
            };
        }
        let dir = tempfile::tempdir().expect("a temporary folder");
        fs::write(dir.path().join("watts"), "100\n").expect("the watts file");
        if mode == "agent" {
            let sampler =
                std::env::var("JOULAR_BENCH_SAMPLER").unwrap_or_else(|_| "signals".into());
            let path = |name: &str| dir.path().join(name).display().to_string();
            let options = format!(
                "sample,config=,sampler={sampler},stack-monitoring-sample-rate={rate_ms},\
                 power-source-type=vm,vm-power-format=watts,vm-power-file={},results-path={},\
                 cycle-log={}",
                path("watts"),
                path("results"),
                path("cycles.jsonl")
            );
            let rss_before = status_kib(&pid.to_string(), "VmRSS:");
            attach::load_agent(pid, &agent_library(), &options).expect("attach the agent");
            return Profiler::Agent {
                jvm: pid,
                rss_before,
                dir,
            };
        }
        let log = fs::File::create(dir.path().join("stderr")).expect("the stderr file");
        let child = Command::new(record_binary())
            .current_dir(dir.path())
            .args(["record", "--pid", &pid.to_string()])
            .args(["--power-source-type", "vm", "--vm-power-format", "watts"])
            .args(["--vm-power-file", "watts", "--results-path", "results"])
            .args([
                "--cycle-log",
                "cycles.jsonl",
                "--stack-monitoring-sample-rate",
            ])
            .arg(rate_ms.to_string())
            .stdin(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start joularcode-bpf record");
        let started = Instant::now();
        while !fs::read_to_string(dir.path().join("stderr"))
            .unwrap_or_default()
            .contains("Profiling JVM")
        {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "record did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Profiler::Record { child, dir }
    }

    /// What the profiler does once a second (record runs on its own).
    fn each_second(&mut self) {
        if let Profiler::Sampler {
            sampler,
            walked,
            samples,
            ..
        } = self
        {
            for sample in sampler.samples().try_iter().flatten() {
                walked.saw(&sample);
                *samples += 1;
            }
            sampler.thread_times();
        }
    }

    /// The process that holds the profiler's BPF programs, as /proc names it (none for the agent).
    fn process(&self) -> String {
        match self {
            Profiler::Sampler { .. } => "self".into(),
            Profiler::Record { child, .. } => child.id().to_string(),
            Profiler::Agent { jvm, .. } => jvm.to_string(),
        }
    }

    /// The profiler's CPU time so far: with the agent, that of its threads in the JVM
    /// (`joularcode-*`; its signal handler runs on the sampled threads, in the throughput).
    fn cpu(&self) -> Duration {
        match self {
            Profiler::Sampler { .. } => rusage().0,
            Profiler::Record { child, .. } => process_cpu(&child.id().to_string()),
            Profiler::Agent { jvm, .. } => agent_threads_cpu(*jvm),
        }
    }

    /// The memory the profiler adds: the RSS the sampler added to this process, the record
    /// process's RSS, or with the agent the RSS the JVM grew by.
    fn rss_kib(&self) -> u64 {
        match self {
            Profiler::Sampler { rss_before, .. } => {
                status_kib("self", "VmRSS:").saturating_sub(*rss_before)
            }
            Profiler::Record { child, .. } => status_kib(&child.id().to_string(), "VmRSS:"),
            Profiler::Agent {
                jvm, rss_before, ..
            } => status_kib(&jvm.to_string(), "VmRSS:").saturating_sub(*rss_before),
        }
    }

    /// Stops it; returns the samples taken and lost.
    fn finish(self) -> (u64, u64) {
        let dir = match self {
            Profiler::Sampler {
                sampler, samples, ..
            } => return (samples, sampler.drops()),
            Profiler::Record { mut child, dir } => {
                let pid = nix::unistd::Pid::from_raw(child.id() as i32);
                nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
                assert!(
                    child.wait().expect("record ends").success(),
                    "record failed"
                );
                dir
            }
            Profiler::Agent { jvm, dir, .. } => {
                attach::load_agent(jvm, &agent_library(), "stop").expect("stop the agent");
                dir
            }
        };
        let cycles = fs::read_to_string(dir.path().join("cycles.jsonl")).expect("the log");
        cycles
            .lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("JSON"))
            .fold((0, 0), |(samples, lost), cycle| {
                (
                    samples + cycle["samples"].as_u64().expect("samples"),
                    lost + cycle["lost_samples"].as_u64().expect("lost"),
                )
            })
    }
}

struct Round {
    without: Throughput,
    with: Throughput,
    profiler_cpu: Duration,
    bpf_cpu: Duration,
    wall: Duration,
    samples: u64,
    lost: u64,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let rounds = env_or("JOULAR_BENCH_ROUNDS", 5);
    let seconds = env_or("JOULAR_BENCH_SECONDS", 10);
    let idle = env_or("JOULAR_BENCH_IDLE_THREADS", 300).to_string();
    let mode = std::env::var("JOULAR_BENCH_MODE").unwrap_or_else(|_| "sampler".into());
    assert!(
        ["sampler", "record", "agent"].contains(&mode.as_str()),
        "JOULAR_BENCH_MODE is sampler, record or agent"
    );
    let rate_ms = if mode == "sampler" {
        10
    } else {
        env_or("JOULAR_BENCH_RATE_MS", 10)
    };
    let what = match mode.as_str() {
        "sampler" => "the sampler",
        "record" => "record",
        _ => "the agent's sampling mode",
    };
    let idle_kind = std::env::var("JOULAR_BENCH_IDLE")
        .unwrap_or_else(|_| if mode == "agent" { "park" } else { "sleep" }.into());
    // The agent loads no BPF program
    let bpf_time = |holder: &str| {
        if mode == "agent" {
            Duration::ZERO
        } else {
            bpf_run_time(holder)
        }
    };
    let stats_before =
        fs::read_to_string(BPF_STATS).expect("read kernel.bpf_stats_enabled (run as root)");
    fs::write(BPF_STATS, "1").expect("enable kernel.bpf_stats_enabled (run as root)");

    let mut jvm = Jvm::start(&jdk(17), &[], "SamplerOverhead", &[&idle, &idle_kind]);
    println!(
        "warming up the JVM (pid {}, {idle} idle threads that {idle_kind}) for {seconds} s",
        jvm.pid()
    );
    phase(&mut jvm, seconds, || {});

    let mut results = Vec::new();
    let mut rss_growth = 0;
    for round in 1..=rounds {
        let without = phase(&mut jvm, seconds, || {});
        let mut profiler = Profiler::start(&mode, jvm.pid(), rate_ms);
        let holder = profiler.process();
        let (cpu0, bpf0, start) = (profiler.cpu(), bpf_time(&holder), Instant::now());
        let with = phase(&mut jvm, seconds, || profiler.each_second());
        let (profiler_cpu, bpf_cpu, wall) = (
            profiler.cpu().saturating_sub(cpu0),
            bpf_time(&holder).saturating_sub(bpf0),
            start.elapsed(),
        );
        rss_growth = rss_growth.max(profiler.rss_kib());
        let (samples, lost) = profiler.finish();
        let result = Round {
            without,
            with,
            profiler_cpu,
            bpf_cpu,
            wall,
            samples,
            lost,
        };
        println!(
            "round {round}: units/s {:.1} -> {:.1} (x{:.4}), units per CPU s {:.1} -> {:.1} (x{:.4}); \
             profiler {:.3}% of a core, BPF {:.3}% of a core, {} samples, {} lost",
            result.without.wall,
            result.with.wall,
            result.with.wall / result.without.wall,
            result.without.cpu,
            result.with.cpu,
            result.with.cpu / result.without.cpu,
            100.0 * result.profiler_cpu.as_secs_f64() / result.wall.as_secs_f64(),
            100.0 * result.bpf_cpu.as_secs_f64() / result.wall.as_secs_f64(),
            result.samples,
            result.lost
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
    println!("median over {rounds} rounds, with / without {what} at {rate_ms} ms:");
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
    let lost: u64 = results.iter().map(|r| r.lost).sum();
    let samples: u64 = results.iter().map(|r| r.samples).sum();
    println!("samples: {samples} counted, {lost} lost");
    if mode == "agent" {
        println!("RSS the JVM grew by during the profile: {rss_growth} KiB at most");
    } else if mode == "record" {
        println!("RSS of the record process: {rss_growth} KiB at most");
    } else {
        println!(
            "RSS: +{rss_growth} KiB at most with the sampler loaded (the bench's peak RSS: {} KiB)",
            rusage().1
        );
    }
}

//! `joularcode-bpf raw`: what the sampler sees, per thread, for a few seconds. A debugging view
//! of the raw material (samples, on-CPU time, walk depths, how many walks reached the thread's
//! first Java frame, losses) before any symbolization.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use joularcode_core::log::printable;

use crate::cli::RawArgs;
use crate::discovery::{Cgroups, Discovery, Scope, RESCAN_INTERVAL};
use crate::hotspot::{HotSpot, HotSpotError};
use crate::output::stdout;
use crate::sampler::{
    monotonic_ns, privileges, FrameKind, Sample, Sampler, SamplerError, ThreadTime, WalkEnd,
    WalkedJvm, CONSUME_INTERVAL,
};
use crate::session::Targets;
use crate::signals;

/// What one thread did during the run.
#[derive(Debug, Default)]
struct ThreadReport {
    name: String,
    exited: bool,
    on_cpu_ns: u64,
    samples: u64,
    kernel_samples: u64,
    depths: Vec<usize>,
    java_depths: Vec<usize>,
    whole: u64,
}

/// The JVMs whose stacks the walker unwinds by HotSpot frames, or why one cannot be.
#[derive(Default)]
struct Walked {
    jvms: HashMap<u32, (HotSpot, WalkedJvm)>,
    failed: HashMap<u32, String>,
}

impl Walked {
    /// Registers the JVMs `tracked` not registered yet (a starting JVM is tried again at
    /// the next call), and keeps the Java threads of the others up to date.
    fn update(&mut self, sampler: &Sampler, tracked: &BTreeSet<u32>) {
        for &pid in tracked {
            if self.jvms.contains_key(&pid) || self.failed.contains_key(&pid) {
                continue;
            }
            match HotSpot::open(pid)
                .map_err(|e| (matches!(e, HotSpotError::NotReady(_)), e.to_string()))
            {
                Ok(hotspot) => match WalkedJvm::register(sampler, &hotspot) {
                    Ok(walked) => {
                        self.jvms.insert(pid, (hotspot, walked));
                    }
                    Err(e) => {
                        self.failed.insert(pid, e.to_string());
                    }
                },
                Err((true, _)) => {}
                Err((false, e)) => {
                    self.failed.insert(pid, e);
                }
            }
        }
        for (hotspot, walked) in self.jvms.values_mut() {
            walked.refresh(sampler, hotspot);
        }
    }

    fn saw(&mut self, sample: &Sample) {
        if let Some((_, walked)) = self.jvms.get_mut(&sample.pid) {
            walked.saw(sample);
        }
    }
}

/// Rescans, and tracks the JVMs that started and untracks those that ended (`tracked` holds
/// them). A JVM that ends before it is tracked is left out.
fn follow(
    discoveries: &mut [Discovery],
    sampler: &Sampler,
    tracked: &mut BTreeSet<u32>,
) -> Result<(), SamplerError> {
    for discovery in discoveries {
        let changes = discovery.rescan();
        for pid in changes.ended {
            sampler.untrack(pid);
            tracked.remove(&pid);
        }
        for pid in changes.started {
            match sampler.track(pid) {
                Ok(()) => {
                    tracked.insert(pid);
                }
                Err(e) if Path::new("/proc").join(pid.to_string()).exists() => return Err(e),
                Err(_) => {}
            }
        }
    }
    Ok(())
}

/// Runs `raw`: samples the JVMs for `--duration` (or until Ctrl-C), then prints one line per
/// thread that ran, and the totals. Returns the exit code (0), or the error to print.
pub fn run(args: &RawArgs) -> Result<i32, String> {
    privileges::check_kernel().map_err(|e| e.to_string())?;
    privileges::check_privileges().map_err(|e| e.to_string())?;
    let discoveries = match args.jvms.targets(&[]) {
        Targets::Pids(pids) => pids
            .into_iter()
            .map(|pid| Discovery::new(Scope::Pid(pid)))
            .collect::<Result<Vec<_>, _>>(),
        Targets::All(cgroups) => Discovery::new(Scope::All(cgroups)).map(|d| vec![d]),
        Targets::Launch(_) => Discovery::new(Scope::All(Cgroups::every())).map(|d| vec![d]),
    };
    let discoveries = discoveries.map_err(|e| e.to_string())?;
    let mut report = Vec::new();
    sample(discoveries, args.duration(), args.rate.rate, &mut report)?;
    stdout::print(report).map_err(|e| e.to_string())?;
    Ok(0)
}

/// Samples the JVMs of `discoveries` for `duration` (or until Ctrl-C) at `rate_hz`, then prints
/// one line per thread that ran, and the totals, to `out`.
fn sample(
    mut discoveries: Vec<Discovery>,
    duration: Duration,
    rate_hz: u64,
    out: &mut impl Write,
) -> Result<(), String> {
    // Before loading: a signal that arrives while the programs load still ends the run cleanly.
    signals::stop_on_signals().map_err(|e| e.to_string())?;
    let sampler = Sampler::new(rate_hz).map_err(|e| e.to_string())?;

    let mut threads: BTreeMap<(u32, u32), ThreadReport> = BTreeMap::new();
    let mut walked = Walked::default();
    let start = Instant::now();
    let mut tracked = BTreeSet::new();
    let mut last_scan: Option<Instant> = None;
    while start.elapsed() < duration && !signals::stop_requested() {
        if last_scan.is_none_or(|at| at.elapsed() >= RESCAN_INTERVAL) {
            follow(&mut discoveries, &sampler, &mut tracked).map_err(|e| e.to_string())?;
            add_times(&mut threads, sampler.thread_times());
            last_scan = Some(Instant::now());
        }
        walked.update(&sampler, &tracked);
        std::thread::sleep(CONSUME_INTERVAL.min(duration.saturating_sub(start.elapsed())));
        let samples: Vec<Sample> = sampler.samples().try_iter().flatten().collect();
        samples.iter().for_each(|sample| walked.saw(sample));
        add_samples(&mut threads, samples.into_iter(), u64::MAX);
    }
    for (pid, reason) in &walked.failed {
        writeln!(
            out,
            "JVM {pid}: stacks walked by frame pointers only: {}",
            printable(reason)
        )
        .map_err(|e| format!("cannot write the report: {e}"))?;
    }
    let end_ns = monotonic_ns();
    let seconds = start.elapsed().as_secs_f64();
    add_times(&mut threads, sampler.thread_times());
    // Let the consumer drain what the ring buffer holds up to the end.
    std::thread::sleep(CONSUME_INTERVAL * 2);
    add_samples(&mut threads, sampler.samples().try_iter().flatten(), end_ns);
    let summary = Summary {
        seconds,
        rate_hz,
        cpus: sampler.cpus(),
        jvms: discoveries.iter().map(|d| d.jvms().len()).sum(),
        drops: sampler.drops(),
        thread_drops: sampler.thread_drops(),
    };
    print_report(out, &threads, &summary).map_err(|e| format!("cannot write the report: {e}"))
}

fn add_times(threads: &mut BTreeMap<(u32, u32), ThreadReport>, times: Vec<ThreadTime>) {
    for time in times {
        let report = threads.entry((time.pid, time.tid)).or_default();
        report.name = time.name;
        report.exited |= time.exited;
        report.on_cpu_ns = report.on_cpu_ns.max(time.on_cpu_ns);
    }
}

fn add_samples(
    threads: &mut BTreeMap<(u32, u32), ThreadReport>,
    samples: impl Iterator<Item = Sample>,
    until_ns: u64,
) {
    for sample in samples.filter(|sample| sample.time_ns <= until_ns) {
        let report = threads.entry((sample.pid, sample.tid)).or_default();
        report.samples += 1;
        report.kernel_samples += u64::from(sample.kernel);
        report.depths.push(sample.frames.len());
        let java = sample
            .frames
            .iter()
            .filter(|f| {
                matches!(
                    f.kind,
                    FrameKind::Interpreted { .. } | FrameKind::Compiled { .. }
                )
            })
            .count();
        report.java_depths.push(java);
        report.whole += u64::from(sample.end == WalkEnd::Entry);
    }
}

struct Summary {
    seconds: f64,
    rate_hz: u64,
    cpus: usize,
    jvms: usize,
    drops: u64,
    thread_drops: u64,
}

/// min/median/max of the walk depths, or `-` without samples.
fn depth_distribution(depths: &mut [usize]) -> String {
    if depths.is_empty() {
        return "-".into();
    }
    depths.sort_unstable();
    format!(
        "{}/{}/{}",
        depths[0],
        depths[depths.len() / 2],
        depths[depths.len() - 1]
    )
}

fn print_report(
    out: &mut impl Write,
    threads: &BTreeMap<(u32, u32), ThreadReport>,
    summary: &Summary,
) -> std::io::Result<()> {
    writeln!(
        out,
        "sampled {} JVM(s) for {:.1} s at {} Hz on {} CPU(s)",
        summary.jvms, summary.seconds, summary.rate_hz, summary.cpus
    )?;
    writeln!(
        out,
        "{:>8} {:>8}  {:<24} {:>8} {:>7} {:>10}  {:<18} {:<17} {:>6}",
        "pid",
        "tid",
        "name",
        "samples",
        "kernel",
        "on-cpu-ms",
        "depth min/med/max",
        "java min/med/max",
        "whole"
    )?;
    let (mut samples, mut on_cpu_ns, mut quiet) = (0, 0, 0);
    for (&(pid, tid), report) in threads {
        samples += report.samples;
        on_cpu_ns += report.on_cpu_ns;
        if report.samples == 0 && report.on_cpu_ns < 1_000_000 {
            quiet += 1;
            continue;
        }
        // A thread names itself: shown as a terminal shows it safely.
        let name = printable(&report.name);
        let name = if report.exited {
            format!("{name} (exited)")
        } else {
            name.into_owned()
        };
        let whole = if report.samples == 0 {
            "-".to_string()
        } else {
            format!(
                "{:.1}%",
                report.whole as f64 * 100.0 / report.samples as f64
            )
        };
        writeln!(
            out,
            "{pid:>8} {tid:>8}  {name:<24} {:>8} {:>7} {:>10.1}  {:<18} {:<17} {whole:>6}",
            report.samples,
            report.kernel_samples,
            report.on_cpu_ns as f64 / 1e6,
            depth_distribution(&mut report.depths.clone()),
            depth_distribution(&mut report.java_depths.clone()),
        )?;
    }
    writeln!(
        out,
        "{quiet} other thread(s) ran less than 1 ms and were not sampled"
    )?;
    writeln!(
        out,
        "total: {samples} samples, {:.1} ms on CPU, {} samples dropped, {} threads not accounted (table full)",
        on_cpu_ns as f64 / 1e6,
        summary.drops,
        summary.thread_drops
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_distribution_is_min_median_max() {
        assert_eq!(depth_distribution(&mut []), "-");
        assert_eq!(depth_distribution(&mut [18, 3, 18, 20, 17]), "3/18/20");
    }

    #[test]
    fn the_report_shows_busy_threads_and_counts_quiet_ones() {
        let mut threads = BTreeMap::new();
        add_times(
            &mut threads,
            vec![
                ThreadTime {
                    pid: 1,
                    tid: 2,
                    on_cpu_ns: 1_500_000_000,
                    name: "Busy".into(),
                    exited: false,
                },
                ThreadTime {
                    pid: 1,
                    tid: 3,
                    on_cpu_ns: 10,
                    name: "Idle".into(),
                    exited: false,
                },
                ThreadTime {
                    pid: 1,
                    tid: 4,
                    on_cpu_ns: 5_000_000,
                    // A thread names itself: an escape sequence is shown, not sent.
                    name: "Short\x1b[2J\u{202e}".into(),
                    exited: true,
                },
            ],
        );
        let sample = |tid, depth| Sample {
            pid: 1,
            tid,
            cpu: 0,
            time_ns: 100,
            kernel: tid == 4,
            jvm: true,
            java_thread: true,
            scanned: false,
            thread_in_r15: false,
            leaf_unbuilt: false,
            ip: 0,
            sp: 0,
            bp: 0,
            stack_end: 0,
            end: if tid == 2 {
                WalkEnd::Entry
            } else {
                WalkEnd::ChainEnd
            },
            frames: (0..depth)
                .map(|i| crate::sampler::StackFrame {
                    pc: 1,
                    kind: if i % 2 == 0 {
                        FrameKind::Native { method_slot: 0 }
                    } else {
                        FrameKind::Interpreted { method: 8 }
                    },
                    caller: i > 0,
                    deoptimized: false,
                })
                .collect(),
        };
        add_samples(
            &mut threads,
            vec![sample(2, 18), sample(2, 20), sample(4, 9)].into_iter(),
            u64::MAX,
        );
        add_samples(&mut threads, vec![sample(2, 1)].into_iter(), 99);
        let summary = Summary {
            seconds: 5.0,
            rate_hz: 100,
            cpus: 2,
            jvms: 1,
            drops: 0,
            thread_drops: 0,
        };
        let mut out = Vec::new();
        print_report(&mut out, &threads, &summary).expect("written");
        let text = String::from_utf8(out).expect("utf-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "sampled 1 JVM(s) for 5.0 s at 100 Hz on 2 CPU(s)");
        assert!(
            lines[2].contains("Busy")
                && lines[2].contains("1500.0")
                && lines[2].contains("18/20/20")
                && lines[2].contains("9/10/10")
                && lines[2].ends_with("100.0%"),
            "{}",
            lines[2]
        );
        assert!(
            lines[3].contains("Short\\u{1b}[2J\\u{202e} (exited)")
                && lines[3].contains("9/9/9")
                && lines[3].contains("4/4/4")
                && lines[3].ends_with("0.0%"),
            "{}",
            lines[3]
        );
        assert_eq!(
            lines[4],
            "1 other thread(s) ran less than 1 ms and were not sampled"
        );
        assert!(lines[5].starts_with("total: 3 samples, 1505.0 ms on CPU, 0 samples dropped"));
    }
}

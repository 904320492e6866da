//! The cycle engine of `record`: cycles follow the power source's windows, and at the end of
//! each one the CPU power read is shared out between the JVMs and their branches with core's
//! attribution (Joular's formulas, see docs/attribution.md).
//!
//! Per cycle:
//! - each thread's on-CPU time is the difference of the sampler's cumulative sched accounting
//!   ([`ThreadCpu`]), threads that ended in the cycle included;
//! - the machine's busy CPU time is the difference of `/proc/stat` ([`BusyCpu`]);
//! - a JVM's share of the power is its threads' CPU time over the machine's busy CPU time, capped
//!   at 1 ([`MachineLoad::BusyCpuNs`]). The busy time used is never less than all the JVMs' CPU
//!   time together, so that the JVMs' energy never exceeds the source's when the two clocks
//!   disagree by a tick;
//! - each JVM's branches share its power by their samples within each thread.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use joularcode_core::attribution::{self, CycleInput, CycleResult, MachineLoad, Samples};
use joularcode_core::branch::Branches;
use joularcode_core::config::{self, Config};
use joularcode_core::log::{Level, Log};
use joularcode_core::power::PowerSource;
use joularcode_core::procstat::{self, CpuTimes};
use joularcode_core::warnings::{Uncaught, Warnings};
use serde_json::json;

use crate::sampler::ThreadTime;

/// The CPU time one thread used in a cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadUse {
    /// The process (tgid).
    pub pid: u32,
    /// The thread.
    pub tid: u32,
    /// Nanoseconds on CPU in the cycle.
    pub cpu_ns: u64,
    /// The thread's name (comm).
    pub name: String,
    /// The thread ended during the cycle.
    pub exited: bool,
}

/// Each thread's CPU time per cycle, from the sampler's cumulative times
/// ([`crate::sampler::Sampler::thread_times`]).
#[derive(Debug, Default)]
pub struct ThreadCpu {
    /// Cumulative on-CPU ns of each live thread at the end of the previous cycle.
    last: HashMap<(u32, u32), u64>,
}

impl ThreadCpu {
    /// The CPU time each thread used since the previous call, given all the times the sampler
    /// returns now: a thread not seen before counts from 0 (it was born, or tracked, since), and
    /// an exited thread is reported for the last time and forgotten. Threads that used nothing
    /// are left out.
    pub fn cycle(&mut self, times: Vec<ThreadTime>) -> Vec<ThreadUse> {
        let mut used = Vec::new();
        for time in times {
            let key = (time.pid, time.tid);
            let before = if time.exited {
                self.last.remove(&key)
            } else {
                self.last.insert(key, time.on_cpu_ns)
            };
            let cpu_ns = time.on_cpu_ns.saturating_sub(before.unwrap_or(0));
            if cpu_ns > 0 {
                used.push(ThreadUse {
                    pid: time.pid,
                    tid: time.tid,
                    cpu_ns,
                    name: time.name,
                    exited: time.exited,
                });
            }
        }
        used
    }

    /// Forgets the threads of `pid` (a process that is no longer tracked).
    pub fn forget(&mut self, pid: u32) {
        self.last.retain(|&(p, _), _| p != pid);
    }
}

/// The machine's busy CPU time between two reads of `/proc/stat`.
#[derive(Debug)]
pub struct BusyCpu {
    proc_root: PathBuf,
    ns_per_tick: u64,
    last: Option<CpuTimes>,
}

impl BusyCpu {
    /// Reads `stat` under `proc_root` now, for the first difference. `ticks_per_second` is the
    /// clock tick rate of its counters ([`clock_ticks_per_second`]).
    pub fn start(proc_root: &Path, ticks_per_second: u64) -> BusyCpu {
        let mut busy = BusyCpu {
            proc_root: proc_root.to_path_buf(),
            ns_per_tick: 1_000_000_000 / ticks_per_second.clamp(1, 1_000_000_000),
            last: None,
        };
        busy.last = busy.read();
        busy
    }

    fn read(&self) -> Option<CpuTimes> {
        procstat::read(&self.proc_root).ok().map(|stat| stat.cpu)
    }

    /// Busy CPU nanoseconds of all CPUs since the previous call, or `None` when `/proc/stat`
    /// could not be read now or then, or went back.
    pub fn since_last(&mut self) -> Option<u64> {
        let now = self.read();
        let busy = match (now, self.last) {
            (Some(now), Some(last)) => now.busy.checked_sub(last.busy),
            _ => None,
        };
        self.last = now;
        busy.map(|ticks| ticks.saturating_mul(self.ns_per_tick))
    }
}

/// The clock tick rate of `/proc/stat` (`sysconf(_SC_CLK_TCK)`, 100 on nearly every Linux).
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|&t| t > 0).unwrap_or(100)
}

/// What was measured at the end of a cycle ([`Engine::measure`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measures {
    /// Unix milliseconds at the end of the cycle.
    pub timestamp_ms: i64,
    /// The cycle's length, in ns.
    pub elapsed_ns: u64,
    /// The CPU power over the cycle, in W (0 when it could not be read).
    pub power_w: f64,
    /// The machine's busy CPU time in the cycle, in ns, if `/proc/stat` could be read.
    pub busy_cpu_ns: Option<u64>,
}

/// One JVM's material for a cycle.
#[derive(Debug)]
pub struct JvmInput<'a> {
    /// The JVM's pid.
    pub pid: u32,
    /// Its branches, which the sample counts refer to.
    pub branches: &'a Branches,
    /// Per thread: its CPU time in the cycle, its kind and its samples per branch.
    pub samples: Samples,
    /// Samples of the JVM that wait until it can be read (it is starting).
    pub waiting_samples: u64,
}

/// One JVM's result in a cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct JvmCycle {
    /// The JVM's pid.
    pub pid: u32,
    /// Its threads' CPU time in the cycle, in ns.
    pub cpu_ns: u64,
    /// Its samples counted in the cycle.
    pub samples: u64,
    /// What core's attribution gave it.
    pub result: CycleResult,
}

/// What one cycle gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Cycle {
    /// Unix milliseconds at its end, the CSV rows' timestamp.
    pub timestamp_ms: i64,
    /// Its length, in seconds.
    pub interval_s: f64,
    /// The CPU power read for it, in W (0 when it could not be read).
    pub power_w: f64,
    /// The machine's busy CPU time used for the shares (see the module's documentation), in ns.
    pub busy_cpu_ns: u64,
    /// Samples the sampler lost in the cycle (all JVMs together).
    pub lost_samples: u64,
    /// Each JVM's result.
    pub jvms: Vec<JvmCycle>,
}

impl Cycle {
    /// Energy attributed to the JVMs in this cycle, in J.
    pub fn jvms_energy_j(&self) -> f64 {
        self.jvms
            .iter()
            .map(|jvm| jvm.result.jvm_power_w * self.interval_s)
            .sum()
    }

    /// One JSON object per JVM, one a line, for `--cycle-log` (see docs/record.md).
    pub fn json_lines(&self) -> String {
        let mut lines = String::new();
        for jvm in &self.jvms {
            let result = &jvm.result;
            let energy = |power_w: f64| power_w * self.interval_s;
            let sum = |powers: &mut dyn Iterator<Item = f64>| powers.sum::<f64>();
            let line = json!({
                "timestamp_ms": self.timestamp_ms,
                "pid": jvm.pid,
                "interval_s": self.interval_s,
                "source_power_w": self.power_w,
                "source_energy_j": energy(self.power_w),
                "busy_cpu_ns": self.busy_cpu_ns,
                "jvm_cpu_ns": jvm.cpu_ns,
                "jvm_share": result.jvm_share,
                "jvm_energy_j": energy(result.jvm_power_w),
                "branches_energy_j": energy(sum(&mut result.all.iter().map(|&(_, p)| p))),
                "app_energy_j": energy(sum(&mut result.app.iter().map(|&(_, p)| p))),
                "unattributed_energy_j": energy(result.unattributed_w),
                "coverage": result.coverage,
                "samples": jvm.samples,
                "lost_samples": self.lost_samples,
            });
            lines.push_str(&line.to_string());
            lines.push('\n');
        }
        lines
    }
}

/// Cycles over one power source, shared by every JVM profiled.
pub struct Engine {
    source: Box<dyn PowerSource>,
    warnings: Warnings,
    coverage: HashMap<u32, Warnings>,
    busy: BusyCpu,
    cpus: u32,
    jvm_threads: attribution::JvmThreads,
    rate_ms: u64,
    start_ns: u64,
    drops: u64,
}

impl Engine {
    /// Starts the first cycle at `now_ns` (monotonic) with the power source just opened,
    /// `/proc/stat` under `proc_root` and `cpus` CPUs.
    pub fn start(
        source: Box<dyn PowerSource>,
        config: &Config,
        proc_root: &Path,
        cpus: u32,
        now_ns: u64,
    ) -> Engine {
        Engine {
            source,
            warnings: Warnings::default(),
            coverage: HashMap::new(),
            busy: BusyCpu::start(proc_root, clock_ticks_per_second()),
            cpus,
            jvm_threads: match config.jvm_threads {
                config::JvmThreads::Own => attribution::JvmThreads::Own,
                config::JvmThreads::Spread => attribution::JvmThreads::Spread,
            },
            rate_ms: config.sample_rate_ms,
            start_ns: now_ns,
            drops: 0,
        }
    }

    /// Whether the power source's window that began the cycle is over at `now_ns`.
    pub fn window_over(&self, now_ns: u64) -> bool {
        self.source
            .window_over(Duration::from_nanos(now_ns.saturating_sub(self.start_ns)))
    }

    /// Ends the cycle at `now_ns`: reads the power over it and the machine's busy CPU time in it,
    /// and starts the next one. Its samples may still be on their way: share the power out with
    /// [`Engine::share`] once they are in.
    pub fn measure(&mut self, now_ns: u64, log: &dyn Log) -> Measures {
        let elapsed_ns = now_ns.saturating_sub(self.start_ns);
        self.start_ns = now_ns;
        Measures {
            timestamp_ms: unix_ms(),
            elapsed_ns,
            power_w: self.warnings.power(log, self.source.watts()),
            busy_cpu_ns: self.busy.since_last(),
        }
    }

    /// Shares the power `measures` gave out between `jvms` (their threads' CPU time in the cycle
    /// and their samples). `drops` is the sampler's cumulative count of lost samples. Warnings
    /// (low coverage, lost samples) go to `log`.
    pub fn share(
        &mut self,
        measures: &Measures,
        drops: u64,
        jvms: &[JvmInput],
        log: &dyn Log,
    ) -> Cycle {
        let Measures {
            timestamp_ms,
            elapsed_ns,
            power_w,
            busy_cpu_ns,
        } = *measures;
        let cpu_ns = |samples: &Samples| {
            samples
                .threads()
                .fold(0u64, |sum, (_, thread)| sum.saturating_add(thread.cpu_ns))
        };
        let all_jvms_ns = jvms
            .iter()
            .fold(0u64, |sum, jvm| sum.saturating_add(cpu_ns(&jvm.samples)));
        let busy_cpu_ns = busy_cpu_ns
            .unwrap_or_else(|| elapsed_ns.saturating_mul(u64::from(self.cpus)))
            .max(all_jvms_ns);

        let missed = drops.saturating_sub(self.drops);
        self.drops = drops;
        let mut taken = 0u64;
        let mut results = Vec::with_capacity(jvms.len());
        for jvm in jvms {
            let jvm_cpu_ns = cpu_ns(&jvm.samples);
            let samples = jvm.samples.threads().fold(0u64, |sum, (_, thread)| {
                thread
                    .samples
                    .values()
                    .fold(sum, |s, &n| s.saturating_add(n))
            });
            taken = taken.saturating_add(samples);
            let input = CycleInput {
                cpu_power_w: power_w,
                elapsed_ns,
                jvm_cpu_ns,
                cpus: self.cpus,
                machine: MachineLoad::BusyCpuNs(Some(busy_cpu_ns)),
                samples: &jvm.samples,
            };
            let result = attribution::attribute(&input, jvm.branches, self.jvm_threads);
            let warnings = self.coverage.entry(jvm.pid).or_default();
            let uncaught = Uncaught {
                threads: result.unsampled_threads,
                cpu_ns: result.unsampled_cpu_ns,
                rate_ms: self.rate_ms,
                lost_samples: missed,
                waiting_samples: jvm.waiting_samples,
            };
            if jvms.len() > 1 {
                let log = Prefixed { pid: jvm.pid, log };
                warnings.coverage_of_samples(&log, result.coverage, &uncaught);
            } else {
                warnings.coverage_of_samples(log, result.coverage, &uncaught);
            }
            results.push(JvmCycle {
                pid: jvm.pid,
                cpu_ns: jvm_cpu_ns,
                samples,
                result,
            });
        }
        self.warnings.sampler(
            log,
            self.rate_ms,
            elapsed_ns as f64 / 1e9,
            taken.saturating_add(missed),
            missed,
        );
        Cycle {
            timestamp_ms,
            interval_s: elapsed_ns as f64 / 1e9,
            power_w,
            busy_cpu_ns,
            lost_samples: missed,
            jvms: results,
        }
    }

    /// Forgets the warnings' state of JVM `pid` (it ended).
    pub fn forget(&mut self, pid: u32) {
        self.coverage.remove(&pid);
    }
}

/// The wall clock in Unix milliseconds.
fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|since| i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Says which JVM a message is about, when several are profiled.
struct Prefixed<'a> {
    pid: u32,
    log: &'a dyn Log,
}

impl Log for Prefixed<'_> {
    fn log(&self, level: Level, message: &str) {
        self.log.log(level, &format!("JVM {}: {message}", self.pid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use joularcode_core::attribution::ThreadKind;
    use joularcode_core::log::Recorded;
    use joularcode_core::power::{self, SystemClock, SystemRoots};
    use std::sync::Arc;

    fn time(pid: u32, tid: u32, on_cpu_ns: u64, exited: bool) -> ThreadTime {
        ThreadTime {
            pid,
            tid,
            on_cpu_ns,
            name: format!("t{tid}"),
            exited,
        }
    }

    #[test]
    fn thread_cpu_takes_differences_and_forgets_exited_threads() {
        let mut cpu = ThreadCpu::default();
        let used = cpu.cycle(vec![time(1, 1, 100, false), time(1, 2, 0, false)]);
        assert_eq!(
            used.iter().map(|u| (u.tid, u.cpu_ns)).collect::<Vec<_>>(),
            [(1, 100)]
        );
        let used = cpu.cycle(vec![
            time(1, 1, 250, false),
            time(1, 2, 40, true),
            time(1, 3, 70, true),
        ]);
        assert_eq!(
            used.iter().map(|u| (u.tid, u.cpu_ns)).collect::<Vec<_>>(),
            [(1, 150), (2, 40), (3, 70)]
        );
        assert_eq!(cpu.last.len(), 1);
        cpu.forget(1);
        assert!(cpu.last.is_empty());
    }

    /// A /proc with a `stat` whose first line says `busy` ticks of user time and `idle` idle.
    fn write_stat(root: &Path, busy: u64, idle: u64) {
        std::fs::write(
            root.join("stat"),
            format!("cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 0 0 0 0\ncpu1 0 0 0 0\n"),
        )
        .unwrap();
    }

    #[test]
    fn busy_cpu_is_the_difference_in_nanoseconds() {
        let proc = tempfile::tempdir().unwrap();
        write_stat(proc.path(), 1000, 5000);
        let mut busy = BusyCpu::start(proc.path(), 100);
        write_stat(proc.path(), 1150, 5050);
        assert_eq!(busy.since_last(), Some(1_500_000_000));
        std::fs::remove_file(proc.path().join("stat")).unwrap();
        assert_eq!(busy.since_last(), None);
        write_stat(proc.path(), 1200, 5100);
        assert_eq!(busy.since_last(), None, "no earlier reading");
        write_stat(proc.path(), 1100, 5100);
        assert_eq!(busy.since_last(), None, "went back");
    }

    /// A thread in a test: `(tid, cpu_ns, kind, [(method of its one-frame branch, samples)])`.
    type TestThread<'a> = (u64, u64, ThreadKind, &'a [(&'a str, u64)]);

    /// A JVM's samples.
    fn jvm_samples(branches: &mut Branches, threads: &[TestThread]) -> Samples {
        let mut samples = Samples::default();
        for &(tid, cpu_ns, kind, counts) in threads {
            samples.add_cpu(tid, cpu_ns);
            samples.set_kind(tid, kind);
            for &(method, n) in counts {
                let frame = branches.frame("app.Main", method);
                let branch = branches.branch(&[frame]);
                samples.count(tid, branch, n);
            }
        }
        samples
    }

    /// An engine over the real `vm` source reading a constant `watts`, and a fake /proc.
    fn engine(watts: &str, proc: &Path, dir: &Path) -> Engine {
        engine_with(watts, proc, dir, "own")
    }

    /// The same, with `jvm-threads` set to `jvm_threads`.
    fn engine_with(watts: &str, proc: &Path, dir: &Path, jvm_threads: &str) -> Engine {
        let file = dir.join("watts");
        std::fs::write(&file, watts).unwrap();
        let mut config = Config::default();
        let log = Recorded::default();
        for (key, value) in [
            ("power-source-type", "vm"),
            ("vm-power-format", "watts"),
            ("vm-power-file", file.to_str().unwrap()),
            ("jvm-threads", jvm_threads),
        ] {
            config.set(key, value, &log).unwrap();
        }
        let source = power::open(
            &config,
            &SystemRoots::default(),
            Arc::new(SystemClock::default()),
            &log,
        )
        .expect("the vm source opens");
        Engine::start(source, &config, proc, 2, 1_000_000_000)
    }

    /// Ends the cycle at `now_ns` with every sample in.
    fn end(
        engine: &mut Engine,
        now_ns: u64,
        drops: u64,
        jvms: &[JvmInput],
        log: &dyn Log,
    ) -> Cycle {
        let measures = engine.measure(now_ns, log);
        engine.share(&measures, drops, jvms, log)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * a.abs().max(1.0)
    }

    #[test]
    fn several_jvms_share_one_reading_without_exceeding_it() {
        let proc = tempfile::tempdir().unwrap();
        write_stat(proc.path(), 0, 0);
        let mut engine = engine("100\n", proc.path(), proc.path());
        assert!(!engine.window_over(1_500_000_000));
        assert!(engine.window_over(2_000_000_000));
        // 1 s, 2 CPUs, 150 ticks (1.5 s) busy; JVM a used 1 s, JVM b 0.4 s.
        write_stat(proc.path(), 150, 50);
        let mut a = Branches::new::<&str>(&[]);
        let mut b = Branches::new::<&str>(&[]);
        let jvms = [
            JvmInput {
                pid: 10,
                samples: jvm_samples(
                    &mut a,
                    &[
                        (
                            1,
                            750_000_000,
                            ThreadKind::Java,
                            &[("heavy", 3), ("light", 1)],
                        ),
                        (2, 250_000_000, ThreadKind::Java, &[]),
                    ],
                ),
                branches: &a,
                waiting_samples: 0,
            },
            JvmInput {
                pid: 20,
                samples: jvm_samples(&mut b, &[(1, 400_000_000, ThreadKind::Java, &[("run", 5)])]),
                branches: &b,
                waiting_samples: 0,
            },
        ];
        let log = Recorded::default();
        let cycle = end(&mut engine, 2_000_000_000, 0, &jvms, &log);
        assert_eq!(cycle.interval_s, 1.0);
        assert_eq!(cycle.power_w, 100.0);
        assert_eq!(cycle.busy_cpu_ns, 1_500_000_000);
        let [a, b] = &cycle.jvms[..] else {
            panic!("two JVMs")
        };
        assert!(close(a.result.jvm_share, 1.0 / 1.5));
        assert!(close(b.result.jvm_share, 0.4 / 1.5));
        assert!(cycle.jvms_energy_j() <= 100.0);
        // Thread 2 of JVM a was never sampled: a quarter of a's energy is unattributed.
        assert!(close(a.result.coverage, 0.75));
        let heavy: f64 = a.result.all.iter().map(|&(_, p)| p).fold(0.0, f64::max);
        assert!(close(heavy, a.result.jvm_power_w * 0.75 * 0.75));
        assert_eq!((a.samples, b.samples, a.cpu_ns), (4, 5, 1_000_000_000));
        assert!(log.messages().is_empty(), "{:?}", log.messages());
    }

    #[test]
    fn jvm_threads_spread_leaves_the_jvms_own_threads_out_of_the_total() {
        let proc = tempfile::tempdir().unwrap();
        write_stat(proc.path(), 0, 0);
        for (mode, coverage) in [("own", 0.5), ("spread", 1.0)] {
            let mut engine = engine_with("10", proc.path(), proc.path(), mode);
            let mut branches = Branches::new::<&str>(&[]);
            let jvm = JvmInput {
                pid: 1,
                samples: jvm_samples(
                    &mut branches,
                    &[
                        (1, 500_000_000, ThreadKind::Java, &[("run", 5)]),
                        (2, 500_000_000, ThreadKind::Jvm, &[]),
                    ],
                ),
                branches: &branches,
                waiting_samples: 0,
            };
            let cycle = end(&mut engine, 2_000_000_000, 0, &[jvm], &Recorded::default());
            assert!(close(cycle.jvms[0].result.coverage, coverage), "{mode}");
        }
    }

    #[test]
    fn the_busy_time_is_never_below_the_jvms_cpu() {
        let proc = tempfile::tempdir().unwrap();
        write_stat(proc.path(), 0, 0);
        let mut engine = engine("50", proc.path(), proc.path());
        write_stat(proc.path(), 10, 190); // 0.1 s busy, but the JVM says 0.3 s
        let mut branches = Branches::new::<&str>(&[]);
        let jvm = JvmInput {
            pid: 1,
            samples: jvm_samples(
                &mut branches,
                &[(1, 300_000_000, ThreadKind::Java, &[("run", 3)])],
            ),
            branches: &branches,
            waiting_samples: 0,
        };
        let cycle = end(&mut engine, 1_500_000_000, 0, &[jvm], &Recorded::default());
        assert_eq!(cycle.busy_cpu_ns, 300_000_000);
        assert!(close(cycle.jvms_energy_j(), 50.0 * 0.5));
        let line: serde_json::Value =
            serde_json::from_str(cycle.json_lines().lines().next().unwrap()).unwrap();
        assert_eq!(line["pid"], 1);
        assert_eq!(line["jvm_cpu_ns"], 300_000_000);
        let energy = |key: &str| line[key].as_f64().unwrap();
        assert!(close(energy("source_energy_j"), 25.0));
        assert!(close(
            energy("branches_energy_j") + energy("unattributed_energy_j"),
            energy("jvm_energy_j")
        ));
    }

    #[test]
    fn warnings_name_the_jvm_and_count_lost_samples() {
        let proc = tempfile::tempdir().unwrap();
        write_stat(proc.path(), 0, 0);
        let mut engine = engine("10", proc.path(), proc.path());
        let mut a = Branches::new::<&str>(&[]);
        let mut b = Branches::new::<&str>(&[]);
        let sampled_a_little = [
            (1, 100_000_000, ThreadKind::Java, &[("run", 1)][..]),
            (2, 900_000_000, ThreadKind::Jvm, &[][..]),
        ];
        let jvms = [
            JvmInput {
                pid: 7,
                samples: jvm_samples(&mut a, &sampled_a_little),
                branches: &a,
                waiting_samples: 0,
            },
            JvmInput {
                pid: 8,
                samples: jvm_samples(&mut b, &sampled_a_little),
                branches: &b,
                waiting_samples: 0,
            },
        ];
        let log = Recorded::default();
        let cycle = end(&mut engine, 2_000_000_000, 5, &jvms, &log);
        let messages: Vec<String> = log.messages().into_iter().map(|(_, m)| m).collect();
        assert_eq!(messages.len(), 3, "{messages:?}");
        assert_eq!(
            messages[0],
            "JVM 7: Only 10% of this JVM's CPU time in the last cycle went to threads that a \
             sample caught, so the power reported per method is a lower bound: 5 samples were \
             lost (the sampler's buffer was full); 1 thread used 900 ms of CPU, without a \
             sample, although one every 10 ms of CPU should have caught it."
        );
        assert!(messages[1].starts_with("JVM 8: Only 10%"));
        assert!(
            messages[2]
                .contains("7 samples were taken in the last window, about one every 143 ms."),
            "{}",
            messages[2]
        );
        assert!(cycle.json_lines().contains(r#""lost_samples":5"#));
        // The drops are cumulative: the same count again means none lost in this cycle.
        let log = Recorded::default();
        end(&mut engine, 3_000_000_000, 5, &jvms[..1], &log);
        assert!(log.messages().is_empty(), "{:?}", log.messages());
    }
}

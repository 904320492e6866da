//! The cycle engine shared by `record` (the eBPF profiler) and the agent's sampling mode: cycles
//! follow the power source's windows, and at the end of each one the CPU power read is shared out
//! between the JVMs and their branches with [`crate::attribution`] (Joular's formulas, see
//! docs/attribution.md).
//!
//! Per cycle:
//! - each thread's CPU time comes from the caller ([`crate::threads`] turns cumulative times into
//!   a cycle's use), and so does each JVM's CPU time;
//! - the machine's load comes from a [`MachineMeter`]: the busy CPU time of all CPUs for the
//!   eBPF profiler, a JVM's share being its CPU time over that, capped at 1 (the busy time used
//!   is never less than all the JVMs' CPU time together, so that the JVMs' energy never exceeds
//!   the source's when the two clocks disagree by a tick); the system load from 0 to 1 for the
//!   agent, as Joular does;
//! - each JVM's branches share its power by their samples within each thread.
//!
//! A [`Cycle`] answers in joules ([`crate::energy`]), and carries the carbon intensity in force
//! for it when `carbon-intensity` is set ([`crate::carbon`]), so that every output gives the
//! grams of CO2e of its energy; [`log`] writes it as the cycle log's lines.

pub mod log;

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::attribution::{self, CycleInput, CycleResult, CycleThreads, MachineLoad};
use crate::branch::Branches;
use crate::carbon::{Intensity, IntensityReader};
use crate::config::Config;
use crate::energy::{Energy, Interval, Power};
use crate::log::{Level, Log};
use crate::machine::MachineMeter;
use crate::power::PowerSource;
use crate::warnings::{Uncaught, Warnings};

/// What was measured at the end of a cycle ([`Engine::measure`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measures {
    /// Unix milliseconds at the end of the cycle.
    pub timestamp_ms: i64,
    /// The cycle's length.
    pub interval: Interval,
    /// The CPU power over the cycle (0 when it could not be read).
    pub power: Power,
    /// How loaded the machine was in the cycle.
    pub machine: MachineLoad,
    /// The carbon intensity in force, when `carbon-intensity` is set and could be read.
    pub carbon: Option<Intensity>,
}

/// One JVM's material for a cycle.
#[derive(Debug)]
pub struct JvmInput<'a> {
    /// The JVM's pid.
    pub pid: u32,
    /// Its branches, which the sample counts refer to.
    pub branches: &'a Branches,
    /// Per thread: its CPU time in the cycle, its kind and its samples per branch.
    pub threads: CycleThreads,
    /// The CPU time the whole JVM used in the cycle, in ns (the profiler's own threads left
    /// out): [`CycleThreads::cpu_ns`] of `threads` when every thread is in them.
    pub cpu_ns: u64,
}

/// One JVM's result in a cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct JvmCycle {
    /// The JVM's pid.
    pub pid: u32,
    /// Its CPU time in the cycle, in ns.
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
    /// Its length.
    pub interval: Interval,
    /// The CPU power read for it (0 when it could not be read).
    pub power: Power,
    /// The machine's load used for the shares (see the module's documentation).
    pub machine: MachineLoad,
    /// Samples the sampler lost in the cycle (all JVMs together).
    pub lost_samples: u64,
    /// The carbon intensity in force for the cycle, when `carbon-intensity` is set and could
    /// be read: the grams of CO2e of any of its energy ([`Intensity::grams`]).
    pub carbon: Option<Intensity>,
    /// Each JVM's result.
    pub jvms: Vec<JvmCycle>,
}

impl Cycle {
    /// The energy the power source gave in this cycle.
    pub fn source_energy(&self) -> Energy {
        self.power * self.interval
    }

    /// Energy attributed to the JVMs in this cycle.
    pub fn jvms_energy(&self) -> Energy {
        self.jvms.iter().map(|jvm| jvm.result.jvm_energy()).sum()
    }
}

/// Cycles over one power source, shared by every JVM profiled.
pub struct Engine {
    source: Box<dyn PowerSource>,
    warnings: Warnings,
    coverage: HashMap<u32, Warnings>,
    machine: Box<dyn MachineMeter>,
    carbon: Option<IntensityReader>,
    cpus: u32,
    jvm_threads: attribution::JvmThreads,
    rate_ms: u64,
    start_ns: u64,
    drops: u64,
}

impl Engine {
    /// Starts the first cycle at `now_ns` (monotonic) with the power source just opened, the
    /// machine's load read by `machine` and `cpus` CPUs.
    pub fn start(
        source: Box<dyn PowerSource>,
        config: &Config,
        machine: Box<dyn MachineMeter>,
        cpus: u32,
        now_ns: u64,
    ) -> Engine {
        Engine {
            source,
            warnings: Warnings::default(),
            coverage: HashMap::new(),
            machine,
            carbon: config.carbon_intensity.as_ref().map(IntensityReader::new),
            cpus,
            jvm_threads: config.jvm_threads,
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

    /// Ends the cycle at `now_ns`: reads the power over it and the machine's load in it, and
    /// starts the next one. Its samples may still be on their way: share the power out with
    /// [`Engine::share`] once they are in.
    pub fn measure(&mut self, now_ns: u64, log: &dyn Log) -> Measures {
        let interval = Interval::from_ns(now_ns.saturating_sub(self.start_ns));
        self.start_ns = now_ns;
        Measures {
            timestamp_ms: unix_ms(),
            interval,
            power: Power::from_watts(self.warnings.power(log, self.source.watts())),
            machine: self.machine.since_last(),
            carbon: self.carbon.as_mut().and_then(|carbon| carbon.read(log)),
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
            interval,
            power,
            machine,
            carbon,
        } = *measures;
        let machine = match machine {
            MachineLoad::BusyCpuNs(busy) => {
                let all_jvms_ns = jvms
                    .iter()
                    .fold(0u64, |sum, jvm| sum.saturating_add(jvm.cpu_ns));
                MachineLoad::BusyCpuNs(Some(
                    busy.unwrap_or_else(|| interval.ns().saturating_mul(u64::from(self.cpus)))
                        .max(all_jvms_ns),
                ))
            }
            load => load,
        };

        let missed = drops.saturating_sub(self.drops);
        self.drops = drops;
        let mut taken = 0u64;
        let mut results = Vec::with_capacity(jvms.len());
        for jvm in jvms {
            let samples = jvm.threads.sample_count();
            taken = taken.saturating_add(samples);
            let input = CycleInput {
                cpu_power: power,
                interval,
                jvm_cpu_ns: jvm.cpu_ns,
                cpus: self.cpus,
                machine,
                threads: &jvm.threads,
            };
            let result = attribution::attribute(&input, jvm.branches, self.jvm_threads);
            let warnings = self.coverage.entry(jvm.pid).or_default();
            let uncaught = Uncaught {
                threads: result.unsampled_threads,
                cpu_ns: result.unsampled_cpu_ns,
                rate_ms: self.rate_ms,
                lost_samples: missed,
            };
            if jvms.len() > 1 {
                let log = Prefixed { pid: jvm.pid, log };
                warnings.coverage_of_samples(&log, result.coverage, &uncaught);
            } else {
                warnings.coverage_of_samples(log, result.coverage, &uncaught);
            }
            results.push(JvmCycle {
                pid: jvm.pid,
                cpu_ns: jvm.cpu_ns,
                samples,
                result,
            });
        }
        self.warnings.sampler(
            log,
            self.rate_ms,
            interval.seconds(),
            taken.saturating_add(missed),
            missed,
        );
        Cycle {
            timestamp_ms,
            interval,
            power,
            machine,
            lost_samples: missed,
            carbon,
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
    use crate::attribution::ThreadKind;
    use crate::log::Recorded;
    use crate::machine::tests::{source as proc_stat, write_stat};
    use crate::machine::{BusyCpu, SystemLoad};
    use crate::power::{self, SystemClock, SystemRoots};
    use std::path::Path;
    use std::sync::Arc;

    /// A thread in a test: `(tid, cpu_ns, kind, [(method of its one-frame branch, samples)])`.
    type TestThread<'a> = (u64, u64, ThreadKind, &'a [(&'a str, u64)]);

    /// A JVM's material, its CPU time that of its threads.
    fn jvm<'a>(pid: u32, branches: &'a mut Branches, threads: &[TestThread]) -> JvmInput<'a> {
        let mut cycle = CycleThreads::default();
        for &(tid, cpu_ns, kind, counts) in threads {
            cycle.add_cpu(tid, cpu_ns);
            cycle.set_kind(tid, kind);
            for &(method, n) in counts {
                let frame = branches.frame("app.Main", method);
                let branch = branches.branch(&[frame]);
                cycle.count(tid, branch, n);
            }
        }
        let cpu_ns = cycle.cpu_ns();
        JvmInput {
            pid,
            branches,
            threads: cycle,
            cpu_ns,
        }
    }

    /// An engine over the real `vm` source reading a constant `watts`, with `jvm-threads` set to
    /// `jvm_threads`, and the machine's load read by `machine`.
    fn engine(
        watts: &str,
        dir: &Path,
        jvm_threads: &str,
        machine: Box<dyn MachineMeter>,
    ) -> Engine {
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
        Engine::start(source, &config, machine, 2, 1_000_000_000)
    }

    fn busy_engine(watts: &str, proc: &Path) -> Engine {
        engine(
            watts,
            proc,
            "own",
            Box::new(BusyCpu::start(proc_stat(proc))),
        )
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
        let mut engine = busy_engine("100\n", proc.path());
        assert!(!engine.window_over(1_500_000_000));
        assert!(engine.window_over(2_000_000_000));
        // 1 s, 2 CPUs, 150 ticks (1.5 s) busy; JVM a used 1 s, JVM b 0.4 s.
        write_stat(proc.path(), 150, 50);
        let mut a = Branches::new::<&str>(&[]);
        let mut b = Branches::new::<&str>(&[]);
        let jvms = [
            jvm(
                10,
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
            jvm(
                20,
                &mut b,
                &[(1, 400_000_000, ThreadKind::Java, &[("run", 5)])],
            ),
        ];
        let log = Recorded::default();
        let cycle = end(&mut engine, 2_000_000_000, 0, &jvms, &log);
        assert_eq!(cycle.interval.seconds(), 1.0);
        assert_eq!(cycle.power.watts(), 100.0);
        assert_eq!(cycle.machine, MachineLoad::BusyCpuNs(Some(1_500_000_000)));
        let [a, b] = &cycle.jvms[..] else {
            panic!("two JVMs")
        };
        assert!(close(a.result.jvm_share, 1.0 / 1.5));
        assert!(close(b.result.jvm_share, 0.4 / 1.5));
        assert!(cycle.jvms_energy() <= cycle.source_energy());
        assert_eq!(cycle.source_energy().joules(), 100.0);
        // Thread 2 of JVM a was never sampled: a quarter of a's energy is unattributed.
        assert!(close(a.result.coverage, 0.75));
        let heavy: f64 = a
            .result
            .all
            .iter()
            .map(|&(_, p)| p.watts())
            .fold(0.0, f64::max);
        assert!(close(heavy, a.result.jvm_power.watts() * 0.75 * 0.75));
        assert_eq!((a.samples, b.samples, a.cpu_ns), (4, 5, 1_000_000_000));
        assert!(log.messages().is_empty(), "{:?}", log.messages());
    }

    #[test]
    fn the_jvms_that_make_the_whole_load_share_out_the_sources_energy_whole() {
        let proc = tempfile::tempdir().unwrap();
        write_stat(proc.path(), 0, 0);
        let mut engine = busy_engine("37.5\n", proc.path());
        // 1.5 s on 2 CPUs; the two JVMs are the only load: 0.9 s + 0.3 s busy (120 ticks).
        write_stat(proc.path(), 120, 180);
        let mut a = Branches::new(&["app."]);
        let mut b = Branches::new(&["app."]);
        let jvms = [
            jvm(
                1,
                &mut a,
                &[
                    (1, 600_000_000, ThreadKind::Java, &[("x", 3), ("y", 2)]),
                    (2, 300_000_000, ThreadKind::Jvm, &[("gc", 1)]),
                ],
            ),
            jvm(
                2,
                &mut b,
                &[(1, 300_000_000, ThreadKind::Java, &[("z", 7)])],
            ),
        ];
        let cycle = end(&mut engine, 2_500_000_000, 0, &jvms, &Recorded::default());
        let source = cycle.source_energy().joules();
        assert!(close(source, 37.5 * 1.5));
        assert!(close(cycle.jvms_energy().joules(), source));
        for jvm in &cycle.jvms {
            let result = &jvm.result;
            assert!(close(
                result.branches_energy().joules() + result.unattributed_energy().joules(),
                result.jvm_energy().joules()
            ));
        }
        // Every thread was sampled: the branches of the all file get the source's energy whole.
        let branches: f64 = cycle
            .jvms
            .iter()
            .map(|jvm| jvm.result.branches_energy().joules())
            .sum();
        assert!(close(branches, source));
    }

    #[test]
    fn the_system_load_gives_joulars_share() {
        let proc = tempfile::tempdir().unwrap();
        write_stat(proc.path(), 0, 0);
        let mut engine = engine(
            "40",
            proc.path(),
            "own",
            Box::new(SystemLoad::start(proc_stat(proc.path()))),
        );
        // Half the machine busy over 1 s on 2 CPUs; the JVM used 0.5 s: its load is 0.25, its
        // share 0.25 / 0.5.
        write_stat(proc.path(), 100, 100);
        let mut branches = Branches::new::<&str>(&[]);
        let input = [jvm(
            1,
            &mut branches,
            &[(1, 500_000_000, ThreadKind::Java, &[("run", 2)])],
        )];
        let cycle = end(&mut engine, 2_000_000_000, 0, &input, &Recorded::default());
        assert_eq!(cycle.machine, MachineLoad::SystemLoad(0.5));
        assert!(close(cycle.jvms[0].result.jvm_share, 0.5));
        let line: serde_json::Value =
            serde_json::from_str(cycle.json_lines().lines().next().unwrap()).unwrap();
        assert_eq!(line["system_load"], 0.5);
        assert!(line.get("busy_cpu_ns").is_none());
    }

    #[test]
    fn jvm_threads_spread_leaves_the_jvms_own_threads_out_of_the_total() {
        let proc = tempfile::tempdir().unwrap();
        write_stat(proc.path(), 0, 0);
        for (mode, coverage) in [("own", 0.5), ("spread", 1.0)] {
            let mut engine = engine(
                "10",
                proc.path(),
                mode,
                Box::new(BusyCpu::start(proc_stat(proc.path()))),
            );
            let mut branches = Branches::new::<&str>(&[]);
            let input = [jvm(
                1,
                &mut branches,
                &[
                    (1, 500_000_000, ThreadKind::Java, &[("run", 5)]),
                    (2, 500_000_000, ThreadKind::Jvm, &[]),
                ],
            )];
            let cycle = end(&mut engine, 2_000_000_000, 0, &input, &Recorded::default());
            assert!(close(cycle.jvms[0].result.coverage, coverage), "{mode}");
        }
    }

    #[test]
    fn the_busy_time_is_never_below_the_jvms_cpu() {
        let proc = tempfile::tempdir().unwrap();
        write_stat(proc.path(), 0, 0);
        let mut engine = busy_engine("50", proc.path());
        write_stat(proc.path(), 10, 190); // 0.1 s busy, but the JVM says 0.3 s
        let mut branches = Branches::new::<&str>(&[]);
        let input = [jvm(
            1,
            &mut branches,
            &[(1, 300_000_000, ThreadKind::Java, &[("run", 3)])],
        )];
        let cycle = end(&mut engine, 1_500_000_000, 0, &input, &Recorded::default());
        assert_eq!(cycle.machine, MachineLoad::BusyCpuNs(Some(300_000_000)));
        assert!(close(cycle.jvms_energy().joules(), 50.0 * 0.5));
        let line: serde_json::Value =
            serde_json::from_str(cycle.json_lines().lines().next().unwrap()).unwrap();
        assert_eq!(line["pid"], 1);
        assert_eq!(line["jvm_cpu_ns"], 300_000_000);
        assert_eq!(line["busy_cpu_ns"], 300_000_000);
        let energy = |key: &str| line[key].as_f64().unwrap();
        assert!(close(energy("source_energy_j"), 25.0));
        assert!(close(
            energy("branches_energy_j") + energy("unattributed_energy_j"),
            energy("jvm_energy_j")
        ));
    }

    #[test]
    fn each_cycle_gets_the_carbon_intensity_in_force_at_its_end() {
        use crate::carbon::{IntensitySetting, IntensitySource};
        let proc = tempfile::tempdir().unwrap();
        write_stat(proc.path(), 0, 0);
        let mut engine = busy_engine("36", proc.path());
        let file = proc.path().join("carbon");
        engine.carbon = Some(IntensityReader::new(&IntensitySetting::File(file.clone())));
        let mut branches = Branches::new::<&str>(&[]);
        let input = [jvm(
            1,
            &mut branches,
            &[(1, 1_000_000_000, ThreadKind::Java, &[("run", 3)])],
        )];
        let log = Recorded::default();
        let mut grams = Vec::new();
        for (second, intensity) in [(2, Some("100\n")), (3, Some("300\n")), (4, None)] {
            match intensity {
                Some(text) => std::fs::write(&file, text).unwrap(),
                None => std::fs::remove_file(&file).unwrap(),
            }
            write_stat(proc.path(), 100 * (second - 1), 100 * (second - 1));
            let cycle = end(&mut engine, second * 1_000_000_000, 0, &input, &log);
            let line: serde_json::Value =
                serde_json::from_str(cycle.json_lines().lines().next().unwrap()).unwrap();
            grams.push(line["jvm_co2e_g"].as_f64());
            if let Some(carbon) = cycle.carbon {
                assert_eq!(carbon.source, IntensitySource::File);
                assert_eq!(line["carbon_intensity_source"], "file");
                assert_eq!(
                    line["carbon_intensity_g_per_kwh"].as_f64(),
                    Some(carbon.grams_per_kwh)
                );
            }
        }
        // 36 J a cycle (the JVM is the machine's whole load): 36 / 3.6e6 kWh.
        assert_eq!(grams, [Some(0.001), Some(0.003), None]);
        let messages = log.messages();
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert!(messages[0].1.contains("get no grams of CO2e"));
    }

    #[test]
    fn warnings_name_the_jvm_and_count_lost_samples() {
        let proc = tempfile::tempdir().unwrap();
        write_stat(proc.path(), 0, 0);
        let mut engine = busy_engine("10", proc.path());
        let mut a = Branches::new::<&str>(&[]);
        let mut b = Branches::new::<&str>(&[]);
        let sampled_a_little = [
            (1, 100_000_000, ThreadKind::Java, &[("run", 1)][..]),
            (2, 900_000_000, ThreadKind::Jvm, &[][..]),
        ];
        let jvms = [
            jvm(7, &mut a, &sampled_a_little),
            jvm(8, &mut b, &sampled_a_little),
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

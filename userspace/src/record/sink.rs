//! Where each cycle of a recording goes besides the CSV files: the status line, the flame graph
//! and pprof profile written at the end, the live view of `top`. Each is a [`Sink`], handed
//! every cycle's result with the JVMs it is about, and told when the recording is over.

use std::collections::HashMap;

use joularcode_core::attribution::{CycleThreads, ThreadKind};
use joularcode_core::branch::{BranchId, Branches};
use joularcode_core::cycle::{Cycle, JvmCycle};
use joularcode_core::energy::{Energy, Power};
use joularcode_core::log::Log;

use crate::output::OutputError;
use crate::profile::BranchSet;

/// An output fed with each cycle of a recording.
pub trait Sink {
    /// One cycle's results.
    fn cycle(&mut self, cycle: &CycleView<'_>);

    /// The recording is over (or failed): write what was gathered (the file that cannot be
    /// written is the error). Messages go to `log`.
    fn finish(&mut self, log: &dyn Log) -> Result<(), OutputError>;
}

/// One cycle, as the sinks see it.
#[derive(Debug)]
pub struct CycleView<'a> {
    /// The power source, as the start lines name it.
    pub source: &'a str,
    /// What the cycle gave.
    pub cycle: &'a Cycle,
    /// Each JVM of the cycle, in the order of `cycle.jvms`.
    pub jvms: Vec<JvmView<'a>>,
}

/// One JVM's part of a cycle.
#[derive(Debug)]
pub struct JvmView<'a> {
    /// Its main class (or jar, or module).
    pub main_class: &'a str,
    /// It ended during the cycle.
    pub ended: bool,
    /// Its branches, which `result` and `threads` refer to.
    pub branches: &'a Branches,
    /// Its threads' CPU time and samples in the cycle.
    pub threads: &'a CycleThreads,
    /// What it got.
    pub result: &'a JvmCycle,
}

/// The power and energy of one branch in a cycle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BranchPower<'a> {
    /// The branch's id in the JVM's [`Branches`] (for [`BranchSet::All`]; `None` for the
    /// application's names).
    pub id: Option<BranchId>,
    /// The branch's name: its frames, oldest first, joined by `;`.
    pub name: &'a str,
    /// Its power over the cycle.
    pub power: Power,
    /// Its energy in the cycle.
    pub energy: Energy,
    /// The stack samples that caught it in the cycle.
    pub samples: u64,
}

impl<'a> JvmView<'a> {
    /// The JVM's process id.
    pub fn pid(&self) -> u32 {
        self.result.pid
    }

    /// The branches of `set` that got power in the cycle, with their samples, in branch order.
    pub fn powers(&self, set: BranchSet) -> Vec<BranchPower<'a>> {
        let mut samples: HashMap<BranchId, u64> = HashMap::new();
        for (_, thread) in self.threads.threads() {
            for (&branch, &n) in &thread.samples {
                *samples.entry(branch).or_default() += n;
            }
        }
        let result = &self.result.result;
        match set {
            BranchSet::All => result
                .all
                .iter()
                .map(|&(branch, power)| BranchPower {
                    id: Some(branch),
                    name: self.branches.name(branch),
                    power,
                    energy: result.energy(power),
                    samples: samples.get(&branch).copied().unwrap_or(0),
                })
                .collect(),
            BranchSet::App => {
                // The app file counts the Java threads only, as attribution does.
                let mut app_samples = HashMap::new();
                for (_, thread) in self.threads.threads() {
                    if thread.kind != ThreadKind::Java {
                        continue;
                    }
                    for (&branch, &n) in &thread.samples {
                        if let Some(app) = self.branches.app(branch) {
                            *app_samples.entry(app).or_insert(0u64) += n;
                        }
                    }
                }
                result
                    .app
                    .iter()
                    .map(|&(app, power)| BranchPower {
                        id: None,
                        name: self.branches.app_name(app),
                        power,
                        energy: result.energy(power),
                        samples: app_samples.get(&app).copied().unwrap_or(0),
                    })
                    .collect()
            }
        }
    }
}

/// A cycle of 10 W over `interval` ending at `timestamp_ms`, of one JVM `pid` whose branches got
/// the power of `all`: what the sinks' tests feed them.
#[cfg(test)]
pub(crate) fn one_jvm_cycle(
    pid: u32,
    timestamp_ms: i64,
    interval: joularcode_core::energy::Interval,
    all: Vec<(BranchId, Power)>,
) -> Cycle {
    use joularcode_core::attribution::{CycleResult, MachineLoad};
    Cycle {
        timestamp_ms,
        interval,
        power: Power::from_watts(10.0),
        carbon: None,
        machine: MachineLoad::BusyCpuNs(Some(0)),
        lost_samples: 0,
        jvms: vec![JvmCycle {
            pid,
            cpu_ns: 0,
            samples: 0,
            result: CycleResult {
                interval,
                all,
                ..CycleResult::default()
            },
        }],
    }
}

/// The view of a cycle of [`one_jvm_cycle`], whose JVM `a.Main` has `branches` and `threads`,
/// from the source `vm (file /w)`.
#[cfg(test)]
pub(crate) fn one_jvm_view<'a>(
    cycle: &'a Cycle,
    branches: &'a Branches,
    threads: &'a CycleThreads,
) -> CycleView<'a> {
    CycleView {
        source: "vm (file /w)",
        cycle,
        jvms: vec![JvmView {
            main_class: "a.Main",
            ended: false,
            branches,
            threads,
            result: &cycle.jvms[0],
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use joularcode_core::attribution::CycleResult;
    use joularcode_core::energy::Interval;

    const fn watts(watts: f64) -> Power {
        Power::from_watts(watts)
    }

    #[test]
    fn powers_carry_names_and_samples_per_set() {
        let mut branches = Branches::new(&["a."]);
        let run = branches.frame("java.lang.Thread", "run");
        let work = branches.frame("a.A", "work");
        let gc = branches.jvm_frame("[GC]");
        let app_branch = branches.branch(&[run, work]);
        let gc_branch = branches.branch(&[gc]);
        let app = branches.app(app_branch).expect("an app name");
        let mut samples = CycleThreads::default();
        samples.count(1, app_branch, 3);
        samples.count(2, app_branch, 1);
        samples.count(3, gc_branch, 5);
        samples.set_kind(3, ThreadKind::Jvm);
        let result = JvmCycle {
            pid: 42,
            cpu_ns: 0,
            samples: 9,
            result: CycleResult {
                interval: Interval::from_ns(500_000_000),
                all: vec![(app_branch, watts(2.0)), (gc_branch, watts(1.0))],
                app: vec![(app, watts(2.0))],
                ..CycleResult::default()
            },
        };
        let view = JvmView {
            main_class: "a.Main",
            ended: false,
            branches: &branches,
            threads: &samples,
            result: &result,
        };
        assert_eq!(view.pid(), 42);
        assert_eq!(
            view.powers(BranchSet::All),
            [
                BranchPower {
                    id: Some(app_branch),
                    name: "java.lang.Thread.run;a.A.work",
                    power: watts(2.0),
                    energy: Energy::from_joules(1.0),
                    samples: 4
                },
                BranchPower {
                    id: Some(gc_branch),
                    name: "[GC]",
                    power: watts(1.0),
                    energy: Energy::from_joules(0.5),
                    samples: 5
                }
            ]
        );
        assert_eq!(
            view.powers(BranchSet::App),
            [BranchPower {
                id: None,
                name: "a.A.work",
                power: watts(2.0),
                energy: Energy::from_joules(1.0),
                samples: 4
            }]
        );
    }
}

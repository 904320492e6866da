//! Sharing one cycle's CPU power out between Java branches, with Joular Code for Java's formulas
//! (see docs/attribution.md):
//!
//! ```text
//! processPower   = cpuPower × processShare
//! threadPower(t) = processPower × cpu(t) / Σ cpu          (sampled threads only)
//! branchPower(b) = Σ over threads t of threadPower(t) × samples(t, b) / samples(t)
//! coverage       = Σ cpu(sampled threads) / Σ cpu
//! ```
//!
//! The share of threads that used CPU but were never sampled stays unattributed, and so does the
//! share of samples whose branch has no application name in the app file. A sample of an empty
//! stack is no sample, as Joular skips threads with an empty stack.

use std::collections::HashMap as StdHashMap;

use hashbrown::HashMap;

use crate::branch::{AppBranchId, BranchId, Branches};
use crate::energy::{Energy, Interval, Power};

/// What the JVM's own threads (GC, JIT compilers, VM thread) are charged with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum JvmThreads {
    /// They count like Java threads and get their own branches (`[GC]`, ...) in the all file,
    /// never in the app file.
    #[default]
    Own,
    /// Joular Code for Java's way: they are left out of the threads' total, so their CPU time is
    /// spread over the Java threads in proportion to theirs.
    Spread,
}

/// What runs on a thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ThreadKind {
    /// An application thread, running Java code.
    #[default]
    Java,
    /// One of the JVM's own threads: GC, JIT compiler, VM thread.
    Jvm,
}

/// One thread's part of a cycle.
#[derive(Debug, Clone, Default)]
pub struct ThreadCycle {
    /// CPU time the thread used in the cycle, in ns.
    pub cpu_ns: u64,
    /// What the thread runs.
    pub kind: ThreadKind,
    /// How many samples caught the thread in each branch.
    pub samples: HashMap<BranchId, u64>,
}

/// What one cycle saw of one JVM's threads: each thread's CPU time and its samples per branch, by
/// thread id. Threads born or ended during the cycle are included like any other.
#[derive(Debug, Clone, Default)]
pub struct CycleThreads {
    threads: HashMap<u64, ThreadCycle>,
}

impl CycleThreads {
    /// Counts `n` samples of thread `tid` in `branch`.
    pub fn count(&mut self, tid: u64, branch: BranchId, n: u64) {
        let count = self
            .threads
            .entry(tid)
            .or_default()
            .samples
            .entry(branch)
            .or_insert(0);
        *count = count.saturating_add(n);
    }

    /// Adds `cpu_ns` of CPU time used in the cycle by thread `tid`.
    pub fn add_cpu(&mut self, tid: u64, cpu_ns: u64) {
        let thread = self.threads.entry(tid).or_default();
        thread.cpu_ns = thread.cpu_ns.saturating_add(cpu_ns);
    }

    /// Adds the CPU time each thread used between two snapshots of cumulative CPU times by thread
    /// id (the JVMTI mode). A thread missing from `start` was born in the cycle and counts from 0;
    /// a thread whose time did not grow used none.
    pub fn add_cpu_between(&mut self, start: &StdHashMap<u64, u64>, end: &StdHashMap<u64, u64>) {
        for (&tid, &end_ns) in end {
            let used = end_ns.saturating_sub(start.get(&tid).copied().unwrap_or(0));
            if used > 0 {
                self.add_cpu(tid, used);
            }
        }
    }

    /// Sets what thread `tid` runs (a Java thread unless told otherwise).
    pub fn set_kind(&mut self, tid: u64, kind: ThreadKind) {
        self.threads.entry(tid).or_default().kind = kind;
    }

    /// The threads seen, by id.
    pub fn threads(&self) -> impl Iterator<Item = (u64, &ThreadCycle)> + '_ {
        self.threads.iter().map(|(&tid, thread)| (tid, thread))
    }

    /// The CPU time of all the threads, in ns.
    pub fn cpu_ns(&self) -> u64 {
        self.threads
            .values()
            .fold(0u64, |sum, thread| sum.saturating_add(thread.cpu_ns))
    }

    /// The samples of all the threads, in every branch.
    pub fn sample_count(&self) -> u64 {
        self.threads.values().fold(0u64, |sum, thread| {
            thread
                .samples
                .values()
                .fold(sum, |s, &n| s.saturating_add(n))
        })
    }
}

/// How busy the whole machine was in the cycle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MachineLoad {
    /// The system CPU load from 0 to 1 (Joular's and the JVMTI mode); 0, negative or NaN when
    /// unknown.
    SystemLoad(f64),
    /// The CPU time all CPUs spent busy in the cycle, in ns, from /proc/stat (the eBPF mode);
    /// `None` or 0 when unknown.
    BusyCpuNs(Option<u64>),
}

/// The inputs of one cycle of one JVM.
#[derive(Debug, Clone, Copy)]
pub struct CycleInput<'a> {
    /// The machine's CPU power over the cycle. Not finite or negative counts as 0.
    pub cpu_power: Power,
    /// The cycle's length.
    pub interval: Interval,
    /// CPU time the whole JVM used in the cycle, in ns (the profiler's own threads excluded).
    pub jvm_cpu_ns: u64,
    /// The number of CPUs of the machine.
    pub cpus: u32,
    /// How busy the machine was.
    pub machine: MachineLoad,
    /// The JVM's threads: their CPU time and samples.
    pub threads: &'a CycleThreads,
}

/// What one cycle's power went to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CycleResult {
    /// The cycle's length.
    pub interval: Interval,
    /// The machine's CPU power.
    pub cpu_power: Power,
    /// The JVM's share of the CPU power, from 0 to 1.
    pub jvm_share: f64,
    /// The JVM's power: `cpu_power × jvm_share`.
    pub jvm_power: Power,
    /// CPU time of the sampled threads over the CPU time of all threads counted, from 0 to 1.
    pub coverage: f64,
    /// Threads counted that used CPU in the cycle but were caught by no sample.
    pub unsampled_threads: u64,
    /// Their CPU time together, in ns.
    pub unsampled_cpu_ns: u64,
    /// Power of each branch for the all file, in branch order.
    pub all: Vec<(BranchId, Power)>,
    /// Power of each application branch for the app file, in branch order.
    pub app: Vec<(AppBranchId, Power)>,
    /// The JVM's power that went to no branch of the all file.
    pub unattributed: Power,
}

impl CycleResult {
    /// The energy `power` gives over the cycle.
    pub fn energy(&self, power: Power) -> Energy {
        power * self.interval
    }

    /// The JVM's energy in the cycle.
    pub fn jvm_energy(&self) -> Energy {
        self.energy(self.jvm_power)
    }

    /// The energy of the branches of the all file together.
    pub fn branches_energy(&self) -> Energy {
        self.energy(self.all.iter().map(|&(_, power)| power).sum())
    }

    /// The energy of the branches of the app file together.
    pub fn app_energy(&self) -> Energy {
        self.energy(self.app.iter().map(|&(_, power)| power).sum())
    }

    /// The JVM's energy that went to no branch of the all file.
    pub fn unattributed_energy(&self) -> Energy {
        self.energy(self.unattributed)
    }
}

/// The JVM's share of the machine's CPU power, from 0 to 1.
///
/// `processLoad = min(1, jvm / (elapsed × cpus))`. With a system load, the share is
/// `min(1, processLoad / min(1, systemLoad))` (Joular's); with the machine's busy CPU time, it is
/// `min(1, jvm / busy)`. An unknown machine load falls back to `processLoad`, which can only
/// under-state the share. Nothing to divide gives 0.
pub fn process_share(jvm_cpu_ns: u64, elapsed_ns: u64, cpus: u32, machine: MachineLoad) -> f64 {
    if jvm_cpu_ns == 0 || elapsed_ns == 0 || cpus == 0 {
        return 0.0;
    }
    let jvm = jvm_cpu_ns as f64;
    let process_load = (jvm / (elapsed_ns as f64 * f64::from(cpus))).min(1.0);
    match machine {
        MachineLoad::SystemLoad(load) if load > 0.0 => (process_load / load.min(1.0)).min(1.0),
        MachineLoad::BusyCpuNs(Some(busy)) if busy > 0 => (jvm / busy as f64).min(1.0),
        _ => process_load,
    }
}

/// Shares the cycle's CPU power out between the branches seen, for the all file and the app file.
pub fn attribute(input: &CycleInput, branches: &Branches, jvm_threads: JvmThreads) -> CycleResult {
    let cpu_power_w = input.cpu_power.watts();
    let cpu_power_w = if cpu_power_w.is_finite() && cpu_power_w > 0.0 {
        cpu_power_w
    } else {
        0.0
    };
    let jvm_share = process_share(
        input.jvm_cpu_ns,
        input.interval.ns(),
        input.cpus,
        input.machine,
    );
    let jvm_power_w = cpu_power_w * jvm_share;

    // Threads that count: those that used CPU, less the JVM's own when they are spread
    let counted = input.threads.threads.values().filter(|t| {
        t.cpu_ns > 0 && !(jvm_threads == JvmThreads::Spread && t.kind == ThreadKind::Jvm)
    });
    let (mut total_ns, mut sampled_ns) = (0u128, 0u128);
    let mut sampled = Vec::new();
    let mut unsampled_threads = 0u64;
    for thread in counted {
        total_ns += u128::from(thread.cpu_ns);
        let thread_samples = thread
            .samples
            .iter()
            .filter(|&(&branch, _)| !branches.is_empty_stack(branch))
            .fold(0u64, |sum, (_, &n)| sum.saturating_add(n));
        if thread_samples > 0 {
            sampled_ns += u128::from(thread.cpu_ns);
            sampled.push((thread, thread_samples));
        } else {
            unsampled_threads += 1;
        }
    }
    let coverage = if total_ns > 0 {
        sampled_ns as f64 / total_ns as f64
    } else {
        0.0
    };

    let mut all: HashMap<BranchId, f64> = HashMap::new();
    let mut app: HashMap<AppBranchId, f64> = HashMap::new();
    let unattributed_w = if total_ns > 0 {
        jvm_power_w * (total_ns - sampled_ns) as f64 / total_ns as f64
    } else {
        jvm_power_w
    };
    if jvm_power_w > 0.0 {
        for (thread, thread_samples) in sampled {
            let thread_power = jvm_power_w * thread.cpu_ns as f64 / total_ns as f64;
            for (&branch, &count) in &thread.samples {
                if branches.is_empty_stack(branch) {
                    continue;
                }
                let power = thread_power * count as f64 / thread_samples as f64;
                *all.entry(branch).or_insert(0.0) += power;
                if thread.kind == ThreadKind::Java {
                    if let Some(app_branch) = branches.app(branch) {
                        *app.entry(app_branch).or_insert(0.0) += power;
                    }
                }
            }
        }
    }

    let mut all: Vec<_> = all
        .into_iter()
        .map(|(branch, watts)| (branch, Power::from_watts(watts)))
        .collect();
    all.sort_unstable_by_key(|&(branch, _)| branch);
    let mut app: Vec<_> = app
        .into_iter()
        .map(|(branch, watts)| (branch, Power::from_watts(watts)))
        .collect();
    app.sort_unstable_by_key(|&(branch, _)| branch);
    CycleResult {
        interval: input.interval,
        cpu_power: Power::from_watts(cpu_power_w),
        jvm_share,
        jvm_power: Power::from_watts(jvm_power_w),
        coverage,
        unsampled_threads,
        unsampled_cpu_ns: u64::try_from(total_ns - sampled_ns).unwrap_or(u64::MAX),
        all,
        app,
        unattributed: Power::from_watts(unattributed_w),
    }
}

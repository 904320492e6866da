//! A JVM's threads in a cycle: which are the JVM's own (by name), the CPU time each used
//! (differences of cumulative times), and their samples gathered into attribution's [`CycleThreads`].
//!
//! Both ways of profiling feed this: the eBPF profiler with the scheduler's accounting of every
//! thread, and the agent's sampling mode with the times the OS or JVMTI gives.
//!
//! HotSpot names its native threads itself (`GC Thread#0`, `C2 CompilerThread0`, `VM Thread`),
//! and Linux keeps the first 15 bytes of a name, so names are matched by prefix. Java threads that
//! run Java code (`main`, `Finalizer`, `Common-Cleaner`, `Reference Handler`) are application
//! threads. The JVM's main thread keeps the launcher's name (`java`) and is an application thread
//! too.

use std::collections::HashMap;

use crate::attribution::{CycleThreads, ThreadKind};
use crate::branch::{BranchId, GC, JIT_COMPILER, VM};

/// The work of one of the JVM's own threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JvmThread {
    /// Garbage collection (workers, concurrent markers, refinement, string deduplication).
    Gc,
    /// JIT compilation (C1, C2, JVMCI compiler threads, the code cache sweeper).
    JitCompiler,
    /// The VM thread and the other service threads (periodic tasks, monitor deflation,
    /// signal dispatching, attach listener).
    Vm,
}

impl JvmThread {
    /// Its pseudo-frame: [`GC`], [`JIT_COMPILER`] or [`VM`].
    pub fn frame(self) -> &'static str {
        match self {
            JvmThread::Gc => GC,
            JvmThread::JitCompiler => JIT_COMPILER,
            JvmThread::Vm => VM,
        }
    }
}

/// Name prefixes of the garbage collectors' threads (G1, Parallel, Serial's VM operations run on
/// the VM thread; ZGC's generational `Z` and legacy `X` threads; Shenandoah).
const GC_PREFIXES: &[&str] = &[
    "GC Thread",
    "G1 ",
    "G1Conc",
    "G1Refine",
    "Parallel GC",
    "ZDirector",
    "ZDriver",
    "ZStat",
    "ZUnmapper",
    "ZUncommitter",
    "ZWorker",
    "ZRuntimeWorker",
    "ZMarkStack",
    "XDirector",
    "XDriver",
    "XStat",
    "XUnmapper",
    "XUncommitter",
    "XWorker",
    "XRuntimeWorker",
    "Shenandoah",
    "StrDedup",
    "StringDedup",
    "Concurrent Mark",
    "Concurrent Refi",
    "CMS ",
    "GC task thread",
];

/// Name prefixes of the JIT compiler threads.
const JIT_PREFIXES: &[&str] = &[
    "C1 CompilerThre",
    "C2 CompilerThre",
    "JVMCI CompilerT",
    "JVMCI-native Co",
    "Sweeper thread",
    "CodeCacheSweepe",
];

/// Name prefixes of the VM's other service threads.
const VM_PREFIXES: &[&str] = &[
    "VM Thread",
    "VM Periodic Tas",
    "Service Thread",
    "Monitor Deflati",
    "Signal Dispatch",
    "Attach Listener",
    "Notification Th",
];

/// Which of the JVM's own threads a thread called `name` is, or `None` for an application thread.
pub fn classify(name: &str) -> Option<JvmThread> {
    let matches = |prefixes: &[&str]| prefixes.iter().any(|p| name.starts_with(p));
    if matches(GC_PREFIXES) {
        Some(JvmThread::Gc)
    } else if matches(JIT_PREFIXES) {
        Some(JvmThread::JitCompiler)
    } else if matches(VM_PREFIXES) {
        Some(JvmThread::Vm)
    } else {
        None
    }
}

/// The cumulative CPU time of one thread of a profiled process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadTime {
    /// The process.
    pub pid: u32,
    /// The thread.
    pub tid: u32,
    /// Nanoseconds on CPU since the thread was first seen: cumulative, so a caller takes
    /// differences between two reads.
    pub on_cpu_ns: u64,
    /// The thread's name.
    pub name: String,
    /// The thread has ended: this is its final time, and it is not reported again.
    pub exited: bool,
}

/// The CPU time one thread used in a cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadUse {
    /// The process.
    pub pid: u32,
    /// The thread.
    pub tid: u32,
    /// Nanoseconds on CPU in the cycle.
    pub cpu_ns: u64,
    /// The thread's name.
    pub name: String,
    /// The thread ended during the cycle.
    pub exited: bool,
}

/// Each thread's CPU time per cycle, from cumulative times.
#[derive(Debug, Default)]
pub struct ThreadCpu {
    /// Cumulative on-CPU ns of each live thread at the end of the previous cycle.
    last: HashMap<(u32, u32), u64>,
}

impl ThreadCpu {
    /// The CPU time each thread used since the previous call, given all the cumulative times
    /// now: a thread not seen before counts from 0 (it was born, or tracked, since), and an
    /// exited thread is reported for the last time and forgotten. Threads that used nothing are
    /// left out.
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

/// The samples of one thread in a cycle.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadCounts {
    /// The thread's name when first sampled.
    pub name: String,
    /// An application thread, or one of the JVM's own.
    pub kind: ThreadKind,
    /// Samples per branch.
    pub counts: HashMap<BranchId, u64>,
}

/// The key under which the threads of one kind that ended during a cycle are pooled, above every
/// tid (tids are u32).
pub fn ended_pool(kind: ThreadKind) -> u64 {
    match kind {
        ThreadKind::Java => 1 << 32,
        ThreadKind::Jvm => (1 << 32) + 1,
    }
}

/// One JVM's samples for attribution: the CPU time of all its threads that ran in the cycle,
/// each classified as a Java thread or one of the JVM's own by its name, and the `counts` of the
/// samples taken in the cycle, by tid.
///
/// The threads that ended during the cycle are pooled by kind, as if they were one thread: their
/// CPU time together is shared by all their samples together. A thread that lives a few
/// milliseconds may run less than one sample period and get no sample, although the samples of
/// many such threads are in proportion to their CPU time; alone, its share would stay
/// unattributed (Joular's coverage).
///
/// The samples of a thread with no CPU time in the cycle are left out: its time, if any, lands in
/// the next cycle.
pub fn cycle_threads(
    pid: u32,
    counts: HashMap<u32, ThreadCounts>,
    uses: &[ThreadUse],
) -> CycleThreads {
    let mut samples = CycleThreads::default();
    let mut ran = HashMap::new();
    for thread in uses.iter().filter(|thread| thread.pid == pid) {
        let kind = if classify(&thread.name).is_some() {
            ThreadKind::Jvm
        } else {
            ThreadKind::Java
        };
        let key = if thread.exited {
            ended_pool(kind)
        } else {
            u64::from(thread.tid)
        };
        ran.insert(thread.tid, key);
        samples.add_cpu(key, thread.cpu_ns);
        samples.set_kind(key, kind);
    }
    for (tid, thread) in counts {
        let Some(&key) = ran.get(&tid) else {
            continue;
        };
        if key == u64::from(tid) {
            samples.set_kind(key, thread.kind);
        }
        for (branch, n) in thread.counts {
            samples.count(key, branch, n);
        }
    }
    samples
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::branch::Branches;

    #[test]
    fn hotspot_thread_names_are_classified() {
        for (name, kind) in [
            ("GC Thread#0", Some(JvmThread::Gc)),
            ("G1 Main Marker", Some(JvmThread::Gc)),
            ("G1 Conc#0", Some(JvmThread::Gc)),
            ("G1 Refine#0", Some(JvmThread::Gc)),
            ("G1 Service", Some(JvmThread::Gc)),
            ("ZWorker#3", Some(JvmThread::Gc)),
            ("C2 CompilerThre", Some(JvmThread::JitCompiler)),
            ("C1 CompilerThre", Some(JvmThread::JitCompiler)),
            ("VM Thread", Some(JvmThread::Vm)),
            ("VM Periodic Tas", Some(JvmThread::Vm)),
            ("Monitor Deflati", Some(JvmThread::Vm)),
            ("java", None),
            ("main", None),
            ("Finalizer", None),
            ("Reference Handl", None),
            ("Common-Cleaner", None),
            ("Thread-0", None),
            ("GCWorkerOfMyApp", None),
        ] {
            assert_eq!(classify(name), kind, "{name}");
        }
        assert_eq!(JvmThread::Gc.frame(), "[GC]");
        assert_eq!(JvmThread::JitCompiler.frame(), "[JIT compiler]");
        assert_eq!(JvmThread::Vm.frame(), "[VM]");
    }

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

    fn counts(branch: BranchId, n: u64) -> ThreadCounts {
        ThreadCounts {
            name: "t".into(),
            kind: ThreadKind::Java,
            counts: HashMap::from([(branch, n)]),
        }
    }

    fn used(pid: u32, tid: u32, cpu_ns: u64, name: &str) -> ThreadUse {
        ThreadUse {
            pid,
            tid,
            cpu_ns,
            name: name.into(),
            exited: name.starts_with("brief"),
        }
    }

    #[test]
    fn samples_go_to_the_threads_that_ran() {
        let mut branches = Branches::new::<&str>(&[]);
        let frame = branches.frame("a.B", "run");
        let branch = branches.branch(&[frame]);
        let uses = [
            used(1, 10, 500, "main"),
            used(1, 11, 300, "G1 Conc#0"),
            used(2, 20, 999, "other JVM"),
        ];
        let samples = cycle_threads(
            1,
            HashMap::from([(10, counts(branch, 3)), (12, counts(branch, 2))]),
            &uses,
        );
        let threads: HashMap<u64, _> = samples.threads().collect();
        assert_eq!(threads.len(), 2, "12 did not run, 20 is another JVM's");
        assert_eq!(threads[&10].cpu_ns, 500);
        assert_eq!(threads[&10].samples[&branch], 3);
        assert_eq!(threads[&11].kind, ThreadKind::Jvm, "classified by name");
        assert!(threads[&11].samples.is_empty());
    }

    #[test]
    fn threads_that_ended_are_pooled_by_kind() {
        let mut branches = Branches::new::<&str>(&[]);
        let frame = branches.frame("a.B", "brief");
        let branch = branches.branch(&[frame]);
        let uses = [
            used(1, 10, 4_000_000, "brief-1"),
            used(1, 11, 6_000_000, "brief-2"),
            used(1, 12, 1_000_000, "main"),
        ];
        let samples = cycle_threads(1, HashMap::from([(11, counts(branch, 1))]), &uses);
        let threads: HashMap<u64, _> = samples.threads().collect();
        let pool = &threads[&ended_pool(ThreadKind::Java)];
        assert_eq!((pool.cpu_ns, pool.samples[&branch]), (10_000_000, 1));
        assert_eq!(pool.kind, ThreadKind::Java);
        assert_eq!(threads[&12].cpu_ns, 1_000_000);
        assert_eq!(threads.len(), 2);
    }
}

//! The JVM's own threads, told apart from application threads by their names (architecture
//! decision 7): garbage collection, JIT compilation and the VM's other service threads get
//! pseudo-frames (`[GC]`, `[JIT compiler]`, `[VM]`) instead of Java branches.
//!
//! HotSpot names its native threads itself (`GC Thread#0`, `C2 CompilerThread0`, `VM Thread`),
//! and Linux keeps the first 15 bytes of a name (`/proc/PID/task/TID/comm`), so the names are
//! matched by prefix. Java threads that run Java code (`main`, `Finalizer`, `Common-Cleaner`,
//! `Reference Handler`) are application threads. The JVM's main thread keeps the launcher's
//! name (`java`) and is an application thread too.

use joularcode_core::branch::{GC, JIT_COMPILER, VM};

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

/// The name (comm) of thread `tid` of process `pid` now; `None` once it has ended.
pub fn thread_name(pid: u32, tid: u32) -> Option<String> {
    let comm = std::fs::read(format!("/proc/{pid}/task/{tid}/comm")).ok()?;
    let comm = comm.strip_suffix(b"\n").unwrap_or(&comm);
    Some(String::from_utf8_lossy(comm).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn names_of_live_threads_only() {
        let pid = std::process::id();
        assert!(thread_name(pid, pid).is_some_and(|name| !name.is_empty()));
        assert_eq!(thread_name(pid, u32::MAX), None);
    }
}

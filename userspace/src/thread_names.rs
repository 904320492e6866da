//! The JVM's own threads, told apart from application threads by their names
//! (docs/architecture.md, "Decisions, and why", 7; the classification is core's, shared with the
//! agent): garbage collection, JIT compilation and the VM's other service threads get pseudo-frames
//! (`[GC]`, `[JIT compiler]`, `[VM]`) instead of Java branches. Their names are read from
//! `/proc/PID/task/TID/comm`.

pub use joularcode_core::threads::{classify, JvmThread};

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
    fn names_of_live_threads_only() {
        let pid = std::process::id();
        assert!(thread_name(pid, pid).is_some_and(|name| !name.is_empty()));
        assert_eq!(thread_name(pid, u32::MAX), None);
    }
}

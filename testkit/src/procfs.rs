//! What Linux's procfs says of a process, as a truth the tests measure against.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The CPU time a process used, and that of each of its threads by tid, in clock ticks, from
/// `/proc/PID/stat` and `/proc/PID/task/TID/stat` (utime + stime).
pub fn cpu_ticks(pid: u32) -> (u64, HashMap<u32, u64>) {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let process = ticks(&proc.join("stat")).expect("the process's stat");
    let threads = std::fs::read_dir(proc.join("task"))
        .expect("the process's threads")
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let tid = entry.file_name().to_str()?.parse().ok()?;
            Some((tid, ticks(&entry.path().join("stat"))?))
        })
        .collect();
    (process, threads)
}

/// utime + stime of a `stat` file of procfs, in clock ticks.
fn ticks(stat: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(stat).ok()?;
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// The clock ticks of [`cpu_ticks`] in a second (`_SC_CLK_TCK`).
pub fn ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads a constant of the system.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(per_second).unwrap_or(0).max(1)
}

/// The CPU time process `pid` used so far, in ms, from `/proc/PID/stat` (to a clock tick).
pub fn process_cpu_ms(pid: u32) -> u64 {
    let ticks = ticks(Path::new(&format!("/proc/{pid}/stat"))).expect("the process's stat");
    ticks * 1000 / ticks_per_second()
}

/// The share of a process's CPU time between two [`cpu_ticks`] that went to threads not alive at
/// both: the threads that started and ended in between.
pub fn short_lived_share(
    before: &(u64, HashMap<u32, u64>),
    after: &(u64, HashMap<u32, u64>),
) -> f64 {
    let long_lived: u64 = after
        .1
        .iter()
        .filter_map(|(tid, &end)| Some(end - before.1.get(tid)?))
        .sum();
    let process = after.0 - before.0;
    (process - long_lived) as f64 / process as f64
}

/// The most CPU time any one thread of a process used between two [`cpu_ticks`], in seconds: how
/// long its busiest thread ran, which a loaded machine stretches over a longer wall time.
pub fn busiest_thread_seconds(
    before: &(u64, HashMap<u32, u64>),
    after: &(u64, HashMap<u32, u64>),
) -> f64 {
    let busiest = after
        .1
        .iter()
        .map(|(tid, &end)| end - before.1.get(tid).copied().unwrap_or(0))
        .max()
        .unwrap_or(0);
    busiest as f64 / ticks_per_second() as f64
}

/// The children of process `pid` (none once it has ended).
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    threads
        .filter_map(|thread| std::fs::read_to_string(thread.ok()?.path().join("children")).ok())
        .flat_map(|children| {
            let pids: Vec<u32> = children
                .split_whitespace()
                .filter_map(|pid| pid.parse().ok())
                .collect();
            pids
        })
        .collect()
}

//! The machine's CPU time from `/proc/stat`, counted as PowerJoular's CPU Load library counts it:
//! on the first (`cpu`) line, busy = user + nice + system + irq + softirq + steal and total = busy
//! + idle + iowait, in clock ticks; guest time is already inside user and nice.

use std::io::Read;
use std::path::{Path, PathBuf};

/// Room made for the file's text before reading it: the kernel gives it whole, in one read, when
/// it fits (a file in procfs has no size to size the buffer by).
const READ_CAPACITY: usize = 16 * 1024;

/// Cumulative CPU time of the whole machine since boot, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// Ticks spent running something.
    pub busy: u64,
    /// Ticks busy or idle.
    pub total: u64,
    /// Of the busy ticks, those the hypervisor took from the CPUs while they had work (steal).
    pub steal: u64,
}

/// What `/proc/stat` says about the CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// The first line's times, all CPUs together.
    pub cpu: CpuTimes,
    /// How many `cpuN` lines there are: the CPUs online.
    pub cpus: usize,
}

/// Why `/proc/stat` could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Cannot use {}: {reason}",
    path.as_deref().unwrap_or(Path::new("/proc/stat")).display()
)]
pub struct ProcStatError {
    /// The file read, when there was one.
    pub path: Option<PathBuf>,
    /// What was wrong.
    pub reason: String,
}

fn invalid(reason: impl Into<String>) -> ProcStatError {
    ProcStatError {
        path: None,
        reason: reason.into(),
    }
}

/// Parses the text of `/proc/stat`.
pub fn parse(text: &str) -> Result<ProcStat, ProcStatError> {
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("");
    let mut fields = first.split_ascii_whitespace();
    if fields.next() != Some("cpu") {
        return Err(invalid(
            "its first line does not start with 'cpu'. Point the proc root at a Linux procfs.",
        ));
    }
    let mut ticks = [0u64; 8];
    let mut count = 0;
    for (slot, field) in ticks.iter_mut().zip(fields) {
        *slot = field.parse().map_err(|_| {
            invalid(format!(
                "'{}' on its first line is not a number of ticks.",
                field.chars().take(40).collect::<String>()
            ))
        })?;
        count += 1;
    }
    if count < 4 {
        return Err(invalid(
            "its first line has fewer than the 4 times user, nice, system and idle.",
        ));
    }
    let [user, nice, system, idle, iowait, irq, softirq, steal] = ticks;
    let busy = [user, nice, system, irq, softirq, steal]
        .iter()
        .fold(0u64, |sum, &t| sum.saturating_add(t));
    let total = busy.saturating_add(idle).saturating_add(iowait);
    let cpus = lines
        .filter(|line| {
            line.strip_prefix("cpu")
                .and_then(|rest| rest.split_ascii_whitespace().next())
                .is_some_and(|id| id.bytes().all(|b| b.is_ascii_digit()))
        })
        .count();
    Ok(ProcStat {
        cpu: CpuTimes { busy, total, steal },
        cpus,
    })
}

/// Reads and parses `stat` under `proc_root` (normally `/proc`).
pub fn read(proc_root: &Path) -> Result<ProcStat, ProcStatError> {
    let path = proc_root.join("stat");
    let with_path = |mut error: ProcStatError| {
        error.path = Some(path.clone());
        error
    };
    let mut text = String::with_capacity(READ_CAPACITY);
    std::fs::File::open(&path)
        .and_then(|mut file| file.read_to_string(&mut text))
        .map_err(|error| with_path(invalid(format!("{error}."))))?;
    parse(&text).map_err(with_path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  100 20 30 400 50 6 7 8 9 10\n\
cpu0 50 10 15 200 25 3 3 4 0 0\n\
cpu1 50 10 15 200 25 3 4 4 0 0\n\
intr 1234 0 0\n\
ctxt 99\n";

    #[test]
    fn busy_and_total_follow_cpu_load() {
        let stat = parse(STAT).unwrap();
        // busy = 100+20+30+6+7+8, total = busy + 400 + 50
        assert_eq!(
            stat.cpu,
            CpuTimes {
                busy: 171,
                total: 621,
                steal: 8
            }
        );
        assert_eq!(stat.cpus, 2);
    }

    #[test]
    fn old_kernels_with_four_times_are_read() {
        let stat = parse("cpu 1 2 3 4\ncpu0 1 2 3 4\n").unwrap();
        assert_eq!(
            stat.cpu,
            CpuTimes {
                busy: 6,
                total: 10,
                steal: 0
            }
        );
        assert_eq!(stat.cpus, 1);
    }

    #[test]
    fn bad_text_is_an_error_not_a_panic() {
        assert!(parse("").is_err());
        assert!(parse("intr 1\n").is_err());
        assert!(parse("cpu 1 2 x 4").unwrap_err().reason.contains("'x'"));
        assert!(parse("cpu 1 2 3").is_err());
        let huge = format!("cpu {m} {m} {m} {m} {m} {m} {m} {m}", m = u64::MAX);
        assert_eq!(parse(&huge).unwrap().cpu.total, u64::MAX);
    }

    #[test]
    fn read_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let error = read(dir.path()).unwrap_err();
        assert!(error
            .to_string()
            .contains(&dir.path().join("stat").display().to_string()));
        std::fs::write(dir.path().join("stat"), STAT).unwrap();
        assert_eq!(read(dir.path()).unwrap().cpus, 2);
    }
}

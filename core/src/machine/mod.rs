//! What the OS says about the machine's CPUs: how many there are and how long they have been
//! busy, and from that, how loaded the machine was over a cycle ([`MachineMeter`]).
//!
//! Linux counts CPU time in `/proc/stat` (as PowerJoular's CPU Load library reads it, see
//! [`crate::procstat`]), Windows in `GetSystemTimes`, macOS in `host_statistics`
//! (`HOST_CPU_LOAD_INFO`). The estimate power source and the agent's machine load read them
//! through [`CpuSource`].

#[cfg(target_os = "macos")]
mod macos;
#[cfg(windows)]
mod windows;

use std::path::{Path, PathBuf};

use crate::attribution::MachineLoad;
use crate::procstat;

/// The CPU time of all the machine's CPUs since boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuUse {
    /// Nanoseconds the CPUs spent running something, all CPUs together.
    pub busy_ns: u64,
    /// Nanoseconds the CPUs spent busy or idle, all CPUs together.
    pub total_ns: u64,
    /// The CPUs counted.
    pub cpus: u32,
}

impl CpuUse {
    /// The share of the machine that was busy since `earlier`, from 0 to 1, or `None` when no
    /// time passed or the counters went back (a different boot, or a bad reading).
    pub fn utilisation_since(&self, earlier: &CpuUse) -> Option<f64> {
        let busy = self.busy_ns.checked_sub(earlier.busy_ns)?;
        let total = self.total_ns.checked_sub(earlier.total_ns)?;
        (total > 0).then(|| (busy as f64 / total as f64).min(1.0))
    }
}

/// Why the machine's CPU time could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CpuReadError {
    /// `/proc/stat` could not be read or parsed.
    #[error(transparent)]
    ProcStat(#[from] procstat::ProcStatError),
    /// `/proc/stat` lists no CPU.
    #[error("Cannot use {}: it lists no cpuN line. Point the proc root at a Linux procfs.", .0.display())]
    NoCpus(PathBuf),
    /// `GetSystemTimes` failed.
    #[cfg(windows)]
    #[error("GetSystemTimes failed: {0}")]
    GetSystemTimes(std::io::Error),
    /// `host_statistics` failed with this Mach error.
    #[cfg(target_os = "macos")]
    #[error("host_statistics failed with Mach error {0}")]
    HostStatistics(i32),
}

/// Where the machine's CPU time is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuSource {
    /// `stat` in a Linux procfs (`/proc`, or a fake tree in tests), whose times are in clock
    /// ticks of `ns_per_tick` nanoseconds.
    ProcStat {
        /// The procfs root.
        root: PathBuf,
        /// The length of a clock tick (`sysconf(_SC_CLK_TCK)`).
        ns_per_tick: u64,
    },
    /// The OS's own counters: `GetSystemTimes` on Windows, `host_statistics` on macOS.
    #[cfg(any(windows, target_os = "macos"))]
    Os,
}

impl CpuSource {
    /// The machine's CPU times as this OS gives them: `/proc/stat` on Linux and the other Unix
    /// systems with a procfs, the OS's counters on Windows and macOS.
    pub fn system() -> CpuSource {
        #[cfg(any(windows, target_os = "macos"))]
        {
            CpuSource::Os
        }
        #[cfg(not(any(windows, target_os = "macos")))]
        {
            CpuSource::proc_stat(Path::new("/proc"))
        }
    }

    /// `stat` under the procfs `root`, in this machine's clock ticks.
    pub fn proc_stat(root: &Path) -> CpuSource {
        CpuSource::ProcStat {
            root: root.to_path_buf(),
            ns_per_tick: 1_000_000_000 / clock_ticks_per_second(),
        }
    }

    /// The CPU time of the machine now. The error says what could not be read.
    pub fn read(&self) -> Result<CpuUse, CpuReadError> {
        match self {
            CpuSource::ProcStat { root, ns_per_tick } => {
                let stat = procstat::read(root)?;
                if stat.cpus == 0 {
                    return Err(CpuReadError::NoCpus(root.join("stat")));
                }
                Ok(CpuUse {
                    busy_ns: stat.cpu.busy.saturating_mul(*ns_per_tick),
                    total_ns: stat.cpu.total.saturating_mul(*ns_per_tick),
                    cpus: u32::try_from(stat.cpus).unwrap_or(u32::MAX),
                })
            }
            #[cfg(windows)]
            CpuSource::Os => windows::cpu_use(),
            #[cfg(target_os = "macos")]
            CpuSource::Os => macos::cpu_use(),
        }
    }
}

/// The clock tick rate of `/proc/stat` (`sysconf(_SC_CLK_TCK)`, 100 on nearly every Linux).
pub fn clock_ticks_per_second() -> u64 {
    #[cfg(unix)]
    {
        // SAFETY: sysconf only reads a configuration value.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        u64::try_from(ticks)
            .ok()
            .filter(|&t| t > 0 && t <= 1_000_000_000)
            .unwrap_or(100)
    }
    #[cfg(not(unix))]
    {
        100
    }
}

/// How loaded the machine was over each cycle, for attribution.
pub trait MachineMeter: Send {
    /// The machine's load since the previous call (or since the meter was made).
    fn since_last(&mut self) -> MachineLoad;
}

/// The busy CPU time of all CPUs over each cycle ([`MachineLoad::BusyCpuNs`]), as the eBPF
/// profiler shares power: a JVM's share is its CPU time over this.
#[derive(Debug)]
pub struct BusyCpu {
    source: CpuSource,
    last: Option<CpuUse>,
}

impl BusyCpu {
    /// Reads `source` now, for the first difference.
    pub fn start(source: CpuSource) -> BusyCpu {
        let last = source.read().ok();
        BusyCpu { source, last }
    }
}

impl MachineMeter for BusyCpu {
    /// Busy CPU nanoseconds of all CPUs since the previous call, or `None` when the times could
    /// not be read now or then, or went back.
    fn since_last(&mut self) -> MachineLoad {
        let now = self.source.read().ok();
        let busy = match (now, self.last) {
            (Some(now), Some(last)) => now.busy_ns.checked_sub(last.busy_ns),
            _ => None,
        };
        self.last = now;
        MachineLoad::BusyCpuNs(busy)
    }
}

/// The share of the machine that was busy over each cycle, from 0 to 1
/// ([`MachineLoad::SystemLoad`]), as Joular Code for Java and the agent's sampling mode share
/// power: Joular's `getCpuLoad()`.
#[derive(Debug)]
pub struct SystemLoad {
    source: CpuSource,
    last: Option<CpuUse>,
}

impl SystemLoad {
    /// Reads `source` now, for the first difference.
    pub fn start(source: CpuSource) -> SystemLoad {
        let last = source.read().ok();
        SystemLoad { source, last }
    }
}

impl MachineMeter for SystemLoad {
    /// The load since the previous call; -1 (unknown) when it could not be read.
    fn since_last(&mut self) -> MachineLoad {
        let now = self.source.read().ok();
        let load = match (now, self.last) {
            (Some(now), Some(last)) => now.utilisation_since(&last),
            _ => None,
        };
        self.last = now;
        MachineLoad::SystemLoad(load.unwrap_or(-1.0))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A procfs whose `stat` says `busy` ticks of user time and `idle` idle, on 2 CPUs.
    pub(crate) fn write_stat(root: &Path, busy: u64, idle: u64) {
        std::fs::write(
            root.join("stat"),
            format!("cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 0 0 0 0\ncpu1 0 0 0 0\n"),
        )
        .unwrap();
    }

    /// `stat` under `root`, in ticks of 10 ms.
    pub(crate) fn source(root: &Path) -> CpuSource {
        CpuSource::ProcStat {
            root: root.to_path_buf(),
            ns_per_tick: 10_000_000,
        }
    }

    #[test]
    fn busy_cpu_is_the_difference_in_nanoseconds() {
        let proc = tempfile::tempdir().unwrap();
        write_stat(proc.path(), 1000, 5000);
        let mut busy = BusyCpu::start(source(proc.path()));
        write_stat(proc.path(), 1150, 5050);
        assert_eq!(
            busy.since_last(),
            MachineLoad::BusyCpuNs(Some(1_500_000_000))
        );
        std::fs::remove_file(proc.path().join("stat")).unwrap();
        assert_eq!(busy.since_last(), MachineLoad::BusyCpuNs(None));
        write_stat(proc.path(), 1200, 5100);
        assert_eq!(
            busy.since_last(),
            MachineLoad::BusyCpuNs(None),
            "no earlier reading"
        );
        write_stat(proc.path(), 1100, 5100);
        assert_eq!(busy.since_last(), MachineLoad::BusyCpuNs(None), "went back");
    }

    #[test]
    fn utilisation_between_two_readings() {
        let reading = |busy_ns, total_ns| CpuUse {
            busy_ns,
            total_ns,
            cpus: 2,
        };
        let (before, after) = (reading(100, 400), reading(150, 600));
        assert_eq!(after.utilisation_since(&before), Some(0.25));
        assert_eq!(before.utilisation_since(&before), None);
        assert_eq!(before.utilisation_since(&after), None);
    }

    #[test]
    fn system_load_is_the_busy_share() {
        let proc = tempfile::tempdir().unwrap();
        write_stat(proc.path(), 100, 300);
        let mut load = SystemLoad::start(source(proc.path()));
        write_stat(proc.path(), 150, 450);
        assert_eq!(load.since_last(), MachineLoad::SystemLoad(0.25));
        assert_eq!(
            load.since_last(),
            MachineLoad::SystemLoad(-1.0),
            "no time passed"
        );
        std::fs::remove_file(proc.path().join("stat")).unwrap();
        assert_eq!(load.since_last(), MachineLoad::SystemLoad(-1.0));
    }

    #[test]
    fn proc_stat_needs_cpus_and_counts_them() {
        let proc = tempfile::tempdir().unwrap();
        write_stat(proc.path(), 1, 9);
        let read = source(proc.path()).read().unwrap();
        assert_eq!(
            read,
            CpuUse {
                busy_ns: 10_000_000,
                total_ns: 100_000_000,
                cpus: 2
            }
        );
        std::fs::write(proc.path().join("stat"), "cpu  1 0 0 9\nintr 0\n").unwrap();
        let error = source(proc.path()).read().unwrap_err().to_string();
        assert!(error.contains("it lists no cpuN line"), "{error}");
    }

    #[test]
    fn the_system_source_reads_this_machine() {
        let read = CpuSource::system().read().unwrap();
        assert!(read.cpus >= 1 && read.total_ns >= read.busy_ns && read.busy_ns > 0);
    }
}

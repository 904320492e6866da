//! The daemon's own CPU time and resident memory, from `/proc/self`.

use joularcode_core::machine::clock_ticks_per_second;

/// The daemon's own use of the machine.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SelfStat {
    /// CPU time used so far (user and system), in s.
    pub cpu_seconds: f64,
    /// Resident memory, in bytes.
    pub resident_bytes: u64,
}

impl SelfStat {
    /// Reads `/proc/self/stat` and `/proc/self/statm`; what cannot be read is 0.
    pub fn read() -> SelfStat {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
        // SAFETY: sysconf has no preconditions.
        let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        SelfStat::parse(&stat, &statm, clock_ticks_per_second(), page)
    }

    /// From the text of `/proc/PID/stat` and `/proc/PID/statm`.
    fn parse(stat: &str, statm: &str, ticks_per_second: u64, page_bytes: u64) -> SelfStat {
        // The fields after the command name, which may hold spaces and parentheses.
        let fields: Vec<&str> = stat
            .rsplit_once(") ")
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
        let ticks: u64 = [11, 12]
            .iter()
            .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
            .sum();
        let resident_pages: u64 = statm
            .split_whitespace()
            .nth(1)
            .and_then(|pages| pages.parse().ok())
            .unwrap_or(0);
        SelfStat {
            cpu_seconds: ticks as f64 / ticks_per_second.max(1) as f64,
            resident_bytes: resident_pages * page_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_and_memory_from_proc() {
        let stat =
            "42 (a (weird) name) S 1 42 42 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 3 0 10 0 0";
        let stat = SelfStat::parse(stat, "5000 1200 300 10 0 900 0\n", 100, 4096);
        assert_eq!(stat.cpu_seconds, 4.0);
        assert_eq!(stat.resident_bytes, 1200 * 4096);
        assert_eq!(SelfStat::parse("", "", 100, 4096), SelfStat::default());
        assert!(SelfStat::read().resident_bytes > 0);
    }
}

//! The per-CPU software cpu-clock perf events that drive the sampler.

use std::fs;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

use perf_event_open_sys::bindings::{
    perf_event_attr, PERF_COUNT_SW_CPU_CLOCK, PERF_FLAG_FD_CLOEXEC, PERF_TYPE_SOFTWARE,
};

/// Where the kernel lists the online CPUs.
pub const ONLINE_CPUS: &str = "/sys/devices/system/cpu/online";

/// Reads a CPU list in the kernel's format (`0-3,8,10-11`). `None` if it is malformed.
pub fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|part| !part.is_empty()) {
        let (first, last): (u32, u32) = match part.split_once('-') {
            Some((first, last)) => (first.parse().ok()?, last.parse().ok()?),
            None => {
                let cpu = part.parse().ok()?;
                (cpu, cpu)
            }
        };
        if first > last || last >= 1 << 16 {
            return None;
        }
        cpus.extend(first..=last);
    }
    (!cpus.is_empty()).then_some(cpus)
}

/// The online CPUs, from [`ONLINE_CPUS`].
pub fn online_cpus() -> Result<Vec<u32>, String> {
    let text =
        fs::read_to_string(ONLINE_CPUS).map_err(|e| format!("cannot read {ONLINE_CPUS}: {e}"))?;
    parse_cpu_list(&text).ok_or_else(|| {
        format!(
            "{ONLINE_CPUS} holds {:?}, not a CPU list like 0-3,8",
            text.trim()
        )
    })
}

/// Opens a disabled cpu-clock event on one CPU for every task, sampling `rate_hz` times per
/// second of CPU time. Attaching a BPF program enables it.
pub fn open_cpu_clock(cpu: u32, rate_hz: u64) -> io::Result<OwnedFd> {
    let mut attr = perf_event_attr {
        type_: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config: PERF_COUNT_SW_CPU_CLOCK as u64,
        ..Default::default()
    };
    attr.sample_freq = rate_hz;
    attr.set_freq(1);
    attr.set_disabled(1);
    // SAFETY: attr is a valid, fully initialised perf_event_attr that outlives the call.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(
            &mut attr,
            -1,
            cpu as i32,
            -1,
            PERF_FLAG_FD_CLOEXEC as _,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cpu_lists() {
        assert_eq!(parse_cpu_list("0-1\n"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("0-2,5,7-8"), Some(vec![0, 1, 2, 5, 7, 8]));
    }

    #[test]
    fn rejects_malformed_cpu_lists() {
        for text in ["", "a", "3-1", "0-", "0-99999999"] {
            assert_eq!(parse_cpu_list(text), None, "{text:?}");
        }
    }

    #[test]
    fn lists_this_machines_cpus() {
        let cpus = online_cpus().expect("online CPUs");
        assert!(cpus.contains(&0));
    }
}

//! The machine's CPU time on macOS: `host_statistics(HOST_CPU_LOAD_INFO)`, in clock ticks per
//! CPU state (user, system, idle, nice), all CPUs together.

use super::{CpuReadError, CpuUse};

/// The CPU time of all CPUs since boot.
pub fn cpu_use() -> Result<CpuUse, CpuReadError> {
    let mut info = libc::host_cpu_load_info {
        cpu_ticks: [0; libc::CPU_STATE_MAX as usize],
    };
    let mut count = libc::HOST_CPU_LOAD_INFO_COUNT;
    // SAFETY: mach_host_self returns a send right to this host, released below;
    // host_statistics writes at most `count` integers into `info`.
    let result = unsafe {
        let host = mach2::mach_init::mach_host_self();
        let result = libc::host_statistics(
            host,
            libc::HOST_CPU_LOAD_INFO,
            (&mut info as *mut libc::host_cpu_load_info).cast(),
            &mut count,
        );
        mach2::mach_port::mach_port_deallocate(mach2::traps::mach_task_self(), host);
        result
    };
    if result != libc::KERN_SUCCESS {
        return Err(CpuReadError::HostStatistics(result));
    }
    let ticks = |state: libc::c_int| u64::from(info.cpu_ticks[state as usize]);
    let busy =
        ticks(libc::CPU_STATE_USER) + ticks(libc::CPU_STATE_SYSTEM) + ticks(libc::CPU_STATE_NICE);
    let total = busy + ticks(libc::CPU_STATE_IDLE);
    let ns_per_tick = 1_000_000_000 / super::clock_ticks_per_second();
    // SAFETY: sysconf only reads a configuration value.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    Ok(CpuUse {
        busy_ns: busy.saturating_mul(ns_per_tick),
        total_ns: total.saturating_mul(ns_per_tick),
        cpus: u32::try_from(cpus).unwrap_or(1).max(1),
    })
}

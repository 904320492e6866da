//! The machine's CPU time on Windows: `GetSystemTimes`, in 100 ns units, all CPUs together. Its
//! kernel time includes the idle time.

use windows_sys::Win32::Foundation::FILETIME;
use windows_sys::Win32::System::Threading::{
    GetActiveProcessorCount, GetSystemTimes, ALL_PROCESSOR_GROUPS,
};

use super::{CpuReadError, CpuUse};

/// A FILETIME span in nanoseconds.
pub fn filetime_ns(time: FILETIME) -> u64 {
    ((u64::from(time.dwHighDateTime) << 32) | u64::from(time.dwLowDateTime)).saturating_mul(100)
}

/// The CPU time of all CPUs since boot.
pub fn cpu_use() -> Result<CpuUse, CpuReadError> {
    let zero = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut idle, mut kernel, mut user) = (zero, zero, zero);
    // SAFETY: GetSystemTimes writes the three FILETIMEs it is given.
    if unsafe { GetSystemTimes(&mut idle, &mut kernel, &mut user) } == 0 {
        return Err(CpuReadError::GetSystemTimes(std::io::Error::last_os_error()));
    }
    let total_ns = filetime_ns(kernel).saturating_add(filetime_ns(user));
    // SAFETY: GetActiveProcessorCount only reads the processor topology.
    let cpus = unsafe { GetActiveProcessorCount(ALL_PROCESSOR_GROUPS) }.max(1);
    Ok(CpuUse {
        busy_ns: total_ns.saturating_sub(filetime_ns(idle)),
        total_ns,
        cpus,
    })
}

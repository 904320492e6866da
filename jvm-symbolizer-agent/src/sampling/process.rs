//! The CPU time of the whole process, from the OS.

/// The time of a POSIX clock (a CPU-time clock, or the monotonic one), in ns.
#[cfg(unix)]
pub fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    if unsafe { libc::clock_gettime(clock, &mut time) } != 0 {
        return None;
    }
    Some((time.tv_sec as u64).saturating_mul(1_000_000_000) + time.tv_nsec as u64)
}

/// The CPU time this process has used, all threads together, in ns.
#[cfg(unix)]
pub fn cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID).unwrap_or(0)
}

/// The CPU time this process has used, all threads together, in ns.
#[cfg(windows)]
pub fn cpu_ns() -> u64 {
    use windows_sys::Win32::Foundation::FILETIME;
    use windows_sys::Win32::System::Threading::{GetCurrentProcess, GetProcessTimes};
    let zero = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    // SAFETY: GetProcessTimes writes the four FILETIMEs it is given, for this process.
    let ok = unsafe {
        GetProcessTimes(
            GetCurrentProcess(),
            &mut created,
            &mut exited,
            &mut kernel,
            &mut user,
        )
    };
    if ok == 0 {
        return 0;
    }
    let ns = |time: FILETIME| {
        ((u64::from(time.dwHighDateTime) << 32) | u64::from(time.dwLowDateTime)).saturating_mul(100)
    };
    ns(kernel).saturating_add(ns(user))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_process_cpu_time_grows_with_work() {
        let before = super::cpu_ns();
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(30) {
            std::hint::black_box(0u64);
        }
        assert!(super::cpu_ns() >= before + 10_000_000);
    }
}

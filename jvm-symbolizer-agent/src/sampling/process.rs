//! The CPU time of the whole process, from the OS.

#[cfg(unix)]
use joularcode_core::power::clock::posix_clock_ns;

/// The CPU time this process has used, all threads together, in ns.
#[cfg(unix)]
pub fn cpu_ns() -> u64 {
    posix_clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID).unwrap_or(0)
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
        // On a loaded machine this thread may run a small part of the wall time: spin until the
        // clock has counted 10 ms of work, or fail after a minute of wall time.
        let before = super::cpu_ns();
        let start = std::time::Instant::now();
        while super::cpu_ns() < before + 10_000_000 {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(60),
                "the process CPU time did not grow by 10 ms in a minute of work"
            );
            for _ in 0..100_000 {
                std::hint::black_box(0u64);
            }
        }
    }
}

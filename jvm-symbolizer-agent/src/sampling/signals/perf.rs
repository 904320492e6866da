//! Linux: a perf event on one thread's CPU clock (`PERF_COUNT_SW_CPU_CLOCK`, bound to the
//! thread) that sends it SIGPROF every interval of its CPU time, as async-profiler's `cpu` mode
//! does. The event's high-resolution timer runs only while the thread runs, and fires at the
//! period set, whatever the scheduler's tick, where a POSIX CPU timer is checked at the tick
//! only: tick-bound samples lean towards the code a thread runs between its preemptions, while
//! other threads compete for the CPU (docs/fallback.md).
//!
//! Each event is armed for one overflow (`PERF_EVENT_IOC_REFRESH`), which disables it and
//! signals the thread (`F_SETSIG`, `F_SETOWN_EX` to the thread id); the signal handler arms it
//! again ([`rearm`]), its file descriptor coming in the signal's information, for a period drawn
//! anew within ±25% of the interval ([`next_period_ns`]).

use std::ffi::{c_int, c_ulong};
use std::sync::atomic::{AtomicU64, Ordering};

use perf_event_open_sys::bindings::{
    perf_event_attr, PERF_COUNT_SW_CPU_CLOCK, PERF_FLAG_FD_CLOEXEC, PERF_TYPE_SOFTWARE, PERIOD,
};
use perf_event_open_sys::{ioctls, perf_event_open};

/// `fcntl` commands and values of Linux (the same on every architecture), which `libc` lacks.
const F_SETSIG: c_int = 10;
const F_SETOWN_EX: c_int = 15;
const F_OWNER_TID: c_int = 0;
/// The `si_code` of a signal sent for a file descriptor whose event was disabled by its limit.
const POLL_HUP: c_int = 6;

/// `struct f_owner_ex`.
#[repr(C)]
struct Owner {
    kind: c_int,
    pid: c_int,
}

/// The start of Linux's `siginfo_t` for a signal sent for a file descriptor (`_sigpoll`).
#[repr(C)]
struct PollInfo {
    signo: c_int,
    errno: c_int,
    code: c_int,
    band: libc::c_long,
    fd: c_int,
}

/// The interval the events fire at on average after their first, in ns: set before the first
/// is armed.
static INTERVAL_NS: AtomicU64 = AtomicU64::new(0);
/// The state of the draws of [`next_period_ns`] (splitmix64), shared by all threads.
static DRAWS: AtomicU64 = AtomicU64::new(0x9e37_79b9_7f4a_7c15);

/// A period uniform within ±25% of `interval_ns`, as the eBPF sampler dithers its own
/// (docs/sampler.md): with one fixed period, a thread's samples come at fixed steps of its CPU
/// time, and on a program whose work has a period of its own each sample lands near where the
/// one before did, which makes the shares vary from run to run far more than the sample count
/// says. Async-signal-safe: one atomic addition.
fn next_period_ns(interval_ns: u64) -> u64 {
    let mut x = DRAWS.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    let spread = interval_ns / 2;
    interval_ns - interval_ns / 4 + x % spread.max(1)
}

/// An event on thread `tid`'s CPU clock, armed to signal it after `first_ns` of its CPU time,
/// then every `interval_ns` on average; its file descriptor, or the errno of the call that failed (the
/// kernel refuses perf events: `perf_event_paranoid`, seccomp, no perf events), or `EMFILE` when
/// the JVM has used half its file descriptors (see [`leaves_enough`]).
pub fn open(tid: u64, first_ns: u64, interval_ns: u64) -> Result<c_int, i32> {
    INTERVAL_NS.store(interval_ns, Ordering::Relaxed);
    let mut attributes = perf_event_attr {
        type_: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config: u64::from(PERF_COUNT_SW_CPU_CLOCK),
        ..Default::default()
    };
    attributes.__bindgen_anon_1.sample_period = first_ns.max(1);
    attributes.__bindgen_anon_2.wakeup_events = 1;
    attributes.set_disabled(1);
    attributes.set_exclude_hv(1);
    let errno = || std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    // SAFETY: perf_event_open reads the attributes; the fcntl and ioctl calls act on the file
    // descriptor it gave, closed again when one fails.
    unsafe {
        let fd = perf_event_open(
            &mut attributes,
            tid as libc::pid_t,
            -1,
            -1,
            c_ulong::from(PERF_FLAG_FD_CLOEXEC),
        );
        if fd < 0 {
            return Err(errno());
        }
        if !leaves_enough(fd) {
            libc::close(fd);
            return Err(libc::EMFILE);
        }
        let owner = Owner {
            kind: F_OWNER_TID,
            pid: tid as c_int,
        };
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0
            || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_ASYNC) != 0
            || libc::fcntl(fd, F_SETSIG, libc::SIGPROF) != 0
            || libc::fcntl(fd, F_SETOWN_EX, &owner as *const Owner) != 0
            || ioctls::REFRESH(fd, 1) != 0
        {
            let error = errno();
            libc::close(fd);
            return Err(error);
        }
        Ok(fd)
    }
}

/// Whether the agent may keep `fd`, the lowest free file descriptor when it was opened: only
/// while it lies in the lower half of the JVM's limit (`RLIMIT_NOFILE`'s soft limit). The kernel
/// gives the lowest free number, so every one below `fd` is in use: past half the limit, the
/// threads get POSIX timers instead, and the program keeps the other half of its descriptors,
/// whatever the number of its threads.
fn leaves_enough(fd: c_int) -> bool {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return false;
    }
    (fd as u64) < limit.rlim_cur / 2
}

/// Arms again the event whose overflow sent the signal `info`, for one more period; a signal
/// of another source is left alone. Async-signal-safe: two system calls.
///
/// # Safety
/// `info` is the `siginfo_t` given to the signal handler.
pub unsafe fn rearm(info: *const libc::siginfo_t) {
    let info = &*info.cast::<PollInfo>();
    if info.code != POLL_HUP {
        return;
    }
    // The next overflow after a period drawn anew (setting the period restarts the count)
    let period = next_period_ns(INTERVAL_NS.load(Ordering::Relaxed));
    // PERF_EVENT_IOC_PERIOD reads the period through a pointer (the crate's wrapper passes it
    // by value)
    libc::ioctl(info.fd, PERIOD as _, &period as *const u64);
    ioctls::REFRESH(info.fd, 1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_are_kept_in_the_lower_half_of_the_limit_only() {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the struct given.
        assert_eq!(
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
            0
        );
        let half = (limit.rlim_cur / 2).min(c_int::MAX as u64) as c_int;
        assert!(leaves_enough(3));
        assert!(leaves_enough(half - 1));
        assert!(!leaves_enough(half));
    }

    #[test]
    fn periods_are_drawn_within_a_quarter_of_the_interval_around_it() {
        let periods: Vec<u64> = (0..10_000).map(|_| next_period_ns(10_000_000)).collect();
        assert!(periods.iter().all(|p| (7_500_000..12_500_000).contains(p)));
        let mean = periods.iter().sum::<u64>() as f64 / periods.len() as f64;
        assert!((mean - 1e7).abs() < 1e5, "{mean}");
    }
}

//! The two clocks the sources need: a monotonic one for the length of windows, and the wall clock
//! for the age of a measurement another process published. Tests inject [`ManualClock`]. Also
//! the POSIX clocks read directly ([`posix_clock_ns`], [`monotonic_ns`]), where a time must be
//! compared with another process's or the kernel's.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The time of a POSIX clock (CLOCK_MONOTONIC, a CPU-time clock...) in ns, `None` if the system
/// refuses the clock.
#[cfg(unix)]
pub fn posix_clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    if unsafe { libc::clock_gettime(clock, &mut time) } != 0 {
        return None;
    }
    Some(
        u64::try_from(time.tv_sec)
            .unwrap_or(0)
            .saturating_mul(1_000_000_000)
            .saturating_add(u64::try_from(time.tv_nsec).unwrap_or(0)),
    )
}

/// Now on CLOCK_MONOTONIC in ns: the clock of the kernel's `bpf_ktime_get_ns`, shared by every
/// process of the machine (0 where the system refuses it, which POSIX does not allow).
#[cfg(unix)]
pub fn monotonic_ns() -> u64 {
    posix_clock_ns(libc::CLOCK_MONOTONIC).unwrap_or(0)
}

/// Time, as the power sources read it.
pub trait Clock: Send + Sync {
    /// Monotonic nanoseconds since an arbitrary start.
    fn monotonic_ns(&self) -> u64;
    /// The wall clock, in whole Unix seconds (floor).
    fn unix_seconds(&self) -> i64;
}

/// The machine's clocks.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    start: Instant,
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock {
            start: Instant::now(),
        }
    }
}

impl Clock for SystemClock {
    fn monotonic_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn unix_seconds(&self) -> i64 {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(since) => i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
            Err(before) => -i64::try_from(before.duration().as_secs()).unwrap_or(i64::MAX) - 1,
        }
    }
}

/// Clocks that move only when told to, for tests of the sources and of what drives them.
#[derive(Debug, Default)]
pub struct ManualClock {
    monotonic_ns: AtomicU64,
    unix_seconds: AtomicI64,
}

impl ManualClock {
    /// Clocks at monotonic 0 and at `unix_seconds` on the wall clock.
    pub fn new(unix_seconds: i64) -> Self {
        ManualClock {
            monotonic_ns: AtomicU64::new(0),
            unix_seconds: AtomicI64::new(unix_seconds),
        }
    }

    /// Moves the monotonic clock forward by `by`, and the wall clock by its whole seconds.
    pub fn advance(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.monotonic_ns.fetch_add(nanos, Ordering::SeqCst);
        let seconds = i64::try_from(by.as_secs()).unwrap_or(i64::MAX);
        self.unix_seconds.fetch_add(seconds, Ordering::SeqCst);
    }

    /// Sets the wall clock alone, as when it steps.
    pub fn set_unix_seconds(&self, unix_seconds: i64) {
        self.unix_seconds.store(unix_seconds, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn monotonic_ns(&self) -> u64 {
        self.monotonic_ns.load(Ordering::SeqCst)
    }

    fn unix_seconds(&self) -> i64 {
        self.unix_seconds.load(Ordering::SeqCst)
    }
}

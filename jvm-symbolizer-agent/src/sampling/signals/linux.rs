//! Linux: a timer on each thread's own CPU clock (a perf event, else a POSIX timer), and the
//! threads from `/proc/self/task`.

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use joularcode_core::power::clock::posix_clock_ns;

/// The clock id of thread `tid`'s CPU time, as glibc's `pthread_getcpuclockid` makes it
/// (`MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`): any thread of this process can read it.
fn thread_clock(tid: u64) -> libc::clockid_t {
    let tid = tid as libc::clockid_t;
    (!tid << 3) | 6
}

/// The calling thread's errno.
pub fn errno() -> i32 {
    // SAFETY: the calling thread's errno location.
    unsafe { *libc::__errno_location() }
}

/// Sets the calling thread's errno.
pub fn set_errno(value: i32) {
    // SAFETY: the calling thread's errno location.
    unsafe { *libc::__errno_location() = value }
}

/// The calling thread's id (async-signal-safe: a system call).
pub fn current_thread() -> u64 {
    // SAFETY: gettid has no argument and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u64 }
}

/// The calling thread's CPU time, in ns.
pub fn current_thread_cpu_ns() -> u64 {
    posix_clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0)
}

/// The CPU time of thread `tid` of this process, in ns; `None` once it has ended.
pub fn thread_cpu_ns(tid: u64) -> Option<u64> {
    posix_clock_ns(thread_clock(tid))
}

/// The threads of this process.
pub fn threads() -> Vec<u64> {
    std::fs::read_dir("/proc/self/task")
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The name (comm) of thread `tid` of this process.
pub fn thread_name(tid: u64) -> Option<String> {
    let comm = std::fs::read(format!("/proc/self/task/{tid}/comm")).ok()?;
    let comm = comm.strip_suffix(b"\n").unwrap_or(&comm);
    Some(String::from_utf8_lossy(comm).into_owned())
}

/// What sends one thread SIGPROF every interval of its CPU time: a perf event on its CPU clock
/// ([`super::perf`]), or, where the kernel refuses perf events, a POSIX timer on its CPU clock,
/// which the kernel checks at its scheduler's tick only.
///
/// The first signal comes after a random part of the interval, uniform in (0, interval]: a
/// thread's samples are then `cpu / interval` on average whatever its CPU time, where a first
/// signal after a whole interval would never sample a thread that runs less than one interval
/// (short-lived threads), and would sample one that runs 1.5 intervals once in every case.
pub enum Timer {
    /// A perf event's file descriptor.
    Event(libc::c_int),
    /// A POSIX timer.
    Tick(libc::timer_t),
}

/// The errno of the first perf event the kernel refused (0: none), after which that thread got
/// a POSIX timer.
static PERF_REFUSED: AtomicI32 = AtomicI32::new(0);

/// What the start line adds to how the agent samples: nothing while every thread has its perf
/// event, else why not and what it means.
pub fn timer_note() -> String {
    match PERF_REFUSED.load(Ordering::Relaxed) {
        0 => String::new(),
        libc::EMFILE => "; half of the JVM's file descriptors are in use: threads armed since \
             have CPU timers that fire at the kernel's tick only, with fewer samples, biased while \
             threads compete for the CPU"
            .to_string(),
        errno => format!(
            "; the kernel refuses perf events ({}; see perf_event_paranoid): the CPU timers \
             fire at the kernel's tick only, with fewer samples, biased while threads compete \
             for the CPU",
            std::io::Error::from_raw_os_error(errno)
        ),
    }
}

/// A number of nanoseconds uniform in (0, `interval_ns`], from the clock and the thread id
/// (splitmix64): no two threads start in step.
fn first_delay_ns(tid: u64, interval_ns: u64) -> u64 {
    let mut x = posix_clock_ns(libc::CLOCK_MONOTONIC).unwrap_or(0) ^ tid.rotate_left(32);
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    x % interval_ns.max(1) + 1
}

/// A timespec of `ns` nanoseconds.
fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

// SAFETY: a timer id or file descriptor may be closed from any thread of the process.
unsafe impl Send for Timer {}

impl Timer {
    /// Arms a timer for thread `tid`; `None` when the thread has ended or the kernel refuses
    /// both kinds (too many timers: RLIMIT_SIGPENDING).
    pub fn arm(tid: u64, interval: Duration) -> Option<Timer> {
        let interval_ns = u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX);
        let first_ns = first_delay_ns(tid, interval_ns);
        match super::perf::open(tid, first_ns, interval_ns) {
            Ok(fd) => return Some(Timer::Event(fd)),
            // The thread has ended: no timer of either kind
            Err(libc::ESRCH) => return None,
            Err(errno) => {
                let _ =
                    PERF_REFUSED.compare_exchange(0, errno, Ordering::Relaxed, Ordering::Relaxed);
            }
        }
        // SAFETY: a zeroed sigevent is valid; timer_create writes the timer id.
        unsafe {
            let mut event: libc::sigevent = std::mem::zeroed();
            event.sigev_notify = libc::SIGEV_THREAD_ID;
            event.sigev_signo = libc::SIGPROF;
            event.sigev_notify_thread_id = tid as libc::c_int;
            let mut timer: libc::timer_t = std::ptr::null_mut();
            if libc::timer_create(thread_clock(tid), &mut event, &mut timer) != 0 {
                return None;
            }
            let spec = libc::itimerspec {
                it_interval: timespec(interval_ns),
                it_value: timespec(first_ns),
            };
            if libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) != 0 {
                libc::timer_delete(timer);
                return None;
            }
            Some(Timer::Tick(timer))
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        // SAFETY: a timer or event made by `arm`, closed once; a signal still pending from it
        // is dropped by the kernel (a timer) or finds no event to arm again (an event).
        unsafe {
            match *self {
                Timer::Event(fd) => {
                    libc::close(fd);
                }
                Timer::Tick(timer) => {
                    libc::timer_delete(timer);
                }
            }
        }
    }
}

/// Arms again the perf event that sent the signal `info`, if one did.
///
/// # Safety
/// `info` is the `siginfo_t` given to the signal handler.
pub unsafe fn on_signal(info: *const libc::siginfo_t) {
    super::perf::rearm(info);
}

/// Linux has a timer per thread: no process timer.
pub fn start_process_timer(_interval: Duration) -> Result<(), super::SignalError> {
    Ok(())
}

/// Linux has a timer per thread: no process timer.
pub fn stop_process_timer() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_delays_spread_over_the_interval() {
        let delays: Vec<u64> = (0..10_000)
            .map(|tid| first_delay_ns(tid, 10_000_000))
            .collect();
        assert!(delays.iter().all(|&d| (1..=10_000_000).contains(&d)));
        let mean = delays.iter().sum::<u64>() as f64 / delays.len() as f64;
        assert!((mean - 5e6).abs() < 2e5, "{mean}");
    }

    #[test]
    fn another_threads_cpu_time_is_read_through_its_clock() {
        let (sender, receiver) = std::sync::mpsc::channel();
        let worker = std::thread::spawn(move || {
            // 20 ms of its own CPU time, however long a loaded machine makes that take
            while current_thread_cpu_ns() < 20_000_000 {
                std::hint::black_box(0u64);
            }
            sender.send(current_thread()).unwrap();
            std::thread::sleep(Duration::from_millis(200));
            current_thread_cpu_ns()
        });
        let tid = receiver.recv().unwrap();
        assert!(threads().contains(&tid));
        let read = thread_cpu_ns(tid).expect("a live thread's clock");
        let own = worker.join().unwrap();
        assert!(
            read >= 10_000_000 && read <= own,
            "{read} ns read, {own} ns in the end"
        );
        assert_eq!(thread_cpu_ns(tid), None, "an ended thread has no clock");
        assert!(thread_name(u64::from(std::process::id())).is_some());
    }
}

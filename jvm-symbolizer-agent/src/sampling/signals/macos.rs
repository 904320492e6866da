//! macOS: one process CPU timer (`ITIMER_PROF`, whose SIGPROF goes to the thread running), and
//! the threads from `task_threads`, named by their Mach port in this task.

use std::time::Duration;

use mach2::kern_return::KERN_SUCCESS;
use mach2::mach_port::mach_port_deallocate;
use mach2::traps::mach_task_self;

use joularcode_core::power::clock::posix_clock_ns;

use super::SignalError;

/// The calling thread's errno.
pub fn errno() -> i32 {
    // SAFETY: the calling thread's errno location.
    unsafe { *libc::__error() }
}

/// Sets the calling thread's errno.
pub fn set_errno(value: i32) {
    // SAFETY: the calling thread's errno location.
    unsafe { *libc::__error() = value }
}

/// The calling thread's Mach port name in this task (async-signal-safe: read from the pthread).
pub fn current_thread() -> u64 {
    // SAFETY: pthread_self and pthread_mach_thread_np read the calling thread's structure.
    u64::from(unsafe { libc::pthread_mach_thread_np(libc::pthread_self()) })
}

/// The calling thread's CPU time, in ns.
pub fn current_thread_cpu_ns() -> u64 {
    posix_clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0)
}

/// `thread_info` of `port` into `T`.
fn info<T>(port: u64, flavor: libc::thread_flavor_t, count: u32) -> Option<T> {
    let mut data = std::mem::MaybeUninit::<T>::zeroed();
    let mut count = count;
    // SAFETY: thread_info writes at most `count` integers of flavor `flavor` into `data`.
    let result = unsafe {
        libc::thread_info(
            port as libc::thread_inspect_t,
            flavor,
            data.as_mut_ptr().cast(),
            &mut count,
        )
    };
    // SAFETY: written by thread_info.
    (result == KERN_SUCCESS).then(|| unsafe { data.assume_init() })
}

/// The CPU time of thread `port`, in ns; `None` once it has ended.
pub fn thread_cpu_ns(port: u64) -> Option<u64> {
    let basic: libc::thread_basic_info = info(
        port,
        libc::THREAD_BASIC_INFO as libc::thread_flavor_t,
        libc::THREAD_BASIC_INFO_COUNT,
    )?;
    let micros = |time: libc::time_value_t| {
        (time.seconds as u64).saturating_mul(1_000_000) + time.microseconds as u64
    };
    Some((micros(basic.user_time) + micros(basic.system_time)).saturating_mul(1000))
}

/// The name of thread `port`.
pub fn thread_name(port: u64) -> Option<String> {
    let extended: libc::thread_extended_info = info(
        port,
        libc::THREAD_EXTENDED_INFO as libc::thread_flavor_t,
        (std::mem::size_of::<libc::thread_extended_info>() / std::mem::size_of::<libc::natural_t>())
            as u32,
    )?;
    let name: Vec<u8> = extended
        .pth_name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    Some(String::from_utf8_lossy(&name).into_owned())
}

/// The threads of this task, by port name.
pub fn threads() -> Vec<u64> {
    let mut list: mach2::mach_types::thread_act_array_t = std::ptr::null_mut();
    let mut count: mach2::message::mach_msg_type_number_t = 0;
    // SAFETY: task_threads gives `count` send rights in an array the kernel allocated; each
    // right is released (the names stay valid for the live threads, which hold their own) and
    // the array deallocated.
    unsafe {
        let task = mach_task_self();
        if mach2::task::task_threads(task, &mut list, &mut count) != KERN_SUCCESS {
            return Vec::new();
        }
        let ports = std::slice::from_raw_parts(list, count as usize).to_vec();
        for &port in &ports {
            mach_port_deallocate(task, port);
        }
        mach2::vm::mach_vm_deallocate(
            task,
            list as mach2::vm_types::mach_vm_address_t,
            (count as usize * std::mem::size_of::<mach2::mach_types::thread_act_t>())
                as mach2::vm_types::mach_vm_size_t,
        );
        ports.into_iter().map(u64::from).collect()
    }
}

/// macOS has one process timer: nothing per thread.
pub struct Timer;

impl Timer {
    /// Nothing to arm per thread.
    pub fn arm(_port: u64, _interval: Duration) -> Option<Timer> {
        None
    }
}

/// Nothing to add to the start line: one process timer.
pub fn timer_note() -> String {
    String::new()
}

/// The process timer needs nothing after a signal.
///
/// # Safety
/// `info` is the `siginfo_t` given to the signal handler.
pub unsafe fn on_signal(_info: *const libc::siginfo_t) {}

/// Sets the process CPU timer.
fn set_process_timer(interval: Duration) -> Result<(), SignalError> {
    let period = libc::timeval {
        tv_sec: interval.as_secs() as libc::time_t,
        tv_usec: interval.subsec_micros() as libc::suseconds_t,
    };
    let timer = libc::itimerval {
        it_interval: period,
        it_value: period,
    };
    // SAFETY: setitimer reads the itimerval it is given.
    if unsafe { libc::setitimer(libc::ITIMER_PROF, &timer, std::ptr::null_mut()) } != 0 {
        return Err(SignalError::ProcessTimer(errno()));
    }
    Ok(())
}

/// Arms the process CPU timer: a SIGPROF every `interval` of the process's CPU time.
pub fn start_process_timer(interval: Duration) -> Result<(), SignalError> {
    set_process_timer(interval)
}

/// Disarms the process CPU timer.
pub fn stop_process_timer() {
    let _ = set_process_timer(Duration::ZERO);
}

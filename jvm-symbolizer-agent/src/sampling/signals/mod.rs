//! Sampling without safepoint bias (Linux, macOS): a CPU-time timer sends SIGPROF to the thread
//! that used the CPU, and the signal handler takes that thread's stack where it is, with HotSpot's
//! AsyncGetCallTrace, as async-profiler's `cpu`/`itimer` modes do. Interpreted, compiled and
//! inlined frames come by their jmethodIDs.
//!
//! - Linux: one timer per thread on the thread's own CPU clock, every
//!   `stack-monitoring-sample-rate` ms of that thread's CPU time, so a thread that does not run
//!   costs nothing: a perf event ([`perf`]), or a POSIX timer (`timer_create` with
//!   `SIGEV_THREAD_ID`) where the kernel refuses perf events; macOS: one process CPU timer
//!   (`ITIMER_PROF`), whose signal goes to the thread running.
//! - The handler is async-signal-safe: it reads atomics, asks the JVM for the thread's JNIEnv
//!   (GetEnv reads a thread-local), calls AsyncGetCallTrace into a slot of a ring allocated
//!   beforehand, and publishes it ([`super::ring`]); no allocation, no lock. The monitor thread
//!   names the frames ([`super::frames`]).
//! - The threads ([`Tasks`]) are the process's: the Java threads, from JVMTI's ThreadStart (their
//!   timer armed on themselves), and the JVM's own native threads (GC, JIT compilers, VM
//!   thread), found in the OS's thread list at each cycle and told apart by name, so that their
//!   CPU time gets their pseudo-frames (`[GC]`...) as in the eBPF mode. Each thread's CPU time is
//!   read from the OS at the end of each cycle, and at its end for a Java thread (ThreadEnd).
//! - AsyncGetCallTrace needs the jmethodIDs to exist: ClassLoad events are enabled and every
//!   class prepared gets its methods' ids made ([`crate::sampling`]).

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "linux")]
mod perf;

#[cfg(target_os = "linux")]
use linux as os;
#[cfg(target_os = "macos")]
use macos as os;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use joularcode_core::attribution::ThreadKind;
use joularcode_core::branch::UNKNOWN;
use joularcode_core::threads::{classify, JvmThread, ThreadCounts, ThreadTime};

use super::frames::Frames;
use super::ring::{CallFrame, Record, Ring, MAX_FRAMES};
use super::{Sampler, ThreadEvents, AGENT_THREAD_PREFIX};
use crate::jvmti::{Env, JavaVm, Jint, Jni, JniEnv, Jobject, JNI_OK, JNI_VERSION_1_6};
use crate::lock;

/// Why the signal sampler cannot start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignalError {
    /// `sigaction` refused the SIGPROF handler, with this errno.
    #[error("cannot install a SIGPROF handler: {}", std::io::Error::from_raw_os_error(*.0))]
    Handler(i32),
    /// `setitimer` refused the process CPU timer, with this errno.
    #[cfg(target_os = "macos")]
    #[error("cannot set the process CPU timer: {}", std::io::Error::from_raw_os_error(*.0))]
    ProcessTimer(i32),
}

/// `ASGCT_CallTrace`.
#[repr(C)]
struct CallTrace {
    env: JniEnv,
    num_frames: Jint,
    frames: *mut CallFrame,
}

/// `AsyncGetCallTrace(trace, depth, ucontext)`.
type AsyncGetCallTrace = unsafe extern "C" fn(*mut CallTrace, Jint, *mut c_void);

/// What the handler reads: set before the first timer is armed.
static VM: AtomicPtr<JavaVm> = AtomicPtr::new(std::ptr::null_mut());
static AGCT: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static RING: OnceLock<Ring> = OnceLock::new();
/// Whether samples are wanted: a signal still on its way when sampling stops is ignored.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The handler is installed once and stays: a late signal must never meet SIGPROF's default
/// action, which ends the process.
static INSTALLED: OnceLock<Result<(), SignalError>> = OnceLock::new();

/// AsyncGetCallTrace of the JVM `env` belongs to: looked up in the process (the launcher loads
/// libjvm globally), else in the library that holds the JVMTI functions (a JVM embedded with
/// RTLD_LOCAL).
pub fn find_async_get_call_trace(env: Env) -> Option<*mut c_void> {
    let name = c"AsyncGetCallTrace";
    // SAFETY: dlsym with a NUL-terminated name; RTLD_DEFAULT searches the global scope.
    let global = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if !global.is_null() {
        return Some(global);
    }
    // SAFETY: the JVMTI function table lives in libjvm; dladdr only reads the loader's tables,
    // and dlopen with RTLD_NOLOAD only finds a library already loaded.
    unsafe {
        let table = *env.0;
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(table.cast(), &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        let handle = libc::dlopen(info.dli_fname, libc::RTLD_LAZY | libc::RTLD_NOLOAD);
        if handle.is_null() {
            return None;
        }
        let found = libc::dlsym(handle, name.as_ptr());
        libc::dlclose(handle);
        (!found.is_null()).then_some(found)
    }
}

/// The SIGPROF handler: one sample of the interrupted thread into the ring.
extern "C" fn on_sigprof(_signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    let saved = os::errno();
    if ACTIVE.load(Ordering::Acquire) {
        if let Some(ring) = RING.get() {
            ring.push(|record| take_sample(record, context));
        }
        // SAFETY: the handler's own siginfo.
        unsafe { os::on_signal(info) };
    }
    os::set_errno(saved);
}

/// Fills `record` with the current thread's stack.
fn take_sample(record: &mut Record, context: *mut c_void) {
    record.thread = os::current_thread();
    record.status = Record::NOT_JAVA;
    let (vm, agct) = (VM.load(Ordering::Acquire), AGCT.load(Ordering::Acquire));
    if vm.is_null() || agct.is_null() {
        return;
    }
    let mut env: *mut c_void = std::ptr::null_mut();
    // SAFETY: the process's JavaVM; GetEnv reads the calling thread's JVM thread-local and
    // allocates nothing.
    if unsafe { ((**vm).get_env)(vm, &mut env, JNI_VERSION_1_6) } != JNI_OK || env.is_null() {
        return;
    }
    let mut trace = CallTrace {
        env: env as JniEnv,
        num_frames: 0,
        frames: record.frames.as_mut_ptr(),
    };
    // SAFETY: AsyncGetCallTrace is made to be called from a signal handler with the signal's
    // context; it writes at most MAX_FRAMES frames into the record.
    unsafe {
        let agct: AsyncGetCallTrace = std::mem::transmute(agct);
        agct(&mut trace, MAX_FRAMES as Jint, context);
    }
    record.status = trace.num_frames;
}

/// Installs the SIGPROF handler, once for the life of the process.
fn install_handler() -> Result<(), SignalError> {
    INSTALLED
        .get_or_init(|| {
            // SAFETY: a zeroed sigaction is valid; the handler is async-signal-safe.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_sigprof as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                if libc::sigaction(libc::SIGPROF, &action, std::ptr::null_mut()) != 0 {
                    return Err(SignalError::Handler(os::errno()));
                }
            }
            Ok(())
        })
        .clone()
}

/// One thread of the process.
struct Task {
    name: String,
    /// One of the JVM's own threads, or a Java thread.
    kind: Option<JvmThread>,
    /// One of the agent's own threads: neither sampled nor counted.
    own: bool,
    /// Its CPU time at the last reading.
    cpu_ns: u64,
    /// Its timer (Linux), deleted with it.
    _timer: Option<os::Timer>,
}

/// The threads of the process, shared by the JVMTI callbacks and the monitor thread.
pub struct Tasks {
    interval: Duration,
    pid: u32,
    state: Mutex<TaskState>,
}

#[derive(Default)]
struct TaskState {
    tasks: HashMap<u64, Task>,
    /// The final times of the threads that ended since the last reading.
    ended: Vec<ThreadTime>,
}

impl Tasks {
    /// Registers the thread `key` found in the OS's list, unless it is known already.
    fn found(&self, state: &mut TaskState, key: u64) {
        if state.tasks.contains_key(&key) {
            return;
        }
        let name = os::thread_name(key).unwrap_or_default();
        let own = name.starts_with(AGENT_THREAD_PREFIX);
        let task = Task {
            kind: classify(&name),
            own,
            cpu_ns: 0,
            _timer: if own {
                None
            } else {
                os::Timer::arm(key, self.interval)
            },
            name,
        };
        state.tasks.insert(key, task);
    }
}

impl ThreadEvents for Tasks {
    fn started(&self, _env: Env, _jni: Jni, _thread: Jobject) {
        let key = os::current_thread();
        let mut state = lock(&self.state);
        // A Java thread, whatever its OS name says (it may still be its creator's)
        let task = Task {
            name: String::new(),
            kind: None,
            own: false,
            cpu_ns: 0,
            _timer: os::Timer::arm(key, self.interval),
        };
        state.tasks.insert(key, task);
    }

    fn ended(&self, _env: Env, _jni: Jni, _thread: Jobject) {
        let key = os::current_thread();
        let cpu_ns = os::current_thread_cpu_ns();
        let mut state = lock(&self.state);
        if let Some(task) = state.tasks.remove(&key) {
            let time = ThreadTime {
                pid: self.pid,
                tid: key as u32,
                on_cpu_ns: cpu_ns.max(task.cpu_ns),
                name: task.name,
                exited: true,
            };
            state.ended.push(time);
        }
    }
}

/// AsyncGetCallTrace's name (`forte.cpp`) for a walk that gave no frame, by its status.
fn failure_name(status: Jint) -> &'static str {
    match status {
        0 => "ticks_no_Java_frame",
        -1 => "ticks_no_class_load",
        -2 => "ticks_GC_active",
        -3 => "ticks_unknown_not_Java",
        -4 => "ticks_not_walkable_not_Java",
        -5 => "ticks_unknown_Java",
        -6 => "ticks_not_walkable_Java",
        -7 => "ticks_unknown_state",
        -8 => "ticks_thread_exit",
        -9 => "ticks_deopt",
        -10 => "ticks_safepoint",
        Record::NOT_JAVA => "not_attached",
        _ => "other",
    }
}

/// The signal sampler of one profile.
pub struct Signals {
    tasks: Arc<Tasks>,
    /// The walks of Java threads that gave no frame since the last reading, by status.
    failed: BTreeMap<Jint, u64>,
}

impl Signals {
    /// Starts sampling every `interval` of each thread's CPU time with `agct`: installs the
    /// handler, arms the timers of the threads there are.
    pub fn start(
        vm: *mut JavaVm,
        agct: *mut c_void,
        interval: Duration,
        ring_slots: usize,
        pid: u32,
    ) -> Result<Signals, SignalError> {
        install_handler()?;
        RING.get_or_init(|| Ring::new(ring_slots));
        VM.store(vm, Ordering::Release);
        AGCT.store(agct, Ordering::Release);
        let tasks = Arc::new(Tasks {
            interval,
            pid,
            state: Mutex::new(TaskState::default()),
        });
        ACTIVE.store(true, Ordering::Release);
        os::start_process_timer(interval)?;
        let signals = Signals {
            tasks,
            failed: BTreeMap::new(),
        };
        signals.rescan(&mut lock(&signals.tasks.state));
        Ok(signals)
    }

    /// Registers the threads the OS lists that are not known yet, and forgets those it does not
    /// list any more (their last CPU time was read at the previous cycle).
    fn rescan(&self, state: &mut TaskState) {
        let listed: HashSet<u64> = os::threads().into_iter().collect();
        for &key in &listed {
            self.tasks.found(state, key);
        }
        let gone: Vec<u64> = state
            .tasks
            .keys()
            .filter(|key| !listed.contains(key))
            .copied()
            .collect();
        for key in gone {
            if let Some(task) = state.tasks.remove(&key) {
                if !task.own {
                    state.ended.push(ThreadTime {
                        pid: self.tasks.pid,
                        tid: key as u32,
                        on_cpu_ns: task.cpu_ns,
                        name: task.name,
                        exited: true,
                    });
                }
            }
        }
    }
}

impl Sampler for Signals {
    fn events(&self) -> Arc<dyn ThreadEvents> {
        self.tasks.clone()
    }

    fn describe(&self) -> String {
        format!(
            "every {} ms of each thread's CPU time, with AsyncGetCallTrace in a signal handler (no safepoint bias){}",
            self.tasks.interval.as_millis(),
            os::timer_note()
        )
    }

    fn collect_every(&self) -> Duration {
        Duration::from_millis(10)
    }

    fn collect(&mut self, _jni: Jni, frames: &mut Frames, counts: &mut HashMap<u32, ThreadCounts>) {
        let Some(ring) = RING.get() else { return };
        // One look-up per sample: copying the kinds of all threads at each drain would cost
        // every 10 ms in proportion to the threads, parked ones included
        let (tasks, failed) = (&self.tasks, &mut self.failed);
        ring.drain(|record| {
            let (kind, own) = lock(&tasks.state)
                .tasks
                .get(&record.thread)
                .map_or((None, false), |task| (task.kind, task.own));
            if own {
                return;
            }
            if kind.is_none() && record.status <= 0 {
                *failed.entry(record.status).or_insert(0) += 1;
            }
            let branch = match (kind, record.status) {
                (Some(jvm), _) => frames.pseudo(jvm.frame()),
                (None, n) if n > 0 => {
                    let stack = &record.frames[..(n as usize).min(MAX_FRAMES)];
                    // SAFETY: the method ids AsyncGetCallTrace gave, named within milliseconds.
                    unsafe { frames.branch(stack.iter().map(|frame| frame.method)) }
                }
                // No Java frame (a thread in native code only): an empty stack, no sample
                (None, 0 | -1) => return,
                (None, _) => frames.pseudo(UNKNOWN),
            };
            let thread = counts.entry(record.thread as u32).or_default();
            thread.kind = if kind.is_some() {
                ThreadKind::Jvm
            } else {
                ThreadKind::Java
            };
            *thread.counts.entry(branch).or_insert(0) += 1;
        });
    }

    fn thread_times(&mut self) -> Vec<ThreadTime> {
        let mut state = lock(&self.tasks.state);
        self.rescan(&mut state);
        let pid = self.tasks.pid;
        let mut times = std::mem::take(&mut state.ended);
        for (&key, task) in state.tasks.iter_mut().filter(|(_, task)| !task.own) {
            if let Some(cpu_ns) = os::thread_cpu_ns(key) {
                task.cpu_ns = task.cpu_ns.max(cpu_ns);
            }
            times.push(ThreadTime {
                pid,
                tid: key as u32,
                on_cpu_ns: task.cpu_ns,
                name: task.name.clone(),
                exited: false,
            });
        }
        times
    }

    fn own_cpu_ns(&self) -> u64 {
        lock(&self.tasks.state)
            .tasks
            .iter()
            .filter(|(_, task)| task.own)
            .filter_map(|(&key, _)| os::thread_cpu_ns(key))
            .sum()
    }

    fn drops(&self) -> u64 {
        RING.get().map_or(0, Ring::drops)
    }

    fn walks(&self) -> u64 {
        RING.get().map_or(0, Ring::pushed)
    }

    fn failed_walks(&mut self) -> BTreeMap<&'static str, u64> {
        let mut named = BTreeMap::new();
        for (status, count) in std::mem::take(&mut self.failed) {
            *named.entry(failure_name(status)).or_insert(0) += count;
        }
        named
    }

    fn stop(&mut self, _jni: Jni) {
        ACTIVE.store(false, Ordering::Release);
        os::stop_process_timer();
        lock(&self.tasks.state).tasks.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_walks_are_named_as_hotspot_names_them() {
        assert_eq!(failure_name(-3), "ticks_unknown_not_Java");
        assert_eq!(failure_name(-5), "ticks_unknown_Java");
        assert_eq!(failure_name(Record::NOT_JAVA), "not_attached");
        assert_eq!(failure_name(-42), "other");
    }
}

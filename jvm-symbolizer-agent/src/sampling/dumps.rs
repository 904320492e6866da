//! Sampling with JVMTI stack traces, where there are no signals (Windows) or no
//! AsyncGetCallTrace: every `stack-monitoring-sample-rate` ms, the stacks of the Java threads
//! that used CPU since the previous sample, in one `GetThreadListStackTraces` call.
//!
//! The cost follows the threads that run: a thread that is not runnable (parked, waiting,
//! sleeping, blocked) costs one `GetThreadState`, and a runnable one whose CPU time did not grow
//! (blocked in I/O) one `GetThreadCpuTime`; neither is walked. JVMTI walks a thread at a
//! safepoint or handshake, so its samples lean towards the safepoint polls (method returns, loop
//! back-edges) as Joular's do. The JVM's own native threads are invisible to JVMTI: their CPU
//! time is in the JVM's but in no thread's, and so is spread over the Java threads as Joular
//! does.
//!
//! A sample due while the previous one was still being taken (or while the monitor thread did not
//! get the CPU) is late, and the schedule starts again from now (Joular's overrun warning): each
//! thread walked now missed as many of the samples due meanwhile as it ran whole intervals of CPU
//! time since its last sample. While no thread runs, a late sample misses nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use joularcode_core::attribution::ThreadKind;
use joularcode_core::threads::{ThreadCounts, ThreadTime};

use super::frames::Frames;
use super::{Sampler, ThreadEvents};
use crate::jvmti::{
    Env, Jni, Jobject, THREAD_STATE_ALIVE, THREAD_STATE_RUNNABLE, THREAD_STATE_SUSPENDED,
};
use crate::lock;

/// The most frames kept of a stack (the newest ones).
const MAX_FRAMES: usize = 512;

/// One Java thread.
struct JavaThread {
    /// A global reference to its `java.lang.Thread`.
    reference: Jobject,
    key: u32,
    /// Its CPU time when it was last looked at for a sample.
    sampled_cpu_ns: u64,
    /// Its CPU time at the last cycle.
    cycle_cpu_ns: u64,
}

// SAFETY: a global reference may be used from any attached thread.
unsafe impl Send for JavaThread {}

#[derive(Default)]
struct State {
    threads: Vec<JavaThread>,
    ended: Vec<ThreadTime>,
    /// Global references of ended threads, to delete on the monitor thread.
    released: Vec<Jobject>,
    next_key: u32,
}

// SAFETY: global references may be used from any attached thread.
unsafe impl Send for State {}

/// The Java threads, shared by the JVMTI callbacks and the monitor thread.
pub struct JavaThreads {
    env: Env,
    pid: u32,
    state: Mutex<State>,
}

impl JavaThreads {
    /// Registers `thread`, unless its thread-local storage says it is known.
    ///
    /// # Safety
    /// `thread` is a live thread reference of the calling thread's `jni`.
    unsafe fn register(&self, jni: Jni, thread: Jobject) {
        if !self.env.thread_local_storage(thread).is_null() {
            return;
        }
        let mut state = lock(&self.state);
        state.next_key += 1;
        let key = state.next_key;
        // The key is kept in the thread's storage, for its ThreadEnd (0 means none)
        self.env
            .set_thread_local_storage(thread, key as usize as *const std::ffi::c_void);
        let reference = jni.new_global_ref(thread);
        if !reference.is_null() {
            state.threads.push(JavaThread {
                reference,
                key,
                sampled_cpu_ns: 0,
                cycle_cpu_ns: 0,
            });
        }
    }
}

impl ThreadEvents for JavaThreads {
    fn started(&self, _env: Env, jni: Jni, thread: Jobject) {
        // SAFETY: the thread of the event, on itself.
        unsafe { self.register(jni, thread) };
    }

    fn ended(&self, env: Env, _jni: Jni, _thread: Jobject) {
        // SAFETY: null asks for the calling thread's storage.
        let key = unsafe { env.thread_local_storage(std::ptr::null_mut()) } as usize as u32;
        let cpu_ns = env.current_thread_cpu_time().unwrap_or(0);
        let mut state = lock(&self.state);
        let Some(index) = state.threads.iter().position(|t| t.key == key) else {
            return;
        };
        let thread = state.threads.swap_remove(index);
        state.released.push(thread.reference);
        let time = ThreadTime {
            pid: self.pid,
            tid: key,
            on_cpu_ns: cpu_ns.max(thread.cycle_cpu_ns),
            name: String::new(),
            exited: true,
        };
        state.ended.push(time);
    }
}

/// The JVMTI sampler of one profile.
pub struct Dumps {
    threads: Arc<JavaThreads>,
    env: Env,
    interval: Duration,
    next: Instant,
    missed: u64,
    walks: u64,
}

impl Dumps {
    /// Starts sampling every `interval` the Java threads there are and those that start.
    pub fn start(env: Env, jni: Jni, interval: Duration, pid: u32) -> Dumps {
        let threads = Arc::new(JavaThreads {
            env,
            pid,
            state: Mutex::new(State::default()),
        });
        if jni.push_local_frame(16) {
            let me = env.current_thread();
            for thread in env.all_threads() {
                // SAFETY: live references GetAllThreads and GetCurrentThread gave this thread.
                unsafe {
                    if !jni.is_same_object(thread, me) {
                        threads.register(jni, thread);
                    }
                }
            }
            jni.pop_local_frame();
        }
        Dumps {
            threads,
            env,
            interval,
            next: Instant::now() + interval,
            missed: 0,
            walks: 0,
        }
    }

    /// Whether a thread in `state` may be running: alive, runnable, not suspended.
    fn may_run(state: i32) -> bool {
        state & (THREAD_STATE_ALIVE | THREAD_STATE_RUNNABLE)
            == THREAD_STATE_ALIVE | THREAD_STATE_RUNNABLE
            && state & THREAD_STATE_SUSPENDED == 0
    }
}

impl Sampler for Dumps {
    fn events(&self) -> Arc<dyn ThreadEvents> {
        self.threads.clone()
    }

    fn describe(&self) -> String {
        format!(
            "every {} ms the JVMTI stack traces of the Java threads that used CPU since (at safepoints)",
            self.interval.as_millis()
        )
    }

    fn collect_every(&self) -> Duration {
        self.next.saturating_duration_since(Instant::now())
    }

    fn collect(&mut self, jni: Jni, frames: &mut Frames, counts: &mut HashMap<u32, ThreadCounts>) {
        let now = Instant::now();
        if now < self.next {
            return;
        }
        // Late by a whole interval or more: the schedule restarts, and the samples due meanwhile
        // are missed by the threads that ran whole intervals since their last sample
        let interval_ns = u64::try_from(self.interval.as_nanos())
            .unwrap_or(u64::MAX)
            .max(1);
        let late = now.duration_since(self.next).as_nanos() / u128::from(interval_ns);
        let late = u64::try_from(late).unwrap_or(u64::MAX);
        self.next = if late > 0 { now } else { self.next } + self.interval;
        let env = self.env;
        let mut state = lock(&self.threads.state);
        for reference in std::mem::take(&mut state.released) {
            // SAFETY: the global reference of an ended thread, deleted once.
            unsafe { jni.delete_global_ref(reference) };
        }
        let mut walked = Vec::new();
        let mut keys = Vec::new();
        for thread in state.threads.iter_mut() {
            // SAFETY: a global reference to a thread (a thread that ended answers an error).
            let cpu_ns = unsafe {
                if !Self::may_run(env.thread_state(thread.reference)) {
                    continue;
                }
                env.thread_cpu_time(thread.reference)
            };
            let Some(cpu_ns) = cpu_ns else {
                continue;
            };
            if cpu_ns > thread.sampled_cpu_ns {
                let ran = (cpu_ns - thread.sampled_cpu_ns) / interval_ns;
                self.missed = self.missed.saturating_add(late.min(ran));
                thread.sampled_cpu_ns = cpu_ns;
                walked.push(thread.reference);
                keys.push(thread.key);
            }
        }
        drop(state);
        if walked.is_empty() {
            return;
        }
        self.walks += walked.len() as u64;
        env.stack_traces(&walked, MAX_FRAMES, |index, stack| {
            if stack.is_empty() {
                return;
            }
            // SAFETY: the method ids JVMTI gave, named now.
            let branch = unsafe { frames.branch(stack.iter().map(|frame| frame.method)) };
            let thread = counts.entry(keys[index]).or_default();
            thread.kind = ThreadKind::Java;
            *thread.counts.entry(branch).or_insert(0) += 1;
        });
    }

    fn thread_times(&mut self) -> Vec<ThreadTime> {
        let env = self.env;
        let mut state = lock(&self.threads.state);
        let mut times = std::mem::take(&mut state.ended);
        for thread in state.threads.iter_mut() {
            // SAFETY: a global reference to a thread.
            if let Some(cpu_ns) = unsafe { env.thread_cpu_time(thread.reference) } {
                thread.cycle_cpu_ns = thread.cycle_cpu_ns.max(cpu_ns);
            }
            times.push(ThreadTime {
                pid: self.threads.pid,
                tid: thread.key,
                on_cpu_ns: thread.cycle_cpu_ns,
                name: String::new(),
                exited: false,
            });
        }
        times
    }

    fn own_cpu_ns(&self) -> u64 {
        // Called on the monitor thread, the agent's only thread in this mode
        self.env.current_thread_cpu_time().unwrap_or(0)
    }

    fn drops(&self) -> u64 {
        self.missed
    }

    fn walks(&self) -> u64 {
        self.walks
    }

    fn stop(&mut self, jni: Jni) {
        let mut state = lock(&self.threads.state);
        // A profile started later numbers the threads afresh
        for thread in &state.threads {
            // SAFETY: a global reference to a thread.
            unsafe {
                self.env
                    .set_thread_local_storage(thread.reference, std::ptr::null())
            };
        }
        let mut references: Vec<Jobject> = state
            .threads
            .drain(..)
            .map(|thread| thread.reference)
            .collect();
        references.append(&mut state.released);
        for reference in references {
            // SAFETY: global references made here, deleted once.
            unsafe { jni.delete_global_ref(reference) };
        }
    }
}

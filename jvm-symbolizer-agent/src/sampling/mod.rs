//! The agent's sampling mode: the agent profiles the JVM it is loaded into by itself, where eBPF
//! cannot (Windows, macOS, containers without CAP_BPF, old kernels), with the same engine, files
//! and messages as `joularcode-bpf record` (joularcode-core: power sources, attribution,
//! warnings, the CSV pair).
//!
//! `-agentpath:<lib>=sample[,config=FILE][,KEY=VALUE...]` at start, or the same options through
//! an attach; `stop` through an attach ends a profile (its last cycle is written). Options:
//! [`options`]. The JVM runs on unprofiled, after one line on stderr, when they cannot be used.
//!
//! Stacks are sampled by [`signals`] (Linux, macOS: no safepoint bias) or by [`dumps`] (JVMTI
//! stack traces: Windows, or where AsyncGetCallTrace is missing). A monitor thread of the agent
//! ([`monitor`]) names the samples, ends the cycles and writes the files.

mod dumps;
mod frames;
mod monitor;
pub mod options;
mod process;
#[cfg(unix)]
mod ring;
#[cfg(unix)]
mod signals;

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use joularcode_core::log::{Level, Log, Stderr};
use joularcode_core::threads::{ThreadCounts, ThreadTime};

use crate::jvmti::{
    self, Capabilities, Env, JavaVm, Jint, JmethodId, Jni, JniEnv, Jobject, JvmtiEnv, JNI_ERR,
    JNI_OK, JVMTI_ERROR_NONE,
};
use crate::lock;
use frames::Frames;
use monitor::Monitor;
use options::{Command, OptionsError, SampleOptions};

/// The name of every thread of the agent starts so: they are neither sampled nor counted.
pub const AGENT_THREAD_PREFIX: &str = "joularcode-";

thread_local! {
    /// Set on the agent's own threads: the JVMTI thread events of their attach are ignored.
    static AGENT_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// What a sampler learns from JVMTI's thread events, on the thread that starts or ends.
pub trait ThreadEvents: Send + Sync {
    /// A Java thread starts (ThreadStart, on itself).
    fn started(&self, env: Env, jni: Jni, thread: Jobject);
    /// A Java thread ends (ThreadEnd, on itself).
    fn ended(&self, env: Env, jni: Jni, thread: Jobject);
}

/// How a profile samples the stacks and times the threads; used by the monitor thread.
pub trait Sampler: Send {
    /// What the JVMTI thread events must be told.
    fn events(&self) -> Arc<dyn ThreadEvents>;
    /// How it samples, for the start line.
    fn describe(&self) -> String;
    /// How often [`Sampler::collect`] should be called.
    fn collect_every(&self) -> Duration;
    /// Counts the samples taken since the previous call, by thread, into `counts`; called on the
    /// monitor thread, whose JNI environment is `jni`.
    fn collect(&mut self, jni: Jni, frames: &mut Frames, counts: &mut HashMap<u32, ThreadCounts>);
    /// The cumulative CPU time of every thread counted now, and the final time of those that
    /// ended since the previous call.
    fn thread_times(&mut self) -> Vec<ThreadTime>;
    /// The CPU time of the agent's own threads, in ns.
    fn own_cpu_ns(&self) -> u64;
    /// Samples lost or late so far.
    fn drops(&self) -> u64;
    /// The stacks taken so far, counted or not: signals handled (each walked by
    /// AsyncGetCallTrace, or one of the JVM's native threads), or Java threads walked by JVMTI.
    /// Read once a cycle, for the cycle log: it shows that the threads that do not run are not
    /// walked.
    fn walks(&self) -> u64;
    /// The walks of Java threads that gave no stack since the previous call, by why (the
    /// sampler's name for it), for the cycle log: they are `[unknown]` or no sample at all.
    fn failed_walks(&mut self) -> BTreeMap<&'static str, u64> {
        BTreeMap::new()
    }
    /// Stops sampling; called on the monitor thread.
    fn stop(&mut self, jni: Jni);
}

/// Where the sampling mode's messages go: stderr, in Joular's format.
fn log() -> Stderr {
    Stderr::default()
}

/// The agent's JVMTI environment for sampling, made once.
#[derive(Clone, Copy)]
struct Agent {
    vm: *mut JavaVm,
    env: Env,
}

// SAFETY: the JavaVM and a JVMTI environment may be used from any thread.
unsafe impl Send for Agent {}
unsafe impl Sync for Agent {}

/// Why the sampling mode's JVMTI environment cannot be made.
#[derive(Debug, thiserror::Error)]
enum JvmtiError {
    /// GetEnv gave no JVMTI 1.2 environment.
    #[error(transparent)]
    NoEnvironment(#[from] jvmti::NoJvmti),
    /// AddCapabilities refused.
    #[error("the JVM refuses the capabilities to time threads and see compiled code")]
    Capabilities,
    /// SetEventCallbacks or SetEventNotificationMode refused.
    #[error("the JVM refuses to send thread and class events")]
    Events,
}

static AGENT: OnceLock<Result<Agent, JvmtiError>> = OnceLock::new();
/// The thread events' receiver of the running profile.
static EVENTS: RwLock<Option<Arc<dyn ThreadEvents>>> = RwLock::new(None);
/// The profile running, if any.
static RUNNING: Mutex<Option<monitor::Handle>> = Mutex::new(None);
/// Options given at start, for VMInit.
static PENDING: Mutex<Option<SampleOptions>> = Mutex::new(None);

/// Runs `f` with the running profile's thread events, unless on one of the agent's threads.
fn with_events(f: impl FnOnce(&dyn ThreadEvents)) {
    if AGENT_THREAD.with(Cell::get) {
        return;
    }
    let events = EVENTS
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone();
    if let Some(events) = events {
        f(&*events);
    }
}

extern "system" fn on_vm_init(_env: JvmtiEnv, _jni: *mut c_void, _thread: Jobject) {
    crate::guarded((), || {
        if let Some(options) = lock(&PENDING).take() {
            begin(options);
        }
    })
}

extern "system" fn on_vm_death(_env: JvmtiEnv, _jni: *mut c_void) {
    crate::guarded((), || {
        end();
    })
}

extern "system" fn on_thread_start(_env: JvmtiEnv, jni: *mut c_void, thread: Jobject) {
    crate::guarded((), || {
        if let Some(Ok(agent)) = AGENT.get() {
            with_events(|events| events.started(agent.env, Jni(jni as JniEnv), thread));
        }
    })
}

extern "system" fn on_thread_end(_env: JvmtiEnv, jni: *mut c_void, thread: Jobject) {
    crate::guarded((), || {
        if let Some(Ok(agent)) = AGENT.get() {
            with_events(|events| events.ended(agent.env, Jni(jni as JniEnv), thread));
        }
    })
}

/// ClassLoad must be enabled for AsyncGetCallTrace to walk: nothing else to do.
extern "system" fn on_class_load(
    _env: JvmtiEnv,
    _jni: *mut c_void,
    _thread: Jobject,
    _class: Jobject,
) {
}

/// Makes the jmethodIDs of a class's methods, which AsyncGetCallTrace cannot make itself.
extern "system" fn on_class_prepare(
    _env: JvmtiEnv,
    _jni: *mut c_void,
    _thread: Jobject,
    class: Jobject,
) {
    crate::guarded((), || {
        if let Some(Ok(agent)) = AGENT.get() {
            // SAFETY: the class of the event.
            unsafe { agent.env.make_method_ids(class) };
        }
    })
}

/// Compiled code loaded: nothing to do, but with the event enabled HotSpot records debug
/// information at every instruction of the methods compiled (DebugNonSafepoints), so that a
/// sample taken anywhere in compiled code names its inlined methods exactly.
extern "system" fn on_compiled_method_load(
    _env: JvmtiEnv,
    _method: JmethodId,
    _code_size: Jint,
    _code_addr: *const c_void,
    _map_length: Jint,
    _map: *const c_void,
    _compile_info: *const c_void,
) {
}

/// Makes the sampling mode's JVMTI environment: its capabilities, callbacks and events.
///
/// # Safety
/// `vm` is the JavaVM given to Agent_OnLoad or Agent_OnAttach.
unsafe fn make_agent(vm: *mut JavaVm, attach: bool) -> Result<Agent, JvmtiError> {
    let env = jvmti::get_env(vm)?;
    let mut capabilities = Capabilities::default();
    capabilities.words[0] = Capabilities::COMPILED_METHOD_LOAD_EVENTS
        | Capabilities::THREAD_CPU_TIME
        | Capabilities::CURRENT_THREAD_CPU_TIME;
    if env.add_capabilities(&capabilities) != JVMTI_ERROR_NONE {
        return Err(JvmtiError::Capabilities);
    }
    let handlers = [
        (jvmti::EVENT_VM_INIT, on_vm_init as *const c_void),
        (jvmti::EVENT_VM_DEATH, on_vm_death as *const c_void),
        (jvmti::EVENT_THREAD_START, on_thread_start as *const c_void),
        (jvmti::EVENT_THREAD_END, on_thread_end as *const c_void),
        (jvmti::EVENT_CLASS_LOAD, on_class_load as *const c_void),
        (
            jvmti::EVENT_CLASS_PREPARE,
            on_class_prepare as *const c_void,
        ),
        (
            jvmti::EVENT_COMPILED_METHOD_LOAD,
            on_compiled_method_load as *const c_void,
        ),
    ];
    if !env.handle_events(&handlers, attach) {
        return Err(JvmtiError::Events);
    }
    Ok(Agent { vm, env })
}

/// Starts (or stops) the sampling mode for `command`; `attach` when loaded into a running JVM.
/// Returns what Agent_OnLoad or Agent_OnAttach returns: at start always JNI_OK, so that the JVM
/// runs on unprofiled after one line saying why; through an attach, JNI_ERR when nothing was
/// done, for the attaching tool to say so.
///
/// # Safety
/// `vm` is the JavaVM given to Agent_OnLoad or Agent_OnAttach.
pub unsafe fn start(vm: *mut JavaVm, command: Result<Command, OptionsError>, attach: bool) -> Jint {
    let failed = |message: &dyn std::fmt::Display| {
        log().log(
            Level::Severe,
            &format!("joularcode agent: {message} This JVM runs on without being profiled."),
        );
        if attach {
            JNI_ERR
        } else {
            JNI_OK
        }
    };
    let options = match command {
        Err(error) => return failed(&error),
        Ok(Command::Stop) => {
            if end() {
                log().log(
                    Level::Info,
                    "joularcode agent: the profile of this JVM has ended.",
                );
                return JNI_OK;
            }
            log().log(
                Level::Warning,
                "joularcode agent: there is no profile to stop.",
            );
            return if attach { JNI_ERR } else { JNI_OK };
        }
        Ok(Command::Sample(options)) => options,
    };
    if let Err(error) = AGENT.get_or_init(|| make_agent(vm, attach)) {
        return failed(error);
    }
    if attach {
        if begin(options) {
            JNI_OK
        } else {
            JNI_ERR
        }
    } else {
        *lock(&PENDING) = Some(options);
        JNI_OK
    }
}

/// Starts a profile with `options` in the live phase; says why not, and returns false, when it
/// cannot.
fn begin(options: SampleOptions) -> bool {
    let Some(&Ok(agent)) = AGENT.get() else {
        return false;
    };
    let mut running = lock(&RUNNING);
    if running.is_some() {
        log().log(
            Level::Warning,
            "joularcode agent: already profiling this JVM. Ignoring this attach.",
        );
        return true;
    }
    match Monitor::spawn(agent.vm, agent.env, options) {
        Ok(handle) => {
            *running = Some(handle);
            true
        }
        Err(message) => {
            log().log(
                Level::Severe,
                &format!("joularcode agent: {message} This JVM runs on without being profiled."),
            );
            false
        }
    }
}

/// Ends the running profile, its last cycle written; false when there was none.
fn end() -> bool {
    let Some(handle) = lock(&RUNNING).take() else {
        return false;
    };
    handle.stop();
    true
}

/// Publishes or withdraws the running profile's thread events.
fn set_events(events: Option<Arc<dyn ThreadEvents>>) {
    *EVENTS
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = events;
}

/// Marks the calling thread as one of the agent's.
fn mark_agent_thread() {
    AGENT_THREAD.with(|flag| flag.set(true));
}

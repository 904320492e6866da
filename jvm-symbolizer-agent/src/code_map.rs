//! The code-map job: a code map of the JVM's JIT-compiled code for the eBPF profiler.
//!
//! Loaded at start (`-agentpath:/path/libjvm_symbolizer_agent.so[=dir=/tmp,perfmap=no]`) or
//! attached to a running JVM, it reports every compiled method with its inline records, every
//! unload and every piece of generated code (interpreter, stubs) to `<dir>/joularcode-<pid>.map`
//! (format: docs/code-map.md) and to the standard perf map `<dir>/perf-<pid>.map`, and removes
//! the code map when the JVM ends. After an attach it replays the code compiled before
//! (GenerateEvents). It keeps CompiledMethodLoad enabled, which makes HotSpot record debug
//! information at every instruction (DebugNonSafepoints) for the methods compiled afterwards.
//!
//! It writes only while a profiler holds the map's lease ([`crate::lease`]): once none renewed it
//! for 5 s (or the map reached its bound), the agent disables its code events, removes the map
//! and writes nothing more; the next attach of the library (a profiler coming back) starts it
//! again, with a new map and the replay of the live code.

use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use joularcode_core::log::Level;
use joularcode_core::power::clock::monotonic_ns;

use crate::events::{self, REPLAYING};
use crate::jvmti::{
    self, Capabilities, Env, JavaVm, Jint, JmethodId, Jobject, JvmtiEnv, JNI_ERR, JNI_OK,
    JVMTI_ERROR_NONE,
};
use crate::lease::{Verdict, CHECK_EVERY, LEASE, MAX_MAP};
use crate::options::Options;
use crate::output::{self, Sink};
use crate::{guarded, lock, say};

/// The events that write the maps, disabled while the agent is stopped.
const CODE_EVENTS: [Jint; 3] = [
    jvmti::EVENT_COMPILED_METHOD_LOAD,
    jvmti::EVENT_COMPILED_METHOD_UNLOAD,
    jvmti::EVENT_DYNAMIC_CODE_GENERATED,
];

/// The process's JavaVM, which any thread may use.
struct Vm(*mut JavaVm);
// SAFETY: the JavaVM is valid for the whole process and may be used from any thread.
unsafe impl Send for Vm {}
// SAFETY: as above; it is only read.
unsafe impl Sync for Vm {}

/// The running agent: one per library instance.
struct Agent {
    env: Env,
    vm: Vm,
    sink: Sink,
    /// Held while the agent stops or starts again, so that the two never interleave; it holds
    /// whether the code events are enabled.
    events_on: Mutex<bool>,
    /// Set at VMDeath: the agent never starts again.
    ended: AtomicBool,
}

impl Agent {
    /// Enables or disables [`CODE_EVENTS`]; true when the JVM did all. JVMTI answers only the
    /// JVM's threads: the agent's own thread is attached to the JVM for the call.
    fn set_code_events(&self, enabled: bool) -> bool {
        let set = || {
            CODE_EVENTS
                .iter()
                .all(|&event| self.env.set_event(event, enabled) == JVMTI_ERROR_NONE)
        };
        // SAFETY: `vm` is the process's JavaVM.
        if unsafe { jvmti::jni_env(self.vm.0) }.is_some() {
            return set();
        }
        // SAFETY: as above; the thread attached here is detached before returning, holding no
        // monitor.
        unsafe {
            if jvmti::attach_current_thread(self.vm.0, c"joularcode-code-map").is_none() {
                return false;
            }
            let done = set();
            ((**self.vm.0).detach_current_thread)(self.vm.0);
            done
        }
    }

    /// Looks at the map's lease (the writer thread, every second): once no profiler holds it,
    /// the agent disables its events, removes its map and writes nothing more. Events that
    /// could not be disabled (the JVM not started yet) are tried again at the next look.
    fn check_lease(&self) {
        let mut events_on = lock(&self.events_on);
        let verdict = self.sink.check_lease(monotonic_ns());
        let why = match verdict {
            Some(Verdict::Held) => return,
            None => None,
            Some(Verdict::Expired) => Some(format!(
                "no profiler read {} for {} s: the agent stops writing it and removes it, until a profiler attaches it again",
                self.sink.map_path.display(),
                LEASE.as_secs()
            )),
            Some(Verdict::Full) => Some(format!(
                "{} reached {} MiB: the agent stops writing it and removes it, until a profiler attaches it again (with the live code only)",
                self.sink.map_path.display(),
                MAX_MAP >> 20
            )),
        };
        if let Some(why) = why {
            if let Some(error) = self.sink.stop() {
                say(Level::Warning, &error.to_string());
            }
            say(Level::Info, &why);
        }
        if *events_on && self.set_code_events(false) {
            *events_on = false;
        }
    }

    /// Starts writing again after a stop, when a profiler attaches the library again: a new map,
    /// the code events enabled, and the code that exists replayed.
    fn restart(&self) -> Jint {
        let mut events_on = lock(&self.events_on);
        if self.ended.load(Ordering::Relaxed) {
            return JNI_ERR;
        }
        if self.sink.running() {
            say(
                Level::Info,
                &format!("already running, writing {}", self.sink.map_path.display()),
            );
            return JNI_OK;
        }
        match self.sink.start() {
            Ok(true) => {}
            Ok(false) => return not_started(None),
            Err(error) => return not_started(Some(&error)),
        }
        if !self.set_code_events(true) {
            say(Level::Severe, "the JVM refuses to send code events");
            self.sink.stop();
            return JNI_ERR;
        }
        *events_on = true;
        replay(self.env);
        say(
            Level::Info,
            &format!(
                "a profiler reads the code map again: writing {}",
                self.sink.map_path.display()
            ),
        );
        JNI_OK
    }
}

/// Writes the code that exists already (GenerateEvents), as `R` and `S` records, and writes it
/// out.
fn replay(env: Env) {
    REPLAYING.with(|replaying| replaying.set(true));
    env.generate_events(jvmti::EVENT_COMPILED_METHOD_LOAD);
    env.generate_events(jvmti::EVENT_DYNAMIC_CODE_GENERATED);
    REPLAYING.with(|replaying| replaying.set(false));
    flush();
}

static AGENT: OnceLock<Agent> = OnceLock::new();

extern "system" fn on_vm_init(_env: JvmtiEnv, _jni: *mut c_void, _thread: Jobject) {
    guarded((), || {
        if let Some(agent) = AGENT.get() {
            // Stubs generated before the live phase may not have been posted: ask again
            // (the sink skips those already written).
            agent
                .env
                .generate_events(jvmti::EVENT_DYNAMIC_CODE_GENERATED);
        }
    })
}

extern "system" fn on_vm_death(_env: JvmtiEnv, _jni: *mut c_void) {
    guarded((), || {
        flush();
        if let Some(agent) = AGENT.get() {
            agent.ended.store(true, Ordering::Relaxed);
            if let Some(error) = agent.sink.stop() {
                say(Level::Warning, &error.to_string());
            }
        }
    });
}

extern "system" fn on_compiled_method_load(
    _env: JvmtiEnv,
    method: JmethodId,
    code_size: Jint,
    code_addr: *const c_void,
    _map_length: Jint,
    _map: *const c_void,
    compile_info: *const c_void,
) {
    guarded((), || {
        if let Some(agent) = AGENT.get() {
            // SAFETY: the arguments are the event's, valid during the callback.
            unsafe {
                events::compiled_method_load(
                    agent.env,
                    &agent.sink,
                    method,
                    code_size,
                    code_addr,
                    compile_info,
                )
            }
        }
    })
}

extern "system" fn on_compiled_method_unload(
    _env: JvmtiEnv,
    _method: JmethodId,
    code_addr: *const c_void,
) {
    guarded((), || {
        if let Some(agent) = AGENT.get() {
            events::compiled_method_unload(&agent.sink, code_addr);
        }
    })
}

extern "system" fn on_dynamic_code_generated(
    _env: JvmtiEnv,
    name: *const c_char,
    address: *const c_void,
    length: Jint,
) {
    guarded((), || {
        if let Some(agent) = AGENT.get() {
            // SAFETY: the arguments are the event's, valid during the callback.
            unsafe { events::dynamic_code_generated(&agent.sink, name, address, length) }
        }
    })
}

/// Writes out what the callbacks appended.
pub fn flush() {
    if let Some(error) = AGENT.get().and_then(|agent| agent.sink.flush()) {
        say(Level::Warning, &error.to_string());
    }
}

/// What the agent answers the JVM when it cannot start its map: success when another copy of the
/// agent already writes it (`error` is `None`, said as information), else an error, said SEVERE.
fn not_started(error: Option<&dyn std::fmt::Display>) -> Jint {
    match error {
        None => {
            say(
                Level::Info,
                "another copy of the agent already writes this JVM's code map",
            );
            JNI_OK
        }
        Some(error) => {
            say(Level::Severe, &error.to_string());
            JNI_ERR
        }
    }
}

/// Starts the agent in this JVM; `attach` when loaded into a running JVM.
///
/// # Safety
/// `vm` and `options` are the arguments of Agent_OnLoad / Agent_OnAttach.
pub unsafe fn start(vm: *mut JavaVm, options: *const c_char, attach: bool) -> Jint {
    if let Some(agent) = AGENT.get() {
        return agent.restart();
    }
    let text = if options.is_null() {
        String::new()
    } else {
        CStr::from_ptr(options).to_string_lossy().into_owned()
    };
    let options = match Options::parse(&text) {
        Ok(options) => options,
        Err(error) => {
            say(Level::Severe, &error.to_string());
            return JNI_ERR;
        }
    };
    let env = match jvmti::get_env(vm) {
        Ok(env) => env,
        // Attached as the JVM shuts down: nothing is lost, and its output is no place to say so.
        Err(jvmti::NoJvmti::Ending) => return JNI_ERR,
        Err(e) => {
            say(Level::Severe, &e.to_string());
            return JNI_ERR;
        }
    };
    let sink = match Sink::open(&options, std::process::id()) {
        Ok(Some(sink)) => sink,
        Ok(None) => return not_started(None),
        Err(error) => return not_started(Some(&error)),
    };
    let mut capabilities = Capabilities::default();
    capabilities.words[0] = Capabilities::COMPILED_METHOD_LOAD_EVENTS;
    if env.add_capabilities(&capabilities) != JVMTI_ERROR_NONE {
        say(
            Level::Severe,
            "the JVM refuses can_generate_compiled_method_load_events",
        );
        return JNI_ERR;
    }
    let agent = Agent {
        env,
        vm: Vm(vm),
        sink,
        events_on: Mutex::new(true),
        ended: AtomicBool::new(false),
    };
    if AGENT.set(agent).is_err() {
        return JNI_OK;
    }
    let handlers = [
        (jvmti::EVENT_VM_INIT, on_vm_init as *const c_void),
        (jvmti::EVENT_VM_DEATH, on_vm_death as *const c_void),
        (
            jvmti::EVENT_COMPILED_METHOD_LOAD,
            on_compiled_method_load as *const c_void,
        ),
        (
            jvmti::EVENT_COMPILED_METHOD_UNLOAD,
            on_compiled_method_unload as *const c_void,
        ),
        (
            jvmti::EVENT_DYNAMIC_CODE_GENERATED,
            on_dynamic_code_generated as *const c_void,
        ),
    ];
    if !env.handle_events(&handlers, attach) {
        say(Level::Severe, "the JVM refuses to send code events");
        return JNI_ERR;
    }
    let writer = std::thread::Builder::new()
        .name("joularcode-code-map".into())
        .spawn(|| {
            let mut next_check = Instant::now() + CHECK_EVERY;
            loop {
                std::thread::sleep(output::FLUSH_EVERY);
                guarded((), flush);
                if Instant::now() >= next_check {
                    next_check = Instant::now() + CHECK_EVERY;
                    guarded((), || AGENT.get().map_or((), Agent::check_lease));
                }
            }
        });
    if let Err(e) = writer {
        say(
            Level::Severe,
            &format!("cannot start the writer thread: {e}"),
        );
        return JNI_ERR;
    }
    if attach {
        replay(env);
    }
    JNI_OK
}

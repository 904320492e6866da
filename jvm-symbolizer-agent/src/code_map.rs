//! The code-map job: a code map of the JVM's JIT-compiled code for the eBPF profiler.
//!
//! Loaded at start (`-agentpath:/path/libjvm_symbolizer_agent.so[=dir=/tmp,perfmap=no]`) or
//! attached to a running JVM, it reports every compiled method with its inline records, every
//! unload and every piece of generated code (interpreter, stubs) to `<dir>/joularcode-<pid>.map`
//! (format: docs/code-map.md) and to the standard perf map `<dir>/perf-<pid>.map`, and removes
//! the code map when the JVM ends. After an attach it replays the code compiled before
//! (GenerateEvents). It keeps CompiledMethodLoad enabled, which makes HotSpot record debug
//! information at every instruction (DebugNonSafepoints) for the methods compiled afterwards.

use std::ffi::{c_char, c_void, CStr};
use std::sync::OnceLock;

use joularcode_core::log::Level;

use crate::events::{self, REPLAYING};
use crate::jvmti::{
    self, Capabilities, Env, JavaVm, Jint, JmethodId, Jobject, JvmtiEnv, JNI_ERR, JNI_OK,
    JVMTI_ERROR_NONE,
};
use crate::options::Options;
use crate::output::{self, Sink};
use crate::{guarded, say};

/// The running agent: one per library instance.
struct Agent {
    env: Env,
    sink: Sink,
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
        if let Some(error) = AGENT.get().and_then(|agent| agent.sink.remove()) {
            say(Level::Warning, &error.to_string());
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

/// Starts the agent in this JVM; `attach` when loaded into a running JVM.
///
/// # Safety
/// `vm` and `options` are the arguments of Agent_OnLoad / Agent_OnAttach.
pub unsafe fn start(vm: *mut JavaVm, options: *const c_char, attach: bool) -> Jint {
    if let Some(agent) = AGENT.get() {
        say(
            Level::Info,
            &format!("already running, writing {}", agent.sink.map_path.display()),
        );
        return JNI_OK;
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
        Ok(None) => {
            say(
                Level::Info,
                "another copy of the agent already writes this JVM's code map",
            );
            return JNI_OK;
        }
        Err(error) => {
            say(Level::Severe, &error.to_string());
            return JNI_ERR;
        }
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
    if AGENT.set(Agent { env, sink }).is_err() {
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
        .spawn(|| loop {
            std::thread::sleep(output::FLUSH_EVERY);
            guarded((), flush);
        });
    if let Err(e) = writer {
        say(
            Level::Severe,
            &format!("cannot start the writer thread: {e}"),
        );
        return JNI_ERR;
    }
    if attach {
        REPLAYING.with(|replaying| replaying.set(true));
        env.generate_events(jvmti::EVENT_COMPILED_METHOD_LOAD);
        env.generate_events(jvmti::EVENT_DYNAMIC_CODE_GENERATED);
        REPLAYING.with(|replaying| replaying.set(false));
        flush();
    }
    JNI_OK
}

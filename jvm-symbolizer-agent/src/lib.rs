//! jvm-symbolizer-agent: the JVMTI agent of joularcode-bpf, with two jobs, by its options:
//! - the code map ([`code_map`], Linux): the JVM's JIT-compiled code for the eBPF profiler
//!   (`-agentpath:/path/libjvm_symbolizer_agent.so[=dir=/tmp,perfmap=no]`);
//! - the sampling mode ([`sampling`], every OS): the agent profiles its JVM by itself, with the
//!   engine, files and messages of `joularcode-bpf record`
//!   (`-agentpath:...=sample[,config=FILE][,KEY=VALUE...]`).
//!
//! Every entry point catches panics: a panic never crosses into the JVM.

#[cfg(target_os = "linux")]
pub mod code_map;
#[cfg(target_os = "linux")]
pub mod events;
#[cfg(target_os = "linux")]
pub mod format;
pub mod jvmti;
#[cfg(target_os = "linux")]
pub mod lease;
#[cfg(target_os = "linux")]
pub mod options;
#[cfg(target_os = "linux")]
pub mod output;
pub mod sampling;

use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard};

use joularcode_core::log::{Level, Log, Stderr};

use jvmti::{JavaVm, Jint, JNI_ERR};

fn say(level: Level, message: &str) {
    Stderr::default().log(level, &format!("jvm-symbolizer-agent: {message}"));
}

/// Locks a mutex even if a panic (caught at the FFI boundary) poisoned it.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs `f`, turning a panic into `fallback` so that it never unwinds into the JVM.
pub(crate) fn guarded<R>(fallback: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        let _ = std::panic::catch_unwind(|| say(Level::Severe, "internal error, event skipped"));
        fallback
    })
}

/// Starts the job the options ask for; `attach` when loaded into a running JVM.
///
/// # Safety
/// `vm` and `options` are the arguments of Agent_OnLoad / Agent_OnAttach.
unsafe fn start(vm: *mut JavaVm, options: *const c_char, attach: bool) -> Jint {
    let text = if options.is_null() {
        String::new()
    } else {
        CStr::from_ptr(options).to_string_lossy().into_owned()
    };
    if let Some(command) = sampling::options::parse(&text) {
        return sampling::start(vm, command, attach);
    }
    #[cfg(target_os = "linux")]
    {
        code_map::start(vm, options, attach)
    }
    #[cfg(not(target_os = "linux"))]
    {
        say(
            Level::Severe,
            &format!("'{text}': on this OS the agent only profiles by itself: write -agentpath:<library>=sample[,KEY=VALUE...]"),
        );
        JNI_ERR
    }
}

/// Called by the JVM for `-agentpath:...=options` at start.
///
/// # Safety
/// Called by the JVM only, with its documented arguments.
#[no_mangle]
pub unsafe extern "system" fn Agent_OnLoad(
    vm: *mut JavaVm,
    options: *const c_char,
    _reserved: *mut c_void,
) -> Jint {
    guarded(JNI_ERR, || start(vm, options, false))
}

/// Called by the JVM when the agent is attached to it (attach `load` command).
///
/// # Safety
/// Called by the JVM only, with its documented arguments.
#[no_mangle]
pub unsafe extern "system" fn Agent_OnAttach(
    vm: *mut JavaVm,
    options: *const c_char,
    _reserved: *mut c_void,
) -> Jint {
    guarded(JNI_ERR, || start(vm, options, true))
}

/// Called by the JVM before it unloads the agent (at exit): writes out the last lines.
///
/// # Safety
/// Called by the JVM only.
#[no_mangle]
pub unsafe extern "system" fn Agent_OnUnload(_vm: *mut JavaVm) {
    #[cfg(target_os = "linux")]
    guarded((), code_map::flush)
}

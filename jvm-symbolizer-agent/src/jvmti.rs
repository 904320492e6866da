//! The few JNI and JVMTI declarations the agent uses, written by hand from the JDK 17 headers
//! (`include/jni.h`, `include/jvmti.h`, `include/jvmticmlr.h`; the same in JDK 21 and 25).
//!
//! The JVMTI function table is used as an array of pointers indexed by the function numbers that
//! jvmti.h prints before each entry (`/*   64 : Get Method Name (and Signature) */`), so only the
//! functions called here are declared. To check or extend them:
//! `grep -n '/\*   NN :' $JAVA_HOME/include/jvmti.h`.

use std::ffi::{c_char, c_uchar, c_void};

/// JNI `jint`.
pub type Jint = i32;
/// JNI `jlocation`.
pub type Jlocation = i64;
/// JNI `jmethodID` (opaque).
pub type JmethodId = *mut c_void;
/// JNI `jclass` / `jthread` (opaque references).
pub type Jobject = *mut c_void;
/// JVMTI error code.
pub type JvmtiError = u32;

/// `JNI_OK`.
pub const JNI_OK: Jint = 0;
/// `JNI_ERR`.
pub const JNI_ERR: Jint = -1;
/// `JVMTI_VERSION_1_2`.
pub const JVMTI_VERSION_1_2: Jint = 0x3001_0200;
/// `JVMTI_ERROR_NONE`.
pub const JVMTI_ERROR_NONE: JvmtiError = 0;
/// `JVMTI_ENABLE`.
pub const JVMTI_ENABLE: Jint = 1;
/// `JVMTI_EVENT_VM_INIT`: the first event number, index 0 of [`EventCallbacks`].
pub const EVENT_VM_INIT: Jint = 50;
/// `JVMTI_EVENT_VM_DEATH`.
pub const EVENT_VM_DEATH: Jint = 51;
/// `JVMTI_EVENT_COMPILED_METHOD_LOAD`.
pub const EVENT_COMPILED_METHOD_LOAD: Jint = 68;
/// `JVMTI_EVENT_COMPILED_METHOD_UNLOAD`.
pub const EVENT_COMPILED_METHOD_UNLOAD: Jint = 69;
/// `JVMTI_EVENT_DYNAMIC_CODE_GENERATED`.
pub const EVENT_DYNAMIC_CODE_GENERATED: Jint = 70;
/// `JVMTI_CMLR_INLINE_INFO` (jvmticmlr.h).
pub const CMLR_INLINE_INFO: u32 = 2;

/// `JavaVM`: a pointer to the invocation interface table.
pub type JavaVm = *const JniInvokeInterface;

/// `struct JNIInvokeInterface_` up to `GetEnv`.
#[repr(C)]
pub struct JniInvokeInterface {
    reserved: [*const c_void; 3],
    destroy_java_vm: *const c_void,
    attach_current_thread: *const c_void,
    detach_current_thread: *const c_void,
    /// `GetEnv(vm, penv, version)`.
    pub get_env: unsafe extern "system" fn(*mut JavaVm, *mut *mut c_void, Jint) -> Jint,
}

/// `jvmtiEnv`: a pointer to the JVMTI function table.
pub type JvmtiEnv = *const *const *const c_void;

/// `jvmtiCapabilities`: 128 bits of bit fields, least significant bit first.
#[repr(C)]
#[derive(Default)]
pub struct Capabilities {
    /// The four 32-bit words.
    pub words: [u32; 4],
}

impl Capabilities {
    /// Bit of `can_generate_compiled_method_load_events` (the 28th field) in word 0.
    pub const COMPILED_METHOD_LOAD_EVENTS: u32 = 1 << 27;
}

/// `jvmtiEventCallbacks`, from VMInit (event 50) to DynamicCodeGenerated (event 70): JVMTI copies
/// only the size it is given.
#[repr(C)]
pub struct EventCallbacks {
    /// Entry `i` is the handler of event `50 + i`, or null.
    pub handlers: [*const c_void; 21],
}

/// `jvmtiCompiledMethodLoadRecordHeader` (jvmticmlr.h).
#[repr(C)]
pub struct CmlrHeader {
    /// `jvmtiCMLRKind`.
    pub kind: u32,
    /// Major version of the record layout.
    pub majorinfoversion: Jint,
    /// Minor version of the record layout.
    pub minorinfoversion: Jint,
    /// The next record, or null.
    pub next: *const CmlrHeader,
}

/// `PCStackInfo`: the methods at one pc, innermost first.
#[repr(C)]
pub struct PcStackInfo {
    /// The address of the pc.
    pub pc: *const c_void,
    /// Number of entries of `methods` and `bcis`.
    pub numstackframes: Jint,
    /// The methods, innermost (inlined leaf) first, the compiled method last.
    pub methods: *const JmethodId,
    /// Their bytecode indices.
    pub bcis: *const Jint,
}

/// `jvmtiCompiledMethodLoadInlineRecord`.
#[repr(C)]
pub struct CmlrInlineRecord {
    /// Common header, kind [`CMLR_INLINE_INFO`].
    pub header: CmlrHeader,
    /// Number of entries of `pcinfo`.
    pub numpcs: Jint,
    /// One entry per pc descriptor of the compiled method, in increasing pc order.
    pub pcinfo: *const PcStackInfo,
}

/// Calls JVMTI function number `$index` (as numbered in jvmti.h) of `$env` with type `$ty`.
macro_rules! jvmti_call {
    ($env:expr, $index:expr, $ty:ty $(, $arg:expr)*) => {{
        let env: $crate::jvmti::JvmtiEnv = $env;
        let table = *env;
        let f: $ty = std::mem::transmute::<*const std::ffi::c_void, $ty>(*table.add($index - 1));
        f(env $(, $arg)*)
    }};
}

/// A JVMTI environment, shared by every thread (JVMTI functions are thread-safe).
#[derive(Clone, Copy)]
pub struct Env(pub JvmtiEnv);

// SAFETY: a jvmtiEnv may be used from any thread (JVMTI specification, "Environments").
unsafe impl Send for Env {}
unsafe impl Sync for Env {}

impl Env {
    /// SetEventNotificationMode (2) for all threads.
    pub fn enable_event(self, event: Jint) -> JvmtiError {
        type F = unsafe extern "C" fn(JvmtiEnv, Jint, Jint, Jobject, ...) -> JvmtiError;
        // SAFETY: function 2 of a live environment, called with its documented arguments.
        unsafe { jvmti_call!(self.0, 2, F, JVMTI_ENABLE, event, std::ptr::null_mut()) }
    }

    /// Deallocate (47).
    ///
    /// # Safety
    /// `mem` was allocated by this environment, or is null.
    pub unsafe fn deallocate(self, mem: *mut c_uchar) {
        if mem.is_null() {
            return;
        }
        type F = unsafe extern "system" fn(JvmtiEnv, *mut c_uchar) -> JvmtiError;
        // SAFETY: `mem` was allocated by this environment.
        unsafe { jvmti_call!(self.0, 47, F, mem) };
    }

    /// GetClassSignature (48): the class's type signature (`Ljava/lang/String;`).
    ///
    /// # Safety
    /// `class` is a live class reference.
    pub unsafe fn class_signature(self, class: Jobject) -> Option<String> {
        type F = unsafe extern "system" fn(
            JvmtiEnv,
            Jobject,
            *mut *mut c_char,
            *mut *mut c_char,
        ) -> JvmtiError;
        let mut signature: *mut c_char = std::ptr::null_mut();
        // SAFETY: function 48 with out-pointers; the generic part is not asked for (null).
        let err =
            unsafe { jvmti_call!(self.0, 48, F, class, &mut signature, std::ptr::null_mut()) };
        self.take_string(err, signature)
    }

    /// GetMethodName (64): the method's name.
    ///
    /// # Safety
    /// `method` is a method id the JVM gave.
    pub unsafe fn method_name(self, method: JmethodId) -> Option<String> {
        type F = unsafe extern "system" fn(
            JvmtiEnv,
            JmethodId,
            *mut *mut c_char,
            *mut *mut c_char,
            *mut *mut c_char,
        ) -> JvmtiError;
        let mut name: *mut c_char = std::ptr::null_mut();
        // SAFETY: function 64 with out-pointers; signature and generic are not asked for.
        let err = unsafe {
            jvmti_call!(
                self.0,
                64,
                F,
                method,
                &mut name,
                std::ptr::null_mut(),
                std::ptr::null_mut()
            )
        };
        self.take_string(err, name)
    }

    /// GetMethodDeclaringClass (65).
    ///
    /// # Safety
    /// `method` is a method id the JVM gave.
    pub unsafe fn declaring_class(self, method: JmethodId) -> Option<Jobject> {
        type F = unsafe extern "system" fn(JvmtiEnv, JmethodId, *mut Jobject) -> JvmtiError;
        let mut class: Jobject = std::ptr::null_mut();
        // SAFETY: function 65 with an out-pointer.
        let err = unsafe { jvmti_call!(self.0, 65, F, method, &mut class) };
        (err == JVMTI_ERROR_NONE && !class.is_null()).then_some(class)
    }

    /// SetEventCallbacks (122).
    pub fn set_event_callbacks(self, callbacks: &EventCallbacks) -> JvmtiError {
        type F = unsafe extern "system" fn(JvmtiEnv, *const EventCallbacks, Jint) -> JvmtiError;
        let size = std::mem::size_of::<EventCallbacks>() as Jint;
        // SAFETY: function 122; JVMTI copies `size` bytes of the callbacks.
        unsafe { jvmti_call!(self.0, 122, F, callbacks, size) }
    }

    /// GenerateEvents (123): replays the events of code that already exists.
    pub fn generate_events(self, event: Jint) -> JvmtiError {
        type F = unsafe extern "system" fn(JvmtiEnv, Jint) -> JvmtiError;
        // SAFETY: function 123.
        unsafe { jvmti_call!(self.0, 123, F, event) }
    }

    /// AddCapabilities (142).
    pub fn add_capabilities(self, capabilities: &Capabilities) -> JvmtiError {
        type F = unsafe extern "system" fn(JvmtiEnv, *const Capabilities) -> JvmtiError;
        // SAFETY: function 142.
        unsafe { jvmti_call!(self.0, 142, F, capabilities) }
    }

    /// Copies a JVMTI-allocated modified-UTF-8 string and deallocates it.
    fn take_string(self, err: JvmtiError, raw: *mut c_char) -> Option<String> {
        if raw.is_null() {
            return None;
        }
        // SAFETY: JVMTI returned a NUL-terminated string that stays valid until deallocated.
        let text = unsafe { std::ffi::CStr::from_ptr(raw) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: allocated by this environment.
        unsafe { self.deallocate(raw.cast()) };
        (err == JVMTI_ERROR_NONE).then_some(text)
    }
}

/// Gets a JVMTI 1.2 environment from the JVM.
///
/// # Safety
/// `vm` must be the JavaVM given to Agent_OnLoad or Agent_OnAttach.
pub unsafe fn get_env(vm: *mut JavaVm) -> Option<Env> {
    let mut env: *mut c_void = std::ptr::null_mut();
    let rc = ((**vm).get_env)(vm, &mut env, JVMTI_VERSION_1_2);
    (rc == JNI_OK && !env.is_null()).then_some(Env(env as JvmtiEnv))
}

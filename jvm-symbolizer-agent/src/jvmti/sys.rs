//! The JNI and JVMTI types, constants and structures the agent uses, declared by hand from the
//! JDK 17 headers (`include/jni.h`, `include/jvmti.h`, `include/jvmticmlr.h`; the same in JDK 21
//! and 25), laid out as C lays them out.

use std::ffi::{c_char, c_void};

/// JNI `jint`.
pub type Jint = i32;
/// JNI `jlocation`.
pub type Jlocation = i64;
/// JNI `jmethodID` (opaque).
pub type JmethodId = *mut c_void;
/// JNI `jclass` / `jthread` (opaque references).
pub type Jobject = *mut c_void;
/// JNI `jlong`.
pub type Jlong = i64;
/// JVMTI error code.
pub type JvmtiError = u32;
/// `JNIEnv`: a pointer to the JNI function table.
pub type JniEnv = *const *const *const c_void;

/// `JNI_OK`.
pub const JNI_OK: Jint = 0;
/// `JNI_ERR`.
pub const JNI_ERR: Jint = -1;
/// `JNI_EDETACHED`: the calling thread is not attached to the JVM.
pub const JNI_EDETACHED: Jint = -2;
/// `JNI_VERSION_1_6`.
pub const JNI_VERSION_1_6: Jint = 0x0001_0006;
/// `JVMTI_VERSION_1_2`.
pub const JVMTI_VERSION_1_2: Jint = 0x3001_0200;
/// `JVMTI_ERROR_NONE`.
pub const JVMTI_ERROR_NONE: JvmtiError = 0;
/// `JVMTI_ENABLE`.
pub const JVMTI_ENABLE: Jint = 1;
/// `JVMTI_DISABLE`.
pub const JVMTI_DISABLE: Jint = 0;
/// `JVMTI_THREAD_STATE_ALIVE`.
pub const THREAD_STATE_ALIVE: Jint = 0x0001;
/// `JVMTI_THREAD_STATE_RUNNABLE`.
pub const THREAD_STATE_RUNNABLE: Jint = 0x0004;
/// `JVMTI_THREAD_STATE_SUSPENDED`.
pub const THREAD_STATE_SUSPENDED: Jint = 0x10_0000;
/// `JVMTI_EVENT_VM_INIT`: the first event number, index 0 of [`EventCallbacks`].
pub const EVENT_VM_INIT: Jint = 50;
/// `JVMTI_EVENT_VM_DEATH`.
pub const EVENT_VM_DEATH: Jint = 51;
/// `JVMTI_EVENT_THREAD_START`.
pub const EVENT_THREAD_START: Jint = 52;
/// `JVMTI_EVENT_THREAD_END`.
pub const EVENT_THREAD_END: Jint = 53;
/// `JVMTI_EVENT_CLASS_LOAD`.
pub const EVENT_CLASS_LOAD: Jint = 55;
/// `JVMTI_EVENT_CLASS_PREPARE`.
pub const EVENT_CLASS_PREPARE: Jint = 56;
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

/// `struct JNIInvokeInterface_`.
#[repr(C)]
pub struct JniInvokeInterface {
    reserved: [*const c_void; 3],
    destroy_java_vm: *const c_void,
    attach_current_thread: *const c_void,
    /// `DetachCurrentThread(vm)`.
    pub detach_current_thread: unsafe extern "system" fn(*mut JavaVm) -> Jint,
    /// `GetEnv(vm, penv, version)`.
    pub get_env: unsafe extern "system" fn(*mut JavaVm, *mut *mut c_void, Jint) -> Jint,
    /// `AttachCurrentThreadAsDaemon(vm, penv, args)`.
    pub attach_current_thread_as_daemon:
        unsafe extern "system" fn(*mut JavaVm, *mut *mut c_void, *mut JavaVmAttachArgs) -> Jint,
}

/// `JavaVMAttachArgs`.
#[repr(C)]
pub struct JavaVmAttachArgs {
    /// The JNI version wanted.
    pub version: Jint,
    /// The thread's name (modified UTF-8), or null.
    pub name: *const c_char,
    /// Its thread group, or null for the main group.
    pub group: Jobject,
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
    /// Bit of `can_get_current_thread_cpu_time` (the 23rd field) in word 0.
    pub const CURRENT_THREAD_CPU_TIME: u32 = 1 << 22;
    /// Bit of `can_get_thread_cpu_time` (the 24th field) in word 0.
    pub const THREAD_CPU_TIME: u32 = 1 << 23;
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

/// `jvmtiFrameInfo`: one frame of a stack trace.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FrameInfo {
    /// The frame's method.
    pub method: JmethodId,
    /// Its bytecode index, or -1 for a native method.
    pub location: Jlocation,
}

/// `jvmtiStackInfo`: the stack trace of one thread, newest frame first.
#[repr(C)]
pub struct StackInfo {
    /// The thread.
    pub thread: Jobject,
    /// Its state, as GetThreadState gives it.
    pub state: Jint,
    /// Its frames.
    pub frame_buffer: *const FrameInfo,
    /// How many.
    pub frame_count: Jint,
}

//! The few JNI and JVMTI calls the agent makes, on the declarations of [`sys`].
//!
//! The JVMTI function table is used as an array of pointers indexed by the function numbers that
//! jvmti.h prints before each entry (`/*   64 : Get Method Name (and Signature) */`), so only the
//! functions called here are declared. To check or extend them:
//! `grep -n '/\*   NN :' $JAVA_HOME/include/jvmti.h`. The JNI function table is indexed the same
//! way by the position of each entry in `struct JNINativeInterface_` (reserved0 is 0).

pub mod sys;

use std::ffi::{c_char, c_uchar, c_void};

use joularcode_core::mutf8;
use joularcode_core::names::{class_name_from_signature, method_name};

pub use sys::*;

/// Calls JVMTI function number `$index` (as numbered in jvmti.h) of `$env` with type `$ty`.
macro_rules! jvmti_call {
    ($env:expr, $index:expr, $ty:ty $(, $arg:expr)*) => {{
        let env: $crate::jvmti::JvmtiEnv = $env;
        let table = *env;
        let f: $ty = std::mem::transmute::<*const std::ffi::c_void, $ty>(*table.add($index - 1));
        f(env $(, $arg)*)
    }};
}

/// Calls JNI function `$index` (its position in `struct JNINativeInterface_`) of `$env`.
macro_rules! jni_call {
    ($env:expr, $index:expr, $ty:ty $(, $arg:expr)*) => {{
        let env: $crate::jvmti::JniEnv = $env;
        let table = *env;
        let f: $ty = std::mem::transmute::<*const std::ffi::c_void, $ty>(*table.add($index));
        f(env $(, $arg)*)
    }};
}

/// The JNI environment of the calling thread (valid on that thread only).
#[derive(Clone, Copy)]
pub struct Jni(pub JniEnv);

impl Jni {
    /// PushLocalFrame (19): local references made until [`Jni::pop_local_frame`] are freed then.
    pub fn push_local_frame(self, capacity: Jint) -> bool {
        type F = unsafe extern "system" fn(JniEnv, Jint) -> Jint;
        // SAFETY: function 19 of this thread's environment.
        unsafe { jni_call!(self.0, 19, F, capacity) == JNI_OK }
    }

    /// PopLocalFrame (20).
    pub fn pop_local_frame(self) {
        type F = unsafe extern "system" fn(JniEnv, Jobject) -> Jobject;
        // SAFETY: function 20, after a successful push.
        unsafe { jni_call!(self.0, 20, F, std::ptr::null_mut()) };
    }

    /// NewGlobalRef (21).
    ///
    /// # Safety
    /// `object` is a live reference.
    pub unsafe fn new_global_ref(self, object: Jobject) -> Jobject {
        type F = unsafe extern "system" fn(JniEnv, Jobject) -> Jobject;
        // SAFETY: function 21 with a live reference.
        unsafe { jni_call!(self.0, 21, F, object) }
    }

    /// DeleteGlobalRef (22).
    ///
    /// # Safety
    /// `object` is a global reference made by NewGlobalRef, deleted once.
    pub unsafe fn delete_global_ref(self, object: Jobject) {
        type F = unsafe extern "system" fn(JniEnv, Jobject);
        // SAFETY: function 22 with a global reference made by NewGlobalRef.
        unsafe { jni_call!(self.0, 22, F, object) }
    }

    /// IsSameObject (24).
    ///
    /// # Safety
    /// `a` and `b` are live references.
    pub unsafe fn is_same_object(self, a: Jobject, b: Jobject) -> bool {
        type F = unsafe extern "system" fn(JniEnv, Jobject, Jobject) -> u8;
        // SAFETY: function 24 with two references.
        unsafe { jni_call!(self.0, 24, F, a, b) != 0 }
    }
}

/// A JVMTI environment, shared by every thread (JVMTI functions are thread-safe).
#[derive(Clone, Copy)]
pub struct Env(pub JvmtiEnv);

// SAFETY: a jvmtiEnv may be used from any thread (JVMTI specification, "Environments").
unsafe impl Send for Env {}
unsafe impl Sync for Env {}

impl Env {
    /// GetAllThreads (4): the live threads, as local references.
    pub fn all_threads(self) -> Vec<Jobject> {
        type F = unsafe extern "system" fn(JvmtiEnv, *mut Jint, *mut *mut Jobject) -> JvmtiError;
        let (mut count, mut threads): (Jint, *mut Jobject) = (0, std::ptr::null_mut());
        // SAFETY: function 4 with out-pointers; the array is JVMTI's, copied then deallocated.
        unsafe {
            let err = jvmti_call!(self.0, 4, F, &mut count, &mut threads);
            self.take_array(err, threads, count)
        }
    }

    /// GetThreadState (17); 0 when it cannot be had.
    ///
    /// # Safety
    /// `thread` is a live thread reference.
    pub unsafe fn thread_state(self, thread: Jobject) -> Jint {
        type F = unsafe extern "system" fn(JvmtiEnv, Jobject, *mut Jint) -> JvmtiError;
        let mut state = 0;
        // SAFETY: function 17 with a thread reference and an out-pointer.
        let err = unsafe { jvmti_call!(self.0, 17, F, thread, &mut state) };
        if err == JVMTI_ERROR_NONE {
            state
        } else {
            0
        }
    }

    /// GetCurrentThread (18): the calling thread, as a local reference.
    pub fn current_thread(self) -> Jobject {
        type F = unsafe extern "system" fn(JvmtiEnv, *mut Jobject) -> JvmtiError;
        let mut thread: Jobject = std::ptr::null_mut();
        // SAFETY: function 18 with an out-pointer.
        unsafe { jvmti_call!(self.0, 18, F, &mut thread) };
        thread
    }

    /// GetClassMethods (52), which makes the jmethodIDs of the class's methods: the ids
    /// AsyncGetCallTrace can only give once they exist. Returns how many there are.
    ///
    /// # Safety
    /// `class` is a live class reference.
    pub unsafe fn make_method_ids(self, class: Jobject) -> usize {
        type F = unsafe extern "system" fn(
            JvmtiEnv,
            Jobject,
            *mut Jint,
            *mut *mut JmethodId,
        ) -> JvmtiError;
        let (mut count, mut methods): (Jint, *mut JmethodId) = (0, std::ptr::null_mut());
        // SAFETY: function 52 with out-pointers; the array is deallocated.
        let err = unsafe { jvmti_call!(self.0, 52, F, class, &mut count, &mut methods) };
        unsafe { self.take_array(err, methods, count) }.len()
    }

    /// GetLoadedClasses (78): every loaded class, as local references.
    pub fn loaded_classes(self) -> Vec<Jobject> {
        type F = unsafe extern "system" fn(JvmtiEnv, *mut Jint, *mut *mut Jobject) -> JvmtiError;
        let (mut count, mut classes): (Jint, *mut Jobject) = (0, std::ptr::null_mut());
        // SAFETY: function 78 with out-pointers; the array is deallocated.
        unsafe {
            let err = jvmti_call!(self.0, 78, F, &mut count, &mut classes);
            self.take_array(err, classes, count)
        }
    }

    /// GetThreadListStackTraces (101): the stacks of `threads`, at most `max_frames` frames each,
    /// newest first, handed to `each` (thread index, frames) before JVMTI's memory is freed.
    pub fn stack_traces(
        self,
        threads: &[Jobject],
        max_frames: usize,
        mut each: impl FnMut(usize, &[FrameInfo]),
    ) -> JvmtiError {
        type F = unsafe extern "system" fn(
            JvmtiEnv,
            Jint,
            *const Jobject,
            Jint,
            *mut *mut StackInfo,
        ) -> JvmtiError;
        let mut infos: *mut StackInfo = std::ptr::null_mut();
        let count = Jint::try_from(threads.len()).unwrap_or(Jint::MAX);
        let max = Jint::try_from(max_frames).unwrap_or(Jint::MAX);
        // SAFETY: function 101; JVMTI allocates one block holding the infos and their frames.
        let err = unsafe { jvmti_call!(self.0, 101, F, count, threads.as_ptr(), max, &mut infos) };
        if err == JVMTI_ERROR_NONE && !infos.is_null() {
            for index in 0..threads.len() {
                // SAFETY: `count` infos, each with `frame_count` frames in the block.
                let info = unsafe { &*infos.add(index) };
                let frames = match usize::try_from(info.frame_count) {
                    Ok(n) if n > 0 && !info.frame_buffer.is_null() => unsafe {
                        std::slice::from_raw_parts(info.frame_buffer, n)
                    },
                    _ => &[],
                };
                each(index, frames);
            }
        }
        // SAFETY: allocated by this environment.
        unsafe { self.deallocate(infos.cast()) };
        err
    }

    /// GetThreadLocalStorage (102) of `thread` (null: the current thread).
    ///
    /// # Safety
    /// `thread` is null or a live thread reference.
    pub unsafe fn thread_local_storage(self, thread: Jobject) -> *mut c_void {
        type F = unsafe extern "system" fn(JvmtiEnv, Jobject, *mut *mut c_void) -> JvmtiError;
        let mut data = std::ptr::null_mut();
        // SAFETY: function 102 with an out-pointer.
        unsafe { jvmti_call!(self.0, 102, F, thread, &mut data) };
        data
    }

    /// SetThreadLocalStorage (103) of `thread` (null: the current thread).
    ///
    /// # Safety
    /// `thread` is null or a live thread reference.
    pub unsafe fn set_thread_local_storage(
        self,
        thread: Jobject,
        data: *const c_void,
    ) -> JvmtiError {
        type F = unsafe extern "system" fn(JvmtiEnv, Jobject, *const c_void) -> JvmtiError;
        // SAFETY: function 103; JVMTI keeps the pointer, never dereferences it.
        unsafe { jvmti_call!(self.0, 103, F, thread, data) }
    }

    /// GetSystemProperty (131).
    pub fn system_property(self, name: &std::ffi::CStr) -> Option<String> {
        type F = unsafe extern "system" fn(JvmtiEnv, *const c_char, *mut *mut c_char) -> JvmtiError;
        let mut value: *mut c_char = std::ptr::null_mut();
        // SAFETY: function 131 with a NUL-terminated name and an out-pointer.
        let err = unsafe { jvmti_call!(self.0, 131, F, name.as_ptr(), &mut value) };
        self.take_string(err, value)
    }

    /// GetCurrentThreadCpuTime (135), in ns.
    pub fn current_thread_cpu_time(self) -> Option<u64> {
        type F = unsafe extern "system" fn(JvmtiEnv, *mut Jlong) -> JvmtiError;
        let mut nanos = 0;
        // SAFETY: function 135 with an out-pointer.
        let err = unsafe { jvmti_call!(self.0, 135, F, &mut nanos) };
        (err == JVMTI_ERROR_NONE).then(|| u64::try_from(nanos).unwrap_or(0))
    }

    /// GetThreadCpuTime (137) of `thread`, in ns.
    ///
    /// # Safety
    /// `thread` is a live thread reference.
    pub unsafe fn thread_cpu_time(self, thread: Jobject) -> Option<u64> {
        type F = unsafe extern "system" fn(JvmtiEnv, Jobject, *mut Jlong) -> JvmtiError;
        let mut nanos = 0;
        // SAFETY: function 137 with a thread reference and an out-pointer.
        let err = unsafe { jvmti_call!(self.0, 137, F, thread, &mut nanos) };
        (err == JVMTI_ERROR_NONE).then(|| u64::try_from(nanos).unwrap_or(0))
    }

    /// Copies a JVMTI-allocated array of `count` elements and deallocates it.
    ///
    /// # Safety
    /// `array` is null or holds `count` elements allocated by this environment.
    unsafe fn take_array<T: Copy>(self, err: JvmtiError, array: *mut T, count: Jint) -> Vec<T> {
        let items = match usize::try_from(count) {
            Ok(n) if err == JVMTI_ERROR_NONE && !array.is_null() => {
                // SAFETY: `count` elements, as JVMTI returned them.
                unsafe { std::slice::from_raw_parts(array, n) }.to_vec()
            }
            _ => Vec::new(),
        };
        // SAFETY: allocated by this environment.
        unsafe { self.deallocate(array.cast()) };
        items
    }

    /// The binary name of the class declaring `method` (`java.lang.Thread`) and the method's
    /// name (each cut as [`joularcode_core::names`] cuts them), each `None` when the JVM does not
    /// give it (an unloaded class). The class reference
    /// made is a local one: in a thread of the agent, free it with a local frame.
    ///
    /// # Safety
    /// `method` is a method id the JVM gave.
    pub unsafe fn method_names(self, method: JmethodId) -> (Option<String>, Option<String>) {
        let class = self
            .declaring_class(method)
            .and_then(|class| self.class_signature(class))
            .map(|signature| class_name_from_signature(&signature));
        let name = self
            .method_name(method)
            .map(|name| method_name(&name).into_owned());
        (class, name)
    }

    /// SetEventNotificationMode (2) for all threads: enables `event`, or disables it.
    pub fn set_event(self, event: Jint, enabled: bool) -> JvmtiError {
        type F = unsafe extern "C" fn(JvmtiEnv, Jint, Jint, Jobject, ...) -> JvmtiError;
        let mode = if enabled { JVMTI_ENABLE } else { JVMTI_DISABLE };
        // SAFETY: function 2 of a live environment, called with its documented arguments.
        unsafe { jvmti_call!(self.0, 2, F, mode, event, std::ptr::null_mut()) }
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

    /// Sets `handlers` (event, handler) as the event callbacks and enables their events; VMInit's
    /// only when the agent is loaded at start (not `attach`ed: the JVM then runs already). False
    /// when the JVM refuses either.
    pub fn handle_events(self, handlers: &[(Jint, *const c_void)], attach: bool) -> bool {
        let mut callbacks = EventCallbacks {
            handlers: [std::ptr::null(); 21],
        };
        for &(event, handler) in handlers {
            callbacks.handlers[(event - EVENT_VM_INIT) as usize] = handler;
        }
        self.set_event_callbacks(&callbacks) == JVMTI_ERROR_NONE
            && handlers
                .iter()
                .filter(|&&(event, _)| !(attach && event == EVENT_VM_INIT))
                .all(|&(event, _)| self.set_event(event, true) == JVMTI_ERROR_NONE)
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

    /// Copies a JVMTI-allocated modified-UTF-8 string, decoded ([`mutf8::decode`]), and
    /// deallocates it.
    fn take_string(self, err: JvmtiError, raw: *mut c_char) -> Option<String> {
        if raw.is_null() {
            return None;
        }
        // SAFETY: JVMTI returned a NUL-terminated string that stays valid until deallocated.
        let text = mutf8::decode(unsafe { std::ffi::CStr::from_ptr(raw) }.to_bytes()).into_owned();
        // SAFETY: allocated by this environment.
        unsafe { self.deallocate(raw.cast()) };
        (err == JVMTI_ERROR_NONE).then_some(text)
    }
}

/// The JNI environment of the calling thread, if it is attached to the JVM.
///
/// # Safety
/// `vm` is the JavaVM of this process.
pub unsafe fn jni_env(vm: *mut JavaVm) -> Option<Jni> {
    let mut env: *mut c_void = std::ptr::null_mut();
    let rc = ((**vm).get_env)(vm, &mut env, JNI_VERSION_1_6);
    (rc == JNI_OK && !env.is_null()).then_some(Jni(env as JniEnv))
}

/// Attaches the calling thread to the JVM as a daemon thread named `name`; `None` when the JVM
/// refuses (it has not started yet, or is ending).
///
/// # Safety
/// `vm` is the process's JavaVM.
pub unsafe fn attach_current_thread(vm: *mut JavaVm, name: &std::ffi::CStr) -> Option<Jni> {
    let mut args = JavaVmAttachArgs {
        version: JNI_VERSION_1_6,
        name: name.as_ptr(),
        group: std::ptr::null_mut(),
    };
    let mut jni: *mut c_void = std::ptr::null_mut();
    let rc = ((**vm).attach_current_thread_as_daemon)(vm, &mut jni, &mut args);
    (rc == JNI_OK && !jni.is_null()).then_some(Jni(jni as JniEnv))
}

/// Why the JVM gave no JVMTI environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoJvmti {
    /// HotSpot gives JVMTI environments only while it starts (OnLoad) and runs (live phase): an
    /// agent attached while the JVM shuts down gets `JNI_EDETACHED`.
    #[error("the JVM is ending: it gives no JVMTI environment any more")]
    Ending,
    /// The JVM does not know JVMTI 1.2 (`JNI_EVERSION`), or failed otherwise.
    #[error("this JVM offers no JVMTI 1.2 environment (GetEnv returned {0})")]
    Refused(Jint),
}

/// Gets a JVMTI 1.2 environment from the JVM.
///
/// # Safety
/// `vm` must be the JavaVM given to Agent_OnLoad or Agent_OnAttach.
pub unsafe fn get_env(vm: *mut JavaVm) -> Result<Env, NoJvmti> {
    let mut env: *mut c_void = std::ptr::null_mut();
    match ((**vm).get_env)(vm, &mut env, JVMTI_VERSION_1_2) {
        JNI_OK if !env.is_null() => Ok(Env(env as JvmtiEnv)),
        JNI_EDETACHED => Err(NoJvmti::Ending),
        rc => Err(NoJvmti::Refused(rc)),
    }
}

//! What a stack walker needs to unwind one JVM's frames without frame pointers, read from its
//! VMStructs: where its code heaps, segment maps and interpreter are, the call stub's return
//! address, and where the fields it reads lie in a CodeBlob, an nmethod, a JavaThread and a
//! JavaCallWrapper (with their widths, which differ across JDKs). The BPF sampler gets it as its
//! map `jvms` (`sampler::jvm`). See docs/hotspot.md, "What the walker is given".

use super::codecache::{CodeCache, HeapLayout};
use super::memory::Memory;
use super::vmstructs::VmStructs;
use super::HotSpotError;

/// The most code heaps the walker handles (HotSpot has 1, or 3 with a segmented code cache).
pub const MAX_HEAPS: usize = 4;
/// The most bytes of a blob's header the walker reads at once.
pub const MAX_BLOB_READ: u64 = 512;

/// How to read one field: its offset, its width and whether it holds an offset from the object
/// rather than an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FieldLayout {
    /// Bytes from the start of the object.
    pub offset: u16,
    /// Bytes: 2, 4 or 8, read as a signed integer.
    pub size: u8,
    /// The value is an offset from the object's start (JDK 23+ code boundaries).
    pub relative: bool,
}

/// How the walker checks that r15 holds the current thread's JavaThread (a thread it was not
/// told of yet): the vtable of a plain JavaThread, and where a thread's stack and OS thread id
/// are. Offsets in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadLayout {
    /// The first word of a plain JavaThread (its vtable's address point).
    pub vtable: u64,
    /// `Thread::_stack_base`: the stack's high end.
    pub stack_base: u16,
    /// `Thread::_stack_size`.
    pub stack_size: u16,
    /// `Thread::_osthread`.
    pub osthread: u16,
    /// `OSThread::_thread_id` (4 bytes).
    pub osthread_tid: u16,
}

impl ThreadLayout {
    /// The layout from `vm`, with `vtable` (`None`: libjvm does not name it).
    fn read(vm: &VmStructs, vtable: Option<u64>) -> Result<Option<ThreadLayout>, HotSpotError> {
        let Some(vtable) = vtable else {
            return Ok(None);
        };
        let thread = |name| -> Result<u16, HotSpotError> {
            small(
                &format!("Thread::{name}"),
                vm.offset(&["JavaThread", "Thread"], name, 8)? as i64,
            )
        };
        Ok(Some(ThreadLayout {
            vtable,
            stack_base: thread("_stack_base")?,
            stack_size: thread("_stack_size")?,
            osthread: thread("_osthread")?,
            osthread_tid: small(
                "OSThread::_thread_id",
                vm.offset(&["OSThread"], "_thread_id", 4)? as i64,
            )?,
        }))
    }
}

/// What the walker needs of one JVM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnwindInfo {
    /// The code heaps, at most [`MAX_HEAPS`].
    pub heaps: Vec<HeapLayout>,
    /// The template interpreter's code, `[begin, end)`.
    pub interpreter: (u64, u64),
    /// `StubRoutines::_call_stub_return_address`: where the first Java frame of a call from the
    /// VM returns.
    pub call_stub_return: u64,
    /// `sizeof(HeapBlock)`: a blob starts this far after its block.
    pub heap_block: u16,
    /// `sizeof(nmethod)`: the `_header_size` of every nmethod, and of no other blob.
    pub nmethod_size: u16,
    /// Bytes of a blob read at once: every blob and nmethod field below lies within them.
    pub blob_read: u16,
    /// Where the call stub keeps its `JavaCallWrapper*`, in bytes from its frame pointer.
    pub call_wrapper: i16,
    /// `JavaCallWrapper::_anchor`.
    pub wrapper_anchor: u16,
    /// `JavaThread::_anchor` (a `JavaFrameAnchor`: last Java sp, pc, fp, one word each).
    pub thread_anchor: u16,
    /// `CodeBlob::_size`.
    pub blob_size: FieldLayout,
    /// `CodeBlob::_header_size`.
    pub header_size: FieldLayout,
    /// `CodeBlob::_frame_size`, in words.
    pub frame_size: FieldLayout,
    /// `CodeBlob::_frame_complete_offset`, from the code's start.
    pub frame_complete: FieldLayout,
    /// `CodeBlob::_code_begin` (JDK <= 22) or `_code_offset`.
    pub code_begin: FieldLayout,
    /// `nmethod::_compile_id`.
    pub compile_id: FieldLayout,
    /// `nmethod::_orig_pc_offset`: where a deoptimised frame keeps its pc, from its sp.
    pub orig_pc: FieldLayout,
    /// `CompiledMethod::_deopt_handler_begin` (JDK <= 22) or `nmethod::_deopt_handler_offset`.
    pub deopt_handler: FieldLayout,
    /// `CodeBlob::_name`.
    pub name: FieldLayout,
    /// How to find a thread's JavaThread in r15 (`None`: only the threads listed are known).
    pub thread: Option<ThreadLayout>,
}

/// The width of a field of C++ type `ty`, as VMStructs spells it.
fn width_of(ty: &str) -> Option<u8> {
    match ty {
        "int" | "int32_t" | "uint32_t" | "jint" | "u4" | "uint" => Some(4),
        "int16_t" | "uint16_t" | "u2" | "short" | "jshort" => Some(2),
        "address" | "intptr_t" | "uintptr_t" | "size_t" | "uint64_t" | "int64_t" => Some(8),
        _ if ty.ends_with('*') => Some(8),
        _ => None,
    }
}

/// The layout of the first of `fields` that `vm` has, each `(types, field, relative)`.
fn field(vm: &VmStructs, fields: &[(&[&str], &str, bool)]) -> Result<FieldLayout, HotSpotError> {
    let mut missing = Vec::new();
    for &(types, name, relative) in fields {
        let Some((ty, width)) = types.iter().find_map(|ty| {
            let width = width_of(vm.field_type(ty, name)?)?;
            Some((ty, width))
        }) else {
            missing.push(format!("{}::{name}", types.join("|")));
            continue;
        };
        let offset = vm.offset(&[ty], name, u64::from(width))?;
        let offset = u16::try_from(offset).map_err(|_| {
            HotSpotError::BadTable(format!("{ty}::{name} at offset {offset} is too far"))
        })?;
        return Ok(FieldLayout {
            offset,
            size: width,
            relative,
        });
    }
    Err(HotSpotError::MissingField {
        name: missing.join(" or "),
    })
}

/// A size or offset that must fit the walker's 16 bits.
fn small<T: TryFrom<i64>>(what: &str, value: i64) -> Result<T, HotSpotError> {
    T::try_from(value).map_err(|_| HotSpotError::BadTable(format!("{what} is {value}")))
}

impl UnwindInfo {
    /// Reads what the walker needs from `vm` and the JVM's memory, with the address point of
    /// libjvm's `vtable for JavaThread`; `NotReady` while the JVM has not generated its call
    /// stub yet.
    pub fn read(
        mem: &dyn Memory,
        vm: &VmStructs,
        code: &CodeCache,
        java_thread_vtable: Option<u64>,
    ) -> Result<UnwindInfo, HotSpotError> {
        let blob = &["CodeBlob"][..];
        let nmethod = &["nmethod", "CompiledMethod"][..];
        let info = UnwindInfo {
            heaps: read_heaps(mem, code)?,
            interpreter: code.interpreter(),
            call_stub_return: read_call_stub_return(mem, vm)?,
            heap_block: small("sizeof(HeapBlock)", vm.require_size("HeapBlock")? as i64)?,
            nmethod_size: small("sizeof(nmethod)", vm.require_size("nmethod")? as i64)?,
            blob_read: 0,
            call_wrapper: read_call_wrapper_slot(vm)?,
            wrapper_anchor: small(
                "JavaCallWrapper::_anchor",
                vm.offset(&["JavaCallWrapper"], "_anchor", 24)? as i64,
            )?,
            thread_anchor: small(
                "JavaThread::_anchor",
                vm.offset(&["JavaThread"], "_anchor", 24)? as i64,
            )?,
            blob_size: field(vm, &[(blob, "_size", false)])?,
            header_size: field(vm, &[(blob, "_header_size", false)])?,
            frame_size: field(vm, &[(blob, "_frame_size", false)])?,
            frame_complete: field(vm, &[(blob, "_frame_complete_offset", false)])?,
            code_begin: field(
                vm,
                &[(blob, "_code_begin", false), (blob, "_code_offset", true)],
            )?,
            compile_id: field(vm, &[(nmethod, "_compile_id", false)])?,
            orig_pc: field(vm, &[(nmethod, "_orig_pc_offset", false)])?,
            deopt_handler: field(
                vm,
                &[
                    (nmethod, "_deopt_handler_begin", false),
                    (nmethod, "_deopt_handler_offset", true),
                ],
            )?,
            name: field(vm, &[(blob, "_name", false)])?,
            thread: ThreadLayout::read(vm, java_thread_vtable)?,
        };
        check_anchor_layout(vm)?;
        let blob_read = info.fields().iter().map(|f| u64::from(f.offset) + 8).max();
        let blob_read = blob_read.unwrap_or(0).next_multiple_of(8);
        if blob_read > MAX_BLOB_READ {
            return Err(HotSpotError::BadTable(format!(
                "the nmethod fields the walker reads span {blob_read} bytes, more than {MAX_BLOB_READ}"
            )));
        }
        Ok(UnwindInfo {
            blob_read: blob_read as u16,
            ..info
        })
    }

    /// The blob and nmethod fields the walker reads.
    pub fn fields(&self) -> [FieldLayout; 9] {
        [
            self.blob_size,
            self.header_size,
            self.frame_size,
            self.frame_complete,
            self.code_begin,
            self.compile_id,
            self.orig_pc,
            self.deopt_handler,
            self.name,
        ]
    }
}

fn read_heaps(mem: &dyn Memory, code: &CodeCache) -> Result<Vec<HeapLayout>, HotSpotError> {
    let heaps = code
        .heap_layouts(mem)
        .ok_or_else(|| HotSpotError::NotReady("a code heap cannot be read yet".into()))?;
    if heaps.len() > MAX_HEAPS {
        return Err(HotSpotError::BadTable(format!(
            "{} code heaps, more than the {MAX_HEAPS} the walker handles",
            heaps.len()
        )));
    }
    Ok(heaps)
}

fn read_call_stub_return(mem: &dyn Memory, vm: &VmStructs) -> Result<u64, HotSpotError> {
    let var = vm.static_address("StubRoutines", "_call_stub_return_address")?;
    match mem.read_u64(var) {
        Some(0) => Err(HotSpotError::NotReady(
            "the call stub is not generated yet".into(),
        )),
        Some(address) => Ok(address),
        None => Err(HotSpotError::Unreadable {
            what: "StubRoutines::_call_stub_return_address",
            addr: var,
        }),
    }
}

/// `frame::entry_frame_call_wrapper_offset` (words from the call stub's fp), in bytes.
fn read_call_wrapper_slot(vm: &VmStructs) -> Result<i16, HotSpotError> {
    let name = "frame::entry_frame_call_wrapper_offset";
    let words = vm
        .constant(name)
        .ok_or_else(|| HotSpotError::MissingField {
            name: name.to_string(),
        })?;
    if !(-64..=64).contains(&words) {
        return Err(HotSpotError::BadTable(format!("{name} is {words}")));
    }
    Ok(words as i16 * 8)
}

/// Checks that the JVM's interpreter frames have the x86_64 layout the walker assumes (Method*
/// at fp - 3 words, sender sp at fp - 1 word), from the two slot offsets VMStructs publishes
/// (sender sp at fp - 1, last sp at fp - 2 words).
pub fn check_interpreter_layout(vm: &VmStructs) -> Result<(), HotSpotError> {
    for (name, expected) in [
        ("frame::interpreter_frame_sender_sp_offset", -1),
        ("frame::interpreter_frame_last_sp_offset", -2),
    ] {
        match vm.constant(name) {
            Some(value) if value == expected => {}
            found => {
                return Err(HotSpotError::BadTable(format!(
                    "{name} is {found:?}, not {expected}: not an x86_64 interpreter frame layout"
                )))
            }
        }
    }
    Ok(())
}

/// The walker reads a JavaFrameAnchor as three words: last Java sp, pc and fp.
fn check_anchor_layout(vm: &VmStructs) -> Result<(), HotSpotError> {
    for (field, expected) in [
        ("_last_Java_sp", 0),
        ("_last_Java_pc", 8),
        ("_last_Java_fp", 16),
    ] {
        let offset = vm.offset(&["JavaFrameAnchor"], field, 8)?;
        if offset != expected {
            return Err(HotSpotError::BadTable(format!(
                "JavaFrameAnchor::{field} is at {offset}, not {expected}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_come_from_the_type_names() {
        assert_eq!(width_of("int"), Some(4));
        assert_eq!(width_of("int16_t"), Some(2));
        assert_eq!(width_of("u2"), Some(2));
        assert_eq!(width_of("address"), Some(8));
        assert_eq!(width_of("const char*"), Some(8));
        assert_eq!(width_of("CompLevel"), None);
    }
}

//! The JVM's Java threads, from `ThreadsSMRSupport::_java_thread_list`, with each thread's OS
//! thread id and its stack: what the stack walker needs to find a thread's JavaThread (and its
//! `JavaFrameAnchor`, which it reads itself).

use super::memory::{array_at, word, Memory};
use super::vmstructs::VmStructs;
use super::HotSpotError;

/// The mangled name of `vtable for JavaThread` in libjvm's symbol tables: the class of every
/// thread that Java code starts.
pub const JAVA_THREAD_VTABLE_SYMBOL: &str = "_ZTV10JavaThread";

/// More Java threads than this reader accepts in one list.
const MAX_THREADS: u32 = 100_000;
/// The most bytes between the first and the last field of a JavaThread read (they lie within a
/// few words of each other in every HotSpot).
const MAX_FIELD_SPAN: u64 = 4096;

/// One Java thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JavaThread {
    /// The JavaThread* itself.
    pub address: u64,
    /// The OS thread id, when it can be read.
    pub tid: Option<u32>,
    /// Its stack, `[low, high)`, when it can be read.
    pub stack: Option<(u64, u64)>,
}

/// Offsets needed to list the Java threads.
#[derive(Debug)]
pub struct ThreadReader {
    list_var: u64,
    list_length: u64,
    list_threads: u64,
    os_thread: Option<(u64, u64)>,
    stack: Option<(u64, u64)>,
}

impl ThreadReader {
    /// Reads the offsets from `vm`.
    pub fn new(vm: &VmStructs) -> Result<ThreadReader, HotSpotError> {
        let os_thread = vm
            .offset(&["JavaThread", "Thread"], "_osthread", 8)
            .and_then(|o| Ok((o, vm.offset(&["OSThread"], "_thread_id", 4)?)))
            .ok();
        let stack = vm
            .offset(&["JavaThread", "Thread"], "_stack_base", 8)
            .and_then(|base| {
                Ok((
                    base,
                    vm.offset(&["JavaThread", "Thread"], "_stack_size", 8)?,
                ))
            })
            .ok();
        Ok(ThreadReader {
            list_var: vm.static_address("ThreadsSMRSupport", "_java_thread_list")?,
            list_length: vm.offset(&["ThreadsList"], "_length", 4)?,
            list_threads: vm.offset(&["ThreadsList"], "_threads", 8)?,
            os_thread,
            stack,
        })
    }

    /// The Java threads alive now. Empty if the list cannot be read (the JVM may be replacing it).
    /// Two reads of the target per thread: its fields at once, then its OS thread's id.
    pub fn threads(&self, mem: &dyn Memory) -> Vec<JavaThread> {
        self.thread_pointers(mem)
            .unwrap_or_default()
            .into_iter()
            .map(|thread| {
                let fields = self.fields(mem, thread);
                let fields = fields.as_ref().map(|(low, bytes)| (*low, bytes.as_slice()));
                JavaThread {
                    address: thread,
                    tid: fields.and_then(|fields| self.tid(mem, fields)),
                    stack: fields.and_then(|fields| self.stack(fields)),
                }
            })
            .collect()
    }

    /// The bytes of `thread` that hold the fields read (`_osthread`, `_stack_base`,
    /// `_stack_size`), read at once, and the offset they start at.
    fn fields(&self, mem: &dyn Memory, thread: u64) -> Option<(u64, Vec<u8>)> {
        let offsets: Vec<u64> = self
            .os_thread
            .map(|(os_thread, _)| os_thread)
            .into_iter()
            .chain(self.stack.into_iter().flat_map(|(base, size)| [base, size]))
            .collect();
        let low = *offsets.iter().min()?;
        let high = offsets.iter().max()?.checked_add(8)?;
        if high - low > MAX_FIELD_SPAN {
            return None;
        }
        let bytes = mem.read_bytes(thread.checked_add(low)?, (high - low) as usize)?;
        Some((low, bytes))
    }

    fn thread_pointers(&self, mem: &dyn Memory) -> Option<Vec<u64>> {
        let list = mem.read_u64(self.list_var).filter(|&l| l != 0)?;
        let length = mem
            .read_u32(list.checked_add(self.list_length)?)
            .filter(|&n| n <= MAX_THREADS)?;
        let array = mem.read_u64(list.checked_add(self.list_threads)?)?;
        let bytes = mem.read_bytes(array, 8 * length as usize)?;
        Some(
            bytes
                .chunks_exact(8)
                .filter_map(|c| word(c, 0))
                .filter(|&t| t != 0)
                .collect(),
        )
    }

    /// `[_stack_base - _stack_size, _stack_base)`, if plausible, from the thread's `fields`.
    fn stack(&self, (low, fields): (u64, &[u8])) -> Option<(u64, u64)> {
        let (base, size) = self.stack?;
        let high = word(fields, base - low)?;
        let size = word(fields, size - low)?;
        let low = high.checked_sub(size)?;
        (size > 0 && low > 0).then_some((low, high))
    }

    /// The OS thread id of the thread of `fields`.
    fn tid(&self, mem: &dyn Memory, (low, fields): (u64, &[u8])) -> Option<u32> {
        let (os_thread, thread_id) = self.os_thread?;
        let os = word(fields, os_thread - low).filter(|&p| p != 0)?;
        let bytes = mem.read_bytes(os.checked_add(thread_id)?, 4)?;
        let tid = i32::from_ne_bytes(array_at(&bytes, 0)?);
        u32::try_from(tid).ok().filter(|&t| t != 0)
    }
}

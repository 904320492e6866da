//! The JVM's Java threads, from `ThreadsSMRSupport::_java_thread_list`, with each thread's OS
//! thread id, its stack, and its `JavaFrameAnchor`: where its Java stack resumes while it runs
//! VM or native code (blocked, sleeping, in a JNI call).

use super::memory::{array_at, word, ProcessMemory};
use super::vmstructs::VmStructs;
use super::HotSpotError;

/// More Java threads than this reader accepts in one list.
const MAX_THREADS: u32 = 100_000;

/// A thread's last Java frame, as the JVM saved it when the thread left Java code. All zero while
/// the thread runs Java code.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameAnchor {
    /// The last Java frame's stack pointer (0: no saved frame).
    pub sp: u64,
    /// A pc in the last Java frame (0: the return address just below `sp` is).
    pub pc: u64,
    /// The last Java frame's frame pointer (set by interpreted frames and native wrappers).
    pub fp: u64,
}

/// One Java thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JavaThread {
    /// The JavaThread* itself.
    pub address: u64,
    /// The OS thread id, when it can be read.
    pub tid: Option<u32>,
    /// Its last Java frame.
    pub anchor: FrameAnchor,
    /// Its stack, `[low, high)`, when it can be read.
    pub stack: Option<(u64, u64)>,
}

/// Offsets needed to list the Java threads.
#[derive(Debug)]
pub struct ThreadReader {
    list_var: u64,
    list_length: u64,
    list_threads: u64,
    anchor: u64,
    anchor_sp: u64,
    anchor_pc: u64,
    anchor_fp: u64,
    anchor_size: u64,
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
            anchor: vm.offset(&["JavaThread"], "_anchor", 8)?,
            anchor_sp: vm.offset(&["JavaFrameAnchor"], "_last_Java_sp", 8)?,
            anchor_pc: vm.offset(&["JavaFrameAnchor"], "_last_Java_pc", 8)?,
            anchor_fp: vm.offset(&["JavaFrameAnchor"], "_last_Java_fp", 8)?,
            anchor_size: vm.require_size("JavaFrameAnchor")?,
            os_thread,
            stack,
        })
    }

    /// The Java threads alive now. Empty if the list cannot be read (the JVM may be replacing it).
    pub fn threads(&self, mem: &ProcessMemory) -> Vec<JavaThread> {
        self.thread_pointers(mem)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|thread| {
                Some(JavaThread {
                    address: thread,
                    tid: self.tid(mem, thread),
                    anchor: self.anchor(mem, thread)?,
                    stack: self.stack(mem, thread),
                })
            })
            .collect()
    }

    fn thread_pointers(&self, mem: &ProcessMemory) -> Option<Vec<u64>> {
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

    fn anchor(&self, mem: &ProcessMemory, thread: u64) -> Option<FrameAnchor> {
        let bytes = mem.read_bytes(thread.checked_add(self.anchor)?, self.anchor_size as usize)?;
        Some(FrameAnchor {
            sp: word(&bytes, self.anchor_sp)?,
            pc: word(&bytes, self.anchor_pc)?,
            fp: word(&bytes, self.anchor_fp)?,
        })
    }

    /// `[_stack_base - _stack_size, _stack_base)`, if plausible.
    fn stack(&self, mem: &ProcessMemory, thread: u64) -> Option<(u64, u64)> {
        let (base, size) = self.stack?;
        let high = mem.read_u64(thread.checked_add(base)?)?;
        let size = mem.read_u64(thread.checked_add(size)?)?;
        let low = high.checked_sub(size)?;
        (size > 0 && low > 0).then_some((low, high))
    }

    fn tid(&self, mem: &ProcessMemory, thread: u64) -> Option<u32> {
        let (os_thread, thread_id) = self.os_thread?;
        let os = mem
            .read_u64(thread.checked_add(os_thread)?)
            .filter(|&p| p != 0)?;
        let bytes = mem.read_bytes(os.checked_add(thread_id)?, 4)?;
        let tid = i32::from_ne_bytes(array_at(&bytes, 0)?);
        u32::try_from(tid).ok().filter(|&t| t != 0)
    }
}

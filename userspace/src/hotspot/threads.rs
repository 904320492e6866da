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
    /// Two reads of the target per thread (its fields at once, then its OS thread's id), made
    /// together for all threads: a few system calls for a thousand threads.
    pub fn threads(&self, mem: &dyn Memory) -> Vec<JavaThread> {
        self.threads_at(mem, self.thread_pointers(mem).unwrap_or_default())
    }

    /// [`ThreadReader::threads`], unless the list holds the very JavaThreads whose addresses are
    /// `known`, in any order: `None` then, after reading only the list. A JavaThread keeps its
    /// OS thread and its stack for its life, and HotSpot makes a new list whenever a thread is
    /// added or removed.
    pub fn threads_if_changed(&self, mem: &dyn Memory, known: &[u64]) -> Option<Vec<JavaThread>> {
        let pointers = self.thread_pointers(mem).unwrap_or_default();
        let mut listed = pointers.clone();
        listed.sort_unstable();
        let mut known = known.to_vec();
        known.sort_unstable();
        if listed == known {
            return None;
        }
        Some(self.threads_at(mem, pointers))
    }

    /// The Java threads whose JavaThread* are `pointers`.
    fn threads_at(&self, mem: &dyn Memory, pointers: Vec<u64>) -> Vec<JavaThread> {
        let Some((low, len)) = self.field_span() else {
            return pointers
                .into_iter()
                .map(|address| JavaThread {
                    address,
                    tid: None,
                    stack: None,
                })
                .collect();
        };
        let fields = mem.read_all(
            &pointers
                .iter()
                .map(|&thread| (thread.checked_add(low).unwrap_or(0), len))
                .collect::<Vec<_>>(),
        );
        let tids = mem.read_all(
            &fields
                .iter()
                .map(|bytes| {
                    let at = bytes
                        .as_deref()
                        .and_then(|bytes| self.tid_address((low, bytes)));
                    (at.unwrap_or(0), 4)
                })
                .collect::<Vec<_>>(),
        );
        pointers
            .into_iter()
            .zip(fields)
            .zip(tids)
            .map(|((address, fields), tid)| JavaThread {
                address,
                tid: tid
                    .and_then(|bytes| array_at(&bytes, 0))
                    .and_then(|tid| u32::try_from(i32::from_ne_bytes(tid)).ok())
                    .filter(|&tid| tid != 0),
                stack: fields.and_then(|bytes| self.stack((low, &bytes))),
            })
            .collect()
    }

    /// Where the fields read (`_osthread`, `_stack_base`, `_stack_size`) lie in a JavaThread:
    /// the offset of the first and the length up to the end of the last.
    fn field_span(&self) -> Option<(u64, usize)> {
        let offsets: Vec<u64> = self
            .os_thread
            .map(|(os_thread, _)| os_thread)
            .into_iter()
            .chain(self.stack.into_iter().flat_map(|(base, size)| [base, size]))
            .collect();
        let low = *offsets.iter().min()?;
        let high = offsets.iter().max()?.checked_add(8)?;
        (high - low <= MAX_FIELD_SPAN).then_some((low, (high - low) as usize))
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

    /// Where the OS thread id of the thread of `fields` is.
    fn tid_address(&self, (low, fields): (u64, &[u8])) -> Option<u64> {
        let (os_thread, thread_id) = self.os_thread?;
        let os = word(fields, os_thread - low).filter(|&p| p != 0)?;
        os.checked_add(thread_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hotspot::fake::FakeJvm;
    use crate::hotspot::memory::Counted;

    #[test]
    fn lists_each_java_threads_id_and_stack() {
        let mut jvm = FakeJvm::default();
        let threads: Vec<JavaThread> = [
            (Some(101), (0x7f00_0010_0000, 0x10_0000)),
            (None, (0x7f00_0020_0000, 0x8_0000)),
            (Some(0), (0x7f00_0030_0000, 0)),
            (Some(104), (0x7f00_0040_0000, 0x4_0000)),
        ]
        .into_iter()
        .map(|(tid, stack)| JavaThread {
            address: jvm.java_thread(tid, stack),
            tid: tid.filter(|&tid| tid != 0),
            stack: (stack.1 > 0).then_some((stack.0 - stack.1, stack.0)),
        })
        .collect();
        let hotspot = jvm.open(1);
        assert_eq!(hotspot.java_threads(), threads);
    }

    /// A listing whose threads are still the list's costs the reads of the list only; another
    /// (a thread more, one less, another in its place) reads the threads again.
    #[test]
    fn the_threads_are_read_again_only_when_the_list_changed() {
        let mut jvm = FakeJvm::default();
        for (tid, high) in [
            (101, 0x7f00_0010_0000),
            (102, 0x7f00_0020_0000),
            (103, 0x7f00_0030_0000),
        ] {
            jvm.java_thread(Some(tid), (high, 0x1_0000));
        }
        let (mem, libjvm) = jvm.into_parts();
        let vm = VmStructs::read(&mem, &libjvm).expect("tables");
        let reader = ThreadReader::new(&vm).expect("offsets");
        let mem = Counted::new(mem);
        let threads = reader.threads(&mem);
        let listed: Vec<u64> = threads.iter().rev().map(|thread| thread.address).collect();
        assert_eq!(listed.len(), 3);
        mem.calls();
        reader.thread_pointers(&mem).expect("the list");
        let list_reads = mem.calls();

        assert_eq!(reader.threads_if_changed(&mem, &listed), None);
        assert_eq!(mem.calls(), list_reads);
        let other = listed[0] + 0x100;
        for changed in [
            listed[..2].to_vec(),
            [listed.as_slice(), &[other]].concat(),
            vec![other, listed[1], listed[2]],
            Vec::new(),
        ] {
            assert_eq!(
                reader.threads_if_changed(&mem, &changed),
                Some(threads.clone())
            );
        }
    }
}

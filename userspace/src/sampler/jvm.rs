//! What the walker is told about a JVM: its [`UnwindInfo`] (map `jvms`, `struct jp_jvm`) and its
//! Java threads with their JavaThread and stack (map `java_threads`, `struct jp_java_thread`),
//! kept up to date as threads start and end ([`WalkedJvm`]).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use libbpf_rs::{MapCore, MapFlags};

use bytemuck::Zeroable;

use super::wire::{CodeHeapRecord, FieldRecord, JavaThreadRecord, JvmRecord};
use super::{Sample, Sampler, SamplerError};
use crate::hotspot::unwind::{FieldLayout, UnwindInfo, MAX_HEAPS};
use crate::hotspot::{HotSpot, HotSpotError, JavaThread};

/// The Java threads are listed again at most this often when samples show new ones...
const REFRESH_SOON: Duration = Duration::from_millis(200);
/// ...and checked this often anyway, to forget ended threads and catch reused thread ids: the
/// list alone is read, and the threads' fields only when it changed.
const REFRESH_ANYWAY: Duration = Duration::from_secs(5);

/// A JVM with no code heap, or more than the walker takes ([`MAX_HEAPS`]).
#[derive(Debug, thiserror::Error)]
#[error("{0} code heaps")]
struct HeapCount(usize);

/// `struct jp_jvm` for `info`.
fn jvm_record(info: &UnwindInfo) -> Result<JvmRecord, HeapCount> {
    if info.heaps.is_empty() || info.heaps.len() > MAX_HEAPS {
        return Err(HeapCount(info.heaps.len()));
    }
    let mut heaps = [CodeHeapRecord::zeroed(); MAX_HEAPS];
    for (record, heap) in heaps.iter_mut().zip(&info.heaps) {
        *record = CodeHeapRecord {
            low: heap.low,
            high: heap.high,
            segmap: heap.segmap,
            log2_segment: u64::from(heap.log2_segment),
        };
    }
    Ok(JvmRecord {
        heaps,
        interpreter_begin: info.interpreter.0,
        interpreter_end: info.interpreter.1,
        call_stub_return: info.call_stub_return,
        code_low: info.heaps.iter().map(|heap| heap.low).min().unwrap_or(0),
        code_high: info.heaps.iter().map(|heap| heap.high).max().unwrap_or(0),
        nheaps: info.heaps.len() as u32,
        heap_block: info.heap_block,
        nmethod_size: info.nmethod_size,
        blob_read: info.blob_read,
        call_wrapper: info.call_wrapper,
        wrapper_anchor: info.wrapper_anchor,
        thread_anchor: info.thread_anchor,
        blob_size: field_record(&info.blob_size),
        header_size: field_record(&info.header_size),
        frame_size: field_record(&info.frame_size),
        frame_complete: field_record(&info.frame_complete),
        code_begin: field_record(&info.code_begin),
        compile_id: field_record(&info.compile_id),
        orig_pc: field_record(&info.orig_pc),
        deopt_handler: field_record(&info.deopt_handler),
        name: field_record(&info.name),
        thread_stack_base: info.thread.map_or(0, |t| t.stack_base),
        thread_stack_size: info.thread.map_or(0, |t| t.stack_size),
        thread_osthread: info.thread.map_or(0, |t| t.osthread),
        osthread_tid: info.thread.map_or(0, |t| t.osthread_tid),
        pad: 0,
        java_thread_vtable: info.thread.map_or(0, |t| t.vtable),
    })
}

/// `struct jp_field`.
fn field_record(field: &FieldLayout) -> FieldRecord {
    FieldRecord {
        offset: field.offset,
        size: field.size,
        relative: u8::from(field.relative),
    }
}

/// `struct jp_java_thread`.
fn java_thread_record(pid: u32, thread: u64, stack: (u64, u64)) -> JavaThreadRecord {
    JavaThreadRecord {
        pid,
        pad: 0,
        thread,
        stack_low: stack.0,
        stack_high: stack.1,
    }
}

/// A JVM the walker knows, and the Java threads it was told of.
#[derive(Debug)]
pub struct WalkedJvm {
    pid: u32,
    /// The threads in the map `java_threads`, with what they were told.
    threads: HashMap<u32, JavaThreadRecord>,
    /// Threads of the JVM that were not Java threads at the last listing (GC, compiler...).
    others: HashSet<u32>,
    /// Threads sampled since the last listing that are in neither set.
    unknown: HashSet<u32>,
    listed_at: Instant,
}

impl WalkedJvm {
    /// Tells the walker how to unwind the JVM that `hotspot` reads, and of its Java threads.
    pub fn register(sampler: &Sampler, hotspot: &HotSpot) -> Result<WalkedJvm, SamplerError> {
        WalkedJvm::register_with(sampler, hotspot, hotspot.unwind_info())
    }

    /// [`WalkedJvm::register`] with the walker's information (`info`) read before, with the
    /// JVM: a JVM that ends meanwhile, whose memory can no longer be read, is registered all the
    /// same.
    pub fn register_with(
        sampler: &Sampler,
        hotspot: &HotSpot,
        info: Result<UnwindInfo, HotSpotError>,
    ) -> Result<WalkedJvm, SamplerError> {
        let pid = hotspot.pid();
        let unsupported =
            |e: String| SamplerError::Process(format!("cannot walk the stacks of JVM {pid}: {e}"));
        let info = info.map_err(|e| unsupported(e.to_string()))?;
        let record = jvm_record(&info).map_err(|e| unsupported(e.to_string()))?;
        sampler
            .skel
            .maps
            .jvms
            .update(
                &pid.to_ne_bytes(),
                bytemuck::bytes_of(&record),
                MapFlags::ANY,
            )
            .map_err(|e| unsupported(format!("map jvms: {e}")))?;
        let mut jvm = WalkedJvm {
            pid,
            threads: HashMap::new(),
            others: HashSet::new(),
            unknown: HashSet::new(),
            listed_at: Instant::now(),
        };
        jvm.list_threads(sampler, hotspot.java_threads());
        Ok(jvm)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Notes a sample of this JVM: a thread the walker did not know as a Java thread, and that
    /// was not listed, may be a new one.
    pub fn saw(&mut self, sample: &Sample) {
        if sample.jvm && !sample.java_thread && !self.others.contains(&sample.tid) {
            self.unknown.insert(sample.tid);
        }
    }

    /// Lists the Java threads again when samples showed unknown threads (at most every 200 ms),
    /// or every 5 s if the list holds other JavaThreads than those the walker was told of (a
    /// thread started or ended, or one the last listing could not tell): new threads are told to
    /// the walker, ended ones forgotten.
    pub fn refresh(&mut self, sampler: &Sampler, hotspot: &HotSpot) {
        let since = self.listed_at.elapsed();
        if !self.unknown.is_empty() && since >= REFRESH_SOON {
            self.list_threads(sampler, hotspot.java_threads());
        } else if since >= REFRESH_ANYWAY {
            let told: Vec<u64> = self.threads.values().map(|told| told.thread).collect();
            match hotspot.java_threads_if_changed(&told) {
                Some(threads) => self.list_threads(sampler, threads),
                None => self.listed_at = Instant::now(),
            }
        }
    }

    /// Tells the walker of the Java threads in `threads` (a listing) that are new or changed
    /// since the last listing (a thread already told of costs no system call), and forgets those
    /// gone. An entry the BPF side deleted meanwhile (its thread exited) whose tid a new thread
    /// took with the very same JavaThread and stack is not told again: the sampler finds that
    /// thread in r15.
    fn list_threads(&mut self, sampler: &Sampler, threads: Vec<JavaThread>) {
        let map = &sampler.skel.maps.java_threads;
        let mut now = HashMap::new();
        for thread in threads {
            let (Some(tid), Some(stack)) = (thread.tid, thread.stack) else {
                continue;
            };
            let value = java_thread_record(self.pid, thread.address, stack);
            let told = self.threads.get(&tid) == Some(&value)
                || map
                    .update(
                        &tid.to_ne_bytes(),
                        bytemuck::bytes_of(&value),
                        MapFlags::ANY,
                    )
                    .is_ok();
            if told {
                now.insert(tid, value);
            }
        }
        for gone in self.threads.keys().filter(|tid| !now.contains_key(tid)) {
            // A missing key is no error: the entry may have been replaced.
            let _ = map.delete(&gone.to_ne_bytes());
        }
        self.others
            .extend(self.unknown.iter().filter(|tid| !now.contains_key(tid)));
        self.others.retain(|tid| !now.contains_key(tid));
        self.unknown.clear();
        self.threads = now;
        self.listed_at = Instant::now();
    }

    /// Makes the walker forget this JVM (it has ended, or is no longer sampled).
    pub fn forget(self, sampler: &Sampler) {
        let _ = sampler.skel.maps.jvms.delete(&self.pid.to_ne_bytes());
        for tid in self.threads.keys() {
            let _ = sampler.skel.maps.java_threads.delete(&tid.to_ne_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hotspot::codecache::HeapLayout;
    use crate::hotspot::unwind::ThreadLayout;

    fn field(offset: u16, size: u8, relative: bool) -> FieldLayout {
        FieldLayout {
            offset,
            size,
            relative,
        }
    }

    fn info(heaps: usize) -> UnwindInfo {
        UnwindInfo {
            heaps: (0..heaps as u64)
                .map(|i| HeapLayout {
                    low: 0x1000 * (i + 1),
                    high: 0x1000 * (i + 2),
                    segmap: 0x9000 + i,
                    log2_segment: 7,
                })
                .collect(),
            interpreter: (0x1100, 0x1200),
            call_stub_return: 0x1300,
            heap_block: 16,
            nmethod_size: 352,
            blob_read: 312,
            call_wrapper: -48,
            wrapper_anchor: 32,
            thread_anchor: 656,
            blob_size: field(12, 4, false),
            header_size: field(16, 4, false),
            frame_size: field(28, 4, false),
            frame_complete: field(20, 4, false),
            code_begin: field(36, 4, true),
            compile_id: field(304, 4, false),
            orig_pc: field(300, 4, false),
            deopt_handler: field(128, 8, false),
            name: field(96, 8, false),
            thread: Some(ThreadLayout {
                vtable: 0x7f00_1000,
                stack_base: 520,
                stack_size: 528,
                osthread: 560,
                osthread_tid: 108,
            }),
        }
    }

    #[test]
    fn the_jvm_record_holds_the_heaps_and_fields() {
        let record = jvm_record(&info(3)).expect("3 heaps");
        let heap = record.heaps[0];
        assert_eq!(
            (heap.low, heap.high, heap.segmap, heap.log2_segment),
            (0x1000, 0x2000, 0x9000, 7)
        );
        assert_eq!(record.heaps[2].low, 0x3000);
        assert_eq!(record.heaps[3].low, 0);
        assert_eq!(
            (
                record.interpreter_begin,
                record.interpreter_end,
                record.call_stub_return
            ),
            (0x1100, 0x1200, 0x1300)
        );
        // The code cache spans the three heaps.
        assert_eq!((record.code_low, record.code_high), (0x1000, 0x4000));
        assert_eq!(record.nheaps, 3);
        assert_eq!((record.call_wrapper, record.thread_anchor), (-48, 656));
        let code_begin = record.code_begin;
        assert_eq!(
            (code_begin.offset, code_begin.size, code_begin.relative),
            (36, 4, 1)
        );
        assert_eq!(record.deopt_handler.offset, 128);
        assert_eq!(record.name.offset, 96);
        assert_eq!(
            (
                record.java_thread_vtable,
                record.thread_stack_base,
                record.thread_stack_size,
                record.thread_osthread,
                record.osthread_tid
            ),
            (0x7f00_1000, 520, 528, 560, 108)
        );
        let unchecked = jvm_record(&UnwindInfo {
            thread: None,
            ..info(1)
        })
        .expect("1 heap");
        assert_eq!(unchecked.java_thread_vtable, 0);
        assert!(jvm_record(&info(0)).is_err());
        assert!(jvm_record(&info(5)).is_err());
    }
}

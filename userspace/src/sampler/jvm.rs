//! What the walker is told about a JVM: its [`UnwindInfo`] (map `jvms`, `struct jp_jvm`) and its
//! Java threads with their JavaThread and stack (map `java_threads`, `struct jp_java_thread`),
//! kept up to date as threads start and end ([`WalkedJvm`]).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use libbpf_rs::{MapCore, MapFlags};

use super::{Sample, Sampler, SamplerError};
use crate::hotspot::unwind::{FieldLayout, UnwindInfo, MAX_HEAPS};
use crate::hotspot::HotSpot;

/// Bytes of `struct jp_jvm`.
const JVM_LEN: usize = 224;
/// Bytes of `struct jp_java_thread`.
const JAVA_THREAD_LEN: usize = 32;
/// The Java threads are listed again at most this often when samples show new ones...
const REFRESH_SOON: Duration = Duration::from_millis(200);
/// ...and this often anyway, to forget ended threads and catch reused thread ids.
const REFRESH_ANYWAY: Duration = Duration::from_secs(5);

/// `struct jp_jvm` for `info`.
fn jvm_bytes(info: &UnwindInfo) -> Result<[u8; JVM_LEN], String> {
    if info.heaps.is_empty() || info.heaps.len() > MAX_HEAPS {
        return Err(format!("{} code heaps", info.heaps.len()));
    }
    let mut bytes = [0u8; JVM_LEN];
    let mut put = |at: usize, value: &[u8]| bytes[at..at + value.len()].copy_from_slice(value);
    for (i, heap) in info.heaps.iter().enumerate() {
        let at = i * 32;
        put(at, &heap.low.to_ne_bytes());
        put(at + 8, &heap.high.to_ne_bytes());
        put(at + 16, &heap.segmap.to_ne_bytes());
        put(at + 24, &u64::from(heap.log2_segment).to_ne_bytes());
    }
    put(128, &info.interpreter.0.to_ne_bytes());
    put(136, &info.interpreter.1.to_ne_bytes());
    put(144, &info.call_stub_return.to_ne_bytes());
    let low = info.heaps.iter().map(|heap| heap.low).min().unwrap_or(0);
    let high = info.heaps.iter().map(|heap| heap.high).max().unwrap_or(0);
    put(152, &low.to_ne_bytes());
    put(160, &high.to_ne_bytes());
    put(168, &(info.heaps.len() as u32).to_ne_bytes());
    put(172, &info.heap_block.to_ne_bytes());
    put(174, &info.nmethod_size.to_ne_bytes());
    put(176, &info.blob_read.to_ne_bytes());
    put(178, &info.call_wrapper.to_ne_bytes());
    put(180, &info.wrapper_anchor.to_ne_bytes());
    put(182, &info.thread_anchor.to_ne_bytes());
    for (i, field) in info.fields().iter().enumerate() {
        put(184 + 4 * i, &field_bytes(field));
    }
    Ok(bytes)
}

/// `struct jp_field`.
fn field_bytes(field: &FieldLayout) -> [u8; 4] {
    let offset = field.offset.to_ne_bytes();
    [offset[0], offset[1], field.size, u8::from(field.relative)]
}

/// `struct jp_java_thread`.
fn java_thread_bytes(pid: u32, thread: u64, stack: (u64, u64)) -> [u8; JAVA_THREAD_LEN] {
    let mut bytes = [0u8; JAVA_THREAD_LEN];
    bytes[0..4].copy_from_slice(&pid.to_ne_bytes());
    bytes[8..16].copy_from_slice(&thread.to_ne_bytes());
    bytes[16..24].copy_from_slice(&stack.0.to_ne_bytes());
    bytes[24..32].copy_from_slice(&stack.1.to_ne_bytes());
    bytes
}

/// A JVM the walker knows, and the Java threads it was told of.
#[derive(Debug)]
pub struct WalkedJvm {
    pid: u32,
    /// The threads in the map `java_threads`.
    threads: HashSet<u32>,
    /// Threads of the JVM that were not Java threads at the last listing (GC, compiler...).
    others: HashSet<u32>,
    /// Threads sampled since the last listing that are in neither set.
    unknown: HashSet<u32>,
    listed_at: Instant,
}

impl WalkedJvm {
    /// Tells the walker how to unwind the JVM that `hotspot` reads, and of its Java threads.
    pub fn register(sampler: &Sampler, hotspot: &HotSpot) -> Result<WalkedJvm, SamplerError> {
        let pid = hotspot.pid();
        let unsupported =
            |e: String| SamplerError::Process(format!("cannot walk the stacks of JVM {pid}: {e}"));
        let info = hotspot
            .unwind_info()
            .map_err(|e| unsupported(e.to_string()))?;
        let bytes = jvm_bytes(&info).map_err(unsupported)?;
        sampler
            .skel
            .maps
            .jvms
            .update(&pid.to_ne_bytes(), &bytes, MapFlags::ANY)
            .map_err(|e| unsupported(format!("map jvms: {e}")))?;
        let mut jvm = WalkedJvm {
            pid,
            threads: HashSet::new(),
            others: HashSet::new(),
            unknown: HashSet::new(),
            listed_at: Instant::now(),
        };
        jvm.list_threads(sampler, hotspot);
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
    /// or every 5 s: new threads are told to the walker, ended ones forgotten.
    pub fn refresh(&mut self, sampler: &Sampler, hotspot: &HotSpot) {
        let since = self.listed_at.elapsed();
        if (!self.unknown.is_empty() && since >= REFRESH_SOON) || since >= REFRESH_ANYWAY {
            self.list_threads(sampler, hotspot);
        }
    }

    fn list_threads(&mut self, sampler: &Sampler, hotspot: &HotSpot) {
        let map = &sampler.skel.maps.java_threads;
        let mut now = HashSet::new();
        for thread in hotspot.java_threads() {
            let (Some(tid), Some(stack)) = (thread.tid, thread.stack) else {
                continue;
            };
            let value = java_thread_bytes(self.pid, thread.address, stack);
            if map
                .update(&tid.to_ne_bytes(), &value, MapFlags::ANY)
                .is_ok()
            {
                now.insert(tid);
            }
        }
        for gone in self.threads.difference(&now) {
            // A missing key is no error: the entry may have been replaced.
            let _ = map.delete(&gone.to_ne_bytes());
        }
        self.others.extend(self.unknown.difference(&now).copied());
        self.others.retain(|tid| !now.contains(tid));
        self.unknown.clear();
        self.threads = now;
        self.listed_at = Instant::now();
    }

    /// Makes the walker forget this JVM (it has ended, or is no longer sampled).
    pub fn forget(self, sampler: &Sampler) {
        let _ = sampler.skel.maps.jvms.delete(&self.pid.to_ne_bytes());
        for tid in &self.threads {
            let _ = sampler.skel.maps.java_threads.delete(&tid.to_ne_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hotspot::codecache::HeapLayout;

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
        }
    }

    #[test]
    fn the_jvm_record_has_the_c_layout() {
        let bytes = jvm_bytes(&info(3)).expect("3 heaps");
        let u64_at = |at: usize| u64::from_ne_bytes(bytes[at..at + 8].try_into().unwrap());
        assert_eq!(
            (u64_at(0), u64_at(8), u64_at(16), u64_at(24)),
            (0x1000, 0x2000, 0x9000, 7)
        );
        assert_eq!(u64_at(64), 0x3000);
        assert_eq!(
            (u64_at(128), u64_at(136), u64_at(144)),
            (0x1100, 0x1200, 0x1300)
        );
        // The code cache spans the three heaps.
        assert_eq!((u64_at(152), u64_at(160)), (0x1000, 0x4000));
        assert_eq!(&bytes[168..172], &3u32.to_ne_bytes());
        assert_eq!(&bytes[178..180], &(-48i16).to_ne_bytes());
        assert_eq!(&bytes[182..184], &656u16.to_ne_bytes());
        // code_begin: offset 36, 4 bytes, relative; deopt_handler: offset 128, 8 bytes.
        assert_eq!(&bytes[200..204], &[36, 0, 4, 1]);
        assert_eq!(&bytes[212..216], &[128, 0, 8, 0]);
        assert_eq!(&bytes[216..220], &[96, 0, 8, 0]);
        assert!(jvm_bytes(&info(0)).is_err());
        assert!(jvm_bytes(&info(5)).is_err());
    }

    #[test]
    fn the_java_thread_record_has_the_c_layout() {
        let bytes = java_thread_bytes(7, 0xabc, (0x1000, 0x9000));
        assert_eq!(&bytes[0..4], &7u32.to_ne_bytes());
        assert_eq!(&bytes[8..16], &0xabcu64.to_ne_bytes());
        assert_eq!(&bytes[16..24], &0x1000u64.to_ne_bytes());
        assert_eq!(&bytes[24..32], &0x9000u64.to_ne_bytes());
    }
}

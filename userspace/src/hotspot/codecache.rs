//! The code cache: its CodeHeaps, the segment maps that lead from a pc to the start of its
//! CodeBlob, the blobs' names and code ranges, and for an nmethod its Method* and compile id.
//! Also the interpreter's code range ([`interpreter`]). Layouts differ across JDKs: JDK 17 and 21
//! hold code pointers in CodeBlob and the Method* in CompiledMethod; JDK 23+ hold offsets from the
//! blob and the Method* in nmethod.

use std::collections::HashMap;
use std::sync::Mutex;

use super::interpreter;
use super::memory::{array_at, word, Memory};
use super::vmstructs::VmStructs;
use super::HotSpotError;

/// More heaps than HotSpot ever makes (it has at most 3, 4 with a hot code heap).
const MAX_HEAPS: u32 = 16;
/// Segment map hops before giving up; each hop goes back up to 254 segments.
const MAX_HOPS: usize = 1024;
/// Segment map bytes read at once.
const SEGMAP_CHUNK: u64 = 4096;
/// The segment map byte of a free segment.
const FREE_SEGMENT: u8 = 0xFF;
/// Longest blob name read.
const MAX_BLOB_NAME: usize = 256;
/// Blob names kept by address before the cache is cleared: HotSpot names its blobs with a few
/// hundred string literals.
const MAX_STATIC_NAMES: usize = 4096;

/// Where a CodeBlob keeps one of its code boundaries.
#[derive(Debug, Clone, Copy)]
enum Boundary {
    /// An absolute pointer at this offset (JDK <= 22).
    Pointer(u64),
    /// An int32 offset from the blob's start, at this offset (JDK 23+).
    Relative(u64),
}

impl Boundary {
    fn find(vm: &VmStructs, pointer: &str, relative: &str) -> Result<Boundary, HotSpotError> {
        match vm.offset(&["CodeBlob"], pointer, 8) {
            Ok(offset) => Ok(Boundary::Pointer(offset)),
            Err(_) => Ok(Boundary::Relative(vm.offset(&["CodeBlob"], relative, 4)?)),
        }
    }

    fn read(self, blob: u64, header: &[u8]) -> Option<u64> {
        match self {
            Boundary::Pointer(offset) => word(header, offset),
            Boundary::Relative(offset) => {
                let relative = i32::from_ne_bytes(array_at(header, offset)?);
                blob.checked_add(u64::try_from(relative).ok()?)
            }
        }
    }
}

/// One code blob: an nmethod, the interpreter, a stub or an adapter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeBlob {
    /// The CodeBlob* itself.
    pub address: u64,
    /// Its name: `nmethod`, `native nmethod`, `Interpreter`, `StubRoutines (1)`, ...
    pub name: String,
    /// First byte of its instructions.
    pub code_begin: u64,
    /// One past the last byte of its instructions.
    pub code_end: u64,
    /// One past the blob's last byte (header, code and data).
    pub end: u64,
    /// The size of its stack frame in words, once the frame is complete (0: no fixed frame).
    pub frame_size: u32,
    /// For an nmethod whose fields were read with its header, what it compiles.
    pub nmethod: Option<NMethodInfo>,
}

impl CodeBlob {
    /// Whether the blob is compiled Java code (an nmethod, or a native method's wrapper).
    pub fn is_nmethod(&self) -> bool {
        self.name == "nmethod" || self.name == "native nmethod"
    }
}

/// The nmethod-specific part of a blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NMethodInfo {
    /// The Method* it compiles (the outer method, when others are inlined into it).
    pub method: u64,
    /// The compile id (positive; unique while the JVM runs).
    pub compile_id: u32,
    /// The tier: 1-3 C1, 4 C2 (0 for native wrappers).
    pub comp_level: u8,
}

/// Where a heap's code and segment map are: what a walker needs to find a pc's blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapLayout {
    /// The start of the heap: segment 0.
    pub low: u64,
    /// One past the end of its reserved range.
    pub high: u64,
    /// Its segment map, one byte per segment.
    pub segmap: u64,
    /// Bytes per segment, as a power of two.
    pub log2_segment: u32,
}

/// A heap's committed part. It only grows, and its start and segment map never move: a state
/// read once answers for every pc it covers.
#[derive(Debug, Clone, Copy)]
struct HeapState {
    low: u64,
    segments: u64,
    segmap: u64,
    log2_segment: u32,
}

/// The code cache of one JVM.
#[derive(Debug)]
pub struct CodeCache {
    heaps: Vec<u64>,
    reserved: Vec<(u64, u64)>,
    heap_size: u64,
    heap_memory: u64,
    heap_segmap: u64,
    heap_log2_segment: u64,
    space_low: u64,
    space_high: u64,
    block_size: u64,
    block_length: u64,
    block_used: u64,
    blob_size: u64,
    blob_name: u64,
    blob_length: u64,
    blob_frame_size: u64,
    code_begin: Boundary,
    code_end: Boundary,
    nmethod_size: u64,
    nmethod_method: u64,
    compile_id: u64,
    comp_level: u64,
    interpreter: (u64, u64),
    /// Each heap's committed part as last read, read again for a pc beyond it.
    committed: Mutex<Vec<Option<HeapState>>>,
    /// Where libjvm is mapped without write permission: a blob name there never changes.
    static_ranges: Vec<(u64, u64)>,
    /// The blob names read there, by address.
    static_names: Mutex<HashMap<u64, String>>,
}

impl HeapState {
    /// The segment of `pc`, if the committed part holds it.
    fn segment(&self, pc: u64) -> Option<u64> {
        let segment = pc.checked_sub(self.low)? >> self.log2_segment;
        (segment < self.segments).then_some(segment)
    }
}

impl CodeCache {
    /// Reads the heaps and the interpreter range; `NotReady` while the JVM still sets them up.
    /// `static_ranges`: where libjvm is mapped without write permission (its string literals,
    /// which name most blobs).
    pub fn read(
        mem: &dyn Memory,
        vm: &VmStructs,
        static_ranges: Vec<(u64, u64)>,
    ) -> Result<CodeCache, HotSpotError> {
        let nmethod = ["nmethod", "CompiledMethod"];
        let header = vm.offset(&["HeapBlock"], "_header", 1)?;
        let mut cache = CodeCache {
            heaps: Vec::new(),
            reserved: Vec::new(),
            heap_size: vm.require_size("CodeHeap")?,
            heap_memory: vm.offset(&["CodeHeap"], "_memory", 1)?,
            heap_segmap: vm.offset(&["CodeHeap"], "_segmap", 1)?,
            heap_log2_segment: vm.offset(&["CodeHeap"], "_log2_segment_size", 4)?,
            space_low: vm.offset(&["VirtualSpace"], "_low", 8)?,
            space_high: vm.offset(&["VirtualSpace"], "_high", 8)?,
            block_size: vm.require_size("HeapBlock")?,
            block_length: header + vm.offset(&["HeapBlock::Header"], "_length", 4)?,
            block_used: header + vm.offset(&["HeapBlock::Header"], "_used", 1)?,
            blob_size: vm.require_size("CodeBlob")?,
            blob_name: vm.offset(&["CodeBlob"], "_name", 8)?,
            blob_length: vm.offset(&["CodeBlob"], "_size", 4)?,
            blob_frame_size: vm.offset(&["CodeBlob"], "_frame_size", 4)?,
            code_begin: Boundary::find(vm, "_code_begin", "_code_offset")?,
            code_end: Boundary::find(vm, "_code_end", "_data_offset")?,
            nmethod_size: vm.require_size("nmethod")?,
            nmethod_method: vm.offset(&nmethod, "_method", 8)?,
            compile_id: vm.offset(&nmethod, "_compile_id", 4)?,
            comp_level: vm.offset(&nmethod, "_comp_level", 1)?,
            interpreter: interpreter::read(mem, vm)?,
            committed: Mutex::default(),
            static_ranges,
            static_names: Mutex::default(),
        };
        let boundary_low = vm.offset(&["VirtualSpace"], "_low_boundary", 8)?;
        let boundary_high = vm.offset(&["VirtualSpace"], "_high_boundary", 8)?;
        for heap in read_heap_pointers(mem, vm)? {
            let bytes =
                mem.read_bytes(heap, cache.heap_size as usize)
                    .ok_or(HotSpotError::Unreadable {
                        what: "a CodeHeap",
                        addr: heap,
                    })?;
            let space = |field| word(&bytes, cache.heap_memory + field);
            match (space(boundary_low), space(boundary_high)) {
                (Some(low), Some(high)) if low != 0 && low < high => {
                    cache.heaps.push(heap);
                    cache.reserved.push((low, high));
                }
                _ => {
                    return Err(HotSpotError::NotReady(
                        "a CodeHeap has no memory yet".into(),
                    ))
                }
            }
        }
        cache.committed = Mutex::new(vec![None; cache.heaps.len()]);
        // Reserved before its segment map is set up: the walker needs both
        if cache.heap_layouts(mem).is_none() {
            return Err(HotSpotError::NotReady(
                "a CodeHeap has no segment map yet".into(),
            ));
        }
        Ok(cache)
    }

    /// The interpreter's code range, `[begin, end)`.
    pub fn interpreter(&self) -> (u64, u64) {
        self.interpreter
    }

    /// Whether `pc` lies in the interpreter's code.
    pub fn is_interpreter(&self, pc: u64) -> bool {
        (self.interpreter.0..self.interpreter.1).contains(&pc)
    }

    /// Whether `pc` lies in one of the code heaps (reserved range).
    pub fn contains(&self, pc: u64) -> bool {
        self.reserved
            .iter()
            .any(|&(low, high)| (low..high).contains(&pc))
    }

    /// The reserved ranges `[low, high)` of the code heaps.
    pub fn heap_ranges(&self) -> &[(u64, u64)] {
        &self.reserved
    }

    /// Every heap's layout; `None` if one cannot be read.
    pub fn heap_layouts(&self, mem: &dyn Memory) -> Option<Vec<HeapLayout>> {
        self.heaps
            .iter()
            .zip(&self.reserved)
            .map(|(&heap, &(_, high))| {
                let state = self.heap_state(mem, heap)?;
                Some(HeapLayout {
                    low: state.low,
                    high,
                    segmap: state.segmap,
                    log2_segment: state.log2_segment,
                })
            })
            .collect()
    }

    fn heap_state(&self, mem: &dyn Memory, heap: u64) -> Option<HeapState> {
        let bytes = mem.read_bytes(heap, self.heap_size as usize)?;
        let low = word(&bytes, self.heap_memory + self.space_low)?;
        let high = word(&bytes, self.heap_memory + self.space_high)?;
        let segmap = word(&bytes, self.heap_segmap + self.space_low)?;
        let segmap_high = word(&bytes, self.heap_segmap + self.space_high)?;
        let log2_segment = u32::from_ne_bytes(array_at(&bytes, self.heap_log2_segment)?);
        if !(4..=16).contains(&log2_segment) || high < low || segmap_high < segmap {
            return None;
        }
        let segments = ((high - low) >> log2_segment).min(segmap_high - segmap);
        Some(HeapState {
            low,
            segments,
            segmap,
            log2_segment,
        })
    }

    /// The blob that holds `pc`, found through its heap's segment map.
    pub fn blob_at(&self, mem: &dyn Memory, pc: u64) -> Option<CodeBlob> {
        let (heap, segment) = self.segment_of(mem, pc)?;
        let start = block_start(mem, &heap, segment)?;
        let block = heap.low + (start << heap.log2_segment);
        // The block's header and the blob's, which follows it, in one read, with an nmethod's
        // fields unless the blob is too close to the end of the committed memory.
        let bytes = mem
            .read_bytes(block, self.block_read())
            .or_else(|| mem.read_bytes(block, (self.block_size + self.blob_size) as usize))?;
        self.blob_in_block(mem, pc, &heap, block, &bytes)
    }

    /// [`CodeCache::blob_at`] when the blob at `near` held `pc` before: the segment map from
    /// that blob's block to `pc`'s segment and the block are read in one [`Memory::read_all`],
    /// and when the map still leads back from `pc` to that block, its blob is the answer.
    /// Otherwise the blob is found as [`CodeCache::blob_at`] finds it.
    pub fn blob_at_near(&self, mem: &dyn Memory, pc: u64, near: u64) -> Option<CodeBlob> {
        self.blob_in_known_block(mem, pc, near)
            .or_else(|| self.blob_at(mem, pc))
    }

    fn blob_in_known_block(&self, mem: &dyn Memory, pc: u64, near: u64) -> Option<CodeBlob> {
        let (heap, segment) = self.segment_of(mem, pc)?;
        let block = near.checked_sub(self.block_size)?;
        let first = heap.segment(block)?;
        let span = segment.checked_sub(first)?;
        if heap.low + (first << heap.log2_segment) != block || span >= SEGMAP_CHUNK {
            return None;
        }
        let read = mem.read_all(&[
            (heap.segmap + first, (span + 1) as usize),
            (block, self.block_read()),
        ]);
        let [Some(map), Some(bytes)] = read.as_slice() else {
            return None;
        };
        if !leads_to_first(map) {
            return None;
        }
        self.blob_in_block(mem, pc, &heap, block, bytes)
    }

    /// Bytes read at a block: its header, then the blob's, with an nmethod's fields.
    fn block_read(&self) -> usize {
        (self.block_size + self.blob_size.max(self.nmethod_size)) as usize
    }

    /// The heap whose committed part holds `pc`, and `pc`'s segment in it.
    fn segment_of(&self, mem: &dyn Memory, pc: u64) -> Option<(HeapState, u64)> {
        let index = self
            .reserved
            .iter()
            .position(|&(l, h)| (l..h).contains(&pc))?;
        self.committed_segment(mem, index, pc)
    }

    /// The blob of the block at `block` whose bytes (its header and the blob's) are `bytes`, if
    /// the block is used and the blob holds `pc`.
    fn blob_in_block(
        &self,
        mem: &dyn Memory,
        pc: u64,
        heap: &HeapState,
        block: u64,
        bytes: &[u8],
    ) -> Option<CodeBlob> {
        let (length, used) = self.block_header(bytes)?;
        if !used || pc >= block.checked_add(length << heap.log2_segment)? {
            return None;
        }
        let blob = self.blob_from(
            mem,
            block + self.block_size,
            bytes.get(self.block_size as usize..)?,
        )?;
        (blob.address..blob.end).contains(&pc).then_some(blob)
    }

    /// The committed part of heap `index` and the segment of `pc` in it: as last read, or read
    /// again when `pc` lies beyond that (the heap has grown since, or `pc` is in no blob).
    fn committed_segment(
        &self,
        mem: &dyn Memory,
        index: usize,
        pc: u64,
    ) -> Option<(HeapState, u64)> {
        let known = self
            .committed
            .lock()
            .ok()
            .and_then(|states| states.get(index).copied().flatten());
        if let Some(segment) = known.and_then(|heap| heap.segment(pc)) {
            return Some((known?, segment));
        }
        let heap = self.heap_state(mem, *self.heaps.get(index)?)?;
        if let Some(slot) = self.committed.lock().ok()?.get_mut(index) {
            *slot = Some(heap);
        }
        Some((heap, heap.segment(pc)?))
    }

    /// Every used blob of every heap, in address order within each heap.
    pub fn blobs(&self, mem: &dyn Memory) -> Vec<CodeBlob> {
        let mut blobs = Vec::new();
        for &heap in &self.heaps {
            let Some(state) = self.heap_state(mem, heap) else {
                continue;
            };
            let mut segment = 0;
            while segment < state.segments {
                let block = state.low + (segment << state.log2_segment);
                let Some((length, used)) = mem
                    .read_bytes(block, self.block_size as usize)
                    .and_then(|bytes| self.block_header(&bytes))
                else {
                    break;
                };
                if length == 0 {
                    break;
                }
                if used {
                    blobs.extend(
                        block
                            .checked_add(self.block_size)
                            .and_then(|blob| self.blob(mem, blob)),
                    );
                }
                segment += length;
            }
        }
        blobs
    }

    /// A block's length in segments, and whether it is used.
    fn block_header(&self, bytes: &[u8]) -> Option<(u64, bool)> {
        let length = u32::from_ne_bytes(array_at(bytes, self.block_length)?);
        let used = *bytes.get(self.block_used as usize)? != 0;
        Some((u64::from(length), used))
    }

    /// The blob whose header starts at `blob`, if its fields are plausible.
    fn blob(&self, mem: &dyn Memory, blob: u64) -> Option<CodeBlob> {
        self.blob_from(mem, blob, &mem.read_bytes(blob, self.blob_size as usize)?)
    }

    /// The blob at `blob` whose header is `header` (read from there), if its fields are
    /// plausible.
    fn blob_from(&self, mem: &dyn Memory, blob: u64, header: &[u8]) -> Option<CodeBlob> {
        let length = u64::try_from(i32::from_ne_bytes(array_at(header, self.blob_length)?)).ok()?;
        let code_begin = self.code_begin.read(blob, header)?;
        let code_end = self.code_end.read(blob, header)?;
        let end = blob.checked_add(length)?;
        if code_begin < blob || code_begin > code_end || code_end > end {
            return None;
        }
        // Stubs without a fixed frame say -1.
        let frame_size =
            u32::try_from(i32::from_ne_bytes(array_at(header, self.blob_frame_size)?)).unwrap_or(0);
        let mut blob = CodeBlob {
            address: blob,
            name: self.blob_name(mem, word(header, self.blob_name)?)?,
            code_begin,
            code_end,
            end,
            frame_size,
            nmethod: None,
        };
        if blob.is_nmethod() {
            blob.nmethod = self.nmethod_fields(header);
        }
        Some(blob)
    }

    /// The name at `name`: read once if it lies in libjvm's read-only mappings, else each time.
    fn blob_name(&self, mem: &dyn Memory, name: u64) -> Option<String> {
        let fixed = |end: u64| {
            self.static_ranges
                .iter()
                .any(|&(low, high)| name >= low && end <= high)
        };
        if fixed(name) {
            if let Some(known) = self.static_names.lock().ok()?.get(&name) {
                return Some(known.clone());
            }
        }
        let text = mem.read_c_string(name, MAX_BLOB_NAME)?;
        if fixed(name.checked_add(text.len() as u64 + 1)?) {
            let mut names = self.static_names.lock().ok()?;
            if names.len() >= MAX_STATIC_NAMES {
                names.clear();
            }
            names.insert(name, text.clone());
        }
        Some(text)
    }

    /// The Method*, compile id and tier of an nmethod blob: as read with its header, or read
    /// now.
    pub fn nmethod(&self, mem: &dyn Memory, blob: &CodeBlob) -> Option<NMethodInfo> {
        if !blob.is_nmethod() {
            return None;
        }
        blob.nmethod.or_else(|| {
            self.nmethod_fields(&mem.read_bytes(blob.address, self.nmethod_size as usize)?)
        })
    }

    /// The Method*, compile id and tier in the bytes of an nmethod, read from its start.
    fn nmethod_fields(&self, bytes: &[u8]) -> Option<NMethodInfo> {
        let compile_id = i32::from_ne_bytes(array_at(bytes, self.compile_id)?);
        Some(NMethodInfo {
            method: word(bytes, self.nmethod_method)?,
            compile_id: u32::try_from(compile_id).ok()?,
            comp_level: *bytes.get(self.comp_level as usize)?,
        })
    }
}

/// Follows the segment map back from `segment` to the first segment of its block.
fn block_start(mem: &dyn Memory, heap: &HeapState, segment: u64) -> Option<u64> {
    let mut current = segment;
    let mut chunk_start = current + 1;
    let mut chunk = Vec::new();
    for _ in 0..MAX_HOPS {
        if current < chunk_start {
            chunk_start = current.saturating_sub(SEGMAP_CHUNK - 1);
            chunk = mem.read_bytes(
                heap.segmap + chunk_start,
                (current - chunk_start + 1) as usize,
            )?;
        }
        match chunk[(current - chunk_start) as usize] {
            0 => return Some(current),
            FREE_SEGMENT => return None,
            hop => current = current.checked_sub(u64::from(hop))?,
        }
    }
    None
}

/// Whether the segment map bytes `map` lead back from their last segment to their first, and
/// that one starts a block.
fn leads_to_first(map: &[u8]) -> bool {
    let Some(mut current) = map.len().checked_sub(1) else {
        return false;
    };
    loop {
        match map[current] {
            0 => return current == 0,
            FREE_SEGMENT => return false,
            hop => match current.checked_sub(usize::from(hop)) {
                Some(earlier) => current = earlier,
                None => return false,
            },
        }
    }
}

/// `CodeCache::_heaps`: a GrowableArray of CodeHeap*.
fn read_heap_pointers(mem: &dyn Memory, vm: &VmStructs) -> Result<Vec<u64>, HotSpotError> {
    let unreadable = |addr| HotSpotError::Unreadable {
        what: "CodeCache::_heaps",
        addr,
    };
    let heaps_var = vm.static_address("CodeCache", "_heaps")?;
    let array = mem.read_u64(heaps_var).ok_or(unreadable(heaps_var))?;
    if array == 0 {
        return Err(HotSpotError::NotReady(
            "CodeCache::_heaps is not set yet".into(),
        ));
    }
    let len_at =
        array.wrapping_add(vm.offset(&["GrowableArrayBase", "GenericGrowableArray"], "_len", 4)?);
    let data_at = array.wrapping_add(vm.offset(&["GrowableArray<int>"], "_data", 8)?);
    let len = mem.read_u32(len_at).ok_or(unreadable(len_at))?;
    let data = mem.read_u64(data_at).ok_or(unreadable(data_at))?;
    if len == 0 || data == 0 {
        return Err(HotSpotError::NotReady(
            "the code cache has no heap yet".into(),
        ));
    }
    if len > MAX_HEAPS {
        return Err(HotSpotError::BadTable(format!(
            "CodeCache::_heaps has {len} heaps, more than {MAX_HEAPS}"
        )));
    }
    let bytes = mem
        .read_bytes(data, 8 * len as usize)
        .ok_or(unreadable(data))?;
    Ok(bytes
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hotspot::fake::{FakeJvm, FakeMemory};
    use crate::hotspot::memory::Counted;
    use crate::hotspot::memory::ProcessMemory;
    use proptest::prelude::*;

    /// A heap whose segment map is `segmap`, in this process's memory.
    fn heap(segmap: &[u8]) -> HeapState {
        HeapState {
            low: 0x1000,
            segments: segmap.len() as u64,
            segmap: segmap.as_ptr() as u64,
            log2_segment: 6,
        }
    }

    #[test]
    fn hops_back_to_the_block_start() {
        // Blocks at 0 (3 segments), 3 (1 segment), 4 (free), 5 (long, hops of up to 3).
        let segmap = [0, 1, 2, 0, FREE_SEGMENT, 0, 1, 2, 3, 1, 2, 3];
        let mem = ProcessMemory::new(std::process::id());
        let heap = heap(&segmap);
        let starts: Vec<Option<u64>> = (0..segmap.len() as u64)
            .map(|s| block_start(&mem, &heap, s))
            .collect();
        assert_eq!(
            starts,
            [0, 0, 0, 3]
                .map(Some)
                .into_iter()
                .chain([None])
                .chain([5; 7].map(Some))
                .collect::<Vec<_>>()
        );
    }

    /// A code cache read from a fake JVM whose blob names lie in libjvm's read-only memory.
    fn read_only_names(jvm: FakeJvm) -> (CodeCache, Counted<FakeMemory>) {
        let (mem, libjvm) = jvm.into_parts();
        let vm = VmStructs::read(&mem, &libjvm).expect("tables");
        let code = CodeCache::read(&mem, &vm, vec![FakeMemory::RANGE]).expect("code cache");
        (code, Counted::new(mem))
    }

    /// Found again where it was, an nmethod is read in one call, with its fields; its name, in
    /// libjvm's read-only memory, only the first time.
    #[test]
    fn a_blob_found_again_near_its_address_is_read_in_one_call() {
        let mut jvm = FakeJvm::default();
        let method = jvm.method("a.B", "run");
        jvm.stub("before", 0x100);
        let (begin, end) = jvm.nmethod(method, 7, 0x400);
        let (code, mem) = read_only_names(jvm);
        let blob = code.blob_at(&mem, end - 1).expect("the nmethod");
        let info = blob.nmethod.expect("its fields, read with its header");
        assert_eq!(
            (info.method, info.compile_id, info.comp_level),
            (method, 7, 4)
        );
        assert_eq!(code.nmethod(&mem, &blob), Some(info));
        assert_eq!(
            mem.calls(),
            4,
            "the heap, its segment map, the block, the name"
        );
        for pc in [begin, end - 1] {
            assert_eq!(
                code.blob_at_near(&mem, pc, blob.address).as_ref(),
                Some(&blob)
            );
            assert_eq!(mem.calls(), 1);
        }
        assert_eq!(code.blob_at(&mem, begin).as_ref(), Some(&blob));
        assert_eq!(mem.calls(), 2, "the name is known");
    }

    /// Near a blob that does not hold the pc (before it, after it, or none), the pc's own blob
    /// is found, or none where no blob is.
    #[test]
    fn near_another_blob_the_pcs_own_blob_is_found() {
        let mut jvm = FakeJvm::default();
        let method = jvm.method("a.B", "run");
        let (stub, _) = jvm.stub("before", 0x100);
        let (begin, end) = jvm.nmethod(method, 7, 0x400);
        let (after, _) = jvm.stub("after", 0x100);
        let free = jvm.free_code();
        let (code, mem) = read_only_names(jvm);
        let near = |pc, of| {
            let hint = code.blob_at(&mem, of).expect("a blob").address;
            code.blob_at_near(&mem, pc, hint).map(|blob| blob.name)
        };
        assert_eq!(near(begin, stub).as_deref(), Some("nmethod"));
        assert_eq!(near(end - 1, after).as_deref(), Some("nmethod"));
        assert_eq!(near(after, begin).as_deref(), Some("after"));
        assert_eq!(near(free, after), None);
        let nmethod = code.blob_at(&mem, begin).expect("the nmethod").address;
        assert_eq!(
            code.blob_at_near(&mem, begin, nmethod + 8),
            code.blob_at(&mem, begin)
        );
        assert_eq!(code.blob_at_near(&mem, begin, 0), code.blob_at(&mem, begin));
    }

    #[test]
    fn a_blob_committed_after_the_heap_was_read_is_found() {
        let mut jvm = FakeJvm::default();
        let (first, _) = jvm.stub("first", 0x100);
        let (second, _) = jvm.stub("second", 0x100);
        let end_field = jvm.committed_end_field();
        let (mut mem, libjvm) = jvm.into_parts();
        let vm = VmStructs::read(&mem, &libjvm).expect("tables");
        let committed_end = mem.read_u64(end_field).expect("committed end");
        mem.write_u64(end_field, second - 0x80);
        let code = CodeCache::read(&mem, &vm, Vec::new()).expect("code cache");
        let name = |mem: &FakeMemory, pc| code.blob_at(mem, pc).map(|blob| blob.name);
        assert_eq!(name(&mem, first).as_deref(), Some("first"));
        assert_eq!(name(&mem, second), None);
        mem.write_u64(end_field, committed_end);
        assert_eq!(name(&mem, second).as_deref(), Some("second"));
        assert_eq!(name(&mem, first).as_deref(), Some("first"));
    }

    #[test]
    fn a_hop_past_the_map_start_is_refused() {
        let segmap = [5, 1];
        let mem = ProcessMemory::new(std::process::id());
        assert_eq!(block_start(&mem, &heap(&segmap), 1), None);
    }

    proptest! {
        #[test]
        fn any_segment_map_gives_a_start_at_or_before_the_segment(
            segmap in proptest::collection::vec(any::<u8>(), 1..6000),
            pick in any::<prop::sample::Index>(),
        ) {
            let mem = ProcessMemory::new(std::process::id());
            let segment = pick.index(segmap.len()) as u64;
            if let Some(start) = block_start(&mem, &heap(&segmap), segment) {
                prop_assert!(start <= segment);
                prop_assert_eq!(segmap[start as usize], 0);
            }
        }

        /// A map that leads back to its first segment is one that the walk from its last
        /// segment ends at that segment.
        #[test]
        fn a_map_leads_to_its_first_segment_as_the_walk_goes(
            segmap in proptest::collection::vec(any::<u8>(), 0..600),
        ) {
            let mem = ProcessMemory::new(std::process::id());
            let last = segmap.len().checked_sub(1).map(|last| last as u64);
            let walked = last.and_then(|last| block_start(&mem, &heap(&segmap), last));
            prop_assert_eq!(leads_to_first(&segmap), walked == Some(0));
        }
    }
}

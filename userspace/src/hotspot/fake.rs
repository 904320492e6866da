//! A HotSpot JVM as a memory image, for unit tests without root and without a JVM: [`FakeMemory`]
//! is an arena of bytes at a fixed address, and [`FakeJvm`] lays HotSpot's structures out in it as
//! a JVM does (VMStructs tables, Methods and their Symbols, a code heap with its segment map and
//! blobs, the interpreter, the flags), so that [`HotSpot::read`] and the resolver run on it
//! unchanged. The layouts are simple, but everything is found through the tables, as in a JVM.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::libjvm::Libjvm;
use super::memory::{readable_range, Memory};
use super::method::METHOD_VTABLE_SYMBOL;
use super::{HotSpot, HotSpotError};

/// Where the arena starts: an address no real read of this process is asked for.
const BASE: u64 = 0x7e00_0000_0000;
/// The arena's size.
const SIZE: usize = 1 << 20;

/// Bytes at `[BASE, BASE + SIZE)`, zero where nothing was written; anything else is unreadable.
#[derive(Debug)]
pub struct FakeMemory {
    bytes: Vec<u8>,
    next: u64,
}

impl Default for FakeMemory {
    fn default() -> FakeMemory {
        FakeMemory {
            bytes: vec![0; SIZE],
            next: BASE + 0x1000,
        }
    }
}

impl FakeMemory {
    /// `len` bytes of fresh memory, aligned to `align` (a power of two).
    pub fn alloc(&mut self, len: u64, align: u64) -> u64 {
        let at = (self.next + align - 1) & !(align - 1);
        self.next = at + len.max(1);
        assert!(self.next <= BASE + SIZE as u64, "the fake memory is full");
        at
    }

    /// Writes `bytes` at `addr`.
    pub fn write(&mut self, addr: u64, bytes: &[u8]) {
        let start = (addr - BASE) as usize;
        self.bytes[start..start + bytes.len()].copy_from_slice(bytes);
    }

    /// Writes the native-endian u64 `value` at `addr`.
    pub fn write_u64(&mut self, addr: u64, value: u64) {
        self.write(addr, &value.to_ne_bytes());
    }

    /// Writes the native-endian u32 `value` at `addr`.
    pub fn write_u32(&mut self, addr: u64, value: u32) {
        self.write(addr, &value.to_ne_bytes());
    }

    /// A NUL-terminated copy of `text`.
    pub fn c_string(&mut self, text: &str) -> u64 {
        let at = self.alloc(text.len() as u64 + 1, 8);
        self.write(at, text.as_bytes());
        at
    }

    /// Makes the nmethod whose code starts at `code_begin` compile `method` at tier `level`, as
    /// compile `compile_id`: as HotSpot leaves it when new code takes the place of freed code.
    pub fn compile_into(&mut self, code_begin: u64, method: u64, compile_id: u32, level: u8) {
        let blob = code_begin - NMETHOD_HEADER;
        self.write_u64(blob + 64, method);
        self.write_u32(blob + 72, compile_id);
        self.write(blob + 76, &[level]);
    }
}

impl FakeMemory {
    /// The arena's range, `[start, end)`.
    pub const RANGE: (u64, u64) = (BASE, BASE + SIZE as u64);
}

/// A fake image that a test can change while a [`HotSpot`] reads it.
#[derive(Debug, Clone, Default)]
pub struct SharedMemory(pub Arc<Mutex<FakeMemory>>);

impl Memory for SharedMemory {
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> bool {
        self.0.lock().is_ok_and(|mem| mem.read_into(addr, buf))
    }
}

impl Memory for FakeMemory {
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> bool {
        if !readable_range(addr, buf.len()) || addr < BASE {
            return false;
        }
        let start = (addr - BASE) as usize;
        match self.bytes.get(start..start + buf.len()) {
            Some(bytes) => {
                buf.copy_from_slice(bytes);
                true
            }
            None => false,
        }
    }
}

/// Bytes per code heap segment, as a power of two.
const LOG2_SEGMENT: u32 = 6;
/// Segments of the code heap.
const SEGMENTS: u64 = 1024;
/// Bytes of a HeapBlock, before its CodeBlob.
const HEAP_BLOCK: u64 = 16;
/// Bytes of a CodeBlob's header, before its code (stubs).
const BLOB_HEADER: u64 = 64;
/// Bytes of an nmethod's header, before its code.
const NMETHOD_HEADER: u64 = 128;

/// The structures' sizes, as VMStructs lists them.
const TYPES: &[(&str, u64)] = &[
    ("Method", 64),
    ("ConstMethod", 48),
    ("ConstantPool", 64),
    ("Klass", 64),
    ("Symbol", 16),
    ("CodeHeap", 256),
    ("VirtualSpace", 48),
    ("HeapBlock", HEAP_BLOCK),
    ("CodeBlob", BLOB_HEADER),
    ("nmethod", NMETHOD_HEADER),
    ("StubQueue", 32),
    ("GrowableArrayBase", 16),
    ("GrowableArray<int>", 16),
    ("ThreadsList", 16),
    ("JavaThread", 256),
    ("OSThread", 32),
    ("JVMFlag", 32),
    ("PcDesc", 16),
];

/// Instance fields, JDK 17's way (code pointers in CodeBlob): type, field, C++ type, offset.
const FIELDS: &[(&str, &str, &str, u64)] = &[
    ("Method", "_constMethod", "ConstMethod*", 8),
    ("ConstMethod", "_constants", "ConstantPool*", 8),
    ("ConstMethod", "_name_index", "u2", 16),
    ("ConstantPool", "_pool_holder", "InstanceKlass*", 8),
    ("ConstantPool", "_length", "int", 16),
    ("Klass", "_name", "Symbol*", 16),
    ("Symbol", "_length", "u2", 0),
    ("Symbol", "_body", "u1", 6),
    ("CodeHeap", "_memory", "VirtualSpace", 0),
    ("CodeHeap", "_segmap", "VirtualSpace", 64),
    ("CodeHeap", "_log2_segment_size", "int", 128),
    ("VirtualSpace", "_low_boundary", "char*", 0),
    ("VirtualSpace", "_high_boundary", "char*", 8),
    ("VirtualSpace", "_low", "char*", 16),
    ("VirtualSpace", "_high", "char*", 24),
    ("HeapBlock", "_header", "HeapBlock::Header", 0),
    ("HeapBlock::Header", "_length", "size_t", 0),
    ("HeapBlock::Header", "_used", "bool", 4),
    ("CodeBlob", "_name", "const char*", 0),
    ("CodeBlob", "_size", "int", 8),
    ("CodeBlob", "_frame_size", "int", 12),
    ("CodeBlob", "_code_begin", "address", 16),
    ("CodeBlob", "_code_end", "address", 24),
    ("nmethod", "_method", "Method*", 64),
    ("nmethod", "_compile_id", "int", 72),
    ("nmethod", "_comp_level", "CompLevel", 76),
    ("CompiledMethod", "_scopes_data_begin", "address", 80),
    ("nmethod", "_metadata_offset", "int", 88),
    ("nmethod", "_scopes_pcs_offset", "int", 92),
    ("nmethod", "_dependencies_offset", "int", 96),
    ("PcDesc", "_pc_offset", "int", 0),
    ("PcDesc", "_scope_decode_offset", "int", 4),
    ("StubQueue", "_stub_buffer", "address", 0),
    ("StubQueue", "_buffer_limit", "int", 8),
    ("StubQueue", "_queue_end", "int", 12),
    ("GrowableArrayBase", "_len", "int", 0),
    ("GrowableArray<int>", "_data", "int*", 8),
    ("ThreadsList", "_length", "uint", 0),
    ("ThreadsList", "_threads", "JavaThread**", 8),
    ("Thread", "_osthread", "OSThread*", 48),
    ("Thread", "_stack_base", "address", 56),
    ("Thread", "_stack_size", "size_t", 64),
    ("OSThread", "_thread_id", "pid_t", 12),
    ("JVMFlag", "_name", "const char*", 0),
    ("JVMFlag", "_addr", "void*", 8),
];

/// A JVM image being built: add methods and code, then [`FakeJvm::open`] it.
#[derive(Debug)]
pub struct FakeJvm {
    /// Its memory.
    pub mem: FakeMemory,
    symbols: HashMap<String, u64>,
    statics: Vec<(&'static str, &'static str, u64)>,
    method_vtable: u64,
    heap_low: u64,
    /// The CodeHeap.
    code_heap: u64,
    /// The ThreadsList, and the JavaThreads in it.
    thread_list: u64,
    java_threads: Vec<u64>,
    segmap: u64,
    next_segment: u64,
    interpreter: (u64, u64),
    /// The interpreter's StubQueue, whose `_queue_end` says how much of it is generated.
    interpreter_queue: u64,
}

impl Default for FakeJvm {
    /// A JVM 21.0.5 with a code heap that holds its interpreter only, and one flag,
    /// `PreserveFramePointer`, false.
    fn default() -> FakeJvm {
        let mut mem = FakeMemory::default();
        let vtable = mem.alloc(64, 16);
        let heap_low = mem.alloc(SEGMENTS << LOG2_SEGMENT, 4096);
        let segmap = mem.alloc(SEGMENTS, 16);
        mem.write(segmap, &[0xFF; SEGMENTS as usize]);
        let mut jvm = FakeJvm {
            mem,
            symbols: HashMap::from([(METHOD_VTABLE_SYMBOL.to_string(), vtable)]),
            statics: Vec::new(),
            method_vtable: vtable + 16,
            heap_low,
            code_heap: 0,
            thread_list: 0,
            java_threads: Vec::new(),
            segmap,
            next_segment: 0,
            interpreter: (0, 0),
            interpreter_queue: 0,
        };
        jvm.interpreter = jvm.blob("Interpreter", BLOB_HEADER, 0x400);
        jvm.version(21, 5, "21.0.5+7-fake");
        jvm.code_heap();
        jvm.flags();
        jvm.thread_list = jvm.mem.alloc(16, 16);
        jvm.static_pointer("ThreadsSMRSupport", "_java_thread_list", jvm.thread_list);
        jvm
    }
}

impl FakeJvm {
    /// A Java thread, added to the list of Java threads, whose OS thread is `tid` (`None`: no
    /// OSThread) and whose stack is `[high - size, high)`: its JavaThread*.
    pub fn java_thread(&mut self, tid: Option<u32>, (high, size): (u64, u64)) -> u64 {
        let thread = self.mem.alloc(256, 16);
        if let Some(tid) = tid {
            let os_thread = self.mem.alloc(32, 16);
            self.mem.write_u32(os_thread + 12, tid);
            self.mem.write_u64(thread + 48, os_thread);
        }
        self.mem.write_u64(thread + 56, high);
        self.mem.write_u64(thread + 64, size);
        self.java_threads.push(thread);
        let array = self.mem.alloc(8 * self.java_threads.len() as u64, 16);
        for (i, &thread) in self.java_threads.iter().enumerate() {
            self.mem.write_u64(array + 8 * i as u64, thread);
        }
        self.mem
            .write_u32(self.thread_list, self.java_threads.len() as u32);
        self.mem.write_u64(self.thread_list + 8, array);
        thread
    }

    /// The interpreter's code range.
    pub fn interpreter(&self) -> (u64, u64) {
        self.interpreter
    }

    /// A Method `class.name` (class in the JVM's internal form, `a/b/C`): its Method*.
    pub fn method(&mut self, class: &str, name: &str) -> u64 {
        let class_symbol = self.symbol(class);
        let name_symbol = self.symbol(name);
        let klass = self.mem.alloc(64, 16);
        self.mem.write_u64(klass + 16, class_symbol);
        // A pool of 3 entries: the method's name at index 2.
        let pool = self.mem.alloc(64 + 3 * 8, 16);
        self.mem.write_u64(pool + 8, klass);
        self.mem.write_u32(pool + 16, 3);
        self.mem.write_u64(pool + 64 + 2 * 8, name_symbol);
        let const_method = self.mem.alloc(48, 16);
        self.mem.write_u64(const_method + 8, pool);
        self.mem.write(const_method + 16, &2u16.to_ne_bytes());
        let method = self.mem.alloc(64, 16);
        self.mem.write_u64(method, self.method_vtable);
        self.mem.write_u64(method + 8, const_method);
        method
    }

    /// An nmethod compiling `method` with C2 (compile id `compile_id`) into `code_len` bytes of
    /// code: its code range.
    pub fn nmethod(&mut self, method: u64, compile_id: u32, code_len: u64) -> (u64, u64) {
        self.nmethod_at_level(method, compile_id, code_len, 4)
    }

    /// The native nmethod of `method` (a native method's wrapper, or a method-handle intrinsic:
    /// tier 0), named `native nmethod` as Java 21 and later name it: its code range.
    pub fn native_nmethod(&mut self, method: u64, compile_id: u32, code_len: u64) -> (u64, u64) {
        self.nmethod_at_level(method, compile_id, code_len, 0)
    }

    fn nmethod_at_level(
        &mut self,
        method: u64,
        compile_id: u32,
        code_len: u64,
        level: u8,
    ) -> (u64, u64) {
        let kind = if level == 0 {
            "native nmethod"
        } else {
            "nmethod"
        };
        let (begin, end) = self.blob(kind, NMETHOD_HEADER, code_len);
        self.mem.compile_into(begin, method, compile_id, level);
        (begin, end)
    }

    /// Debug information for the nmethod whose code starts at `code_begin`, as HotSpot records
    /// it: the methods `chain` (Method*s, outermost first: the nmethod's own, then each one
    /// inlined into the one before) run at the code offsets `inlined`, the nmethod's method alone
    /// elsewhere. As in the agent's inline ranges, a PcDesc at offset P describes the instruction
    /// that ends at P + 1: so PcDescs at `inlined.start - 1` (the outer method) and
    /// `inlined.end - 1` (the chain).
    pub fn scopes(&mut self, code_begin: u64, inlined: std::ops::Range<i32>, chain: &[u64]) {
        let blob = code_begin - NMETHOD_HEADER;
        // The stream starts with one byte, so that no record is at offset 0 (no scope); each
        // record: its sender's offset, its Method*'s place in the metadata (from 1), its bci + 1.
        let mut data = vec![0xFF];
        let mut sender = 0;
        for index in 1..=chain.len() {
            let offset = data.len() as i32;
            for value in [sender, index as i32, 1] {
                data.push(u8::try_from(value + 1).expect("small numbers"));
            }
            sender = offset;
        }
        let pcs: Vec<u8> = [(-1, 0), (inlined.start - 1, 0), (inlined.end - 1, sender)]
            .into_iter()
            .chain([(i32::MAX, 0)])
            .flat_map(|(pc, scope)| [pc, scope, 0, 0])
            .flat_map(i32::to_ne_bytes)
            .collect();
        let metadata: Vec<u8> = chain.iter().flat_map(|m| m.to_ne_bytes()).collect();
        let tables = self
            .mem
            .alloc((metadata.len() + data.len() + pcs.len()) as u64, 8);
        let data_at = tables + metadata.len() as u64;
        let pcs_at = data_at + data.len() as u64;
        self.mem.write(tables, &metadata);
        self.mem.write(data_at, &data);
        self.mem.write(pcs_at, &pcs);
        let offset = |at: u64| u32::try_from(at - blob).expect("tables after the nmethod");
        self.mem.write_u64(blob + 80, data_at);
        self.mem.write_u32(blob + 88, offset(tables));
        self.mem.write_u32(blob + 92, offset(pcs_at));
        self.mem
            .write_u32(blob + 96, offset(pcs_at + pcs.len() as u64));
    }

    /// A stub named `name` with `code_len` bytes of code: its code range.
    pub fn stub(&mut self, name: &str, code_len: u64) -> (u64, u64) {
        self.blob(name, BLOB_HEADER, code_len)
    }

    /// An address in the code heap that no blob holds.
    pub fn free_code(&self) -> u64 {
        self.heap_low + ((self.next_segment + 1) << LOG2_SEGMENT)
    }

    /// Writes the VMStructs tables and opens the image as process `pid`'s JVM.
    pub fn open(self, pid: u32) -> HotSpot {
        self.try_open(pid).expect("the fake JVM opens")
    }

    /// Writes the VMStructs tables and reads the image as process `pid`'s JVM.
    pub fn try_open(self, pid: u32) -> Result<HotSpot, HotSpotError> {
        let (mem, libjvm) = self.into_parts();
        HotSpot::read(pid, Box::new(mem), &libjvm)
    }

    /// Writes the VMStructs tables and reads the image as process `pid`'s JVM, in memory that
    /// the test can change afterwards.
    pub fn open_shared(self, pid: u32) -> (HotSpot, SharedMemory) {
        let (mem, libjvm) = self.into_parts();
        let mem = SharedMemory(Arc::new(Mutex::new(mem)));
        let hotspot =
            HotSpot::read(pid, Box::new(mem.clone()), &libjvm).expect("the fake JVM opens");
        (hotspot, mem)
    }

    /// Writes the VMStructs tables, and gives the image and its libjvm apart: for tests that
    /// change the image after it was read.
    pub fn into_parts(mut self) -> (FakeMemory, Libjvm) {
        self.tables();
        let libjvm = Libjvm::with_symbols(self.symbols.clone());
        (self.mem, libjvm)
    }

    /// Where the CodeHeap keeps the end of its committed part (`_memory._high`).
    pub fn committed_end_field(&self) -> u64 {
        self.code_heap + 24
    }

    /// Makes the interpreter's queue as a JVM has it before generating the interpreter into it:
    /// no code yet, the unused tail not given back.
    pub fn interpreter_not_generated(&mut self) {
        self.mem.write_u32(self.interpreter_queue + 12, 0);
    }

    /// A Symbol holding `text`.
    fn symbol(&mut self, text: &str) -> u64 {
        let symbol = self.mem.alloc(6 + text.len() as u64, 16);
        self.mem.write(symbol, &(text.len() as u16).to_ne_bytes());
        self.mem.write(symbol + 6, text.as_bytes());
        symbol
    }

    /// A used block of the code heap holding a blob named `name` whose code, of `code_len`
    /// bytes, follows a header of `header` bytes: its code range.
    fn blob(&mut self, name: &str, header: u64, code_len: u64) -> (u64, u64) {
        let segments = (HEAP_BLOCK + header + code_len).div_ceil(1 << LOG2_SEGMENT);
        let first = self.next_segment;
        assert!(first + segments < SEGMENTS, "the fake code heap is full");
        assert!(segments < 0xFF, "one hop of the segment map at most");
        self.next_segment += segments;
        let block = self.heap_low + (first << LOG2_SEGMENT);
        self.mem.write_u32(block, segments as u32);
        self.mem.write(block + 4, &[1]);
        let hops: Vec<u8> = (0..segments).map(|i| i as u8).collect();
        self.mem.write(self.segmap + first, &hops);
        let blob = block + HEAP_BLOCK;
        let name = self.mem.c_string(name);
        self.mem.write_u64(blob, name);
        let size = (segments << LOG2_SEGMENT) - HEAP_BLOCK;
        self.mem.write_u32(blob + 8, size as u32);
        self.mem.write_u32(blob + 12, 2);
        let (begin, end) = (blob + header, blob + header + code_len);
        self.mem.write_u64(blob + 16, begin);
        self.mem.write_u64(blob + 24, end);
        (begin, end)
    }

    /// `Abstract_VM_Version`'s fields.
    fn version(&mut self, major: u32, security: u32, release: &str) {
        for (field, value) in [
            ("_vm_major_version", major),
            ("_vm_minor_version", 0),
            ("_vm_security_version", security),
            ("_vm_build_number", 7),
        ] {
            let at = self.mem.alloc(4, 4);
            self.mem.write_u32(at, value);
            self.statics.push(("Abstract_VM_Version", field, at));
        }
        let release = self.mem.c_string(release);
        self.static_pointer("Abstract_VM_Version", "_s_vm_release", release);
    }

    /// One code heap, committed whole, and the interpreter's StubQueue.
    fn code_heap(&mut self) {
        let heap = self.mem.alloc(256, 16);
        self.code_heap = heap;
        let high = self.heap_low + (SEGMENTS << LOG2_SEGMENT);
        for (offset, value) in [
            (0, self.heap_low),
            (8, high),
            (16, self.heap_low),
            (24, high),
        ] {
            self.mem.write_u64(heap + offset, value);
        }
        self.mem.write_u64(heap + 64 + 16, self.segmap);
        self.mem.write_u64(heap + 64 + 24, self.segmap + SEGMENTS);
        self.mem.write_u32(heap + 128, LOG2_SEGMENT);
        let data = self.mem.alloc(8, 8);
        self.mem.write_u64(data, heap);
        let array = self.mem.alloc(16, 16);
        self.mem.write_u32(array, 1);
        self.mem.write_u64(array + 8, data);
        self.static_pointer("CodeCache", "_heaps", array);
        let queue = self.mem.alloc(32, 16);
        let (begin, end) = self.interpreter;
        self.mem.write_u64(queue, begin);
        self.mem.write_u32(queue + 8, (end - begin) as u32);
        self.mem.write_u32(queue + 12, (end - begin) as u32);
        self.interpreter_queue = queue;
        self.static_pointer("AbstractInterpreter", "_code", queue);
    }

    /// The flag table: `PreserveFramePointer`, false.
    fn flags(&mut self) {
        let value = self.mem.alloc(1, 8);
        let name = self.mem.c_string("PreserveFramePointer");
        let table = self.mem.alloc(32, 16);
        self.mem.write_u64(table, name);
        self.mem.write_u64(table + 8, value);
        self.static_pointer("JVMFlag", "flags", table);
        let count = self.mem.alloc(8, 8);
        self.mem.write_u64(count, 1);
        self.statics.push(("JVMFlag", "numFlags", count));
    }

    /// A static field `ty::field` holding the pointer `value`.
    fn static_pointer(&mut self, ty: &'static str, field: &'static str, value: u64) {
        let at = self.mem.alloc(8, 8);
        self.mem.write_u64(at, value);
        self.statics.push((ty, field, at));
    }

    /// A table of `rows` (words at offsets 0, 8, ...) of `stride` bytes, ended by a NULL row.
    fn table(&mut self, stride: u64, rows: &[Vec<u64>]) -> u64 {
        let table = self.mem.alloc(stride * (rows.len() as u64 + 1), 16);
        for (index, row) in rows.iter().enumerate() {
            let at = table + stride * index as u64;
            for (i, &word) in row.iter().enumerate() {
                self.mem.write_u64(at + 8 * i as u64, word);
            }
        }
        table
    }

    /// The four VMStructs tables and libjvm's variables that describe them.
    fn tables(&mut self) {
        let mut structs = Vec::new();
        for &(ty, field, type_string, offset) in FIELDS {
            let (ty, field) = (self.mem.c_string(ty), self.mem.c_string(field));
            let type_string = self.mem.c_string(type_string);
            structs.push(vec![ty, field, type_string, 0, offset, 0]);
        }
        for (ty, field, address) in self.statics.clone() {
            let (ty, field) = (self.mem.c_string(ty), self.mem.c_string(field));
            structs.push(vec![ty, field, 0, 1, 0, address]);
        }
        let mut types = Vec::new();
        for &(name, size) in TYPES {
            types.push(vec![self.mem.c_string(name), 0, 0, 0, size]);
        }
        let mut ints = Vec::new();
        for (name, value) in [
            ("frame::interpreter_frame_sender_sp_offset", -1i32),
            ("frame::interpreter_frame_last_sp_offset", -2),
        ] {
            ints.push(vec![self.mem.c_string(name), u64::from(value as u32)]);
        }
        let (structs, types) = (self.table(48, &structs), self.table(40, &types));
        let (ints, longs) = (self.table(16, &ints), self.table(16, &[]));
        let mut vars: Vec<(String, u64)> = Vec::new();
        for (table, prefix, parts) in [
            (
                structs,
                "gHotSpotVMStructs",
                &[
                    ("ArrayStride", 48),
                    ("TypeNameOffset", 0),
                    ("FieldNameOffset", 8),
                    ("TypeStringOffset", 16),
                    ("IsStaticOffset", 24),
                    ("OffsetOffset", 32),
                    ("AddressOffset", 40),
                ][..],
            ),
            (
                types,
                "gHotSpotVMTypes",
                &[
                    ("ArrayStride", 40),
                    ("TypeNameOffset", 0),
                    ("SizeOffset", 32),
                ][..],
            ),
            (ints, "gHotSpotVMIntConstants", &CONSTANT_PARTS[..]),
            (longs, "gHotSpotVMLongConstants", &CONSTANT_PARTS[..]),
        ] {
            vars.push((prefix.to_string(), table));
            // gHotSpotVMStructs -> gHotSpotVMStructEntry..., gHotSpotVMTypes -> ...TypeEntry...
            let entry = format!("{}Entry", prefix.strip_suffix('s').unwrap_or(prefix));
            vars.extend(parts.iter().map(|&(part, v)| (format!("{entry}{part}"), v)));
        }
        for (name, value) in vars {
            let at = self.mem.alloc(8, 8);
            self.mem.write_u64(at, value);
            self.symbols.insert(name, at);
        }
    }
}

/// The parts of an entry of both constant tables, and their offsets.
const CONSTANT_PARTS: [(&str, u64); 3] =
    [("ArrayStride", 16), ("NameOffset", 0), ("ValueOffset", 8)];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hotspot::JavaMethod;

    fn java(class: &str, name: &str) -> JavaMethod {
        JavaMethod {
            class: class.into(),
            name: name.into(),
        }
    }

    #[test]
    fn the_fake_memory_reads_what_was_written_and_nothing_outside() {
        let mut mem = FakeMemory::default();
        let at = mem.alloc(16, 16);
        mem.write_u64(at, 0x1122_3344_5566_7788);
        assert_eq!(mem.read_u64(at), Some(0x1122_3344_5566_7788));
        let text = mem.c_string("hello");
        assert_eq!(mem.read_c_string(text, 16).as_deref(), Some("hello"));
        assert_eq!(mem.read_c_string(text, 4), None);
        assert_eq!(mem.read_u64(BASE - 8), None);
        assert_eq!(mem.read_u64(BASE + SIZE as u64 - 4), None);
        assert_eq!(mem.read_u64(0), None);
    }

    #[test]
    fn hotspot_reads_a_jvm_image_through_its_tables() {
        let mut jvm = FakeJvm::default();
        let run = jvm.method("demo/Main", "run");
        let compute = jvm.method("demo/Hot$Inner", "compute");
        let (begin, end) = jvm.nmethod(compute, 42, 0x100);
        let (stub, _) = jvm.stub("StubRoutines (1)", 0x40);
        let interpreter = jvm.interpreter();
        let free = jvm.free_code();
        let hotspot = jvm.open(1);

        let version = hotspot.version();
        assert_eq!((version.major, version.security), (21, 5));
        assert_eq!(version.release, "21.0.5+7-fake");
        assert_eq!(hotspot.method(run), Some(java("demo.Main", "run")));
        assert_eq!(
            hotspot.method(compute),
            Some(java("demo.Hot$Inner", "compute"))
        );
        assert_eq!(hotspot.method(run + 8), None, "not a Method");
        assert!(hotspot.is_interpreter(interpreter.0));
        assert!(!hotspot.is_interpreter(begin));
        assert!(hotspot.in_code_cache(begin) && hotspot.in_code_cache(free));
        assert!(!hotspot.in_code_cache(BASE));
        let compiled = hotspot
            .compiled_method_at(begin + 0x10)
            .expect("an nmethod");
        assert_eq!(
            (&compiled.method, compiled.compile_id, compiled.comp_level),
            (&java("demo.Hot$Inner", "compute"), 42, 4)
        );
        assert_eq!((compiled.code_begin, compiled.code_end), (begin, end));
        assert_eq!(hotspot.blob_name(stub).as_deref(), Some("StubRoutines (1)"));
        assert_eq!(
            hotspot.blob_name(interpreter.0).as_deref(),
            Some("Interpreter")
        );
        assert_eq!(hotspot.blob_at(free), None);
        assert_eq!(hotspot.compiled_methods(), vec![compiled]);
        assert_eq!(hotspot.flag_bool("PreserveFramePointer"), Some(false));
        assert!(hotspot.has_flag("PreserveFramePointer"));
        assert!(!hotspot.has_flag("NoSuchFlag"));
    }

    #[test]
    fn a_jvm_whose_interpreter_is_not_generated_yet_is_not_ready() {
        let mut jvm = FakeJvm::default();
        jvm.interpreter_not_generated();
        assert!(matches!(jvm.try_open(1), Err(HotSpotError::NotReady(_))));
    }
}

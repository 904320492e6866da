//! Reading a HotSpot JVM from outside: its VMStructs tables, method names, interpreter and code
//! cache ranges, compiled methods, Java threads and flags. Everything read from the target is
//! untrusted: every length is bounded, and a value that cannot be read gives `None`, never a
//! panic. See docs/hotspot.md.

pub mod codecache;
#[cfg(test)]
pub mod fake;
pub mod flags;
pub mod interpreter;
pub mod libjvm;
pub mod maps;
pub mod memory;
pub mod method;
pub mod scopes;
pub mod threads;
pub mod unwind;
pub mod vmstructs;

use thiserror::Error;

pub use codecache::CodeBlob;
pub use method::JavaMethod;
pub use threads::JavaThread;
pub use unwind::UnwindInfo;

use codecache::CodeCache;
use flags::Flags;
use libjvm::Libjvm;
use memory::{Memory, ProcessMemory};
use method::{MethodReader, METHOD_VTABLE_SYMBOL, VTABLE_ADDRESS_POINT};
use scopes::{ScopeLayout, Scopes};
use threads::{ThreadReader, JAVA_THREAD_VTABLE_SYMBOL};
use vmstructs::{TablesCache, VmStructs};

/// The VMStructs tables of the JVMs opened so far, shared by the later JVMs of the same libjvm
/// and writers.
static TABLES: TablesCache = TablesCache::new();

/// Longest version string read.
const MAX_RELEASE: usize = 256;

/// The version of a JVM, from `Abstract_VM_Version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JdkVersion {
    /// The feature release: 17, 21, 25, ...
    pub major: u32,
    /// The interim release (0 in practice).
    pub minor: u32,
    /// The update release, e.g. 15 in 17.0.15.
    pub security: u32,
    /// The build number.
    pub build: u32,
    /// The VM release string, e.g. `17.0.15+6-Debian-1deb12u1` (empty if unreadable).
    pub release: String,
}

/// A compiled frame named by its nmethod's outer method: the fallback when no symbolizer agent
/// gives inlining detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledFrame {
    /// The compiled (outer) method.
    pub method: JavaMethod,
    /// Its Method*.
    pub method_ptr: u64,
    /// The nmethod's compile id.
    pub compile_id: u32,
    /// The tier: 1-3 C1, 4 C2, 0 for a native method's wrapper.
    pub comp_level: u8,
    /// The nmethod (CodeBlob*).
    pub nmethod: u64,
    /// First byte of its instructions.
    pub code_begin: u64,
    /// One past the last byte of its instructions.
    pub code_end: u64,
}

/// One HotSpot JVM process, read from outside through its [`Memory`].
#[derive(Debug)]
pub struct HotSpot {
    pid: u32,
    mem: Box<dyn Memory>,
    vm: VmStructs,
    version: JdkVersion,
    methods: MethodReader,
    code: CodeCache,
    /// Where nmethods keep their debug information, or why it is not known for this JVM.
    scope_layout: Result<ScopeLayout, HotSpotError>,
    threads: ThreadReader,
    /// What the first word of a plain JavaThread holds, if libjvm names its vtable.
    java_thread_vtable: Option<u64>,
    flags: Flags,
}

impl HotSpot {
    /// Finds libjvm in process `pid` and reads its tables, version, code cache and flags.
    /// `HotSpotError::NotReady` means the JVM is still starting: try again a little later.
    pub fn open(pid: u32) -> Result<HotSpot, HotSpotError> {
        let maps_path = format!("/proc/{pid}/maps");
        let maps = std::fs::read_to_string(&maps_path).map_err(|e| HotSpotError::Process {
            pid,
            reason: format!("cannot read {maps_path}: {e}"),
        })?;
        let maps = maps::parse_maps(&maps);
        let libjvm = Libjvm::find(pid, &maps, &libjvm_symbols())?;
        let mem = ProcessMemory::new(pid);
        let vm = match (libjvm.file, crate::proc_files::memory_writers(pid)) {
            (Some(file), Some(writers)) => TABLES.get_or_read(file, writers, &mem, &libjvm)?,
            _ => VmStructs::read(&mem, &libjvm)?,
        };
        HotSpot::with_tables(pid, Box::new(mem), &libjvm, vm)
    }

    /// Reads the JVM `pid` whose memory is `mem` and whose libjvm is `libjvm` (its symbols among
    /// [`libjvm_symbols`]): its tables, version, code cache and flags.
    pub fn read(pid: u32, mem: Box<dyn Memory>, libjvm: &Libjvm) -> Result<HotSpot, HotSpotError> {
        let vm = VmStructs::read(&*mem, libjvm)?;
        HotSpot::with_tables(pid, mem, libjvm, vm)
    }

    /// [`HotSpot::read`], with the tables `vm` already read.
    fn with_tables(
        pid: u32,
        mem: Box<dyn Memory>,
        libjvm: &Libjvm,
        vm: VmStructs,
    ) -> Result<HotSpot, HotSpotError> {
        let version = read_version(&*mem, &vm)?;
        unwind::check_interpreter_layout(&vm)?;
        let methods = MethodReader::new(
            &vm,
            libjvm.require(METHOD_VTABLE_SYMBOL)?,
            shared_range(&*mem, &vm),
        )?;
        let code = CodeCache::read(&*mem, &vm, libjvm.read_only.clone())?;
        let scope_layout = ScopeLayout::read(&vm, version.major);
        let threads = ThreadReader::new(&vm)?;
        let java_thread_vtable = libjvm
            .symbol(JAVA_THREAD_VTABLE_SYMBOL)
            .map(|vtable| vtable.wrapping_add(VTABLE_ADDRESS_POINT));
        let flags = Flags::read(&*mem, &vm)?;
        Ok(HotSpot {
            pid,
            mem,
            vm,
            version,
            methods,
            code,
            scope_layout,
            threads,
            java_thread_vtable,
            flags,
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The JVM's version.
    pub fn version(&self) -> &JdkVersion {
        &self.version
    }

    /// The parsed VMStructs tables.
    pub fn vmstructs(&self) -> &VmStructs {
        &self.vm
    }

    /// The target's memory.
    pub fn memory(&self) -> &dyn Memory {
        &*self.mem
    }

    /// The code cache (heap ranges, blobs).
    pub fn code_cache(&self) -> &CodeCache {
        &self.code
    }

    /// Whether `pc` lies in the template interpreter's code.
    pub fn is_interpreter(&self, pc: u64) -> bool {
        self.code.is_interpreter(pc)
    }

    /// Whether `pc` lies in one of the code heaps (JIT code, interpreter, stubs, adapters).
    pub fn in_code_cache(&self, pc: u64) -> bool {
        self.code.contains(pc)
    }

    /// The class and name of the method at Method* `method`, or `None` if `method` is not a
    /// readable Method (the caller shows `[unknown]`).
    pub fn method(&self, method: u64) -> Option<JavaMethod> {
        self.methods.name(&*self.mem, method)
    }

    /// The code blob holding `pc`.
    pub fn blob_at(&self, pc: u64) -> Option<CodeBlob> {
        self.code.blob_at(&*self.mem, pc)
    }

    /// [`HotSpot::blob_at`] when the blob at `near` held `pc` before: in one read while it
    /// still does ([`CodeCache::blob_at_near`]).
    pub fn blob_at_near(&self, pc: u64, near: u64) -> Option<CodeBlob> {
        self.code.blob_at_near(&*self.mem, pc, near)
    }

    /// The name of the code blob holding `pc`: `nmethod`, `Interpreter`, `StubRoutines (1)`, ...
    pub fn blob_name(&self, pc: u64) -> Option<String> {
        self.blob_at(pc).map(|blob| blob.name)
    }

    /// The compiled method whose code holds `pc`, named by its outer method.
    pub fn compiled_method_at(&self, pc: u64) -> Option<CompiledFrame> {
        self.compiled_method(&self.blob_at(pc)?)
    }

    /// Every compiled method in the code cache now.
    pub fn compiled_methods(&self) -> Vec<CompiledFrame> {
        self.code
            .blobs(&*self.mem)
            .into_iter()
            .filter_map(|blob| self.compiled_method(&blob))
            .collect()
    }

    /// The Method*, compile id and tier of the code blob `blob`, if it is an nmethod.
    pub fn nmethod(&self, blob: &CodeBlob) -> Option<codecache::NMethodInfo> {
        self.code.nmethod(&*self.mem, blob)
    }

    /// The compiled method of the code blob `blob` (found by [`HotSpot::blob_at`]), if it is an
    /// nmethod, named by its outer method.
    pub fn compiled_method(&self, blob: &CodeBlob) -> Option<CompiledFrame> {
        let info = self.nmethod(blob)?;
        Some(CompiledFrame {
            method: self.method(info.method)?,
            method_ptr: info.method,
            compile_id: info.compile_id,
            comp_level: info.comp_level,
            nmethod: blob.address,
            code_begin: blob.code_begin,
            code_end: blob.code_end,
        })
    }

    /// Where this JVM's nmethods keep their debug information, or why it is not known.
    pub fn scope_layout(&self) -> Result<&ScopeLayout, &HotSpotError> {
        self.scope_layout.as_ref()
    }

    /// The debug information of the nmethod `blob`, read now: the methods inlined at each of its
    /// pcs. `None` for another kind of blob, a JVM whose layout is not known, tables that cannot
    /// be read or are implausible, or an nmethod freed while it was read.
    pub fn scopes(&self, blob: &CodeBlob) -> Option<Scopes> {
        self.scope_layout.as_ref().ok()?.scopes(&*self.mem, blob)
    }

    /// The value of boolean JVM flag `name` (`PreserveFramePointer`, `DisableAttachMechanism`,
    /// ...); `None` if this JVM has no such boolean flag.
    pub fn flag_bool(&self, name: &str) -> Option<bool> {
        self.flags.bool(&*self.mem, name)
    }

    /// Whether this JVM has a flag called `name`, of any type.
    pub fn has_flag(&self, name: &str) -> bool {
        self.flags.has(name)
    }

    /// What a stack walker needs to unwind this JVM's frames (see [`UnwindInfo`]).
    pub fn unwind_info(&self) -> Result<UnwindInfo, HotSpotError> {
        UnwindInfo::read(&*self.mem, &self.vm, &self.code, self.java_thread_vtable)
    }

    /// The Java threads alive now, with their OS thread ids and stacks.
    pub fn java_threads(&self) -> Vec<JavaThread> {
        self.threads.threads(&*self.mem)
    }

    /// [`HotSpot::java_threads`], unless they are the very JavaThreads at `known` (in any
    /// order): `None` then, for the cost of reading the list only.
    pub fn java_threads_if_changed(&self, known: &[u64]) -> Option<Vec<JavaThread>> {
        self.threads.threads_if_changed(&*self.mem, known)
    }
}

/// The libjvm symbols [`HotSpot::read`] needs.
pub fn libjvm_symbols() -> Vec<&'static str> {
    let mut wanted = vmstructs::SYMBOLS.to_vec();
    wanted.push(METHOD_VTABLE_SYMBOL);
    wanted.push(JAVA_THREAD_VTABLE_SYMBOL);
    wanted
}

/// The version fields of `Abstract_VM_Version`.
fn read_version(mem: &dyn Memory, vm: &VmStructs) -> Result<JdkVersion, HotSpotError> {
    let int = |field: &str| -> Result<u32, HotSpotError> {
        let addr = vm.static_address("Abstract_VM_Version", field)?;
        mem.read_u32(addr).ok_or(HotSpotError::Unreadable {
            what: "the JVM version",
            addr,
        })
    };
    let major = int("_vm_major_version")?;
    if major == 0 {
        return Err(HotSpotError::NotReady(
            "the VM version is not set yet".into(),
        ));
    }
    if !(8..=1000).contains(&major) {
        return Err(HotSpotError::BadTable(format!(
            "Abstract_VM_Version::_vm_major_version is {major}"
        )));
    }
    let release = vm
        .static_address("Abstract_VM_Version", "_s_vm_release")
        .ok()
        .and_then(|addr| mem.read_u64(addr))
        .and_then(|ptr| mem.read_c_string(ptr, MAX_RELEASE))
        .unwrap_or_default();
    Ok(JdkVersion {
        major,
        minor: int("_vm_minor_version")?,
        security: int("_vm_security_version")?,
        build: int("_vm_build_number")?,
        release,
    })
}

/// The CDS archive's range `[MetaspaceObj::_shared_metaspace_base, _top)`, if there is one.
fn shared_range(mem: &dyn Memory, vm: &VmStructs) -> Option<(u64, u64)> {
    let read = |field| {
        vm.static_address("MetaspaceObj", field)
            .ok()
            .and_then(|addr| mem.read_u64(addr))
    };
    let (base, top) = (
        read("_shared_metaspace_base")?,
        read("_shared_metaspace_top")?,
    );
    (base != 0 && base < top).then_some((base, top))
}

/// Why a JVM could not be read.
#[derive(Debug, Error)]
pub enum HotSpotError {
    /// The process does not exist (any more) or cannot be inspected.
    #[error("process {pid}: {reason}")]
    Process {
        /// The process id.
        pid: u32,
        /// What failed.
        reason: String,
    },
    /// The process has no libjvm.so mapped.
    #[error("process {pid} is not a HotSpot JVM: no libjvm.so in /proc/{pid}/maps")]
    NotAJvm {
        /// The process id.
        pid: u32,
    },
    /// libjvm.so could not be read or lacks a symbol.
    #[error("{path}: {reason}")]
    Elf {
        /// The library's path in the target.
        path: String,
        /// What failed.
        reason: String,
    },
    /// The JVM is still starting: its tables or code heaps are not filled yet.
    #[error("the JVM is not initialised yet ({0}): try again in a moment")]
    NotReady(String),
    /// A VMStructs table holds an implausible value.
    #[error("implausible VMStructs table: {0}")]
    BadTable(String),
    /// Reading it took longer than the time given to it (the caller's budget).
    #[error("reading it took more than {} s, far longer than any HotSpot JVM takes", .0.as_secs())]
    OverBudget(std::time::Duration),
    /// A field or type this reader needs is absent from VMStructs.
    #[error("VMStructs has no {name}: unsupported JDK version")]
    MissingField {
        /// `Type::field` or `sizeof(Type)`.
        name: String,
    },
    /// Target memory could not be read.
    #[error("cannot read {what} at {addr:#x} in the target process")]
    Unreadable {
        /// What was being read.
        what: &'static str,
        /// The address.
        addr: u64,
    },
}

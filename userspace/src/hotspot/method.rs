//! Naming a `Method*`: Method -> ConstMethod -> ConstantPool -> holder Klass -> name Symbol, and
//! the method name through ConstMethod::_name_index into the constant pool. A candidate pointer is
//! first checked to be a Method (its C++ vtable is libjvm's `vtable for Method`, or a clone inside
//! the CDS archive), and every step is bounded.

use std::collections::HashMap;
use std::sync::Mutex;

use joularcode_core::names::binary_class_name;

use super::memory::{array_at, word, ProcessMemory};
use super::vmstructs::VmStructs;
use super::HotSpotError;

/// A Java method, named as Joular names frames.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct JavaMethod {
    /// The binary class name, e.g. `java.lang.Thread` or `a.B$$Lambda/0x0000000800c5898`.
    pub class: String,
    /// The method name, e.g. `run` or `<init>`.
    pub name: String,
}

/// The mangled name of `vtable for Method` in libjvm's symbol tables.
pub const METHOD_VTABLE_SYMBOL: &str = "_ZTV6Method";

/// A vtable symbol points at the offset-to-top and RTTI words; objects point 2 words further.
const VTABLE_ADDRESS_POINT: u64 = 16;

/// Entries kept in the name cache before it is cleared.
const CACHE_LIMIT: usize = 100_000;

/// Offsets and addresses needed to name methods.
#[derive(Debug)]
pub struct MethodReader {
    method_size: u64,
    method_vtable: u64,
    shared_range: Option<(u64, u64)>,
    const_method: u64,
    const_method_size: u64,
    constants: u64,
    name_index: u64,
    pool_holder: u64,
    pool_length: u64,
    pool_size: u64,
    klass_name: u64,
    symbol_length: u64,
    symbol_body: u64,
    cache: Mutex<HashMap<(u64, u64), JavaMethod>>,
}

impl MethodReader {
    /// Reads the offsets from `vm`. `method_vtable` is the address of [`METHOD_VTABLE_SYMBOL`] in
    /// the process, `shared_range` the CDS archive's address range when there is one.
    pub fn new(
        vm: &VmStructs,
        method_vtable: u64,
        shared_range: Option<(u64, u64)>,
    ) -> Result<MethodReader, HotSpotError> {
        Ok(MethodReader {
            method_size: vm.require_size("Method")?,
            method_vtable: method_vtable + VTABLE_ADDRESS_POINT,
            shared_range,
            const_method: vm.offset(&["Method"], "_constMethod", 8)?,
            const_method_size: vm.require_size("ConstMethod")?,
            constants: vm.offset(&["ConstMethod"], "_constants", 8)?,
            name_index: vm.offset(&["ConstMethod"], "_name_index", 2)?,
            pool_holder: vm.offset(&["ConstantPool"], "_pool_holder", 8)?,
            pool_length: vm.offset(&["ConstantPool"], "_length", 4)?,
            pool_size: vm.require_size("ConstantPool")?,
            klass_name: vm.offset(&["Klass"], "_name", 8)?,
            symbol_length: vm.offset(&["Symbol"], "_length", 2)?,
            // The body is a flexible array: only its start must lie within sizeof(Symbol).
            symbol_body: vm.offset(&["Symbol"], "_body", 1)?,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// Whether `vtable` (an object's first word) is that of a Method.
    fn is_method_vtable(&self, vtable: u64) -> bool {
        vtable == self.method_vtable
            || self
                .shared_range
                .is_some_and(|(low, high)| (low..high).contains(&vtable))
    }

    /// The class and name of the method at `method`, or `None` if it is not a readable Method.
    pub fn name(&self, mem: &ProcessMemory, method: u64) -> Option<JavaMethod> {
        if method == 0 || method % 8 != 0 {
            return None;
        }
        let header = mem.read_bytes(method, self.method_size as usize)?;
        if !self.is_method_vtable(word(&header, 0)?) {
            return None;
        }
        let const_method = word(&header, self.const_method)?;
        if const_method == 0 || const_method % 8 != 0 {
            return None;
        }
        let key = (method, const_method);
        if let Some(found) = self.cache.lock().ok()?.get(&key) {
            return Some(found.clone());
        }
        let found = self.read_names(mem, const_method)?;
        let mut cache = self.cache.lock().ok()?;
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(key, found.clone());
        Some(found)
    }

    fn read_names(&self, mem: &ProcessMemory, const_method: u64) -> Option<JavaMethod> {
        let cm = mem.read_bytes(const_method, self.const_method_size as usize)?;
        let pool = word(&cm, self.constants)?;
        let name_index = u64::from(u16::from_ne_bytes(array_at(&cm, self.name_index)?));
        if pool == 0 || pool % 8 != 0 {
            return None;
        }
        let cp = mem.read_bytes(pool, self.pool_size as usize)?;
        let holder = word(&cp, self.pool_holder)?;
        let length = u64::from(u32::from_ne_bytes(array_at(&cp, self.pool_length)?));
        if name_index == 0 || name_index >= length || holder == 0 || holder % 8 != 0 {
            return None;
        }
        let name_symbol = mem.read_u64(pool + self.pool_size + 8 * name_index)? & !1;
        let class_symbol = mem.read_u64(holder + self.klass_name)?;
        Some(JavaMethod {
            class: binary_class_name(&self.symbol(mem, class_symbol)?),
            name: self.symbol(mem, name_symbol)?,
        })
    }

    /// The text of the Symbol at `symbol` (at most 65535 bytes: its length is a u16).
    fn symbol(&self, mem: &ProcessMemory, symbol: u64) -> Option<String> {
        if symbol == 0 || symbol % 2 != 0 {
            return None;
        }
        let length = mem.read_u16(symbol + self.symbol_length)?;
        if length == 0 {
            return None;
        }
        let body = mem.read_bytes(symbol + self.symbol_body, usize::from(length))?;
        Some(String::from_utf8_lossy(&body).into_owned())
    }
}

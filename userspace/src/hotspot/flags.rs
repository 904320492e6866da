//! JVM flags (`-XX:...`), read by name from HotSpot's JVMFlag table: `JVMFlag::flags` is an array
//! of `JVMFlag::numFlags` entries, each with `_name` and `_addr` (the flag's variable in libjvm).

use std::collections::HashMap;

use super::memory::{array_at, word, Memory};
use super::vmstructs::VmStructs;
use super::HotSpotError;

/// More flags than any HotSpot has (JDK 25 has about 1,300 in a product build).
const MAX_FLAGS: u64 = 8192;
/// Longest flag name read.
const MAX_FLAG_NAME: usize = 128;
/// `JVMFlag::TYPE_bool`: the first of JVMFlag's type enumeration (JDK 16+).
const TYPE_BOOL: i32 = 0;

/// Where one flag's value lives.
#[derive(Debug, Clone, Copy)]
struct FlagEntry {
    addr: u64,
    /// The flag's type number, when VMStructs has `JVMFlag::_type`.
    kind: Option<i32>,
}

/// The flags of one JVM, by name. Their values are read on each call: some change at run time.
#[derive(Debug)]
pub struct Flags {
    entries: HashMap<String, FlagEntry>,
}

impl Flags {
    /// Reads the flag table's names and value addresses.
    pub fn read(mem: &dyn Memory, vm: &VmStructs) -> Result<Flags, HotSpotError> {
        let unreadable = |addr| HotSpotError::Unreadable {
            what: "the JVMFlag table",
            addr,
        };
        let flags_var = vm.static_address("JVMFlag", "flags")?;
        let count_var = vm.static_address("JVMFlag", "numFlags")?;
        let table = mem.read_u64(flags_var).ok_or(unreadable(flags_var))?;
        let count = mem.read_u64(count_var).ok_or(unreadable(count_var))?;
        if table == 0 || count == 0 {
            return Err(HotSpotError::NotReady(
                "JVMFlag::flags is not set yet".into(),
            ));
        }
        if count > MAX_FLAGS {
            return Err(HotSpotError::BadTable(format!(
                "JVMFlag::numFlags is {count}, more than {MAX_FLAGS}"
            )));
        }
        let stride = vm.require_size("JVMFlag")?;
        let name_at = vm.offset(&["JVMFlag"], "_name", 8)?;
        let addr_at = vm.offset(&["JVMFlag"], "_addr", 8)?;
        let type_at = vm.offset(&["JVMFlag"], "_type", 4).ok();
        let bytes = mem
            .read_bytes(table, (count * stride) as usize)
            .ok_or(unreadable(table))?;
        let mut entries = HashMap::new();
        for entry in bytes.chunks_exact(stride as usize) {
            let (Some(name_ptr), Some(addr)) = (word(entry, name_at), word(entry, addr_at)) else {
                continue;
            };
            if name_ptr == 0 || addr == 0 {
                continue;
            }
            let Some(name) = mem.read_c_string(name_ptr, MAX_FLAG_NAME) else {
                continue;
            };
            let kind = type_at.and_then(|at| array_at(entry, at).map(i32::from_ne_bytes));
            entries.insert(name, FlagEntry { addr, kind });
        }
        Ok(Flags { entries })
    }

    /// The value of boolean flag `name`; `None` if the JVM has no such flag, it is not a boolean,
    /// or its value cannot be read.
    pub fn bool(&self, mem: &dyn Memory, name: &str) -> Option<bool> {
        let entry = self.entries.get(name)?;
        if entry.kind.is_some_and(|kind| kind != TYPE_BOOL) {
            return None;
        }
        match mem.read_u8(entry.addr)? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }

    /// Whether the JVM has a flag called `name`.
    pub fn has(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }
}

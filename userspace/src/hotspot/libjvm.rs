//! Finding `libjvm.so` in a process and the addresses of its symbols there: the ELF file is read
//! through `/proc/PID/map_files/...` (or `/proc/PID/root/<path>`), so it works for JVMs in
//! containers and for deleted libraries.

use std::collections::HashMap;
use std::path::PathBuf;

use object::{Object, ObjectSegment, ObjectSymbol};

use super::maps::Mapping;
use super::HotSpotError;

/// The file name that identifies the HotSpot library in `/proc/PID/maps`.
const LIBJVM: &str = "/libjvm.so";
/// What /proc/PID/maps appends to the path of a file deleted since it was mapped (a JDK updated
/// under a running JVM): such a library is still readable through /proc/PID/map_files.
const DELETED: &str = " (deleted)";

/// libjvm as loaded in one process. The file is read whole (about 20 MB) and dropped once its
/// symbols are resolved: parsing it in memory is many times faster than through small reads.
#[derive(Debug)]
pub struct Libjvm {
    /// The path as the target process sees it.
    pub path: String,
    /// Added to an ELF virtual address to get the address in the process.
    pub bias: u64,
    symbols: HashMap<String, u64>,
}

/// The largest libjvm.so read (they are about 20 MB).
const MAX_LIBJVM: u64 = 256 << 20;

impl Libjvm {
    /// Finds libjvm among `maps` and resolves `wanted` symbols from its `.dynsym` and `.symtab`.
    /// Symbols that are absent are simply not in the result.
    pub fn find(pid: u32, maps: &[Mapping], wanted: &[&str]) -> Result<Libjvm, HotSpotError> {
        let first = maps
            .iter()
            .find(|m| m.path.trim_end_matches(DELETED).ends_with(LIBJVM) && m.offset == 0)
            .ok_or(HotSpotError::NotAJvm { pid })?;
        // map_files is the very file mapped (needs CAP_SYS_ADMIN); the path through the
        // target's root is the fallback, which could be a newer file if the JDK was updated.
        let candidates = [
            first.map_file(pid),
            PathBuf::from(format!("/proc/{pid}/root{}", first.path)),
        ];
        // The JVM's owner chooses what it maps: only a regular file of a library's size is read.
        let data = candidates
            .iter()
            .find_map(|path| crate::foreign::read_mapped_file(path, MAX_LIBJVM).ok())
            .ok_or_else(|| HotSpotError::Elf {
                path: first.path.clone(),
                reason: format!(
                    "cannot open it as {} or {}: run as root (CAP_SYS_PTRACE, CAP_SYS_ADMIN)",
                    candidates[0].display(),
                    candidates[1].display()
                ),
            })?;
        let elf_error = |reason: String| HotSpotError::Elf {
            path: first.path.clone(),
            reason,
        };
        let elf = object::File::parse(&*data).map_err(|e| elf_error(e.to_string()))?;
        let first_vaddr = elf
            .segments()
            .filter(|s| s.file_range().0 == 0)
            .map(|s| s.address() & !0xfff)
            .min()
            .ok_or_else(|| elf_error("no loadable segment at file offset 0".into()))?;
        let bias = first.start.wrapping_sub(first_vaddr);
        let mut symbols = HashMap::new();
        for symbol in elf.dynamic_symbols().chain(elf.symbols()) {
            if let Ok(name) = symbol.name() {
                if symbol.address() != 0 && wanted.contains(&name) {
                    symbols
                        .entry(name.to_string())
                        .or_insert(symbol.address().wrapping_add(bias));
                }
            }
        }
        Ok(Libjvm {
            path: first.path.clone(),
            bias,
            symbols,
        })
    }

    /// A libjvm whose symbols are at the given addresses: for tests on fake tables.
    #[cfg(test)]
    pub(crate) fn with_symbols(symbols: HashMap<String, u64>) -> Libjvm {
        Libjvm {
            path: "/fake/libjvm.so".into(),
            bias: 0,
            symbols,
        }
    }

    /// The address of `name` in the process, if libjvm has it.
    pub fn symbol(&self, name: &str) -> Option<u64> {
        self.symbols.get(name).copied()
    }

    /// The address of `name`, or an error naming the symbol.
    pub fn require(&self, name: &str) -> Result<u64, HotSpotError> {
        self.symbol(name).ok_or_else(|| HotSpotError::Elf {
            path: self.path.clone(),
            reason: format!(
                "symbol {name} not found: not a HotSpot JVM with serviceability support"
            ),
        })
    }
}

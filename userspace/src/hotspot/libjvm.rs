//! Finding `libjvm.so` in a process and the addresses of its symbols there: the ELF file is read
//! through `/proc/PID/map_files/...` (or `/proc/PID/root/<path>`), so it works for JVMs in
//! containers and for deleted libraries.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use object::{Object, ObjectSegment, ObjectSymbol};

use super::maps::Mapping;
use super::HotSpotError;
use crate::foreign::FileIdentity;
use crate::proc_files;

/// libjvm as loaded in one process. The file is read whole (about 20 MB) and dropped once its
/// symbols are resolved: parsing it in memory is many times faster than through small reads. What
/// a file gives is kept ([`ElfCache`]), so that the JVMs of one JDK read it once.
#[derive(Debug)]
pub struct Libjvm {
    /// The path as the target process sees it.
    pub path: String,
    /// Added to an ELF virtual address to get the address in the process.
    pub bias: u64,
    /// The file read (`None` for tables made by hand).
    pub file: Option<FileIdentity>,
    /// Where the process maps it without write permission, `[start, end)`: its code and
    /// constants, which do not change while it is mapped.
    pub read_only: Vec<(u64, u64)>,
    symbols: HashMap<String, u64>,
}

/// The largest libjvm.so read (they are about 20 MB).
const MAX_LIBJVM: u64 = 256 << 20;

/// The libjvm files of the host's JDKs read so far.
static ELF_CACHE: ElfCache = ElfCache::new();

/// What one libjvm file gives, whatever process maps it: the virtual address of its first
/// segment, the file offset (page) of its last segment, and the addresses (not biased) of the
/// symbols asked for.
#[derive(Debug, PartialEq, Eq)]
struct ElfSymbols {
    first_vaddr: u64,
    last_offset: u64,
    addresses: HashMap<String, u64>,
}

/// Why an ELF file gives no [`ElfSymbols`].
#[derive(Debug, thiserror::Error)]
enum ElfError {
    /// It is not an ELF file the parser reads.
    #[error("{0}")]
    Parse(#[from] object::Error),
    /// It has no segment that maps its start.
    #[error("no loadable segment at file offset 0")]
    NoFirstSegment,
}

impl ElfSymbols {
    /// Reads the first segment's address and the `wanted` symbols of an ELF file in memory.
    fn parse(data: &[u8], wanted: &[&str]) -> Result<ElfSymbols, ElfError> {
        let elf = object::File::parse(data)?;
        let first_vaddr = elf
            .segments()
            .filter(|s| s.file_range().0 == 0)
            .map(|s| s.address() & !0xfff)
            .min()
            .ok_or(ElfError::NoFirstSegment)?;
        let last_offset = elf
            .segments()
            .map(|s| s.file_range().0 & !0xfff)
            .max()
            .unwrap_or(0);
        let mut addresses = HashMap::new();
        for symbol in elf.dynamic_symbols().chain(elf.symbols()) {
            if let Ok(name) = symbol.name() {
                if symbol.address() != 0 && wanted.contains(&name) {
                    addresses
                        .entry(name.to_string())
                        .or_insert(symbol.address());
                }
            }
        }
        Ok(ElfSymbols {
            first_vaddr,
            last_offset,
            addresses,
        })
    }
}

/// The [`ElfSymbols`] of the last few libjvm files read, by file identity (device, inode, size,
/// change time: a file written or replaced since is read again). A host runs a few JDKs; each
/// new JVM of one of them then costs no read of its 20 MB.
struct ElfCache {
    entries: Mutex<Vec<CacheEntry>>,
}

/// One file's symbols, for one list of wanted names.
type CacheEntry = (FileIdentity, Vec<String>, Arc<ElfSymbols>);

/// The most libjvm files kept (a host's JDKs).
const ELF_CACHE_FILES: usize = 8;

impl ElfCache {
    const fn new() -> ElfCache {
        ElfCache {
            entries: Mutex::new(Vec::new()),
        }
    }

    fn get(&self, file: FileIdentity, wanted: &[&str]) -> Option<Arc<ElfSymbols>> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .iter()
            .find(|(id, names, _)| *id == file && names.iter().eq(wanted.iter()))
            .map(|(_, _, symbols)| symbols.clone())
    }

    fn put(&self, file: FileIdentity, wanted: &[&str], symbols: Arc<ElfSymbols>) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|(id, _, _)| *id != file);
        if entries.len() >= ELF_CACHE_FILES {
            entries.remove(0);
        }
        let names = wanted.iter().map(|name| name.to_string()).collect();
        entries.push((file, names, symbols));
    }
}

impl Libjvm {
    /// Finds libjvm among `maps` and resolves `wanted` symbols from its `.dynsym` and `.symtab`.
    /// Symbols that are absent are simply not in the result.
    pub fn find(pid: u32, maps: &[Mapping], wanted: &[&str]) -> Result<Libjvm, HotSpotError> {
        let first = maps
            .iter()
            .find(|m| proc_files::maps_libjvm(m.path.as_bytes()) && m.offset == 0)
            .ok_or(HotSpotError::NotAJvm { pid })?;
        // map_files is the very file mapped (needs CAP_SYS_ADMIN); the path through the
        // target's root is the fallback, which could be a newer file if the JDK was updated.
        let candidates = [
            first.map_file(pid),
            PathBuf::from(format!("/proc/{pid}/root{}", first.path)),
        ];
        // The JVM's owner chooses what it maps: only a regular file of a library's size is read.
        let file = candidates
            .iter()
            .find_map(|path| crate::foreign::open_mapped_file(path, MAX_LIBJVM).ok())
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
        let symbols = match ELF_CACHE.get(file.identity(), wanted) {
            Some(symbols) => symbols,
            None => {
                let data = file.read().map_err(|e| elf_error(e.to_string()))?;
                let symbols = Arc::new(
                    ElfSymbols::parse(&data, wanted).map_err(|e| elf_error(e.to_string()))?,
                );
                ELF_CACHE.put(file.identity(), wanted, symbols.clone());
                symbols
            }
        };
        // The loader reserves the whole library mapped from offset 0, then maps each segment
        // over it: until the last one is, what lies at a symbol's address is other bytes of
        // the file (a VMStructs stride read there was 4598480)
        if !maps
            .iter()
            .any(|m| m.path == first.path && m.offset == symbols.last_offset)
        {
            return Err(HotSpotError::NotReady(
                "libjvm.so is still being mapped".into(),
            ));
        }
        let bias = first.start.wrapping_sub(symbols.first_vaddr);
        let symbols = symbols
            .addresses
            .iter()
            .map(|(name, &address)| (name.clone(), address.wrapping_add(bias)))
            .collect();
        let read_only = maps
            .iter()
            .filter(|m| m.path == first.path && !m.perms.contains('w'))
            .map(|m| (m.start, m.end))
            .collect();
        Ok(Libjvm {
            path: first.path.clone(),
            bias,
            file: Some(file.identity()),
            read_only,
            symbols,
        })
    }

    /// A libjvm whose symbols are at the given addresses: for the tests and the fuzz target
    /// that read fake memory images.
    pub fn with_symbols(symbols: HashMap<String, u64>) -> Libjvm {
        Libjvm {
            path: "/fake/libjvm.so".into(),
            bias: 0,
            file: None,
            read_only: Vec::new(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_parsed_once_per_identity_and_list_of_names() {
        let data = std::fs::read("/proc/self/exe").unwrap();
        let wanted = ["main", "no_such_symbol"];
        let symbols = Arc::new(ElfSymbols::parse(&data, &wanted).unwrap());
        assert!(symbols.addresses.contains_key("main"));
        // This very file is mapped whole, its last segment at the offset read from it.
        let maps =
            super::super::maps::parse_maps(&std::fs::read_to_string("/proc/self/maps").unwrap());
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert!(
            maps.iter()
                .any(|m| std::path::Path::new(&m.path) == exe && m.offset == symbols.last_offset),
            "no mapping of {} at {:#x}",
            exe.display(),
            symbols.last_offset
        );
        assert!(!symbols.addresses.contains_key("no_such_symbol"));

        let cache = ElfCache::new();
        let id: FileIdentity = (1, 2, 3, 4, 5);
        assert!(cache.get(id, &wanted).is_none());
        cache.put(id, &wanted, symbols.clone());
        assert_eq!(cache.get(id, &wanted), Some(symbols.clone()));
        // Another change time (the file was written since), or other names: read again.
        assert!(cache.get((1, 2, 3, 4, 6), &wanted).is_none());
        assert!(cache.get(id, &["main"]).is_none());
        // Bounded: the oldest file goes first.
        for ino in 10..10 + ELF_CACHE_FILES as u64 {
            cache.put((1, ino, 3, 4, 5), &wanted, symbols.clone());
        }
        assert!(cache.get(id, &wanted).is_none());
        assert!(cache.get((1, 10, 3, 4, 5), &wanted).is_some());
    }
}

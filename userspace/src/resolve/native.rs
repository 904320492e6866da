//! Names of native frames (libjvm.so, libc, JNI libraries) from their ELF symbols, through
//! blazesym, for `--native` output. Names are demangled (`G1ParScanThreadState::trim_queue`) and
//! cached per address: a library's code does not move while it stays mapped.

use std::collections::HashMap;
use std::sync::Arc;

use blazesym::symbolize::source::{Process, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};

use joularcode_core::branch::UNKNOWN;

/// Most addresses cached before the cache starts afresh (libraries unloaded with dlclose would
/// otherwise keep stale names forever).
const MAX_CACHED: usize = 200_000;

/// The native symbols of one process.
pub struct NativeNames {
    pid: u32,
    symbolizer: Symbolizer,
    cache: HashMap<u64, Arc<str>>,
    unknown: Arc<str>,
}

impl std::fmt::Debug for NativeNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeNames")
            .field("pid", &self.pid)
            .field("cached", &self.cache.len())
            .finish()
    }
}

impl NativeNames {
    /// Names for the native code of process `pid`. Nothing is read before the first lookup.
    pub fn new(pid: u32) -> NativeNames {
        NativeNames {
            pid,
            symbolizer: Symbolizer::builder()
                .enable_code_info(false)
                .enable_inlined_fns(false)
                .enable_demangling(true)
                .build(),
            cache: HashMap::new(),
            unknown: UNKNOWN.into(),
        }
    }

    /// The function names at `pcs` (each the address of an instruction: for a caller frame, pass
    /// its return address minus one), in the same order; `[unknown]` where no symbol covers one.
    pub fn names(&mut self, pcs: &[u64]) -> Vec<Arc<str>> {
        let missing: Vec<u64> = pcs
            .iter()
            .copied()
            .filter(|pc| !self.cache.contains_key(pc))
            .collect();
        if !missing.is_empty() {
            if self.cache.len() + missing.len() > MAX_CACHED {
                self.cache.clear();
            }
            let mut process = Process::new(self.pid.into());
            process.debug_syms = false;
            process.perf_map = false;
            let source = Source::Process(process);
            let names: Vec<Arc<str>> =
                match self.symbolizer.symbolize(&source, Input::AbsAddr(&missing)) {
                    Ok(symbols) => symbols
                        .iter()
                        .map(|symbol| match symbol {
                            Symbolized::Sym(sym) => Arc::from(&*sym.name),
                            Symbolized::Unknown(_) => self.unknown.clone(),
                        })
                        .collect(),
                    Err(_) => vec![self.unknown.clone(); missing.len()],
                };
            self.cache.extend(missing.into_iter().zip(names));
        }
        pcs.iter()
            .map(|pc| {
                self.cache
                    .get(pc)
                    .cloned()
                    .unwrap_or_else(|| self.unknown.clone())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn a_native_function() -> u64 {
        a_native_function as *const () as usize as u64
    }

    #[test]
    #[cfg_attr(
        not(feature = "e2e"),
        ignore = "needs root (/proc/PID/map_files): scripts/test.sh runs it, or cargo test --features e2e as root"
    )]
    fn names_this_process_functions_and_unknown_addresses() {
        let mut names = NativeNames::new(std::process::id());
        let pc = a_native_function() + 1;
        let found = names.names(&[pc, 8]);
        assert!(
            found[0].contains("a_native_function"),
            "named {:?}",
            found[0]
        );
        assert_eq!(&*found[1], UNKNOWN);
        // Cached: the same answer again.
        assert_eq!(names.names(&[pc]), vec![found[0].clone()]);
    }
}

//! Compiled frames named from their nmethod's debug information in memory (`hotspot::scopes`):
//! the compiled method and the methods inlined into it at the frame's pc, when no agent's code
//! map names the code. Each nmethod's tables are read once and kept while samples need them.

use std::collections::HashMap;

use joularcode_core::branch::Branches;

use super::{Named, Pc, Resolver};
use crate::hotspot::scopes::{PcDesc, Scopes};
use crate::hotspot::{CodeBlob, CompiledFrame, JavaMethod};
use crate::sampler::monotonic_ns;

/// Most bytes of nmethod tables kept for one JVM (a JVM's compiled code holds some MB of them).
const MAX_BYTES: usize = 64 << 20;

/// The tables of the nmethods met, by nmethod and compile id: a freed nmethod's address given to
/// new code comes with a new compile id, so a key never names other code. Entries no sample used
/// for a while (their code was freed, or is cold) are dropped ([`ScopeCache::forget_unused`]),
/// and the whole cache past [`MAX_BYTES`].
#[derive(Debug, Default)]
pub(super) struct ScopeCache {
    entries: HashMap<(u64, u32), (Scopes, u64)>,
    bytes: usize,
}

impl ScopeCache {
    /// The tables of the nmethod of `compiled` (with its compile id), read by `read` when not
    /// known yet.
    fn get(
        &mut self,
        read: impl FnOnce() -> Option<Scopes>,
        compiled: &CompiledFrame,
        now_ns: u64,
    ) -> Option<&Scopes> {
        let key = (compiled.nmethod, compiled.compile_id);
        if !self.entries.contains_key(&key) {
            let scopes = read().filter(|s| s.compile_id == compiled.compile_id)?;
            let bytes = size_of(&scopes);
            if self.bytes + bytes > MAX_BYTES {
                self.entries.clear();
                self.bytes = 0;
            }
            self.bytes += bytes;
            self.entries.insert(key, (scopes, now_ns));
        }
        let (scopes, used) = self.entries.get_mut(&key)?;
        *used = now_ns;
        Some(scopes)
    }

    /// Drops the tables no sample used since `cutoff_ns`.
    pub(super) fn forget_unused(&mut self, cutoff_ns: u64) {
        self.entries.retain(|_, (_, used)| *used >= cutoff_ns);
        self.bytes = self.entries.values().map(|(s, _)| size_of(s)).sum();
    }
}

/// Bytes held for `scopes`.
fn size_of(scopes: &Scopes) -> usize {
    let info = &scopes.info;
    info.pcs.len() * std::mem::size_of::<PcDesc>() + info.data.len() + info.metadata.len() * 8
}

impl Resolver {
    /// A frame named from its nmethod in the code cache: the methods inlined at `pc` from the
    /// nmethod's scopes, innermost first, then the compiled method; the compiled method alone
    /// when the scopes cannot name them all.
    pub(super) fn named_by_nmethod(
        &mut self,
        blob: &CodeBlob,
        compiled: &CompiledFrame,
        pc: Pc,
        time_ns: u64,
        branches: &mut Branches,
    ) -> Named {
        self.tally.code_cache_frames += 1;
        match self.scope_names(blob, compiled, pc, time_ns) {
            Some(names) => {
                for name in &names {
                    self.frames.push(branches, &name.class, &name.name);
                }
                self.tally.inlined_frames += names.len().saturating_sub(1) as u64;
            }
            None => self
                .frames
                .push(branches, &compiled.method.class, &compiled.method.name),
        }
        Named::Frames
    }

    /// The methods of `compiled` at `pc` from its nmethod's scopes, innermost first; `None` when
    /// the scopes cannot name them all.
    fn scope_names(
        &mut self,
        blob: &CodeBlob,
        compiled: &CompiledFrame,
        pc: Pc,
        time_ns: u64,
    ) -> Option<Vec<JavaMethod>> {
        let hotspot = &self.hotspot;
        let chain = self
            .scopes
            .get(|| hotspot.scopes(blob), compiled, monotonic_ns())
            .and_then(|scopes| scopes.at(pc.debug_info_address()))?;
        // The outermost scope is the compiled method itself.
        if chain.last().map(|scope| scope.method) != Some(compiled.method_ptr) {
            return None;
        }
        chain
            .iter()
            .map(|scope| self.method_at(scope.method, time_ns))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hotspot::scopes::{DebugInfo, Encoding};
    use crate::hotspot::JavaMethod;

    /// The compiled frame of the nmethod at `nmethod` with compile id `compile_id`.
    fn compiled(nmethod: u64, compile_id: u32) -> CompiledFrame {
        CompiledFrame {
            method: JavaMethod {
                class: "demo.Hot".into(),
                name: "compute".into(),
            },
            method_ptr: 0x1000,
            compile_id,
            comp_level: 4,
            nmethod,
            code_begin: nmethod + 0x100,
            code_end: nmethod + 0x200,
        }
    }

    /// Tables of `data_len` bytes of scopes data, as read for `compiled`.
    fn scopes(compiled: &CompiledFrame, data_len: usize) -> Option<Scopes> {
        Some(Scopes {
            nmethod: compiled.nmethod,
            compile_id: compiled.compile_id,
            code_begin: compiled.code_begin,
            info: DebugInfo {
                pcs: Vec::new(),
                data: vec![0xFF; data_len],
                metadata: vec![compiled.method_ptr],
                method: compiled.method_ptr,
                encoding: Encoding::Unsigned5,
            },
        })
    }

    #[test]
    fn an_nmethods_tables_are_read_once_per_compile_id_and_dropped_unused() {
        let mut cache = ScopeCache::default();
        let first = compiled(0x10_000, 7);
        assert!(cache.get(|| scopes(&first, 100), &first, 10).is_some());
        // Known: not read again.
        assert!(cache.get(|| panic!("read again"), &first, 20).is_some());
        // The same address, other code: read afresh; tables of another compile id are refused.
        let reused = compiled(0x10_000, 8);
        assert!(cache.get(|| scopes(&first, 100), &reused, 30).is_none());
        assert!(cache.get(|| scopes(&reused, 50), &reused, 30).is_some());
        assert_eq!(cache.entries.len(), 2);
        // The first nmethod's tables, unused since 20, go.
        cache.forget_unused(25);
        assert_eq!(cache.entries.len(), 1);
        assert_eq!(cache.bytes, 50 + 8);
    }

    #[test]
    fn the_tables_kept_are_bounded() {
        let mut cache = ScopeCache::default();
        for nmethod in 1..=5 {
            let frame = compiled(nmethod << 20, 1);
            assert!(cache
                .get(|| scopes(&frame, MAX_BYTES / 3), &frame, 1)
                .is_some());
            assert!(cache.bytes <= MAX_BYTES, "{} bytes", cache.bytes);
        }
        assert!(cache.entries.len() < 5);
    }
}

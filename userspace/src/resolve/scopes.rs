//! Compiled frames named from their nmethod's debug information in memory (`hotspot::scopes`):
//! the compiled method and the methods inlined into it at the frame's pc, when no agent's code
//! map names the code. Each nmethod's tables are read once and kept while samples need them.

use std::collections::HashMap;

use joularcode_core::branch::Branches;

use super::{Pc, Resolver};
use crate::hotspot::scopes::{PcDesc, Scopes};
use crate::hotspot::{CodeBlob, CompiledFrame};
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
    /// Pushes the frames of `compiled` at `pc` from its nmethod's scopes: the methods inlined at
    /// that pc, innermost first, then the compiled method. False (and nothing pushed) when the
    /// scopes cannot name them all.
    pub(super) fn scoped(
        &mut self,
        blob: &CodeBlob,
        compiled: &CompiledFrame,
        pc: Pc,
        time_ns: u64,
        branches: &mut Branches,
    ) -> bool {
        let hotspot = &self.hotspot;
        let Some(chain) = self
            .scopes
            .get(|| hotspot.scopes(blob), compiled, monotonic_ns())
            .and_then(|scopes| scopes.at(pc.debug_info_address()))
        else {
            return false;
        };
        // The outermost scope is the compiled method itself.
        if chain.last().map(|scope| scope.method) != Some(compiled.method_ptr) {
            return false;
        }
        let mut names = Vec::with_capacity(chain.len());
        for scope in &chain {
            match self.method_at(scope.method, time_ns) {
                Some(name) => names.push(name),
                None => return false,
            }
        }
        for name in &names {
            self.frames.push(branches, &name.class, &name.name);
        }
        self.tally.inlined_frames += names.len().saturating_sub(1) as u64;
        true
    }
}

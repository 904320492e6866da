//! The methods inlined at a pc of compiled code, read from the nmethod's own debug information in
//! the target's memory, as HotSpot's samplers read it: its PcDescs, its scopes data and its
//! metadata table ([`decode`] turns them into chains of `(Method*, bci)`). Where these tables lie
//! differs by JDK, and is found through VMStructs ([`ScopeLayout`]); see docs/hotspot.md.
//!
//! Everything read is untrusted: every table is bounded by [`MAX_TABLE`] bytes, its bounds must
//! lie in order, and the nmethod's header is read again once its tables are read: a different
//! compile id, or tables that moved, mean the nmethod was freed meanwhile (its memory given to
//! other code), and nothing is returned.

pub mod decode;

use super::codecache::CodeBlob;
use super::memory::{array_at, word, Memory};
use super::vmstructs::VmStructs;
use super::HotSpotError;
pub use decode::{DebugInfo, Encoding, PcDesc, Scope, MAX_DEPTH};

/// Most bytes of one table (PcDescs, scopes data, metadata) read: a large C2 method compiled with
/// a PcDesc at every instruction has some tens of KB of each.
pub const MAX_TABLE: u64 = 1 << 20;

/// Where one bound of a table lies, from an nmethod's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// The header field holding the base address (a pointer); `None`: the nmethod itself.
    pub base: Option<u64>,
    /// The header field holding an int32 added to the base; `None`: nothing added.
    pub plus: Option<u64>,
}

impl Bound {
    /// The address this bound gives for the nmethod at `nmethod` whose header is `header`.
    fn address(self, nmethod: u64, header: &[u8]) -> Option<u64> {
        let base = match self.base {
            Some(field) => word(header, field)?,
            None => nmethod,
        };
        let plus = match self.plus {
            Some(field) => u64::try_from(i32::from_ne_bytes(array_at(header, field)?)).ok()?,
            None => 0,
        };
        base.checked_add(plus)
    }
}

/// Where one table lies: `[begin, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Table {
    /// Its first byte.
    pub begin: Bound,
    /// One past its last byte (or past what follows it: a bound above the table is enough).
    pub end: Bound,
}

impl Table {
    /// The table's range in the nmethod at `nmethod` whose header is `header`, if its bounds are
    /// in order and it is at most [`MAX_TABLE`] bytes.
    fn range(self, nmethod: u64, header: &[u8]) -> Option<(u64, usize)> {
        let begin = self.begin.address(nmethod, header)?;
        let end = self.end.address(nmethod, header)?;
        let len = end.checked_sub(begin).filter(|&len| len <= MAX_TABLE)?;
        Some((begin, usize::try_from(len).ok()?))
    }
}

/// What identifies an nmethod's code and tables, from its header: it changes when the nmethod is
/// freed and its memory given to other code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Place {
    compile_id: u32,
    method: u64,
    pcs: (u64, usize),
    data: (u64, usize),
    metadata: (u64, usize),
}

/// Where an nmethod's debug information lies, by JDK:
///
/// | | JDK 17, 21 | JDK 25 |
/// | --- | --- | --- |
/// | PcDescs | nmethod + `nmethod::_scopes_pcs_offset` .. nmethod + `_dependencies_offset` | `nmethod::_immutable_data` + `_scopes_pcs_offset` .. + `_scopes_data_offset` |
/// | scopes data | `CompiledMethod::_scopes_data_begin` .. nmethod + `_scopes_pcs_offset` | `_immutable_data` + `_scopes_data_offset` .. + `_immutable_data_size` |
/// | metadata | nmethod + `nmethod::_metadata_offset` .. `_scopes_data_begin` | `CodeBlob::_mutable_data` + `_relocation_size` .. + `_mutable_data_size` |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeLayout {
    /// Bytes of the nmethod's header read: `sizeof(nmethod)`.
    pub header_size: u64,
    /// `nmethod::_compile_id` (int).
    pub compile_id: u64,
    /// `nmethod::_method` (or `CompiledMethod::_method`).
    pub method: u64,
    /// The PcDesc table.
    pub pcs: Table,
    /// The scopes data.
    pub data: Table,
    /// The metadata table.
    pub metadata: Table,
    /// `sizeof(PcDesc)`.
    pub pc_desc_size: u64,
    /// `PcDesc::_pc_offset` (int).
    pub pc_offset: u64,
    /// `PcDesc::_scope_decode_offset` (int).
    pub scope_offset: u64,
    /// How the scopes data's integers are written.
    pub encoding: Encoding,
}

/// The debug information of one nmethod, read from the target at one time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scopes {
    /// The nmethod (CodeBlob*).
    pub nmethod: u64,
    /// Its compile id, read before and after its tables.
    pub compile_id: u32,
    /// Its code begin, from which PcDesc offsets count.
    pub code_begin: u64,
    /// Its tables.
    pub info: DebugInfo,
}

impl Scopes {
    /// The methods running at `pc`, innermost first: looked up as HotSpot does for the
    /// instruction that ends at or after `pc` (a caller frame's return address minus 1, the
    /// newest frame's pc plus 1: `resolve`'s `Pc::debug_info_address`).
    pub fn at(&self, pc: u64) -> Option<Vec<Scope>> {
        let offset = i64::try_from(pc.checked_sub(self.code_begin)?).ok()?;
        self.info.scopes_at(offset)
    }
}

impl ScopeLayout {
    /// Finds the fields of the JVM whose tables are `vm` and whose feature release is `major`.
    pub fn read(vm: &VmStructs, major: u32) -> Result<ScopeLayout, HotSpotError> {
        let nmethod = ["nmethod", "CompiledMethod"];
        let int = |types: &[&str], field| vm.offset(types, field, 4).map(Some);
        let pointer = |types: &[&str], field| vm.offset(types, field, 8).map(Some);
        let bound = |base: Option<u64>, plus: Option<u64>| Bound { base, plus };
        let (pcs, data, metadata) = match vm.offset(&nmethod, "_scopes_data_begin", 8) {
            // JDK 17 to 22: every table inside the nmethod's blob.
            Ok(data_begin) => {
                let data_begin = bound(Some(data_begin), None);
                let pcs_begin = bound(None, int(&nmethod, "_scopes_pcs_offset")?);
                (
                    Table {
                        begin: pcs_begin,
                        end: bound(None, int(&nmethod, "_dependencies_offset")?),
                    },
                    Table {
                        begin: data_begin,
                        end: pcs_begin,
                    },
                    Table {
                        begin: bound(None, int(&nmethod, "_metadata_offset")?),
                        end: data_begin,
                    },
                )
            }
            // JDK 25: immutable data and mutable data apart, on the C heap.
            Err(_) => {
                let immutable = pointer(&nmethod, "_immutable_data")?;
                let mutable = pointer(&["CodeBlob"], "_mutable_data")?;
                let data_begin = bound(immutable, int(&nmethod, "_scopes_data_offset")?);
                (
                    Table {
                        begin: bound(immutable, int(&nmethod, "_scopes_pcs_offset")?),
                        end: data_begin,
                    },
                    Table {
                        begin: data_begin,
                        end: bound(immutable, int(&nmethod, "_immutable_data_size")?),
                    },
                    Table {
                        begin: bound(mutable, int(&["CodeBlob"], "_relocation_size")?),
                        end: bound(mutable, int(&["CodeBlob"], "_mutable_data_size")?),
                    },
                )
            }
        };
        Ok(ScopeLayout {
            header_size: vm.require_size("nmethod")?,
            compile_id: vm.offset(&nmethod, "_compile_id", 4)?,
            method: vm.offset(&nmethod, "_method", 8)?,
            pcs,
            data,
            metadata,
            pc_desc_size: vm.require_size("PcDesc")?,
            pc_offset: vm.offset(&["PcDesc"], "_pc_offset", 4)?,
            scope_offset: vm.offset(&["PcDesc"], "_scope_decode_offset", 4)?,
            encoding: Encoding::of_jdk(major),
        })
    }

    /// The debug information of the nmethod `blob`, if it can be read whole and the nmethod is
    /// the same code after as before.
    pub fn scopes(&self, mem: &dyn Memory, blob: &CodeBlob) -> Option<Scopes> {
        if blob.name != "nmethod" {
            return None;
        }
        let nmethod = blob.address;
        let place = self.place(mem, nmethod)?;
        let read = |(addr, len): (u64, usize)| mem.read_bytes(addr, len);
        let (pcs, data, metadata) = (read(place.pcs)?, read(place.data)?, read(place.metadata)?);
        // Freed and reused meanwhile: another compile id, or tables elsewhere.
        if self.place(mem, nmethod)? != place {
            return None;
        }
        Some(Scopes {
            nmethod,
            compile_id: place.compile_id,
            code_begin: blob.code_begin,
            info: DebugInfo {
                pcs: self.pc_descs(&pcs)?,
                data,
                metadata: metadata
                    .chunks_exact(8)
                    .map(|bytes| word(bytes, 0).unwrap_or(0))
                    .collect(),
                method: place.method,
                encoding: self.encoding,
            },
        })
    }

    /// The compile id, Method* and tables' ranges of the nmethod at `nmethod`, read now.
    fn place(&self, mem: &dyn Memory, nmethod: u64) -> Option<Place> {
        let header = mem.read_bytes(nmethod, usize::try_from(self.header_size).ok()?)?;
        let compile_id = i32::from_ne_bytes(array_at(&header, self.compile_id)?);
        Some(Place {
            compile_id: u32::try_from(compile_id).ok()?,
            method: word(&header, self.method)?,
            pcs: self.pcs.range(nmethod, &header)?,
            data: self.data.range(nmethod, &header)?,
            metadata: self.metadata.range(nmethod, &header)?,
        })
    }

    /// The PcDescs in `bytes`.
    fn pc_descs(&self, bytes: &[u8]) -> Option<Vec<PcDesc>> {
        let size = usize::try_from(self.pc_desc_size).ok().filter(|&s| s > 0)?;
        let int = |desc: &[u8], field| array_at(desc, field).map(i32::from_ne_bytes);
        bytes
            .chunks_exact(size)
            .map(|desc| {
                Some(PcDesc {
                    pc_offset: int(desc, self.pc_offset)?,
                    scope_offset: int(desc, self.scope_offset)?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;

//! Decoding an nmethod's debug information once it is read: its PcDesc table and its scopes data,
//! a stream of compressed integers, into the chain of methods inlined at a pc. Pure: it works on
//! the bytes read, which are untrusted, so every read is bounded and a chain has at most
//! [`MAX_DEPTH`] scopes.
//!
//! What HotSpot writes (`code/debugInfoRec.cpp`, `code/scopeDesc.cpp`, `code/pcDesc.hpp`):
//!
//! - PcDescs, sorted by their pc offset (from the nmethod's code begin). The first is a sentinel
//!   at offset -1; the last one, without a scope, lies just past the code (written at
//!   `i32::MAX`, moved there by `nmethod::copy_scopes_pcs`, and copied into the table's rounding
//!   gap). A PcDesc at offset P describes the instructions after the previous PcDesc up to and
//!   including P: the PcDesc of an offset `o` is the first whose offset is `>= o` (`nmethod.cpp`,
//!   `match_desc`, approximate).
//! - A PcDesc's scope decode offset leads to its innermost scope record in the scopes data; 0
//!   (`DebugInformationRecorder::serialized_null`) means the nmethod's own method alone.
//! - A scope record starts with three compressed integers: the sender's (caller's) record offset
//!   (0: none, this is the outermost method), the index of its Method* in the nmethod's metadata
//!   table (1-based; 0 is no method), and its bci + 1 (`InvocationEntryBci` is -1). A sender is
//!   always written before its callee, so offsets decrease along a chain.

/// Most scopes in one chain: HotSpot inlines at most 15 levels by default (`MaxInlineLevel`).
pub const MAX_DEPTH: usize = 64;

/// Bytes of one compressed integer, at most.
const MAX_INT_BYTES: usize = 5;

/// How the scopes data's integers are compressed: both are Pack200's UNSIGNED5 (up to 5 bytes,
/// 6 bits of payload in each byte but the last), differing in whether the byte 0 is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// JDK 19 and older (`CompressedReadStream`): every byte value is a digit.
    Pack200,
    /// JDK 20 and later (`utilities/unsigned5.hpp`): the byte 0 is never written, every digit is
    /// its byte minus 1.
    Unsigned5,
}

impl Encoding {
    /// The encoding of a JDK's feature release.
    pub fn of_jdk(major: u32) -> Encoding {
        if major >= 20 {
            Encoding::Unsigned5
        } else {
            Encoding::Pack200
        }
    }

    /// The integer at `*pos` in `data`, moving `*pos` past it; `None` past the end of `data` or
    /// on an excluded byte.
    pub fn read(self, data: &[u8], pos: &mut usize) -> Option<u32> {
        let excluded = u32::from(self == Encoding::Unsigned5);
        // Digits below `low` end a number; the 64 above carry on to the next byte.
        let low = 256 - 64 - excluded;
        let mut sum: u32 = 0;
        for i in 0..MAX_INT_BYTES {
            let byte = u32::from(*data.get(pos.checked_add(i)?)?);
            let digit = byte.checked_sub(excluded)?;
            sum = sum.wrapping_add(digit << (6 * i));
            if digit < low || i == MAX_INT_BYTES - 1 {
                *pos += i + 1;
                return Some(sum);
            }
        }
        None
    }
}

/// One entry of an nmethod's PcDesc table (`code/pcDesc.hpp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcDesc {
    /// Its offset from the nmethod's code begin.
    pub pc_offset: i32,
    /// Where its innermost scope record starts in the scopes data (0: the nmethod's method).
    pub scope_offset: i32,
}

/// One method of a chain of inlined methods at a pc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope {
    /// Its Method*.
    pub method: u64,
    /// The bytecode index it runs at, -1 (`InvocationEntryBci`) at its entry.
    pub bci: i32,
}

/// The debug information of one nmethod, as read from the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebugInfo {
    /// Its PcDescs, as HotSpot stores them (the first one a sentinel).
    pub pcs: Vec<PcDesc>,
    /// Its scopes data.
    pub data: Vec<u8>,
    /// Its metadata table: the Method*s (and Klass*s) its scopes name, by index - 1.
    pub metadata: Vec<u64>,
    /// The nmethod's own (outermost) Method*.
    pub method: u64,
    /// How the scopes data's integers are written.
    pub encoding: Encoding,
}

impl DebugInfo {
    /// The PcDesc describing the instruction at `offset` from the code begin: the first past the
    /// sentinel whose offset is `>= offset` (`None` past the last one).
    pub fn pc_desc(&self, offset: i64) -> Option<PcDesc> {
        let descs = self.pcs.get(1..)?;
        let index = descs.partition_point(|desc| i64::from(desc.pc_offset) < offset);
        descs.get(index).copied()
    }

    /// The chain of scopes at `offset` from the code begin, innermost first, outermost (the
    /// nmethod's method) last; `None` where the tables cannot say.
    pub fn scopes_at(&self, offset: i64) -> Option<Vec<Scope>> {
        let desc = self.pc_desc(offset)?;
        self.chain(u32::try_from(desc.scope_offset).ok()?)
    }

    /// The scopes from the record at `offset` to its outermost sender.
    pub fn chain(&self, offset: u32) -> Option<Vec<Scope>> {
        if offset == 0 {
            return Some(vec![Scope {
                method: self.method,
                bci: -1,
            }]);
        }
        let mut chain = Vec::new();
        let mut offset = offset;
        while chain.len() < MAX_DEPTH {
            let mut pos = usize::try_from(offset).ok()?;
            let sender = self.encoding.read(&self.data, &mut pos)?;
            let index = self.encoding.read(&self.data, &mut pos)?;
            let bci = self.encoding.read(&self.data, &mut pos)?;
            let method = *self
                .metadata
                .get(usize::try_from(index.checked_sub(1)?).ok()?)?;
            chain.push(Scope {
                method,
                bci: (bci as i32).wrapping_sub(1),
            });
            if sender == 0 {
                return Some(chain);
            }
            if sender >= offset {
                return None;
            }
            offset = sender;
        }
        None
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `value` written as HotSpot's writers do (`UNSIGNED5::write_uint`, and the same with no
    /// excluded byte for `CompressedWriteStream::write_int`).
    pub(crate) fn encode(encoding: Encoding, value: u32, out: &mut Vec<u8>) {
        let excluded = u32::from(encoding == Encoding::Unsigned5);
        let low = 256 - 64 - excluded;
        let mut sum = value;
        for i in 0..MAX_INT_BYTES {
            if sum < low || i == MAX_INT_BYTES - 1 {
                out.push((excluded + sum) as u8);
                return;
            }
            sum -= low;
            out.push((excluded + low + sum % 64) as u8);
            sum >>= 6;
        }
    }

    #[test]
    fn numbers_are_read_as_hotspot_writes_them() {
        // Examples from unsigned5.hpp: 0..=190 in one byte, up to 0x307E in two, 0xC207E in
        // three, 0x308207F in four.
        for (value, len) in [
            (0, 1),
            (190, 1),
            (191, 2),
            (0x307E, 2),
            (0x307F, 3),
            (0xC207E, 3),
            (0x308207F, 5),
            (u32::MAX, 5),
        ] {
            let mut bytes = Vec::new();
            encode(Encoding::Unsigned5, value, &mut bytes);
            assert_eq!(bytes.len(), len, "{value:#x}");
            assert!(!bytes.contains(&0));
            let mut pos = 0;
            assert_eq!(Encoding::Unsigned5.read(&bytes, &mut pos), Some(value));
            assert_eq!(pos, len);
        }
        // Before JDK 20: 0..=191 in one byte, the byte 0 is the number 0.
        let mut pos = 0;
        assert_eq!(Encoding::Pack200.read(&[0, 191, 192, 1], &mut pos), Some(0));
        assert_eq!(
            Encoding::Pack200.read(&[0, 191, 192, 1], &mut pos),
            Some(191)
        );
        assert_eq!(
            Encoding::Pack200.read(&[0, 191, 192, 1], &mut pos),
            Some(192 + 64)
        );
        assert_eq!(pos, 4);
        assert_eq!(Encoding::Unsigned5.read(&[0], &mut 0), None, "excluded");
        assert_eq!(Encoding::Unsigned5.read(&[200, 200], &mut 0), None, "cut");
    }

    proptest! {
        #[test]
        fn every_number_reads_back(value in any::<u32>(), old in any::<bool>()) {
            let encoding = if old { Encoding::Pack200 } else { Encoding::Unsigned5 };
            let mut bytes = Vec::new();
            encode(encoding, value, &mut bytes);
            let mut pos = 0;
            prop_assert_eq!(encoding.read(&bytes, &mut pos), Some(value));
            prop_assert_eq!(pos, bytes.len());
        }
    }

    /// Scopes data holding the records `(sender, method index, bci)` at the offsets returned.
    fn records(encoding: Encoding, records: &[(usize, u32, i32)]) -> (Vec<u8>, Vec<u32>) {
        // HotSpot starts the stream with one byte so that no record is at offset 0.
        let mut data = vec![0xFF];
        let mut offsets = Vec::new();
        for &(sender, index, bci) in records {
            offsets.push(data.len() as u32);
            let sender = if sender == usize::MAX {
                0
            } else {
                offsets[sender]
            };
            for value in [sender, index, (bci + 1) as u32] {
                encode(encoding, value, &mut data);
            }
        }
        (data, offsets)
    }

    /// Tables where `outer` (Method* 0x1000) inlines `middle` (0x2000), which inlines `inner`
    /// (0x3000): at offsets 0x11..=0x20 all three run, at 0..=0x10 and 0x21..=0x30 `outer` alone.
    pub(crate) fn info(encoding: Encoding) -> DebugInfo {
        // outer (index 1) at bci 5 calls middle (2) at bci 7, which calls inner (3) at bci 0.
        let (data, offsets) = records(
            encoding,
            &[(usize::MAX, 1, 5), (0, 2, 7), (1, 3, 0), (usize::MAX, 1, 9)],
        );
        let desc = |pc_offset, scope: u32| PcDesc {
            pc_offset,
            scope_offset: scope as i32,
        };
        DebugInfo {
            pcs: vec![
                desc(-1, 0),
                desc(0x10, offsets[0]),
                desc(0x20, offsets[2]),
                desc(0x30, offsets[3]),
                desc(i32::MAX, 0),
            ],
            data,
            metadata: vec![0x1000, 0x2000, 0x3000],
            method: 0x1000,
            encoding,
        }
    }

    pub(crate) fn scope(method: u64, bci: i32) -> Scope {
        Scope { method, bci }
    }

    #[test]
    fn a_pc_gets_the_chain_of_the_first_pc_desc_at_or_after_it() {
        for encoding in [Encoding::Pack200, Encoding::Unsigned5] {
            let info = info(encoding);
            let inlined = vec![scope(0x3000, 0), scope(0x2000, 7), scope(0x1000, 5)];
            assert_eq!(info.scopes_at(0), Some(vec![scope(0x1000, 5)]));
            assert_eq!(info.scopes_at(0x10), Some(vec![scope(0x1000, 5)]));
            assert_eq!(info.scopes_at(0x11), Some(inlined.clone()));
            assert_eq!(info.scopes_at(0x20), Some(inlined));
            assert_eq!(info.scopes_at(0x21), Some(vec![scope(0x1000, 9)]));
            // Past the last PcDesc with a scope: the end sentinel, the nmethod's method.
            assert_eq!(info.scopes_at(0x31), Some(vec![scope(0x1000, -1)]));
        }
    }

    #[test]
    fn broken_tables_give_none() {
        let mut info = info(Encoding::Unsigned5);
        // A sender after its callee: a loop.
        let mut looped = info.clone();
        looped.data = vec![0xFF, 2, 2, 1];
        assert_eq!(looped.chain(1), None);
        // Method index 0 and past the metadata table.
        assert_eq!(
            DebugInfo {
                data: vec![0xFF, 1, 1, 1],
                ..info.clone()
            }
            .chain(1),
            None
        );
        info.metadata.truncate(2);
        assert_eq!(info.scopes_at(0x11), None);
        assert_eq!(info.chain(1000), None, "past the data");
        info.pcs.clear();
        assert_eq!(info.scopes_at(0), None);
    }
}

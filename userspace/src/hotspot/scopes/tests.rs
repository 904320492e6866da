//! The scopes of nmethods laid out in memory images as JDK 17, 21 and 25 lay them out, found
//! through VMStructs entries with the offsets those JDKs export (as read from Debian's 17.0.15,
//! Temurin 21.0.8 and 25.0.2).

use std::sync::atomic::{AtomicU32, Ordering};

use super::decode::tests::{info, scope};
use super::*;
use crate::hotspot::fake::FakeMemory;
use crate::hotspot::memory::Memory;

/// One JDK's layout: its feature release, the VMStructs entries of the fields read, the types'
/// sizes.
struct Jdk {
    major: u32,
    fields: &'static [(&'static str, &'static str, u64)],
    types: &'static [(&'static str, u64)],
}

const PC_DESC: [(&str, &str, u64); 2] = [
    ("PcDesc", "_pc_offset", 0),
    ("PcDesc", "_scope_decode_offset", 4),
];

const JDKS: [Jdk; 3] = [
    Jdk {
        major: 17,
        fields: &[
            ("CompiledMethod", "_method", 112),
            ("CompiledMethod", "_scopes_data_begin", 120),
            ("nmethod", "_metadata_offset", 260),
            ("nmethod", "_scopes_pcs_offset", 268),
            ("nmethod", "_dependencies_offset", 272),
            ("nmethod", "_compile_id", 304),
            PC_DESC[0],
            PC_DESC[1],
        ],
        types: &[("nmethod", 352), ("CompiledMethod", 192), ("PcDesc", 16)],
    },
    Jdk {
        major: 21,
        fields: &[
            ("CompiledMethod", "_method", 112),
            ("CompiledMethod", "_scopes_data_begin", 120),
            ("nmethod", "_metadata_offset", 268),
            ("nmethod", "_scopes_pcs_offset", 276),
            ("nmethod", "_dependencies_offset", 280),
            ("nmethod", "_compile_id", 308),
            PC_DESC[0],
            PC_DESC[1],
        ],
        types: &[("nmethod", 344), ("CompiledMethod", 192), ("PcDesc", 16)],
    },
    Jdk {
        major: 25,
        fields: &[
            ("CodeBlob", "_mutable_data", 16),
            ("CodeBlob", "_relocation_size", 28),
            ("CodeBlob", "_mutable_data_size", 48),
            ("nmethod", "_method", 80),
            ("nmethod", "_immutable_data", 96),
            ("nmethod", "_immutable_data_size", 160),
            ("nmethod", "_scopes_pcs_offset", 196),
            ("nmethod", "_scopes_data_offset", 200),
            ("nmethod", "_compile_id", 212),
            PC_DESC[0],
            PC_DESC[1],
        ],
        types: &[("nmethod", 224), ("CodeBlob", 64), ("PcDesc", 16)],
    },
];

/// Bytes of the fake nmethod: header, code, and (up to JDK 22) its tables.
const BLOB: u64 = 0x800;
/// The compile id written.
const COMPILE_ID: u32 = 77;

impl Jdk {
    fn layout(&self) -> ScopeLayout {
        ScopeLayout::read(&VmStructs::with(self.fields, self.types), self.major)
            .expect("the layout of this JDK")
    }

    fn field(&self, name: &str) -> u64 {
        self.fields
            .iter()
            .find(|f| f.1 == name)
            .map(|f| f.2)
            .expect(name)
    }

    /// An nmethod holding `info`'s tables where this JDK keeps them: the blob as HotSpot's code
    /// cache gives it.
    fn nmethod(&self, mem: &mut FakeMemory, info: &DebugInfo) -> CodeBlob {
        let blob = mem.alloc(BLOB, 64);
        let code_begin = blob + 0x180;
        // _pc_offset, _scope_decode_offset, then _obj_decode_offset and _flags, 0.
        let pcs: Vec<u8> = info
            .pcs
            .iter()
            .flat_map(|d| [d.pc_offset, d.scope_offset, 0, 0])
            .flat_map(i32::to_ne_bytes)
            .collect();
        let metadata: Vec<u8> = info.metadata.iter().flat_map(|m| m.to_ne_bytes()).collect();
        let int = |mem: &mut FakeMemory, name, value: u64| {
            mem.write_u32(blob + self.field(name), value as u32)
        };
        int(mem, "_compile_id", u64::from(COMPILE_ID));
        mem.write_u64(blob + self.field("_method"), info.method);
        if self.major < 23 {
            // Metadata, scopes data, PcDescs, one after the other in the blob.
            let metadata_at = 0x400;
            let data_at = metadata_at + metadata.len() as u64;
            let pcs_at = data_at + info.data.len() as u64;
            mem.write(blob + metadata_at, &metadata);
            mem.write(blob + data_at, &info.data);
            mem.write(blob + pcs_at, &pcs);
            int(mem, "_metadata_offset", metadata_at);
            mem.write_u64(blob + self.field("_scopes_data_begin"), blob + data_at);
            int(mem, "_scopes_pcs_offset", pcs_at);
            int(mem, "_dependencies_offset", pcs_at + pcs.len() as u64);
        } else {
            // Relocations then metadata in the mutable data; PcDescs then scopes data in the
            // immutable data, which ends with a reference count.
            let relocations = 0x20;
            let mutable = mem.alloc(relocations + metadata.len() as u64, 8);
            mem.write(mutable + relocations, &metadata);
            mem.write_u64(blob + self.field("_mutable_data"), mutable);
            int(mem, "_relocation_size", relocations);
            int(
                mem,
                "_mutable_data_size",
                relocations + metadata.len() as u64,
            );
            let pcs_at = 0x10;
            let data_at = pcs_at + pcs.len() as u64;
            let size = data_at + info.data.len() as u64 + 4;
            let immutable = mem.alloc(size, 8);
            mem.write(immutable + pcs_at, &pcs);
            mem.write(immutable + data_at, &info.data);
            mem.write_u64(blob + self.field("_immutable_data"), immutable);
            int(mem, "_scopes_pcs_offset", pcs_at);
            int(mem, "_scopes_data_offset", data_at);
            int(mem, "_immutable_data_size", size);
        }
        CodeBlob {
            address: blob,
            name: "nmethod".into(),
            code_begin,
            code_end: code_begin + 0x100,
            end: blob + BLOB,
            frame_size: 4,
            nmethod: None,
        }
    }
}

#[test]
fn each_jdks_nmethod_gives_its_inlined_methods() {
    for jdk in &JDKS {
        let encoding = Encoding::of_jdk(jdk.major);
        let expected = info(encoding);
        let mut mem = FakeMemory::default();
        let blob = jdk.nmethod(&mut mem, &expected);
        let layout = jdk.layout();
        assert_eq!(layout.encoding, encoding);
        let scopes = layout.scopes(&mem, &blob).expect("the nmethod's scopes");
        assert_eq!(scopes.compile_id, COMPILE_ID, "JDK {}", jdk.major);
        assert_eq!(scopes.info.metadata, expected.metadata, "JDK {}", jdk.major);
        assert_eq!(scopes.info.pcs, expected.pcs, "JDK {}", jdk.major);
        assert_eq!(
            scopes.at(blob.code_begin + 0x18),
            Some(vec![scope(0x3000, 0), scope(0x2000, 7), scope(0x1000, 5)]),
            "JDK {}",
            jdk.major
        );
        assert_eq!(
            scopes.at(blob.code_begin + 0x28),
            Some(vec![scope(0x1000, 9)])
        );
        assert_eq!(scopes.at(blob.code_begin - 1), None);
        let stub = CodeBlob {
            name: "StubRoutines (1)".into(),
            ..blob
        };
        assert_eq!(layout.scopes(&mem, &stub), None);
    }
}

#[test]
fn a_jdk_without_the_fields_has_no_layout() {
    let vm = VmStructs::with(JDKS[0].fields, &[]);
    assert!(matches!(
        ScopeLayout::read(&vm, 17),
        Err(HotSpotError::MissingField { .. })
    ));
    let vm = VmStructs::with(&PC_DESC, JDKS[2].types);
    assert!(ScopeLayout::read(&vm, 25).is_err());
}

#[test]
fn tables_out_of_order_or_too_large_are_not_read() {
    let jdk = &JDKS[1];
    let layout = jdk.layout();
    let offset = |name| jdk.field(name);
    for (field, value) in [
        // PcDescs ending before they begin, and a PcDesc table past the bound.
        ("_dependencies_offset", 0x10),
        ("_dependencies_offset", 0x7FFF_FFFF),
        ("_compile_id", u32::MAX),
    ] {
        let mut mem = FakeMemory::default();
        let blob = jdk.nmethod(&mut mem, &info(Encoding::Unsigned5));
        mem.write_u32(blob.address + offset(field), value);
        assert_eq!(layout.scopes(&mem, &blob), None, "{field} = {value:#x}");
    }
}

/// A memory whose nmethod gets another compile id after its first header read: freed and its
/// memory given to another nmethod while its tables were read.
#[derive(Debug)]
struct Reused {
    mem: FakeMemory,
    header: u64,
    compile_id: u64,
    header_reads: AtomicU32,
}

impl Memory for Reused {
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> bool {
        if !self.mem.read_into(addr, buf) {
            return false;
        }
        if addr == self.header && self.header_reads.fetch_add(1, Ordering::Relaxed) > 0 {
            let at = self.compile_id as usize;
            buf[at..at + 4].copy_from_slice(&(COMPILE_ID + 1).to_ne_bytes());
        }
        true
    }
}

#[test]
fn an_nmethod_freed_while_it_is_read_gives_nothing() {
    for jdk in &JDKS {
        let mut mem = FakeMemory::default();
        let blob = jdk.nmethod(&mut mem, &info(Encoding::of_jdk(jdk.major)));
        let reused = Reused {
            mem,
            header: blob.address,
            compile_id: jdk.field("_compile_id"),
            header_reads: AtomicU32::new(0),
        };
        assert_eq!(
            jdk.layout().scopes(&reused, &blob),
            None,
            "JDK {}",
            jdk.major
        );
    }
}

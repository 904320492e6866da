//! HotSpot's self-description tables (`gHotSpotVMStructs`, `gHotSpotVMTypes`,
//! `gHotSpotVMIntConstants`, `gHotSpotVMLongConstants`), read from the target's memory and treated
//! as untrusted: bounded strides and entry counts, bounded names, offsets checked against sizes.

use std::collections::HashMap;

use super::libjvm::Libjvm;
use super::memory::Memory;
use super::HotSpotError;

/// The symbols of libjvm this module reads.
pub const SYMBOLS: &[&str] = &[
    "gHotSpotVMStructs",
    "gHotSpotVMStructEntryArrayStride",
    "gHotSpotVMStructEntryTypeNameOffset",
    "gHotSpotVMStructEntryFieldNameOffset",
    "gHotSpotVMStructEntryTypeStringOffset",
    "gHotSpotVMStructEntryIsStaticOffset",
    "gHotSpotVMStructEntryOffsetOffset",
    "gHotSpotVMStructEntryAddressOffset",
    "gHotSpotVMTypes",
    "gHotSpotVMTypeEntryArrayStride",
    "gHotSpotVMTypeEntryTypeNameOffset",
    "gHotSpotVMTypeEntrySizeOffset",
    "gHotSpotVMIntConstants",
    "gHotSpotVMIntConstantEntryArrayStride",
    "gHotSpotVMIntConstantEntryNameOffset",
    "gHotSpotVMIntConstantEntryValueOffset",
    "gHotSpotVMLongConstants",
    "gHotSpotVMLongConstantEntryArrayStride",
    "gHotSpotVMLongConstantEntryNameOffset",
    "gHotSpotVMLongConstantEntryValueOffset",
];

/// Upper bound of an entry's size in any of the tables.
const MAX_STRIDE: u64 = 256;
/// Upper bound of the number of entries of a table (JDK 25 has a few thousand).
const MAX_ENTRIES: u64 = 131_072;
/// Upper bound of a type or field name.
const MAX_NAME: usize = 256;
/// Upper bound of a type's size that this reader accepts.
const MAX_TYPE_SIZE: u64 = 64 * 1024;
/// Entries read at once.
const BATCH: u64 = 64;

/// Where a field lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// An instance field at this offset from the object's start.
    Offset(u64),
    /// A static field at this address in the process.
    Static(u64),
}

/// The parsed tables of one JVM.
#[derive(Debug, Default)]
pub struct VmStructs {
    fields: HashMap<(String, String), Field>,
    field_types: HashMap<(String, String), String>,
    types: HashMap<String, u64>,
    int_constants: HashMap<String, i64>,
    long_constants: HashMap<String, i64>,
}

/// How to read one table: where its base pointer lives and where each entry's parts are.
struct Layout {
    base: u64,
    stride: u64,
    offsets: Vec<u64>,
}

impl Layout {
    /// Reads the table description from libjvm's `<table>` pointer, `<prefix>ArrayStride` and
    /// `<prefix><part>Offset` variables.
    fn read(
        mem: &dyn Memory,
        libjvm: &Libjvm,
        table: &str,
        prefix: &str,
        parts: &[&str],
    ) -> Result<Layout, HotSpotError> {
        let read_var = |name: &str| -> Result<u64, HotSpotError> {
            let addr = libjvm.require(name)?;
            mem.read_u64(addr).ok_or(HotSpotError::Unreadable {
                what: "a VMStructs variable",
                addr,
            })
        };
        let base = read_var(table)?;
        if base == 0 {
            return Err(HotSpotError::NotReady(format!("{table} is not set yet")));
        }
        let stride = read_var(&format!("{prefix}ArrayStride"))?;
        // The table pointers are relocated as libjvm is loaded, its strides and offsets set by
        // its initialisers a moment later.
        if stride == 0 {
            return Err(HotSpotError::NotReady(format!(
                "{prefix}ArrayStride is not set yet"
            )));
        }
        if !(8..=MAX_STRIDE).contains(&stride) {
            return Err(HotSpotError::BadTable(format!(
                "{prefix}ArrayStride is {stride}, not in 8..={MAX_STRIDE}"
            )));
        }
        let mut offsets = Vec::new();
        for part in parts {
            let offset = read_var(&format!("{prefix}{part}Offset"))?;
            if offset.checked_add(8).is_none_or(|end| end > stride) {
                return Err(HotSpotError::BadTable(format!(
                    "{prefix}{part}Offset is {offset}, past the stride {stride}"
                )));
            }
            offsets.push(offset);
        }
        Ok(Layout {
            base,
            stride,
            offsets,
        })
    }

    /// Calls `f` with each entry's words at the part offsets, until an entry whose first part
    /// (always the name pointer) is NULL.
    fn for_each(
        &self,
        mem: &dyn Memory,
        mut f: impl FnMut(&[u64]) -> Result<(), HotSpotError>,
    ) -> Result<(), HotSpotError> {
        let mut index = 0;
        while index < MAX_ENTRIES {
            let addr = self.base.checked_add(index * self.stride).ok_or_else(|| {
                HotSpotError::BadTable(format!("a table at {:#x} wraps around", self.base))
            })?;
            let chunk = mem
                .read_bytes(addr, (BATCH * self.stride) as usize)
                .or_else(|| mem.read_bytes(addr, self.stride as usize))
                .ok_or(HotSpotError::Unreadable {
                    what: "a VMStructs table entry",
                    addr,
                })?;
            for entry in chunk.chunks_exact(self.stride as usize) {
                let words: Vec<u64> = self
                    .offsets
                    .iter()
                    .map(|&o| {
                        let o = o as usize;
                        u64::from_ne_bytes(entry[o..o + 8].try_into().expect("8 bytes"))
                    })
                    .collect();
                if words[0] == 0 {
                    return Ok(());
                }
                f(&words)?;
                index += 1;
            }
        }
        Err(HotSpotError::BadTable(format!(
            "a table at {:#x} has more than {MAX_ENTRIES} entries",
            self.base
        )))
    }
}

impl VmStructs {
    /// Reads the four tables of the JVM whose libjvm is `libjvm`.
    pub fn read(mem: &dyn Memory, libjvm: &Libjvm) -> Result<VmStructs, HotSpotError> {
        let mut tables = VmStructs::default();
        // Type names and type strings repeat (the same literal for every field of a type):
        // each is read from the target once.
        let mut names: HashMap<u64, String> = HashMap::new();
        let mut name = |addr: u64| -> Result<String, HotSpotError> {
            if let Some(known) = names.get(&addr) {
                return Ok(known.clone());
            }
            let read = mem
                .read_c_string(addr, MAX_NAME)
                .ok_or(HotSpotError::Unreadable {
                    what: "a VMStructs name",
                    addr,
                })?;
            names.insert(addr, read.clone());
            Ok(read)
        };

        let structs = Layout::read(
            mem,
            libjvm,
            "gHotSpotVMStructs",
            "gHotSpotVMStructEntry",
            &[
                "TypeName",
                "FieldName",
                "IsStatic",
                "Offset",
                "Address",
                "TypeString",
            ],
        )?;
        structs.for_each(mem, |w| {
            if w[1] == 0 {
                return Ok(());
            }
            // isStatic is an int32: only its low half counts.
            let field = if w[2] as u32 != 0 {
                Field::Static(w[4])
            } else {
                Field::Offset(w[3])
            };
            let key = (name(w[0])?, name(w[1])?);
            if w[5] != 0 {
                tables.field_types.insert(key.clone(), name(w[5])?);
            }
            tables.fields.insert(key, field);
            Ok(())
        })?;

        let types = Layout::read(
            mem,
            libjvm,
            "gHotSpotVMTypes",
            "gHotSpotVMTypeEntry",
            &["TypeName", "Size"],
        )?;
        types.for_each(mem, |w| {
            tables.types.insert(name(w[0])?, w[1]);
            Ok(())
        })?;

        for (table, prefix, is_int) in [
            ("gHotSpotVMIntConstants", "gHotSpotVMIntConstantEntry", true),
            (
                "gHotSpotVMLongConstants",
                "gHotSpotVMLongConstantEntry",
                false,
            ),
        ] {
            let layout = Layout::read(mem, libjvm, table, prefix, &["Name", "Value"])?;
            layout.for_each(mem, |w| {
                let key = name(w[0])?;
                if is_int {
                    tables
                        .int_constants
                        .insert(key, i64::from(w[1] as u32 as i32));
                } else {
                    tables.long_constants.insert(key, w[1] as i64);
                }
                Ok(())
            })?;
        }
        if tables.fields.is_empty() || tables.types.is_empty() {
            return Err(HotSpotError::NotReady(
                "the VMStructs tables are empty".into(),
            ));
        }
        Ok(tables)
    }

    /// The size of type `ty`, if the tables list it with a plausible size (1..=64 KiB).
    pub fn size_of(&self, ty: &str) -> Option<u64> {
        self.types
            .get(ty)
            .copied()
            .filter(|&s| (1..=MAX_TYPE_SIZE).contains(&s))
    }

    /// The size of type `ty`, or an error naming it.
    pub fn require_size(&self, ty: &str) -> Result<u64, HotSpotError> {
        self.size_of(ty).ok_or_else(|| HotSpotError::MissingField {
            name: format!("sizeof({ty})"),
        })
    }

    /// The raw entry of `ty::field`.
    pub fn field(&self, ty: &str, field: &str) -> Option<Field> {
        self.fields
            .get(&(ty.to_string(), field.to_string()))
            .copied()
    }

    /// The C++ type of `ty::field` as VMStructs spells it (`int`, `int16_t`, `address`, ...).
    pub fn field_type(&self, ty: &str, field: &str) -> Option<&str> {
        self.field_types
            .get(&(ty.to_string(), field.to_string()))
            .map(String::as_str)
    }

    /// The offset of instance field `field` in the first of `types` that has it; the offset plus
    /// `width` must lie within that type's size when the size is known.
    pub fn offset(&self, types: &[&str], field: &str, width: u64) -> Result<u64, HotSpotError> {
        for ty in types {
            if let Some(Field::Offset(offset)) = self.field(ty, field) {
                let limit = self.size_of(ty).unwrap_or(MAX_TYPE_SIZE);
                if offset.checked_add(width).is_none_or(|end| end > limit) {
                    return Err(HotSpotError::BadTable(format!(
                        "{ty}::{field} at offset {offset} lies outside the type ({limit} bytes)"
                    )));
                }
                return Ok(offset);
            }
        }
        Err(HotSpotError::MissingField {
            name: format!("{}::{field}", types.join("|")),
        })
    }

    /// The address of static field `ty::field`.
    pub fn static_address(&self, ty: &str, field: &str) -> Result<u64, HotSpotError> {
        match self.field(ty, field) {
            Some(Field::Static(addr)) if addr != 0 => Ok(addr),
            _ => Err(HotSpotError::MissingField {
                name: format!("static {ty}::{field}"),
            }),
        }
    }

    /// An integer constant (`gHotSpotVMIntConstants`, then `gHotSpotVMLongConstants`).
    pub fn constant(&self, name: &str) -> Option<i64> {
        self.int_constants
            .get(name)
            .or_else(|| self.long_constants.get(name))
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hotspot::memory::ProcessMemory;
    use std::ffi::CStr;

    /// Fake tables in this process's memory, laid out as HotSpot lays them out.
    struct Fake {
        structs: Vec<[u64; 6]>,
        types: Vec<[u64; 5]>,
        constants: Vec<[u64; 2]>,
        /// The variables libjvm exports, by symbol name.
        vars: Vec<(String, Box<u64>)>,
    }

    fn c(text: &'static CStr) -> u64 {
        text.as_ptr() as u64
    }

    impl Fake {
        fn new() -> Fake {
            let structs = vec![
                [
                    c(c"Method"),
                    c(c"_constMethod"),
                    c(c"ConstMethod*"),
                    0,
                    8,
                    0,
                ],
                [c(c"CodeCache"), c(c"_heaps"), 0, 1, 0, 0x1234],
                [0; 6],
            ];
            let types = vec![[c(c"Method"), 0, 0, 0, 88], [0; 5]];
            let constants = vec![[c(c"frame::pc_return_offset"), 0], [0; 2]];
            let mut fake = Fake {
                structs,
                types,
                constants,
                vars: Vec::new(),
            };
            let structs = fake.structs.as_ptr() as u64;
            let types = fake.types.as_ptr() as u64;
            let constants = fake.constants.as_ptr() as u64;
            for (name, value) in [
                ("gHotSpotVMStructs", structs),
                ("gHotSpotVMStructEntryArrayStride", 48),
                ("gHotSpotVMStructEntryTypeNameOffset", 0),
                ("gHotSpotVMStructEntryFieldNameOffset", 8),
                ("gHotSpotVMStructEntryTypeStringOffset", 16),
                ("gHotSpotVMStructEntryIsStaticOffset", 24),
                ("gHotSpotVMStructEntryOffsetOffset", 32),
                ("gHotSpotVMStructEntryAddressOffset", 40),
                ("gHotSpotVMTypes", types),
                ("gHotSpotVMTypeEntryArrayStride", 40),
                ("gHotSpotVMTypeEntryTypeNameOffset", 0),
                ("gHotSpotVMTypeEntrySizeOffset", 32),
            ] {
                fake.set(name, value);
            }
            for kind in ["Int", "Long"] {
                fake.set(&format!("gHotSpotVM{kind}Constants"), constants);
                fake.set(&format!("gHotSpotVM{kind}ConstantEntryArrayStride"), 16);
                fake.set(&format!("gHotSpotVM{kind}ConstantEntryNameOffset"), 0);
                fake.set(&format!("gHotSpotVM{kind}ConstantEntryValueOffset"), 8);
            }
            fake
        }

        fn set(&mut self, name: &str, value: u64) {
            self.vars.retain(|(n, _)| n != name);
            self.vars.push((name.to_string(), Box::new(value)));
        }

        fn read(&self) -> Result<VmStructs, HotSpotError> {
            let symbols = self
                .vars
                .iter()
                .map(|(name, value)| (name.clone(), &**value as *const u64 as u64))
                .collect();
            let mem = ProcessMemory::new(std::process::id());
            VmStructs::read(&mem, &Libjvm::with_symbols(symbols))
        }
    }

    #[test]
    fn reads_fields_types_and_constants() {
        let vm = Fake::new().read().expect("fake tables");
        assert_eq!(
            vm.offset(&["Klass", "Method"], "_constMethod", 8).ok(),
            Some(8)
        );
        assert_eq!(vm.static_address("CodeCache", "_heaps").ok(), Some(0x1234));
        assert_eq!(
            vm.field_type("Method", "_constMethod"),
            Some("ConstMethod*")
        );
        assert_eq!(vm.field_type("CodeCache", "_heaps"), None);
        assert_eq!(vm.size_of("Method"), Some(88));
        assert_eq!(vm.constant("frame::pc_return_offset"), Some(0));
        assert!(matches!(
            vm.offset(&["Method"], "_nope", 8),
            Err(HotSpotError::MissingField { .. })
        ));
    }

    #[test]
    fn an_offset_outside_its_type_is_refused() {
        let mut fake = Fake::new();
        fake.structs[0][4] = 88;
        let vm = fake.read().expect("fake tables");
        assert!(matches!(
            vm.offset(&["Method"], "_constMethod", 8),
            Err(HotSpotError::BadTable(_))
        ));
    }

    #[test]
    fn a_null_table_or_a_stride_not_set_is_not_ready() {
        for name in ["gHotSpotVMStructs", "gHotSpotVMStructEntryArrayStride"] {
            let mut fake = Fake::new();
            fake.set(name, 0);
            assert!(
                matches!(fake.read(), Err(HotSpotError::NotReady(_))),
                "{name} = 0"
            );
        }
    }

    #[test]
    fn implausible_strides_and_offsets_are_refused() {
        for (name, value) in [
            ("gHotSpotVMStructEntryArrayStride", 4096),
            ("gHotSpotVMStructEntryArrayStride", 4),
            ("gHotSpotVMStructEntryOffsetOffset", 44),
            ("gHotSpotVMTypeEntrySizeOffset", u64::MAX),
        ] {
            let mut fake = Fake::new();
            fake.set(name, value);
            assert!(
                matches!(fake.read(), Err(HotSpotError::BadTable(_))),
                "{name} = {value}"
            );
        }
    }

    #[test]
    fn an_unterminated_table_ends_in_an_error() {
        let mut fake = Fake::new();
        // A table of entries whose name pointers point at unreadable memory.
        fake.structs = vec![[8, 8, 0, 0, 0, 0]; 4];
        let base = fake.structs.as_ptr() as u64;
        fake.set("gHotSpotVMStructs", base);
        assert!(fake.read().is_err());
    }
}

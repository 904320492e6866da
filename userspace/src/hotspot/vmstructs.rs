//! HotSpot's self-description tables (`gHotSpotVMStructs`, `gHotSpotVMTypes`,
//! `gHotSpotVMIntConstants`, `gHotSpotVMLongConstants`), read from the target's memory and treated
//! as untrusted: bounded strides and entry counts, bounded names, offsets checked against sizes.
//!
//! The bounds are a few times what real JVMs hold (JDK 17, 21 and 25: strides 48, 40 and 16
//! bytes, at most 813 entries in a table, names of at most 68 bytes, about 2,300 distinct names
//! in all), so that a table larger or stranger than any HotSpot's is refused before any of its
//! names is read: each table's entries are read first, and a table with no end within
//! [`MAX_ENTRIES`] is refused whole. Reading one JVM's tables thus costs at most a few thousand
//! small reads and a few hundred KiB. See docs/hotspot.md.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::libjvm::Libjvm;
use super::memory::{word, Memory};
use super::HotSpotError;
use crate::foreign::FileIdentity;

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

/// Upper bound of an entry's size in any of the tables (HotSpot's: 16 to 48 bytes).
pub const MAX_STRIDE: u64 = 128;
/// Upper bound of the number of entries of a table (HotSpot's: at most 813).
pub const MAX_ENTRIES: u64 = 4096;
/// Upper bound of a type or field name (HotSpot's: at most 68 bytes).
pub const MAX_NAME: usize = 128;
/// Upper bound of the bytes of all the distinct names of the four tables (HotSpot's: about 50 KB).
pub const MAX_NAME_BYTES: usize = 512 * 1024;
/// Upper bound of a type's size that this reader accepts.
const MAX_TYPE_SIZE: u64 = 64 * 1024;
/// Entries read at once.
const BATCH: u64 = 64;

/// Where a field lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// An instance field at this offset from the object's start.
    Offset(u64),
    /// A static field at this address in libjvm's file (add the bias for the process's).
    Static(u64),
}

/// The parsed tables of one JVM: its libjvm's tables, at the address its libjvm is loaded.
#[derive(Debug, Clone, Default)]
pub struct VmStructs {
    tables: Arc<Tables>,
    /// libjvm's bias in this process: added to a static field's address in `tables`.
    bias: u64,
}

/// The tables as one libjvm file has them, in every process that loads it: static fields at
/// their addresses in the file (their address in the process read them less that process's
/// bias).
#[derive(Debug, Default)]
struct Tables {
    fields: HashMap<(String, String), Field>,
    field_types: HashMap<(String, String), String>,
    types: HashMap<String, u64>,
    int_constants: HashMap<String, i64>,
    long_constants: HashMap<String, i64>,
}

/// Who could have written a process's tables besides root: its user ids (the `Uid` line of its
/// status) and its PID namespace (the inode of `/proc/PID/ns/pid`).
pub type Writers = (String, u64);

/// The tables read so far, by libjvm file and by who could have written them. Every process of
/// one libjvm file holds the same tables, but each reads them from its own memory, which its
/// owner can change: tables read from one JVM serve only the later JVMs of the same file whose
/// memory the same writers could have changed, so that a JVM cannot feed another user's its
/// tables. Bounded: the oldest entry goes first.
pub(crate) struct TablesCache {
    entries: Mutex<Vec<(FileIdentity, Writers, VmStructs)>>,
}

/// The most (file, writers) pairs kept: a host's JDKs times the users who run them.
const CACHED_TABLES: usize = 64;

impl TablesCache {
    /// An empty cache.
    pub(crate) const fn new() -> TablesCache {
        TablesCache {
            entries: Mutex::new(Vec::new()),
        }
    }

    /// The tables of the process whose memory is `mem`, its libjvm `libjvm` (the file `file`)
    /// and its writers `writers`: those read earlier from a process of the same file and
    /// writers, at this libjvm's bias, else read from `mem` (without holding the cache, so a
    /// slow JVM does not hold up the others) and kept.
    pub(crate) fn get_or_read(
        &self,
        file: FileIdentity,
        writers: Writers,
        mem: &dyn Memory,
        libjvm: &Libjvm,
    ) -> Result<VmStructs, HotSpotError> {
        let key = (file, writers);
        let known = self
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(f, w, _)| (*f, w) == (key.0, &key.1))
            .map(|(_, _, vm)| vm.at(libjvm.bias));
        if let Some(vm) = known {
            return Ok(vm);
        }
        let vm = VmStructs::read(mem, libjvm)?;
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|(f, w, _)| (*f, w) != (key.0, &key.1));
        if entries.len() >= CACHED_TABLES {
            entries.remove(0);
        }
        entries.push((key.0, key.1, vm.clone()));
        Ok(vm)
    }
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

    /// The words at the part offsets of each entry, up to the first whose first part (always
    /// the name pointer) is NULL. A table with no such end within [`MAX_ENTRIES`] entries is
    /// refused before anything it points to is read.
    fn entries(&self, mem: &dyn Memory, table: &str) -> Result<Vec<Vec<u64>>, HotSpotError> {
        let mut entries = Vec::new();
        while (entries.len() as u64) < MAX_ENTRIES {
            let index = entries.len() as u64;
            let addr = self.base.checked_add(index * self.stride).ok_or_else(|| {
                HotSpotError::BadTable(format!("{table} at {:#x} wraps around", self.base))
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
                    .map(|&o| word(entry, o).unwrap_or(0))
                    .collect();
                if words[0] == 0 {
                    return Ok(entries);
                }
                entries.push(words);
            }
        }
        Err(HotSpotError::BadTable(format!(
            "{table} has more than {MAX_ENTRIES} entries (HotSpot's have at most about a thousand)"
        )))
    }
}

impl VmStructs {
    /// Reads the four tables of the JVM whose libjvm is `libjvm`.
    pub fn read(mem: &dyn Memory, libjvm: &Libjvm) -> Result<VmStructs, HotSpotError> {
        let mut tables = Tables::default();
        // Type names and type strings repeat (the same literal for every field of a type):
        // each is read from the target once.
        let mut names: HashMap<u64, String> = HashMap::new();
        let mut name_bytes = 0;
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
            name_bytes += read.len();
            if name_bytes > MAX_NAME_BYTES {
                return Err(HotSpotError::BadTable(format!(
                    "the names of its tables take more than {MAX_NAME_BYTES} bytes \
                     (HotSpot's take about 50 KB)"
                )));
            }
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
        for w in structs.entries(mem, "gHotSpotVMStructs")? {
            if w[1] == 0 {
                continue;
            }
            // isStatic is an int32: only its low half counts.
            let field = if w[2] as u32 != 0 {
                Field::Static(w[4].wrapping_sub(libjvm.bias))
            } else {
                Field::Offset(w[3])
            };
            let key = (name(w[0])?, name(w[1])?);
            if w[5] != 0 {
                tables.field_types.insert(key.clone(), name(w[5])?);
            }
            tables.fields.insert(key, field);
        }

        let types = Layout::read(
            mem,
            libjvm,
            "gHotSpotVMTypes",
            "gHotSpotVMTypeEntry",
            &["TypeName", "Size"],
        )?;
        for w in types.entries(mem, "gHotSpotVMTypes")? {
            tables.types.insert(name(w[0])?, w[1]);
        }

        for (table, prefix, is_int) in [
            ("gHotSpotVMIntConstants", "gHotSpotVMIntConstantEntry", true),
            (
                "gHotSpotVMLongConstants",
                "gHotSpotVMLongConstantEntry",
                false,
            ),
        ] {
            let layout = Layout::read(mem, libjvm, table, prefix, &["Name", "Value"])?;
            for w in layout.entries(mem, table)? {
                let key = name(w[0])?;
                if is_int {
                    tables
                        .int_constants
                        .insert(key, i64::from(w[1] as u32 as i32));
                } else {
                    tables.long_constants.insert(key, w[1] as i64);
                }
            }
        }
        if tables.fields.is_empty() || tables.types.is_empty() {
            return Err(HotSpotError::NotReady(
                "the VMStructs tables are empty".into(),
            ));
        }
        Ok(VmStructs {
            tables: Arc::new(tables),
            bias: libjvm.bias,
        })
    }

    /// The same tables for another process that loads the same libjvm file, at `bias`.
    pub fn at(&self, bias: u64) -> VmStructs {
        VmStructs {
            tables: self.tables.clone(),
            bias,
        }
    }

    /// The size of type `ty`, if the tables list it with a plausible size (1..=64 KiB).
    pub fn size_of(&self, ty: &str) -> Option<u64> {
        self.tables
            .types
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

    /// The raw entry of `ty::field`, a static field's address as in the file.
    fn field(&self, ty: &str, field: &str) -> Option<Field> {
        self.tables
            .fields
            .get(&(ty.to_string(), field.to_string()))
            .copied()
    }

    /// The C++ type of `ty::field` as VMStructs spells it (`int`, `int16_t`, `address`, ...).
    pub fn field_type(&self, ty: &str, field: &str) -> Option<&str> {
        self.tables
            .field_types
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
            Some(Field::Static(addr)) if addr.wrapping_add(self.bias) != 0 => {
                Ok(addr.wrapping_add(self.bias))
            }
            _ => Err(HotSpotError::MissingField {
                name: format!("static {ty}::{field}"),
            }),
        }
    }

    /// An integer constant (`gHotSpotVMIntConstants`, then `gHotSpotVMLongConstants`).
    pub fn constant(&self, name: &str) -> Option<i64> {
        self.tables
            .int_constants
            .get(name)
            .or_else(|| self.tables.long_constants.get(name))
            .copied()
    }
}

/// Tables made by hand, for the unit tests of the readers that use them.
#[cfg(test)]
impl VmStructs {
    /// Tables holding the instance fields `fields` (type, field, offset) and the types `types`
    /// (type, size).
    pub fn with(fields: &[(&str, &str, u64)], types: &[(&str, u64)]) -> VmStructs {
        let mut tables = Tables::default();
        for &(ty, field, offset) in fields {
            tables
                .fields
                .insert((ty.to_string(), field.to_string()), Field::Offset(offset));
        }
        for &(ty, size) in types {
            tables.types.insert(ty.to_string(), size);
        }
        VmStructs {
            tables: Arc::new(tables),
            bias: 0,
        }
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

        /// A libjvm whose variables are the fake's, loaded at `bias`.
        fn libjvm(&self, bias: u64) -> Libjvm {
            let symbols = self
                .vars
                .iter()
                .map(|(name, value)| (name.clone(), &**value as *const u64 as u64))
                .collect();
            let mut libjvm = Libjvm::with_symbols(symbols);
            libjvm.bias = bias;
            libjvm
        }

        fn read(&self) -> Result<VmStructs, HotSpotError> {
            let mem = ProcessMemory::new(std::process::id());
            VmStructs::read(&mem, &self.libjvm(0))
        }
    }

    #[test]
    fn tables_serve_later_processes_of_the_same_file_and_writers_at_their_bias() {
        let mut fake = Fake::new();
        let mem = ProcessMemory::new(std::process::id());
        let cache = TablesCache::new();
        let file: FileIdentity = (1, 2, 3, 4, 5);
        let owner = || ("1000\t1000\t1000\t1000".to_string(), 7);
        let heaps = |vm: VmStructs| vm.static_address("CodeCache", "_heaps").ok();
        let first = cache.get_or_read(file, owner(), &mem, &fake.libjvm(0));
        assert_eq!(heaps(first.expect("read")), Some(0x1234));
        // Another process of the same file and owner, its tables since changed by their owner:
        // the tables first read, at its own bias.
        fake.structs[1][5] = 0x9999;
        let same = cache.get_or_read(file, owner(), &mem, &fake.libjvm(0x10_0000));
        assert_eq!(heaps(same.expect("cached")), Some(0x10_1234));
        // Another user's JVM, or another file: read from its own memory.
        let other_user = ("0\t0\t0\t0".to_string(), 7);
        let theirs = cache.get_or_read(file, other_user, &mem, &fake.libjvm(0x10_0000));
        assert_eq!(heaps(theirs.expect("read")), Some(0x9999));
        let other_file = cache.get_or_read((1, 2, 3, 4, 6), owner(), &mem, &fake.libjvm(0));
        assert_eq!(heaps(other_file.expect("read")), Some(0x9999));
        // Tables that cannot be read are not kept.
        fake.set("gHotSpotVMStructs", 0);
        let starting = cache.get_or_read((9, 9, 9, 9, 9), owner(), &mem, &fake.libjvm(0));
        assert!(matches!(starting, Err(HotSpotError::NotReady(_))));
        fake.set("gHotSpotVMStructs", fake.structs.as_ptr() as u64);
        let ready = cache.get_or_read((9, 9, 9, 9, 9), owner(), &mem, &fake.libjvm(0));
        assert_eq!(heaps(ready.expect("read")), Some(0x9999));
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

    #[test]
    fn a_table_larger_than_any_hotspots_is_refused_before_its_names_are_read() {
        let mut fake = Fake::new();
        // Name pointers that cannot be read: reading one would be another error.
        fake.structs = (1..=MAX_ENTRIES + 1)
            .map(|i| [i * 8, i * 8, 0, 0, 0, 0])
            .collect();
        let base = fake.structs.as_ptr() as u64;
        fake.set("gHotSpotVMStructs", base);
        let Err(error) = fake.read() else {
            panic!("too many entries: the tables were read");
        };
        assert!(
            matches!(&error, HotSpotError::BadTable(why) if why.contains("more than 4096 entries")),
            "{error}"
        );
    }

    #[test]
    fn names_beyond_their_budget_are_refused() {
        let mut fake = Fake::new();
        // Distinct names of the longest length allowed, in a table of a length allowed.
        let names: Vec<Vec<u8>> = (0..3 * 1500)
            .map(|i| format!("{i:0>width$}\0", width = MAX_NAME).into_bytes())
            .collect();
        let at = |i: usize| names[i].as_ptr() as u64;
        fake.structs = (0..1500)
            .map(|i| [at(3 * i), at(3 * i + 1), at(3 * i + 2), 0, 0, 0])
            .chain([[0; 6]])
            .collect();
        let base = fake.structs.as_ptr() as u64;
        fake.set("gHotSpotVMStructs", base);
        let Err(error) = fake.read() else {
            panic!("too many name bytes: the tables were read");
        };
        assert!(
            matches!(&error, HotSpotError::BadTable(why) if why.contains("names of its tables")),
            "{error}"
        );
    }
}

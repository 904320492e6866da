//! Naming a `Method*`: Method -> ConstMethod -> ConstantPool -> holder Klass -> name Symbol, and
//! the method name through ConstMethod::_name_index into the constant pool. A candidate pointer is
//! first checked to be a Method (its C++ vtable is libjvm's `vtable for Method`, or a clone inside
//! the CDS archive), and every step is bounded.

use std::collections::HashMap;
use std::sync::Mutex;

use joularcode_core::mutf8;
use joularcode_core::names::{binary_class_name, method_name};
use joularcode_core::power::clock::monotonic_ns;

use super::memory::{array_at, word, Memory};
use super::vmstructs::VmStructs;
use super::HotSpotError;

/// A Java method, named as Joular names frames.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct JavaMethod {
    /// The binary class name, e.g. `java.lang.Thread` or `a.B$$Lambda/0x0000000800c5898`.
    pub class: String,
    /// The method name, e.g. `run` or `<init>`.
    pub name: String,
}

/// The mangled name of `vtable for Method` in libjvm's symbol tables.
pub const METHOD_VTABLE_SYMBOL: &str = "_ZTV6Method";

/// A vtable symbol points at the offset-to-top and RTTI words; objects point 2 words further.
pub(crate) const VTABLE_ADDRESS_POINT: u64 = 16;

/// Entries kept in the name cache before it is cleared.
const CACHE_LIMIT: usize = 100_000;

/// How long a name no lookup asked for stays cached: the methods of classes unloaded since (a JVM
/// that loads ever-new ones) leave the cache within that time.
const CACHE_KEEP_NS: u64 = 30_000_000_000;

/// Cached names, keyed by Method*, ConstMethod* and the two Symbols, each with when it was last
/// asked for.
#[derive(Debug, Default)]
struct NameCache {
    names: HashMap<(u64, u64, u64, u64), (JavaMethod, u64)>,
    swept_ns: u64,
}

impl NameCache {
    fn get(&mut self, key: &(u64, u64, u64, u64), now_ns: u64) -> Option<JavaMethod> {
        let (name, used) = self.names.get_mut(key)?;
        *used = now_ns;
        Some(name.clone())
    }

    fn put(&mut self, key: (u64, u64, u64, u64), name: JavaMethod, now_ns: u64) {
        if now_ns >= self.swept_ns.saturating_add(CACHE_KEEP_NS / 3) {
            self.swept_ns = now_ns;
            let cutoff = now_ns.saturating_sub(CACHE_KEEP_NS);
            self.names.retain(|_, (_, used)| *used >= cutoff);
        }
        if self.names.len() >= CACHE_LIMIT {
            self.names.clear();
        }
        self.names.insert(key, (name, now_ns));
    }
}

/// Offsets and addresses needed to name methods.
#[derive(Debug)]
pub struct MethodReader {
    method_size: u64,
    method_vtable: u64,
    shared_range: Option<(u64, u64)>,
    const_method: u64,
    const_method_size: u64,
    constants: u64,
    name_index: u64,
    pool_holder: u64,
    pool_length: u64,
    pool_size: u64,
    klass_name: u64,
    symbol_length: u64,
    symbol_body: u64,
    cache: Mutex<NameCache>,
}

impl MethodReader {
    /// Reads the offsets from `vm`. `method_vtable` is the address of [`METHOD_VTABLE_SYMBOL`] in
    /// the process, `shared_range` the CDS archive's address range when there is one.
    pub fn new(
        vm: &VmStructs,
        method_vtable: u64,
        shared_range: Option<(u64, u64)>,
    ) -> Result<MethodReader, HotSpotError> {
        Ok(MethodReader {
            method_size: vm.require_size("Method")?,
            method_vtable: method_vtable.wrapping_add(VTABLE_ADDRESS_POINT),
            shared_range,
            const_method: vm.offset(&["Method"], "_constMethod", 8)?,
            const_method_size: vm.require_size("ConstMethod")?,
            constants: vm.offset(&["ConstMethod"], "_constants", 8)?,
            name_index: vm.offset(&["ConstMethod"], "_name_index", 2)?,
            pool_holder: vm.offset(&["ConstantPool"], "_pool_holder", 8)?,
            pool_length: vm.offset(&["ConstantPool"], "_length", 4)?,
            pool_size: vm.require_size("ConstantPool")?,
            klass_name: vm.offset(&["Klass"], "_name", 8)?,
            symbol_length: vm.offset(&["Symbol"], "_length", 2)?,
            // The body is a flexible array: only its start must lie within sizeof(Symbol).
            symbol_body: vm.offset(&["Symbol"], "_body", 1)?,
            cache: Mutex::default(),
        })
    }

    /// Whether `vtable` (an object's first word) is that of a Method.
    fn is_method_vtable(&self, vtable: u64) -> bool {
        vtable == self.method_vtable
            || self
                .shared_range
                .is_some_and(|(low, high)| (low..high).contains(&vtable))
    }

    /// The class and name of the method at `method`, or `None` if it is not a readable Method.
    pub fn name(&self, mem: &dyn Memory, method: u64) -> Option<JavaMethod> {
        if method == 0 || method % 8 != 0 {
            return None;
        }
        let header = mem.read_bytes(method, self.method_size as usize)?;
        if !self.is_method_vtable(word(&header, 0)?) {
            return None;
        }
        let const_method = word(&header, self.const_method)?;
        if const_method == 0 || const_method % 8 != 0 {
            return None;
        }
        let (class_symbol, name_symbol) = self.symbols(mem, const_method)?;
        // The Symbols are part of the key: when a class is unloaded and another one loaded, its
        // Method and ConstMethod can take the very same addresses (seen with two classes of the
        // same shape loaded in turn), but not the names of a class that is still loaded.
        let key = (method, const_method, class_symbol, name_symbol);
        let now_ns = monotonic_ns();
        if let Some(found) = self.cache.lock().ok()?.get(&key, now_ns) {
            return Some(found);
        }
        let found = JavaMethod {
            class: binary_class_name(&self.symbol(mem, class_symbol)?),
            name: method_name(&self.symbol(mem, name_symbol)?).into_owned(),
        };
        self.cache.lock().ok()?.put(key, found.clone(), now_ns);
        Some(found)
    }

    /// The Symbols of the holder class's name and of the method's name, from its ConstMethod.
    fn symbols(&self, mem: &dyn Memory, const_method: u64) -> Option<(u64, u64)> {
        let cm = mem.read_bytes(const_method, self.const_method_size as usize)?;
        let pool = word(&cm, self.constants)?;
        let name_index = u64::from(u16::from_ne_bytes(array_at(&cm, self.name_index)?));
        if pool == 0 || pool % 8 != 0 {
            return None;
        }
        let cp = mem.read_bytes(pool, self.pool_size as usize)?;
        let holder = word(&cp, self.pool_holder)?;
        let length = u64::from(u32::from_ne_bytes(array_at(&cp, self.pool_length)?));
        if name_index == 0 || name_index >= length || holder == 0 || holder % 8 != 0 {
            return None;
        }
        let name_entry = pool.checked_add(self.pool_size + 8 * name_index)?;
        let name_symbol = mem.read_u64(name_entry)? & !1;
        let class_symbol = mem.read_u64(holder.checked_add(self.klass_name)?)?;
        Some((class_symbol, name_symbol))
    }

    /// The text of the Symbol at `symbol` (at most 65535 bytes: its length is a u16), decoded
    /// from modified UTF-8.
    fn symbol(&self, mem: &dyn Memory, symbol: u64) -> Option<String> {
        if symbol == 0 || symbol % 2 != 0 {
            return None;
        }
        let length = mem.read_u16(symbol.checked_add(self.symbol_length)?)?;
        if length == 0 {
            return None;
        }
        let body = mem.read_bytes(symbol.checked_add(self.symbol_body)?, usize::from(length))?;
        Some(mutf8::decode(&body).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hotspot::memory::ProcessMemory;
    use proptest::prelude::*;

    const VTABLE: u64 = 0x7000_0000;

    /// A reader with JDK 17's offsets: Method 88 bytes (_constMethod at 8), ConstMethod 48 bytes
    /// (_constants at 8, _name_index at 34), ConstantPool 72 bytes (_pool_holder at 24, _length
    /// at 60), Klass::_name at 24, Symbol _length at 4 and _body at 6.
    fn reader() -> MethodReader {
        MethodReader {
            method_size: 88,
            method_vtable: VTABLE + VTABLE_ADDRESS_POINT,
            shared_range: None,
            const_method: 8,
            const_method_size: 48,
            constants: 8,
            name_index: 34,
            pool_holder: 24,
            pool_length: 60,
            pool_size: 72,
            klass_name: 24,
            symbol_length: 4,
            symbol_body: 6,
            cache: Mutex::default(),
        }
    }

    /// A Symbol in this process's memory.
    fn symbol(text: impl AsRef<[u8]>) -> Vec<u8> {
        let text = text.as_ref();
        let mut bytes = vec![0; 4];
        bytes.extend((text.len() as u16).to_ne_bytes());
        bytes.extend(text);
        bytes
    }

    fn put(words: &mut [u64], byte_offset: usize, value: u64) {
        words[byte_offset / 8] = value;
    }

    /// A Method, its ConstMethod, ConstantPool, Klass and Symbols, laid out in this process.
    struct FakeMethod {
        method: Box<[u64; 11]>,
        _const_method: Box<[u64; 6]>,
        _pool: Box<[u64; 16]>,
        _klass: Box<[u64; 8]>,
        _symbols: [Vec<u8>; 2],
    }

    impl FakeMethod {
        /// A Method whose vtable word is `vtable` and whose name is pool entry `name_index`
        /// of a 5-entry pool.
        fn new(vtable: u64, name_index: u64) -> FakeMethod {
            let class = symbol("demo/Burn$$Lambda+0x0000000800c5898");
            let name = symbol("run");
            let mut klass = Box::new([0u64; 8]);
            put(&mut klass[..], 24, class.as_ptr() as u64);
            let mut pool = Box::new([0u64; 16]);
            put(&mut pool[..], 24, klass.as_ptr() as u64);
            pool[60 / 8] = 5 << 32; // _length = 5, at byte 60 (upper half of word 7)
            pool[72 / 8 + 3] = name.as_ptr() as u64 | 1; // entry 3, low bit set as HotSpot may
            let mut const_method = Box::new([0u64; 6]);
            put(&mut const_method[..], 8, pool.as_ptr() as u64);
            const_method[4] = name_index << 16; // _name_index at byte 34
            let mut method = Box::new([0u64; 11]);
            method[0] = vtable;
            put(&mut method[..], 8, const_method.as_ptr() as u64);
            FakeMethod {
                method,
                _const_method: const_method,
                _pool: pool,
                _klass: klass,
                _symbols: [class, name],
            }
        }

        fn address(&self) -> u64 {
            self.method.as_ptr() as u64
        }
    }

    #[test]
    fn names_a_well_formed_method_and_refuses_a_wrong_vtable() {
        let mem = ProcessMemory::new(std::process::id());
        let expected = JavaMethod {
            class: "demo.Burn$$Lambda/0x0000000800c5898".into(),
            name: "run".into(),
        };
        let good = FakeMethod::new(VTABLE + VTABLE_ADDRESS_POINT, 3);
        assert_eq!(reader().name(&mem, good.address()), Some(expected));
        let wrong_vtable = FakeMethod::new(VTABLE, 3);
        assert_eq!(reader().name(&mem, wrong_vtable.address()), None);
        let index_past_the_pool = FakeMethod::new(VTABLE + VTABLE_ADDRESS_POINT, 5);
        assert_eq!(reader().name(&mem, index_past_the_pool.address()), None);
    }

    /// A class unloaded and another loaded: the new Method and ConstMethod at the very same
    /// addresses, the holder's name another Symbol. The name read before must not be returned.
    #[test]
    fn a_method_at_the_address_of_an_unloaded_one_gets_its_own_name() {
        let mem = ProcessMemory::new(std::process::id());
        let reader = reader();
        let mut method = FakeMethod::new(VTABLE + VTABLE_ADDRESS_POINT, 3);
        let before = reader.name(&mem, method.address()).expect("a method");
        assert_eq!(before.class, "demo.Burn$$Lambda/0x0000000800c5898");
        let other = symbol("demo/Other");
        put(&mut method._klass[..], 24, other.as_ptr() as u64);
        let after = reader.name(&mem, method.address()).expect("a method");
        assert_eq!(
            (after.class.as_str(), after.name.as_str()),
            ("demo.Other", "run")
        );
    }

    /// Symbols hold modified UTF-8, up to 65535 bytes: `run` then U+1D49C as a surrogate pair
    /// and a NUL as `C0 80`, and a name of 65535 bytes.
    #[test]
    fn symbols_are_decoded_as_the_jvm_writes_them_and_cut() {
        let mem = ProcessMemory::new(std::process::id());
        let reader = reader();
        let mut method = FakeMethod::new(VTABLE + VTABLE_ADDRESS_POINT, 3);
        let odd = symbol(b"run\xed\xa0\xb5\xed\xb2\x9c\xc0\x80");
        method._pool[72 / 8 + 3] = odd.as_ptr() as u64;
        let named = reader.name(&mem, method.address()).expect("a method");
        assert_eq!(named.name, "run\u{1d49c}\0");
        let long = symbol("m".repeat(65_535));
        method._pool[72 / 8 + 3] = long.as_ptr() as u64;
        let named = reader.name(&mem, method.address()).expect("a method");
        assert_eq!(named.name, method_name(&"m".repeat(65_535)));
        assert!(named.name.len() <= joularcode_core::names::MAX_METHOD_NAME_BYTES);
    }

    proptest! {
        #[test]
        fn garbage_behind_a_valid_vtable_never_panics(
            arena in proptest::collection::vec(any::<u64>(), 64),
            links in proptest::collection::vec((0usize..64, 0usize..64, any::<bool>()), 0..32),
        ) {
            let mut arena = arena;
            let base = arena.as_ptr() as u64;
            // Some words point back into the arena (maybe misaligned), the rest stay random.
            for (from, to, misalign) in links {
                arena[from] = base + 8 * to as u64 + u64::from(misalign);
            }
            arena[0] = VTABLE + VTABLE_ADDRESS_POINT;
            let mem = ProcessMemory::new(std::process::id());
            let _ = reader().name(&mem, arena.as_ptr() as u64);
        }
    }
}

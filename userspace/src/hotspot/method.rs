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

/// Where the walk from a Method* to its Symbols went: its ConstMethod, the ConstantPool and the
/// method name's index in it, and the pool's holder Klass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Path {
    const_method: u64,
    pool: u64,
    name_index: u64,
    holder: u64,
}

/// What a Method* was last found to be: the path to its Symbols, the Symbols of its class and
/// of its name, its name, and when a lookup last asked for it.
#[derive(Debug)]
struct Known {
    path: Path,
    symbols: (u64, u64),
    name: JavaMethod,
    used_ns: u64,
}

/// The methods named so far, by Method*.
#[derive(Debug, Default)]
struct NameCache {
    known: HashMap<u64, Known>,
    swept_ns: u64,
}

impl NameCache {
    fn path(&self, method: u64) -> Option<Path> {
        self.known.get(&method).map(|known| known.path)
    }

    /// The name of `method` if it was named with the same ConstMethod and Symbols: when a class
    /// is unloaded and another one loaded, its Method and ConstMethod can take the very same
    /// addresses (seen with two classes of the same shape loaded in turn), but not the names of
    /// a class that is still loaded.
    fn get(
        &mut self,
        method: u64,
        path: Path,
        symbols: (u64, u64),
        now_ns: u64,
    ) -> Option<JavaMethod> {
        let known = self.known.get_mut(&method)?;
        if known.path.const_method != path.const_method || known.symbols != symbols {
            return None;
        }
        known.path = path;
        known.used_ns = now_ns;
        Some(known.name.clone())
    }

    fn put(&mut self, method: u64, known: Known) {
        let now_ns = known.used_ns;
        if now_ns >= self.swept_ns.saturating_add(CACHE_KEEP_NS / 3) {
            self.swept_ns = now_ns;
            let cutoff = now_ns.saturating_sub(CACHE_KEEP_NS);
            self.known.retain(|_, known| known.used_ns >= cutoff);
        }
        if self.known.len() >= CACHE_LIMIT {
            self.known.clear();
        }
        self.known.insert(method, known);
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
    ///
    /// A Method* named before is read again along the path its last read took, all in one
    /// [`Memory::read_all`]: the answer holds when every pointer read on the way is still the
    /// one that path followed, and the Method* is walked step by step otherwise.
    pub fn name(&self, mem: &dyn Memory, method: u64) -> Option<JavaMethod> {
        if method == 0 || method % 8 != 0 {
            return None;
        }
        let known = self.cache.lock().ok()?.path(method);
        let (path, symbols) = known
            .and_then(|path| self.walk_again(mem, method, path))
            .or_else(|| self.walk(mem, method))?;
        let now_ns = monotonic_ns();
        if let Some(found) = self.cache.lock().ok()?.get(method, path, symbols, now_ns) {
            return Some(found);
        }
        let name = JavaMethod {
            class: binary_class_name(&self.symbol(mem, symbols.0)?),
            name: method_name(&self.symbol(mem, symbols.1)?).into_owned(),
        };
        let known = Known {
            path,
            symbols,
            name: name.clone(),
            used_ns: now_ns,
        };
        self.cache.lock().ok()?.put(method, known);
        Some(name)
    }

    /// The path from `method` to its Symbols, read step by step, and the Symbols of its class
    /// and of its name.
    fn walk(&self, mem: &dyn Memory, method: u64) -> Option<(Path, (u64, u64))> {
        let const_method =
            self.const_method(&mem.read_bytes(method, self.method_size as usize)?)?;
        let cm = mem.read_bytes(const_method, self.const_method_size as usize)?;
        let (pool, name_index) = self.pool(&cm)?;
        let holder = self.holder(&mem.read_bytes(pool, self.pool_size as usize)?, name_index)?;
        let path = Path {
            const_method,
            pool,
            name_index,
            holder,
        };
        let [entry, klass_name] = self.symbol_words(path)?;
        let words = mem.read_all(&[(entry, 8), (klass_name, 8)]);
        Some((path, self.symbols(&words[0], &words[1])?))
    }

    /// The Symbols of `method` read along `path` in one [`Memory::read_all`], if every pointer
    /// read on the way still follows `path`.
    fn walk_again(&self, mem: &dyn Memory, method: u64, path: Path) -> Option<(Path, (u64, u64))> {
        let [entry, klass_name] = self.symbol_words(path)?;
        let read = mem.read_all(&[
            (method, self.method_size as usize),
            (path.const_method, self.const_method_size as usize),
            (path.pool, self.pool_size as usize),
            (entry, 8),
            (klass_name, 8),
        ]);
        let [header, cm, cp, entry, klass_name] = read.as_slice() else {
            return None;
        };
        let same = self.const_method(header.as_deref()?)? == path.const_method
            && self.pool(cm.as_deref()?)? == (path.pool, path.name_index)
            && self.holder(cp.as_deref()?, path.name_index)? == path.holder;
        same.then(|| Some((path, self.symbols(entry, klass_name)?)))?
    }

    /// The ConstMethod of the Method whose bytes are `header`, if they are a Method's.
    fn const_method(&self, header: &[u8]) -> Option<u64> {
        if !self.is_method_vtable(word(header, 0)?) {
            return None;
        }
        let const_method = word(header, self.const_method)?;
        (const_method != 0 && const_method % 8 == 0).then_some(const_method)
    }

    /// The ConstantPool of the ConstMethod whose bytes are `cm`, and the index of the method's
    /// name in it.
    fn pool(&self, cm: &[u8]) -> Option<(u64, u64)> {
        let pool = word(cm, self.constants)?;
        let name_index = u64::from(u16::from_ne_bytes(array_at(cm, self.name_index)?));
        (pool != 0 && pool % 8 == 0).then_some((pool, name_index))
    }

    /// The holder Klass of the ConstantPool whose bytes are `cp`, if `name_index` is one of its
    /// entries.
    fn holder(&self, cp: &[u8], name_index: u64) -> Option<u64> {
        let holder = word(cp, self.pool_holder)?;
        let length = u64::from(u32::from_ne_bytes(array_at(cp, self.pool_length)?));
        (name_index != 0 && name_index < length && holder != 0 && holder % 8 == 0).then_some(holder)
    }

    /// The addresses of the pool entry of the method's name and of the holder's name.
    fn symbol_words(&self, path: Path) -> Option<[u64; 2]> {
        Some([
            path.pool
                .checked_add(self.pool_size + 8 * path.name_index)?,
            path.holder.checked_add(self.klass_name)?,
        ])
    }

    /// The Symbols of the holder class's name and of the method's name, from the words read at
    /// [`MethodReader::symbol_words`].
    fn symbols(&self, entry: &Option<Vec<u8>>, klass_name: &Option<Vec<u8>>) -> Option<(u64, u64)> {
        let name_symbol = word(entry.as_deref()?, 0)? & !1;
        let class_symbol = word(klass_name.as_deref()?, 0)?;
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
    use crate::hotspot::memory::{Counted, ProcessMemory};
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
        const_method: Box<[u64; 6]>,
        pool: Box<[u64; 16]>,
        klass: Box<[u64; 8]>,
        _symbols: [Vec<u8>; 3],
    }

    impl FakeMethod {
        /// A Method whose vtable word is `vtable` and whose name is pool entry `name_index`
        /// of a 5-entry pool.
        fn new(vtable: u64, name_index: u64) -> FakeMethod {
            FakeMethod::named(
                vtable,
                name_index,
                "demo/Burn$$Lambda+0x0000000800c5898",
                "run",
            )
        }

        /// A Method of class `class` (internal form) whose vtable word is `vtable` and whose
        /// name is pool entry `name_index` of a 5-entry pool: `name` at entry 3, `name` and
        /// `2` at entry 4.
        fn named(vtable: u64, name_index: u64, class: &str, name: &str) -> FakeMethod {
            let class = symbol(class);
            let other = symbol(format!("{name}2"));
            let name = symbol(name);
            let mut klass = Box::new([0u64; 8]);
            put(&mut klass[..], 24, class.as_ptr() as u64);
            let mut pool = Box::new([0u64; 16]);
            put(&mut pool[..], 24, klass.as_ptr() as u64);
            pool[60 / 8] = 5 << 32; // _length = 5, at byte 60 (upper half of word 7)
            pool[72 / 8 + 3] = name.as_ptr() as u64 | 1; // entry 3, low bit set as HotSpot may
            pool[72 / 8 + 4] = other.as_ptr() as u64;
            let mut const_method = Box::new([0u64; 6]);
            put(&mut const_method[..], 8, pool.as_ptr() as u64);
            const_method[4] = name_index << 16; // _name_index at byte 34
            let mut method = Box::new([0u64; 11]);
            method[0] = vtable;
            put(&mut method[..], 8, const_method.as_ptr() as u64);
            FakeMethod {
                method,
                const_method,
                pool,
                klass,
                _symbols: [class, name, other],
            }
        }

        fn address(&self) -> u64 {
            self.method.as_ptr() as u64
        }
    }

    /// Once named, a Method* is read again in one call while nothing on its path changed.
    #[test]
    fn a_method_named_before_is_read_again_in_one_call() {
        let mem = Counted::new(ProcessMemory::new(std::process::id()));
        let reader = reader();
        let method = FakeMethod::new(VTABLE + VTABLE_ADDRESS_POINT, 3);
        let first = reader.name(&mem, method.address()).expect("a method");
        assert_eq!(
            mem.calls(),
            8,
            "4 reads to the Symbols, then 2 for each Symbol"
        );
        for _ in 0..3 {
            assert_eq!(reader.name(&mem, method.address()).as_ref(), Some(&first));
            assert_eq!(mem.calls(), 1);
        }
    }

    /// Each pointer on a named Method's path changed in turn, to another method's: each time,
    /// the name is that of the method the path now leads to.
    #[test]
    fn each_step_of_a_changed_path_is_followed() {
        let mem = ProcessMemory::new(std::process::id());
        let reader = reader();
        let vtable = VTABLE + VTABLE_ADDRESS_POINT;
        let mut a = FakeMethod::named(vtable, 3, "a/A", "alpha");
        let b = FakeMethod::named(vtable, 3, "b/B", "beta");
        let name = |reader: &MethodReader, method: &FakeMethod| {
            let named = reader.name(&mem, method.address()).expect("a method");
            format!("{}.{}", named.class, named.name)
        };
        assert_eq!(name(&reader, &a), "a.A.alpha");
        a.const_method[4] = 4 << 16;
        assert_eq!(name(&reader, &a), "a.A.alpha2", "the name index");
        let c = symbol("c/C");
        put(&mut a.klass[..], 24, c.as_ptr() as u64);
        assert_eq!(name(&reader, &a), "c.C.alpha2", "the holder's name");
        put(&mut a.pool[..], 24, b.pool[3]);
        assert_eq!(name(&reader, &a), "b.B.alpha2", "the holder");
        put(&mut a.const_method[..], 8, b.const_method[1]);
        assert_eq!(name(&reader, &a), "b.B.beta2", "the pool");
        put(&mut a.method[..], 8, b.method[1]);
        assert_eq!(name(&reader, &a), "b.B.beta", "the ConstMethod");
        a.method[0] = VTABLE;
        assert_eq!(reader.name(&mem, a.address()), None, "no longer a Method");
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
        put(&mut method.klass[..], 24, other.as_ptr() as u64);
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
        method.pool[72 / 8 + 3] = odd.as_ptr() as u64;
        let named = reader.name(&mem, method.address()).expect("a method");
        assert_eq!(named.name, "run\u{1d49c}\0");
        let long = symbol("m".repeat(65_535));
        method.pool[72 / 8 + 3] = long.as_ptr() as u64;
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

//! The JVMTI event handlers: each turns one event into lines of the code map and the perf map.
//!
//! They run on the JVM's threads (compiler threads, the service thread, the attach listener), so
//! they do no I/O and take the shared lock only to append.

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr};

use joularcode_core::code_map as records;
use joularcode_core::power::clock::monotonic_ns;
use joularcode_core::{mutf8, names};

use crate::format;
use crate::jvmti::{CmlrHeader, CmlrInlineRecord, Env, Jint, JmethodId, CMLR_INLINE_INFO};
use crate::output::{Pending, Sink};

/// Most pc descriptors and inlining depth read from one event: bounds on what the JVM hands over.
const MAX_PCS: usize = 1 << 20;
const MAX_DEPTH: usize = 1024;
const MAX_RECORDS: usize = 64;
/// Method numbers given at most before they are all forgotten (`F` record): the agent's memory,
/// and its readers', stays bounded however many classes the JVM loads and unloads.
const FORGET_AT: usize = 1 << 12;
/// How many times one event asks for the names it lacks (it lacks them again only when another
/// event made the agent forget its numbers meanwhile).
const NAMING_TRIES: usize = 3;

thread_local! {
    /// Set while this thread runs GenerateEvents: its load events describe code that existed
    /// before the agent attached.
    pub static REPLAYING: Cell<bool> = const { Cell::new(false) };
}

/// Joular's name of a method: `package.Class.method`.
///
/// # Safety
/// `method` is a method id given by the JVM in the current event.
unsafe fn method_name(env: Env, method: JmethodId) -> String {
    let (class, name) = env.method_names(method);
    format!(
        "{}.{}",
        class.as_deref().unwrap_or("[unknown class]"),
        name.as_deref().unwrap_or("[unknown method]")
    )
}

/// The pc descriptors of the first inline record: (code offset, methods outermost first).
///
/// # Safety
/// `compile_info` is the record list given to CompiledMethodLoad, valid during the event.
unsafe fn inline_pcs(
    compile_info: *const c_void,
    code_addr: u64,
    code_size: u32,
) -> Vec<(u32, Vec<JmethodId>)> {
    let mut record = compile_info as *const CmlrHeader;
    for _ in 0..MAX_RECORDS {
        if record.is_null() {
            break;
        }
        if (*record).kind == CMLR_INLINE_INFO {
            let inline = &*(record as *const CmlrInlineRecord);
            let count = usize::try_from(inline.numpcs).unwrap_or(0).min(MAX_PCS);
            if inline.pcinfo.is_null() {
                return Vec::new();
            }
            let infos = std::slice::from_raw_parts(inline.pcinfo, count);
            return infos
                .iter()
                .filter_map(|info| {
                    let offset = (info.pc as u64).checked_sub(code_addr)?;
                    let offset = u32::try_from(offset).ok().filter(|&o| o < code_size)?;
                    let depth = usize::try_from(info.numstackframes).ok()?.min(MAX_DEPTH);
                    if depth == 0 || info.methods.is_null() {
                        return None;
                    }
                    let methods = std::slice::from_raw_parts(info.methods, depth);
                    Some((offset, methods.iter().rev().copied().collect()))
                })
                .collect();
        }
        record = (*record).next;
    }
    Vec::new()
}

/// CompiledMethodLoad: writes the method's `M` lines if new, its `L`/`R` line and a perf line.
///
/// # Safety
/// The arguments are those of the JVMTI event.
pub unsafe fn compiled_method_load(
    env: Env,
    sink: &Sink,
    method: JmethodId,
    code_size: Jint,
    code_addr: *const c_void,
    compile_info: *const c_void,
) {
    let time = monotonic_ns();
    let (Ok(size), false) = (u32::try_from(code_size), code_addr.is_null()) else {
        return;
    };
    let start = code_addr as u64;
    let pcs = inline_pcs(compile_info, start, size);
    let mut wanted: Vec<JmethodId> = std::iter::once(method)
        .chain(pcs.iter().flat_map(|(_, chain)| chain.iter().copied()))
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    let replayed = REPLAYING.with(Cell::get);
    // Names are asked of JVMTI outside the lock. Another event may make the agent forget its
    // method numbers in between: then the names it needs are asked again.
    let mut named: HashMap<JmethodId, String> = HashMap::new();
    for _ in 0..NAMING_TRIES {
        let unknown: Vec<JmethodId> = sink.with(|p| {
            if p.names.len() >= FORGET_AT {
                p.forget(time);
            }
            missing(p, &wanted, &named)
        });
        for m in unknown {
            named.insert(m, method_name(env, m));
        }
        let written = sink.with(|p| {
            if !missing(p, &wanted, &named).is_empty() {
                return false;
            }
            for m in &wanted {
                if let Some(name) = named.get(m) {
                    p.number(*m, name);
                }
            }
            write_load(p, replayed, time, start, size, method, &pcs);
            true
        });
        if written {
            return;
        }
    }
}

/// The methods of `wanted` that have no number and no name in `named`.
fn missing(
    p: &Pending,
    wanted: &[JmethodId],
    named: &HashMap<JmethodId, String>,
) -> Vec<JmethodId> {
    wanted
        .iter()
        .filter(|m| !p.methods.contains_key(&(**m as usize)) && !named.contains_key(m))
        .copied()
        .collect()
}

/// The `L`/`R` line of compiled code whose methods all have numbers, and its perf line.
fn write_load(
    p: &mut Pending,
    replayed: bool,
    time: u64,
    start: u64,
    size: u32,
    method: JmethodId,
    pcs: &[(u32, Vec<JmethodId>)],
) {
    let id = |m: &JmethodId| p.methods.get(&(*m as usize)).copied().unwrap_or(0);
    let root = id(&method);
    let chains = pcs
        .iter()
        .map(|(offset, chain)| (*offset, chain.iter().map(id).collect::<Vec<u32>>()));
    let ranges = format::inline_ranges(size, root, chains);
    records::compiled_load(&mut p.map, replayed, time, start, size, root, &ranges);
    if p.perf_map {
        if let Some(name) = p.names.get(root as usize) {
            format::perf_line(&mut p.perf, start, size, name);
        }
    }
}

/// CompiledMethodUnload: writes a `U` line.
pub fn compiled_method_unload(sink: &Sink, code_addr: *const c_void) {
    let time = monotonic_ns();
    sink.with(|p| records::compiled_unload(&mut p.map, time, code_addr as u64));
}

/// DynamicCodeGenerated: writes an `S` line and a perf line, once per piece of code.
///
/// # Safety
/// `name` is null or the NUL-terminated name given with the event.
pub unsafe fn dynamic_code_generated(
    sink: &Sink,
    name: *const c_char,
    address: *const c_void,
    length: Jint,
) {
    let time = monotonic_ns();
    let (Ok(size), false) = (u32::try_from(length), address.is_null()) else {
        return;
    };
    let name = if name.is_null() {
        "[stub]".into()
    } else {
        names::qualified_name(&mutf8::decode(CStr::from_ptr(name).to_bytes())).into_owned()
    };
    let start = address as u64;
    sink.with(|p| {
        if p.stubs.insert((start, size)) {
            records::stub(&mut p.map, time, start, size, &name);
            if p.perf_map {
                format::perf_line(&mut p.perf, start, size, &name);
            }
        }
    });
}

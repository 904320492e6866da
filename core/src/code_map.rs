//! The code map's format (docs/code-map.md), defined once: jvm-symbolizer-agent writes it with
//! the functions here, joularcode-bpf reads it with [`parse_header`] and [`parse`].
//!
//! A writer appends whole lines to a caller's buffer (the agent's callbacks build their lines
//! without I/O). The parser takes one line without its `\n` and returns `None` for anything
//! malformed or out of bounds: the file is written by the JVM's user, so nothing in it is trusted.

use std::io::Write;

use crate::{mutf8, names};

/// First word of a code map's header line.
pub const MAGIC: &str = "joularcode-code-map";
/// The format's version, second word of the header; a reader refuses other versions.
pub const VERSION: u32 = 2;
/// Method numbers are below this.
pub const MAX_METHOD_ID: u32 = 1 << 24;
/// Largest size of one piece of code.
pub const MAX_CODE_SIZE: u32 = 1 << 30;
/// Most methods in one inline chain.
pub const MAX_DEPTH: usize = 1024;

/// Code offsets `[from, to)` of a compiled method where the methods in `chain` (numbers of `M`
/// lines, outermost first, the compiled method itself first) are executing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlineRange {
    /// First offset.
    pub from: u32,
    /// Offset after the last.
    pub to: u32,
    /// Method numbers, outermost first.
    pub chain: Vec<u32>,
}

/// One record line of a code map, after the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// `M <id> <name>`: method number `id` is named `name`.
    Method {
        /// Its number.
        id: u32,
        /// Joular's name, `package.Class.method`.
        name: String,
    },
    /// `L|R <time> <start> <size> <root> [<from>-<to>:<id>,<id>...]...`: compiled code loaded
    /// at `time_ns` (`L`), or already there when the agent attached (`R`, `replayed`).
    Compiled {
        /// Replayed at attach: valid since before `time_ns`.
        replayed: bool,
        /// When it was loaded (or replayed).
        time_ns: u64,
        /// Its first address.
        start: u64,
        /// Its size in bytes, above 0 and at most [`MAX_CODE_SIZE`].
        size: u32,
        /// The compiled method's number.
        root: u32,
        /// Inline ranges, sorted and disjoint, within `size`.
        ranges: Vec<InlineRange>,
    },
    /// `U <time> <start>`: the compiled code at `start` was unloaded.
    Unload {
        /// When.
        time_ns: u64,
        /// Its first address.
        start: u64,
    },
    /// `S <time> <start> <size> <name>`: code the JVM generated (interpreter, stubs, adapters).
    Stub {
        /// When it was reported.
        time_ns: u64,
        /// Its first address.
        start: u64,
        /// Its size in bytes.
        size: u32,
        /// Its name.
        name: String,
    },
    /// `F <time>`: every method number given so far is forgotten; later records use only the
    /// numbers of `M` records that follow (the agent's memory, and its readers', stays bounded
    /// however many classes a JVM loads and unloads).
    Forget {
        /// When.
        time_ns: u64,
    },
}

/// The header line: format name, version, clock, the JVM's pid as it sees itself.
pub fn header(out: &mut Vec<u8>, pid: u32) {
    let _ = writeln!(out, "{MAGIC} {VERSION} monotonic {pid}");
}

/// The pid of a header line (without its `\n`), or `None` when it is not the header of a code
/// map of this version.
pub fn parse_header(line: &str) -> Option<u32> {
    let mut fields = line.split(' ');
    let magic = fields.next()? == MAGIC;
    let version = fields.next()?.parse::<u32>().ok()? == VERSION;
    let clock = fields.next()? == "monotonic";
    let pid = fields.next()?.parse().ok()?;
    (magic && version && clock && fields.next().is_none()).then_some(pid)
}

/// Appends `name` with `%`, spaces, control characters, `,` and `;` written as `%XX`, so that a
/// name is one field of a line.
pub fn escape(out: &mut Vec<u8>, name: &str) {
    for &byte in name.as_bytes() {
        if byte <= b' ' || byte == 0x7f || byte == b'%' || byte == b',' || byte == b';' {
            let _ = write!(out, "%{byte:02X}");
        } else {
            out.push(byte);
        }
    }
}

/// Undoes [`escape`], decoding the name as [`mutf8::decode`] does and cutting it as
/// [`names::qualified_name`] does; `None` for an empty name or a bad escape.
pub fn unescape(name: &str) -> Option<String> {
    if name.is_empty() {
        return None;
    }
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(names::qualified_name(&mutf8::decode(&out)).into_owned())
}

/// `M <id> <name>`.
pub fn method(out: &mut Vec<u8>, id: u32, name: &str) {
    let _ = write!(out, "M {id} ");
    escape(out, name);
    out.push(b'\n');
}

/// `L|R <time> <start> <size> <root> [<from>-<to>:<id>,<id>...]...`.
pub fn compiled_load(
    out: &mut Vec<u8>,
    replayed: bool,
    time_ns: u64,
    start: u64,
    size: u32,
    root: u32,
    ranges: &[InlineRange],
) {
    let kind = if replayed { 'R' } else { 'L' };
    let _ = write!(out, "{kind} {time_ns} {start:x} {size:x} {root}");
    for range in ranges {
        let _ = write!(out, " {:x}-{:x}:", range.from, range.to);
        for (i, id) in range.chain.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(out, "{sep}{id}");
        }
    }
    out.push(b'\n');
}

/// `U <time> <start>`.
pub fn compiled_unload(out: &mut Vec<u8>, time_ns: u64, start: u64) {
    let _ = writeln!(out, "U {time_ns} {start:x}");
}

/// `S <time> <start> <size> <name>`.
pub fn stub(out: &mut Vec<u8>, time_ns: u64, start: u64, size: u32, name: &str) {
    let _ = write!(out, "S {time_ns} {start:x} {size:x} ");
    escape(out, name);
    out.push(b'\n');
}

/// `F <time>`.
pub fn forget(out: &mut Vec<u8>, time_ns: u64) {
    let _ = writeln!(out, "F {time_ns}");
}

/// One record line (without its `\n`); `None` when it is malformed or out of bounds.
pub fn parse(line: &str) -> Option<Record> {
    let (kind, rest) = line.split_once(' ')?;
    match kind {
        "M" => {
            let (id, name) = rest.split_once(' ')?;
            Some(Record::Method {
                id: id.parse().ok().filter(|&id| id < MAX_METHOD_ID)?,
                name: unescape(name)?,
            })
        }
        "L" | "R" => compiled(kind == "R", rest),
        "U" => {
            let (time, start) = rest.split_once(' ')?;
            Some(Record::Unload {
                time_ns: time.parse().ok()?,
                start: u64::from_str_radix(start, 16).ok()?,
            })
        }
        "S" => {
            let mut fields = rest.splitn(4, ' ');
            let time_ns = fields.next()?.parse().ok()?;
            let (start, size) = address_range(fields.next()?, fields.next()?)?;
            Some(Record::Stub {
                time_ns,
                start,
                size,
                name: unescape(fields.next()?)?,
            })
        }
        "F" => Some(Record::Forget {
            time_ns: rest.parse().ok()?,
        }),
        _ => None,
    }
}

fn compiled(replayed: bool, rest: &str) -> Option<Record> {
    let mut fields = rest.split(' ');
    let time_ns = fields.next()?.parse().ok()?;
    let (start, size) = address_range(fields.next()?, fields.next()?)?;
    let root = method_id(fields.next()?)?;
    let mut ranges = fields
        .map(|field| {
            let (range, ids) = field.split_once(':')?;
            let (from, to) = range.split_once('-')?;
            let from = u32::from_str_radix(from, 16).ok()?;
            let to = u32::from_str_radix(to, 16).ok()?;
            if from >= to || to > size {
                return None;
            }
            let chain: Vec<u32> = ids
                .split(',')
                .take(MAX_DEPTH + 1)
                .map(method_id)
                .collect::<Option<_>>()?;
            (chain.len() <= MAX_DEPTH).then_some(InlineRange { from, to, chain })
        })
        .collect::<Option<Vec<_>>>()?;
    ranges.sort_by_key(|r| r.from);
    if ranges.windows(2).any(|w| w[0].to > w[1].from) {
        return None;
    }
    Some(Record::Compiled {
        replayed,
        time_ns,
        start,
        size,
        root,
        ranges,
    })
}

fn method_id(id: &str) -> Option<u32> {
    id.parse().ok().filter(|&id| id < MAX_METHOD_ID)
}

/// `start` and `size` in hex, with a size above 0, at most [`MAX_CODE_SIZE`], and an end that
/// fits the address space.
fn address_range(start: &str, size: &str) -> Option<(u64, u32)> {
    let start = u64::from_str_radix(start, 16).ok()?;
    let size = u32::from_str_radix(size, 16)
        .ok()
        .filter(|&s| s > 0 && s <= MAX_CODE_SIZE)?;
    start.checked_add(u64::from(size))?;
    Some((start, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(write: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut out = Vec::new();
        write(&mut out);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches('\n').count(), 1, "{text:?}");
        text.trim_end_matches('\n').to_string()
    }

    #[test]
    fn every_record_written_is_read_back() {
        let crafted = "Crafted\"quote\\back\nline\r\0\u{7f}x é,;%.run";
        let ranges = vec![
            InlineRange {
                from: 9,
                to: 0x21,
                chain: vec![1, 2],
            },
            InlineRange {
                from: 0x21,
                to: 0x31,
                chain: vec![1, 2, 3],
            },
        ];
        let records = [
            (
                line(|o| method(o, 7, crafted)),
                Record::Method {
                    id: 7,
                    name: crafted.into(),
                },
            ),
            (
                line(|o| compiled_load(o, false, 5, 0x7f00, 0x100, 1, &ranges)),
                Record::Compiled {
                    replayed: false,
                    time_ns: 5,
                    start: 0x7f00,
                    size: 0x100,
                    root: 1,
                    ranges: ranges.clone(),
                },
            ),
            (
                line(|o| compiled_load(o, true, 6, 0x8f00, 0x10, 4, &[])),
                Record::Compiled {
                    replayed: true,
                    time_ns: 6,
                    start: 0x8f00,
                    size: 0x10,
                    root: 4,
                    ranges: vec![],
                },
            ),
            (
                line(|o| compiled_unload(o, 8, 0x7f00)),
                Record::Unload {
                    time_ns: 8,
                    start: 0x7f00,
                },
            ),
            (
                line(|o| stub(o, 9, 0x3000, 0x40, crafted)),
                Record::Stub {
                    time_ns: 9,
                    start: 0x3000,
                    size: 0x40,
                    name: crafted.into(),
                },
            ),
            (line(|o| forget(o, 10)), Record::Forget { time_ns: 10 }),
        ];
        for (text, record) in records {
            assert_eq!(parse(&text), Some(record), "{text}");
        }
        assert_eq!(parse_header(&line(|o| header(o, 42))), Some(42));
    }

    /// A map holds what the agent wrote (UTF-8), or anything: modified UTF-8 is decoded too, and
    /// a name of any length comes back cut as the readers of Symbols cut it.
    #[test]
    fn names_are_decoded_and_cut() {
        assert_eq!(
            parse("M 1 a.B.r%C0%80%ED%A0%B5%ED%B2%9C"),
            Some(Record::Method {
                id: 1,
                name: "a.B.r\0\u{1d49c}".into()
            })
        );
        let long = format!("a.{}.{}", "C".repeat(70_000), "m".repeat(70_000));
        let Some(Record::Method { name, .. }) = parse(&line(|o| method(o, 2, &long))) else {
            panic!("a method record");
        };
        assert_eq!(name, names::qualified_name(&long));
        assert!(name.len() <= names::MAX_FRAME_NAME_BYTES);
    }

    #[test]
    fn names_are_one_field() {
        let text = line(|o| method(o, 7, "a.B$$Lambda/0x1.run odd;name,100%"));
        assert_eq!(text, "M 7 a.B$$Lambda/0x1.run%20odd%3Bname%2C100%25");
        let crafted = "Crafted\nM 9 forged";
        let text = line(|o| method(o, 3, crafted));
        assert_eq!(text.split(' ').count(), 3);
        assert!(!text.bytes().any(|b| b < b' '));
    }

    #[test]
    fn malformed_or_out_of_bound_lines_are_refused() {
        for bad in [
            "X 1",
            "M 16777216 a.B.c",
            "M 1 ",
            "M 1 a%zz",
            "L 1 1000 0 0",
            "L 1 1000 40000001 0",
            "L 1 ffffffffffffffff 10 0",
            "L 1 1000 10 0 5-3:0",
            "L 1 1000 10 0 5-11:0",
            "L 1 1000 10 0 1-5:0 4-8:0",
            "L 1 1000 10 x",
            "U 5",
            "U 5 zz",
            "S 5 3000 10",
            "F x",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        let deep = format!("L 1 1000 10 0 1-5:{}", vec!["0"; MAX_DEPTH + 1].join(","));
        assert_eq!(parse(&deep), None);
        for bad in [
            "joularcode-code-map 1 monotonic 42",
            "joularcode-code-map 2 monotonic",
            "7f00 10 perf.Map",
        ] {
            assert_eq!(parse_header(bad), None, "{bad}");
        }
    }
}

//! The lines of the code map (docs/code-map.md) and of the perf map, as bytes.
//!
//! Everything here appends to a caller's buffer: the callbacks build their lines without I/O.

use std::io::Write;

/// First line of every code map: format name, version, clock, the JVM's pid as it sees itself.
pub fn header(out: &mut Vec<u8>, pid: u32) {
    let _ = writeln!(out, "joularcode-code-map 1 monotonic {pid}");
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

/// `M <id> <name>`: a method name (Joular's `package.Class.method`) and its number.
pub fn method(out: &mut Vec<u8>, id: u32, name: &str) {
    let _ = write!(out, "M {id} ");
    escape(out, name);
    out.push(b'\n');
}

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

/// Turns JVMTI's pc descriptors into inline ranges.
///
/// `pcs` gives, in increasing pc order, each descriptor's code offset and its chain (outermost
/// first). As in HotSpot (nmethod.cpp, `match_desc`), a descriptor at offset P describes the code
/// after the previous descriptor up to and including P. Consecutive equal chains are merged, and
/// ranges whose chain is the compiled method alone (`root`) are left out.
pub fn inline_ranges(
    code_size: u32,
    root: u32,
    pcs: impl IntoIterator<Item = (u32, Vec<u32>)>,
) -> Vec<InlineRange> {
    let mut ranges: Vec<InlineRange> = Vec::new();
    let mut from = 0u32;
    for (offset, chain) in pcs {
        if offset < from || offset >= code_size {
            continue;
        }
        let to = offset + 1;
        match ranges.last_mut() {
            Some(last) if last.to == from && last.chain == chain => last.to = to,
            _ if chain.len() == 1 && chain[0] == root => {}
            _ => ranges.push(InlineRange { from, to, chain }),
        }
        from = to;
    }
    ranges
}

/// `L|R <time> <start> <size> <root> [<from>-<to>:<id>,<id>...]...`: compiled code loaded
/// (`L`), or already there when the agent attached (`R`, replayed by GenerateEvents).
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

/// `U <time> <start>`: the compiled code at `start` was unloaded.
pub fn compiled_unload(out: &mut Vec<u8>, time_ns: u64, start: u64) {
    let _ = writeln!(out, "U {time_ns} {start:x}");
}

/// `S <time> <start> <size> <name>`: code the JVM generated (interpreter, stubs, adapters).
pub fn stub(out: &mut Vec<u8>, time_ns: u64, start: u64, size: u32, name: &str) {
    let _ = write!(out, "S {time_ns} {start:x} {size:x} ");
    escape(out, name);
    out.push(b'\n');
}

/// A perf map line: `START SIZE name`, hex without `0x`. The format has no escapes: control
/// characters of the name (a line end would start a forged line) are written as spaces.
pub fn perf_line(out: &mut Vec<u8>, start: u64, size: u32, name: &str) {
    let _ = write!(out, "{start:x} {size:x} ");
    out.extend(
        name.bytes()
            .map(|b| if b < b' ' || b == 0x7f { b' ' } else { b }),
    );
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_one_field() {
        let mut out = Vec::new();
        method(&mut out, 7, "a.B$$Lambda/0x1.run odd;name,100%");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "M 7 a.B$$Lambda/0x1.run%20odd%3Bname%2C100%25\n"
        );
    }

    #[test]
    fn a_name_from_the_jvm_never_breaks_a_line() {
        // Class names come from an untrusted JVM's Symbols: any character but '/' and ';'
        // in its own format, so line ends, CR, NUL, DEL, quotes and backslashes.
        let crafted = "Crafted\"quote\\back\nline\r\0\u{7f}x\u{2028}é.run\nM 9 forged";
        let mut map = Vec::new();
        method(&mut map, 3, crafted);
        stub(&mut map, 5, 0x7f00, 0x10, crafted);
        let text = String::from_utf8(map).unwrap();
        let lines: Vec<&str> = text.split_terminator('\n').collect();
        assert_eq!(lines.len(), 2, "{text:?}");
        assert!(lines[0].starts_with("M 3 Crafted\"quote\\back%0Aline%0D%00%7Fx"));
        assert!(lines[1].starts_with("S 5 7f00 10 Crafted"));
        assert!(!text.bytes().any(|b| b < b' ' && b != b'\n'));
        // The name is one field: nothing after it on the line.
        assert_eq!(lines[0].split(' ').count(), 3);
        let mut perf = Vec::new();
        perf_line(&mut perf, 0x7f00, 0x10, crafted);
        let perf = String::from_utf8(perf).unwrap();
        assert_eq!(perf.split_terminator('\n').count(), 1, "{perf:?}");
        assert!(!perf
            .trim_end_matches('\n')
            .bytes()
            .any(|b| b < b' ' || b == 0x7f));
    }

    #[test]
    fn descriptors_cover_the_code_up_to_their_offset() {
        // root 1 inlines 2 at offsets 0x10 and 0x20, then 2 inlines 3 at 0x30, root alone after.
        let pcs = vec![
            (0x08, vec![1]),
            (0x10, vec![1, 2]),
            (0x20, vec![1, 2]),
            (0x30, vec![1, 2, 3]),
            (0x40, vec![1]),
            (0x999, vec![1, 2]),
        ];
        let ranges = inline_ranges(0x100, 1, pcs);
        assert_eq!(
            ranges,
            vec![
                InlineRange {
                    from: 0x09,
                    to: 0x21,
                    chain: vec![1, 2]
                },
                InlineRange {
                    from: 0x21,
                    to: 0x31,
                    chain: vec![1, 2, 3]
                },
            ]
        );
        let mut out = Vec::new();
        compiled_load(&mut out, false, 5, 0x7f00, 0x100, 1, &ranges);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "L 5 7f00 100 1 9-21:1,2 21-31:1,2,3\n"
        );
    }
}

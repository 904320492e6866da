//! What the agent adds to the code map's format (joularcode_core::code_map): JVMTI's pc
//! descriptors turned into inline ranges, and the lines of the perf map.
//!
//! Everything here appends to a caller's buffer: the callbacks build their lines without I/O.

use std::io::Write;

use joularcode_core::code_map::InlineRange;

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
    use joularcode_core::code_map::compiled_load;

    #[test]
    fn a_name_from_the_jvm_never_breaks_a_perf_line() {
        // Class names come from an untrusted JVM's Symbols: any character but '/' and ';'
        // in its own format, so line ends, CR, NUL, DEL, quotes and backslashes.
        let crafted = "Crafted\"quote\\back\nline\r\0\u{7f}x\u{2028}é.run\nM 9 forged";
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

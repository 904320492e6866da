//! Names as the JVM writes them: modified UTF-8 (JVMS §4.4.7), decoded into Rust text. Every
//! reader of a name that comes from a JVM (its Symbols read through VMStructs, JVMTI's strings in
//! the agent, perf maps, the code map) decodes it with [`decode`].
//!
//! Modified UTF-8 differs from UTF-8 in two ways: NUL is the two bytes `C0 80`, and a character
//! beyond the Basic Multilingual Plane is its UTF-16 surrogate pair, each surrogate written in
//! three bytes (six bytes in all, where UTF-8 takes four). [`decode`] also takes standard UTF-8
//! (a four-byte character, a raw NUL): both forms of a character stand for the same Java string,
//! and so a text that mixes them (a perf map with the JDK's lines and a UTF-8 writer's) decodes
//! right either way. Anything else (a byte that starts no character, a truncated or overlong
//! sequence, a surrogate without its pair, which Rust text cannot hold) becomes one U+FFFD per
//! run of such bytes, never a panic.
//!
//! Written here rather than taken from a crate: `cesu8` (the one crate for it) refuses a whole
//! name for one bad byte, where a profiler must still show the name, and has no release since
//! 2016.

use std::borrow::Cow;

/// Decodes `bytes`, modified UTF-8 or UTF-8, borrowing them when they are UTF-8 already.
pub fn decode(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(bytes.len());
    let mut at = 0;
    let mut in_bad_run = false;
    while at < bytes.len() {
        match character(&bytes[at..]) {
            Some((c, len)) => {
                out.push(c);
                at += len;
                in_bad_run = false;
            }
            None => {
                if !in_bad_run {
                    out.push(char::REPLACEMENT_CHARACTER);
                }
                at += 1;
                in_bad_run = true;
            }
        }
    }
    Cow::Owned(out)
}

/// The character at the start of `bytes` and how many bytes it takes, or `None` when they start
/// no character.
fn character(bytes: &[u8]) -> Option<(char, usize)> {
    let continuation = |i: usize| {
        bytes
            .get(i)
            .filter(|&&b| b & 0xc0 == 0x80)
            .map(|&b| b & 0x3f)
    };
    match *bytes.first()? {
        lead @ 0..=0x7f => Some((char::from(lead), 1)),
        0xc0 => (bytes.get(1) == Some(&0x80)).then_some(('\0', 2)),
        lead @ 0xc2..=0xdf => {
            let value = (u32::from(lead & 0x1f) << 6) | u32::from(continuation(1)?);
            Some((char::from_u32(value)?, 2))
        }
        0xe0..=0xef => {
            let high = unit(bytes)?;
            if !(0xd800..0xdc00).contains(&high) {
                return Some((char::from_u32(high)?, 3));
            }
            let low = bytes.get(3..).and_then(unit)?;
            if !(0xdc00..0xe000).contains(&low) {
                return None;
            }
            let value = 0x10000 + ((high - 0xd800) << 10) + (low - 0xdc00);
            Some((char::from_u32(value)?, 6))
        }
        0xf0..=0xf4 => {
            let text = std::str::from_utf8(bytes.get(..4)?).ok()?;
            Some((text.chars().next()?, 4))
        }
        _ => None,
    }
}

/// The UTF-16 unit of the three-byte sequence at the start of `bytes` (not overlong), or `None`.
fn unit(bytes: &[u8]) -> Option<u32> {
    let [lead, second, third] = *bytes.get(..3)? else {
        return None;
    };
    if lead & 0xf0 != 0xe0 || second & 0xc0 != 0x80 || third & 0xc0 != 0x80 {
        return None;
    }
    let value =
        (u32::from(lead & 0x0f) << 12) | (u32::from(second & 0x3f) << 6) | u32::from(third & 0x3f);
    (value >= 0x800).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `text` in modified UTF-8, as the JVM writes it (the test's own encoder, from the spec).
    fn encode(text: &str) -> Vec<u8> {
        let mut out = Vec::new();
        for unit in text.encode_utf16() {
            let unit = u32::from(unit);
            match unit {
                0x01..=0x7f => out.push(unit as u8),
                0x00 | 0x80..=0x7ff => {
                    out.extend([0xc0 | (unit >> 6) as u8, 0x80 | (unit & 0x3f) as u8]);
                }
                _ => out.extend([
                    0xe0 | (unit >> 12) as u8,
                    0x80 | ((unit >> 6) & 0x3f) as u8,
                    0x80 | (unit & 0x3f) as u8,
                ]),
            }
        }
        out
    }

    #[test]
    fn the_forms_the_jvm_writes() {
        // U+1D49C MATHEMATICAL SCRIPT CAPITAL A, a Java letter: D835 DC9C in UTF-16.
        let script_a = [0xed, 0xa0, 0xb5, 0xed, 0xb2, 0x9c];
        assert_eq!(encode("\u{1d49c}"), script_a);
        assert_eq!(decode(&script_a), "\u{1d49c}");
        assert_eq!(decode(b"a\xc0\x80b"), "a\0b");
        assert_eq!(decode("métier.日本".as_bytes()), "métier.日本");
        assert!(matches!(decode(b"java.lang.Thread"), Cow::Borrowed(_)));
        // UTF-8's own forms of the same characters are the same names.
        assert_eq!(decode("a\u{1d49c}\0".as_bytes()), "a\u{1d49c}\0");
    }

    #[test]
    fn names_that_differ_only_beyond_the_bmp_stay_apart() {
        let a = encode("run\u{1d49c}");
        let c = encode("run\u{1d49e}");
        assert_ne!(decode(&a), decode(&c));
        assert_eq!(decode(&a), "run\u{1d49c}");
    }

    #[test]
    fn bad_bytes_give_one_replacement_per_run() {
        for (bytes, text) in [
            (&b"a\xffb"[..], "a\u{fffd}b"),
            (b"a\xff\xfe\x80b", "a\u{fffd}b"),
            (b"a\xc0", "a\u{fffd}"),
            (b"\xc0\x81x", "\u{fffd}x"),
            (b"\xe0\x80\x80x", "\u{fffd}x"),
            // A high surrogate without its low one, then a low one alone.
            (b"\xed\xa0\xb5x\xed\xb2\x9c", "\u{fffd}x\u{fffd}"),
            (b"x\xed\xa0", "x\u{fffd}"),
            (b"\xf5\x80\x80\x80!", "\u{fffd}!"),
        ] {
            assert_eq!(decode(bytes), text, "{bytes:x?}");
        }
    }

    proptest! {
        #[test]
        fn every_string_the_jvm_writes_decodes_back(text in any::<String>()) {
            let encoded = encode(&text);
            prop_assert_eq!(decode(&encoded), text.as_str());
        }

        #[test]
        fn utf8_decodes_as_utf8(text in any::<String>()) {
            prop_assert_eq!(decode(text.as_bytes()), text.as_str());
        }

        #[test]
        fn two_strings_never_merge(a in any::<String>(), b in any::<String>()) {
            prop_assume!(a != b);
            let (a, b) = (encode(&a), encode(&b));
            prop_assert_ne!(decode(&a), decode(&b));
        }

        #[test]
        fn any_bytes_decode_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let text = decode(&bytes);
            let replacements = text.chars().filter(|&c| c == char::REPLACEMENT_CHARACTER).count();
            prop_assert!(replacements <= bytes.len());
            // Valid pieces between bad bytes are kept.
            if !bytes.contains(&0xff) {
                return Ok(());
            }
            let pieces: Vec<&[u8]> = bytes.split(|&b| b == 0xff).collect();
            for piece in pieces.iter().filter(|p| std::str::from_utf8(p).is_ok() && !p.is_empty()) {
                prop_assert!(text.contains(std::str::from_utf8(piece).unwrap_or_default()));
            }
        }
    }
}

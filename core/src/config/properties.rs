//! The `.properties` format of `java.util.Properties.load(Reader)`, which Joular Code for Java
//! reads its configuration with: natural lines end at `\n`, `\r` or `\r\n`; a line whose first
//! non-blank character is `#` or `!` is a comment; a line ending with an odd number of
//! backslashes goes on at the next line, whose leading blanks are dropped; the key ends at the
//! first unescaped `=`, `:` or blank, and one `=` or `:` with blanks around it separates it from
//! the value; `\t`, `\n`, `\r`, `\f` and `\uXXXX` are escapes and any other escaped character
//! stands for itself. A later key replaces an earlier one.

use std::collections::HashMap;

/// A malformed `\uXXXX` escape, the only input `java.util.Properties` refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "line {line} has a malformed \\uXXXX escape: write four hex digits after \\u, or \\\\u for a \
     backslash"
)]
pub struct MalformedEscape {
    /// The 1-based natural line the logical line that holds the escape starts on.
    pub line: usize,
}

/// Blanks as `java.util.Properties` sees them.
fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{c}')
}

/// Parses the text of a properties file into its keys and values.
pub fn parse(text: &str) -> Result<HashMap<String, String>, MalformedEscape> {
    let mut properties = HashMap::new();
    for (line, logical) in logical_lines(text) {
        let (key, value) = split_key_value(&logical);
        let key = unescape(key).ok_or(MalformedEscape { line })?;
        let value = unescape(value).ok_or(MalformedEscape { line })?;
        properties.insert(key, value);
    }
    Ok(properties)
}

/// The logical lines that are neither blank nor comments, with the backslash-newline pairs of
/// their continuations removed, each with the number of the natural line it starts on.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (index, natural) in natural_lines(text).into_iter().enumerate() {
        let continuing = current.is_some();
        let trimmed = natural.trim_start_matches(is_blank);
        if !continuing && (trimmed.is_empty() || trimmed.starts_with(['#', '!'])) {
            continue;
        }
        let trailing = trimmed.chars().rev().take_while(|&c| c == '\\').count();
        let (start, mut logical) = current.take().unwrap_or((index + 1, String::new()));
        if trailing % 2 == 1 {
            logical.push_str(&trimmed[..trimmed.len() - 1]);
            current = Some((start, logical));
        } else {
            logical.push_str(trimmed);
            lines.push((start, logical));
        }
    }
    // A backslash at the very end of the text continues onto nothing
    lines.extend(current);
    lines
}

/// The natural lines of `text`, split at `\n`, `\r` and `\r\n`.
fn natural_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        match rest.find(['\n', '\r']) {
            Some(end) => {
                lines.push(&rest[..end]);
                let skip = if rest[end..].starts_with("\r\n") {
                    2
                } else {
                    1
                };
                rest = &rest[end + skip..];
            }
            None => {
                lines.push(rest);
                rest = "";
            }
        }
    }
    lines
}

/// Splits a logical line into its raw (still escaped) key and value.
fn split_key_value(line: &str) -> (&str, &str) {
    let mut escaped = false;
    let mut key_end = line.len();
    let mut separator = None;
    for (at, c) in line.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '=' || c == ':' || is_blank(c) {
            key_end = at;
            separator = Some(c);
            break;
        }
    }
    let Some(separator) = separator else {
        return (line, "");
    };
    let mut value = line[key_end + separator.len_utf8()..].trim_start_matches(is_blank);
    if is_blank(separator) {
        if let Some(rest) = value.strip_prefix(['=', ':']) {
            value = rest.trim_start_matches(is_blank);
        }
    }
    (&line[..key_end], value)
}

/// Replaces the escapes of `raw`, or `None` for a malformed `\uXXXX`.
fn unescape(raw: &str) -> Option<String> {
    let mut units: Vec<u16> = Vec::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        let c = if c == '\\' {
            match chars.next() {
                Some('u') => {
                    let mut code = 0u16;
                    for _ in 0..4 {
                        let digit = chars.next()?.to_digit(16)?;
                        code = code * 16 + digit as u16;
                    }
                    units.push(code);
                    continue;
                }
                Some('t') => '\t',
                Some('n') => '\n',
                Some('r') => '\r',
                Some('f') => '\u{c}',
                Some(other) => other,
                None => break,
            }
        } else {
            c
        };
        let mut buffer = [0u16; 2];
        units.extend_from_slice(c.encode_utf16(&mut buffer));
    }
    Some(String::from_utf16_lossy(&units))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> HashMap<String, String> {
        parse(text).expect("valid properties")
    }

    fn get(text: &str, key: &str) -> Option<String> {
        one(text).get(key).cloned()
    }

    #[test]
    fn separators_equals_colon_and_blanks() {
        assert_eq!(get("a=1", "a").as_deref(), Some("1"));
        assert_eq!(get("a:1", "a").as_deref(), Some("1"));
        assert_eq!(get("a 1", "a").as_deref(), Some("1"));
        assert_eq!(get("a \t = 1", "a").as_deref(), Some("1"));
        assert_eq!(get("a = = 1", "a").as_deref(), Some("= 1"));
        assert_eq!(get("  a=1 ", "a").as_deref(), Some("1 "));
        assert_eq!(get("a", "a").as_deref(), Some(""));
        assert_eq!(get("a=", "a").as_deref(), Some(""));
    }

    #[test]
    fn comments_and_blank_lines_are_skipped() {
        let p = one("# a=1\n  ! b=2\n\n \t\nc=3\n");
        assert_eq!(p.len(), 1);
        assert_eq!(p["c"], "3");
    }

    #[test]
    fn comment_lines_do_not_continue() {
        let p = one("# comment \\\nkey=v");
        assert_eq!(p["key"], "v");
    }

    #[test]
    fn continuation_lines_drop_leading_blanks() {
        assert_eq!(get("a=one, \\\n    two", "a").as_deref(), Some("one, two"));
        assert_eq!(get("a=x\\\r\n y\\\r z", "a").as_deref(), Some("xyz"));
        // An even number of backslashes is an escaped backslash, not a continuation
        assert_eq!(get("a=x\\\\\nb=2", "a").as_deref(), Some("x\\"));
        // A backslash at the end of the text continues onto nothing
        assert_eq!(get("a=x\\", "a").as_deref(), Some("x"));
        // A continuation line that looks like a comment is not one
        assert_eq!(get("a=x\\\n#y", "a").as_deref(), Some("x#y"));
    }

    #[test]
    fn escapes() {
        assert_eq!(
            get("a=\\t\\n\\r\\f\\q\\\\", "a").as_deref(),
            Some("\t\n\r\u{c}q\\")
        );
        assert_eq!(get("a\\=b\\ c=d", "a=b c").as_deref(), Some("d"));
        assert_eq!(get("a=\\u00e9\\u00C9", "a").as_deref(), Some("éÉ"));
        assert_eq!(get("a=\\uD83D\\uDE00", "a").as_deref(), Some("😀"));
        assert_eq!(get("a=é✓", "a").as_deref(), Some("é✓"));
    }

    #[test]
    fn malformed_unicode_escape_is_refused_with_its_line() {
        assert_eq!(parse("a=1\nb=\\u12G4"), Err(MalformedEscape { line: 2 }));
        assert_eq!(parse("b=\\u12"), Err(MalformedEscape { line: 1 }));
    }

    #[test]
    fn later_keys_win() {
        assert_eq!(get("a=1\na=2", "a").as_deref(), Some("2"));
    }
}

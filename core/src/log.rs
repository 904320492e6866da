//! Messages in Joular Code for Java's format: `dd-MM-yyyy HH:mm:ss LEVEL: message`, on stderr.
//!
//! Everything in core that has something to tell the user (a configuration fallback, a power
//! source that cannot be read, a sampler that cannot keep up) says it through a [`Log`], so that
//! the binary prints it on stderr and the tests can read what was said.

use std::borrow::Cow;
use std::fmt;
use std::io::Write;
use std::sync::Mutex;

use chrono::{DateTime, Local};

/// The levels of java.util.logging that Joular Code for Java uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Detail, shown only when asked for.
    Fine,
    /// Something worth knowing.
    Info,
    /// Something is off, and the profiler goes on.
    Warning,
    /// Something failed.
    Severe,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Fine => "FINE",
            Level::Info => "INFO",
            Level::Warning => "WARNING",
            Level::Severe => "SEVERE",
        })
    }
}

/// Where messages go.
pub trait Log: Send + Sync {
    /// Says `message` at `level`.
    fn log(&self, level: Level, message: &str);
}

/// One message line as Joular Code for Java writes it, without the line end. Control
/// characters in `message` are escaped ([`printable`]).
pub fn format_line(time: DateTime<Local>, level: Level, message: &str) -> String {
    format!(
        "{} {level}: {}",
        time.format("%d-%m-%Y %H:%M:%S"),
        printable(message)
    )
}

/// `text` fit for a terminal and for XML: every control character (C0 and C1 controls, DEL,
/// the bidirectional overrides and isolates that reorder what is shown, and the two
/// non-characters U+FFFE and U+FFFF that XML 1.0 forbids) written as `\u{..}`, so that text from
/// outside (a JVM's answer, a name in a class file, a file another user writes) cannot move the
/// cursor, change colours, forge a line, hide what follows, or make an SVG file unreadable.
/// This is the one rule of every output a person or a parser of text reads (docs/security.md).
pub fn printable(text: &str) -> Cow<'_, str> {
    let hidden = |c: char| {
        c.is_control()
            || matches!(
                c,
                '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{fffe}' | '\u{ffff}'
            )
    };
    if !text.contains(hidden) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if hidden(c) {
            shown.push_str(&c.escape_unicode().to_string());
        } else {
            shown.push(c);
        }
    }
    Cow::Owned(shown)
}

/// `text` from outside, quoted in a message: [`printable`], on one line (line ends escaped
/// too), and cut after `max_chars` characters with `...`.
pub fn quote(text: &str, max_chars: usize) -> String {
    let cut = text
        .char_indices()
        .nth(max_chars)
        .map_or(text, |(at, _)| &text[..at]);
    let mut quoted = printable(cut).into_owned();
    if cut.len() < text.len() {
        quoted.push_str("...");
    }
    quoted
}

/// Writes messages of [`Level::Info`] and above on stderr, in Joular's format.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stderr {
    /// Also print [`Level::Fine`] messages.
    pub verbose: bool,
}

impl Log for Stderr {
    fn log(&self, level: Level, message: &str) {
        if level > Level::Fine || self.verbose {
            // A stderr that cannot be written (a closed pipe, a full disk) has nowhere to say
            // so: the message is lost and the run goes on, where `eprintln!` would panic.
            let _ = writeln!(
                std::io::stderr().lock(),
                "{}",
                format_line(Local::now(), level, message)
            );
        }
    }
}

/// Keeps every message in memory, in order: what tests use to check what was said.
#[derive(Debug, Default)]
pub struct Recorded {
    messages: Mutex<Vec<(Level, String)>>,
}

impl Recorded {
    /// The messages said so far.
    pub fn messages(&self) -> Vec<(Level, String)> {
        self.messages
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

impl Log for Recorded {
    fn log(&self, level: Level, message: &str) {
        self.messages
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push((level, message.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn lines_have_joulars_layout() {
        let time = Local.with_ymd_and_hms(2026, 3, 7, 9, 5, 2).unwrap();
        assert_eq!(
            format_line(time, Level::Warning, "Could not read x, using defaults."),
            "07-03-2026 09:05:02 WARNING: Could not read x, using defaults."
        );
    }

    #[test]
    fn control_characters_are_shown_escaped_and_quotes_cut() {
        assert_eq!(printable("plain é ✓"), "plain é ✓");
        assert_eq!(
            printable("a\x1b[2Jb\u{9b}c\u{202e}d\n"),
            "a\\u{1b}[2Jb\\u{9b}c\\u{202e}d\\u{a}"
        );
        assert_eq!(
            printable("\x07\x7f\u{2067}\u{ffff}\t"),
            "\\u{7}\\u{7f}\\u{2067}\\u{ffff}\\u{9}"
        );
        assert_eq!(quote("abcdef", 3), "abc...");
        assert_eq!(quote("ab\ncd", 10), "ab\\u{a}cd");
        let time = Local.with_ymd_and_hms(2026, 3, 7, 9, 5, 2).unwrap();
        assert!(!format_line(time, Level::Info, "\x1b]0;title\x07").contains('\x1b'));
    }

    #[test]
    fn recorded_keeps_order() {
        let log = Recorded::default();
        log.log(Level::Info, "a");
        log.log(Level::Severe, "b");
        assert_eq!(
            log.messages(),
            vec![(Level::Info, "a".into()), (Level::Severe, "b".into())]
        );
    }
}

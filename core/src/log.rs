//! Messages in Joular Code for Java's format: `dd-MM-yyyy HH:mm:ss LEVEL: message`, on stderr.
//!
//! Everything in core that has something to tell the user (a configuration fallback, a power
//! source that cannot be read, a sampler that cannot keep up) says it through a [`Log`], so that
//! the binary prints it on stderr and the tests can read what was said.

use std::fmt;
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

/// One message line as Joular Code for Java writes it, without the line end.
pub fn format_line(time: DateTime<Local>, level: Level, message: &str) -> String {
    format!("{} {level}: {message}", time.format("%d-%m-%Y %H:%M:%S"))
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
            eprintln!("{}", format_line(Local::now(), level, message));
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

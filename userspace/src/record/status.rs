//! The status line of `record`: cycles, samples, energy so far and samples lost, redrawn in place
//! at the bottom of stderr while it runs, only when stderr is a terminal. Messages are logged
//! through [`Terminal`], which clears the status line, prints the message and draws it again, so
//! that the two never mix on one line.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;

use joularcode_core::log::{Level, Log, Stderr};

/// What the status line shows.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Status {
    /// JVMs profiled now.
    pub jvms: usize,
    /// Cycles written.
    pub cycles: u64,
    /// Stack samples counted.
    pub samples: u64,
    /// Energy attributed to the JVMs so far, in joules.
    pub energy_j: f64,
    /// Samples the sampler lost.
    pub drops: u64,
}

impl Status {
    /// The line, without line end.
    pub fn line(&self) -> String {
        format!(
            "{} JVM(s) | {} cycle(s) | {} sample(s) | {:.3} J | {} lost",
            self.jvms, self.cycles, self.samples, self.energy_j, self.drops
        )
    }
}

/// stderr, with the status line at its bottom when it is a terminal.
#[derive(Debug)]
pub struct Terminal {
    messages: Stderr,
    /// The status line drawn, if any; `None` when stderr is not a terminal.
    shown: Option<Mutex<String>>,
}

/// Erases the current line of a terminal and returns to its start.
const ERASE_LINE: &str = "\r\x1b[2K";

impl Terminal {
    /// stderr, with a status line only if it is a terminal.
    pub fn new() -> Terminal {
        Terminal {
            messages: Stderr::default(),
            shown: std::io::stderr().is_terminal().then(Mutex::default),
        }
    }

    /// Draws `status` in place of the previous status line, if it changed (nothing when stderr is
    /// not a terminal).
    pub fn show(&self, status: &Status) {
        if let Some(shown) = &self.shown {
            let mut shown = shown
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let line = status.line();
            if *shown == line {
                return;
            }
            *shown = line;
            let mut stderr = std::io::stderr().lock();
            // A terminal that cannot be written to has nowhere to say so
            let _ = write!(stderr, "{ERASE_LINE}{shown}");
            let _ = stderr.flush();
        }
    }

    /// Ends the status line: the last one drawn stays, followed by a line end.
    pub fn finish(&self) {
        if let Some(shown) = &self.shown {
            let mut shown = shown
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if !shown.is_empty() {
                eprintln!();
                shown.clear();
            }
        }
    }
}

impl Default for Terminal {
    fn default() -> Self {
        Terminal::new()
    }
}

impl Log for Terminal {
    fn log(&self, level: Level, message: &str) {
        match &self.shown {
            Some(shown) => {
                let shown = shown
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                eprint!("{ERASE_LINE}");
                self.messages.log(level, message);
                eprint!("{shown}");
            }
            None => self.messages.log(level, message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_shows_every_count() {
        let status = Status {
            jvms: 2,
            cycles: 12,
            samples: 2345,
            energy_j: 45.6789,
            drops: 3,
        };
        assert_eq!(
            status.line(),
            "2 JVM(s) | 12 cycle(s) | 2345 sample(s) | 45.679 J | 3 lost"
        );
    }
}

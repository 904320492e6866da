//! The status line of `record`: cycles, samples, energy so far and samples lost, redrawn in place
//! at the bottom of stderr after each cycle, only when stderr is a terminal ([`StatusLine`]).
//! Messages are logged through [`Terminal`], which clears the status line, prints the message and
//! draws it again, so that the two never mix on one line.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};

use joularcode_core::log::{Level, Log, Stderr};

use super::sink::{CycleView, Sink};
use crate::output::OutputError;

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
                // A terminal that cannot be written to has nowhere to say so
                let _ = writeln!(std::io::stderr().lock());
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
                // A terminal that cannot be written to has nowhere to say so
                let _ = write!(std::io::stderr().lock(), "{ERASE_LINE}");
                self.messages.log(level, message);
                let _ = write!(std::io::stderr().lock(), "{shown}");
            }
            None => self.messages.log(level, message),
        }
    }
}

/// The sink that keeps the status line up to date.
#[derive(Debug)]
pub struct StatusLine {
    terminal: Arc<Terminal>,
    status: Status,
}

impl StatusLine {
    /// The status line of `terminal`.
    pub fn new(terminal: Arc<Terminal>) -> StatusLine {
        StatusLine {
            terminal,
            status: Status::default(),
        }
    }

    /// What it shows.
    pub fn status(&self) -> Status {
        self.status
    }
}

impl Sink for StatusLine {
    fn cycle(&mut self, view: &CycleView<'_>) {
        let status = &mut self.status;
        status.jvms = view.jvms.iter().filter(|jvm| !jvm.ended).count();
        status.cycles += 1;
        status.samples += view.cycle.jvms.iter().map(|jvm| jvm.samples).sum::<u64>();
        status.energy_j += view.cycle.jvms_energy().joules();
        status.drops += view.cycle.lost_samples;
        self.terminal.show(status);
    }

    fn finish(&mut self, _: &dyn Log) -> Result<(), OutputError> {
        self.terminal.finish();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use joularcode_core::attribution::CycleResult;
    use joularcode_core::attribution::MachineLoad;
    use joularcode_core::cycle::{Cycle, JvmCycle};
    use joularcode_core::energy::{Interval, Power};

    #[test]
    fn cycles_add_up_on_the_line() {
        let mut line = StatusLine::new(Arc::new(Terminal::new()));
        let jvm = JvmCycle {
            pid: 1,
            cpu_ns: 0,
            samples: 7,
            result: CycleResult {
                interval: Interval::from_ns(2_000_000_000),
                jvm_power: Power::from_watts(3.0),
                ..CycleResult::default()
            },
        };
        let cycle = Cycle {
            carbon: None,
            timestamp_ms: 0,
            interval: Interval::from_ns(2_000_000_000),
            power: Power::from_watts(10.0),
            machine: MachineLoad::BusyCpuNs(Some(0)),
            lost_samples: 1,
            jvms: vec![jvm],
        };
        for _ in 0..2 {
            line.cycle(&CycleView {
                source: "vm",
                cycle: &cycle,
                jvms: Vec::new(),
            });
        }
        assert_eq!(
            line.status(),
            Status {
                jvms: 0,
                cycles: 2,
                samples: 14,
                energy_j: 12.0,
                drops: 2
            }
        );
    }

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

//! What an output could not write. A failing output (a full disk, a folder removed) is said once
//! when it starts failing, and again when it works again, with the rows lost meanwhile; the total
//! tells the run's end whether its results are whole.

use std::fmt::Display;

use crate::log::{Level, Log};

/// Rows, and the cycles they belonged to.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Lost {
    /// Rows (or lines) not written.
    pub rows: u64,
    /// Cycles that lost rows.
    pub cycles: u64,
}

impl Lost {
    fn add(&mut self, rows: u64) {
        self.rows += rows;
        self.cycles += 1;
    }
}

impl std::ops::AddAssign for Lost {
    fn add_assign(&mut self, other: Lost) {
        self.rows += other.rows;
        self.cycles += other.cycles;
    }
}

/// The losses of one output, named by `what` in messages (`results to DIR`).
#[derive(Debug)]
pub struct Losses {
    what: String,
    episode: Option<Lost>,
    total: Lost,
}

impl Losses {
    /// No loss yet, of the output `what` ("results to joular-code-java-results").
    pub fn new(what: impl Into<String>) -> Losses {
        Losses {
            what: what.into(),
            episode: None,
            total: Lost::default(),
        }
    }

    /// A cycle's `rows` could not be written: SEVERE the first time in a row.
    pub fn failed(&mut self, log: &dyn Log, error: &dyn Display, rows: u64) {
        if self.episode.is_none() {
            log.log(
                Level::Severe,
                &format!("Could not write {}: {error}", self.what),
            );
        }
        self.episode.get_or_insert_with(Lost::default).add(rows);
        self.total.add(rows);
    }

    /// A cycle was written: after failures, says that it works again and what was lost.
    pub fn written(&mut self, log: &dyn Log) {
        if let Some(lost) = self.episode.take() {
            log.log(
                Level::Warning,
                &format!(
                    "Writing {} works again; {} row(s) of {} cycle(s) could not be written meanwhile.",
                    self.what, lost.rows, lost.cycles
                ),
            );
        }
    }

    /// Everything lost so far.
    pub fn total(&self) -> Lost {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::Recorded;

    #[test]
    fn an_episode_is_said_when_it_starts_and_when_it_ends_and_counted() {
        let log = Recorded::default();
        let mut losses = Losses::new("results to r");
        losses.written(&log);
        losses.failed(&log, &"No space left on device", 3);
        losses.failed(&log, &"No space left on device", 2);
        losses.written(&log);
        losses.written(&log);
        losses.failed(&log, &"gone", 1);
        let messages = log.messages();
        assert_eq!(messages.len(), 3, "{messages:?}");
        assert_eq!(
            messages[0],
            (
                Level::Severe,
                "Could not write results to r: No space left on device".into()
            )
        );
        assert_eq!(
            messages[1].1,
            "Writing results to r works again; 5 row(s) of 2 cycle(s) could not be written meanwhile."
        );
        assert_eq!(losses.total(), Lost { rows: 6, cycles: 3 });
    }
}

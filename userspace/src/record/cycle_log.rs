//! The `--cycle-log` file: one JSON line per cycle and JVM (docs/record.md). It is emptied when
//! the run starts; a cycle whose lines cannot be written (a full disk) loses them, said once, and
//! the file is opened again at the next cycle, which says what was lost ([`Losses`]).

use std::fs::File;
use std::path::{Path, PathBuf};

use joularcode_core::log::Log;
use joularcode_core::output::losses::{Losses, Lost};
use joularcode_core::output::path::{self, Mode};

/// The cycle log of a run.
#[derive(Debug)]
pub struct CycleLog {
    path: PathBuf,
    file: Option<File>,
    losses: Losses,
}

impl CycleLog {
    /// Checks, creating nothing, that the file at `path` can be created ([`path::check_file`]),
    /// so that a bad one is refused before anything is launched.
    pub fn check(path: &Path) -> Result<(), CycleLogError> {
        path::check_file(path).map_err(|source| CycleLogError::new(path, source))
    }

    /// Creates (or empties) the file at `path`, following no symbolic link on its path; the
    /// error is one line that names the option.
    pub fn create(path: &Path) -> Result<CycleLog, CycleLogError> {
        let file = path::create_file(path, Mode::Truncate)
            .map_err(|source| CycleLogError::new(path, source))?;
        Ok(CycleLog {
            path: path.to_path_buf(),
            file: Some(file),
            losses: Losses::new(format!("the cycle log {}", path.display())),
        })
    }

    /// Appends one cycle's `lines` (whole, or not at all).
    pub fn write(&mut self, lines: &str, log: &dyn Log) {
        if lines.is_empty() {
            return;
        }
        let file = match self.file.take() {
            Some(file) => Ok(file),
            None => path::create_file(&self.path, Mode::Append),
        };
        match file
            .and_then(|mut file| path::append_whole(&mut file, lines.as_bytes()).map(|()| file))
        {
            Ok(file) => {
                self.file = Some(file);
                self.losses.written(log);
            }
            Err(error) => self
                .losses
                .failed(log, &error, lines.lines().count() as u64),
        }
    }

    /// The lines that could not be written.
    pub fn lost(&self) -> Lost {
        self.losses.total()
    }
}

/// Why the file of `--cycle-log` cannot be created; the message names the option.
#[derive(Debug, thiserror::Error)]
#[error("--cycle-log {}: {source}", path.display())]
pub struct CycleLogError {
    /// The path given.
    path: PathBuf,
    /// Why.
    source: std::io::Error,
}

impl CycleLogError {
    fn new(path: &Path, source: std::io::Error) -> CycleLogError {
        CycleLogError {
            path: path.to_path_buf(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use joularcode_core::log::{Level, Recorded};

    #[test]
    fn lines_are_appended_and_a_failure_said_then_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cycles.jsonl");
        std::fs::write(&path, "old\n").unwrap();
        let log = Recorded::default();
        let mut cycles = CycleLog::create(&path).unwrap();
        cycles.write("{\"a\":1}\n", &log);
        cycles.file = None;
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        cycles.write("{\"b\":2}\n{\"b\":3}\n", &log);
        std::fs::remove_dir(&path).unwrap();
        cycles.write("{\"c\":4}\n", &log);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"c\":4}\n");
        let messages = log.messages();
        assert_eq!(messages[0].0, Level::Severe, "{messages:?}");
        assert!(
            messages[1].1.contains("2 row(s) of 1 cycle(s)"),
            "{messages:?}"
        );
        assert_eq!(cycles.lost(), Lost { rows: 2, cycles: 1 });
    }
}

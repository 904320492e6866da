//! The two CSV files of Joular Code for Java, byte for byte: `methods-power-all.csv` (every
//! branch) and `methods-power-app.csv` (the application's branches) in the results directory.
//!
//! Each cycle appends one row per branch with a positive power:
//! `timestamp_ms,branch,power_watts,energy_joules,interval_seconds,coverage`, numbers formatted as
//! Java's `%.9f` and `%.4f` (see [`super::java_float`]). The header goes only into an empty file,
//! so runs append to each other. The profiler runs as root, so no symbolic link is ever followed:
//! the directory and the files are created and opened with [`super::path`].

use std::borrow::Cow;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::attribution::CycleResult;
use crate::branch::Branches;
use crate::energy::Power;
use crate::log::Log;
use crate::output::java_float::push_fixed;
use crate::output::losses::{Losses, Lost};
use crate::output::path::{append_whole, Mode, OutputDir};

/// The file of every branch.
pub const ALL_FILE: &str = "methods-power-all.csv";
/// The file of the application's branches.
pub const APP_FILE: &str = "methods-power-app.csv";
/// The first line of both files.
pub const HEADER: &str = "timestamp,branch,power_watts,energy_joules,interval_seconds,coverage";
/// What ends each line: Java's `%n` and `newLine()`, the platform's line separator.
pub const LINE_END: &str = if cfg!(windows) { "\r\n" } else { "\n" };

/// `name` as a CSV field: wrapped in `"` when it holds `,`, `"`, `\n` or `\r`, with `"` doubled.
pub fn escape(name: &str) -> Cow<'_, str> {
    if name.contains([',', '"', '\n', '\r']) {
        Cow::Owned(format!("\"{}\"", name.replace('"', "\"\"")))
    } else {
        Cow::Borrowed(name)
    }
}

/// One row, as Java's `String.format(Locale.ROOT, "%d,%s,%.9f,%.9f,%.9f,%.4f%n", ...)`.
fn push_row(out: &mut String, timestamp_ms: i64, name: &str, power: Power, result: &CycleResult) {
    out.push_str(&timestamp_ms.to_string());
    out.push(',');
    out.push_str(&escape(name));
    for (value, decimals) in [
        (power.watts(), 9),
        (result.energy(power).joules(), 9),
        (result.interval.seconds(), 9),
        (result.coverage, 4),
    ] {
        out.push(',');
        push_fixed(out, value, decimals);
    }
    out.push_str(LINE_END);
}

/// The rows of the branches with a positive power.
fn rows<'a>(
    timestamp_ms: i64,
    result: &CycleResult,
    power: impl Iterator<Item = (&'a str, Power)>,
) -> String {
    let mut rows = String::new();
    for (name, power) in power.filter(|&(_, p)| p > Power::ZERO) {
        push_row(&mut rows, timestamp_ms, name, power, result);
    }
    rows
}

/// Appends each cycle's results to the two CSV files of a results directory.
#[derive(Debug)]
pub struct CsvWriter {
    dir: PathBuf,
    /// The all file and the app file; `None` once closed or after a write error.
    files: Option<(File, File)>,
    losses: Losses,
}

impl CsvWriter {
    /// Creates the results directory (with its parents) and opens both files, writing the header
    /// into an empty one, so that a results path that cannot be written fails at once.
    pub fn open(dir: &Path) -> io::Result<CsvWriter> {
        let files = open_files(dir)?;
        Ok(CsvWriter {
            dir: dir.to_path_buf(),
            files: Some(files),
            losses: Losses::new(format!("results to {}", dir.display())),
        })
    }

    /// Appends one cycle's rows to both files, stamped with `timestamp_ms` (Unix milliseconds).
    ///
    /// A file gets nothing when no branch has a positive power. A failure is reported once (a
    /// SEVERE, again only after a cycle that succeeded, which says how many rows were lost:
    /// [`Losses`]); the files are then closed and opened again at the next cycle. What a failed
    /// write had appended of a cycle is cut off again, so a row is in a file whole or not at all.
    pub fn write(
        &mut self,
        timestamp_ms: i64,
        result: &CycleResult,
        branches: &Branches,
        log: &dyn Log,
    ) {
        let all = rows(
            timestamp_ms,
            result,
            result.all.iter().map(|&(b, p)| (branches.name(b), p)),
        );
        let app = rows(
            timestamp_ms,
            result,
            result.app.iter().map(|&(a, p)| (branches.app_name(a), p)),
        );
        if all.is_empty() && app.is_empty() {
            return;
        }
        match self.append(&all, &app) {
            Ok(()) => self.losses.written(log),
            Err((error, rows)) => self.losses.failed(log, &error, rows),
        }
    }

    /// Appends to both files, opening them first if needed; they stay closed after an error,
    /// which comes with the number of rows not written.
    fn append(&mut self, all: &str, app: &str) -> Result<(), (io::Error, u64)> {
        let count = |rows: &str| rows.matches(LINE_END).count() as u64;
        let mut files = match self.files.take() {
            Some(files) => files,
            None => open_files(&self.dir).map_err(|error| (error, count(all) + count(app)))?,
        };
        append_whole(&mut files.0, all.as_bytes()).map_err(|e| (e, count(all) + count(app)))?;
        append_whole(&mut files.1, app.as_bytes()).map_err(|e| (e, count(app)))?;
        self.files = Some(files);
        Ok(())
    }

    /// The rows that could not be written so far.
    pub fn lost(&self) -> Lost {
        self.losses.total()
    }

    /// Closes both files. Calling it again does nothing.
    pub fn close(&mut self) {
        self.files = None;
    }
}

/// Creates `dir` if needed and opens both files in it ([`OutputDir`]: no link followed), with
/// their header when empty.
fn open_files(dir: &Path) -> io::Result<(File, File)> {
    let dir = OutputDir::create(dir).map_err(|error| with_fix(dir, error))?;
    let open = |name| {
        dir.open_file(name, Mode::Append)
            .map_err(|error| with_fix(dir.path(), error))
    };
    let mut all = open(ALL_FILE)?;
    let mut app = open(APP_FILE)?;
    for file in [&mut all, &mut app] {
        if file.metadata()?.len() == 0 {
            append_whole(file, format!("{HEADER}{LINE_END}").as_bytes())
                .map_err(|error| with_fix(dir.path(), error))?;
        }
    }
    Ok((all, app))
}

/// `error` about the results directory `dir`, with the way out.
fn with_fix(dir: &Path, error: io::Error) -> io::Error {
    io::Error::new(
        error.kind(),
        format!(
            "Cannot write the results in {}: {error} Set results-path to a directory the \
             profiler can write to.",
            dir.display()
        ),
    )
}

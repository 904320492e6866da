//! The two CSV files of Joular Code for Java, byte for byte: `methods-power-all.csv` (every
//! branch) and `methods-power-app.csv` (the application's branches) in the results directory.
//!
//! Each cycle appends one row per branch with a positive power:
//! `timestamp_ms,branch,power_watts,energy_joules,interval_seconds,coverage`, numbers formatted as
//! Java's `%.9f` and `%.4f` (see [`super::java_float`]). The header goes only into an empty file,
//! so runs append to each other. The profiler runs as root, so no symbolic link is ever followed:
//! neither the results directory nor the files may be one.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::attribution::CycleResult;
use crate::branch::Branches;
use crate::log::{Level, Log};
use crate::output::java_float::push_fixed;

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
fn push_row(out: &mut String, timestamp_ms: i64, name: &str, power_w: f64, result: &CycleResult) {
    out.push_str(&timestamp_ms.to_string());
    out.push(',');
    out.push_str(&escape(name));
    for (value, decimals) in [
        (power_w, 9),
        (power_w * result.interval_s, 9),
        (result.interval_s, 9),
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
    power: impl Iterator<Item = (&'a str, f64)>,
) -> String {
    let mut rows = String::new();
    for (name, power_w) in power.filter(|&(_, p)| p > 0.0) {
        push_row(&mut rows, timestamp_ms, name, power_w, result);
    }
    rows
}

/// Appends each cycle's results to the two CSV files of a results directory.
#[derive(Debug)]
pub struct CsvWriter {
    dir: PathBuf,
    /// The all file and the app file; `None` once closed or after a write error.
    files: Option<(File, File)>,
    error_logged: bool,
}

impl CsvWriter {
    /// Creates the results directory (with its parents) and opens both files, writing the header
    /// into an empty one, so that a results path that cannot be written fails at once.
    pub fn open(dir: &Path) -> io::Result<CsvWriter> {
        if let Err(error) = std::fs::create_dir_all(dir) {
            return Err(io::Error::new(
                error.kind(),
                format!(
                    "Could not create the results directory {}: {error}. Set results-path to a \
                     directory that can be created.",
                    dir.display()
                ),
            ));
        }
        let files = open_files(dir)?;
        Ok(CsvWriter {
            dir: dir.to_path_buf(),
            files: Some(files),
            error_logged: false,
        })
    }

    /// Appends one cycle's rows to both files, stamped with `timestamp_ms` (Unix milliseconds).
    ///
    /// A file gets nothing when no branch has a positive power. A failure is reported once (a
    /// SEVERE, again only after a cycle that succeeded); the files are then closed and opened
    /// again at the next cycle. What a failed write had appended of a cycle is cut off again, so
    /// a row is in a file whole or not at all.
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
            Ok(()) => self.error_logged = false,
            Err(error) => {
                if !self.error_logged {
                    log.log(
                        Level::Severe,
                        &format!("Could not write results to {}: {error}", self.dir.display()),
                    );
                    self.error_logged = true;
                }
            }
        }
    }

    /// Appends to both files, opening them first if needed; they stay closed after an error.
    fn append(&mut self, all: &str, app: &str) -> io::Result<()> {
        let mut files = match self.files.take() {
            Some(files) => files,
            None => open_files(&self.dir)?,
        };
        append_whole(&mut files.0, all.as_bytes())?;
        append_whole(&mut files.1, app.as_bytes())?;
        self.files = Some(files);
        Ok(())
    }

    /// Closes both files. Calling it again does nothing.
    pub fn close(&mut self) {
        self.files = None;
    }
}

/// Appends `bytes` to `file` entirely, or cuts the file back to where it was.
fn append_whole(file: &mut File, bytes: &[u8]) -> io::Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    let before = file.metadata()?.len();
    let written = file.write_all(bytes);
    if written.is_err() {
        // Best effort: the error that matters is the write's
        let _ = file.set_len(before);
    }
    written
}

/// Opens both files of `dir`, with their header when empty.
fn open_files(dir: &Path) -> io::Result<(File, File)> {
    let mut all = open_file(dir, ALL_FILE)?;
    let mut app = open_file(dir, APP_FILE)?;
    for file in [&mut all, &mut app] {
        if file.metadata()?.len() == 0 {
            append_whole(file, format!("{HEADER}{LINE_END}").as_bytes())?;
        }
    }
    Ok((all, app))
}

/// The error for a results path that is a symbolic link.
fn symlink_error(path: &Path) -> io::Error {
    io::Error::other(format!(
        "{} is a symbolic link, and results are never written through one. Remove it, or set \
         results-path to another directory.",
        path.display()
    ))
}

/// The error for a results path that is not what it should be.
fn kind_error(path: &Path, what: &str) -> io::Error {
    io::Error::other(format!(
        "{} is not {what}. Remove it, or set results-path to another directory.",
        path.display()
    ))
}

/// Opens `dir/name` to append, creating it, through a directory handle opened without following
/// a link, and refuses a link or anything but a regular file.
#[cfg(unix)]
fn open_file(dir: &Path, name: &str) -> io::Result<File> {
    use rustix::fs::{openat, Mode, OFlags};
    use rustix::io::Errno;

    let dir_fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|errno| match errno {
        // Linux says ENOTDIR for a link to a directory opened with O_DIRECTORY | O_NOFOLLOW
        Errno::LOOP | Errno::NOTDIR if is_symlink(dir) => symlink_error(dir),
        Errno::NOTDIR => kind_error(dir, "a directory"),
        errno => with_path(dir, errno.into()),
    })?;
    let path = dir.join(name);
    // NONBLOCK so that a FIFO planted there does not hang the open; it is refused below
    let fd = openat(
        &dir_fd,
        name,
        OFlags::WRONLY
            | OFlags::APPEND
            | OFlags::CREATE
            | OFlags::NOFOLLOW
            | OFlags::CLOEXEC
            | OFlags::NONBLOCK,
        Mode::from_raw_mode(0o666),
    )
    .map_err(|errno| match errno {
        Errno::LOOP => symlink_error(&path),
        Errno::ISDIR => kind_error(&path, "a regular file"),
        errno => with_path(&path, errno.into()),
    })?;
    let file = File::from(fd);
    if !file.metadata()?.is_file() {
        return Err(kind_error(&path, "a regular file"));
    }
    Ok(file)
}

/// Opens `dir/name` to append, creating it, and refuses a link or anything but a regular file.
/// Without openat, the checks come just before the open.
#[cfg(not(unix))]
fn open_file(dir: &Path, name: &str) -> io::Result<File> {
    let path = dir.join(name);
    for (path, want_dir) in [(dir, true), (path.as_path(), false)] {
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => return Err(symlink_error(path)),
            Ok(meta) if want_dir && !meta.is_dir() => return Err(kind_error(path, "a directory")),
            Ok(meta) if !want_dir && !meta.is_file() => {
                return Err(kind_error(path, "a regular file"))
            }
            Ok(_) => {}
            Err(error) if !want_dir && error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(with_path(path, error)),
        }
    }
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)
        .map_err(|error| with_path(&path, error))
}

/// Whether `path` is a symbolic link, to explain a refusal.
#[cfg(unix)]
fn is_symlink(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink())
}

/// `error` with the path it happened on, and the way out.
fn with_path(path: &Path, error: io::Error) -> io::Error {
    io::Error::new(
        error.kind(),
        format!(
            "Cannot open {}: {error}. Set results-path to a directory the profiler can write to.",
            path.display()
        ),
    )
}

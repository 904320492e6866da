//! The power of this virtual machine, from a file its host writes and shares with the guest
//! (virtiofs, 9p, a shared folder). Only the first line is read, in one of two formats:
//! `powerjoular`, the row PowerJoular 2.0 rewrites every second with `-p PID -o FILE` for the
//! process of the virtual machine (`timestamp,cpu_usage,cpu_power`, no header); or `watts`, the
//! power alone. The window is the default second; a `powerjoular` row keeps covering for up to
//! [`MAX_REUSES`] more windows when no new one can be read, and the host's timestamp tells new
//! rows apart, so the clocks of host and guest are never compared.

use std::path::{Path, PathBuf};

use super::{PowerError, PowerSource, MAX_WATTS};
use crate::config::{java_trim, VmFormat};
use crate::input::{self, StartError};
use crate::log::{Level, Log};
use crate::output::java_float::java_double;

/// A power value never takes that many characters, so a longer line is not one.
pub const MAX_LINE_LENGTH: usize = 256;
/// How many more windows the last row covers when the next one cannot be read.
pub const MAX_REUSES: u32 = 2;

/// One row of the file PowerJoular writes for a process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    /// The host's Unix time, in seconds.
    pub timestamp: i64,
    /// The power, in watts.
    pub power: f64,
}

/// The first line of the file's start, trimmed. With `complete`, the line must end with a
/// newline: a row cut short while the host rewrites it would still parse.
pub fn first_line(file: &Path, start: &[u8], complete: bool) -> Result<String, PowerError> {
    let text = String::from_utf8_lossy(start);
    match text.find('\n') {
        Some(end) => Ok(java_trim(&text[..end]).to_owned()),
        None if complete || start.len() > MAX_LINE_LENGTH => Err(PowerError::new(format!(
            "The first line of {} is incomplete or too long.",
            file.display()
        ))),
        None => Ok(java_trim(&text).to_owned()),
    }
}

/// A number as Java's `Double.parseDouble` reads it: trimmed, an optional sign, then `NaN`,
/// `Infinity`, or decimal digits with an optional point and exponent and an optional `d` or `f`
/// suffix (`42.5`, `.5`, `1e3`, `42.5d`). Rust's own spellings (`inf`, `nan`) are refused, as Java
/// refuses them; so are hexadecimal floats (`0x1p3`), which Java would read.
fn parse_java_double(text: &str) -> Option<f64> {
    let text = java_trim(text);
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let negative = text.starts_with('-');
    match unsigned {
        "NaN" => return Some(f64::NAN),
        "Infinity" if negative => return Some(f64::NEG_INFINITY),
        "Infinity" => return Some(f64::INFINITY),
        _ => {}
    }
    let decimal = unsigned
        .strip_suffix(['d', 'D', 'f', 'F'])
        .unwrap_or(unsigned);
    if !decimal.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let value: f64 = decimal.parse().ok()?;
    Some(if negative { -value } else { value })
}

/// A power in watts: finite, >= 0 and at most [`MAX_WATTS`].
pub fn parse_power(file: &Path, text: &str) -> Result<f64, PowerError> {
    let power = parse_java_double(text).ok_or_else(|| {
        PowerError::new(format!(
            "{} does not hold a power in watts where one is expected.",
            file.display()
        ))
    })?;
    if !power.is_finite() {
        return Err(PowerError::new(format!(
            "{} holds {}, which is not a power in watts.",
            file.display(),
            java_double(power)
        )));
    }
    // PowerJoular writes -1 for a process it could not measure
    if power < 0.0 {
        return Err(PowerError::new(format!(
            "The host could not measure the power of this virtual machine ({} holds {}).",
            file.display(),
            java_double(power)
        )));
    }
    if power > MAX_WATTS {
        return Err(PowerError::new(format!(
            "{} holds {} W, more than any machine's CPUs draw (at most {} W).",
            file.display(),
            java_double(power),
            java_double(MAX_WATTS)
        )));
    }
    Ok(power)
}

/// Parses the (trimmed) first line as the row PowerJoular writes with `-o` for a process.
pub fn parse_row(file: &Path, line: &str) -> Result<Row, PowerError> {
    let columns: Vec<&str> = line.split(',').collect();
    if columns.len() == 5 {
        return Err(PowerError::new(format!(
            "{} holds the power of the whole host. Point vm-power-file at the file PowerJoular writes for the process of this virtual machine: with -p <pid> -o <file>, that is <file>-<pid>.csv.",
            file.display()
        )));
    }
    if columns.len() != 3 {
        return Err(PowerError::new(format!(
            "{} does not hold the row PowerJoular writes with -o for a process (timestamp,cpu_usage,cpu_power).",
            file.display()
        )));
    }
    let timestamp = java_trim(columns[0]).parse().map_err(|_| {
        PowerError::new(format!(
            "The first column of {} is not a Unix timestamp. On the host, write the file with -o, not -f: -f starts it with a header.",
            file.display()
        ))
    })?;
    Ok(Row {
        timestamp,
        power: parse_power(file, columns[2])?,
    })
}

/// Parses the start of the file (at most [`MAX_LINE_LENGTH`] + 1 bytes) in `format`.
pub fn parse(file: &Path, start: &[u8], format: VmFormat) -> Result<Row, PowerError> {
    match format {
        VmFormat::Watts => Ok(Row {
            timestamp: 0,
            power: parse_power(file, &first_line(file, start, false)?)?,
        }),
        VmFormat::PowerJoular => parse_row(file, &first_line(file, start, true)?),
    }
}

/// Reads the start of `file`: at most [`MAX_LINE_LENGTH`] + 1 bytes of a regular file.
fn read_start(file: &Path) -> Result<Vec<u8>, PowerError> {
    input::read_start(file, MAX_LINE_LENGTH + 1).map_err(|error| match error {
        StartError::NotFound => PowerError::new(format!(
            "There is no {}. Is it shared with this virtual machine, and is the host writing it?",
            file.display()
        )),
        StartError::NotRegular => {
            PowerError::new(format!("{} is not a regular file.", file.display()))
        }
        StartError::Io(error) => {
            PowerError::new(format!("Cannot read {}: {error}.", file.display()))
        }
    })
}

/// CPU power from a file the host writes.
pub struct VmPowerFile {
    file: PathBuf,
    format: VmFormat,
    /// The last row read, and how many more windows it has covered.
    last: Option<(Row, u32)>,
}

impl VmPowerFile {
    /// Opens the source even if the file is not there yet: the host may write it later.
    pub fn open(file: &Path, format: VmFormat, log: &dyn Log) -> VmPowerFile {
        let name = match format {
            VmFormat::PowerJoular => "powerjoular",
            VmFormat::Watts => "watts",
        };
        log.log(
            Level::Info,
            &format!(
                "Reading the power of this virtual machine from {} ({name} format)",
                file.display()
            ),
        );
        VmPowerFile {
            file: file.to_owned(),
            format,
            last: None,
        }
    }
}

impl PowerSource for VmPowerFile {
    fn describe(&self) -> String {
        let format = match self.format {
            VmFormat::PowerJoular => "powerjoular",
            VmFormat::Watts => "watts",
        };
        format!("vm ({format} file {})", self.file.display())
    }

    fn watts(&mut self) -> Result<f64, PowerError> {
        let row = read_start(&self.file).and_then(|start| parse(&self.file, &start, self.format));
        if self.format == VmFormat::Watts {
            // Used as it is, every window, however old
            return row.map(|row| row.power);
        }
        let problem = match row {
            Ok(row) if self.last.is_none_or(|(last, _)| last.timestamp != row.timestamp) => {
                self.last = Some((row, 0));
                return Ok(row.power);
            }
            Ok(_) => PowerError::new(format!(
                "The host has not updated {} for {} windows. Is PowerJoular still running on the host?",
                self.file.display(),
                MAX_REUSES + 1
            )),
            Err(error) => error,
        };
        // The last row covers a window that saw no new one, for a little while
        match &mut self.last {
            Some((last, reuses)) if *reuses < MAX_REUSES => {
                *reuses += 1;
                Ok(last.power)
            }
            _ => Err(problem),
        }
    }
}

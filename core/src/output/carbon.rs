//! `carbon-intensity.csv`: the carbon intensity in force for each cycle, beside the two CSV files
//! of a results directory, when `carbon-intensity` is set (docs/carbon.md). Joular's files stay
//! as they are, byte for byte; a row of theirs gets its grams of CO2e from the intensity of the
//! cycle with its timestamp: `energy_joules / 3.6e6 × grams_co2e_per_kwh`.
//!
//! One row per cycle, `timestamp,interval_seconds,grams_co2e_per_kwh,source`: the timestamp of
//! the cycle's rows in the other files, its length, the intensity as Rust writes an `f64` (read
//! back exactly), and `constant` or `file`. The file is made at the first cycle with an
//! intensity, its header going only into an empty file so that runs append, and written as the
//! other files are: no symbolic link followed, a row whole or not at all.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::carbon::Intensity;
use crate::energy::Interval;
use crate::log::Log;
use crate::output::csv::LINE_END;
use crate::output::java_float::push_fixed;
use crate::output::losses::{Losses, Lost};
use crate::output::path::{append_whole, create_file, Mode};

/// The file's name.
pub const CARBON_FILE: &str = "carbon-intensity.csv";
/// Its first line.
pub const CARBON_HEADER: &str = "timestamp,interval_seconds,grams_co2e_per_kwh,source";

/// One row.
pub fn row(timestamp_ms: i64, interval: Interval, intensity: Intensity) -> String {
    let mut row = format!("{timestamp_ms},");
    push_fixed(&mut row, interval.seconds(), 9);
    row.push_str(&format!(
        ",{},{}{LINE_END}",
        intensity.grams_per_kwh,
        intensity.source.label()
    ));
    row
}

/// Appends each cycle's intensity to the `carbon-intensity.csv` of a results directory.
#[derive(Debug)]
pub struct CarbonWriter {
    path: PathBuf,
    file: Option<File>,
    losses: Losses,
}

impl CarbonWriter {
    /// The writer of `dir`'s file, opened at the first row.
    pub fn new(dir: &Path) -> CarbonWriter {
        let path = dir.join(CARBON_FILE);
        CarbonWriter {
            losses: Losses::new(format!("the carbon intensity to {}", path.display())),
            path,
            file: None,
        }
    }

    /// Appends the row of a cycle. A failure is said once (SEVERE, [`Losses`]) and the file
    /// opened again at the next cycle.
    pub fn write(
        &mut self,
        timestamp_ms: i64,
        interval: Interval,
        intensity: Intensity,
        log: &dyn Log,
    ) {
        match self.append(&row(timestamp_ms, interval, intensity)) {
            Ok(()) => self.losses.written(log),
            Err(error) => self.losses.failed(log, &error, 1),
        }
    }

    fn append(&mut self, row: &str) -> io::Result<()> {
        let mut file = match self.file.take() {
            Some(file) => file,
            None => {
                let mut file = create_file(&self.path, Mode::Append)?;
                if file.metadata()?.len() == 0 {
                    append_whole(&mut file, format!("{CARBON_HEADER}{LINE_END}").as_bytes())?;
                }
                file
            }
        };
        append_whole(&mut file, row.as_bytes())?;
        self.file = Some(file);
        Ok(())
    }

    /// The rows that could not be written so far.
    pub fn lost(&self) -> Lost {
        self.losses.total()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::carbon::IntensitySource;
    use crate::log::Recorded;

    #[test]
    fn one_row_per_cycle_after_one_header() {
        let dir = tempfile::tempdir().unwrap();
        let log = Recorded::default();
        for grams in [350.0, 120.25] {
            let mut writer = CarbonWriter::new(dir.path());
            let intensity = Intensity {
                grams_per_kwh: grams,
                source: IntensitySource::File,
            };
            writer.write(1000, Interval::from_ns(1_000_000_000), intensity, &log);
        }
        assert_eq!(
            std::fs::read_to_string(dir.path().join(CARBON_FILE)).unwrap(),
            format!(
                "{CARBON_HEADER}{LINE_END}1000,1.000000000,350,file{LINE_END}\
                 1000,1.000000000,120.25,file{LINE_END}"
            )
        );
        assert!(log.messages().is_empty());
    }
}

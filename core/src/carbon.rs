//! The carbon intensity of the electricity (`carbon-intensity`, docs/carbon.md): grams of CO2e
//! per kWh, a constant or the first line of a file that a host agent updates, read like the vm
//! power file ([`crate::power::vm`]): a regular file, its first line at most
//! [`MAX_LINE_LENGTH`] bytes and ended by a newline, read again at every cycle so that a change
//! is in force from the next one. Off unless set: there is no default intensity.
//!
//! [`Intensity::grams`] is the one place where joules become grams, so that every output gives
//! the same grams for the same energy.

use std::path::{Path, PathBuf};

use crate::energy::Energy;
use crate::input::{self, StartError};
use crate::log::{Level, Log};
use crate::power::vm::{first_line, MAX_LINE_LENGTH};

/// Joules in a kilowatt-hour.
pub const JOULES_PER_KWH: f64 = 3.6e6;

/// The most grams of CO2e per kWh an intensity may be: no electricity emits more (lignite, the
/// most, about 1,200 g/kWh over its life cycle), so a larger value is a mistake.
pub const MAX_GRAMS_PER_KWH: f64 = 2000.0;

/// The `carbon-intensity` setting: a constant, or the file that holds the intensity.
#[derive(Debug, Clone, PartialEq)]
pub enum IntensitySetting {
    /// Grams of CO2e per kWh, always.
    Constant(f64),
    /// A file whose first line is the intensity in grams of CO2e per kWh.
    File(PathBuf),
}

/// The value of `carbon-intensity` (trimmed, not empty): a number is a constant, which must be
/// an intensity ([`check`]); anything else is the path of a file.
pub fn setting(value: &str) -> Result<IntensitySetting, String> {
    match value.parse::<f64>() {
        Ok(grams) => check(grams).map(IntensitySetting::Constant),
        Err(_) => Ok(IntensitySetting::File(PathBuf::from(value))),
    }
}

/// `grams` if it is an intensity: a finite number of grams per kWh from 0 to
/// [`MAX_GRAMS_PER_KWH`]; else why not.
pub fn check(grams: f64) -> Result<f64, String> {
    if grams.is_finite() && (0.0..=MAX_GRAMS_PER_KWH).contains(&grams) {
        Ok(grams)
    } else {
        Err(format!(
            "{grams} is not a carbon intensity: give grams of CO2e per kWh from 0 to \
             {MAX_GRAMS_PER_KWH} (no electricity emits more)"
        ))
    }
}

impl IntensitySetting {
    /// The value that gives this setting again.
    pub fn value(&self) -> String {
        match self {
            IntensitySetting::Constant(grams) => grams.to_string(),
            IntensitySetting::File(path) => path.display().to_string(),
        }
    }
}

/// Where an intensity came from: the label of the daemon's `source` and of the results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IntensitySource {
    /// A constant setting.
    Constant,
    /// A file.
    File,
}

impl IntensitySource {
    /// `constant` or `file`.
    pub fn label(self) -> &'static str {
        match self {
            IntensitySource::Constant => "constant",
            IntensitySource::File => "file",
        }
    }

    /// The source a label names.
    pub fn from_label(label: &str) -> Option<IntensitySource> {
        match label {
            "constant" => Some(IntensitySource::Constant),
            "file" => Some(IntensitySource::File),
            _ => None,
        }
    }
}

/// The carbon intensity in force for a cycle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Intensity {
    /// Grams of CO2e per kWh.
    pub grams_per_kwh: f64,
    /// Where it came from.
    pub source: IntensitySource,
}

impl Intensity {
    /// The grams of CO2e of `energy` at this intensity: kWh times grams per kWh.
    pub fn grams(&self, energy: Energy) -> f64 {
        energy.joules() / JOULES_PER_KWH * self.grams_per_kwh
    }
}

/// Reads the intensity in force, once per cycle.
#[derive(Debug)]
pub struct IntensityReader {
    setting: IntensitySetting,
    /// The reason the file cannot be used, once said (said again only after it could be).
    failing: Option<String>,
}

impl IntensityReader {
    /// The reader of `setting`.
    pub fn new(setting: &IntensitySetting) -> IntensityReader {
        IntensityReader {
            setting: setting.clone(),
            failing: None,
        }
    }

    /// What it reads, for the start lines: `350 g CO2e/kWh (constant)`,
    /// `the file /run/carbon`.
    pub fn describe(&self) -> String {
        match &self.setting {
            IntensitySetting::Constant(grams) => format!("{grams} g CO2e/kWh (constant)"),
            IntensitySetting::File(path) => format!("the file {}", path.display()),
        }
    }

    /// The intensity in force now: the constant, or the file's, read now. A file that cannot be read, or that
    /// holds no intensity, gives none (the cycle gets no grams, never a made-up intensity): each
    /// new reason is said once through `log` as a warning, and when the file can be used again.
    pub fn read(&mut self, log: &dyn Log) -> Option<Intensity> {
        let path = match &self.setting {
            IntensitySetting::Constant(grams) => {
                return Some(Intensity {
                    grams_per_kwh: *grams,
                    source: IntensitySource::Constant,
                })
            }
            IntensitySetting::File(path) => path.clone(),
        };
        match read_intensity(&path) {
            Ok(grams) => {
                if self.failing.take().is_some() {
                    log.log(
                        Level::Info,
                        &format!(
                            "The carbon intensity can be read again from {}.",
                            path.display()
                        ),
                    );
                }
                Some(Intensity {
                    grams_per_kwh: grams,
                    source: IntensitySource::File,
                })
            }
            Err(reason) => {
                if self.failing.as_deref() != Some(reason.as_str()) {
                    log.log(
                        Level::Warning,
                        &format!("{reason} Its cycles get no grams of CO2e until it is fixed."),
                    );
                    self.failing = Some(reason);
                }
                None
            }
        }
    }
}

/// The intensity in the file at `path`: its first line, ended by a newline (a line cut short
/// while the host rewrites it would still parse), a number of grams per kWh.
pub fn read_intensity(path: &Path) -> Result<f64, String> {
    let start = input::read_start(path, MAX_LINE_LENGTH + 1).map_err(|error| match error {
        StartError::NotFound => format!(
            "There is no carbon intensity file {}. Is the host agent writing it?",
            path.display()
        ),
        error => format!(
            "Cannot read the carbon intensity file {}: {error}.",
            path.display()
        ),
    })?;
    let line = first_line(path, &start, true).map_err(|error| error.message().to_owned())?;
    let grams = line.parse::<f64>().map_err(|_| {
        format!(
            "{} does not hold a carbon intensity (grams of CO2e per kWh) on its first line.",
            path.display()
        )
    })?;
    check(grams).map_err(|why| format!("{}: {why}.", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::Recorded;

    #[test]
    fn grams_are_kilowatt_hours_times_the_intensity() {
        let intensity = Intensity {
            grams_per_kwh: 350.0,
            source: IntensitySource::Constant,
        };
        assert_eq!(intensity.grams(Energy::from_joules(3.6e6)), 350.0);
        assert_eq!(intensity.grams(Energy::from_joules(36.0)), 0.0035);
    }

    #[test]
    fn a_number_is_a_constant_anything_else_a_file() {
        assert_eq!(setting("350"), Ok(IntensitySetting::Constant(350.0)));
        assert_eq!(setting("0"), Ok(IntensitySetting::Constant(0.0)));
        assert_eq!(
            setting("/run/carbon"),
            Ok(IntensitySetting::File(PathBuf::from("/run/carbon")))
        );
        for bad in ["-1", "2001", "NaN", "inf"] {
            let error = setting(bad).unwrap_err();
            assert!(
                error.contains("grams of CO2e per kWh from 0 to 2000"),
                "{error}"
            );
        }
        assert_eq!(IntensitySetting::Constant(350.0).value(), "350");
        for source in [IntensitySource::Constant, IntensitySource::File] {
            assert_eq!(IntensitySource::from_label(source.label()), Some(source));
        }
    }

    #[test]
    fn the_file_is_followed_and_a_bad_one_gives_no_intensity() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("carbon");
        let mut reader = IntensityReader::new(&IntensitySetting::File(file.clone()));
        let log = Recorded::default();
        assert_eq!(reader.read(&log), None);
        std::fs::write(&file, "350\n").unwrap();
        let read = reader.read(&log).unwrap();
        assert_eq!(
            (read.grams_per_kwh, read.source),
            (350.0, IntensitySource::File)
        );
        std::fs::write(&file, "120.5\n").unwrap();
        assert_eq!(reader.read(&log).unwrap().grams_per_kwh, 120.5);
        for bad in ["35", "abc\n", "5000\n", "-3\n"] {
            std::fs::write(&file, bad).unwrap();
            assert_eq!(reader.read(&log), None, "{bad:?}");
        }
        std::fs::write(&file, "90\n").unwrap();
        assert_eq!(reader.read(&log).unwrap().grams_per_kwh, 90.0);
        let messages: Vec<String> = log.messages().into_iter().map(|(_, m)| m).collect();
        assert!(
            messages[0].starts_with("There is no carbon intensity file"),
            "{messages:?}"
        );
        assert!(messages[1].starts_with("The carbon intensity can be read again"));
        assert!(
            messages[2].contains("is incomplete or too long"),
            "{messages:?}"
        );
        assert!(messages[3].contains("does not hold a carbon intensity"));
        assert!(messages[4].contains("5000 is not a carbon intensity"));
        assert!(messages[5].contains("-3 is not a carbon intensity"));
        assert!(messages[6].starts_with("The carbon intensity can be read again"));
        assert_eq!(messages.len(), 7, "{messages:?}");
        std::fs::remove_file(&file).unwrap();
        std::fs::create_dir(&file).unwrap();
        assert_eq!(reader.read(&log), None);
        assert!(log
            .messages()
            .last()
            .unwrap()
            .1
            .contains("not a regular file"));
    }
}

//! The configuration of Joular Code for Java, `joularcodejava.properties`, read exactly as that
//! agent reads it, plus the keys of joularcode-bpf's own features.
//!
//! Every key can also be set from code with the same rules ([`Config::set`]), so that the command
//! line can offer each key as a `--long-option` of the same name that overrides the file.

mod properties;
mod values;

use std::path::{Path, PathBuf};

use crate::carbon::IntensitySetting;
use crate::log::{Level, Log, Recorded};

pub use properties::{parse as parse_properties, MalformedEscape};
use values::{carbon_intensity, jvm_threads, sample_rate, watts_per_cpu};

/// The file name Joular Code for Java looks for in the working folder.
pub const FILE_NAME: &str = "joularcodejava.properties";

/// The sample rate used when none, or an invalid one, is given, in milliseconds.
pub const DEFAULT_SAMPLE_RATE_MS: u64 = 10;

/// Idle watts per CPU of the estimate: Cloud Carbon Footprint's AWS average minimum at 0 % CPU.
pub const DEFAULT_IDLE_WATTS_PER_CPU: f64 = 0.74;
/// Full-load watts per CPU of the estimate: Cloud Carbon Footprint's AWS average maximum at 100 % CPU.
pub const DEFAULT_MAX_WATTS_PER_CPU: f64 = 3.5;

/// Every key, with a one-line help, in the order the documentation lists them.
pub const KEYS: &[(&str, &str)] = &[
    (
        "power-source-type",
        "where the CPU power comes from: auto, rapl, ringbuffer, vm, estimate, energy-meter (Windows) or powermetrics (macOS) (default auto)",
    ),
    (
        "powerjoular-ringbuffer-path",
        "the ring buffer PowerJoular writes with -r (default /dev/shm/powerjoular on Linux)",
    ),
    (
        "vm-power-file",
        "the file the host writes this virtual machine's power to (needed by power-source-type=vm)",
    ),
    (
        "vm-power-format",
        "the format of vm-power-file: powerjoular (a PowerJoular -o row) or watts (default powerjoular)",
    ),
    (
        "stack-monitoring-sample-rate",
        "milliseconds between two stack samples, from 1 to 1000 (default 10)",
    ),
    (
        "results-path",
        "the folder the CSV files are written to (default joular-code-java-results)",
    ),
    (
        "methods-filtering-prefix",
        "comma-separated prefixes of the frames kept in the app file (default none: all frames)",
    ),
    (
        "entry-points",
        "comma-separated methods (package.Class.method) that start a unit of work whenever on the stack, the oldest winning (default none: the built-in rules)",
    ),
    (
        "jvm-threads",
        "the JVM's own threads (GC, JIT): own branches (own, default) or spread over Java threads as Joular does (spread)",
    ),
    (
        "estimate-idle-watts-per-cpu",
        "watts per CPU at 0 % utilisation, for power-source-type=estimate (default 0.74)",
    ),
    (
        "estimate-max-watts-per-cpu",
        "watts per CPU at 100 % utilisation, for power-source-type=estimate (default 3.5)",
    ),
    (
        "carbon-intensity",
        "grams of CO2e per kWh, or a file whose first line holds them, to give grams of CO2e besides joules (default none: not counted)",
    ),
];

/// Where the CPU power comes from (`power-source-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// RAPL when the machine has it, else the PowerJoular ring buffer, else an estimate.
    Auto,
    /// RAPL, through powercap or else the perf `power` PMU.
    Rapl,
    /// PowerJoular 2.0's shared-memory ring buffer.
    RingBuffer,
    /// A file the host of this virtual machine writes.
    Vm,
    /// An estimate from the CPU utilisation.
    Estimate,
    /// Windows' Energy Meter performance counters.
    EnergyMeter,
    /// macOS's powermetrics.
    Powermetrics,
}

/// The format of `vm-power-file` (`vm-power-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmFormat {
    /// The row PowerJoular 2.0 rewrites with `-o` for a process: `timestamp,cpu_usage,cpu_power`.
    PowerJoular,
    /// The power alone, in watts.
    Watts,
}

/// What to do with the JVM's own threads (`jvm-threads`): the attribution's choice.
pub use crate::attribution::JvmThreads;

/// A setting that cannot be used. The caller turns it into "monitoring off" as Joular does, or
/// into a one-line error and a non-zero exit on the command line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A key that is not one of [`KEYS`].
    #[error("Unknown setting '{0}'. Use one of {keys}.", keys = key_list())]
    UnknownKey(String),
    /// A `power-source-type` that is not one of the choices.
    #[error(
        "Unknown power-source-type '{0}'. Use auto, rapl, ringbuffer, vm, estimate, energy-meter \
         or powermetrics."
    )]
    UnknownPowerSourceType(String),
    /// A `vm-power-format` that is not one of the choices.
    #[error("Unknown vm-power-format '{0}'. Use powerjoular or watts.")]
    UnknownVmPowerFormat(String),
    /// `power-source-type=vm` without `vm-power-file`.
    #[error(
        "power-source-type=vm needs vm-power-file, the file the host writes the power of this \
         virtual machine to."
    )]
    VmWithoutFile,
}

/// The keys of [`KEYS`], comma-separated.
fn key_list() -> String {
    let keys: Vec<&str> = KEYS.iter().map(|(key, _)| *key).collect();
    keys.join(", ")
}

/// A value given by hand ([`Config::set_strictly`]) that cannot be used; the message names the
/// key, for the caller to prefix (`--`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    /// The key, or its value, is refused: `key value: why`.
    #[error("{key} {value}: {error}")]
    Refused {
        /// The key given.
        key: String,
        /// The value given.
        value: String,
        /// Why.
        error: ConfigError,
    },
    /// The key's default is refused: `key: why`.
    #[error("{key}: {error}")]
    DefaultRefused {
        /// The key given.
        key: String,
        /// Why.
        error: ConfigError,
    },
    /// The value is one the file would replace by the default: what the file's warning says of
    /// it, starting with the key.
    #[error("{0}")]
    Unusable(String),
}

/// The settings of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `power-source-type`, lower-cased; checked by [`Config::source_kind`].
    pub power_source_type: String,
    /// `powerjoular-ringbuffer-path`; `None` means PowerJoular's path for this OS
    /// ([`default_ringbuffer_path`], or the ring buffer of [`crate::power::SystemRoots`]).
    pub ringbuffer_path: Option<PathBuf>,
    /// `vm-power-file`.
    pub vm_power_file: Option<PathBuf>,
    /// `vm-power-format`, lower-cased; checked by [`Config::vm_format`].
    pub vm_power_format: String,
    /// `stack-monitoring-sample-rate`, in milliseconds, from 1 to 1000.
    pub sample_rate_ms: u64,
    /// `results-path`, relative to the working folder unless absolute.
    pub results_path: PathBuf,
    /// `methods-filtering-prefix`: trimmed, without empty items; empty means no filter.
    pub methods_filtering_prefix: Vec<String>,
    /// `entry-points`: trimmed, without empty items ([`crate::entry`]).
    pub entry_points: Vec<String>,
    /// `jvm-threads`.
    pub jvm_threads: JvmThreads,
    /// `estimate-idle-watts-per-cpu`.
    pub estimate_idle_watts_per_cpu: f64,
    /// `estimate-max-watts-per-cpu`.
    pub estimate_max_watts_per_cpu: f64,
    /// `carbon-intensity`; `None`, the default, counts no grams of CO2e.
    pub carbon_intensity: Option<IntensitySetting>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            power_source_type: "auto".to_owned(),
            ringbuffer_path: None,
            vm_power_file: None,
            vm_power_format: "powerjoular".to_owned(),
            sample_rate_ms: DEFAULT_SAMPLE_RATE_MS,
            results_path: PathBuf::from("joular-code-java-results"),
            methods_filtering_prefix: Vec::new(),
            entry_points: Vec::new(),
            jvm_threads: JvmThreads::Own,
            estimate_idle_watts_per_cpu: DEFAULT_IDLE_WATTS_PER_CPU,
            estimate_max_watts_per_cpu: DEFAULT_MAX_WATTS_PER_CPU,
            carbon_intensity: None,
        }
    }
}

/// The largest configuration file read.
const MAX_FILE: u64 = 1 << 20;

/// Why the configuration file could not be read: the end of the warning (or of the error, for
/// [`Config::load_strictly`]) that says so.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Opening, inspecting or reading it failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A folder, a FIFO, a device.
    #[error("it is not a regular file.")]
    NotRegular,
    /// Larger than [`MAX_FILE`].
    #[error("it is larger than {MAX_FILE} bytes.")]
    TooLarge,
    /// Its text has a malformed `\uXXXX` escape.
    #[error("{0}.")]
    Malformed(#[from] MalformedEscape),
}

/// The bytes of the configuration file `path`: a regular file (a FIFO there would block) of at
/// most [`MAX_FILE`] bytes.
fn read_file(path: &Path) -> Result<Vec<u8>, FileError> {
    use std::io::Read;
    let file = crate::input::open_for_reading(path, true)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(FileError::NotRegular);
    }
    if meta.len() > MAX_FILE {
        return Err(FileError::TooLarge);
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The text of the configuration file `path`: UTF-8, as Joular Code for Java reads it; where it
/// is not (Joular then ignores the whole file), ISO-8859-1, as Java's
/// `Properties.load(InputStream)` reads bytes, said once through `log`. A file Joular reads
/// reads the same, and none is dropped whole for one byte.
fn decode(bytes: Vec<u8>, path: &Path, log: &dyn Log) -> String {
    match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => {
            let at = error.utf8_error().valid_up_to();
            let bytes = error.into_bytes();
            let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
            log.log(
                Level::Warning,
                &format!(
                    "{} is not valid UTF-8 (byte 0x{:02X} on line {line}): it is read as \
                     ISO-8859-1, as Java's Properties.load(InputStream) reads it, where Joular \
                     Code for Java would ignore the whole file. Save it as UTF-8.",
                    path.display(),
                    bytes[at]
                ),
            );
            bytes.into_iter().map(char::from).collect()
        }
    }
}

/// The properties of the configuration file `path` ([`read_file`], [`decode`]).
fn read_properties(
    path: &Path,
    log: &dyn Log,
) -> Result<std::collections::HashMap<String, String>, FileError> {
    Ok(parse_properties(&decode(read_file(path)?, path, log))?)
}

/// A comma-separated list: each item trimmed, blank ones left out.
fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(java_trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `String.trim()` of Java: drops every character up to U+0020 at both ends.
pub(crate) fn java_trim(value: &str) -> &str {
    value.trim_matches(|c: char| c <= ' ')
}

impl Config {
    /// Reads the configuration as Joular Code for Java does: from `explicit` (the
    /// `-Djoularcodejava.properties` value) when it is not blank, else from
    /// `joularcodejava.properties` in `working_dir`. A missing file means the defaults (and the
    /// working folder is then not searched), said at INFO; an unreadable one too (larger than
    /// 1 MiB, a malformed escape), said at WARNING. A file that is not UTF-8 is
    /// read as ISO-8859-1 ([`decode`]).
    pub fn load(explicit: Option<&str>, working_dir: &Path, log: &dyn Log) -> Config {
        let file = match explicit {
            Some(path) if !path.trim().is_empty() => PathBuf::from(path),
            _ => PathBuf::from(FILE_NAME),
        };
        let absolute = working_dir.join(&file);
        // As Files.isRegularFile: a folder or a FIFO is no file (and is not opened)
        if !absolute.is_file() {
            log.log(
                Level::Info,
                &format!(
                    "No configuration file at {}, using defaults.",
                    absolute.display()
                ),
            );
            return Config::default();
        }
        match read_properties(&absolute, log) {
            Ok(properties) => Config::from_properties(&properties, log),
            Err(reason) => {
                log.log(
                    Level::Warning,
                    &format!(
                        "Could not read {}, using defaults. {reason}",
                        absolute.display()
                    ),
                );
                Config::default()
            }
        }
    }

    /// Reads the configuration file `path` that the user named (the `--config` of the command
    /// line) as [`Config::load`] does, except that a file that cannot be read (not a regular
    /// file, larger than 1 MiB, a malformed escape) is an error rather than the defaults: the
    /// user is there to fix it, and a run with settings other than those asked for would
    /// mislead.
    pub fn load_strictly(path: &Path, log: &dyn Log) -> Result<Config, FileError> {
        Ok(Config::from_properties(&read_properties(path, log)?, log))
    }

    /// The configuration given by parsed properties. Keys that are not ours are ignored, as
    /// Joular does; an unknown power-source-type or vm-power-format is kept, for
    /// [`Config::source_kind`] and [`Config::vm_format`] to refuse when the source is opened.
    pub fn from_properties(
        properties: &std::collections::HashMap<String, String>,
        log: &dyn Log,
    ) -> Config {
        let mut config = Config::default();
        for (key, _) in KEYS {
            if let Some(value) = properties.get(*key) {
                config.apply(key, value, log);
            }
        }
        config
    }

    /// Sets `key` to `value` with the rules of the file: the value is trimmed and a blank one
    /// means the default. An unknown key, power-source-type or vm-power-format is an error (the
    /// value of a known key is kept all the same, as from the file).
    pub fn set(&mut self, key: &str, value: &str, log: &dyn Log) -> Result<(), ConfigError> {
        if !KEYS.iter().any(|(known, _)| *known == key) {
            return Err(ConfigError::UnknownKey(key.to_owned()));
        }
        self.apply(key, value, log);
        match key {
            "power-source-type" => self.source_kind().map(drop),
            "vm-power-format" => self.vm_format().map(drop),
            _ => Ok(()),
        }
    }

    /// Every key with the value that gives this configuration again through [`Config::set`]
    /// (a blank value for a path left at its default), in the order of [`KEYS`].
    pub fn settings(&self) -> Vec<(&'static str, String)> {
        let path = |path: &Option<PathBuf>| {
            path.as_ref()
                .map(|path| path.display().to_string())
                .unwrap_or_default()
        };
        KEYS.iter()
            .map(|&(key, _)| {
                let value = match key {
                    "power-source-type" => self.power_source_type.clone(),
                    "powerjoular-ringbuffer-path" => path(&self.ringbuffer_path),
                    "vm-power-file" => path(&self.vm_power_file),
                    "vm-power-format" => self.vm_power_format.clone(),
                    "stack-monitoring-sample-rate" => self.sample_rate_ms.to_string(),
                    "results-path" => self.results_path.display().to_string(),
                    "methods-filtering-prefix" => self.methods_filtering_prefix.join(","),
                    "entry-points" => self.entry_points.join(","),
                    "jvm-threads" => match self.jvm_threads {
                        JvmThreads::Own => "own".to_owned(),
                        JvmThreads::Spread => "spread".to_owned(),
                    },
                    "estimate-idle-watts-per-cpu" => self.estimate_idle_watts_per_cpu.to_string(),
                    "estimate-max-watts-per-cpu" => self.estimate_max_watts_per_cpu.to_string(),
                    "carbon-intensity" => self
                        .carbon_intensity
                        .as_ref()
                        .map(IntensitySetting::value)
                        .unwrap_or_default(),
                    _ => String::new(),
                };
                (key, value)
            })
            .collect()
    }

    /// Sets `key` to `value` as an option given by hand (`record`'s `--key value`, the agent's
    /// `key=value`), where a value that cannot be used is an error rather than the default with a
    /// warning, as from the file: the error names the key, for the caller to prefix (`--`). The
    /// other warnings (a sample rate below 5 ms, kept) are passed on to `log`.
    pub fn set_strictly(
        &mut self,
        key: &str,
        value: &str,
        log: &dyn Log,
    ) -> Result<(), SettingError> {
        let said = Recorded::default();
        self.set(key, value, &said)
            .map_err(|error| SettingError::Refused {
                key: key.to_owned(),
                value: value.to_owned(),
                error,
            })?;
        let mut defaulted = self.clone();
        defaulted
            .set(key, "", &Recorded::default())
            .map_err(|error| SettingError::DefaultRefused {
                key: key.to_owned(),
                error,
            })?;
        let warned = said
            .messages()
            .into_iter()
            .find(|(level, _)| *level >= Level::Warning);
        match warned {
            Some((_, message)) if *self == defaulted && !value.trim().is_empty() => {
                let refusal = message.split(" Using ").next().unwrap_or(&message);
                Err(SettingError::Unusable(if refusal.starts_with(key) {
                    refusal.to_owned()
                } else {
                    format!("{key}: {refusal}")
                }))
            }
            _ => {
                for (level, message) in said.messages() {
                    log.log(level, &message);
                }
                Ok(())
            }
        }
    }

    /// Applies one known key.
    fn apply(&mut self, key: &str, value: &str, log: &dyn Log) {
        let value = java_trim(value);
        let defaults = Config::default();
        match key {
            "power-source-type" => {
                self.power_source_type = if value.is_empty() {
                    defaults.power_source_type
                } else {
                    value.to_lowercase()
                }
            }
            "powerjoular-ringbuffer-path" => {
                self.ringbuffer_path = (!value.is_empty()).then(|| PathBuf::from(value))
            }
            "vm-power-file" => {
                self.vm_power_file = (!value.is_empty()).then(|| PathBuf::from(value))
            }
            "vm-power-format" => {
                self.vm_power_format = if value.is_empty() {
                    defaults.vm_power_format
                } else {
                    value.to_lowercase()
                }
            }
            "stack-monitoring-sample-rate" => self.sample_rate_ms = sample_rate(value, log),
            "results-path" => {
                self.results_path = if value.is_empty() {
                    defaults.results_path
                } else {
                    PathBuf::from(value)
                }
            }
            "methods-filtering-prefix" => self.methods_filtering_prefix = list(value),
            "entry-points" => self.entry_points = list(value),
            "jvm-threads" => self.jvm_threads = jvm_threads(value, log),
            "estimate-idle-watts-per-cpu" => {
                self.estimate_idle_watts_per_cpu =
                    watts_per_cpu(key, value, DEFAULT_IDLE_WATTS_PER_CPU, log)
            }
            "estimate-max-watts-per-cpu" => {
                self.estimate_max_watts_per_cpu =
                    watts_per_cpu(key, value, DEFAULT_MAX_WATTS_PER_CPU, log)
            }
            "carbon-intensity" => self.carbon_intensity = carbon_intensity(value, log),
            _ => {}
        }
    }

    /// The power source `power-source-type` names, or the error that turns monitoring off.
    pub fn source_kind(&self) -> Result<SourceKind, ConfigError> {
        match self.power_source_type.as_str() {
            "auto" => Ok(SourceKind::Auto),
            "rapl" => Ok(SourceKind::Rapl),
            "ringbuffer" => Ok(SourceKind::RingBuffer),
            "vm" => Ok(SourceKind::Vm),
            "estimate" => Ok(SourceKind::Estimate),
            "energy-meter" => Ok(SourceKind::EnergyMeter),
            "powermetrics" => Ok(SourceKind::Powermetrics),
            other => Err(ConfigError::UnknownPowerSourceType(other.to_owned())),
        }
    }

    /// The format `vm-power-format` names, or the error that turns monitoring off.
    pub fn vm_format(&self) -> Result<VmFormat, ConfigError> {
        match self.vm_power_format.as_str() {
            "powerjoular" => Ok(VmFormat::PowerJoular),
            "watts" => Ok(VmFormat::Watts),
            other => Err(ConfigError::UnknownVmPowerFormat(other.to_owned())),
        }
    }

    /// Checks the settings that must be one of a list (`power-source-type`, `vm-power-format`),
    /// wherever they came from: what `record` and the agent's sampling mode refuse before they
    /// start.
    pub fn check_choices(&self) -> Result<(), ConfigError> {
        self.source_kind()?;
        self.vm_format()?;
        Ok(())
    }
}

/// Where PowerJoular puts its ring buffer on this OS.
pub fn default_ringbuffer_path() -> PathBuf {
    if cfg!(windows) {
        let program_data = std::env::var("PROGRAMDATA")
            .ok()
            .filter(|value| !value.trim().is_empty())
            .unwrap_or_else(|| "C:\\ProgramData".to_owned());
        PathBuf::from(format!("{program_data}\\powerjoular"))
    } else if cfg!(target_os = "linux") {
        PathBuf::from("/dev/shm/powerjoular")
    } else {
        PathBuf::from("/tmp/powerjoular")
    }
}

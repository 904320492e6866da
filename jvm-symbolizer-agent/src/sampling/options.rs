//! The sampling mode's options: `sample[,config=FILE][,KEY=VALUE...]` to profile, `stop` (through
//! an attach) to end a profile and write its last cycle.
//!
//! Every key of `joularcodejava.properties` is an option of the same name, over the file, with
//! the validation of `record`'s command line: a value that cannot be used is an error. A piece
//! without `=` continues the value before it, so that `methods-filtering-prefix=com.a,com.b`
//! keeps both prefixes. The agent's own keys:
//! - `config=FILE`: the properties file (it must exist); default `joularcodejava.properties` in
//!   the JVM's working folder, if there is one; `config=` with no file: none, the options alone
//!   (what `joularcode-bpf record --mode agent` gives, with every key);
//! - `cycle-log=FILE`: one JSON line per cycle, as `record --cycle-log` writes it;
//! - `from-record=yes`: given by `joularcode-bpf record --mode agent`, which has said already
//!   what the settings warn of (a low sample rate): the agent does not say it again;
//! - `sampler=auto|signals|jvmti`: how stacks are sampled (see [`SamplerChoice`]).

use std::path::{Path, PathBuf};

use joularcode_core::config::{Config, ConfigError, SettingError};
use joularcode_core::log::{Log, Recorded};

/// How stacks are sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SamplerChoice {
    /// `signals` where the platform has them (Linux, macOS) and the JVM has AsyncGetCallTrace,
    /// else `jvmti`.
    #[default]
    Auto,
    /// A CPU-time timer and AsyncGetCallTrace in its signal handler: no safepoint bias.
    Signals,
    /// JVMTI stack traces of the threads that used CPU since the last sample, taken at
    /// safepoints.
    Jvmti,
}

/// What the agent is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Profile this JVM.
    Sample(SampleOptions),
    /// End the profile running in this JVM, writing its last cycle.
    Stop,
}

/// Which properties file is read (`config=`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ConfigFile {
    /// `joularcodejava.properties` in the working folder, if there is one.
    #[default]
    WorkingFolder,
    /// This file, which must exist.
    Given(PathBuf),
    /// None: the defaults and the options.
    Nothing,
}

/// The options of `sample`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SampleOptions {
    /// `config=`.
    pub config_file: ConfigFile,
    /// The keys of `joularcodejava.properties` given, in order.
    pub settings: Vec<(String, String)>,
    /// `cycle-log=FILE`.
    pub cycle_log: Option<PathBuf>,
    /// `sampler=...`.
    pub sampler: SamplerChoice,
    /// `from-record=yes`: the settings' warnings were said by `record`.
    pub from_record: bool,
}

/// Options of the sampling mode that cannot be used: the one line said before the JVM runs on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionsError {
    /// `stop` followed by an option.
    #[error("stop takes no option, not '{0}'.")]
    StopTakesNoOption(String),
    /// A piece without `=` and no value before it to continue.
    #[error("'{0}' is not an option: write key=value (sample,config=FILE,results-path=DIR).")]
    NotAnOption(String),
    /// `sampler=` with another value than the choices.
    #[error("sampler={0} is not a sampler: write sampler=auto, signals or jvmti.")]
    UnknownSampler(String),
    /// `from-record=` with another value than `yes`.
    #[error("from-record={0}: only from-record=yes is known (joularcode-bpf record gives it).")]
    NotFromRecord(String),
    /// A key of `joularcodejava.properties` given a value that cannot be used.
    #[error(transparent)]
    Setting(#[from] SettingError),
    /// `config=` names no file.
    #[error("config={}: there is no such file. Give the path of a joularcodejava.properties file.", .0.display())]
    NoConfigFile(PathBuf),
    /// The configuration, file and options together, names no power source or format we know.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// Parses the agent's options: `None` when they are not the sampling mode's (the code map's).
pub fn parse(text: &str) -> Option<Result<Command, OptionsError>> {
    let mut pieces = text.split(',');
    match pieces.next()?.trim() {
        "stop" => Some(match pieces.find(|piece| !piece.trim().is_empty()) {
            None => Ok(Command::Stop),
            Some(piece) => Err(OptionsError::StopTakesNoOption(piece.to_owned())),
        }),
        "sample" => Some(parse_sample(pieces).map(Command::Sample)),
        _ => None,
    }
}

/// The `key=value` pieces after `sample`.
fn parse_sample<'a>(pieces: impl Iterator<Item = &'a str>) -> Result<SampleOptions, OptionsError> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for piece in pieces {
        match piece.split_once('=') {
            Some((key, value)) => pairs.push((key.trim().to_owned(), value.to_owned())),
            None => match pairs.last_mut() {
                Some((_, value)) => {
                    value.push(',');
                    value.push_str(piece);
                }
                None if piece.trim().is_empty() => {}
                None => return Err(OptionsError::NotAnOption(piece.to_owned())),
            },
        }
    }
    let mut options = SampleOptions::default();
    for (key, value) in pairs {
        match key.as_str() {
            "config" if value.trim().is_empty() => options.config_file = ConfigFile::Nothing,
            "config" => options.config_file = ConfigFile::Given(PathBuf::from(value)),
            "cycle-log" => options.cycle_log = Some(PathBuf::from(value)),
            "from-record" => match value.trim() {
                "yes" => options.from_record = true,
                other => return Err(OptionsError::NotFromRecord(other.to_owned())),
            },
            "sampler" => {
                options.sampler = match value.trim() {
                    "auto" => SamplerChoice::Auto,
                    "signals" => SamplerChoice::Signals,
                    "jvmti" => SamplerChoice::Jvmti,
                    other => return Err(OptionsError::UnknownSampler(other.to_owned())),
                }
            }
            _ => {
                // Checked now, so that a bad option is the only line said
                Config::default().set_strictly(&key, &value, &Recorded::default())?;
                options.settings.push((key, value));
            }
        }
    }
    Ok(options)
}

impl SampleOptions {
    /// The configuration: the properties file (`config=`, which must exist, else
    /// `joularcodejava.properties` in `working_dir`) read as Joular reads it, then the options
    /// over it, each checked as on `record`'s command line. What the file says goes to `log`.
    pub fn config(&self, working_dir: &Path, log: &dyn Log) -> Result<Config, OptionsError> {
        let mut config = match &self.config_file {
            ConfigFile::Nothing => Config::default(),
            ConfigFile::WorkingFolder => Config::load(None, working_dir, log),
            ConfigFile::Given(file) if working_dir.join(file).is_file() => {
                Config::load(Some(&file.to_string_lossy()), working_dir, log)
            }
            ConfigFile::Given(file) => return Err(OptionsError::NoConfigFile(file.clone())),
        };
        let quiet = Recorded::default();
        let settings_log: &dyn Log = if self.from_record { &quiet } else { log };
        for (key, value) in &self.settings {
            config.set_strictly(key, value, settings_log)?;
        }
        config.check_choices()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use joularcode_core::config::SourceKind;

    fn sample(text: &str) -> SampleOptions {
        match parse(text) {
            Some(Ok(Command::Sample(options))) => options,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn code_map_options_are_not_the_sampling_modes() {
        assert_eq!(parse("dir=/tmp,perfmap=no"), None);
        assert_eq!(parse(""), None);
        assert_eq!(parse("stop"), Some(Ok(Command::Stop)));
        assert!(parse("stop,now").unwrap().is_err());
    }

    #[test]
    fn keys_values_and_continued_values() {
        let options = sample(
            "sample,config=/etc/j.properties,methods-filtering-prefix=com.a,com.b,results-path=out,sampler=jvmti,cycle-log=/tmp/c",
        );
        assert_eq!(
            options.config_file,
            ConfigFile::Given(PathBuf::from("/etc/j.properties"))
        );
        assert_eq!(sample("sample,config=").config_file, ConfigFile::Nothing);
        assert_eq!(
            options.settings,
            [
                (
                    "methods-filtering-prefix".to_owned(),
                    "com.a,com.b".to_owned()
                ),
                ("results-path".to_owned(), "out".to_owned())
            ]
        );
        assert_eq!(options.sampler, SamplerChoice::Jvmti);
        assert_eq!(options.cycle_log.as_deref(), Some(Path::new("/tmp/c")));
        assert_eq!(sample("sample"), SampleOptions::default());
        assert_eq!(sample("sample,"), SampleOptions::default());
    }

    #[test]
    fn bad_options_are_one_line_that_says_what_to_write() {
        let error = |text: &str| match parse(text) {
            Some(Err(error)) => error.to_string(),
            other => panic!("{text}: {other:?}"),
        };
        assert!(error("sample,fast").contains("write key=value"));
        assert!(error("sample,sampler=perf").contains("sampler=auto, signals or jvmti"));
        assert!(error("sample,from-record=true").contains("only from-record=yes"));
        for (text, expected) in [
            (
                "sample,stack-monitoring-sample-rate=fast",
                "stack-monitoring-sample-rate must be a number of milliseconds from 1 to 1000, not 'fast'.",
            ),
            ("sample,colour=red", "colour red: Unknown setting 'colour'."),
            (
                "sample,power-source-type=solar",
                "power-source-type solar: Unknown power-source-type 'solar'.",
            ),
        ] {
            assert!(error(text).starts_with(expected), "{text}: {}", error(text));
        }
    }

    #[test]
    fn settings_are_checked_as_on_the_command_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("joularcodejava.properties"),
            "results-path=from-file\nstack-monitoring-sample-rate=20\n",
        )
        .unwrap();
        let log = Recorded::default();
        let config = sample("sample,power-source-type=estimate,jvm-threads=spread")
            .config(dir.path(), &log)
            .unwrap();
        assert_eq!(config.results_path, Path::new("from-file"));
        let alone = sample("sample,config=").config(dir.path(), &log).unwrap();
        assert_eq!(alone, Config::default(), "no file read");
        // A low rate is a warning, unless record said it
        let said = |options: &str| {
            let log = Recorded::default();
            sample(options).config(dir.path(), &log).unwrap();
            log.messages().len()
        };
        assert_eq!(said("sample,config=,stack-monitoring-sample-rate=2"), 1);
        assert_eq!(
            said("sample,config=,stack-monitoring-sample-rate=2,from-record=yes"),
            0
        );
        assert_eq!(config.sample_rate_ms, 20);
        assert_eq!(config.source_kind(), Ok(SourceKind::Estimate));
        let error = sample("sample,config=missing.properties")
            .config(dir.path(), &log)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("config=missing.properties: there is no such file."),
            "{error}"
        );
        std::fs::write(
            dir.path().join("joularcodejava.properties"),
            "power-source-type=wind\n",
        )
        .unwrap();
        let error = sample("sample")
            .config(dir.path(), &log)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("Unknown power-source-type 'wind'"),
            "{error}"
        );
    }
}

//! The keys of `joularcodejava.properties` as long options of `record` (`--results-path DIR`...),
//! and the configuration they give: the file read by Joular's rules ([`Config::load`]), then each
//! option applied over it with the same validation ([`Config::set`]).
//!
//! Unlike Joular's agent, which falls back to a default and goes on, a value given on the command
//! line that cannot be used is an error: the user is there to fix it.

use std::path::{Path, PathBuf};

use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};
use joularcode_core::config::{Config, ConfigError, FileError, SettingError, KEYS};
use joularcode_core::log::Log;

/// The values given on the command line for the keys of [`KEYS`], in the order of [`KEYS`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigOptions {
    /// `(key, value)` for each key given.
    pub values: Vec<(&'static str, String)>,
}

impl FromArgMatches for ConfigOptions {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let values = KEYS
            .iter()
            .filter_map(|&(key, _)| {
                matches
                    .get_one::<String>(key)
                    .map(|value| (key, value.clone()))
            })
            .collect();
        Ok(ConfigOptions { values })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = ConfigOptions::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Args for ConfigOptions {
    fn augment_args(command: Command) -> Command {
        command.args(KEYS.iter().map(|&(key, help)| {
            Arg::new(key)
                .long(key)
                .value_name("VALUE")
                .help(help)
                .help_heading("Settings of joularcodejava.properties (override the file)")
                // so that `--stack-monitoring-sample-rate -5` reaches the validation below
                .allow_hyphen_values(true)
                // the last one given wins, as in the file
                .overrides_with(key)
        }))
    }

    fn augment_args_for_update(command: Command) -> Command {
        ConfigOptions::augment_args(command)
    }
}

/// Why the configuration of a run cannot be used: one line that names the option or key and
/// the value.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    /// The file of `--config` is not a regular file that exists.
    #[error(
        "--config {}: {what}. Give the path of a joularcodejava.properties file, or leave \
         --config out to read ./joularcodejava.properties.",
        path.display()
    )]
    ConfigFile {
        /// The file's path (made absolute).
        path: PathBuf,
        /// What it is instead.
        what: &'static str,
    },
    /// The file of `--config` cannot be read: larger than 1 MiB, a malformed escape, an error
    /// of the system.
    #[error(
        "--config {}: {reason} Give the path of a readable joularcodejava.properties file of at \
         most 1 MiB, or leave --config out to read ./joularcodejava.properties.",
        path.display()
    )]
    UnreadableConfig {
        /// The file's path (made absolute).
        path: PathBuf,
        /// Why it cannot be read.
        reason: FileError,
    },
    /// A value given as an option is refused ([`Config::set_strictly`]).
    #[error("--{0}")]
    Setting(#[from] SettingError),
    /// The file or the options give a `power-source-type` or `vm-power-format` that is not one
    /// of the choices.
    #[error("{0}")]
    Config(#[from] ConfigError),
}

/// The configuration of a run: `config_file` (`--config`), else `joularcodejava.properties` in
/// `working_dir`, read as Joular reads it (what it says goes to `log`), then `options` over it.
///
/// A `--config` file that does not exist or cannot be read, a value that [`Config::set`] refuses or replaces by its
/// default, and a `power-source-type` or `vm-power-format` that is not one of the choices (from
/// the file too) are errors: one line that names the option or key and the value.
pub fn load(
    config_file: Option<&Path>,
    options: &ConfigOptions,
    working_dir: &Path,
    log: &dyn Log,
) -> Result<Config, OptionsError> {
    let mut config = match config_file {
        Some(file) => {
            let absolute = working_dir.join(file);
            let what = match absolute.metadata() {
                Ok(meta) if meta.is_file() => None,
                Ok(meta) if meta.is_dir() => Some("it is a directory"),
                Ok(_) => Some("it is not a regular file"),
                Err(_) => Some("there is no such file"),
            };
            if let Some(what) = what {
                return Err(OptionsError::ConfigFile {
                    path: absolute,
                    what,
                });
            }
            Config::load_strictly(&absolute, log).map_err(|reason| {
                OptionsError::UnreadableConfig {
                    path: absolute,
                    reason,
                }
            })?
        }
        None => Config::load(None, working_dir, log),
    };
    for (key, value) in &options.values {
        config.set_strictly(key, value, log)?;
    }
    config.check_choices()?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use joularcode_core::config::{JvmThreads, SourceKind};
    use joularcode_core::log::{Level, Recorded};

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        options: ConfigOptions,
    }

    fn options(args: &[&str]) -> ConfigOptions {
        Cli::try_parse_from(std::iter::once("test").chain(args.iter().copied()))
            .expect("valid options")
            .options
    }

    fn folder() -> tempfile::TempDir {
        tempfile::tempdir().expect("a temporary folder")
    }

    #[test]
    fn every_key_is_an_option() {
        let mut args = Vec::new();
        for (key, _) in KEYS {
            args.push(format!("--{key}"));
            args.push("x".to_owned());
        }
        let parsed = Cli::try_parse_from(std::iter::once("test".to_owned()).chain(args))
            .expect("every key parses");
        let keys: Vec<&str> = parsed.options.values.iter().map(|(k, _)| *k).collect();
        let expected: Vec<&str> = KEYS.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, expected);
    }

    #[test]
    fn the_last_value_given_wins() {
        let given = options(&["--results-path", "a", "--results-path", "b"]);
        assert_eq!(given.values, [("results-path", "b".to_owned())]);
    }

    #[test]
    fn options_override_the_file() {
        let dir = folder();
        std::fs::write(
            dir.path().join("joularcodejava.properties"),
            "results-path=from-file\nstack-monitoring-sample-rate=20\nmethods-filtering-prefix=a.b\n",
        )
        .unwrap();
        let log = Recorded::default();
        let config = load(
            None,
            &options(&[
                "--results-path",
                "from-options",
                "--jvm-threads",
                "SPREAD",
                "--power-source-type",
                "estimate",
            ]),
            dir.path(),
            &log,
        )
        .expect("valid");
        assert_eq!(config.results_path, PathBuf::from("from-options"));
        assert_eq!(config.sample_rate_ms, 20);
        assert_eq!(config.methods_filtering_prefix, vec!["a.b".to_owned()]);
        assert_eq!(config.jvm_threads, JvmThreads::Spread);
        assert_eq!(config.source_kind(), Ok(SourceKind::Estimate));
        assert!(log.messages().is_empty(), "{:?}", log.messages());
    }

    #[test]
    fn an_explicit_file_is_read_and_must_exist() {
        let dir = folder();
        std::fs::write(
            dir.path().join("mine.properties"),
            "vm-power-format=watts\n",
        )
        .unwrap();
        let log = Recorded::default();
        let config = load(
            Some(Path::new("mine.properties")),
            &ConfigOptions::default(),
            dir.path(),
            &log,
        )
        .expect("valid");
        assert_eq!(config.vm_power_format, "watts");
        let error = load(
            Some(Path::new("missing.properties")),
            &ConfigOptions::default(),
            dir.path(),
            &log,
        )
        .expect_err("missing")
        .to_string();
        assert!(
            error.starts_with("--config ") && error.contains("missing.properties"),
            "{error}"
        );
    }

    #[test]
    fn an_explicit_file_that_cannot_be_read_is_refused_not_replaced_by_the_defaults() {
        let dir = folder();
        let big = "results-path=mine\n".repeat(70_000);
        assert!(big.len() > 1 << 20);
        std::fs::write(dir.path().join("big.properties"), big).unwrap();
        std::fs::write(dir.path().join("bad.properties"), "a=\\u12\n").unwrap();
        for (file, reason) in [
            ("big.properties", "larger than 1048576 bytes"),
            ("bad.properties", "\\u"),
        ] {
            let log = Recorded::default();
            let error = load(
                Some(Path::new(file)),
                &ConfigOptions::default(),
                dir.path(),
                &log,
            )
            .expect_err(file)
            .to_string();
            assert!(
                error.starts_with(&format!("--config {}", dir.path().join(file).display()))
                    && error.contains(reason)
                    && error.contains("Give the path")
                    && !error.contains('\n'),
                "{error}"
            );
            assert!(log.messages().is_empty(), "{:?}", log.messages());
        }
    }

    #[test]
    fn invalid_values_are_errors_that_name_the_option() {
        let dir = folder();
        let log = Recorded::default();
        for (args, expected) in [
            (
                &["--stack-monitoring-sample-rate", "fast"][..],
                "--stack-monitoring-sample-rate must be a number of milliseconds from 1 to 1000, not 'fast'.",
            ),
            (
                &["--stack-monitoring-sample-rate", "-5"],
                "--stack-monitoring-sample-rate must be a number of milliseconds from 1 to 1000, not '-5'.",
            ),
            (
                &["--jvm-threads", "some"],
                "--jvm-threads must be own or spread, not 'some'.",
            ),
            (
                &["--estimate-max-watts-per-cpu", "lots"],
                "--estimate-max-watts-per-cpu must be a number of watts of 0 or more, not 'lots'.",
            ),
            (
                &["--power-source-type", "solar"],
                "--power-source-type solar: Unknown power-source-type 'solar'. Use auto, rapl, ringbuffer, vm, estimate, energy-meter or powermetrics.",
            ),
            (
                &["--vm-power-format", "json"],
                "--vm-power-format json: Unknown vm-power-format 'json'. Use powerjoular or watts.",
            ),
        ] {
            let error =
                load(None, &options(args), dir.path(), &log).expect_err("an invalid value");
            assert_eq!(error.to_string(), expected);
        }
    }

    #[test]
    fn a_low_rate_is_kept_with_its_warning_and_blank_means_default() {
        let dir = folder();
        let log = Recorded::default();
        let config = load(
            None,
            &options(&["--stack-monitoring-sample-rate", "2", "--results-path", " "]),
            dir.path(),
            &log,
        )
        .expect("valid");
        assert_eq!(config.sample_rate_ms, 2);
        assert_eq!(config.results_path, Config::default().results_path);
        let messages = log.messages();
        assert!(messages
            .iter()
            .any(|(level, m)| *level == Level::Warning && m.contains("is 2 ms")));
    }

    #[test]
    fn an_unknown_source_in_the_file_is_an_error_too() {
        let dir = folder();
        std::fs::write(
            dir.path().join("joularcodejava.properties"),
            "power-source-type=wind\n",
        )
        .unwrap();
        let error = load(
            None,
            &ConfigOptions::default(),
            dir.path(),
            &Recorded::default(),
        )
        .expect_err("unknown source")
        .to_string();
        assert!(
            error.contains("Unknown power-source-type 'wind'"),
            "{error}"
        );
    }
}

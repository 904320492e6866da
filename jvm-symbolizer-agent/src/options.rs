//! The agent's options: `-agentpath:libjvm_symbolizer_agent.so=dir=/tmp,perfmap=no`.

use std::path::PathBuf;

/// What the agent writes, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The folder of the code map and the perf map, as the JVM sees it (default `/tmp`).
    pub dir: PathBuf,
    /// Also write the standard perf map `perf-<pid>.map` (default yes).
    pub perf_map: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            dir: PathBuf::from("/tmp"),
            perf_map: true,
        }
    }
}

/// An option the code map's agent cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionError {
    /// A piece without `=`.
    #[error("agent option '{0}' has no value: write key=value (dir=/tmp,perfmap=no)")]
    NoValue(String),
    /// `dir=` with a relative path.
    #[error("agent option dir={0} is not an absolute folder: write dir=/tmp")]
    RelativeDir(String),
    /// `perfmap=` with neither yes nor no.
    #[error("agent option perfmap={0} is neither yes nor no")]
    PerfMap(String),
    /// A key that is not an option.
    #[error("unknown agent option '{0}': the options are dir=<folder> and perfmap=yes|no")]
    Unknown(String),
}

impl Options {
    /// Parses `key=value` pairs separated by commas; keys: `dir`, `perfmap` (`yes`/`no`).
    pub fn parse(text: &str) -> Result<Options, OptionError> {
        let mut options = Options::default();
        for pair in text.split(',').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| OptionError::NoValue(pair.to_owned()))?;
            match key {
                "dir" if value.starts_with('/') => options.dir = PathBuf::from(value),
                "dir" => return Err(OptionError::RelativeDir(value.to_owned())),
                "perfmap" => {
                    options.perf_map = match value {
                        "yes" | "true" => true,
                        "no" | "false" => false,
                        _ => return Err(OptionError::PerfMap(value.to_owned())),
                    }
                }
                _ => return Err(OptionError::Unknown(key.to_owned())),
            }
        }
        Ok(options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_values() {
        assert_eq!(Options::parse("").unwrap(), Options::default());
        let options = Options::parse("dir=/var/tmp,perfmap=no").unwrap();
        assert_eq!(options.dir, PathBuf::from("/var/tmp"));
        assert!(!options.perf_map);
    }

    #[test]
    fn bad_options_say_what_to_write() {
        let error = |text| Options::parse(text).unwrap_err().to_string();
        assert!(error("dir=tmp").contains("dir=/tmp"));
        assert!(error("perfmap=maybe").contains("yes nor no"));
        assert!(error("colour=red").contains("unknown"));
        assert!(error("dir").contains("key=value"));
    }
}

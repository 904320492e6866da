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

impl Options {
    /// Parses `key=value` pairs separated by commas; keys: `dir`, `perfmap` (`yes`/`no`).
    pub fn parse(text: &str) -> Result<Options, String> {
        let mut options = Options::default();
        for pair in text.split(',').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').ok_or_else(|| {
                format!("agent option '{pair}' has no value: write key=value (dir=/tmp,perfmap=no)")
            })?;
            match key {
                "dir" if value.starts_with('/') => options.dir = PathBuf::from(value),
                "dir" => {
                    return Err(format!(
                        "agent option dir={value} is not an absolute folder: write dir=/tmp"
                    ))
                }
                "perfmap" => {
                    options.perf_map = match value {
                        "yes" | "true" => true,
                        "no" | "false" => false,
                        _ => {
                            return Err(format!(
                                "agent option perfmap={value} is neither yes nor no"
                            ))
                        }
                    }
                }
                _ => {
                    return Err(format!(
                    "unknown agent option '{key}': the options are dir=<folder> and perfmap=yes|no"
                ))
                }
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
        assert!(Options::parse("dir=tmp").unwrap_err().contains("dir=/tmp"));
        assert!(Options::parse("perfmap=maybe")
            .unwrap_err()
            .contains("yes nor no"));
        assert!(Options::parse("colour=red")
            .unwrap_err()
            .contains("unknown"));
        assert!(Options::parse("dir").unwrap_err().contains("key=value"));
    }
}

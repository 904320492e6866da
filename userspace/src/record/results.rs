//! Where each JVM's results go. With one JVM (one `--pid`, or the first JVM a launched command
//! starts), the two CSV files are in `results-path` itself, as Joular Code for Java writes them.
//! With several (`--all`, several `--pid`, or a command that starts more than one JVM), each JVM
//! gets its own folder in `results-path`, named by its pid and main class:
//! `12345-com.example.Main`. With `carbon-intensity`, each folder also gets the intensity of
//! each cycle (`carbon-intensity.csv`, [`CarbonWriter`]).
//!
//! Nothing is created before the first JVM is there, so a run refused at start leaves nothing
//! behind; the path is checked at start so that a bad one is refused at once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use joularcode_core::attribution::CycleResult;
use joularcode_core::branch::Branches;
use joularcode_core::carbon::Intensity;
use joularcode_core::log::Log;
use joularcode_core::output::carbon::CarbonWriter;
use joularcode_core::output::csv::{CsvWriter, ALL_FILE, APP_FILE};
use joularcode_core::output::losses::Lost;
use joularcode_core::output::path;

/// The longest main class kept in a folder name, in characters.
const MAX_NAME: usize = 120;

/// Why results cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// `results-path` cannot hold them (checked at start); the message says to give another.
    #[error("results-path {}: {source} Set --results-path to another directory.", root.display())]
    Refused {
        /// `results-path`.
        root: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A JVM's folder or files cannot be created (the message names the folder, and the fix).
    #[error("{0}")]
    Open(#[from] std::io::Error),
}

/// The results of every JVM of a run.
#[derive(Debug)]
pub struct Results {
    root: PathBuf,
    per_jvm: bool,
    open: BTreeMap<u32, Output>,
    root_taken: bool,
    /// What the writers already closed could not write.
    lost_closed: Lost,
}

/// One JVM's results folder and its writers.
#[derive(Debug)]
struct Output {
    dir: PathBuf,
    writer: CsvWriter,
    carbon: CarbonWriter,
}

impl Output {
    /// What its writers could not write.
    fn lost(&self) -> Lost {
        let mut lost = self.writer.lost();
        lost += self.carbon.lost();
        lost
    }
}

impl Results {
    /// The results under `root` (`results-path`), each JVM in its own folder when `per_jvm`,
    /// else the first in `root` itself. Refuses, without creating anything, a `root` with a
    /// symbolic link or something else than a directory on its path ([`path::check_dir`]), and
    /// CSV files there that could not be appended to ([`path::check_file`]: a link, a FIFO...).
    pub fn new(root: &Path, per_jvm: bool) -> Result<Results, ResultsError> {
        let refused = |source| ResultsError::Refused {
            root: root.to_path_buf(),
            source,
        };
        path::check_dir(root).map_err(refused)?;
        if !per_jvm {
            for file in [ALL_FILE, APP_FILE] {
                path::check_file(&root.join(file)).map_err(refused)?;
            }
        }
        Ok(Results {
            root: root.to_path_buf(),
            per_jvm,
            open: BTreeMap::new(),
            root_taken: false,
            lost_closed: Lost::default(),
        })
    }

    /// Whether each JVM gets its own folder.
    pub fn per_jvm(&self) -> bool {
        self.per_jvm
    }

    /// Opens the results of JVM `pid` (creating its folder and both files) and returns where
    /// they go. A JVM already open keeps its folder.
    pub fn open(&mut self, pid: u32, main_class: &str) -> Result<&Path, ResultsError> {
        if !self.open.contains_key(&pid) {
            let in_root = !self.per_jvm && !self.root_taken;
            let dir = if in_root {
                self.root.clone()
            } else {
                self.root.join(folder_name(pid, main_class))
            };
            let writer = CsvWriter::open(&dir)?;
            self.root_taken |= in_root;
            let carbon = CarbonWriter::new(&dir);
            self.open.insert(
                pid,
                Output {
                    dir,
                    writer,
                    carbon,
                },
            );
        }
        Ok(&self.open[&pid].dir)
    }

    /// Appends one cycle's rows of JVM `pid`, and the carbon intensity in force for the cycle
    /// if there is one, if its results are open.
    pub fn write(
        &mut self,
        pid: u32,
        timestamp_ms: i64,
        result: &CycleResult,
        branches: &Branches,
        carbon: Option<Intensity>,
        log: &dyn Log,
    ) {
        if let Some(output) = self.open.get_mut(&pid) {
            output.writer.write(timestamp_ms, result, branches, log);
            if let Some(intensity) = carbon {
                output
                    .carbon
                    .write(timestamp_ms, result.interval, intensity, log);
            }
        }
    }

    /// Closes the files of JVM `pid` (it ended).
    pub fn close(&mut self, pid: u32) {
        if let Some(mut output) = self.open.remove(&pid) {
            output.writer.close();
            self.lost_closed += output.lost();
        }
    }

    /// The rows that could not be written so far, all JVMs together.
    pub fn lost(&self) -> Lost {
        self.open
            .values()
            .fold(self.lost_closed, |mut sum, output| {
                sum += output.lost();
                sum
            })
    }
}

/// The folder of one JVM among several: `<pid>-<main class>`, the main class as
/// [`crate::session::main_class`] gives it (already fit for a file name), cut to a length every
/// file system takes.
pub fn folder_name(pid: u32, main_class: &str) -> String {
    let cut = main_class
        .char_indices()
        .nth(MAX_NAME)
        .map_or(main_class, |(at, _)| &main_class[..at]);
    format!("{pid}-{cut}")
}

/// Results folders written as `record` writes them, for the tests of what reads them.
#[cfg(test)]
pub(crate) mod written {
    use super::*;
    use joularcode_core::attribution::{CycleThreads, MachineLoad};
    use joularcode_core::config::Config;
    use joularcode_core::cycle::{Engine, JvmInput, Measures};
    use joularcode_core::energy::{Interval, Power};
    use joularcode_core::log::Recorded;
    use joularcode_core::machine::MachineMeter;
    use joularcode_core::power::{PowerError, PowerSource};

    /// The engine's power source and machine meter, never asked: each cycle's measures are
    /// given.
    struct Given;

    impl PowerSource for Given {
        fn watts(&mut self) -> Result<f64, PowerError> {
            Err(PowerError::new("given by the test"))
        }

        fn describe(&self) -> String {
            "given".into()
        }
    }

    impl MachineMeter for Given {
        fn since_last(&mut self) -> MachineLoad {
            MachineLoad::BusyCpuNs(None)
        }
    }

    /// One cycle of a run: it ends at `end_ms` (Unix ms), lasts `seconds`, the CPU draws
    /// `watts`, and the JVM's one thread, busy the whole cycle and the machine's only load, is
    /// sampled in each branch (frames joined by `;`) as often as given; `carbon` is the carbon
    /// intensity in force.
    pub(crate) struct RunCycle<'a> {
        pub end_ms: i64,
        pub seconds: f64,
        pub watts: f64,
        pub samples: &'a [(&'a str, u64)],
        pub carbon: Option<Intensity>,
    }

    /// Writes the results of one JVM (pid 1) into `dir` through core's cycle engine and the CSV
    /// writer, as `record` does.
    pub(crate) fn write_run(dir: &Path, cycles: &[RunCycle]) {
        let config = Config {
            methods_filtering_prefix: vec!["work.".into()],
            ..Config::default()
        };
        let mut engine = Engine::start(Box::new(Given), &config, Box::new(Given), 1, 0);
        let mut branches = Branches::new(&config.methods_filtering_prefix);
        let mut results = Results::new(dir, false).unwrap();
        results.open(1, "work.Bench").unwrap();
        let log = Recorded::default();
        for cycle in cycles {
            let interval = Interval::from_ns((cycle.seconds * 1e9).round() as u64);
            let mut threads = CycleThreads::default();
            threads.add_cpu(7, interval.ns());
            for &(branch, n) in cycle.samples {
                let frames: Vec<_> = branch
                    .split(';')
                    .map(|frame| {
                        let (class, method) = frame.rsplit_once('.').unwrap();
                        branches.frame(class, method)
                    })
                    .collect();
                let id = branches.branch(&frames);
                threads.count(7, id, n);
            }
            let measures = Measures {
                timestamp_ms: cycle.end_ms,
                interval,
                power: Power::from_watts(cycle.watts),
                machine: MachineLoad::BusyCpuNs(Some(interval.ns())),
                carbon: cycle.carbon,
            };
            let input = [JvmInput {
                pid: 1,
                branches: &branches,
                cpu_ns: interval.ns(),
                threads,
            }];
            let result = engine.share(&measures, 0, &input, &log);
            results.write(
                1,
                cycle.end_ms,
                &result.jvms[0].result,
                &branches,
                result.carbon,
                &log,
            );
        }
        results.close(1);
        assert!(log.messages().is_empty(), "{:?}", log.messages());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_names_are_cut() {
        assert_eq!(
            folder_name(12345, "com.example.Main"),
            "12345-com.example.Main"
        );
        assert_eq!(folder_name(7, ".."), "7-..");
        assert_eq!(folder_name(7, &"a".repeat(500)).len(), 2 + MAX_NAME);
    }

    #[test]
    fn the_first_jvm_writes_in_the_root_unless_per_jvm() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("results");
        let mut results = Results::new(&root, false).unwrap();
        assert!(!root.exists(), "nothing is created before a JVM is there");
        assert_eq!(results.open(10, "a.Main").unwrap(), root);
        assert_eq!(results.open(10, "a.Main").unwrap(), root);
        assert_eq!(results.open(11, "b.Main").unwrap(), root.join("11-b.Main"));
        for file in [ALL_FILE, APP_FILE] {
            assert!(root.join(file).is_file() && root.join("11-b.Main").join(file).is_file());
        }
        let mut results = Results::new(&dir.path().join("all"), true).unwrap();
        assert_eq!(
            results.open(10, "a.Main").unwrap(),
            dir.path().join("all/10-a.Main")
        );
    }

    #[test]
    fn a_link_or_a_file_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let error = Results::new(&file, false).unwrap_err();
        assert!(error.to_string().contains("is not a directory"), "{error}");
        let link = dir.path().join("link");
        let target = dir.path().join("target");
        std::fs::create_dir(&target).unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for path in [link.clone(), link.join("sub")] {
            let error = Results::new(&path, false).unwrap_err();
            assert!(error.to_string().contains("is a symbolic link"), "{error}");
        }
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
        std::fs::create_dir(dir.path().join(APP_FILE)).unwrap();
        let error = Results::new(dir.path(), false).unwrap_err();
        assert!(
            error.to_string().contains("is not a regular file"),
            "{error}"
        );
        Results::new(dir.path(), true).expect("per JVM, the root's files are not written");
    }
}

//! Where each JVM's results go. With one JVM (one `--pid`, or the first JVM a launched command
//! starts), the two CSV files are in `results-path` itself, as Joular Code for Java writes them.
//! With several (`--all`, several `--pid`, or a command that starts more than one JVM), each JVM
//! gets its own folder in `results-path`, named by its pid and main class:
//! `12345-com.example.Main`.
//!
//! Nothing is created before the first JVM is there, so a run refused at start leaves nothing
//! behind; the path is checked at start so that a bad one is refused at once.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use joularcode_core::attribution::CycleResult;
use joularcode_core::branch::Branches;
use joularcode_core::log::Log;
use joularcode_core::output::csv::CsvWriter;

/// The most of `/proc/PID/cmdline` read to find the main class.
const MAX_CMDLINE: u64 = 64 * 1024;
/// The longest main class kept in a folder name, in bytes.
const MAX_NAME: usize = 120;

/// Java launcher options that take the next argument as their value.
const OPTIONS_WITH_VALUE: &[&str] = &[
    "-cp",
    "-classpath",
    "--class-path",
    "-p",
    "--module-path",
    "--upgrade-module-path",
    "--add-modules",
    "--limit-modules",
    "--add-reads",
    "--add-exports",
    "--add-opens",
    "--patch-module",
    "--enable-native-access",
];

/// The results of every JVM of a run.
#[derive(Debug)]
pub struct Results {
    root: PathBuf,
    per_jvm: bool,
    open: BTreeMap<u32, Output>,
    root_taken: bool,
}

/// One JVM's results folder and its writer.
#[derive(Debug)]
struct Output {
    dir: PathBuf,
    writer: CsvWriter,
}

impl Results {
    /// The results under `root` (`results-path`), each JVM in its own folder when `per_jvm`,
    /// else the first in `root` itself. Refuses a `root` that is a symbolic link or exists and is
    /// not a directory, without creating anything.
    pub fn new(root: &Path, per_jvm: bool) -> Result<Results, String> {
        if let Ok(meta) = root.symlink_metadata() {
            if meta.file_type().is_symlink() {
                return Err(format!(
                    "results-path {} is a symbolic link, and results are never written through \
                     one. Remove it, or set --results-path to another directory.",
                    root.display()
                ));
            }
            if !meta.is_dir() {
                return Err(format!(
                    "results-path {} is not a directory. Remove it, or set --results-path to \
                     another directory.",
                    root.display()
                ));
            }
        }
        Ok(Results {
            root: root.to_path_buf(),
            per_jvm,
            open: BTreeMap::new(),
            root_taken: false,
        })
    }

    /// Opens the results of JVM `pid` (creating its folder and both files) and returns where
    /// they go. A JVM already open keeps its folder.
    pub fn open(&mut self, pid: u32, main_class: &str) -> Result<&Path, String> {
        if !self.open.contains_key(&pid) {
            let in_root = !self.per_jvm && !self.root_taken;
            let dir = if in_root {
                self.root.clone()
            } else {
                self.root.join(folder_name(pid, main_class))
            };
            let writer = CsvWriter::open(&dir).map_err(|error| error.to_string())?;
            self.root_taken |= in_root;
            self.open.insert(pid, Output { dir, writer });
        }
        Ok(&self.open[&pid].dir)
    }

    /// Appends one cycle's rows of JVM `pid`, if its results are open.
    pub fn write(
        &mut self,
        pid: u32,
        timestamp_ms: i64,
        result: &CycleResult,
        branches: &Branches,
        log: &dyn Log,
    ) {
        if let Some(output) = self.open.get_mut(&pid) {
            output.writer.write(timestamp_ms, result, branches, log);
        }
    }

    /// Closes the files of JVM `pid` (it ended).
    pub fn close(&mut self, pid: u32) {
        if let Some(mut output) = self.open.remove(&pid) {
            output.writer.close();
        }
    }
}

/// The folder of one JVM among several: `<pid>-<main class>`, with every character that is not
/// a letter, a digit, `.`, `_`, `$` or `-` replaced by `_`.
pub fn folder_name(pid: u32, main_class: &str) -> String {
    let mut name: String = main_class
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '$' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    name.truncate(MAX_NAME);
    let name = name.trim_start_matches('.');
    if name.is_empty() {
        pid.to_string()
    } else {
        format!("{pid}-{name}")
    }
}

/// The main class of JVM `pid` from its command line (see [`main_class_of`]), else its process
/// name, else `java`.
pub fn main_class(proc_root: &Path, pid: u32) -> String {
    let dir = proc_root.join(pid.to_string());
    let mut cmdline = Vec::new();
    let read = std::fs::File::open(dir.join("cmdline"))
        .and_then(|file| file.take(MAX_CMDLINE).read_to_end(&mut cmdline));
    read.ok()
        .and_then(|_| main_class_of(&cmdline))
        .or_else(|| {
            std::fs::read_to_string(dir.join("comm"))
                .ok()
                .map(|comm| comm.trim().to_owned())
                .filter(|comm| !comm.is_empty())
        })
        .unwrap_or_else(|| "java".to_owned())
}

/// The main class in a Java launcher's command line (NUL-separated, as `/proc/PID/cmdline`): the
/// first argument after the options, the jar's file name for `-jar`, the class of `-m
/// module/class`, the source file's name in source-file mode.
pub fn main_class_of(cmdline: &[u8]) -> Option<String> {
    let mut args = cmdline
        .split(|&b| b == 0)
        .map(String::from_utf8_lossy)
        .skip(1)
        .filter(|arg| !arg.is_empty());
    while let Some(arg) = args.next() {
        if arg == "-jar" {
            let jar = args.next()?;
            return Some(base_name(&jar).trim_end_matches(".jar").to_owned());
        }
        if arg == "-m" || arg == "--module" {
            let module = args.next()?;
            return Some(module.rsplit('/').next().unwrap_or(&module).to_owned());
        }
        if let Some(module) = arg.strip_prefix("--module=") {
            return Some(module.rsplit('/').next().unwrap_or(module).to_owned());
        }
        if OPTIONS_WITH_VALUE.contains(&arg.as_ref()) {
            args.next();
            continue;
        }
        if arg.starts_with('-') || arg.starts_with('@') {
            continue;
        }
        return Some(base_name(&arg).trim_end_matches(".java").to_owned());
    }
    None
}

/// What follows the last `/`.
fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use joularcode_core::output::csv::{ALL_FILE, APP_FILE};

    fn cmdline(args: &[&str]) -> Vec<u8> {
        args.iter()
            .flat_map(|a| [a.as_bytes(), b"\0"].concat())
            .collect()
    }

    #[test]
    fn the_main_class_is_found_after_the_options() {
        for (args, main) in [
            (
                &["java", "-cp", "a:b", "-Xmx1g", "com.example.Main", "x"][..],
                "com.example.Main",
            ),
            (&["java", "--class-path", "lib", "-Dk=v", "Main"], "Main"),
            (
                &[
                    "java",
                    "-XX:+PreserveFramePointer",
                    "-jar",
                    "/opt/app/server.jar",
                    "--port",
                ],
                "server",
            ),
            (
                &[
                    "java",
                    "--add-opens",
                    "java.base/java.lang=ALL-UNNAMED",
                    "-m",
                    "app/com.example.App",
                ],
                "com.example.App",
            ),
            (&["java", "--module=app/com.example.App"], "com.example.App"),
            (&["java", "@args.txt", "demo/Hello.java"], "Hello"),
        ] {
            assert_eq!(
                main_class_of(&cmdline(args)).as_deref(),
                Some(main),
                "{args:?}"
            );
        }
        assert_eq!(main_class_of(&cmdline(&["java", "-version"])), None);
        assert_eq!(main_class_of(&cmdline(&["java", "-jar"])), None);
        assert_eq!(main_class_of(b""), None);
    }

    #[test]
    fn folder_names_are_safe() {
        assert_eq!(
            folder_name(12345, "com.example.Main"),
            "12345-com.example.Main"
        );
        assert_eq!(folder_name(7, "../../etc/x y"), "7-_.._etc_x_y");
        assert_eq!(folder_name(7, ".."), "7");
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
        assert!(error.contains("is not a directory"), "{error}");
        let link = dir.path().join("link");
        let target = dir.path().join("target");
        std::fs::create_dir(&target).unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let error = Results::new(&link, false).unwrap_err();
        assert!(error.contains("is a symbolic link"), "{error}");
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
    }
}

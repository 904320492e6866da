//! One run of `joularcode-bpf record` in a folder of its own, with the `vm` power source reading
//! that folder's watts file: the results, the cycle log and the command line of the end-to-end
//! tests of `record`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::agent_library;
use crate::results::{cycles, cycles_so_far};

/// The samples a cycle log counts so far.
fn logged_samples(cycle_log: &Path) -> u64 {
    cycles_so_far(cycle_log)
        .iter()
        .filter_map(|cycle| cycle["samples"].as_u64())
        .sum()
}

/// Runs a `record` `command` whose cycle log is `cycle_log` until it has counted `samples`
/// samples, then ends it as Ctrl-C does, and returns its output (its stderr also printed): the
/// samples a test judges do not depend on how loaded the machine is. Panics, saying how many it
/// counted, when `at_most` passes first: a test never judges on fewer samples than it asked for.
pub fn record_until(
    mut command: Command,
    cycle_log: &Path,
    samples: u64,
    at_most: Duration,
) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start joularcode-bpf");
    let start = Instant::now();
    let mut logged = logged_samples(cycle_log);
    let mut ended = None;
    while logged < samples && ended.is_none() && start.elapsed() < at_most {
        std::thread::sleep(Duration::from_millis(250));
        logged = logged_samples(cycle_log);
        ended = child.try_wait().expect("joularcode-bpf's status");
    }
    if ended.is_none() {
        let pid = i32::try_from(child.id()).expect("a pid");
        // SAFETY: kill only sends a signal to the child started above, not yet waited for.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0, "send SIGINT");
    }
    let output = child.wait_with_output().expect("joularcode-bpf ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stderr}");
    assert!(
        logged >= samples,
        "{logged} samples logged of the {samples} awaited (in {at_most:?} at most), {}: {stderr}",
        match ended {
            Some(status) => format!("record ended by itself ({status})"),
            None => "record still ran".to_owned(),
        }
    );
    output
}

/// A folder for one run: the watts file, the results, the cycle log.
pub struct RecordRun {
    /// The folder (the run's working directory).
    pub dir: tempfile::TempDir,
    binary: PathBuf,
}

impl RecordRun {
    /// A folder whose watts file holds `watts`, for runs of the joularcode-bpf at `binary`
    /// (`env!("CARGO_BIN_EXE_joularcode-bpf")`).
    pub fn new(binary: &Path, watts: &str) -> RecordRun {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let run = RecordRun {
            dir,
            binary: binary.to_path_buf(),
        };
        run.set_watts(watts);
        run
    }

    /// Replaces the watts file, at once (a rename).
    pub fn set_watts(&self, text: &str) {
        let temp = self.dir.path().join("watts.new");
        std::fs::write(&temp, format!("{text}\n")).expect("the watts file");
        std::fs::rename(&temp, self.watts()).expect("the watts file");
    }

    /// The watts file.
    pub fn watts(&self) -> PathBuf {
        self.dir.path().join("watts")
    }

    /// The results folder.
    pub fn results(&self) -> PathBuf {
        self.dir.path().join("results")
    }

    /// The cycle log.
    pub fn cycle_log(&self) -> PathBuf {
        self.dir.path().join("cycles.jsonl")
    }

    /// `joularcode-bpf record` with the vm source reading the watts file, and the agent library,
    /// in this folder, then `args`.
    pub fn bare(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .current_dir(self.dir.path())
            .arg("record")
            .args(["--power-source-type", "vm", "--vm-power-format", "watts"])
            .arg("--vm-power-file")
            .arg(self.watts())
            .arg("--agent-path")
            .arg(agent_library())
            .args(args);
        command
    }

    /// [`RecordRun::bare`] with the results and the cycle log in this folder, then `args`.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = self.bare(&[]);
        command
            .arg("--results-path")
            .arg(self.results())
            .arg("--cycle-log")
            .arg(self.cycle_log())
            .args(args);
        command
    }

    /// The cycle log of a run that has ended ([`cycles`]).
    pub fn cycles(&self) -> Vec<serde_json::Value> {
        cycles(&self.cycle_log())
    }

    /// The cycle log while the run goes on ([`cycles_so_far`]).
    pub fn cycles_so_far(&self) -> Vec<serde_json::Value> {
        cycles_so_far(&self.cycle_log())
    }

    /// Waits until the cycle log holds `count` cycles (the lines of a cycle, one per JVM, share
    /// its end), and returns its lines; panics, saying how many it holds, when `at_most` passes
    /// first.
    pub fn wait_for_cycles(&self, count: usize, at_most: Duration) -> Vec<serde_json::Value> {
        let start = Instant::now();
        loop {
            let lines = self.cycles_so_far();
            let cycles = lines
                .iter()
                .map(|line| line["timestamp_ms"].as_u64())
                .collect::<BTreeSet<_>>()
                .len();
            if cycles >= count {
                return lines;
            }
            assert!(
                start.elapsed() < at_most,
                "{cycles} cycles logged of the {count} awaited, in {at_most:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

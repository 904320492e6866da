//! What an unprivileged user can try against a profiler that runs as root (docs/security.md),
//! each as it was seen: the test makes a user (`useradd`), runs its JVMs as that user, plants what
//! that user could plant in /tmp or its own folders, and checks that `record` neither hangs, nor
//! misleads, nor writes or reads where it should not. They need root (the BPF sampler, the user)
//! and the JDKs of scripts/setup.sh, and run one at a time.
//!
//! `JOULARCODE_BPF_BIN=<an older joularcode-bpf>` runs them against that build instead: each
//! fails on a build from before the rules of docs/security.md.

mod attach;
mod code_maps;
mod inputs;
mod jvms;
mod lease;
mod names;
mod signals_and_outputs;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use joularcode_testkit::host::{Tmpfs, User};
use joularcode_testkit::profiler::{java_command, with_command};
use joularcode_testkit::record_run::RecordRun;
use joularcode_testkit::{jdk, one_at_a_time, one_error_line, processes_with, Jvm};

/// How long `record` may take beyond its `--duration` before it is taken for hung.
const HANG: Duration = Duration::from_secs(60);

fn serial() -> std::sync::MutexGuard<'static, ()> {
    one_at_a_time("the safety tests make a user and load the BPF sampler")
}

/// How a run of `record` went.
struct Finished {
    status: ExitStatus,
    stderr: String,
    /// The most memory record held (VmHWM), in KiB.
    peak_rss_kib: u64,
    /// Its CPU time (user + system), in seconds.
    cpu_s: f64,
    /// Its wall time.
    wall: Duration,
}

/// The profiler under test: `JOULARCODE_BPF_BIN`, else this build's.
fn binary() -> PathBuf {
    std::env::var_os("JOULARCODE_BPF_BIN").map_or_else(
        || env!("CARGO_BIN_EXE_joularcode-bpf").into(),
        PathBuf::from,
    )
}

/// A folder for one run of `record` ([`binary`]), at 100 W.
fn new_run() -> RecordRun {
    RecordRun::new(&binary(), "100")
}

/// Runs `command` to its end, calling `during` with the time elapsed and its pid every 100 ms
/// meanwhile; kills it and fails if it has not ended `HANG` after `expected`.
fn watch(
    mut command: Command,
    expected: Duration,
    mut during: impl FnMut(Duration, u32),
) -> Finished {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start joularcode-bpf");
    let mut pipe = child.stderr.take().expect("piped stderr");
    let (sender, stderr) = std::sync::mpsc::channel();
    // A command that outlives record would hold the pipe open: its text is waited for 5 s at
    // most after record ends.
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        let _ = sender.send(bytes);
    });
    let start = Instant::now();
    let (mut peak_rss_kib, mut cpu_s) = (0, 0.0);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for joularcode-bpf") {
            break status;
        }
        if let Some((peak, cpu)) = usage(child.id()) {
            (peak_rss_kib, cpu_s) = (peak, cpu);
        }
        if start.elapsed() > expected + HANG {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "joularcode-bpf hangs: still running {:?} after it started",
                start.elapsed()
            );
        }
        during(start.elapsed(), child.id());
        std::thread::sleep(Duration::from_millis(100));
    };
    let stderr = stderr
        .recv_timeout(Duration::from_secs(5))
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_else(|_| "(stderr held open by a process record left behind)".into());
    eprintln!("{}", stderr.chars().take(20_000).collect::<String>());
    Finished {
        status,
        stderr,
        peak_rss_kib,
        cpu_s,
        wall: start.elapsed(),
    }
}

/// Ends record (process `pid`) as Ctrl-C does: a test that has seen what it waited for stops
/// waiting.
fn interrupt(pid: u32) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).expect("a pid"));
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
}

/// The peak memory (VmHWM, KiB) and CPU time (s) of process `pid`, while it runs.
fn usage(pid: u32) -> Option<(u64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let peak = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches(" kB")
        .parse()
        .ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(") ")?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some((peak, ticks as f64 / 100.0))
}

/// A busy JVM (JDK 17) run by `user` in its folder.
fn user_jvm(user: &User, main_class: &str, args: &[&str]) -> Jvm {
    let mut command = Jvm::command(&jdk(17), &[], main_class, args);
    user.run_as(&mut command);
    Jvm::spawn(command)
}

/// The code map the agent writes for JVM `pid` (in this mount namespace's /tmp).
fn code_map(pid: u32) -> PathBuf {
    PathBuf::from(format!("/tmp/joularcode-{pid}.map"))
}

/// Whether `path` is there as a regular file (not following a link).
fn is_regular(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_file())
}

/// Removes what a test left at `path`, whatever it is.
fn clear(path: &Path) {
    let _ = std::fs::remove_file(path);
}

/// Whether process `pid` maps the symbolizer agent of the profiler under test (the one beside
/// [`binary`]: another profiler of the machine, such as a host daemon, may load its own).
fn maps_agent(pid: u32) -> bool {
    let agent = binary().with_file_name("libjvm_symbolizer_agent.so");
    let agent = agent.to_str().expect("a UTF-8 path");
    std::fs::read_to_string(format!("/proc/{pid}/maps")).is_ok_and(|maps| maps.contains(agent))
}

/// Whether process `pid` maps a symbolizer agent other than the one of the profiler under test
/// (another profiler of the machine attached it).
fn maps_another_agent(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .is_ok_and(|maps| maps.contains("libjvm_symbolizer_agent") && !maps_agent(pid))
}

/// A marker no other process of the machine has in its command line: a busy JVM's duration.
fn marker() -> String {
    format!("{}", 800_000 + std::process::id())
}

/// Runs `command`, which must be refused before it launches anything, with one line containing
/// `expected`; returns its stderr.
fn assert_refused_before_launch(command: &mut Command, expected: &str, launched: &Path) -> String {
    let output = command
        .stdin(Stdio::null())
        .output()
        .expect("run joularcode-bpf");
    let stderr = one_error_line(&output, expected);
    assert!(!launched.exists(), "the command was launched: {stderr}");
    stderr
}

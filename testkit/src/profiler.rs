//! Running `joularcode-bpf stacks` as a user does, and reading its folded stacks.
//!
//! The binary is the one Cargo built for the calling test (`env!("CARGO_BIN_EXE_joularcode-bpf")`
//! in the tests of the userspace crate).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::{agent_library, bpf_programs_of, target_dir, workload_classes, Jdk};

/// What a run of `joularcode-bpf stacks` gave.
#[derive(Debug)]
pub struct StacksRun {
    /// The folded stacks: (frames joined by `;`, samples).
    pub folded: Vec<(String, u64)>,
    /// Its standard output (a launched command's goes there).
    pub stdout: String,
    /// Its standard error (its messages).
    pub stderr: String,
    /// Its exit code.
    pub code: Option<i32>,
}

impl StacksRun {
    /// Samples of the stacks that start with `prefix`.
    pub fn samples(&self, prefix: &str) -> u64 {
        self.samples_where(|stack| stack.starts_with(prefix))
    }

    /// Samples of the stacks for which `keep` holds.
    pub fn samples_where(&self, keep: impl Fn(&str) -> bool) -> u64 {
        self.folded
            .iter()
            .filter(|(stack, _)| keep(stack))
            .map(|(_, count)| count)
            .sum()
    }

    /// Every sample.
    pub fn total(&self) -> u64 {
        self.samples_where(|_| true)
    }

    /// The stderr lines that contain `text`.
    pub fn said(&self, text: &str) -> usize {
        self.stderr
            .lines()
            .filter(|line| line.contains(text))
            .count()
    }
}

/// Runs `<profiler> stacks --output <file> --rate <rate_hz> ARGS` (the agent library built first,
/// beside the binary), the stacks written to a file, and reads them back.
pub fn run_stacks(profiler: &Path, rate_hz: u64, args: &[&str]) -> StacksRun {
    let output = output_file();
    let result = stacks_command(profiler, rate_hz, &output, args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", profiler.display()));
    read_run(&output, result)
}

/// How [`run_stacks_until`] ends a run once it has what it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// As Ctrl-C does: stacks stops sampling and writes what it has (a run with `--pid`, `--all`).
    Interrupt,
    /// The standard input of stacks, which its launched command shares, is closed: a workload
    /// run with `stdin` then ends normally, and stacks with it.
    EndOfInput,
}

/// Runs `<profiler> stacks` as [`run_stacks`] does, ARGS with no `--duration`, and ends it as
/// `end` says once `enough` holds (asked every 100 ms with the pid of stacks, from when it holds
/// its BPF programs, the sampler loaded), or after `at_most`: a test waits for what it needs to
/// see, however long a loaded machine takes to give it.
pub fn run_stacks_until(
    profiler: &Path,
    rate_hz: u64,
    args: &[&str],
    (end, at_most): (End, Duration),
    mut enough: impl FnMut(u32) -> bool,
) -> StacksRun {
    let output = output_file();
    let mut child = stacks_command(profiler, rate_hz, &output, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", profiler.display()));
    let start = Instant::now();
    let (mut stdout, mut stderr) = (child.stdout.take(), child.stderr.take());
    let stdout = std::thread::spawn(move || read_all(stdout.as_mut()));
    let stderr = std::thread::spawn(move || read_all(stderr.as_mut()));
    let pid = child.id();
    let mut sampling = false;
    while child.try_wait().expect("wait for stacks").is_none()
        && start.elapsed() < at_most
        && !(sampling && enough(pid))
    {
        sampling = sampling || !bpf_programs_of(&pid.to_string()).is_empty();
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(child.stdin.take());
    if end == End::Interrupt {
        // SAFETY: kill(2) of the child this function started, not reaped yet (its pid is its own).
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
    }
    let status = child.wait().expect("stacks ends");
    let stdout = stdout.join().expect("stdout read");
    let stderr = stderr.join().expect("stderr read");
    read_run(
        &output,
        Output {
            status,
            stdout,
            stderr,
        },
    )
}

/// Everything `pipe` gives until its end (nothing without a pipe).
fn read_all(pipe: Option<&mut impl Read>) -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Some(pipe) = pipe {
        let _ = pipe.read_to_end(&mut bytes);
    }
    bytes
}

/// The file the stacks of this test process's runs are written to (the agent library built
/// first, beside the binary), removed.
fn output_file() -> PathBuf {
    agent_library();
    let output = target_dir().join(format!("stacks-test-{}.folded", std::process::id()));
    let _ = std::fs::remove_file(&output);
    output
}

/// `<profiler> stacks --output <output> --rate <rate_hz> ARGS`, its stdin empty.
fn stacks_command(profiler: &Path, rate_hz: u64, output: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(profiler);
    command
        .arg("stacks")
        .arg("--output")
        .arg(output)
        .args(["--rate", &rate_hz.to_string()])
        .args(args)
        .stdin(Stdio::null());
    command
}

/// What the run that ended with `result` wrote in `output` (then removed), and said.
fn read_run(output: &Path, result: Output) -> StacksRun {
    let text = std::fs::read_to_string(output).unwrap_or_default();
    let _ = std::fs::remove_file(output);
    let folded = text
        .lines()
        .map(|line| {
            let (stack, count) = line.rsplit_once(' ').expect("a `stack count` line");
            (stack.to_string(), count.parse().expect("a count"))
        })
        .collect();
    StacksRun {
        folded,
        stdout: String::from_utf8_lossy(&result.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&result.stderr).into_owned(),
        code: result.status.code(),
    }
}

/// `java JVM_ARGS -cp <workloads> MAIN ARGS` on `jdk`, as the command after `--`.
pub fn java_command(jdk: &Jdk, jvm_args: &[&str], main: &str, args: &[&str]) -> Vec<String> {
    let mut command = vec![jdk.java().display().to_string()];
    command.extend(jvm_args.iter().map(|a| a.to_string()));
    command.extend(["-cp".into(), workload_classes().display().to_string()]);
    command.push(main.into());
    command.extend(args.iter().map(|a| a.to_string()));
    command
}

/// `options`, then `--` and `command`: the arguments of a `stacks` or `record` that launches it.
pub fn with_command<'a>(options: &[&'a str], command: &'a [String]) -> Vec<&'a str> {
    let mut args = options.to_vec();
    args.push("--");
    args.extend(command.iter().map(String::as_str));
    args
}

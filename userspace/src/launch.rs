//! Launching a command whose JVMs are profiled (`stacks -- java ...`, `record -- java ...`).
//!
//! The command is followed from its first instant ([`Sampler::follow`]): the profiler follows
//! itself for the time of the fork, so the child is tracked by the kernel side before it runs a
//! single instruction, and every process it starts is too. Its JVMs get the symbolizer agent
//! through `JAVA_TOOL_OPTIONS` (appended to any value the user set), so the user adds nothing to
//! the command; nothing else about the JVM is changed (the stack walker needs no
//! -XX:+PreserveFramePointer).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use joularcode_core::log::{Level, Log};
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;

use crate::agent_library::{self, AgentLibraryError};
use crate::sampler::{Sampler, SamplerError};
use crate::signals::{self, SignalError};

/// The file name of the symbolizer agent library.
pub const AGENT_LIBRARY: &str = "libjvm_symbolizer_agent.so";

/// The options given to the agent of a launched JVM: no perf map (the code map says more, and
/// a perf map left in /tmp would be stale after the run).
pub const AGENT_OPTIONS: &str = "perfmap=no";

/// Why the agent library cannot be used, or a command could not be launched or ended. Each says
/// in one line what failed and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// `--agent-path` names no file.
    #[error("--agent-path {}: no such file (give the path of {AGENT_LIBRARY})", .0.display())]
    NoAgentFile(PathBuf),
    /// The embedded agent cannot be written where the JVMs load it.
    #[error("{0}")]
    Embedded(#[from] AgentLibraryError),
    /// The agent's path cannot be carried by `JAVA_TOOL_OPTIONS`.
    #[error(
        "the agent path {} holds a space or is not UTF-8, which JAVA_TOOL_OPTIONS cannot carry: \
         give a plain path with --agent-path FILE",
        .0.display()
    )]
    UnusableAgentPath(PathBuf),
    /// The sampler cannot follow the command from its first instant.
    #[error("{0}")]
    Follow(#[from] SamplerError),
    /// The command could not be started.
    #[error("cannot run {program}: {source}")]
    Run {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// The command could not be waited for.
    #[error("cannot wait for the command: {0}")]
    Wait(std::io::Error),
    /// The command could not be sent SIGTERM.
    #[error("cannot stop the command: {0}")]
    Stop(nix::Error),
    /// Ctrl-C and SIGTERM cannot be counted while the command ends.
    #[error("{0}")]
    Signals(#[from] SignalError),
}

/// The agent library: `explicit` (from `--agent-path`) if given, else the agent embedded in the
/// binary, written where the JVMs load it ([`agent_library::write_embedded`]).
pub fn find_agent(explicit: Option<&Path>) -> Result<PathBuf, LaunchError> {
    if let Some(path) = explicit {
        return if path.is_file() {
            Ok(path.to_path_buf())
        } else {
            Err(LaunchError::NoAgentFile(path.to_path_buf()))
        };
    }
    Ok(agent_library::write_embedded()?)
}

/// The value of `JAVA_TOOL_OPTIONS` for a launched command: the user's `existing` value, then
/// the agent.
pub fn java_tool_options(existing: Option<&OsStr>, agent: &Path) -> Result<OsString, LaunchError> {
    let agent_text = agent
        .to_str()
        .filter(|text| !text.contains(char::is_whitespace))
        .ok_or_else(|| LaunchError::UnusableAgentPath(agent.to_path_buf()))?;
    let mut value = OsString::new();
    if let Some(existing) = existing.filter(|value| !value.is_empty()) {
        value.push(existing);
        value.push(" ");
    }
    value.push(format!("-agentpath:{agent_text}={AGENT_OPTIONS}"));
    Ok(value)
}

/// Starts `command`, with the agent in its JVMs' options when one is given (`--no-attach` gives
/// none), followed by `sampler` from its first instant. Should the profiler die without ending
/// it ([`end`]), killed itself, the command is killed too (`PR_SET_PDEATHSIG`): it is never left
/// running on its own.
pub fn spawn(
    mut command: Command,
    agent: Option<&Path>,
    sampler: &Sampler,
) -> Result<Child, LaunchError> {
    use std::os::unix::process::CommandExt;
    if let Some(agent) = agent {
        let existing = std::env::var_os("JAVA_TOOL_OPTIONS");
        let options = java_tool_options(existing.as_deref(), agent)?;
        command.env("JAVA_TOOL_OPTIONS", options);
    }
    let parent = std::process::id();
    // SAFETY: between fork and exec the closure only makes async-signal-safe calls (prctl,
    // getppid) and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The profiler died before the line above: end now, as the signal would have.
            if u32::try_from(libc::getppid()) != Ok(parent) {
                libc::_exit(128 + libc::SIGKILL);
            }
            Ok(())
        });
    }
    let program = command.get_program().to_string_lossy().into_owned();
    let me = std::process::id();
    sampler.follow(me)?;
    let child = command.spawn();
    sampler.untrack(me);
    child.map_err(|source| LaunchError::Run { program, source })
}

/// How long a launched command still running when the profiler stops has to end after SIGTERM
/// before it is killed.
pub const GRACE: Duration = Duration::from_secs(10);
/// How often [`end`] looks whether the command has ended.
const POLL: Duration = Duration::from_millis(20);

/// Ends the launched command and returns its exit code ([`exit_code`]). If it still runs, it
/// is sent SIGTERM (as `timeout` does) and waited for; after `grace`, or at the next SIGINT or
/// SIGTERM the profiler gets (a second Ctrl-C: at once if two have come already), it is killed
/// with SIGKILL. Signals are only counted meanwhile ([`signals`]), so the profiler never exits
/// before the command has. The profiler should have stopped sampling first.
pub fn end(child: &mut Child, grace: Duration, log: &dyn Log) -> Result<i32, LaunchError> {
    let failed = LaunchError::Wait;
    signals::stop_on_signals()?;
    let before = signals::received();
    let hurry = || signals::received() > before || before >= 2;
    if let Some(status) = child.try_wait().map_err(failed)? {
        return Ok(exit_code(status));
    }
    let pid =
        Pid::from_raw(i32::try_from(child.id()).map_err(|_| LaunchError::Stop(nix::Error::ESRCH))?);
    let seconds = grace.as_secs_f64();
    log.log(
        Level::Info,
        &format!(
            "The command (pid {pid}) still runs: sent SIGTERM, SIGKILL in {seconds} s or at the next Ctrl-C."
        ),
    );
    // The child is not reaped yet (try_wait said so), so its pid is still its own.
    signal::kill(pid, Signal::SIGTERM).map_err(LaunchError::Stop)?;
    let deadline = Instant::now() + grace;
    loop {
        if let Some(status) = child.try_wait().map_err(failed)? {
            return Ok(exit_code(status));
        }
        if hurry() || Instant::now() >= deadline {
            log.log(
                Level::Warning,
                &format!("The command (pid {pid}) did not end after SIGTERM: killed (SIGKILL)."),
            );
            // It may have ended just now: then there is nothing to kill, and wait says how.
            let _ = child.kill();
            return child.wait().map(exit_code).map_err(failed);
        }
        std::thread::sleep(POLL);
    }
}

/// The exit code a shell gives for `status`: the code, or 128 + the signal that ended it.
pub fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|signal| 128 + signal))
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_options_follow_the_users() {
        let agent = Path::new("/opt/jp/libjvm_symbolizer_agent.so");
        assert_eq!(
            java_tool_options(None, agent).expect("plain path"),
            "-agentpath:/opt/jp/libjvm_symbolizer_agent.so=perfmap=no"
        );
        assert_eq!(
            java_tool_options(Some(OsStr::new("-Xmx1g")), agent).expect("plain path"),
            "-Xmx1g -agentpath:/opt/jp/libjvm_symbolizer_agent.so=perfmap=no"
        );
        let err = java_tool_options(None, Path::new("/my agents/lib.so")).unwrap_err();
        assert!(err.to_string().contains("--agent-path"), "{err}");
    }

    #[test]
    fn a_missing_agent_path_is_named() {
        let err = find_agent(Some(Path::new("/nonexistent/lib.so"))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--agent-path /nonexistent/lib.so: no such file (give the path of libjvm_symbolizer_agent.so)"
        );
    }

    #[test]
    fn exit_codes_are_the_shells() {
        let status = |script: &str| {
            Command::new("sh")
                .args(["-c", script])
                .status()
                .expect("sh runs")
        };
        assert_eq!(exit_code(status("exit 3")), 3);
        assert_eq!(exit_code(status("kill -TERM $$")), 128 + 15);
    }

    #[test]
    fn a_command_still_running_is_terminated_then_killed() {
        let log = joularcode_core::log::Recorded::default();
        let mut ended = Command::new("true").spawn().expect("true runs");
        ended.wait().expect("true ends");
        assert_eq!(end(&mut ended, GRACE, &log).ok(), Some(0), "already ended");
        assert!(log.messages().is_empty());

        let mut sleeper = Command::new("sleep")
            .arg("1000")
            .spawn()
            .expect("sleep runs");
        assert_eq!(end(&mut sleeper, GRACE, &log).ok(), Some(128 + 15));
        assert_eq!(log.messages().len(), 1, "{:?}", log.messages());

        let deaf = "trap '' TERM; echo ready; while :; do sleep 1; done";
        // Its `sleep` outlives it by up to a second: it gets no stderr of the test's to hold
        let mut stubborn = Command::new("sh")
            .args(["-c", deaf])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("sh runs");
        let mut ready = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(stubborn.stdout.take().expect("its stdout")),
            &mut ready,
        )
        .expect("sh says it is ready");
        assert_eq!(end(&mut stubborn, Duration::ZERO, &log).ok(), Some(128 + 9));
        assert!(log.messages()[2].1.contains("killed (SIGKILL)"));
    }
}

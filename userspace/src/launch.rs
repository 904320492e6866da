//! Launching a command whose JVMs are profiled (`stacks -- java ...`, `record -- java ...`).
//!
//! The command is followed from its first instant ([`Sampler::follow`]): the profiler follows
//! itself for the time of the fork, so the child is tracked by the kernel side before it runs a
//! single instruction, and every process it starts is too. Its JVMs get the symbolizer agent and
//! `-XX:+PreserveFramePointer` through `JAVA_TOOL_OPTIONS` (appended to any value the user set),
//! so the user adds nothing to the command.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};

use crate::sampler::Sampler;

/// The file name of the symbolizer agent library.
pub const AGENT_LIBRARY: &str = "libjvm_symbolizer_agent.so";

/// The options given to the agent of a launched JVM: no perf map (the code map says more, and
/// a perf map left in /tmp would be stale after the run).
pub const AGENT_OPTIONS: &str = "perfmap=no";

/// The agent library: `explicit` (from `--agent-path`) if given, else `libjvm_symbolizer_agent.so`
/// beside the running executable (or one folder up, for Cargo's test executables in `deps/`).
pub fn find_agent(explicit: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(path) = explicit {
        return if path.is_file() {
            Ok(path.to_path_buf())
        } else {
            Err(format!(
                "--agent-path {}: no such file (give the path of {AGENT_LIBRARY})",
                path.display()
            ))
        };
    }
    let exe = std::env::current_exe().map_err(|e| {
        format!("cannot find the running executable to look for {AGENT_LIBRARY}: {e}")
    })?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    [dir.join(AGENT_LIBRARY), dir.join("..").join(AGENT_LIBRARY)]
        .into_iter()
        .find(|path| path.is_file())
        .map(|path| path.canonicalize().unwrap_or(path))
        .ok_or_else(|| {
            format!(
                "no {AGENT_LIBRARY} beside {} (build it with `cargo build -p jvm-symbolizer-agent`): \
                 give its path with --agent-path FILE",
                exe.display()
            )
        })
}

/// The value of `JAVA_TOOL_OPTIONS` for a launched command: the user's `existing` value, then
/// the agent and -XX:+PreserveFramePointer.
pub fn java_tool_options(existing: Option<&OsStr>, agent: &Path) -> Result<OsString, String> {
    let agent_text = agent.to_str().filter(|text| !text.contains(char::is_whitespace)).ok_or_else(|| {
        format!(
            "the agent path {} holds a space or is not UTF-8, which JAVA_TOOL_OPTIONS cannot carry: \
             give a plain path with --agent-path FILE",
            agent.display()
        )
    })?;
    let mut value = OsString::new();
    if let Some(existing) = existing.filter(|value| !value.is_empty()) {
        value.push(existing);
        value.push(" ");
    }
    value.push(format!(
        "-agentpath:{agent_text}={AGENT_OPTIONS} -XX:+PreserveFramePointer"
    ));
    Ok(value)
}

/// Starts `command` with the agent in its JVMs' options, followed by `sampler` from its first
/// instant.
pub fn spawn(mut command: Command, agent: &Path, sampler: &Sampler) -> Result<Child, String> {
    let existing = std::env::var_os("JAVA_TOOL_OPTIONS");
    let options = java_tool_options(existing.as_deref(), agent)?;
    command.env("JAVA_TOOL_OPTIONS", options);
    let program = command.get_program().to_string_lossy().into_owned();
    let me = std::process::id();
    sampler.follow(me).map_err(|e| e.to_string())?;
    let child = command.spawn();
    sampler.untrack(me);
    child.map_err(|e| format!("cannot run {program}: {e}"))
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
            "-agentpath:/opt/jp/libjvm_symbolizer_agent.so=perfmap=no -XX:+PreserveFramePointer"
        );
        assert_eq!(
            java_tool_options(Some(OsStr::new("-Xmx1g")), agent).expect("plain path"),
            "-Xmx1g -agentpath:/opt/jp/libjvm_symbolizer_agent.so=perfmap=no -XX:+PreserveFramePointer"
        );
        let err = java_tool_options(None, Path::new("/my agents/lib.so")).unwrap_err();
        assert!(err.contains("--agent-path"), "{err}");
    }

    #[test]
    fn a_missing_agent_path_is_named() {
        let err = find_agent(Some(Path::new("/nonexistent/lib.so"))).unwrap_err();
        assert_eq!(
            err,
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
}

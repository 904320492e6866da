//! The HotSpot attach protocol, spoken directly (no JDK tool needed): load an agent into a running
//! JVM, or run a diagnostic command such as `Compiler.perfmap`.
//!
//! The target is reached through `/proc/<pid>/root` and `/proc/<pid>/cwd`, so JVMs in containers
//! (other mount and PID namespaces) are attached without entering their namespaces: HotSpot
//! accepts a root peer on its socket. Steps (docs/attach.md): the JVM's own pid (`NStgid`), a
//! `.attach_pid<nspid>` trigger file, SIGQUIT, the `.java_pid<nspid>` socket in its /tmp, then
//! `1\0<command>\0<arg>\0<arg>\0<arg>\0` and a reply of a status line and the command's output.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use joularcode_core::log::quote;

use crate::agent_library;
use crate::foreign::{ForeignError, ProcessDir};
use crate::jit::perfmap::PerfMap;
use crate::proc_files::{self, ProcStatus};

/// How long the JVM has to open its attach socket after SIGQUIT.
const SOCKET_WAIT: Duration = Duration::from_secs(10);
/// How long a command may run (an agent replaying a big code cache takes a while).
const REPLY_WAIT: Duration = Duration::from_secs(60);
/// How often a wait looks whether it was cancelled ([`JvmProcess::with_cancel`]).
const CANCEL_POLL: Duration = Duration::from_millis(100);
/// Largest reply read: the commands sent answer in a few lines (a perf map goes to a file).
const MAX_REPLY: usize = 1 << 20;
/// Most characters of a JVM's answer quoted in a message.
const MAX_QUOTE: usize = 300;
/// The largest agent library copied into a container.
const MAX_LIBRARY: u64 = 256 << 20;

/// Why an attach failed.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// No such process, or it cannot be inspected.
    #[error("process {0} does not exist or cannot be inspected (run as root)")]
    NoProcess(u32),
    /// The process runs no HotSpot JVM.
    #[error("process {0} is not a JVM (no libjvm.so mapped)")]
    NotAJvm(u32),
    /// The JVM was started with -XX:+DisableAttachMechanism.
    #[error(
        "the JVM {0} refuses attach (-XX:+DisableAttachMechanism): \
         restart it without that option, or start it with the agent (-agentpath)"
    )]
    AttachDisabled(u32),
    /// The JVM does not handle SIGQUIT (still starting, or -Xrs): the signal would kill it.
    #[error(
        "the JVM {0} does not handle SIGQUIT (still starting, or started with -Xrs): \
         not attaching, as the signal would end it"
    )]
    NotReady(u32),
    /// The JVM refuses agents loaded at run time (JDK 21+, -XX:-EnableDynamicAgentLoading).
    #[error(
        "the JVM {pid} refuses agents loaded at run time (-XX:-EnableDynamicAgentLoading): \
         start it with -agentpath or -XX:+EnableDynamicAgentLoading ({message})"
    )]
    AgentsRefused {
        /// The JVM.
        pid: u32,
        /// What the JVM said.
        message: String,
    },
    /// The agent was loaded but its Agent_OnAttach failed, or the library could not be loaded.
    #[error("the JVM {pid} could not start the agent {agent}: {message}")]
    AgentFailed {
        /// The JVM.
        pid: u32,
        /// The library, as the JVM sees it.
        agent: String,
        /// What the JVM said.
        message: String,
    },
    /// A command returned an error status.
    #[error("the JVM {pid} answered '{command}' with status {status}: {output}")]
    CommandFailed {
        /// The JVM.
        pid: u32,
        /// The command.
        command: String,
        /// Its status.
        status: i32,
        /// Its output.
        output: String,
    },
    /// No attach socket appeared, or no reply came, in time.
    #[error(
        "the JVM {pid} did not {what} within {secs} s: it may be busy or stopped, or its attach \
         mechanism disabled by an option this tool cannot see"
    )]
    Timeout {
        /// The JVM.
        pid: u32,
        /// What it did not do.
        what: &'static str,
        /// The time waited.
        secs: u64,
    },
    /// The attach socket (or a file next to it) is not what the JVM would have made: a link,
    /// another user's, or listened on by another process.
    #[error("not attaching to the JVM {pid}: {reason}")]
    Refused {
        /// The JVM.
        pid: u32,
        /// What was wrong.
        reason: String,
    },
    /// The profiler stopped while waiting ([`JvmProcess::with_cancel`]).
    #[error("attaching to the JVM {0} was abandoned: the profiler is stopping")]
    Cancelled(u32),
    /// A file or socket operation failed.
    #[error("attach: {0}")]
    Io(String),
}

/// A JVM process to attach to, seen through its namespaces: its pid on this host and the pid it
/// sees itself as.
#[derive(Debug, Clone)]
pub struct JvmProcess {
    /// Its pid on this host.
    pub pid: u32,
    /// Its pid as it sees itself (innermost PID namespace).
    pub ns_pid: u32,
    cancel: Arc<AtomicBool>,
}

impl JvmProcess {
    /// Checks that `pid` runs a HotSpot JVM and reads the pid it sees itself as.
    pub fn new(pid: u32) -> Result<JvmProcess, AttachError> {
        let status = ProcStatus::read(Path::new("/proc"), &pid.to_string())
            .map_err(|_| AttachError::NoProcess(pid))?;
        let ns_pid = status.ns_pid().ok_or(AttachError::NoProcess(pid))?;
        let maps =
            std::fs::read(format!("/proc/{pid}/maps")).map_err(|_| AttachError::NoProcess(pid))?;
        if !maps.split(|&b| b == b'\n').any(proc_files::maps_libjvm) {
            return Err(AttachError::NotAJvm(pid));
        }
        Ok(JvmProcess {
            pid,
            ns_pid,
            cancel: Arc::default(),
        })
    }

    /// The target, whose waits for the JVM (its socket, its answer) end with
    /// [`AttachError::Cancelled`] (removing the trigger file) once `cancel` is set.
    pub fn with_cancel(mut self, cancel: Arc<AtomicBool>) -> JvmProcess {
        self.cancel = cancel;
        self
    }

    fn cancelled(&self) -> Result<(), AttachError> {
        match self.cancel.load(Ordering::Relaxed) {
            true => Err(AttachError::Cancelled(self.pid)),
            false => Ok(()),
        }
    }

    /// The JVM's /tmp, entered without following any link below its root.
    pub fn tmp(&self) -> Result<ProcessDir, AttachError> {
        ProcessDir::in_root(self.pid, "/tmp").map_err(|e| self.refusal(e))
    }

    /// An attach error for something another user controls that could not be used.
    fn refusal(&self, error: ForeignError) -> AttachError {
        match error {
            ForeignError::Refused { .. } => AttachError::Refused {
                pid: self.pid,
                reason: error.to_string(),
            },
            ForeignError::Io { .. } => AttachError::Io(error.to_string()),
        }
    }

    /// `path` of the target's file system, seen from here.
    pub fn root_path(&self, path: &str) -> PathBuf {
        PathBuf::from(format!(
            "/proc/{}/root/{}",
            self.pid,
            path.trim_start_matches('/')
        ))
    }

    /// Whether the target lives in another mount namespace than this process.
    pub fn other_mount_namespace(&self) -> bool {
        let ns = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok();
        ns("self") != ns(&self.pid.to_string())
    }

    /// The JVM's options from its command line and the launcher's environment variables, in the
    /// order the JVM reads them.
    fn jvm_options(&self) -> Vec<String> {
        let read =
            |name: &str| std::fs::read(format!("/proc/{}/{name}", self.pid)).unwrap_or_default();
        let environ = read("environ");
        let env = |var: &str| -> Vec<String> {
            environ
                .split(|&b| b == 0)
                .filter_map(|entry| entry.strip_prefix(format!("{var}=").as_bytes()))
                .flat_map(|value| {
                    String::from_utf8_lossy(value)
                        .split_whitespace()
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        let cmdline = read("cmdline");
        let args = cmdline
            .split(|&b| b == 0)
            .map(|arg| String::from_utf8_lossy(arg).into_owned());
        let mut options = env("JAVA_TOOL_OPTIONS");
        options.extend(env("JDK_JAVA_OPTIONS"));
        options.extend(args);
        options.extend(env("_JAVA_OPTIONS"));
        options
    }

    /// The last setting of the boolean -XX flag `name` among the JVM's visible options.
    fn flag(&self, name: &str) -> Option<bool> {
        self.jvm_options().iter().rev().find_map(|option| {
            let rest = option.strip_prefix("-XX:")?;
            let (sign, flag) = rest.split_at_checked(1)?;
            (flag == name).then_some(sign == "+")
        })
    }

    /// Whether the JVM has a SIGQUIT handler (`SigCgt` bit 3).
    fn handles_sigquit(&self) -> bool {
        ProcStatus::read(Path::new("/proc"), &self.pid.to_string())
            .ok()
            .and_then(|status| status.mask("SigCgt"))
            .is_some_and(|mask| mask & (1 << (libc::SIGQUIT - 1)) != 0)
    }

    /// Connects to the attach socket, asking the JVM to open it first if needed. The socket must
    /// be the JVM's own ([`ProcessDir::connect`]).
    fn connect(&self) -> Result<UnixStream, AttachError> {
        let tmp = self.tmp()?;
        let socket = format!(".java_pid{}", self.ns_pid);
        let mut refused = match tmp.connect(&socket, self.pid) {
            Ok(stream) => return Ok(stream),
            Err(error @ ForeignError::Refused { .. }) => Some(self.refusal(error)),
            Err(ForeignError::Io { .. }) => None,
        };
        if self.flag("DisableAttachMechanism") == Some(true) {
            return Err(AttachError::AttachDisabled(self.pid));
        }
        if !self.handles_sigquit() {
            return Err(AttachError::NotReady(self.pid));
        }
        let name = format!(".attach_pid{}", self.ns_pid);
        // A regular file left there (by a jcmd that was stopped) triggers as well, and stays.
        let (folder, trigger) = [ProcessDir::cwd(self.pid).ok(), self.tmp().ok()]
            .into_iter()
            .flatten()
            .find_map(|folder| match folder.create_new(&name, 0o644) {
                Ok(made) => Some((folder, Some(made))),
                Err(_) if folder.holds_file(&name) => Some((folder, None)),
                Err(_) => None,
            })
            .ok_or_else(|| {
                AttachError::Io(format!(
                    "cannot create {name} in the JVM {}'s working folder or /tmp (something else \
                     than a file is there, or they cannot be entered without following a link)",
                    self.pid
                ))
            })?;
        let stream = self.signal_and_wait(&tmp, &socket, &mut refused);
        // Removed whatever happened, unless someone put another file in its place.
        if let Some(made) = trigger {
            folder.remove_made(made);
        }
        match stream? {
            Some(stream) => Ok(stream),
            None => Err(refused.unwrap_or(AttachError::Timeout {
                pid: self.pid,
                what: "open its attach socket",
                secs: SOCKET_WAIT.as_secs(),
            })),
        }
    }

    /// Sends SIGQUIT and waits for the JVM's own socket; `None` after [`SOCKET_WAIT`], with the
    /// last refusal of what was found in its place in `refused`.
    fn signal_and_wait(
        &self,
        tmp: &ProcessDir,
        socket: &str,
        refused: &mut Option<AttachError>,
    ) -> Result<Option<UnixStream>, AttachError> {
        // SAFETY: kill(2) with a pid and a signal number.
        if unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGQUIT) } != 0 {
            return Err(AttachError::NoProcess(self.pid));
        }
        let start = Instant::now();
        let mut pause = Duration::from_millis(20);
        loop {
            match tmp.connect(socket, self.pid) {
                Ok(stream) => return Ok(Some(stream)),
                Err(error @ ForeignError::Refused { .. }) => *refused = Some(self.refusal(error)),
                Err(ForeignError::Io { .. }) => {}
            }
            self.cancelled()?;
            if start.elapsed() > SOCKET_WAIT || !Path::new(&format!("/proc/{}", self.pid)).exists()
            {
                return Ok(None);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(200));
        }
    }

    /// Sends one command with up to three arguments; returns the status and the output. The
    /// reply is read up to [`MAX_REPLY`] bytes, waiting up to [`REPLY_WAIT`] for it unless the
    /// attach is cancelled.
    pub fn execute(&self, command: &str, args: [&str; 3]) -> Result<(i32, String), AttachError> {
        let mut stream = self.connect()?;
        let io = |e: std::io::Error| AttachError::Io(format!("JVM {}: {e}", self.pid));
        stream.set_read_timeout(Some(CANCEL_POLL)).map_err(io)?;
        let mut request = b"1\0".to_vec();
        for part in std::iter::once(command).chain(args) {
            request.extend_from_slice(part.as_bytes());
            request.push(0);
        }
        stream.write_all(&request).map_err(io)?;
        let start = Instant::now();
        let mut reply = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            match stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) if reply.len() + n > MAX_REPLY => {
                    return Err(AttachError::Io(format!(
                        "JVM {}: its answer to '{command}' is longer than {MAX_REPLY} bytes",
                        self.pid
                    )))
                }
                Ok(n) => reply.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    self.cancelled()?;
                    if start.elapsed() > REPLY_WAIT {
                        return Err(AttachError::Timeout {
                            pid: self.pid,
                            what: "answer",
                            secs: REPLY_WAIT.as_secs(),
                        });
                    }
                }
                Err(e) => return Err(io(e)),
            }
        }
        parse_reply(&reply).ok_or_else(|| {
            AttachError::Io(format!(
                "JVM {}: the reply does not start with a status: {}",
                self.pid,
                quote(&String::from_utf8_lossy(&reply), 80)
            ))
        })
    }

    /// Runs a diagnostic command (`jcmd <pid> <command>`) in the JVM; returns its output.
    pub fn jcmd(&self, command: &str) -> Result<String, AttachError> {
        let (status, output) = self.execute("jcmd", [command, "", ""])?;
        if status != 0 {
            return Err(AttachError::CommandFailed {
                pid: self.pid,
                command: command.to_string(),
                status,
                output: quote(output.trim(), MAX_QUOTE),
            });
        }
        Ok(output)
    }

    /// Asks the JVM for a fresh perf map (`jcmd Compiler.perfmap`, no agent needed), reads it
    /// from the JVM's /tmp, and removes it there (it would only go stale): only a regular file of
    /// the JVM's user is read or removed.
    pub fn perf_map(&self) -> Result<PerfMap, AttachError> {
        self.jcmd("Compiler.perfmap")?;
        let name = format!("perf-{}.map", self.ns_pid);
        PerfMap::take(&self.tmp()?, &name).map_err(|e| AttachError::Io(e.to_string()))
    }

    /// Loads the agent library `agent` with `options` into the JVM.
    ///
    /// When the JVM is in another mount namespace (a container), the library is first copied
    /// into its /tmp, since the JVM opens the path in its own file system. The JVM's answer is
    /// checked: JDK 9 to 20 reply `return code: N`; JDK 21+ reply status 0 and put errors in the
    /// text.
    pub fn load_agent(&self, agent: &Path, options: &str) -> Result<(), AttachError> {
        let pid = self.pid;
        let path = if self.other_mount_namespace() {
            copy_into(self, agent)?
        } else {
            agent.to_string_lossy().into_owned()
        };
        let (status, output) = self.execute("load", [&path, "true", options])?;
        let output = output.trim();
        if output.contains("EnableDynamicAgentLoading")
            || output.contains("agent loading is not enabled")
        {
            return Err(AttachError::AgentsRefused {
                pid,
                message: quote(output, MAX_QUOTE),
            });
        }
        let code = output
            .lines()
            .find_map(|line| line.strip_prefix("return code: "))
            .and_then(|code| code.trim().parse::<i32>().ok());
        if status != 0
            || code.is_some_and(|code| code != 0)
            || (code.is_none() && !output.is_empty())
        {
            return Err(AttachError::AgentFailed {
                pid,
                agent: path,
                message: format!("status {status}, {}", quote(output, MAX_QUOTE)),
            });
        }
        Ok(())
    }
}

/// The status and the output of an attach reply: a decimal status line, then the command's
/// output (any bytes, read as UTF-8 with replacements). `None` without a status.
pub fn parse_reply(reply: &[u8]) -> Option<(i32, String)> {
    let reply = String::from_utf8_lossy(reply);
    let (status, output) = reply.split_once('\n').unwrap_or((&reply, ""));
    let status = status.trim().parse().ok()?;
    Some((status, output.to_string()))
}

/// How long a [`Background`] attach dropped has to end after it is cancelled.
const CANCEL_WAIT: Duration = Duration::from_secs(2);

/// An attach (loading the agent, reading a perf map) run in a thread of its own, so that a slow
/// JVM never holds up the profiler. Dropping it cancels its waits and gives it up to 2 s to end
/// and remove its trigger file, so that a profiler that stops leaves nothing behind.
pub struct Background<T> {
    cancel: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<T>>,
}

impl<T: Send + 'static> Background<T> {
    /// Runs `work` in a thread named `name`; `work` gets the flag to give its [`JvmProcess`]s
    /// ([`JvmProcess::with_cancel`]).
    pub fn spawn(
        name: &str,
        work: impl FnOnce(Arc<AtomicBool>) -> T + Send + 'static,
    ) -> std::io::Result<Background<T>> {
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = cancel.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || work(flag))?;
        Ok(Background {
            cancel,
            thread: Some(thread),
        })
    }

    /// Whether the work is done.
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// What the work gave (`None` if it panicked), waiting for it.
    pub fn join(mut self) -> Option<T> {
        self.thread.take()?.join().ok()
    }
}

impl<T> Drop for Background<T> {
    fn drop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.cancel.store(true, Ordering::Relaxed);
        let start = Instant::now();
        while !thread.is_finished() && start.elapsed() < CANCEL_WAIT {
            std::thread::sleep(Duration::from_millis(10));
        }
        if thread.is_finished() {
            let _ = thread.join();
        }
    }
}

/// Runs a diagnostic command (`jcmd <pid> <command>`) in the JVM of host pid `pid`; returns its
/// output ([`JvmProcess::jcmd`]).
pub fn jcmd(pid: u32, command: &str) -> Result<String, AttachError> {
    JvmProcess::new(pid)?.jcmd(command)
}

/// Loads the agent library `agent` with `options` into the JVM of host pid `pid`
/// ([`JvmProcess::load_agent`]).
pub fn load_agent(pid: u32, agent: &Path, options: &str) -> Result<(), AttachError> {
    JvmProcess::new(pid)?.load_agent(agent, options)
}

/// Copies the agent library into the target's /tmp (once per content: its name is
/// [`agent_library::file_name`]); returns its path there.
/// The copy is written under a new name in that folder (entered without following links), then
/// renamed over the old one.
fn copy_into(target: &JvmProcess, agent: &Path) -> Result<String, AttachError> {
    let io = |e: std::io::Error| {
        AttachError::Io(format!(
            "copying {} into the JVM {}: {e}",
            agent.display(),
            target.pid
        ))
    };
    let bytes = std::fs::read(agent).map_err(io)?;
    let file_name = agent_library::file_name(&bytes);
    let tmp = target.tmp()?;
    // SAFETY: geteuid only reads this process's user id.
    let me = Some(unsafe { libc::geteuid() });
    if let Ok(mut existing) = tmp.open_file_of(&file_name, me, MAX_LIBRARY) {
        let mut old = Vec::new();
        if existing.file.read_to_end(&mut old).is_ok() && old == bytes {
            return Ok(format!("/tmp/{file_name}"));
        }
    }
    let temp = format!("{file_name}.{}", std::process::id());
    let mut made = tmp
        .create_new(&temp, 0o644)
        .map_err(|e| target.refusal(e))?;
    if let Err(error) = made.file.write_all(&bytes) {
        tmp.remove_made(made);
        return Err(io(error));
    }
    tmp.rename(&temp, &file_name).map_err(io)?;
    Ok(format!("/tmp/{file_name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_without_libjvm_is_not_a_jvm() {
        let err = JvmProcess::new(std::process::id()).unwrap_err();
        assert!(matches!(err, AttachError::NotAJvm(_)), "{err}");
        assert!(matches!(
            JvmProcess::new(u32::MAX - 1),
            Err(AttachError::NoProcess(_))
        ));
    }
}

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
use std::time::{Duration, Instant};

/// How long the JVM has to open its attach socket after SIGQUIT.
const SOCKET_WAIT: Duration = Duration::from_secs(10);
/// How long a command may run (an agent replaying a big code cache takes a while).
const REPLY_WAIT: Duration = Duration::from_secs(60);
/// Largest reply read.
const MAX_REPLY: u64 = 16 << 20;

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
    /// A file or socket operation failed.
    #[error("attach: {0}")]
    Io(String),
}

/// A process to attach to.
#[derive(Debug, Clone)]
pub struct Target {
    /// Its pid on this host.
    pub pid: u32,
    /// Its pid as it sees itself (innermost PID namespace).
    pub ns_pid: u32,
}

impl Target {
    /// Checks that `pid` runs a HotSpot JVM and reads the pid it sees itself as.
    pub fn new(pid: u32) -> Result<Target, AttachError> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .map_err(|_| AttachError::NoProcess(pid))?;
        let ns_pid = ns_pid(&status).ok_or(AttachError::NoProcess(pid))?;
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .map_err(|_| AttachError::NoProcess(pid))?;
        if !maps.lines().any(|line| line.ends_with("/libjvm.so")) {
            return Err(AttachError::NotAJvm(pid));
        }
        Ok(Target { pid, ns_pid })
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

    fn socket_path(&self) -> PathBuf {
        self.root_path(&format!("/tmp/.java_pid{}", self.ns_pid))
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
        std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .ok()
            .and_then(|status| {
                let mask = status.lines().find_map(|l| l.strip_prefix("SigCgt:"))?;
                u64::from_str_radix(mask.trim(), 16).ok()
            })
            .is_some_and(|mask| mask & (1 << (libc::SIGQUIT - 1)) != 0)
    }

    /// Connects to the attach socket, asking the JVM to open it first if needed.
    fn connect(&self) -> Result<UnixStream, AttachError> {
        let socket = self.socket_path();
        if let Ok(stream) = UnixStream::connect(&socket) {
            return Ok(stream);
        }
        if self.flag("DisableAttachMechanism") == Some(true) {
            return Err(AttachError::AttachDisabled(self.pid));
        }
        if !self.handles_sigquit() {
            return Err(AttachError::NotReady(self.pid));
        }
        let name = format!(".attach_pid{}", self.ns_pid);
        let in_cwd = PathBuf::from(format!("/proc/{}/cwd/{name}", self.pid));
        let trigger = [in_cwd, self.root_path(&format!("/tmp/{name}"))]
            .into_iter()
            .find(|path| create_trigger(path))
            .ok_or_else(|| {
                AttachError::Io(format!(
                    "cannot create {name} in the JVM {}'s working folder or /tmp",
                    self.pid
                ))
            })?;
        // SAFETY: kill(2) with a pid and a signal number.
        let sent = unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGQUIT) } == 0;
        let start = Instant::now();
        let mut pause = Duration::from_millis(20);
        let stream = loop {
            if !sent {
                break None;
            }
            if let Ok(stream) = UnixStream::connect(&socket) {
                break Some(stream);
            }
            if start.elapsed() > SOCKET_WAIT || !Path::new(&format!("/proc/{}", self.pid)).exists()
            {
                break None;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(200));
        };
        let _ = std::fs::remove_file(&trigger);
        match stream {
            Some(stream) => Ok(stream),
            None if !sent => Err(AttachError::NoProcess(self.pid)),
            None => Err(AttachError::Timeout {
                pid: self.pid,
                what: "open its attach socket",
                secs: SOCKET_WAIT.as_secs(),
            }),
        }
    }

    /// Sends one command with up to three arguments; returns the status and the output.
    pub fn execute(&self, command: &str, args: [&str; 3]) -> Result<(i32, String), AttachError> {
        let mut stream = self.connect()?;
        let io = |e: std::io::Error| AttachError::Io(format!("JVM {}: {e}", self.pid));
        stream.set_read_timeout(Some(REPLY_WAIT)).map_err(io)?;
        let mut request = b"1\0".to_vec();
        for part in std::iter::once(command).chain(args) {
            request.extend_from_slice(part.as_bytes());
            request.push(0);
        }
        stream.write_all(&request).map_err(io)?;
        let mut reply = Vec::new();
        match stream.take(MAX_REPLY).read_to_end(&mut reply) {
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(AttachError::Timeout {
                    pid: self.pid,
                    what: "answer",
                    secs: REPLY_WAIT.as_secs(),
                })
            }
            result => result.map_err(io)?,
        };
        let reply = String::from_utf8_lossy(&reply);
        let (status, output) = reply.split_once('\n').unwrap_or((&reply, ""));
        let status = status.trim().parse().map_err(|_| {
            AttachError::Io(format!(
                "JVM {}: the reply does not start with a status: {:?}",
                self.pid,
                reply.chars().take(80).collect::<String>()
            ))
        })?;
        Ok((status, output.to_string()))
    }
}

/// The last `NStgid` value of a /proc status file: the pid in the innermost PID namespace.
fn ns_pid(status: &str) -> Option<u32> {
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("NStgid:"))
        .or_else(|| status.lines().find_map(|l| l.strip_prefix("Tgid:")))?;
    line.split_whitespace().last()?.parse().ok()
}

/// Creates an empty trigger file, without following a link.
fn create_trigger(path: &Path) -> bool {
    crate::files::create_no_follow(path).is_ok()
}

/// Runs a diagnostic command (`jcmd <pid> <command>`) in the JVM of host pid `pid`; returns its
/// output.
pub fn jcmd(pid: u32, command: &str) -> Result<String, AttachError> {
    let (status, output) = Target::new(pid)?.execute("jcmd", [command, "", ""])?;
    if status != 0 {
        return Err(AttachError::CommandFailed {
            pid,
            command: command.to_string(),
            status,
            output: output.trim().to_string(),
        });
    }
    Ok(output)
}

/// Loads the agent library `agent` with `options` into the JVM of host pid `pid`.
///
/// When the JVM is in another mount namespace (a container), the library is first copied into
/// its /tmp, since the JVM opens the path in its own file system. The JVM's answer is checked:
/// JDK 9 to 20 reply `return code: N`; JDK 21+ reply status 0 and put errors in the text.
pub fn load_agent(pid: u32, agent: &Path, options: &str) -> Result<(), AttachError> {
    let target = Target::new(pid)?;
    let path = if target.other_mount_namespace() {
        copy_into(&target, agent)?
    } else {
        agent.to_string_lossy().into_owned()
    };
    let (status, output) = target.execute("load", [&path, "true", options])?;
    let output = output.trim();
    if output.contains("EnableDynamicAgentLoading")
        || output.contains("agent loading is not enabled")
    {
        return Err(AttachError::AgentsRefused {
            pid,
            message: output.to_string(),
        });
    }
    let code = output
        .lines()
        .find_map(|line| line.strip_prefix("return code: "))
        .and_then(|code| code.trim().parse::<i32>().ok());
    if status != 0 || code.is_some_and(|code| code != 0) || (code.is_none() && !output.is_empty()) {
        return Err(AttachError::AgentFailed {
            pid,
            agent: path,
            message: format!("status {status}, {output}"),
        });
    }
    Ok(())
}

/// Copies the agent library into the target's /tmp (once per content); returns its path there.
fn copy_into(target: &Target, agent: &Path) -> Result<String, AttachError> {
    let io = |e: std::io::Error| {
        AttachError::Io(format!(
            "copying {} into the JVM {}: {e}",
            agent.display(),
            target.pid
        ))
    };
    let bytes = std::fs::read(agent).map_err(io)?;
    let name = agent
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "libjvm_symbolizer_agent.so".into());
    let inside = format!("/tmp/joularcode-{}-{name}", env!("CARGO_PKG_VERSION"));
    let dest = target.root_path(&inside);
    if std::fs::read(&dest).is_ok_and(|existing| existing == bytes) {
        return Ok(inside);
    }
    let temp = target.root_path(&format!("{inside}.{}", std::process::id()));
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&temp)
            .map_err(io)?;
        file.write_all(&bytes).map_err(io)?;
    }
    std::fs::rename(&temp, &dest).map_err(io)?;
    Ok(inside)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ns_pid_is_the_innermost() {
        assert_eq!(
            ns_pid("Name:\tjava\nTgid:\t4242\nNStgid:\t4242\t7\n"),
            Some(7)
        );
        assert_eq!(ns_pid("Tgid:\t4242\n"), Some(4242));
        assert_eq!(ns_pid("Name:\tx\n"), None);
    }

    #[test]
    fn a_process_without_libjvm_is_not_a_jvm() {
        let err = Target::new(std::process::id()).unwrap_err();
        assert!(matches!(err, AttachError::NotAJvm(_)), "{err}");
        assert!(matches!(
            Target::new(u32::MAX - 1),
            Err(AttachError::NoProcess(_))
        ));
    }
}

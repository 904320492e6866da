//! How a JVM's compiled code gets its names: the symbolizer agent's code map (a launched JVM has
//! the agent from its start; a running one gets it attached, in the background), or, when the
//! agent cannot be loaded, a fallback the session says once: the JDK's perf map when the JVM
//! refuses agents but not attach, else its code cache. With `--no-attach` (and in the daemon,
//! unless `--attach`), no JVM gets the agent: each is named from its code cache.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use joularcode_core::log::{Level, Log};

use super::SessionOptions;
use crate::attach::{self, AttachError};
use crate::foreign::{self, ForeignError};
use crate::jit::codemap::CodeMap;
use crate::launch::{self, LaunchError};
use crate::resolve::JitNames;

/// The options of the symbolizer agent, shared by the subcommands that name compiled frames
/// (`stacks`, `record`, `top`, `daemon`), flattened into each by [`crate::cli`].
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AgentArgs {
    /// The symbolizer agent library (default: the one this program carries, written to
    /// /run/joularcode-bpf).
    #[arg(long, value_name = "FILE")]
    pub agent_path: Option<PathBuf>,
    /// Do not load the symbolizer agent into the JVMs, launched or running: their compiled frames
    /// are then named from the nmethods' debug information in their memory, which places the
    /// methods inlined into them at calls and safepoints only.
    #[arg(long)]
    pub no_attach: bool,
}

/// The daemon's options of the symbolizer agent: unlike the other commands, it loads nothing into
/// the JVMs of the host unless `--attach` is given (docs/daemon.md says what each gives).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DaemonAgentArgs {
    /// Load the symbolizer agent into every JVM profiled: inlined frames are then placed at every
    /// instruction, not only at calls and safepoints. Without it, nothing is loaded into the JVMs
    /// and their compiled frames are named from the nmethods' debug information in their memory.
    #[arg(long)]
    pub attach: bool,
    /// The symbolizer agent library to load with --attach (default: the one this program
    /// carries, written to /run/joularcode-bpf).
    #[arg(long, value_name = "FILE", requires = "attach")]
    pub agent_path: Option<PathBuf>,
}

impl DaemonAgentArgs {
    /// The same choice in the options every command's session starts from.
    pub fn agent_args(&self) -> AgentArgs {
        AgentArgs {
            agent_path: self.agent_path.clone(),
            no_attach: !self.attach,
        }
    }
}

impl AgentArgs {
    /// The options of a command's session: `rate_hz`, this agent, messages to `log`; the rest as
    /// [`SessionOptions::new`] makes them, for the command to change.
    pub fn session_options(&self, rate_hz: u64, log: Arc<dyn Log>) -> SessionOptions {
        SessionOptions {
            rate_hz,
            agent_path: self.agent_path.clone(),
            attach_agent: !self.no_attach,
            ..SessionOptions::new(log)
        }
    }
}

/// An attach of the agent in progress: the names to use once it is done, and the message to say.
pub type Attaching = attach::Background<(JitNames, Option<String>)>;

/// Starts the attaches of the agent to running JVMs.
pub struct Attacher<'a> {
    /// The session's options (where messages go).
    pub options: &'a SessionOptions,
    /// The agent library, or why there is none; `None` when it is not to be loaded.
    pub agent: &'a Option<Result<PathBuf, LaunchError>>,
    /// Whether the absence of the agent was said already (it is said once).
    pub said_no_agent: &'a mut bool,
}

impl Attacher<'_> {
    /// Starts attaching the agent to a running JVM, in the background; `None` when it is not
    /// asked for or not available.
    pub fn start(&mut self, pid: u32, main_class: &str) -> Option<Attaching> {
        let agent = match self.agent.as_ref()? {
            Ok(agent) => agent.clone(),
            Err(e) => {
                if !std::mem::replace(self.said_no_agent, true) {
                    let message = format!(
                        "{e}; compiled frames are named from the JVMs' code caches, with the methods inlined into them at calls and safepoints only"
                    );
                    self.options.log.log(Level::Warning, &message);
                }
                return None;
            }
        };
        let name = format!("JVM {pid} ({main_class})");
        attach::Background::spawn("jp-attach", move |cancel| {
            attach_agent(pid, &agent, &name, cancel)
        })
        .ok()
    }
}

/// The code map the agent of a JVM writes (launched JVMs have the agent from their start).
pub fn code_map(pid: u32) -> JitNames {
    let ns_pid = attach::JvmProcess::new(pid).map_or(pid, |jvm| jvm.ns_pid);
    JitNames::Agent(Box::new(CodeMap::of_process(pid, ns_pid)))
}

/// Loads the agent into a running JVM (unless it runs one already), or picks the fallback:
/// the JDK's perf map when the JVM refuses agents but not attach, else its code cache. Returns
/// the names to use and the message to say once, if any.
fn attach_agent(
    pid: u32,
    agent: &Path,
    name: &str,
    cancel: Arc<AtomicBool>,
) -> (JitNames, Option<String>) {
    let jvm = match attach::JvmProcess::new(pid) {
        Ok(jvm) => jvm.with_cancel(cancel),
        Err(e) => return (JitNames::CodeCache, Some(format!("{name}: {e}"))),
    };
    let map = CodeMap::of_process(pid, jvm.ns_pid);
    match agent_runs(map.path()) {
        Ok(true) => return (JitNames::Agent(Box::new(map)), None),
        Ok(false) => {}
        // What is there would hang or mislead the agent: it is not loaded.
        Err(e) => {
            let message = format!(
                "{name}: {e}; the symbolizer agent is not loaded, and compiled frames are named from the code cache"
            );
            return (JitNames::CodeCache, Some(message));
        }
    }
    let refused = match jvm.load_agent(agent, launch::AGENT_OPTIONS) {
        Ok(()) => return (JitNames::Agent(Box::new(map)), None),
        Err(e) => e,
    };
    let from_scopes = "compiled frames are named from their nmethods' debug information, which places the methods inlined into them at calls and safepoints only";
    if !matches!(refused, AttachError::AttachDisabled(_)) {
        if let Ok(perf_map) = jvm.perf_map() {
            let message = format!(
                "{name}: the symbolizer agent cannot be loaded ({refused}); {from_scopes}, from its code cache and its perf map (Compiler.perfmap)"
            );
            return (JitNames::PerfMap(perf_map), Some(message));
        }
    }
    let message = format!(
        "{name}: the symbolizer agent cannot be loaded ({refused}); {from_scopes}, from its code cache (VMStructs)"
    );
    (JitNames::CodeCache, Some(message))
}

/// Whether an agent holds the lock of the code map at `path` (it keeps it while its JVM runs);
/// an error when something else than a regular file of the JVM's user is there.
fn agent_runs(path: &Path) -> Result<bool, ForeignError> {
    let file = match foreign::open_file(path, u64::MAX) {
        Ok(opened) => opened.file,
        Err(e @ ForeignError::Refused { .. }) => return Err(e),
        Err(ForeignError::Io { .. }) => return Ok(false),
    };
    // SAFETY: flock on a file descriptor this function owns.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } != 0;
    Ok(locked && std::io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK))
}

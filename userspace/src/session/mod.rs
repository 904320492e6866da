//! A profiling session: the sampler, the JVMs it samples, and for each JVM its resolver, its
//! branches and the samples counted (with the time each was taken) since they were last taken
//! ([`Session::take_counts_until`]). The commands are loops over [`Session::pump`].
//!
//! ```text
//! let mut session = Session::start(Targets::Pids(vec![pid]), &options)?;
//! while !session.finished() {
//!     session.pump(Duration::from_millis(100))?;   // receive and resolve the samples
//!     // every cycle ending at end_ns: pump until session.sampled_until() > end_ns (or one
//!     // consumer pass), then session.take_counts_until(end_ns), ...
//! }
//! ```
//!
//! Its parts (see docs/stacks.md): this module, the session's life and its pump, and where the
//! JVMs come from ([`crate::discovery`] says which started and ended; the session tells the
//! sampler); [`jvm`], each JVM's state machine (opening, ready, failed) and what it holds;
//! [`agent`], the symbolizer agent's attach and the fallbacks; [`counts`], the samples counted
//! per thread and branch and the time windows they are taken by. It also removes the code maps
//! that JVMs killed before their agent could remove them left behind ([`stale`]).

mod agent;
pub mod counts;
pub mod jvm;
mod thread_kinds;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::{Duration, Instant};

use joularcode_core::branch::BranchId;
use joularcode_core::log::Log;

use crate::discovery::{
    self, Cgroups, Discovery, DiscoveryError, Launched, Scope, RESCAN_INTERVAL,
};
use crate::jit::stale;
use crate::launch::{self, LaunchError};
use crate::sampler::{Sampler, SamplerError, ThreadTime};
use agent::Attacher;

pub use agent::{AgentArgs, DaemonAgentArgs};
pub use counts::{BranchLimit, NativeStack};
pub use jvm::{ProfiledJvm, ThreadCounts};

/// Samples counted this long before the newest one received are kept as counts only, without
/// their times: [`Session::take_counts_until`] takes them whatever its time. Bounds the memory of
/// a long run that takes its counts only at its end (`stacks`).
const SETTLE_NS: u64 = 10_000_000_000;
/// The most JVMs read at once, each on a thread of its own: a host where thousands of processes
/// map a libjvm.so costs that many threads at most.
const MAX_READERS: usize = 8;
/// The host's /tmp, where the agents of the host's JVMs write their code maps.
const HOST_TMP: &str = "/tmp";
/// How often a pump looks for the JVMs of a launched command and at the JVMs being read, while
/// there are such: the walker unwinds a JVM's frames by their kinds only once the JVM is read,
/// and a JVM's first samples are walked by frame pointers until then.
const STARTING_POLL: Duration = Duration::from_millis(10);

/// What to profile.
#[derive(Debug)]
pub enum Targets {
    /// These running JVMs.
    Pids(Vec<u32>),
    /// Every JVM of the host (or of these cgroups), including those that start later.
    All(Cgroups),
    /// The JVMs this command starts, until it ends.
    Launch(Command),
}

/// How to profile.
#[derive(Clone)]
pub struct SessionOptions {
    /// Samples per second of CPU time of each thread.
    pub rate_hz: u64,
    /// `methods-filtering-prefix`: the frames kept in the application's branch names.
    pub prefixes: Vec<String>,
    /// The agent library (`--agent-path`); by default found beside the executable.
    pub agent_path: Option<PathBuf>,
    /// Load the agent into the JVMs: launched with it, attached to running ones (`--pid`,
    /// `--all`); without it, their inlined frames are named from the nmethods' scopes.
    pub attach_agent: bool,
    /// Also name native frames (for `--native` output).
    pub native_frames: bool,
    /// A bound on each JVM's branches (none: every branch is kept until the JVM ends).
    pub branch_limit: Option<BranchLimit>,
    /// Where messages go.
    pub log: Arc<dyn Log>,
}

impl SessionOptions {
    /// 100 Hz, no prefixes, the agent found beside the executable and attached, no native frames.
    pub fn new(log: Arc<dyn Log>) -> SessionOptions {
        SessionOptions {
            rate_hz: 100,
            prefixes: Vec::new(),
            agent_path: None,
            attach_agent: true,
            native_frames: false,
            branch_limit: None,
            log,
        }
    }
}

/// Why a session cannot start or go on. Each says in one line what failed and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The sampler could not start (privileges, kernel) or track a process.
    #[error("{0}")]
    Sampler(#[from] SamplerError),
    /// A given pid is not a JVM, or cannot be read.
    #[error("{0}")]
    Discovery(#[from] DiscoveryError),
    /// The command could not be launched, or the agent library is missing.
    #[error("{0}")]
    Launch(#[from] LaunchError),
}

/// Where the JVMs come from.
enum Source {
    Discovery {
        discoveries: Vec<Discovery>,
        last_scan: Option<Instant>,
        all: bool,
    },
    Launch {
        child: Child,
        exit: Option<i32>,
        launched: Launched,
    },
}

/// A running profiling session. Dropping it stops sampling (the sampler is unloaded).
pub struct Session {
    sampler: Sampler,
    source: Source,
    jvms: HashMap<u32, ProfiledJvm>,
    options: SessionOptions,
    /// The agent library, or why there is none (said once, when a JVM would have had it);
    /// `None` when the JVMs are not to get it (`--no-attach`).
    agent: Option<Result<PathBuf, LaunchError>>,
    said_no_agent: bool,
    sampled_until: u64,
}

impl Session {
    /// Starts sampling `targets`. Fails with one clear line when a pid is not a JVM, the
    /// privileges or the kernel do not allow sampling, or the command cannot be launched (the
    /// agent library is required then).
    pub fn start(targets: Targets, options: &SessionOptions) -> Result<Session, SessionError> {
        Session::start_sampling(targets, options, None)
    }

    /// [`Session::start`] with a sampler already loaded (`record` loads it first, to know
    /// whether the eBPF mode can run before it opens anything else).
    pub fn with_sampler(
        sampler: Sampler,
        targets: Targets,
        options: &SessionOptions,
    ) -> Result<Session, SessionError> {
        Session::start_sampling(targets, options, Some(sampler))
    }

    fn start_sampling(
        targets: Targets,
        options: &SessionOptions,
        sampler: Option<Sampler>,
    ) -> Result<Session, SessionError> {
        // The agent is required when it is named, and to launch a command with it; without
        // the agent, nothing is written for the JVMs either.
        let agent = match options
            .attach_agent
            .then(|| launch::find_agent(options.agent_path.as_deref()))
        {
            Some(Err(e)) if options.agent_path.is_some() => return Err(e.into()),
            agent => agent,
        };
        let all = matches!(targets, Targets::All(_));
        let (discoveries, command) = match targets {
            Targets::Pids(pids) => {
                let discoveries = pids
                    .into_iter()
                    .map(|pid| Discovery::new(Scope::Pid(pid)))
                    .collect::<Result<Vec<_>, _>>()?;
                (discoveries, None)
            }
            Targets::All(cgroups) => (vec![Discovery::new(Scope::All(cgroups))?], None),
            Targets::Launch(command) => (Vec::new(), Some(command)),
        };
        let (agent, launch_with) = match (agent, command) {
            (Some(Ok(agent)), Some(command)) => {
                launch::java_tool_options(None, &agent)?;
                (Some(Ok(agent.clone())), Some((command, Some(agent))))
            }
            (Some(Err(e)), Some(_)) => return Err(e.into()),
            (None, Some(command)) => (None, Some((command, None))),
            (agent, None) => (agent, None),
        };
        let sampler = match sampler {
            Some(sampler) => sampler,
            None => Sampler::new(options.rate_hz)?,
        };
        let source = match launch_with {
            Some((command, agent)) => Source::Launch {
                child: launch::spawn(command, agent.as_deref(), &sampler)?,
                exit: None,
                launched: Launched::default(),
            },
            None => Source::Discovery {
                discoveries,
                last_scan: None,
                all,
            },
        };
        stale::sweep(Path::new(HOST_TMP));
        let mut session = Session {
            sampler,
            source,
            jvms: HashMap::new(),
            options: options.clone(),
            agent,
            said_no_agent: false,
            sampled_until: 0,
        };
        session.find_jvms()?;
        session.open_jvms()?;
        Ok(session)
    }

    /// The sampler (for the threads' on-CPU times and the samples dropped).
    pub fn sampler(&self) -> &Sampler {
        &self.sampler
    }

    /// The JVMs sampled so far, ended ones included until [`Session::forget_ended`].
    pub fn jvms(&self) -> impl Iterator<Item = &ProfiledJvm> + '_ {
        self.jvms.values()
    }

    /// The JVM of process `pid`, if it is sampled.
    pub fn jvm(&self, pid: u32) -> Option<&ProfiledJvm> {
        self.jvms.get(&pid)
    }

    /// Forgets the JVMs that have ended (after their last counts were taken).
    pub fn forget_ended(&mut self) {
        for jvm in self.jvms.values_mut().filter(|jvm| jvm.ended()) {
            jvm.forget(&self.sampler);
        }
        self.jvms.retain(|_, jvm| !jvm.ended());
    }

    /// Waits up to `timeout` for samples, then resolves and counts every sample available;
    /// follows JVMs that start and end, refreshes the agents' code maps, and notices the end of a
    /// launched command. While a launched command's process may still turn out to be a JVM, or a
    /// JVM is being read, it looks at them every [`STARTING_POLL`] meanwhile.
    pub fn pump(&mut self, timeout: Duration) -> Result<(), SessionError> {
        let mut samples = Vec::new();
        let deadline = Instant::now() + timeout;
        loop {
            let now = Instant::now();
            let left = deadline.saturating_duration_since(now);
            let starting = self.starting(now);
            let wait = if starting {
                left.min(STARTING_POLL)
            } else {
                left
            };
            match self.sampler.samples().recv_timeout(wait) {
                Ok(batch) => {
                    samples = batch;
                    break;
                }
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) if !starting || wait == left => break,
                Err(RecvTimeoutError::Timeout) => {
                    self.find_jvms()?;
                    self.open_jvms()?;
                }
            }
        }
        samples.extend(self.sampler.samples().try_iter().flatten());
        self.find_jvms()?;
        self.open_jvms()?;
        for jvm in self.jvms.values_mut() {
            jvm.finish_attach(&*self.options.log);
        }
        let mut attacher = Attacher {
            options: &self.options,
            agent: &self.agent,
            said_no_agent: &mut self.said_no_agent,
        };
        for jvm in self.jvms.values_mut() {
            jvm.refresh_code_map(&*self.options.log, self.sampled_until);
            jvm.reattach(&mut attacher);
            jvm.resolve_waiting(self.options.native_frames);
        }
        for sample in samples {
            self.sampled_until = self.sampled_until.max(sample.time_ns);
            if let Some(jvm) = self.jvms.get_mut(&sample.pid) {
                jvm.add(sample, self.options.native_frames, true);
            }
        }
        let settle_ns = self.sampled_until.saturating_sub(SETTLE_NS);
        for jvm in self.jvms.values_mut() {
            jvm.settle(settle_ns);
            jvm.refresh_walker(&self.sampler);
        }
        Ok(())
    }

    /// The time (CLOCK_MONOTONIC, as [`crate::sampler::monotonic_ns`]) of the newest sample
    /// received so far, of any process: the sampler delivers its samples in about the order they
    /// were taken, so once this is past a time, the samples taken up to that time are in (and a
    /// sample reaches the session at most one consumer pass after it was taken anyway).
    pub fn sampled_until(&self) -> u64 {
        self.sampled_until
    }

    /// Takes out the samples counted that were taken at or before `until_ns` (CLOCK_MONOTONIC),
    /// by JVM pid, then by thread id; later ones stay for a later take. Exact for an `until_ns`
    /// less than 10 s before [`Session::sampled_until`]; samples older than that are taken
    /// whatever `until_ns`.
    ///
    /// With a [`BranchLimit`], the branches idle for too long are dropped first: the ids of the
    /// counts taken before mean nothing afterwards.
    pub fn take_counts_until(&mut self, until_ns: u64) -> HashMap<u32, HashMap<u32, ThreadCounts>> {
        let native_frames = self.options.native_frames;
        let limit = self.options.branch_limit;
        let now = Instant::now();
        self.jvms
            .iter_mut()
            .map(|(&pid, jvm)| {
                jvm.resolve_waiting(native_frames);
                (pid, jvm.take_counts_until(until_ns, limit, now))
            })
            .collect()
    }

    /// Notes the threads' times the sampler gave (`times`, of every JVM): the names of the
    /// threads still alive under the same name need not be read again from /proc at the next
    /// cycle ([`ProfiledJvm::note_threads`]).
    pub fn note_threads(&mut self, times: &[ThreadTime]) {
        let mut by_pid: HashMap<u32, Vec<&ThreadTime>> = HashMap::new();
        for time in times {
            by_pid.entry(time.pid).or_default().push(time);
        }
        for (pid, jvm) in &mut self.jvms {
            let times = by_pid.remove(pid).unwrap_or_default();
            jvm.note_threads(times.into_iter());
        }
    }

    /// Takes out every sample counted so far ([`Session::take_counts_until`] with no limit).
    pub fn take_counts(&mut self) -> HashMap<u32, HashMap<u32, ThreadCounts>> {
        self.take_counts_until(u64::MAX)
    }

    /// With native frames: the samples counted since the last call by JVM pid, then by branch
    /// and the native frames newer than its Java frames.
    pub fn take_native_counts(&mut self) -> HashMap<u32, HashMap<(BranchId, NativeStack), u64>> {
        let native_frames = self.options.native_frames;
        self.jvms
            .iter_mut()
            .map(|(&pid, jvm)| {
                jvm.resolve_waiting(native_frames);
                (pid, jvm.take_native_counts())
            })
            .collect()
    }

    /// The launched command's exit code (128 + signal if a signal ended it), once it has ended.
    pub fn launched_exit(&mut self) -> Option<i32> {
        match &mut self.source {
            Source::Launch { child, exit, .. } => {
                if exit.is_none() {
                    if let Ok(Some(status)) = child.try_wait() {
                        *exit = Some(launch::exit_code(status));
                    }
                }
                *exit
            }
            Source::Discovery { .. } => None,
        }
    }

    /// Stops sampling (the sampler is unloaded) and hands over the launched command, if there is
    /// one, for the caller to wait for.
    pub fn stop(self) -> Option<Child> {
        match self.source {
            Source::Launch { child, .. } => Some(child),
            Source::Discovery { .. } => None,
        }
    }

    /// Whether there is nothing left to sample: the launched command has ended, or every JVM
    /// given by pid has. Never true for [`Targets::All`].
    pub fn finished(&mut self) -> bool {
        if self.launched_exit().is_some() {
            return true;
        }
        match &self.source {
            Source::Discovery { all: false, .. } => {
                !self.jvms.is_empty() && self.jvms.values().all(ProfiledJvm::ended)
            }
            _ => false,
        }
    }

    /// Whether a launched command's process may still turn out to be a JVM, or a JVM is being
    /// read, at `now`.
    fn starting(&self, now: Instant) -> bool {
        matches!(&self.source, Source::Launch { launched, .. } if launched.watching(now))
            || self.jvms.values().any(ProfiledJvm::opening)
    }

    /// Looks for JVMs that started or ended: discovery's rescans (`--pid`, `--all`), or the
    /// launched command's processes that map libjvm.so. The JVMs that ended are untracked here;
    /// those that started are tracked once opened ([`Session::open_jvms`]).
    fn find_jvms(&mut self) -> Result<(), SessionError> {
        let (started, ended, launched) = match &mut self.source {
            Source::Discovery {
                discoveries,
                last_scan,
                ..
            } => {
                if last_scan.is_some_and(|at| at.elapsed() < RESCAN_INTERVAL) {
                    return Ok(());
                }
                *last_scan = Some(Instant::now());
                let (mut started, mut ended) = (Vec::new(), Vec::new());
                for discovery in discoveries.iter_mut() {
                    let changes = discovery.rescan();
                    started.extend(changes.started);
                    ended.extend(changes.ended);
                }
                for &pid in &ended {
                    self.sampler.untrack(pid);
                }
                (started, ended, false)
            }
            Source::Launch { launched, .. } => {
                let jvms = &self.jvms;
                let started =
                    launched.started(self.sampler.tracked(), |pid| jvms.contains_key(&pid));
                let ended = jvms
                    .values()
                    .filter(|jvm| !jvm.ended() && !discovery::alive(jvm.pid()))
                    .map(ProfiledJvm::pid)
                    .collect();
                (started, ended, true)
            }
        };
        if !ended.is_empty() {
            // A JVM killed before its agent could remove its code map leaves it behind.
            stale::sweep(Path::new(HOST_TMP));
        }
        for pid in ended {
            if let Some(jvm) = self.jvms.get_mut(&pid) {
                jvm.end();
            }
        }
        for pid in started {
            self.jvms
                .insert(pid, ProfiledJvm::new(pid, launched, &self.options));
        }
        Ok(())
    }

    /// Opens the JVMs not opened yet, when it is time to try again ([`ProfiledJvm`]'s states),
    /// [`MAX_READERS`] at a time. With every JVM of the host, one that cannot be sampled is given
    /// up alone, said in one SEVERE line; a JVM given by pid that cannot be ends the session.
    fn open_jvms(&mut self) -> Result<(), SessionError> {
        let now = Instant::now();
        let all = matches!(self.source, Source::Discovery { all: true, .. });
        let mut attacher = Attacher {
            options: &self.options,
            agent: &self.agent,
            said_no_agent: &mut self.said_no_agent,
        };
        let mut free_readers =
            MAX_READERS.saturating_sub(self.jvms.values().filter(|jvm| jvm.reading()).count());
        for jvm in self.jvms.values_mut() {
            let opened = jvm.open(
                now,
                &self.sampler,
                &self.options,
                &mut attacher,
                &mut free_readers,
            );
            match opened {
                Err(e) if all => jvm.give_up(&e, &*self.options.log),
                opened => opened?,
            }
        }
        Ok(())
    }
}

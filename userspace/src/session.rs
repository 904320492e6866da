//! A profiling session: the sampler, the JVMs it samples, and for each JVM its resolver, its
//! branches and the samples counted (with the time each was taken) since they were last taken
//! ([`Session::take_counts_until`]). The `stacks` and `record` commands are loops over
//! [`Session::pump`].
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
//! What it does for each JVM (see docs/stacks.md):
//! - opens it with the HotSpot reader once (retried while the JVM starts);
//! - names compiled code with the symbolizer agent's code map: a launched JVM gets the agent at
//!   start; a running one gets it attached (in the background), unless it refuses, in which case
//!   the JDK's perf map or its code cache name the outer methods, and the session says once
//!   which fallback is used;
//! - tells the sampler's stack walker how to unwind its HotSpot frames, and of its Java threads;
//! - classifies its threads by name (`[GC]`, `[JIT compiler]`, `[VM]`);
//! - counts each sample in its thread's branch;
//! - removes the code maps that JVMs killed before their agent could remove them left behind
//!   ([`stale`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::{Duration, Instant};

use joularcode_core::attribution::ThreadKind;
use joularcode_core::branch::{BranchId, Branches, UNKNOWN};
use joularcode_core::log::{Level, Log};

use crate::attach::{self, AttachError};
use crate::discovery::{self, Discovery, DiscoveryError, Scope, RESCAN_INTERVAL};
use crate::foreign::ForeignError;
use crate::hotspot::HotSpot;
use crate::jit::codemap::{CodeMap, CodeMapError};
use crate::jit::stale;
use crate::launch;
use crate::resolve::{JitNames, ResolveStats, Resolver};
use crate::sampler::{Sample, Sampler, SamplerError, WalkedJvm};
use crate::thread_names::{self, JvmThread};

/// How often opening a starting JVM is retried, and for how long.
const OPEN_RETRY: Duration = Duration::from_millis(250);
const OPEN_GIVE_UP: Duration = Duration::from_secs(20);
/// Samples kept per JVM while it cannot be opened yet (resolved once it can).
const MAX_PENDING: usize = 20_000;
/// A process of a launched command is checked this many times for libjvm.so (after its start or
/// its last exec) before it is taken for something else than a JVM.
const LAUNCH_CHECKS: u32 = 20;
/// Samples counted this long before the newest one received are kept as counts only, without
/// their times: [`Session::take_counts_until`] takes them whatever its time. Bounds the memory of
/// a long run that takes its counts only at its end (`stacks`).
const SETTLE_NS: u64 = 10_000_000_000;
/// The host's /tmp, where the agents of the host's JVMs write their code maps.
const HOST_TMP: &str = "/tmp";
/// How long an agent's code map may stay unreadable (not written yet) before it is given up.
const MAP_PATIENCE: Duration = Duration::from_secs(10);

/// What to profile.
#[derive(Debug)]
pub enum Targets {
    /// These running JVMs.
    Pids(Vec<u32>),
    /// Every JVM of the host, including those that start later.
    All,
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
    /// Attach the agent to running JVMs (`--pid`, `--all`).
    pub attach_agent: bool,
    /// Also name native frames (for `--native` output).
    pub native_frames: bool,
    /// A bound on each JVM's branches (none: every branch is kept until the JVM ends).
    pub branch_limit: Option<BranchLimit>,
    /// Where messages go.
    pub log: Arc<dyn Log>,
}

/// A bound on each JVM's branches, for a session that runs for weeks whatever the JVMs do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BranchLimit {
    /// The most distinct branches of a JVM: the stacks beyond are counted in one `[other]`
    /// branch ([`Branches::with_limit`]).
    pub max: usize,
    /// A branch whose samples were last taken this long ago is dropped (at the next take of the
    /// counts, once a period, or at once when the table is full); it starts afresh if it comes
    /// back.
    pub idle: Duration,
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
    /// The command could not be launched (or the agent library is missing).
    #[error("{0}")]
    Launch(String),
}

/// The samples of one thread taken out of the session ([`Session::take_counts_until`]), in the
/// branches of [`ProfiledJvm::branches`].
pub use joularcode_core::threads::ThreadCounts;

/// One sample counted, until it is taken out of the session.
struct Counted {
    /// When it was taken (CLOCK_MONOTONIC, [`Sample::time_ns`]).
    time_ns: u64,
    tid: u32,
    branch: BranchId,
}

/// Native frames (oldest first) under a branch, as `--native` shows them.
pub type NativeStack = Arc<[Arc<str>]>;

/// How far a JVM is from being resolvable.
enum State {
    /// Not opened yet: its samples wait.
    Opening {
        since: Instant,
        next_try: Instant,
        pending: Vec<Sample>,
    },
    /// Opened: samples are resolved as they come.
    Ready(Box<Resolver>),
    /// It could not be opened: its samples are `[unknown]`.
    Failed,
}

/// One JVM of the session.
pub struct ProfiledJvm {
    pid: u32,
    main_class: String,
    launched: bool,
    /// The sampler samples it: a launched JVM from its start, a running one once opened.
    tracked: bool,
    ended: bool,
    branches: Branches,
    state: State,
    /// Samples to resolve again after the next refresh of the code map: they hold compiled code
    /// the agent had not reported yet ([`Resolver::resolve_or_wait`]).
    waiting: Vec<Sample>,
    counted: Vec<Counted>,
    settled: HashMap<u32, HashMap<BranchId, u64>>,
    thread_kinds: HashMap<u32, (String, Option<JvmThread>)>,
    native: HashMap<(BranchId, NativeStack), u64>,
    attaching: Option<attach::Background<(JitNames, Option<String>)>>,
    unresolved: u64,
    map_failing_since: Option<Instant>,
    walked: Option<WalkedJvm>,
    /// With a [`BranchLimit`]: when each branch's samples were last taken, and when idle
    /// branches were last dropped.
    taken_at: HashMap<BranchId, Instant>,
    trimmed_at: Instant,
}

impl ProfiledJvm {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Its main class (or jar, or module) from its command line, fit for a folder name.
    pub fn main_class(&self) -> &str {
        &self.main_class
    }

    /// Its branches: the names of the [`BranchId`]s of its counts.
    pub fn branches(&self) -> &Branches {
        &self.branches
    }

    /// Whether it has ended (it stays listed until [`Session::forget_ended`]).
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Samples that wait until the JVM can be read (it is starting); they are counted once it
    /// can.
    pub fn waiting_samples(&self) -> u64 {
        match &self.state {
            State::Opening { pending, .. } => pending.len() as u64,
            _ => 0,
        }
    }

    /// What resolving met so far; samples that could not be resolved at all (the JVM could not be
    /// read) count as samples with an unknown frame.
    pub fn stats(&self) -> ResolveStats {
        let mut stats = match &self.state {
            State::Ready(resolver) => resolver.stats(),
            _ => ResolveStats::default(),
        };
        stats.samples += self.unresolved;
        stats.unknown_frames += self.unresolved;
        stats.without_java_frame += self.unresolved;
        stats
    }
}

/// Processes of a launched command, as far as they are known.
struct Descendant {
    comm: String,
    checks: u32,
    jvm: bool,
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
        seen: HashMap<u32, Descendant>,
    },
}

/// A running profiling session. Dropping it stops sampling (the sampler is unloaded).
pub struct Session {
    sampler: Sampler,
    source: Source,
    jvms: HashMap<u32, ProfiledJvm>,
    options: SessionOptions,
    agent: Result<PathBuf, String>,
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
        let agent = launch::find_agent(options.agent_path.as_deref());
        if options.agent_path.is_some() {
            agent
                .as_ref()
                .map_err(|e| SessionError::Launch(e.clone()))?;
        }
        let all = matches!(targets, Targets::All);
        let (discoveries, command) = match targets {
            Targets::Pids(pids) => {
                let discoveries = pids
                    .into_iter()
                    .map(|pid| Discovery::new(Scope::Pid(pid)))
                    .collect::<Result<Vec<_>, _>>()?;
                (discoveries, None)
            }
            Targets::All => (vec![Discovery::new(Scope::All)?], None),
            Targets::Launch(command) => {
                let agent = agent
                    .as_ref()
                    .map_err(|e| SessionError::Launch(e.clone()))?;
                launch::java_tool_options(None, agent).map_err(SessionError::Launch)?;
                (Vec::new(), Some(command))
            }
        };
        let sampler = match sampler {
            Some(sampler) => sampler,
            None => Sampler::new(options.rate_hz)?,
        };
        let source = match command {
            Some(command) => {
                let agent = agent
                    .as_ref()
                    .map_err(|e| SessionError::Launch(e.clone()))?;
                let child =
                    launch::spawn(command, agent, &sampler).map_err(SessionError::Launch)?;
                Source::Launch {
                    child,
                    exit: None,
                    seen: HashMap::new(),
                }
            }
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
        for jvm in self.jvms.values_mut().filter(|jvm| jvm.ended) {
            if let Some(walked) = jvm.walked.take() {
                walked.forget(&self.sampler);
            }
        }
        self.jvms.retain(|_, jvm| !jvm.ended);
    }

    /// Waits up to `timeout` for samples, then resolves and counts every sample available;
    /// follows JVMs that start and end, refreshes the agents' code maps, and notices the end of a
    /// launched command.
    pub fn pump(&mut self, timeout: Duration) -> Result<(), SessionError> {
        let mut samples = Vec::new();
        match self.sampler.samples().recv_timeout(timeout) {
            Ok(sample) => samples.push(sample),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
        }
        samples.extend(self.sampler.samples().try_iter());
        self.find_jvms()?;
        self.open_jvms()?;
        self.finish_attaches();
        for jvm in self.jvms.values_mut() {
            jvm.refresh_code_map(&*self.options.log);
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
            if let (Some(walked), State::Ready(resolver)) = (&mut jvm.walked, &jvm.state) {
                walked.refresh(&self.sampler, resolver.hotspot());
            }
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
                if let Some(limit) = limit {
                    jvm.drop_idle_branches(limit, now);
                }
                let counts = jvm.take_counts_until(until_ns);
                if limit.is_some() {
                    for thread in counts.values() {
                        for &branch in thread.counts.keys() {
                            jvm.taken_at.insert(branch, now);
                        }
                    }
                }
                (pid, counts)
            })
            .collect()
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
                (pid, std::mem::take(&mut jvm.native))
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
                !self.jvms.is_empty() && self.jvms.values().all(|jvm| jvm.ended)
            }
            _ => false,
        }
    }

    /// Looks for JVMs that started or ended.
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
                    // Tracked once opened ([`Session::open_jvms`]), not here.
                    let changes = discovery.rescan();
                    started.extend(changes.started);
                    ended.extend(changes.ended);
                }
                for &pid in &ended {
                    self.sampler.untrack(pid);
                }
                (started, ended, false)
            }
            Source::Launch { seen, .. } => {
                let (started, ended) = launched_jvms(&self.sampler, seen, &self.jvms);
                (started, ended, true)
            }
        };
        if !ended.is_empty() {
            // A JVM killed before its agent could remove its code map leaves it behind.
            stale::sweep(Path::new(HOST_TMP));
        }
        for pid in ended {
            if let Some(jvm) = self.jvms.get_mut(&pid) {
                jvm.ended = true;
            }
        }
        for pid in started {
            self.jvms
                .insert(pid, ProfiledJvm::new(pid, launched, &self.options));
        }
        Ok(())
    }

    /// Opens the JVMs not opened yet (when it is time to try again), and starts sampling the
    /// running JVMs found by discovery once the stack walker knows them: a JVM that has run a
    /// while holds compiled code without frame pointers, which a walk by frame pointers (all
    /// the sampler can do before) cuts short or, worse, steps over (a compiled leaf that keeps
    /// its interpreted caller's rbp hides that caller). A JVM that cannot be read yet is
    /// sampled at once, as a launched one is from its start.
    fn open_jvms(&mut self) -> Result<(), SessionError> {
        let now = Instant::now();
        let mut attacher = Attacher {
            options: &self.options,
            agent: &self.agent,
            said_no_agent: &mut self.said_no_agent,
        };
        for jvm in self.jvms.values_mut() {
            let State::Opening {
                since,
                next_try,
                pending,
            } = &mut jvm.state
            else {
                continue;
            };
            if now < *next_try {
                continue;
            }
            match HotSpot::open(jvm.pid) {
                Ok(hotspot) => {
                    stale::sweep_own_tmp(jvm.pid);
                    let pending = std::mem::take(pending);
                    match WalkedJvm::register(&self.sampler, &hotspot) {
                        Ok(walked) => jvm.walked = Some(walked),
                        Err(e) => {
                            let message = format!(
                                "JVM {} ({}): {e}; its stacks are walked by frame pointers only, \
                                 so JIT-compiled frames without -XX:+PreserveFramePointer cut them short",
                                jvm.pid, jvm.main_class
                            );
                            self.options.log.log(Level::Warning, &message);
                        }
                    }
                    let jit = if jvm.launched {
                        agent_code_map(jvm.pid)
                    } else {
                        JitNames::CodeCache
                    };
                    let mut resolver = Resolver::new(hotspot, jit, self.options.native_frames);
                    // The waiting samples need the code the agent has reported so far; a map not
                    // written yet is waited for by the next pumps.
                    let _ = resolver.refresh();
                    jvm.state = State::Ready(Box::new(resolver));
                    if !jvm.launched {
                        jvm.attaching = attacher.start(jvm.pid, &jvm.main_class);
                    }
                    for sample in pending {
                        jvm.add(sample, self.options.native_frames, true);
                    }
                }
                Err(e) if jvm.ended || since.elapsed() > OPEN_GIVE_UP => {
                    let message = format!(
                        "JVM {} ({}) cannot be read, its samples are {UNKNOWN}: {e}",
                        jvm.pid, jvm.main_class
                    );
                    self.options.log.log(Level::Warning, &message);
                    let pending = std::mem::take(pending);
                    jvm.state = State::Failed;
                    for sample in pending {
                        jvm.add(sample, self.options.native_frames, true);
                    }
                }
                Err(_) => *next_try = now + OPEN_RETRY,
            }
            if !jvm.tracked {
                jvm.tracked = true;
                if let Err(e) = self.sampler.track(jvm.pid) {
                    if discovery::alive(jvm.pid) {
                        return Err(e.into());
                    }
                    jvm.ended = true;
                }
            }
        }
        Ok(())
    }

    /// Takes the outcome of the attaches that are done, and says which fallback is in use.
    fn finish_attaches(&mut self) {
        for jvm in self.jvms.values_mut() {
            if !jvm.attaching.as_ref().is_some_and(|a| a.is_finished()) {
                continue;
            }
            let Some((jit, message)) = jvm.attaching.take().and_then(attach::Background::join)
            else {
                continue;
            };
            if let Some(message) = message {
                self.options.log.log(Level::Warning, &message);
            }
            if let State::Ready(resolver) = &mut jvm.state {
                resolver.set_jit(jit);
            }
        }
    }
}

/// Starts the attaches of the agent to running JVMs.
struct Attacher<'a> {
    options: &'a SessionOptions,
    agent: &'a Result<PathBuf, String>,
    said_no_agent: &'a mut bool,
}

impl Attacher<'_> {
    /// Starts attaching the agent to a running JVM, in the background; `None` when it is not
    /// asked for or not available.
    fn start(
        &mut self,
        pid: u32,
        main_class: &str,
    ) -> Option<attach::Background<(JitNames, Option<String>)>> {
        if !self.options.attach_agent {
            return None;
        }
        let agent = match self.agent {
            Ok(agent) => agent.clone(),
            Err(e) => {
                if !std::mem::replace(self.said_no_agent, true) {
                    let message = format!(
                        "{e}; compiled frames are named from the JVMs' code caches, by their outer methods only"
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

impl ProfiledJvm {
    fn new(pid: u32, launched: bool, options: &SessionOptions) -> ProfiledJvm {
        let now = Instant::now();
        let branches = match options.branch_limit {
            Some(limit) => Branches::with_limit(&options.prefixes, limit.max),
            None => Branches::new(&options.prefixes),
        };
        ProfiledJvm {
            pid,
            main_class: main_class_of(pid),
            launched,
            tracked: launched,
            ended: false,
            branches,
            state: State::Opening {
                since: now,
                next_try: now,
                pending: Vec::new(),
            },
            waiting: Vec::new(),
            counted: Vec::new(),
            settled: HashMap::new(),
            thread_kinds: HashMap::new(),
            native: HashMap::new(),
            attaching: None,
            unresolved: 0,
            map_failing_since: None,
            walked: None,
            taken_at: HashMap::new(),
            trimmed_at: now,
        }
    }

    /// Drops the branches whose samples were last taken `limit.idle` ago or more, once per
    /// `limit.idle`, or at once when the table is full; the branches of the samples not taken
    /// yet stay. The counts held are moved to the new ids.
    fn drop_idle_branches(&mut self, limit: BranchLimit, now: Instant) {
        let full = self.branches.len() >= limit.max;
        if !full && now.duration_since(self.trimmed_at) < limit.idle {
            return;
        }
        self.trimmed_at = now;
        let mut keep: std::collections::HashSet<BranchId> = self
            .taken_at
            .iter()
            .filter(|(_, &at)| now.duration_since(at) < limit.idle)
            .map(|(&branch, _)| branch)
            .collect();
        keep.extend(self.counted.iter().map(|counted| counted.branch));
        keep.extend(
            self.settled
                .values()
                .flat_map(|counts| counts.keys().copied()),
        );
        keep.extend(self.native.keys().map(|(branch, _)| *branch));
        if keep.len() >= self.branches.len() {
            return;
        }
        let (branches, remap) = self.branches.retain(|branch| keep.contains(&branch));
        self.branches = branches;
        self.counted
            .retain_mut(|counted| match remap.get(counted.branch) {
                Some(branch) => {
                    counted.branch = branch;
                    true
                }
                None => false,
            });
        for counts in self.settled.values_mut() {
            *counts = std::mem::take(counts)
                .into_iter()
                .filter_map(|(branch, n)| Some((remap.get(branch)?, n)))
                .collect();
        }
        self.native = std::mem::take(&mut self.native)
            .into_iter()
            .filter_map(|((branch, stack), n)| Some(((remap.get(branch)?, stack), n)))
            .collect();
        self.taken_at = std::mem::take(&mut self.taken_at)
            .into_iter()
            .filter_map(|(branch, at)| Some((remap.get(branch)?, at)))
            .collect();
    }

    /// Reads what the agent appended to the code map. A map that cannot be read for
    /// [`MAP_PATIENCE`] while the JVM runs is given up, once, for the code cache; a JVM that has
    /// just ended takes its map with it, which is no reason to say anything.
    fn refresh_code_map(&mut self, log: &dyn Log) {
        let State::Ready(resolver) = &mut self.state else {
            return;
        };
        let give_up = |e: &dyn std::fmt::Display| {
            format!(
                "JVM {} ({}): {e}; compiled frames are named from its code cache (outer methods only)",
                self.pid, self.main_class
            )
        };
        match resolver.refresh() {
            Ok(()) => self.map_failing_since = None,
            Err(e @ CodeMapError::Full { .. }) => {
                log.log(Level::Warning, &format!("JVM {}: {e}", self.pid));
            }
            Err(_) if self.ended || !discovery::alive(self.pid) => {}
            Err(e) if e.is_refused() => {
                log.log(Level::Warning, &give_up(&e));
                resolver.set_jit(JitNames::CodeCache);
            }
            Err(e) => {
                let since = *self.map_failing_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= MAP_PATIENCE {
                    log.log(Level::Warning, &give_up(&e));
                    resolver.set_jit(JitNames::CodeCache);
                }
            }
        }
    }

    /// The samples counted that were taken at or before `until_ns`, by thread. The names of the
    /// threads whose samples are all taken are read again when they are next sampled (a tid can
    /// be reused, a thread renamed).
    fn take_counts_until(&mut self, until_ns: u64) -> HashMap<u32, ThreadCounts> {
        self.settle(until_ns.saturating_add(1));
        let threads = std::mem::take(&mut self.settled)
            .into_iter()
            .map(|(tid, counts)| {
                let (name, kind) = self.thread_kinds.get(&tid).cloned().unwrap_or_default();
                let kind = if kind.is_some() {
                    ThreadKind::Jvm
                } else {
                    ThreadKind::Java
                };
                (tid, ThreadCounts { name, kind, counts })
            })
            .collect();
        let waiting: std::collections::HashSet<u32> =
            self.counted.iter().map(|counted| counted.tid).collect();
        self.thread_kinds.retain(|tid, _| waiting.contains(tid));
        threads
    }

    /// Moves the samples taken before `before_ns` from the counted samples to the settled counts.
    fn settle(&mut self, before_ns: u64) {
        if !self
            .counted
            .iter()
            .any(|counted| counted.time_ns < before_ns)
        {
            return;
        }
        let (old, recent): (Vec<Counted>, Vec<Counted>) = std::mem::take(&mut self.counted)
            .into_iter()
            .partition(|counted| counted.time_ns < before_ns);
        self.counted = recent;
        for counted in old {
            *self
                .settled
                .entry(counted.tid)
                .or_default()
                .entry(counted.branch)
                .or_insert(0) += 1;
        }
    }

    /// Resolves the samples that waited for a refresh of the code map, with what it holds now.
    fn resolve_waiting(&mut self, native_frames: bool) {
        for sample in std::mem::take(&mut self.waiting) {
            self.add(sample, native_frames, false);
        }
    }

    /// Resolves and counts one sample, or keeps it until the JVM can be read, or (when
    /// `patient`) until the next refresh of the code map if it holds compiled code the agent has
    /// not reported yet.
    fn add(&mut self, sample: Sample, native_frames: bool, patient: bool) {
        if let Some(walked) = &mut self.walked {
            walked.saw(&sample);
        }
        let kind = self
            .thread_kinds
            .entry(sample.tid)
            .or_insert_with(|| {
                let name = thread_names::thread_name(sample.pid, sample.tid).unwrap_or_default();
                let kind = thread_names::classify(&name);
                (name, kind)
            })
            .1;
        let (branch, native) = match &mut self.state {
            State::Opening { pending, .. } => {
                if pending.len() < MAX_PENDING {
                    pending.push(sample);
                } else {
                    self.unresolved += 1;
                }
                return;
            }
            State::Ready(resolver) => {
                let resolved = if patient {
                    match resolver.resolve_or_wait(&sample, kind, &mut self.branches) {
                        Some(resolved) => resolved,
                        None => {
                            self.waiting.push(sample);
                            return;
                        }
                    }
                } else {
                    resolver.resolve(&sample, kind, &mut self.branches)
                };
                (resolved.branch, resolved.native)
            }
            State::Failed => {
                self.unresolved += 1;
                let frame = match kind {
                    Some(thread) => self.branches.jvm_frame(thread.frame()),
                    None => self.branches.jvm_frame(UNKNOWN),
                };
                (self.branches.branch(&[frame]), Vec::new())
            }
        };
        self.counted.push(Counted {
            time_ns: sample.time_ns,
            tid: sample.tid,
            branch,
        });
        if native_frames {
            *self.native.entry((branch, native.into())).or_insert(0) += 1;
        }
    }
}

/// The code map the agent of a JVM writes (launched JVMs have the agent from their start).
fn agent_code_map(pid: u32) -> JitNames {
    let ns_pid = attach::JvmProcess::new(pid).map_or(pid, |target| target.ns_pid);
    JitNames::Agent(Box::new(CodeMap::of_process(pid, ns_pid)))
}

/// Loads the agent into a running JVM (unless it runs one already), or picks the fallback:
/// the JDK's perf map when the JVM refuses agents but not attach, else its code cache. Returns
/// the names to use and the message to say once, if any.
fn attach_agent(
    pid: u32,
    agent: &std::path::Path,
    name: &str,
    cancel: Arc<AtomicBool>,
) -> (JitNames, Option<String>) {
    let target = match attach::JvmProcess::new(pid) {
        Ok(target) => target.with_cancel(cancel),
        Err(e) => return (JitNames::CodeCache, Some(format!("{name}: {e}"))),
    };
    let map = CodeMap::of_process(pid, target.ns_pid);
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
    let refused = match target.load_agent(agent, launch::AGENT_OPTIONS) {
        Ok(()) => return (JitNames::Agent(Box::new(map)), None),
        Err(e) => e,
    };
    let outer_only = "compiled frames are named by their outer method only (methods inlined into them are not shown)";
    if !matches!(refused, AttachError::AttachDisabled(_)) {
        if let Ok(perf_map) = target.perf_map() {
            let message = format!(
                "{name}: the symbolizer agent cannot be loaded ({refused}); {outer_only}, from its code cache and its perf map (Compiler.perfmap)"
            );
            return (JitNames::PerfMap(perf_map), Some(message));
        }
    }
    let message = format!(
        "{name}: the symbolizer agent cannot be loaded ({refused}); {outer_only}, from its code cache (VMStructs)"
    );
    (JitNames::CodeCache, Some(message))
}

/// Whether an agent holds the lock of the code map at `path` (it keeps it while its JVM runs);
/// an error when something else than a regular file of the JVM's user is there.
fn agent_runs(path: &std::path::Path) -> Result<bool, ForeignError> {
    use std::os::fd::AsRawFd;
    let file = match crate::foreign::open_file(path, u64::MAX) {
        Ok(opened) => opened.file,
        Err(e @ ForeignError::Refused { .. }) => return Err(e),
        Err(ForeignError::Io { .. }) => return Ok(false),
    };
    // SAFETY: flock on a file descriptor this function owns.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } != 0;
    Ok(locked && std::io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK))
}

/// The JVMs of a launched command that started and ended since the last look: its processes
/// are all tracked by the sampler; those that map libjvm.so are JVMs.
fn launched_jvms(
    sampler: &Sampler,
    seen: &mut HashMap<u32, Descendant>,
    jvms: &HashMap<u32, ProfiledJvm>,
) -> (Vec<u32>, Vec<u32>) {
    let proc = std::path::Path::new("/proc");
    let mut started = Vec::new();
    for pid in sampler.tracked() {
        let Some(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok() else {
            continue;
        };
        let entry = seen.entry(pid).or_insert_with(|| Descendant {
            comm: comm.clone(),
            checks: 0,
            jvm: false,
        });
        if entry.comm != comm {
            *entry = Descendant {
                comm,
                checks: 0,
                jvm: false,
            };
        }
        if !entry.jvm && entry.checks < LAUNCH_CHECKS {
            entry.checks += 1;
            entry.jvm = discovery::maps_libjvm(proc, pid) == Ok(true);
            if entry.jvm && !jvms.contains_key(&pid) {
                started.push(pid);
            }
        }
    }
    let ended = jvms
        .values()
        .filter(|jvm| !jvm.ended && !discovery::alive(jvm.pid))
        .map(|jvm| jvm.pid)
        .collect();
    seen.retain(|&pid, _| discovery::alive(pid));
    (started, ended)
}

/// The main class of JVM `pid`, from its command line (see [`main_class`]).
fn main_class_of(pid: u32) -> String {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<String> = cmdline
        .split(|&b| b == 0)
        .filter(|arg| !arg.is_empty())
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect();
    main_class(&args)
}

/// Launcher options followed by a separate value.
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
    "--source",
];

/// The main class of a JVM from its arguments (`args[0]` is the program): the first argument
/// after the options, the jar's file name for `-jar x.jar`, the class (or module) for
/// `-m module/class`; the program's name when there is none. Characters other than letters,
/// digits, `.`, `_`, `-` and `$` become `_`, so it fits in a folder name.
pub fn main_class(args: &[String]) -> String {
    let mut rest = args.iter().skip(1);
    let mut found = None;
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "-jar" => {
                found = rest
                    .next()
                    .map(|jar| jar.rsplit('/').next().unwrap_or(jar).to_string());
                break;
            }
            "-m" | "--module" => {
                found = rest
                    .next()
                    .map(|module| module.rsplit('/').next().unwrap_or(module).to_string());
                break;
            }
            option if OPTIONS_WITH_VALUE.contains(&option) => {
                rest.next();
            }
            option if option.starts_with('-') => {}
            class => {
                found = Some(class.to_string());
                break;
            }
        }
    }
    let name = found
        .or_else(|| {
            args.first()
                .map(|program| program.rsplit('/').next().unwrap_or(program).to_string())
        })
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "jvm".to_string());
    joularcode_core::names::fit_for_file_name(&name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use joularcode_core::log::Recorded;

    fn args(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn main_classes_from_command_lines() {
        for (line, class) in [
            (
                "java -cp /a:/b -Xint com.example.Main arg",
                "com.example.Main",
            ),
            (
                "/usr/bin/java -jar /opt/app/my-app.jar --port 80",
                "my-app.jar",
            ),
            (
                "java --module-path mods -m app.mod/com.example.App",
                "com.example.App",
            ),
            ("java --module app.mod", "app.mod"),
            (
                "java -XX:+UseG1GC -Dx=1 --add-opens java.base/java.lang=ALL-UNNAMED Main",
                "Main",
            ),
            ("java -version", "java"),
            ("java Weird:Name*", "Weird_Name_"),
        ] {
            assert_eq!(main_class(&args(line)), class, "{line}");
        }
        assert_eq!(main_class(&[]), "jvm");
    }

    #[test]
    fn counts_are_taken_up_to_a_time_and_the_later_ones_kept() {
        let pid = std::process::id();
        let mut jvm = ProfiledJvm::new(
            pid,
            false,
            &SessionOptions::new(Arc::new(Recorded::default())),
        );
        jvm.state = State::Failed;
        let sample = |tid: u32, time_ns: u64| Sample {
            pid,
            tid,
            cpu: 0,
            time_ns,
            kernel: false,
            jvm: false,
            java_thread: false,
            scanned: false,
            ip: 0,
            sp: 0,
            bp: 0,
            stack_end: 0,
            end: crate::sampler::WalkEnd::ChainEnd,
            frames: Vec::new(),
        };
        for (tid, time_ns) in [(1, 100), (1, 200), (2, 150), (2, 300), (1, 250)] {
            jvm.add(sample(tid, time_ns), false, true);
        }
        let total = |threads: &HashMap<u32, ThreadCounts>, tid: u32| {
            threads
                .get(&tid)
                .map_or(0, |thread| thread.counts.values().sum::<u64>())
        };
        let first = jvm.take_counts_until(200);
        assert_eq!((total(&first, 1), total(&first, 2)), (2, 1));
        assert_eq!(first[&1].kind, ThreadKind::Java);
        let second = jvm.take_counts_until(250);
        assert_eq!((total(&second, 1), total(&second, 2)), (1, 0));
        jvm.settle(1_000);
        let rest = jvm.take_counts_until(0);
        assert_eq!(
            (total(&rest, 1), total(&rest, 2)),
            (0, 1),
            "settled samples go"
        );
        assert!(jvm.take_counts_until(u64::MAX).is_empty());
    }

    #[test]
    fn idle_branches_are_dropped_and_the_counts_held_keep_their_names() {
        let mut options = SessionOptions::new(Arc::new(Recorded::default()));
        let limit = BranchLimit {
            max: 3,
            idle: Duration::from_secs(60),
        };
        options.branch_limit = Some(limit);
        let mut jvm = ProfiledJvm::new(std::process::id(), false, &options);
        let now = Instant::now();
        let mut branch = |name: &str| {
            let frame = jvm.branches.frame("a.B", name);
            jvm.branches.branch(&[frame])
        };
        let (old, recent, pending) = (branch("old"), branch("recent"), branch("pending"));
        jvm.taken_at.insert(old, now - Duration::from_secs(61));
        jvm.taken_at.insert(recent, now - Duration::from_secs(59));
        jvm.counted.push(Counted {
            time_ns: 5,
            tid: 7,
            branch: pending,
        });
        jvm.settled.insert(8, HashMap::from([(recent, 2)]));
        jvm.drop_idle_branches(limit, now);
        assert_eq!(
            jvm.branches.len(),
            2,
            "the full table dropped the idle branch"
        );
        let names = |jvm: &ProfiledJvm, tid| -> Vec<String> { jvm.held_branch_names(tid) };
        assert_eq!(names(&jvm, 7), ["a.B.pending"]);
        assert_eq!(names(&jvm, 8), ["a.B.recent"]);
        assert_eq!(jvm.taken_at.len(), 1);
        // Not full, and dropped less than `idle` ago: nothing is done.
        jvm.drop_idle_branches(limit, now + Duration::from_secs(30));
        assert_eq!(jvm.branches.len(), 2);
    }

    impl ProfiledJvm {
        /// The names of the branches of thread `tid`'s samples held, counted or settled.
        fn held_branch_names(&self, tid: u32) -> Vec<String> {
            let counted = self
                .counted
                .iter()
                .filter(|c| c.tid == tid)
                .map(|c| c.branch);
            let settled = self
                .settled
                .get(&tid)
                .into_iter()
                .flat_map(|c| c.keys().copied());
            counted
                .chain(settled)
                .map(|branch| self.branches.name(branch).to_string())
                .collect()
        }
    }
}

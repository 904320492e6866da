//! One JVM of a session and its state machine: opening (its samples wait while it starts), ready
//! (samples resolved as they come), failed (samples `[unknown]`), or gone before it could be read
//! (not profiled); its branches, its counts
//! ([`Counts`]), its threads' kinds, the attach of the agent in progress, and the stack walker's
//! knowledge of it.

use std::collections::HashMap;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use joularcode_core::branch::{Branches, UNKNOWN};
use joularcode_core::log::{Level, Log};

use super::agent::{self, Attacher, Attaching};
use super::counts::{BranchLimit, Counts, NativeStack};
use super::thread_kinds::ThreadKinds;
use super::SessionOptions;
use crate::discovery;
use crate::hotspot::{HotSpot, HotSpotError, UnwindInfo};
use crate::jit::codemap::CodeMapError;
use crate::jit::stale;
use crate::proc_files;
use crate::resolve::{JitNames, ResolveStats, Resolver};
use crate::sampler::{Sample, Sampler, SamplerError, ThreadTime, WalkedJvm};

pub use joularcode_core::threads::ThreadCounts;

/// How often opening a starting JVM is retried, and for how long: after a quarter of the time
/// since it was seen, between 10 and 250 ms, so that a JVM just launched is opened (and its stacks
/// walked whole) within moments of its VM being ready.
const OPEN_RETRY_FIRST: Duration = Duration::from_millis(10);
const OPEN_RETRY: Duration = Duration::from_millis(250);
const OPEN_GIVE_UP: Duration = Duration::from_secs(20);
/// The longest one try to read a JVM may take (a real one takes well under a second, the first
/// of a JDK included, whose libjvm.so is read whole): beyond it the JVM is given up, its samples
/// `[unknown]`. The tries run on a thread of their own, so that no JVM delays the others.
const OPEN_BUDGET: Duration = Duration::from_secs(5);
/// Samples kept per JVM while it cannot be opened yet (resolved once it can).
const MAX_PENDING: usize = 20_000;
/// How long an agent's code map may stay unreadable (not written yet) before it is given up.
const MAP_PATIENCE: Duration = Duration::from_secs(10);
/// How long a code map stays gone, in a JVM that runs, before the agent is attached again (a JVM
/// that ended takes its map with it, and its process, within that time).
const GONE_WAIT: Duration = Duration::from_secs(2);
/// How often the agent is attached again at most.
const REATTACH_EVERY: Duration = Duration::from_secs(10);
/// How often the code map of a JVM that gets no sample is refreshed: often enough to renew the
/// agent's lease (it waits 5 s), and to notice a map gone within a second.
const IDLE_MAP_REFRESH: Duration = Duration::from_secs(1);

/// How far a JVM is from being resolvable.
enum State {
    /// Not opened yet: its samples wait.
    Opening {
        since: Instant,
        next_try: Instant,
        pending: Vec<Sample>,
        /// The try in progress, on its own thread, and when it started.
        reading: Option<(JoinHandle<Result<Opened, HotSpotError>>, Instant)>,
        /// Why the last try failed.
        last_error: Option<String>,
    },
    /// Opened: samples are resolved as they come.
    Ready(Box<Resolver>),
    /// It could not be opened while it ran: its samples are `[unknown]`.
    Failed,
    /// It ended before it could be opened (`java -version`, a main that returns at once): it is
    /// not profiled, and its samples are dropped.
    Gone,
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
    counts: Counts,
    thread_kinds: ThreadKinds,
    attaching: Option<Attaching>,
    unresolved: u64,
    map_failing_since: Option<Instant>,
    /// Since when its code map is gone ([`ProfiledJvm::reattach`]).
    map_gone_since: Option<Instant>,
    /// When the agent was last attached again.
    reattached: Option<Instant>,
    /// When its code map was last refreshed, and whether samples came since.
    map_refreshed: Option<Instant>,
    sampled_since_refresh: bool,
    walked: Option<WalkedJvm>,
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

    /// Its branches: the names of the branch ids of its counts.
    pub fn branches(&self) -> &Branches {
        &self.branches
    }

    /// Whether it has ended (it stays listed until the session forgets it).
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Whether it is profiled: it was read, or given up while it ran (its samples `[unknown]`).
    /// Not while it is still opening, nor when it ended before it could be read.
    pub fn is_profiled(&self) -> bool {
        matches!(self.state, State::Ready(_) | State::Failed)
    }

    /// Why it is not profiled while it runs: why the last try to read it failed, or that the
    /// first is not over. `None` once it is profiled, before its first try, and once it has
    /// ended.
    pub fn unreadable_because(&self) -> Option<&str> {
        match &self.state {
            State::Opening {
                last_error,
                reading,
                ..
            } if !self.ended => last_error
                .as_deref()
                .or(reading.is_some().then_some("its first read had not ended")),
            _ => None,
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

    /// A JVM just found: `launched` ones are sampled from their start, the others once opened.
    pub(super) fn new(pid: u32, launched: bool, options: &SessionOptions) -> ProfiledJvm {
        let now = Instant::now();
        let branches = match options.branch_limit {
            Some(limit) => Branches::with_limit(&options.prefixes, limit.max),
            None => Branches::new(&options.prefixes),
        };
        ProfiledJvm {
            pid,
            main_class: proc_files::main_class(pid),
            launched,
            tracked: launched,
            ended: false,
            branches,
            state: State::Opening {
                since: now,
                next_try: now,
                pending: Vec::new(),
                reading: None,
                last_error: None,
            },
            waiting: Vec::new(),
            counts: Counts::new(now),
            thread_kinds: ThreadKinds::default(),
            attaching: None,
            unresolved: 0,
            map_failing_since: None,
            map_gone_since: None,
            reattached: None,
            map_refreshed: None,
            sampled_since_refresh: false,
            walked: None,
        }
    }

    /// Marks it ended (its last counts are still taken).
    pub(super) fn end(&mut self) {
        self.ended = true;
    }

    /// Unregisters it from the stack walker (it has ended).
    pub(super) fn forget(&mut self, sampler: &Sampler) {
        if let Some(walked) = self.walked.take() {
            walked.forget(sampler);
        }
    }

    /// Opens it, if it is still opening and it is time to try again: each try reads it with the
    /// HotSpot reader on a thread of its own, so that a JVM slow to read delays no other, and is
    /// taken here once done. Once read, it is registered with the stack walker, its compiled
    /// code named by the agent's code map (a launched JVM) or by its code cache until the agent's
    /// attach (`attacher`) is done. A JVM found running is tracked by the sampler only after its
    /// first try, so that none of its samples is walked by frame pointers alone (its compiled code
    /// has none); one that cannot be read yet is tracked then, as a launched one is from its
    /// start. Tables no HotSpot has, a try longer than [`OPEN_BUDGET`], or [`OPEN_GIVE_UP`] of
    /// tries make its samples `[unknown]`, said in one warning; once it has ended, it is not
    /// profiled.
    pub(super) fn open(
        &mut self,
        now: Instant,
        sampler: &Sampler,
        options: &SessionOptions,
        attacher: &mut Attacher<'_>,
        free_readers: &mut usize,
    ) -> Result<(), SamplerError> {
        let State::Opening {
            since,
            next_try,
            pending,
            reading,
            last_error,
        } = &mut self.state
        else {
            return Ok(());
        };
        let result = match reading.take() {
            Some((worker, _)) if worker.is_finished() => worker.join().unwrap_or_else(|_| {
                Err(HotSpotError::Process {
                    pid: self.pid,
                    reason: "its reader failed".into(),
                })
            }),
            Some((_, started)) if now.duration_since(started) > OPEN_BUDGET => {
                // The thread ends by itself: every read of the reader is bounded.
                Err(HotSpotError::OverBudget(OPEN_BUDGET))
            }
            Some(worker) => {
                *reading = Some(worker);
                return Ok(());
            }
            None if now < *next_try || *free_readers == 0 => return Ok(()),
            None => {
                *free_readers -= 1;
                let pid = self.pid;
                let worker = std::thread::Builder::new()
                    .name(format!("read-jvm-{pid}"))
                    .spawn(move || HotSpot::open(pid).and_then(ready_to_walk));
                match worker {
                    Ok(worker) => {
                        *reading = Some((worker, now));
                        return Ok(());
                    }
                    Err(e) => Err(HotSpotError::Process {
                        pid,
                        reason: format!("cannot start a thread to read it: {e}"),
                    }),
                }
            }
        };
        match result {
            Ok((hotspot, unwind)) => {
                stale::sweep_own_tmp(self.pid);
                let pending = std::mem::take(pending);
                match WalkedJvm::register_with(sampler, &hotspot, unwind) {
                    Ok(walked) => self.walked = Some(walked),
                    Err(e) => {
                        let message = format!(
                            "JVM {} ({}): {e}; its stacks are walked by frame pointers only, \
                             so JIT-compiled frames without -XX:+PreserveFramePointer cut them short",
                            self.pid, self.main_class
                        );
                        options.log.log(Level::Warning, &message);
                    }
                }
                let jit = if self.launched && options.attach_agent {
                    agent::code_map(self.pid)
                } else {
                    JitNames::CodeCache
                };
                let mut resolver = Resolver::new(hotspot, jit, options.native_frames);
                // The waiting samples need the code the agent has reported so far; a map not
                // written yet is waited for by the next pumps.
                let oldest = pending.iter().map(|sample| sample.time_ns).min();
                let _ = resolver.refresh(oldest.unwrap_or(u64::MAX));
                self.state = State::Ready(Box::new(resolver));
                if !self.launched {
                    self.attaching = attacher.start(self.pid, &self.main_class);
                }
                for sample in pending {
                    self.add(sample, options.native_frames, true);
                }
            }
            Err(e) if self.ended => {
                // Still starting, or gone with its memory, it only ended too soon; any other
                // error of the last try is said, as it may be why it was not read
                let why = match e {
                    HotSpotError::NotReady(_)
                    | HotSpotError::Process { .. }
                    | HotSpotError::Unreadable { .. } => String::new(),
                    e => format!(" (the last try to read it: {e})"),
                };
                let message = format!(
                    "JVM {} ({}) ended before it could be read{why}: it is not profiled.",
                    self.pid, self.main_class
                );
                options.log.log(Level::Info, &message);
                self.state = State::Gone;
            }
            Err(e)
                if matches!(e, HotSpotError::BadTable(_) | HotSpotError::OverBudget(_))
                    || since.elapsed() > OPEN_GIVE_UP =>
            {
                let message = format!(
                    "JVM {} ({}) cannot be read, its samples are {UNKNOWN}: {e}",
                    self.pid, self.main_class
                );
                options.log.log(Level::Warning, &message);
                let pending = std::mem::take(pending);
                self.state = State::Failed;
                for sample in pending {
                    self.add(sample, options.native_frames, true);
                }
            }
            Err(e) => {
                *last_error = Some(e.to_string());
                *next_try =
                    now + (now.duration_since(*since) / 4).clamp(OPEN_RETRY_FIRST, OPEN_RETRY)
            }
        }
        if !self.tracked {
            self.tracked = true;
            if let Err(e) = sampler.track(self.pid) {
                if discovery::alive(self.pid) {
                    return Err(e);
                }
                self.ended = true;
            }
        }
        Ok(())
    }

    /// Whether it is still to be read (a try runs, or another is due).
    pub(super) fn opening(&self) -> bool {
        matches!(&self.state, State::Opening { .. })
    }

    /// Whether a try to read it runs now.
    pub(super) fn reading(&self) -> bool {
        matches!(
            &self.state,
            State::Opening {
                reading: Some(_),
                ..
            }
        )
    }

    /// Gives it up, its samples dropped, when it cannot be sampled (`error`): said in one SEVERE
    /// line.
    pub(super) fn give_up(&mut self, error: &SamplerError, log: &dyn Log) {
        let message = format!(
            "JVM {} ({}) is not profiled: {error}",
            self.pid, self.main_class
        );
        log.log(Level::Severe, &message);
        self.state = State::Gone;
    }

    /// Takes the outcome of the agent's attach, once it is done: the names of compiled code from
    /// now on, and the message to say, if any.
    pub(super) fn finish_attach(&mut self, log: &dyn Log) {
        if !self.attaching.as_ref().is_some_and(|a| a.is_finished()) {
            return;
        }
        let Some((jit, message)) = self.attaching.take().and_then(Attaching::join) else {
            return;
        };
        if self.reattached.is_some() && (self.ended || !discovery::alive(self.pid)) {
            return;
        }
        if let Some(message) = message {
            log.log(Level::Warning, &message);
        }
        if let State::Ready(resolver) = &mut self.state {
            resolver.set_jit(jit);
        }
    }

    /// Tells the stack walker of its Java threads again (new ones start).
    pub(super) fn refresh_walker(&mut self, sampler: &Sampler) {
        if let (Some(walked), State::Ready(resolver)) = (&mut self.walked, &self.state) {
            walked.refresh(sampler, resolver.hotspot());
        }
    }

    /// Reads what the agent appended to the code map; the samples to resolve from now on are
    /// its waiting ones and those received after `sampled_until` (the newest sample received so
    /// far). A map that cannot be read for [`MAP_PATIENCE`] while the JVM runs is given up, once,
    /// for the code cache; a JVM that has just ended takes its map with it, which is no reason to
    /// say anything.
    ///
    /// A JVM that got no sample since the last refresh and has none waiting is refreshed once per
    /// [`IDLE_MAP_REFRESH`] only (which renews the agent's lease in time): the host's idle JVMs
    /// cost a file check a second each, not one per pass of the loop.
    pub(super) fn refresh_code_map(&mut self, log: &dyn Log, sampled_until: u64) {
        let State::Ready(resolver) = &mut self.state else {
            return;
        };
        let idle = !self.sampled_since_refresh && self.waiting.is_empty();
        if idle
            && self
                .map_refreshed
                .is_some_and(|at| at.elapsed() < IDLE_MAP_REFRESH)
        {
            return;
        }
        self.map_refreshed = Some(Instant::now());
        self.sampled_since_refresh = false;
        let oldest = self
            .waiting
            .iter()
            .map(|sample| sample.time_ns)
            .fold(sampled_until, u64::min);
        let give_up = |e: &dyn std::fmt::Display| {
            format!(
                "JVM {} ({}): {e}; compiled frames are named from its code cache (with the methods inlined at calls and safepoints)",
                self.pid, self.main_class
            )
        };
        match resolver.refresh(oldest) {
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

    /// Attaches the agent again when its code map has been gone for [`GONE_WAIT`] while the JVM
    /// runs: its agent stopped (this profiler was held up for longer than the map's lease, even
    /// before its first read, or the map reached its size bound), and it starts again, with a
    /// new map of the live code, when it is attached. At most once per [`REATTACH_EVERY`].
    pub(super) fn reattach(&mut self, attacher: &mut Attacher<'_>) {
        let State::Ready(resolver) = &self.state else {
            return;
        };
        let gone = matches!(resolver.jit(), JitNames::Agent(map) if map.gone());
        if !gone || self.ended {
            self.map_gone_since = None;
            return;
        }
        let since = *self.map_gone_since.get_or_insert_with(Instant::now);
        if since.elapsed() < GONE_WAIT
            || self.attaching.is_some()
            || self
                .reattached
                .is_some_and(|at| at.elapsed() < REATTACH_EVERY)
            || !discovery::alive(self.pid)
        {
            return;
        }
        self.reattached = Some(Instant::now());
        self.attaching = attacher.start(self.pid, &self.main_class);
    }

    /// Takes out the samples counted that were taken at or before `until_ns`, by thread, with the
    /// threads' names and kinds. With a `limit`, the branches idle for too long are dropped first
    /// (the ids of the counts taken before mean nothing afterwards), and the branches taken are
    /// noted as taken `now`. The names of the threads whose samples are all taken are read again
    /// when they are next sampled (a tid can be reused, a thread renamed).
    pub(super) fn take_counts_until(
        &mut self,
        until_ns: u64,
        limit: Option<BranchLimit>,
        now: Instant,
    ) -> HashMap<u32, ThreadCounts> {
        if let Some(limit) = limit {
            self.counts.drop_idle(&mut self.branches, limit, now);
        }
        let taken = self.counts.take_until(until_ns);
        if limit.is_some() {
            let branches = taken.values().flat_map(|counts| counts.keys().copied());
            self.counts.taken(branches, now);
        }
        let threads = taken
            .into_iter()
            .map(|(tid, counts)| {
                let (name, kind) = self.thread_kinds.name_and_kind(tid);
                (tid, ThreadCounts { name, kind, counts })
            })
            .collect();
        self.thread_kinds.retain(&self.counts.threads_held());
        threads
    }

    /// Notes the sampler's times of its threads (`times`, of this JVM): the names of those alive
    /// under the same name need not be read again ([`ThreadKinds::note`]).
    pub(super) fn note_threads<'a>(&mut self, times: impl Iterator<Item = &'a ThreadTime>) {
        self.thread_kinds.note(times);
    }

    /// Keeps the samples taken before `before_ns` as counts only ([`Counts::settle`]).
    pub(super) fn settle(&mut self, before_ns: u64) {
        self.counts.settle(before_ns);
    }

    /// Takes out the samples counted by branch and native frames.
    pub(super) fn take_native_counts(
        &mut self,
    ) -> HashMap<(joularcode_core::branch::BranchId, NativeStack), u64> {
        self.counts.take_native()
    }

    /// Resolves the samples that waited for a refresh of the code map, with what it holds now.
    pub(super) fn resolve_waiting(&mut self, native_frames: bool) {
        for sample in std::mem::take(&mut self.waiting) {
            self.add(sample, native_frames, false);
        }
    }

    /// Resolves and counts one sample, or keeps it until the JVM can be read, or (when
    /// `patient`) until the next refresh of the code map if it holds compiled code the agent has
    /// not reported yet.
    pub(super) fn add(&mut self, sample: Sample, native_frames: bool, patient: bool) {
        self.sampled_since_refresh = true;
        if let Some(walked) = &mut self.walked {
            walked.saw(&sample);
        }
        let kind = self.thread_kinds.kind(sample.pid, sample.tid);
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
            State::Gone => return,
        };
        let native = native_frames.then(|| native.into());
        self.counts.add(sample.time_ns, sample.tid, branch, native);
    }
}

/// A JVM read, with what the stack walker needs of it (or why that could not be read).
type Opened = (HotSpot, Result<UnwindInfo, HotSpotError>);

/// `hotspot` with the walker's information, read on the reading thread with the rest, so that a
/// JVM that ends before it is registered is registered all the same (its memory gone, nothing
/// could be read then). While its code heaps are still being set up ([`HotSpotError::NotReady`])
/// it is read again at the next try rather than walked by frame pointers alone; other errors are
/// said when it is registered.
fn ready_to_walk(hotspot: HotSpot) -> Result<Opened, HotSpotError> {
    match hotspot.unwind_info() {
        Err(e @ HotSpotError::NotReady(_)) => Err(e),
        unwind => Ok((hotspot, unwind)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use joularcode_core::log::Recorded;
    use std::sync::Arc;

    /// A sample of thread `tid` of `pid` at `time_ns`, without frames.
    fn sample(pid: u32, tid: u32, time_ns: u64) -> Sample {
        Sample {
            pid,
            tid,
            cpu: 0,
            time_ns,
            kernel: false,
            jvm: false,
            java_thread: false,
            scanned: false,
            thread_in_r15: false,
            leaf_unbuilt: false,
            ip: 0,
            sp: 0,
            bp: 0,
            stack_end: 0,
            end: crate::sampler::WalkEnd::ChainEnd,
            frames: Vec::new(),
        }
    }

    /// A JVM (this process) that could not be read.
    fn failed_jvm() -> ProfiledJvm {
        let options = SessionOptions::new(Arc::new(Recorded::default()));
        let mut jvm = ProfiledJvm::new(std::process::id(), false, &options);
        jvm.state = State::Failed;
        jvm
    }

    #[test]
    fn a_jvm_that_cannot_be_read_counts_its_samples_unknown_per_thread() {
        let pid = std::process::id();
        let mut jvm = failed_jvm();
        for (tid, time_ns) in [(pid, 100), (pid, 200), (u32::MAX, 300)] {
            jvm.add(sample(pid, tid, time_ns), false, true);
        }
        let first = jvm.take_counts_until(200, None, Instant::now());
        let this = &first[&pid];
        assert_eq!(this.kind, joularcode_core::attribution::ThreadKind::Java);
        assert!(!this.name.is_empty(), "the thread's name is read");
        assert_eq!(this.counts.values().sum::<u64>(), 2);
        let branch = *this.counts.keys().next().expect("a branch");
        assert_eq!(jvm.branches().name(branch), UNKNOWN);
        assert_eq!(jvm.stats().samples, 3);
        let rest = jvm.take_counts_until(u64::MAX, None, Instant::now());
        assert_eq!(rest[&u32::MAX].counts.values().sum::<u64>(), 1);
        assert!(
            jvm.thread_kinds.is_empty(),
            "names are read again next time"
        );
    }
}

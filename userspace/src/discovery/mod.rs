//! Finding the JVMs to profile: one given process, or every process of the host that maps
//! `libjvm.so`, kept current by [`Discovery::rescan`] (call it on a timer: about once a second is
//! enough).
//!
//! For the whole host, /proc is scanned at start (one small read per process, plus its maps while
//! it is new); from then on the kernel tells which processes exec'd a program or ended
//! ([`events`]), and only those are read: a process becomes a JVM by an exec (or by loading
//! libjvm.so soon after one), and a pid reused by a new program comes with its exec. /proc is
//! scanned again if events were lost, and once every [`FULL_SCAN_EVERY`] whatever happens.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::{self, File};
use std::io::{BufRead, BufReader};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};

mod access;
mod cgroup;
pub mod events;
mod launched;

use events::{EventsError, ProcessEvent, ProcessEvents};

use crate::proc_files;

pub use cgroup::{cgroup_paths, read_cgroup_file, CgroupError, CgroupPath, Cgroups};
pub use launched::Launched;

/// How often the JVMs are looked for again: a new JVM is picked up within a second (this, plus
/// one pass of the caller's loop).
pub const RESCAN_INTERVAL: Duration = Duration::from_millis(500);

/// Which processes a discovery watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// One JVM, by pid.
    Pid(u32),
    /// Every JVM of the host (or of these cgroups), including those that start later.
    All(Cgroups),
}

/// Why a process cannot be profiled.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// There is no such process.
    #[error("process {0} does not exist")]
    NoProcess(u32),
    /// The process does not map libjvm.so.
    #[error("process {0} is not a JVM (it does not map libjvm.so)")]
    NotJvm(u32),
    /// Its maps may not be read: `why` says what this process lacks.
    #[error("cannot read {}: permission denied: {why}", path.display())]
    Denied {
        /// The maps file.
        path: PathBuf,
        /// What this process lacks.
        why: String,
    },
    /// Its maps could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        /// The maps file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The kernel's process events cannot be followed.
    #[error("{0}")]
    Events(#[from] EventsError),
}

/// The JVMs that started and ended since the previous scan.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    /// JVMs seen for the first time.
    pub started: Vec<u32>,
    /// JVMs gone.
    pub ended: Vec<u32>,
}

/// A process is rechecked for libjvm.so at this many scans after its start (or its last exec),
/// then known not to be a JVM: a JVM maps libjvm.so within its first instants, but a loaded
/// machine can delay that by seconds (10 scans are 5 s at the session's 500 ms).
const CHECKS_BEFORE_VERDICT: u32 = 10;

/// How often the identity of a [`Scope::Pid`] JVM held by a pidfd is read again, to catch an
/// exec (its end is the pidfd's to tell, at every rescan).
const IDENTITY_EVERY: Duration = Duration::from_secs(10);

/// How often the whole of /proc is scanned while the kernel's process events are followed: a
/// safety net, at a small fraction of the cost of scanning at every pass.
pub const FULL_SCAN_EVERY: Duration = Duration::from_secs(60);

/// What a process is known to be, under which identity (a reused pid or an exec resets it).
struct Seen {
    identity: String,
    checks: u32,
    jvm: bool,
}

impl Seen {
    /// A process first seen under `identity`: not a JVM until its maps say so.
    fn new(identity: String) -> Seen {
        Seen {
            identity,
            checks: 0,
            jvm: false,
        }
    }

    /// Whether process `pid` is a JVM of `cgroups`, reading its maps again while it is
    /// undecided: a JVM stays one (it never unmaps libjvm.so), and it is judged by the cgroup it
    /// is in when it is found to be a JVM.
    fn is_jvm(&mut self, proc_root: &Path, pid: u32, cgroups: &Cgroups) -> bool {
        if !self.jvm && self.checks < CHECKS_BEFORE_VERDICT {
            self.checks += 1;
            if matches!(maps_libjvm(proc_root, pid), Ok(true)) {
                self.jvm = cgroups.hold_process(proc_root, pid);
                self.checks = CHECKS_BEFORE_VERDICT;
            }
        }
        self.jvm
    }
}

/// The JVMs of one [`Scope`], kept current across rescans.
pub struct Discovery {
    proc_root: PathBuf,
    target: Scope,
    jvms: BTreeSet<u32>,
    host: Host,
    /// For [`Scope::Pid`]: the identity of the JVM given, checked when the discovery was made.
    given: Option<String>,
    /// For [`Scope::Pid`] on the real /proc: the JVM given, held by a pidfd, and when its
    /// identity was last read.
    held: Option<(Pidfd, Instant)>,
}

/// What [`Scope::All`] knows of the host's processes between rescans.
#[derive(Default)]
struct Host {
    seen: HashMap<u32, Seen>,
    events: Option<ProcessEvents>,
    scanned_at: Option<Instant>,
}

impl Discovery {
    /// Discovery on the real /proc. For [`Scope::Pid`], fails with a clear message unless the
    /// process exists and maps libjvm.so; for [`Scope::All`], unless the kernel's process
    /// events can be followed (the same privileges as the sampler).
    pub fn new(target: Scope) -> Result<Discovery, DiscoveryError> {
        let mut discovery = Discovery::with_proc_root("/proc", target)?;
        match discovery.target {
            Scope::All(_) => discovery.host.events = Some(ProcessEvents::start()?),
            // Held once its identity is read again after the pidfd was opened: the pidfd is of
            // the process checked, not of one that took its pid in between.
            Scope::Pid(pid) => {
                discovery.held = Pidfd::open(pid)
                    .filter(|_| live_identity(&discovery.proc_root, pid) == discovery.given)
                    .map(|pidfd| (pidfd, Instant::now()));
            }
        }
        Ok(discovery)
    }

    /// Discovery on a /proc tree mounted (or faked) elsewhere, which is scanned whole at every
    /// pass (the kernel's events name the real /proc's processes).
    pub fn with_proc_root(
        proc_root: impl Into<PathBuf>,
        target: Scope,
    ) -> Result<Discovery, DiscoveryError> {
        let mut discovery = Discovery {
            proc_root: proc_root.into(),
            target,
            jvms: BTreeSet::new(),
            host: Host::default(),
            given: None,
            held: None,
        };
        if let Scope::Pid(pid) = discovery.target {
            check_jvm(&discovery.proc_root, pid)?;
            discovery.given = live_identity(&discovery.proc_root, pid);
        }
        Ok(discovery)
    }

    /// Whether the JVM given as `pid` still runs: the answer of its pidfd, if it is held by one
    /// and its identity was read in the last [`IDENTITY_EVERY`]; else whether its identity is
    /// still the one given.
    fn given_runs(&mut self, pid: u32) -> bool {
        if let Some((pidfd, read_at)) = &mut self.held {
            if read_at.elapsed() < IDENTITY_EVERY {
                if let Some(ended) = pidfd.ended() {
                    return !ended;
                }
            }
            *read_at = Instant::now();
        }
        live_identity(&self.proc_root, pid) == self.given
    }

    /// The JVMs known after the last scan.
    pub fn jvms(&self) -> &BTreeSet<u32> {
        &self.jvms
    }

    /// Scans /proc and returns the JVMs that started and ended since the previous scan. The JVM
    /// of a [`Scope::Pid`] has ended once its process is gone, a zombie, or another one (its pid
    /// reused, or an exec): one small read of its stat, not of its maps. Held by a pidfd, its
    /// end is one poll of the pidfd (a pid reused is another process), and its stat is read
    /// once every [`IDENTITY_EVERY`] only, for an exec.
    pub fn rescan(&mut self) -> Changes {
        let now: BTreeSet<u32> = match &self.target {
            &Scope::Pid(pid) => {
                if self.given.is_some() && self.given_runs(pid) {
                    BTreeSet::from([pid])
                } else {
                    BTreeSet::new()
                }
            }
            Scope::All(cgroups) => self.host.jvms(&self.proc_root, cgroups),
        };
        let changes = Changes {
            started: now.difference(&self.jvms).copied().collect(),
            ended: self.jvms.difference(&now).copied().collect(),
        };
        self.jvms = now;
        changes
    }
}

impl Host {
    /// The JVMs of the host now: from the processes that exec'd or ended since the last pass,
    /// or from a scan of /proc when there are no events to follow, events were lost, or the last
    /// scan is [`FULL_SCAN_EVERY`] old.
    fn jvms(&mut self, proc_root: &Path, cgroups: &Cgroups) -> BTreeSet<u32> {
        let taken = self.events.as_mut().map(ProcessEvents::take);
        let scan_due = self
            .scanned_at
            .is_none_or(|at| at.elapsed() >= FULL_SCAN_EVERY);
        match taken {
            Some(taken) if !taken.lost && !scan_due => {
                self.follow(proc_root, cgroups, taken.events)
            }
            _ => self.scan(proc_root, cgroups),
        }
    }

    /// Applies the process events, then reads the maps of the processes not decided yet.
    fn follow(
        &mut self,
        proc_root: &Path,
        cgroups: &Cgroups,
        events: Vec<ProcessEvent>,
    ) -> BTreeSet<u32> {
        for event in events {
            match event {
                ProcessEvent::Exec(pid) if pid != std::process::id() => {
                    match identity(proc_root, pid) {
                        Some(identity) => self.seen.insert(pid, Seen::new(identity)),
                        None => self.seen.remove(&pid),
                    };
                }
                ProcessEvent::Exec(_) => {}
                ProcessEvent::Exit(pid) => {
                    self.seen.remove(&pid);
                }
            }
        }
        self.seen
            .iter_mut()
            .filter_map(|(&pid, seen)| seen.is_jvm(proc_root, pid, cgroups).then_some(pid))
            .collect()
    }

    /// Scans /proc whole.
    fn scan(&mut self, proc_root: &Path, cgroups: &Cgroups) -> BTreeSet<u32> {
        self.scanned_at = Some(Instant::now());
        let Ok(entries) = fs::read_dir(proc_root) else {
            return BTreeSet::new();
        };
        let pids: HashSet<u32> = entries
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
            .filter(|&pid| pid != std::process::id())
            .collect();
        self.seen.retain(|pid, _| pids.contains(pid));
        let mut jvms = BTreeSet::new();
        for pid in pids {
            let Some(identity) = identity(proc_root, pid) else {
                continue;
            };
            let seen = self
                .seen
                .entry(pid)
                .or_insert_with(|| Seen::new(identity.clone()));
            if seen.identity != identity {
                *seen = Seen::new(identity);
            }
            if seen.is_jvm(proc_root, pid, cgroups) {
                jvms.insert(pid);
            }
        }
        jvms
    }
}

/// Start time and name of a process (from /proc/PID/stat): they change when the pid is reused
/// or the process execs another program.
fn identity(proc_root: &Path, pid: u32) -> Option<String> {
    identity_and_state(&proc_root.join(format!("{pid}/stat"))).map(|(identity, _)| identity)
}

/// [`identity`] of a process that has not ended (not a zombie), read from its main thread's stat
/// (`/proc/PID/task/PID/stat`: the same fields, without the sums over every thread that
/// `/proc/PID/stat` makes, which cost a JVM of a thousand threads a thousand steps).
fn live_identity(proc_root: &Path, pid: u32) -> Option<String> {
    identity_and_state(&proc_root.join(format!("{pid}/task/{pid}/stat")))
        .and_then(|(identity, state)| (state != 'Z').then_some(identity))
}

/// A process held by a pidfd (Linux 5.3): that process, whatever later takes its pid.
struct Pidfd(OwnedFd);

impl Pidfd {
    /// A pidfd of process `pid`, if the kernel gives one.
    fn open(pid: u32) -> Option<Pidfd> {
        let pid = rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)?;
        rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
            .ok()
            .map(Pidfd)
    }

    /// Whether the process has ended (exited: a zombie, or reaped), as its pidfd tells without
    /// waiting; `None` if the poll failed.
    fn ended(&self) -> Option<bool> {
        let mut poll = [PollFd::new(&self.0, PollFlags::IN)];
        let ready = rustix::event::poll(&mut poll, Some(&Timespec::default())).ok()?;
        Some(ready > 0)
    }
}

/// [`identity`] and the state letter of the stat file at `path`.
fn identity_and_state(path: &Path) -> Option<(String, char)> {
    let text = fs::read_to_string(path).ok()?;
    let stat = parse_stat(&text)?;
    Some((format!("{} {}", stat.start_time, stat.name), stat.state))
}

/// The fields of `/proc/PID/stat` read here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat<'a> {
    /// The process's name (`comm`): its owner chooses it, and it may hold spaces, parentheses,
    /// `) ` and line ends.
    pub name: &'a str,
    /// Its state letter (`R`, `S`, `Z`...).
    pub state: char,
    /// When it started, in clock ticks after boot.
    pub start_time: u64,
}

/// Parses the text of `/proc/PID/stat`: the name is what lies between the first ` (` and the
/// last `) `, since the name itself may hold either.
pub fn parse_stat(text: &str) -> Option<Stat<'_>> {
    let (name, rest) = text.split_once(" (")?.1.rsplit_once(") ")?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let start_time = fields.nth(18)?.parse().ok()?;
    Some(Stat {
        name,
        state,
        start_time,
    })
}

/// Whether process `pid` maps libjvm.so. Reads its maps line by line, up to the first match.
pub fn maps_libjvm(proc_root: &Path, pid: u32) -> Result<bool, DiscoveryError> {
    let path = proc_root.join(format!("{pid}/maps"));
    let unreadable = |source| DiscoveryError::Unreadable {
        path: path.clone(),
        source,
    };
    let file = File::open(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => DiscoveryError::NoProcess(pid),
        std::io::ErrorKind::PermissionDenied => DiscoveryError::Denied {
            path: path.clone(),
            why: access::why_denied(proc_root, pid),
        },
        _ => unreadable(e),
    })?;
    // Byte lines: a mapped path need not be UTF-8.
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(unreadable)?;
        if proc_files::maps_libjvm(&line) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether process `pid` exists and has not ended (a zombie, ended but not yet reaped by its
/// parent, has no memory left to read): one read of its main thread's stat.
pub fn alive(pid: u32) -> bool {
    live_identity(Path::new("/proc"), pid).is_some()
}

/// Fails unless process `pid` exists and maps libjvm.so.
pub fn check_jvm(proc_root: &Path, pid: u32) -> Result<(), DiscoveryError> {
    if !proc_root.join(pid.to_string()).is_dir() {
        return Err(DiscoveryError::NoProcess(pid));
    }
    match maps_libjvm(proc_root, pid)? {
        true => Ok(()),
        false => Err(DiscoveryError::NotJvm(pid)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JVM_MAPS: &str = "55d0c0000000-55d0c0001000 r--p 00000000 08:01 1 /usr/bin/java\n\
        7f0000000000-7f0000200000 r-xp 00000000 08:01 2 /usr/lib/jvm/java-17/lib/server/libjvm.so\n";
    const OTHER_MAPS: &str = "55d0c0000000-55d0c0001000 r--p 00000000 08:01 1 /usr/bin/bash\n\
        7f0000000000-7f0000200000 r-xp 00000000 08:01 3 /usr/lib/libjvm.so.bak\n";

    struct FakeProc(PathBuf);

    impl FakeProc {
        fn new(name: &str) -> FakeProc {
            let root =
                std::env::temp_dir().join(format!("jp-discovery-{name}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&root);
            fs::create_dir_all(&root).expect("temp dir");
            FakeProc(root)
        }

        fn process(&self, pid: u32, comm: &str, start: u64, maps: &str) {
            let dir = self.0.join(pid.to_string());
            fs::create_dir_all(&dir).expect("process dir");
            let stat =
                format!("{pid} ({comm}) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {start} 0 0");
            let task = dir.join(format!("task/{pid}"));
            fs::create_dir_all(&task).expect("task dir");
            fs::write(task.join("stat"), &stat).expect("task stat");
            fs::write(dir.join("stat"), stat).expect("stat");
            fs::write(dir.join("maps"), maps).expect("maps");
        }

        fn end(&self, pid: u32) {
            fs::remove_dir_all(self.0.join(pid.to_string())).expect("remove process");
        }
    }

    impl Drop for FakeProc {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_name_with_parentheses_and_spaces_is_read_whole() {
        let text = "77 (a) (b) c) Z 1 77 77 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 5555 0 0\n";
        assert_eq!(
            parse_stat(text),
            Some(Stat {
                name: "a) (b) c",
                state: 'Z',
                start_time: 5555
            })
        );
        assert_eq!(parse_stat("77 (x) R 1"), None);
    }

    #[test]
    fn this_process_is_alive_and_a_missing_one_is_not() {
        assert!(alive(std::process::id()));
        assert!(!alive(u32::MAX));
    }

    #[test]
    fn a_pidfd_tells_its_process_ended_once_it_exited_reaped_or_not() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .expect("start sleep");
        let pidfd = Pidfd::open(child.id()).expect("a pidfd");
        assert_eq!(pidfd.ended(), Some(false));
        child.kill().expect("kill sleep");
        // A zombie until reaped: ended, as soon as the kernel has made it one
        let deadline = Instant::now() + Duration::from_secs(10);
        while pidfd.ended() != Some(true) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(pidfd.ended(), Some(true), "a zombie");
        assert!(!alive(child.id()), "a zombie is not alive");
        child.wait().expect("reap sleep");
        assert_eq!(pidfd.ended(), Some(true), "reaped");
        assert!(Pidfd::open(u32::MAX).is_none());
    }

    #[test]
    fn a_given_pid_must_be_a_live_jvm() {
        let proc = FakeProc::new("pid");
        proc.process(10, "java", 5, JVM_MAPS);
        proc.process(11, "bash", 5, OTHER_MAPS);
        assert!(Discovery::with_proc_root(&proc.0, Scope::Pid(10)).is_ok());
        let not_jvm = Discovery::with_proc_root(&proc.0, Scope::Pid(11))
            .err()
            .expect("not a JVM");
        assert_eq!(
            not_jvm.to_string(),
            "process 11 is not a JVM (it does not map libjvm.so)"
        );
        let missing = Discovery::with_proc_root(&proc.0, Scope::Pid(12))
            .err()
            .expect("missing");
        assert!(
            matches!(missing, DiscoveryError::NoProcess(12)),
            "{missing:?}"
        );
    }

    #[test]
    fn a_given_jvm_ends_when_its_pid_is_gone_or_reused() {
        let proc = FakeProc::new("given");
        proc.process(10, "java", 5, JVM_MAPS);
        let mut discovery = Discovery::with_proc_root(&proc.0, Scope::Pid(10)).expect("a JVM");
        let started = Changes {
            started: vec![10],
            ended: vec![],
        };
        let ended = Changes {
            started: vec![],
            ended: vec![10],
        };
        assert_eq!(discovery.rescan(), started);
        assert_eq!(discovery.rescan(), Changes::default());
        // Its pid reused by another JVM: not the one given.
        proc.process(10, "java", 9, JVM_MAPS);
        assert_eq!(discovery.rescan(), ended);
        let mut discovery = Discovery::with_proc_root(&proc.0, Scope::Pid(10)).expect("a JVM");
        assert_eq!(discovery.rescan(), started);
        proc.end(10);
        assert_eq!(discovery.rescan(), ended);
    }

    #[test]
    fn a_held_jvm_ends_with_its_pidfd_and_an_exec_shows_at_the_next_identity_read() {
        let proc = FakeProc::new("held");
        proc.process(10, "java", 5, JVM_MAPS);
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .expect("start sleep");
        // The fake JVM 10, held by the pidfd of a real process
        let held = |discovery: &mut Discovery, read_at: Instant| {
            discovery.held = Some((Pidfd::open(child.id()).expect("a pidfd"), read_at));
        };
        let mut discovery = Discovery::with_proc_root(&proc.0, Scope::Pid(10)).expect("a JVM");
        held(&mut discovery, Instant::now());
        assert_eq!(discovery.rescan().started, vec![10]);
        // An exec is not seen while the identity read is recent...
        proc.process(10, "sh", 5, OTHER_MAPS);
        assert_eq!(discovery.rescan(), Changes::default());
        // ...and is once it is due
        let due = Instant::now()
            .checked_sub(IDENTITY_EVERY)
            .expect("a time before");
        held(&mut discovery, due);
        assert_eq!(discovery.rescan().ended, vec![10]);
        // The end of the process held ends its JVM, whatever its stat says
        proc.process(10, "java", 5, JVM_MAPS);
        let mut discovery = Discovery::with_proc_root(&proc.0, Scope::Pid(10)).expect("a JVM");
        held(&mut discovery, Instant::now());
        assert_eq!(discovery.rescan().started, vec![10]);
        child.kill().expect("kill sleep");
        child.wait().expect("reap sleep");
        assert_eq!(discovery.rescan().ended, vec![10]);
    }

    #[test]
    fn finds_jvms_as_they_start_and_end() {
        let proc = FakeProc::new("all");
        proc.process(10, "java", 5, JVM_MAPS);
        proc.process(11, "bash", 5, OTHER_MAPS);
        let mut discovery =
            Discovery::with_proc_root(&proc.0, Scope::All(Cgroups::every())).expect("discovery");
        assert_eq!(
            discovery.rescan(),
            Changes {
                started: vec![10],
                ended: vec![]
            }
        );
        assert_eq!(discovery.rescan(), Changes::default());

        proc.process(12, "java", 9, JVM_MAPS);
        proc.end(10);
        assert_eq!(
            discovery.rescan(),
            Changes {
                started: vec![12],
                ended: vec![10]
            }
        );
        assert_eq!(discovery.jvms(), &BTreeSet::from([12]));
    }

    #[test]
    fn with_cgroups_only_the_jvms_in_them_are_found() {
        let proc = FakeProc::new("cgroups");
        for (pid, cgroup) in [(10, "/app.slice/a"), (11, "/app.slice/b/x"), (12, "/other")] {
            proc.process(pid, "java", 5, JVM_MAPS);
            fs::write(
                proc.0.join(format!("{pid}/cgroup")),
                format!("0::{cgroup}\n"),
            )
            .unwrap();
        }
        proc.process(13, "java", 5, JVM_MAPS);
        let within = Cgroups::new(vec![
            "/app.slice/a".parse().unwrap(),
            "/app.slice/b".parse().unwrap(),
        ]);
        let mut discovery = Discovery::with_proc_root(&proc.0, Scope::All(within)).unwrap();
        assert_eq!(discovery.rescan().started, vec![10, 11]);
        // The verdict stands: a JVM outside is not read again at each scan.
        fs::write(proc.0.join("12/cgroup"), "0::/app.slice/a\n").unwrap();
        assert_eq!(discovery.rescan(), Changes::default());
    }

    #[test]
    fn a_process_that_loads_the_jvm_late_or_execs_one_is_found() {
        let proc = FakeProc::new("late");
        proc.process(20, "launcher", 7, OTHER_MAPS);
        let mut discovery =
            Discovery::with_proc_root(&proc.0, Scope::All(Cgroups::every())).expect("discovery");
        for _ in 0..CHECKS_BEFORE_VERDICT {
            assert_eq!(discovery.rescan(), Changes::default());
        }
        // Past the verdict, the same process is no longer read...
        proc.process(20, "launcher", 7, JVM_MAPS);
        assert_eq!(discovery.rescan(), Changes::default());
        // ...until it execs another program (its name changes) or the pid is reused.
        proc.process(20, "java", 7, JVM_MAPS);
        assert_eq!(discovery.rescan().started, vec![20]);
    }

    #[test]
    fn between_scans_only_the_processes_the_kernel_names_are_read() {
        let proc = FakeProc::new("events");
        proc.process(10, "java", 5, JVM_MAPS);
        proc.process(11, "bash", 5, OTHER_MAPS);
        let mut discovery =
            Discovery::with_proc_root(&proc.0, Scope::All(Cgroups::every())).expect("discovery");
        assert_eq!(discovery.rescan().started, vec![10]);
        // A JVM the kernel says nothing of is not looked for...
        proc.process(12, "java", 9, JVM_MAPS);
        assert_eq!(follow(&mut discovery, vec![]), BTreeSet::from([10]));
        // ...one that exec'd is; one that ended is gone, even before /proc forgets it.
        assert_eq!(
            follow(
                &mut discovery,
                vec![ProcessEvent::Exec(12), ProcessEvent::Exit(10)]
            ),
            BTreeSet::from([12])
        );
        // A shell that execs java keeps its pid; a pid reused by a new program comes with its
        // exec, after the old one's exit.
        proc.process(11, "java", 5, JVM_MAPS);
        proc.end(12);
        proc.process(12, "bash", 20, OTHER_MAPS);
        assert_eq!(
            follow(
                &mut discovery,
                vec![
                    ProcessEvent::Exec(11),
                    ProcessEvent::Exit(12),
                    ProcessEvent::Exec(12)
                ]
            ),
            BTreeSet::from([11])
        );
        // A process that execs and loads libjvm.so a little later is read again until then.
        proc.process(13, "launcher", 30, OTHER_MAPS);
        assert_eq!(
            follow(&mut discovery, vec![ProcessEvent::Exec(13)]),
            BTreeSet::from([11])
        );
        proc.process(13, "launcher", 30, JVM_MAPS);
        assert_eq!(follow(&mut discovery, vec![]), BTreeSet::from([11, 13]));
    }

    /// The JVMs of the whole host after `events`.
    fn follow(discovery: &mut Discovery, events: Vec<ProcessEvent>) -> BTreeSet<u32> {
        discovery
            .host
            .follow(&discovery.proc_root, &Cgroups::every(), events)
    }
}

//! The agent left in a JVM by a profiler: it writes its code map only while a profiler reads it
//! (the map's lease, docs/code-map.md). A `record --pid` killed with SIGKILL leaves an agent that
//! stops within seconds, removes its map and disables its events, however busy the JIT; the next
//! `record --pid` of the same JVM starts it again; a `record` held up for longer than the lease
//! gets the agent back by itself.

use std::fs::File;

use joularcode_bpf::discovery;
use joularcode_testkit::results::rows;

use super::*;

/// How long after the end of its last reader the agent has stopped at most: its lease (5 s), its
/// look every second, and a margin for a busy machine.
const STOPPED_WITHIN: Duration = Duration::from_secs(15);
/// How long `record` runs before it is killed: three leases.
const READ_FOR: Duration = Duration::from_secs(15);

/// The regular files of the folder `dir` owned by `uid`, with their sizes.
fn files_of(dir: &Path, uid: u32) -> Vec<(PathBuf, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut files: Vec<(PathBuf, u64)> = std::fs::read_dir(dir)
        .expect("read the folder")
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let meta = std::fs::symlink_metadata(entry.path()).ok()?;
            (meta.is_file() && meta.uid() == uid).then(|| (entry.path(), meta.len()))
        })
        .collect();
    files.sort();
    files
}

/// The processes other than `jvm` that hold the file at `path` open: the profilers reading it
/// (on a shared machine, other runs of `record --all` or a daemon read every JVM's map, and
/// renew its lease as a reader must).
fn readers(path: &Path, jvm: u32) -> Vec<u32> {
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    processes
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != jvm)
        .filter(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                fds.filter_map(Result::ok)
                    .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|to| to == path))
            })
        })
        .collect()
}

/// The size of the file at `path`, if it is there.
fn size(path: &Path) -> Option<u64> {
    std::fs::symlink_metadata(path).ok().map(|meta| meta.len())
}

/// `AgentLease` on JDK 17, run by a user made for the test, its standard error (where the agent
/// speaks) in a file of `logs`. Dropped, the JVM ends before the user is removed.
struct LeaseJvm {
    /// Ended when dropped.
    _jvm: Jvm,
    user: User,
    logs: tempfile::TempDir,
    pid: u32,
    map: PathBuf,
}

impl LeaseJvm {
    /// Starts it, run by the user `jcs<tag>...`.
    fn start(tag: &str) -> LeaseJvm {
        let user = User::create(tag);
        let logs = tempfile::tempdir().expect("a folder");
        // The JIT compiles code with the debug information that names inlined methods at every
        // instruction only while the agent writes: AgentLease's main, compiled with C2 after
        // about 40,000 turns of its loop (maybe while the agent is stopped), does not inline
        // AgentHot.work, whose code is compiled once the agent is there.
        let mut command = Jvm::command(
            &jdk(17),
            &[
                "-XX:CompileCommand=quiet",
                "-XX:CompileCommand=dontinline,AgentHot::work",
            ],
            "AgentLease",
            &[],
        );
        user.run_as(&mut command);
        command.stderr(File::create(logs.path().join("jvm.stderr")).expect("the JVM's stderr"));
        let jvm = Jvm::spawn(command);
        let pid = jvm.pid();
        LeaseJvm {
            _jvm: jvm,
            user,
            logs,
            pid,
            map: code_map(pid),
        }
    }

    /// What the JVM (its agent) said on its standard error so far.
    fn agent_said(&self) -> String {
        std::fs::read_to_string(self.logs.path().join("jvm.stderr")).unwrap_or_default()
    }
}

#[test]
fn the_agent_stops_when_its_profiler_is_killed_and_starts_again_with_the_next() {
    let _serial = serial();
    let lease = LeaseJvm::start("lease");
    let (pid, map) = (lease.pid, lease.map.clone());
    let agent_said = || lease.agent_said();

    // A record that reads the map for three leases keeps the agent writing all along.
    let run = new_run();
    let mut record = run
        .command(&["--pid", &pid.to_string(), "--duration", "600"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(lease.logs.path().join("record.stderr")).expect("record's stderr"))
        .spawn()
        .expect("start joularcode-bpf");
    let start = Instant::now();
    while size(&map).is_none_or(|len| len == 0) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the agent wrote no code map in a minute: {}",
            std::fs::read_to_string(lease.logs.path().join("record.stderr")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let read_from = Instant::now();
    let first = size(&map).unwrap_or(0);
    while read_from.elapsed() < READ_FOR {
        assert!(
            size(&map).is_some(),
            "the map went while record read it, {:?} after it appeared: {}",
            read_from.elapsed(),
            agent_said()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let last = size(&map).expect("the map while record reads it");
    assert!(
        last > first,
        "the JIT compiles all along: the map grew from {first} to {last} bytes"
    );
    assert!(
        !agent_said().contains("no profiler read"),
        "{}",
        agent_said()
    );

    // Killed: the agent stops within seconds of its last reader's end, removes its map, and
    // nothing of the JVM's user in /tmp grows while the JVM runs on, compiling and freeing code.
    record.kill().expect("SIGKILL record");
    record.wait().expect("record ends");
    let mut last_read = Instant::now();
    let mut others = Vec::new();
    let stopped_after = loop {
        let reading = readers(&map, pid);
        if reading.is_empty() && size(&map).is_none() {
            break last_read.elapsed();
        }
        if !reading.is_empty() {
            last_read = Instant::now();
            others.extend(reading);
        }
        assert!(
            last_read.elapsed() < STOPPED_WITHIN,
            "the map is still there {STOPPED_WITHIN:?} after its last reader ended: {}",
            agent_said()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // Another profiler of the machine may attach it again meanwhile: the agent then writes for
    // it, and the look is taken again once it has gone.
    let mut quiet = None;
    for _ in 0..10 {
        let before = files_of(Path::new("/tmp"), lease.user.uid);
        let start = Instant::now();
        let mut read = false;
        while start.elapsed() < Duration::from_secs(5) {
            read |= !readers(&map, pid).is_empty();
            std::thread::sleep(Duration::from_millis(100));
        }
        let after = files_of(Path::new("/tmp"), lease.user.uid);
        if !read && size(&map).is_none() {
            quiet = Some((before, after));
            break;
        }
        while size(&map).is_some() || !readers(&map, pid).is_empty() {
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    let (before, after) = quiet.expect("five quiet seconds without another profiler");
    assert_eq!(before, after, "files of the JVM's user in /tmp grew");
    assert!(discovery::alive(pid), "the JVM runs on");
    assert!(
        agent_said().contains("no profiler read") && agent_said().contains("stops writing it"),
        "{}",
        agent_said()
    );
    eprintln!(
        "the agent stopped {stopped_after:?} after its last reader ended (other readers: \
         {others:?}); /tmp: {after:?}"
    );

    // The next record of the same JVM starts the agent again: a new map, and branches named
    // whole from it, the methods C2 inlined included.
    let again = new_run();
    let finished = watch(
        again.command(&["--pid", &pid.to_string(), "--duration", "8"]),
        Duration::from_secs(8),
        |_, _| {},
    );
    assert!(finished.status.success(), "{}", finished.stderr);
    assert!(
        agent_said().contains("a profiler reads the code map again"),
        "{}",
        agent_said()
    );
    let all = rows(&again.results().join("methods-power-all.csv"));
    let whole_chain = all.iter().any(|row| {
        row.energy_j > 0.0
            && !row.branch.contains("[unknown]")
            && [
                "AgentHot.work",
                "AgentHot.outer",
                "AgentHot.middle",
                "AgentHot.inner",
            ]
            .iter()
            .all(|method| row.branch.contains(method))
    });
    assert!(
        whole_chain,
        "no whole branch with the inlined chain of AgentHot.work: {:?}",
        all.iter().map(|row| &row.branch).collect::<Vec<_>>()
    );
    drop(lease);
    clear(&map);
}

#[test]
fn a_profiler_held_up_beyond_the_lease_gets_the_agent_back() {
    let _serial = serial();
    let lease = LeaseJvm::start("leasestop");
    let (pid, map) = (lease.pid, lease.map.clone());
    let agent_said = || lease.agent_said();
    let mut stopped: Option<Instant> = None;
    let mut resumed: Option<Instant> = None;
    let mut back_after = None;
    let run = new_run();
    let finished = watch(
        run.command(&["--pid", &pid.to_string(), "--duration", "45"]),
        Duration::from_secs(45),
        |_, record| {
            let record = nix::unistd::Pid::from_raw(i32::try_from(record).expect("a pid"));
            match (stopped, resumed) {
                // Held up (SIGSTOP) once it reads the map: the agent stops meanwhile.
                (None, _) if size(&map).is_some_and(|len| len > 0) => {
                    nix::sys::signal::kill(record, nix::sys::signal::Signal::SIGSTOP)
                        .expect("SIGSTOP record");
                    stopped = Some(Instant::now());
                }
                (Some(at), None) if size(&map).is_none() || at.elapsed() > STOPPED_WITHIN => {
                    nix::sys::signal::kill(record, nix::sys::signal::Signal::SIGCONT)
                        .expect("SIGCONT record");
                    resumed = Some(Instant::now());
                }
                (Some(_), Some(at)) if back_after.is_none() && size(&map).is_some() => {
                    back_after = Some(at.elapsed());
                }
                _ => {}
            }
        },
    );
    assert!(finished.status.success(), "{}", finished.stderr);
    let said = agent_said();
    assert!(
        said.contains("no profiler read"),
        "the agent never stopped: {said}"
    );
    let back_after = back_after.expect("the map came back once record went on");
    assert!(
        said.contains("a profiler reads the code map again"),
        "{said}"
    );
    assert!(
        !finished.stderr.contains("named from its code cache"),
        "{}",
        finished.stderr
    );
    eprintln!("the map came back {back_after:?} after record went on");
    drop(lease);
    clear(&map);
}

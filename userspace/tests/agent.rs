//! jvm-symbolizer-agent, the code map reader and the attach protocol against real JVMs (JDK 17,
//! 21 and 25). The tests run JVMs and share /tmp, so they are serialised by one lock.
//!
//! They need root (attach to other users' and other namespaces' JVMs, `unshare`) and the JDKs of
//! scripts/setup.sh; they fail, saying so, when something is missing.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use joularcode_bpf::attach::{self, AttachError};
use joularcode_bpf::jit::codemap::{CodeKind, CodeMap};
use joularcode_bpf::jit::perfmap::PerfMap;
use joularcode_bpf::sampler::monotonic_ns;
use joularcode_testkit::{agent_library, all_jdks, jdk, one_at_a_time, workload_classes, Jdk, Jvm};

/// The tests run JVMs and share /tmp: one at a time.
fn serial() -> MutexGuard<'static, ()> {
    one_at_a_time("the agent tests attach to other users' and namespaces' JVMs")
}

/// Refreshes `map` until `done` holds, failing after a minute with `what`.
fn wait_for(map: &mut CodeMap, what: &str, done: impl Fn(&CodeMap) -> bool) {
    let start = Instant::now();
    loop {
        if let Err(e) = map.refresh(u64::MAX) {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{what}: the code map was never readable: {e}"
            );
        } else if done(map) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what}: not in {} after a minute ({} pieces of code read)",
            map.path().display(),
            map.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

const CHAIN: [&str; 4] = [
    "AgentHot.work",
    "AgentHot.outer",
    "AgentHot.middle",
    "AgentHot.inner",
];

/// Compiled code of AgentHot.work in which some pc resolves to the whole inlined chain, with the
/// time to look it up at.
fn inlined_chain_found(map: &CodeMap) -> bool {
    let now = monotonic_ns();
    map.iter()
        .filter(|code| code.frames().eq(["AgentHot.work"]) && code.unload_ns.is_none())
        .any(|code| {
            (code.start..code.end).any(|pc| {
                map.lookup(pc, now)
                    .is_some_and(|frames| frames.frames().eq(CHAIN))
            })
        })
}

/// AgentHot.work compiled before the agent attached: reported by GenerateEvents, valid since
/// before the attach. (Code compiled before has debug information at safepoints only, so its
/// inline records need not reach `inner`.)
fn replayed_work_found(map: &CodeMap) -> bool {
    let now = monotonic_ns();
    code_of(map, "AgentHot.work").any(|(start, _, load, _)| {
        load == 0
            && map
                .lookup(start, now)
                .is_some_and(|f| f.frames().next() == Some("AgentHot.work"))
    })
}

fn code_of<'a>(
    map: &'a CodeMap,
    name: &'a str,
) -> impl Iterator<Item = (u64, u64, u64, Option<u64>)> + 'a {
    map.iter()
        .filter(move |code| code.kind == CodeKind::Compiled && code.frames().eq([name]))
        .map(|code| (code.start, code.end, code.load_ns, code.unload_ns))
}

/// Starts AgentHot with `flags` and returns once it runs (STARTED), its code not compiled yet: for
/// the tests that wait for the code they need, or need none.
fn agent_hot(jdk: &Jdk, flags: &[&str]) -> Jvm {
    Jvm::spawn_until(Jvm::command(jdk, flags, "AgentHot", &[]), "STARTED")
}

#[test]
fn agent_at_start_maps_compiled_code_with_inlined_chains_and_recompilations() {
    let _serial = serial();
    for jdk in all_jdks() {
        let option = format!("-agentpath:{}", agent_library().display());
        let jvm = agent_hot(&jdk, &[&option]);
        let pid = jvm.pid();
        let mut map = CodeMap::of_process(pid, pid);
        wait_for(
            &mut map,
            "AgentHot.work with its inlined chain",
            inlined_chain_found,
        );
        // Tiered compilation: work is compiled more than once (C1, then C2 and OSR), and each
        // copy is named at its own addresses while it was valid.
        let copies: Vec<_> = code_of(&map, "AgentHot.work").collect();
        assert!(
            copies.len() >= 2,
            "Java {}: copies of work: {copies:?}",
            jdk.major
        );
        for (start, _, load, _) in &copies {
            let frames = map
                .lookup(*start, *load)
                .expect("code named at its load time");
            assert_eq!(frames.frames().next(), Some("AgentHot.work"));
            // A moment before its load, its start held other code still valid then, or this
            // very copy, which ran before HotSpot reported it: never a copy loaded later.
            if *load > 0 {
                assert!(map
                    .lookup(*start, load - 1)
                    .is_none_or(|f| f.start != *start || f.load_ns <= *load));
            }
        }
        // The interpreter is reported as generated code.
        assert!(
            map.iter()
                .any(|code| code.kind == CodeKind::Stub && code.frames().eq(["Interpreter"])),
            "Java {}: no Interpreter stub",
            jdk.major
        );
        assert_eq!(map.bad_lines(), 0);
        // The perf map names the same code.
        let perf = PerfMap::read(Path::new(&format!("/tmp/perf-{pid}.map"))).unwrap();
        assert_eq!(perf.bad_lines(), 0);
        for (start, end, _, _) in &copies {
            let entry = perf
                .entries()
                .iter()
                .find(|e| e.start == *start)
                .expect("in perf map");
            assert_eq!(
                (entry.name.as_str(), entry.start + entry.size),
                ("AgentHot.work", *end)
            );
        }
        let _ = std::fs::remove_file(format!("/tmp/joularcode-{pid}.map"));
        let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
    }
}

#[test]
fn attach_replays_earlier_code_twice_attached_jvms_end_normally() {
    let _serial = serial();
    for jdk in all_jdks() {
        // Until its standard input closes (a minute at most), once it has run two seconds.
        let mut command = Jvm::command(&jdk, &[], "AgentHot", &["60", "stdin"]);
        command.stdin(Stdio::piped());
        let mut jvm = Jvm::spawn(command);
        let pid = jvm.pid();
        attach::load_agent(pid, agent_library(), "").unwrap();
        let mut map = CodeMap::of_process(pid, pid);
        wait_for(&mut map, "replayed AgentHot.work", replayed_work_found);
        let copies = code_of(&map, "AgentHot.work").count();
        // A second attach neither fails nor writes everything again.
        attach::load_agent(pid, agent_library(), "").unwrap();
        std::thread::sleep(Duration::from_millis(300));
        map.refresh(u64::MAX).unwrap();
        assert_eq!(code_of(&map, "AgentHot.work").count(), copies);
        let text = std::fs::read_to_string(map.path()).unwrap();
        assert_eq!(text.matches("joularcode-code-map").count(), 1);
        drop(jvm.child.stdin.take());
        jvm.wait_for_line("DONE", Duration::from_secs(60));
        let status = jvm.child.wait().unwrap();
        assert!(
            status.success(),
            "Java {}: the JVM ended with {status}",
            jdk.major
        );
        assert!(
            !map.path().exists(),
            "Java {}: the attached agent removes its code map when the JVM ends",
            jdk.major
        );
        let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
    }
}

/// Whether process `pid` has ended (and been reaped).
fn ended(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn code_maps_are_removed_at_the_jvm_end_and_after_a_kill_at_the_next_run() {
    let _serial = serial();
    let option = format!("-agentpath:{}=perfmap=no", agent_library().display());
    for jdk in all_jdks() {
        // Ended by SIGTERM (an orderly shutdown): the agent removes its map.
        let mut jvm = agent_hot(&jdk, &[&option]);
        let mut map = CodeMap::of_process(jvm.pid(), jvm.pid());
        wait_for(&mut map, "a code map", |map| !map.is_empty());
        let path = map.path().to_path_buf();
        let pid = nix::unistd::Pid::from_raw(i32::try_from(jvm.pid()).expect("a pid"));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
        jvm.child.wait().expect("the JVM ends");
        assert!(
            !path.exists(),
            "Java {}: {} is still there after the JVM ended",
            jdk.major,
            path.display()
        );

        // Killed: the map stays, until the next profiling session, which leaves the map of a
        // JVM that runs alone.
        let mut killed = agent_hot(&jdk, &[&option]);
        let killed_map = format!("/tmp/joularcode-{}.map", killed.pid());
        let running = agent_hot(&jdk, &[&option]);
        let running_map = format!("/tmp/joularcode-{}.map", running.pid());
        let start = Instant::now();
        while !(Path::new(&killed_map).exists() && Path::new(&running_map).exists()) {
            assert!(start.elapsed() < Duration::from_secs(60), "no code maps");
            std::thread::sleep(Duration::from_millis(50));
        }
        let killed_pid = killed.pid();
        killed.child.kill().expect("SIGKILL");
        killed.child.wait().expect("the JVM ends");
        assert!(ended(killed_pid));
        assert!(Path::new(&killed_map).exists(), "SIGKILL leaves the map");
        let stacks = Command::new(env!("CARGO_BIN_EXE_joularcode-bpf"))
            .args(["stacks", "--duration", "1", "--output", "/dev/null"])
            .args(["--pid", &running.pid().to_string()])
            .output()
            .expect("run joularcode-bpf stacks");
        assert!(
            stacks.status.success(),
            "{}",
            String::from_utf8_lossy(&stacks.stderr)
        );
        assert!(
            !Path::new(&killed_map).exists(),
            "Java {}: the next run removes {killed_map}",
            jdk.major
        );
        assert!(
            Path::new(&running_map).exists(),
            "Java {}: the map of a running JVM stays",
            jdk.major
        );
    }
}

#[test]
fn unloaded_code_is_no_longer_named() {
    let _serial = serial();
    for jdk in all_jdks() {
        let option = format!("-agentpath:{}=perfmap=no", agent_library().display());
        let started = std::time::SystemTime::now();
        let mut jvm = Jvm::start(&jdk, &[&option], "AgentUnload", &[]);
        let pid = jvm.pid();
        jvm.wait_for_line("UNLOADED", Duration::from_secs(60));
        let mut map = CodeMap::of_process(pid, pid);
        let payload = |map: &CodeMap| -> Vec<(u64, u64, u64, Option<u64>)> {
            code_of(map, "AgentUnloadPayload.spin").collect()
        };
        wait_for(&mut map, "unloads of AgentUnloadPayload.spin", |map| {
            let code = payload(map);
            !code.is_empty() && code.iter().all(|(_, _, _, unload)| unload.is_some())
        });
        for (start, _, load, unload) in payload(&map) {
            let unload = unload.unwrap();
            assert!(load < unload);
            let before = map.lookup(start, unload - 1).unwrap();
            assert_eq!(before.frames().next(), Some("AgentUnloadPayload.spin"));
            assert!(
                map.lookup(start, unload).is_none_or(|f| !f
                    .frames()
                    .any(|name| name.starts_with("AgentUnloadPayload"))),
                "Java {}: unloaded code still named after its unload",
                jdk.major
            );
        }
        // A perf map of an earlier process of the same pid (perf maps stay after their process)
        // may be there: none may be written by this one.
        let perf = std::fs::metadata(format!("/tmp/perf-{pid}.map"));
        let written = perf.is_ok_and(|meta| meta.modified().is_ok_and(|at| at >= started));
        assert!(
            !written,
            "Java {}: perfmap=no wrote /tmp/perf-{pid}.map",
            jdk.major
        );
        let _ = std::fs::remove_file(map.path());
    }
}

/// A JVM started in new PID and mount namespaces, with a private /tmp.
struct Contained {
    unshare: Child,
    java: u32,
}

impl Contained {
    fn start(jdk: &Jdk) -> Contained {
        // The private /tmp hides the host's: the JDK and the classes may live there (a clone of the
        // repository under /tmp), so the host's /tmp stays reachable at /mnt inside.
        let script = format!(
            "mount --bind /tmp /mnt && mount -t tmpfs none /tmp && exec {} -cp {} AgentHot",
            beside_private_tmp(&jdk.java()),
            beside_private_tmp(workload_classes())
        );
        let mut unshare = Command::new("unshare")
            .args(["--pid", "--mount", "--fork", "--mount-proc", "--kill-child"])
            .args(["sh", "-c", &script])
            .stdout(Stdio::piped())
            .spawn()
            .expect("run unshare (util-linux), as root");
        let mut stdout = BufReader::new(unshare.stdout.take().unwrap());
        let mut line = String::new();
        while !line.starts_with("READY") {
            line.clear();
            let n = stdout.read_line(&mut line).unwrap();
            assert!(
                n > 0,
                "the contained JVM ended before READY (is this root?)"
            );
        }
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let children =
            std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", unshare.id())).unwrap();
        let java = children.split_whitespace().next().unwrap().parse().unwrap();
        Contained { unshare, java }
    }
}

/// Where `path` is reached inside the namespace of [`Contained`]: the host's /tmp is at /mnt.
fn beside_private_tmp(path: &Path) -> String {
    match path.strip_prefix("/tmp") {
        Ok(rest) => Path::new("/mnt").join(rest).display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

impl Drop for Contained {
    fn drop(&mut self) {
        // SAFETY: kill(2) of the JVM this test started.
        unsafe { libc::kill(self.java as libc::pid_t, libc::SIGKILL) };
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
    }
}

#[test]
fn attach_across_pid_and_mount_namespaces() {
    let _serial = serial();
    for jdk in all_jdks() {
        let jvm = Contained::start(&jdk);
        let target = attach::JvmProcess::new(jvm.java).unwrap();
        assert_ne!(
            target.ns_pid, jvm.java,
            "the JVM has a pid of its own namespace"
        );
        assert!(target.other_mount_namespace());
        attach::load_agent(jvm.java, agent_library(), "").unwrap();
        let inside = target.root_path(&format!("/tmp/joularcode-{}.map", target.ns_pid));
        let mut map = CodeMap::of_process(jvm.java, target.ns_pid);
        assert_eq!(map.path(), inside);
        wait_for(
            &mut map,
            "AgentHot.work in the contained JVM",
            replayed_work_found,
        );
        assert!(target
            .root_path(&format!("/tmp/perf-{}.map", target.ns_pid))
            .is_file());
        assert!(
            !Path::new(&format!("/tmp/joularcode-{}.map", target.ns_pid)).exists()
                || target.ns_pid == std::process::id(),
            "the map is in the JVM's own /tmp, not the host's"
        );
    }
}

#[test]
fn attach_disabled_is_reported() {
    let _serial = serial();
    for jdk in all_jdks() {
        let jvm = agent_hot(&jdk, &["-XX:+DisableAttachMechanism"]);
        let err = attach::load_agent(jvm.pid(), agent_library(), "").unwrap_err();
        assert!(
            matches!(err, AttachError::AttachDisabled(_)),
            "Java {}: {err}",
            jdk.major
        );
        assert!(err.to_string().contains("DisableAttachMechanism"));
    }
}

#[test]
fn dynamic_agents_refused_but_the_jdk_perfmap_still_works() {
    let _serial = serial();
    for jdk in [jdk(21), jdk(25)] {
        let jvm = Jvm::start(&jdk, &["-XX:-EnableDynamicAgentLoading"], "AgentHot", &[]);
        let pid = jvm.pid();
        let err = attach::load_agent(pid, agent_library(), "").unwrap_err();
        assert!(
            matches!(err, AttachError::AgentsRefused { .. }),
            "Java {}: {err}",
            jdk.major
        );
        let perf = attach::JvmProcess::new(pid).unwrap().perf_map().unwrap();
        assert!(perf.entries().iter().any(|e| e.name == "AgentHot.work"));
        assert!(perf.entries().iter().any(|e| e.name == "Interpreter"));
        assert!(!Path::new(&format!("/tmp/joularcode-{pid}.map")).exists());
        let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
    }
}

#[test]
fn not_a_jvm_and_an_unresponsive_jvm_are_told_apart() {
    let _serial = serial();
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    let err = attach::jcmd(sleeper.id(), "VM.version").unwrap_err();
    assert!(matches!(err, AttachError::NotAJvm(_)), "{err}");
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let jvm = Jvm::start(&jdk(17), &[], "AgentHot", &[]);
    // SAFETY: kill(2) of the JVM this test started.
    unsafe { libc::kill(jvm.pid() as libc::pid_t, libc::SIGSTOP) };
    let err = attach::jcmd(jvm.pid(), "VM.version").unwrap_err();
    // SAFETY: as above.
    unsafe { libc::kill(jvm.pid() as libc::pid_t, libc::SIGCONT) };
    assert!(matches!(err, AttachError::Timeout { .. }), "{err}");
    let version = attach::jcmd(jvm.pid(), "VM.version").unwrap();
    assert!(version.contains("JDK 17"), "{version}");
    let perf = attach::JvmProcess::new(jvm.pid())
        .unwrap()
        .perf_map()
        .unwrap();
    assert!(perf.entries().iter().any(|e| e.name == "AgentHot.work"));
    let _ = std::fs::remove_file(format!("/tmp/perf-{}.map", jvm.pid()));
}

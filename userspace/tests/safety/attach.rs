//! The attach: a socket that is not the JVM's own is refused, and an attach cut short by the end
//! of the run leaves no trigger file.

use super::*;
use std::os::unix::fs::FileTypeExt;

use joularcode_testkit::record_run::RecordRun;

/// Runs `record --pid <pid>` until the agent is in JVM `pid`, or for a minute.
fn until_attached(run: &RecordRun, pid: u32) -> Finished {
    let command = run.command(&["--pid", &pid.to_string(), "--duration", "60"]);
    watch(command, Duration::from_secs(60), |_, record| {
        if maps_agent(pid) {
            interrupt(record);
        }
    })
}

#[test]
fn an_attach_socket_that_is_not_the_jvms_own_is_refused() {
    let _serial = serial();
    let user = User::create("sock");
    // Root's JVM, its attach socket open.
    let root_jvm = Jvm::start(&jdk(17), &[], "RecordBusy", &["1"]);
    joularcode_bpf::attach::jcmd(root_jvm.pid(), "VM.version").expect("root's JVM answers");
    let root_socket = PathBuf::from(format!("/tmp/.java_pid{}", root_jvm.pid()));
    assert!(root_socket.exists());

    // The user's JVM's socket name links to root's JVM's socket.
    let jvm = user_jvm(&user, "RecordBusy", &["1"]);
    let socket = PathBuf::from(format!("/tmp/.java_pid{}", jvm.pid()));
    user.symlink(&root_socket, &socket);
    let run = new_run();
    let linked = until_attached(&run, jvm.pid());
    clear(&socket);
    clear(&code_map(jvm.pid()));
    assert!(linked.status.success(), "{}", linked.stderr);
    assert!(
        !maps_agent(root_jvm.pid()),
        "the agent went into root's JVM"
    );
    assert!(
        maps_agent(jvm.pid()),
        "the JVM's own socket, made after SIGQUIT, is used: {}",
        linked.stderr
    );

    // Another process listens on the JVM's socket name and answers with 16 MB of escapes.
    let jvm = user_jvm(&user, "RecordBusy", &["1"]);
    let socket = PathBuf::from(format!("/tmp/.java_pid{}", jvm.pid()));
    let listener = std::os::unix::net::UnixListener::bind(&socket).expect("a fake listener");
    user.own(&socket);
    listener.set_nonblocking(true).expect("non-blocking");
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = done.clone();
    let fake = std::thread::spawn(move || {
        let (mut connections, mut requests) = (0, 0);
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    use std::io::Write;
                    connections += 1;
                    let _ = stream.set_nonblocking(false);
                    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
                    let mut request = [0u8; 64];
                    if stream.read(&mut request).is_ok_and(|n| n > 0) {
                        requests += 1;
                    }
                    let line = "\x1b[2J\x1b]0;owned\x07\x1b[31mroot, run this\n".repeat(500_000);
                    let _ = stream.write_all(format!("0\n{line}").as_bytes());
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        (connections, requests)
    });
    let run = new_run();
    let faked = until_attached(&run, jvm.pid());
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let (connections, requests) = fake.join().expect("the fake listener");
    clear(&socket);
    clear(&code_map(jvm.pid()));
    eprintln!(
        "the fake listener saw {connections} connection(s) and {requests} request(s); stderr \
         of {} bytes",
        faked.stderr.len()
    );
    assert!(faked.status.success(), "{}", faked.stderr);
    assert_eq!(requests, 0, "a request was sent to the fake listener");
    assert!(!faked.stderr.contains('\x1b'), "an escape byte was printed");
    assert!(!faked.stderr.contains("root, run this"));
    assert!(
        faked.stderr.len() < 64 << 10,
        "{} bytes",
        faked.stderr.len()
    );
    assert!(maps_agent(jvm.pid()), "{}", faked.stderr);
}

#[test]
fn an_attach_cut_short_by_the_end_leaves_no_trigger_file() {
    let _serial = serial();
    let user = User::create("trig");
    for attempt in 1..=3 {
        let jvm = user_jvm(&user, "RecordBusy", &["1"]);
        // A stopped JVM never opens its socket: the attach waits, and record ends meanwhile.
        let pid = nix::unistd::Pid::from_raw(i32::try_from(jvm.pid()).expect("a pid"));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).expect("stopped");
        let trigger = user.home().join(format!(".attach_pid{}", jvm.pid()));
        let run = new_run();
        let mut seen = false;
        // Record is ended once the attach has made its trigger file, or after 3 s.
        let finished = watch(
            run.command(&["--pid", &jvm.pid().to_string(), "--duration", "3"]),
            Duration::from_secs(3),
            |_, record| {
                seen |= trigger.exists();
                if seen {
                    interrupt(record);
                }
            },
        );
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).expect("continued");
        assert!(finished.status.success(), "{}", finished.stderr);
        if !seen && maps_another_agent(jvm.pid()) {
            // Another profiler's agent was there before record looked: record did not attach.
            eprintln!("attempt {attempt}: another profiler had attached JVM {pid}; again");
            continue;
        }
        assert!(seen, "the attach made its trigger file");
        if !trigger.exists() {
            return;
        }
        // Only the process that made a trigger file removes it (record, jcmd, the JDK's attach
        // API; the JVM never does). Another profiler of the machine (a host daemon, another
        // test suite's) that was attaching the same JVM removes its own once the JVM, running
        // again, answers it; record has ended, so a file that goes now was not record's, and
        // this run says nothing of record. Record's own file would stay.
        let since = Instant::now();
        while trigger.exists() && since.elapsed() < Duration::from_secs(15) {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(!trigger.exists(), "the trigger file was left behind");
        eprintln!("attempt {attempt}: another process was attaching JVM {pid} too; again");
    }
    panic!(
        "another process attached every JVM of this test as well (a host daemon?): run it alone"
    );
}

/// Runs `record --pid` on `jvm`, a `SafetyFakeAttach` of `user`, until the JVM has answered
/// `requests` more requests and record has written two cycles since (its attach is over and
/// said), or for a minute.
fn until_answered(run: &RecordRun, jvm: &Jvm, user: &User, requests: usize) -> Finished {
    let answered = || {
        std::fs::read_dir(user.home())
            .expect("the user's folder")
            .filter(|entry| {
                entry
                    .as_ref()
                    .is_ok_and(|entry| entry.file_name().to_string_lossy().starts_with("answered-"))
            })
            .count()
    };
    let enough = answered() + requests;
    let mut cycles_then = None;
    let command = run.command(&["--pid", &jvm.pid().to_string(), "--duration", "60"]);
    watch(command, Duration::from_secs(60), |_, record| {
        let cycles = run.cycles_so_far().len();
        match cycles_then {
            None if answered() >= enough => cycles_then = Some(cycles),
            Some(then) if cycles >= then + 2 => interrupt(record),
            _ => {}
        }
    })
}

/// What record says when the agent could not be loaded and no perf map could be read.
const FROM_CODE_CACHE: &str = "from its code cache (VMStructs)";

#[test]
fn an_attach_reply_is_read_up_to_its_cap_and_printed_escaped() {
    let _serial = serial();
    let user = User::create("flood");
    // The JVM itself listens on its socket name (the peer check passes) and answers every
    // request with 16 MB of escapes: the agent's load, then Compiler.perfmap.
    let jvm = user_jvm(&user, "SafetyFakeAttach", &["flood"]);
    let run = new_run();
    let flooded = until_answered(&run, &jvm, &user, 2);
    clear(&PathBuf::from(format!("/tmp/.java_pid{}", jvm.pid())));
    eprintln!(
        "stderr of {} bytes, peak RSS {} KiB",
        flooded.stderr.len(),
        flooded.peak_rss_kib
    );
    assert!(flooded.status.success(), "{}", flooded.stderr);
    assert!(
        flooded
            .stderr
            .contains("its answer to 'load' is longer than 1048576 bytes")
            && flooded.stderr.contains(FROM_CODE_CACHE),
        "{}",
        flooded.stderr
    );
    assert!(
        !flooded.stderr.contains('\x1b'),
        "an escape byte was printed"
    );
    assert!(!flooded.stderr.contains("root, run this"));
    assert!(
        flooded.stderr.len() < 64 << 10,
        "{} bytes",
        flooded.stderr.len()
    );
    assert!(
        flooded.peak_rss_kib < 128 << 10,
        "peak RSS {} KiB",
        flooded.peak_rss_kib
    );
    assert!(
        run.cycles()
            .iter()
            .any(|cycle| cycle["samples"].as_u64() > Some(0)),
        "the JVM was profiled all the same"
    );
}

#[test]
fn a_perf_map_that_is_a_link_a_fifo_another_users_or_too_big_is_not_read() {
    let _serial = serial();
    let user = User::create("pmap");
    // The JVM answers on its own socket: the agent's load fails (with escapes in the answer),
    // and Compiler.perfmap succeeds without writing a perf map, so record reads what is planted.
    let jvm = user_jvm(&user, "SafetyFakeAttach", &["perfmap"]);
    let map = PathBuf::from(format!("/tmp/perf-{}.map", jvm.pid()));
    let run = new_run();
    let planted = "7f0000000000 100 fake.Planted.method\n";
    let record = || {
        let finished = until_answered(&run, &jvm, &user, 2);
        assert!(finished.status.success(), "{}", finished.stderr);
        assert!(
            finished.stderr.contains("could not start the agent")
                && finished.stderr.contains("return code: 1")
                && finished.stderr.contains("\\u{1b}]0;owned"),
            "{}",
            finished.stderr
        );
        assert!(
            !finished.stderr.contains('\x1b'),
            "an escape byte was printed"
        );
        finished.stderr
    };

    // The user's own perf map is read, then removed.
    std::fs::write(&map, planted).expect("a perf map");
    user.own(&map);
    let stderr = record();
    assert!(
        stderr.contains("from its code cache and its perf map (Compiler.perfmap)"),
        "{stderr}"
    );
    assert!(!map.exists(), "the perf map read is removed");

    // A link to a file only root may read: not followed, not removed.
    let secret = run.dir.path().join("secret.map");
    std::fs::write(&secret, "7f0000000000 100 root.Secret.method\n").expect("a secret");
    user.symlink(&secret, &map);
    let stderr = record();
    assert!(stderr.contains(FROM_CODE_CACHE), "{stderr}");
    assert!(!stderr.contains("Secret"), "{stderr}");
    assert!(std::fs::symlink_metadata(&map).is_ok_and(|meta| meta.is_symlink()));
    assert!(secret.exists());
    clear(&map);

    // A FIFO of the user's: not waited for, not removed.
    user.mkfifo(&map);
    let stderr = record();
    assert!(stderr.contains(FROM_CODE_CACHE), "{stderr}");
    assert!(std::fs::symlink_metadata(&map).is_ok_and(|meta| meta.file_type().is_fifo()));
    clear(&map);

    // Root's file, not the JVM's user's: not read, not removed.
    std::fs::write(&map, planted).expect("root's perf map");
    let stderr = record();
    assert!(stderr.contains(FROM_CODE_CACHE), "{stderr}");
    assert!(is_regular(&map), "another user's file stays");
    clear(&map);

    // The user's, above the 64 MiB cap (sparse): not read.
    let big = std::fs::File::create(&map).expect("a big perf map");
    big.set_len((64 << 20) + 1).expect("64 MiB and a byte");
    user.own(&map);
    let stderr = record();
    assert!(stderr.contains(FROM_CODE_CACHE), "{stderr}");
    clear(&map);
    clear(&PathBuf::from(format!("/tmp/.java_pid{}", jvm.pid())));
}

//! The attach: a socket that is not the JVM's own is refused, and an attach cut short by the end
//! of the run leaves no trigger file.

use super::*;
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

//! What an unprivileged user can try against a profiler that runs as root (docs/security.md),
//! each as it was seen: the test makes a user (`useradd`), runs its JVMs as that user, plants what
//! that user could plant in /tmp or its own folders, and checks that `record` neither hangs, nor
//! misleads, nor writes or reads where it should not. They need root (the BPF sampler, the user)
//! and the JDKs of scripts/setup.sh, and run one at a time.
//!
//! `JOULARCODE_BPF_BIN=<an older joularcode-bpf>` runs them against that build instead: each
//! fails on a build from before the rules of docs/security.md.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use joularcode_testkit::host::{Tmpfs, User};
use joularcode_testkit::profiler::java_command;
use joularcode_testkit::record_run::RecordRun;
use joularcode_testkit::{jdk, one_at_a_time, one_error_line, processes_with, Jvm};

/// How long `record` may take beyond its `--duration` before it is taken for hung.
const HANG: Duration = Duration::from_secs(60);

fn serial() -> std::sync::MutexGuard<'static, ()> {
    one_at_a_time("the safety tests make a user and load the BPF sampler")
}

/// How a run of `record` went.
struct Finished {
    status: ExitStatus,
    stderr: String,
    /// The most memory record held (VmHWM), in KiB.
    peak_rss_kib: u64,
    /// Its CPU time (user + system), in seconds.
    cpu_s: f64,
    /// Its wall time.
    wall: Duration,
}

/// The profiler under test: `JOULARCODE_BPF_BIN`, else this build's.
fn binary() -> PathBuf {
    std::env::var_os("JOULARCODE_BPF_BIN").map_or_else(
        || env!("CARGO_BIN_EXE_joularcode-bpf").into(),
        PathBuf::from,
    )
}

/// A folder for one run of `record` ([`binary`]), at 100 W.
fn new_run() -> RecordRun {
    RecordRun::new(&binary(), "100")
}

/// Runs `command` to its end, calling `during` with the time elapsed and its pid every 100 ms
/// meanwhile; kills it and fails if it has not ended `HANG` after `expected`.
fn watch(
    mut command: Command,
    expected: Duration,
    mut during: impl FnMut(Duration, u32),
) -> Finished {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start joularcode-bpf");
    let mut pipe = child.stderr.take().expect("piped stderr");
    let (sender, stderr) = std::sync::mpsc::channel();
    // A command that outlives record would hold the pipe open: its text is waited for 5 s at
    // most after record ends.
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        let _ = sender.send(bytes);
    });
    let start = Instant::now();
    let (mut peak_rss_kib, mut cpu_s) = (0, 0.0);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for joularcode-bpf") {
            break status;
        }
        if let Some((peak, cpu)) = usage(child.id()) {
            (peak_rss_kib, cpu_s) = (peak, cpu);
        }
        if start.elapsed() > expected + HANG {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "joularcode-bpf hangs: still running {:?} after it started",
                start.elapsed()
            );
        }
        during(start.elapsed(), child.id());
        std::thread::sleep(Duration::from_millis(100));
    };
    let stderr = stderr
        .recv_timeout(Duration::from_secs(5))
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_else(|_| "(stderr held open by a process record left behind)".into());
    eprintln!("{}", stderr.chars().take(20_000).collect::<String>());
    Finished {
        status,
        stderr,
        peak_rss_kib,
        cpu_s,
        wall: start.elapsed(),
    }
}

/// The peak memory (VmHWM, KiB) and CPU time (s) of process `pid`, while it runs.
fn usage(pid: u32) -> Option<(u64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let peak = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches(" kB")
        .parse()
        .ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(") ")?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some((peak, ticks as f64 / 100.0))
}

/// A busy JVM (JDK 17) run by `user` in its folder.
fn user_jvm(user: &User, main_class: &str, args: &[&str]) -> Jvm {
    let mut command = Jvm::command(&jdk(17), &[], main_class, args);
    user.run_as(&mut command);
    Jvm::spawn(command)
}

/// The code map the agent writes for JVM `pid` (in this mount namespace's /tmp).
fn code_map(pid: u32) -> PathBuf {
    PathBuf::from(format!("/tmp/joularcode-{pid}.map"))
}

/// Whether `path` is there as a regular file (not following a link).
fn is_regular(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_file())
}

/// Removes what a test left at `path`, whatever it is.
fn clear(path: &Path) {
    let _ = std::fs::remove_file(path);
}

/// Whether process `pid` maps the symbolizer agent of the profiler under test (the one beside
/// [`binary`]: another profiler of the machine, such as a host daemon, may load its own).
fn maps_agent(pid: u32) -> bool {
    let agent = binary().with_file_name("libjvm_symbolizer_agent.so");
    let agent = agent.to_str().expect("a UTF-8 path");
    std::fs::read_to_string(format!("/proc/{pid}/maps")).is_ok_and(|maps| maps.contains(agent))
}

/// Whether process `pid` maps a symbolizer agent other than the one of the profiler under test
/// (another profiler of the machine attached it).
fn maps_another_agent(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .is_ok_and(|maps| maps.contains("libjvm_symbolizer_agent") && !maps_agent(pid))
}

/// A marker no other process of the machine has in its command line: a busy JVM's duration.
fn marker() -> String {
    format!("{}", 800_000 + std::process::id())
}

#[test]
fn a_fifo_for_a_code_map_hangs_nothing() {
    let _serial = serial();
    let user = User::create("fifo");
    let jvm = user_jvm(&user, "RecordBusy", &["1"]);
    let pid = jvm.pid().to_string();
    let map = code_map(jvm.pid());

    // Planted before the attach: the agent is not loaded into a JVM that would block on it, and
    // that is said.
    user.mkfifo(&map);
    let run = new_run();
    let before = watch(
        run.command(&["--pid", &pid, "--duration", "4"]),
        Duration::from_secs(4),
        |_, _| {},
    );
    assert!(before.status.success(), "{}", before.stderr);
    assert!(
        before.stderr.contains("is a FIFO, not a regular file")
            && before.stderr.contains("the symbolizer agent is not loaded"),
        "{}",
        before.stderr
    );
    assert!(run.cycles().len() >= 3, "{} cycles", run.cycles().len());
    assert!(!maps_agent(jvm.pid()));
    clear(&map);

    // Swapped for a FIFO while record reads it: record goes on with the code cache.
    let run = new_run();
    let mut swapped = None;
    let during = watch(
        run.command(&["--pid", &pid, "--duration", "8"]),
        Duration::from_secs(8),
        |elapsed, _| {
            if swapped.is_none() && is_regular(&map) && elapsed > Duration::from_secs(2) {
                clear(&map);
                user.mkfifo(&map);
                swapped = Some(elapsed);
            }
        },
    );
    clear(&map);
    let swapped = swapped.expect("the agent wrote its map");
    assert!(during.status.success(), "{}", during.stderr);
    assert!(
        during.stderr.contains("is a FIFO, not a regular file")
            && during.stderr.contains("named from its code cache"),
        "{}",
        during.stderr
    );
    let cycles = run.cycles().len();
    eprintln!(
        "swapped at {swapped:?}; {cycles} cycles in {:?}",
        during.wall
    );
    assert!(
        cycles >= 6,
        "{cycles} cycles: cycles stopped after the swap"
    );
}

/// The lines of a code map of `methods` methods and as many pieces of code (about 70 bytes each).
fn huge_code_map(path: &Path, pid: u32, methods: u64) {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("the huge map"));
    writeln!(out, "joularcode-code-map 2 monotonic {pid}").expect("written");
    for i in 0..methods {
        writeln!(
            out,
            "M {} com.example.generated.Service{}.method{i}",
            i % 0xff_ffff,
            i % 97
        )
        .expect("written");
        writeln!(
            out,
            "L {i} {:x} 40 {}",
            0x7f00_0000_0000 + i * 0x40,
            i % 0xff_ffff
        )
        .expect("written");
    }
    out.flush().expect("written");
}

#[test]
fn a_code_map_of_garbage_or_millions_of_records_costs_bounded_memory() {
    let _serial = serial();
    let user = User::create("huge");
    let jvm = user_jvm(&user, "RecordBusy", &["1"]);
    let pid = jvm.pid().to_string();
    let map = code_map(jvm.pid());

    // The map swapped for a link to /dev/zero once the agent writes it: refused, not read.
    let run = new_run();
    let mut swapped = false;
    let zero = watch(
        run.command(&["--pid", &pid, "--duration", "6"]),
        Duration::from_secs(6),
        |elapsed, _| {
            if !swapped && is_regular(&map) && elapsed > Duration::from_secs(2) {
                clear(&map);
                user.symlink(Path::new("/dev/zero"), &map);
                swapped = true;
            }
        },
    );
    clear(&map);
    assert!(swapped, "the agent wrote its map");
    eprintln!(
        "/dev/zero: peak RSS {} MiB, {:.2} s of CPU in {:?}, {} cycles",
        zero.peak_rss_kib >> 10,
        zero.cpu_s,
        zero.wall,
        run.cycles().len()
    );
    assert!(zero.peak_rss_kib < 200 << 10, "{} KiB", zero.peak_rss_kib);
    assert!(run.cycles().len() >= 4);
    assert!(zero.status.success(), "{}", zero.stderr);
    assert!(
        zero.stderr.contains("is a symbolic link"),
        "{}",
        zero.stderr
    );

    // The map of another JVM replaced by 4.5 million records of the user's: read at a bounded
    // rate and time per refresh, and only its first 2^20 lines kept (the cap itself is checked by
    // codemap's unit tests: how far a run gets depends on the machine's load).
    let jvm = user_jvm(&user, "RecordBusy", &["1"]);
    let pid = jvm.pid().to_string();
    let map = code_map(jvm.pid());
    let huge = PathBuf::from(format!("/tmp/jcsafe-huge-{}.map", std::process::id()));
    huge_code_map(&huge, jvm.pid(), 2_250_000);
    user.own(&huge);
    let run = new_run();
    let mut swapped = false;
    let big = watch(
        run.command(&["--pid", &pid, "--duration", "14"]),
        Duration::from_secs(14),
        |elapsed, _| {
            if !swapped && is_regular(&map) && elapsed > Duration::from_secs(2) {
                std::fs::rename(&huge, &map).expect("the huge map in place");
                swapped = true;
            }
        },
    );
    clear(&map);
    clear(&huge);
    assert!(swapped, "the agent wrote its map");
    let cycles = run.cycles().len();
    eprintln!(
        "4.5 M records: peak RSS {} MiB, {:.2} s of CPU in {:?}, {cycles} cycles",
        big.peak_rss_kib >> 10,
        big.cpu_s,
        big.wall
    );
    assert!(big.peak_rss_kib < 400 << 10, "{} KiB", big.peak_rss_kib);
    assert!(cycles >= 10, "{cycles} cycles");
    assert!(big.status.success(), "{}", big.stderr);
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
    let linked = watch(
        run.command(&["--pid", &jvm.pid().to_string(), "--duration", "5"]),
        Duration::from_secs(5),
        |_, _| {},
    );
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
    let faked = watch(
        run.command(&["--pid", &jvm.pid().to_string(), "--duration", "5"]),
        Duration::from_secs(5),
        |_, _| {},
    );
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

/// Sends `first` then, 10 ms later, `second` to record once its launched JVM has written two
/// cycles, and checks that record ends the JVM before it exits and writes the cycle that was in
/// progress.
fn two_signals(first: nix::sys::signal::Signal, second: nix::sys::signal::Signal) {
    let marker = marker();
    let run = new_run();
    let mut args = vec!["--".to_owned()];
    args.extend(java_command(&jdk(17), &[], "RecordBusy", &["1", &marker]));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut sent_ms = None;
    let finished = watch(run.command(&args), Duration::from_secs(30), |_, record| {
        if sent_ms.is_some() || run.cycles().len() < 2 {
            return;
        }
        let pid = nix::unistd::Pid::from_raw(i32::try_from(record).expect("a pid"));
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970");
        nix::sys::signal::kill(pid, first).expect("first signal");
        std::thread::sleep(Duration::from_millis(10));
        nix::sys::signal::kill(pid, second).expect("second signal");
        sent_ms = Some(now.as_millis() as i64);
    });
    let sent_ms = sent_ms.expect("record wrote two cycles");
    let left = processes_with(&marker);
    for &pid in &left {
        // This test's own command, left behind: ended before failing.
        let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).expect("a pid"));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
    }
    assert!(left.is_empty(), "the command outlives record: {left:?}");
    assert!(
        finished.status.code().is_some(),
        "record itself was ended by a signal: {:?}",
        finished.status
    );
    let last = run.cycles().last().cloned().expect("cycles");
    let end_ms = last["timestamp_ms"].as_i64().expect("a timestamp");
    assert!(
        end_ms >= sent_ms,
        "the cycle in progress at the signals ({sent_ms}) was not written: last ends {end_ms}"
    );
}

#[test]
fn two_signals_10_ms_apart_end_the_command_and_write_the_last_cycle() {
    let _serial = serial();
    use nix::sys::signal::Signal::{SIGINT, SIGTERM};
    two_signals(SIGINT, SIGINT);
    two_signals(SIGTERM, SIGTERM);
}

/// Runs `command`, which must be refused before it launches anything, with one line containing
/// `expected`.
fn assert_refused_before_launch(command: &mut Command, expected: &str, launched: &Path) {
    let output = command
        .stdin(Stdio::null())
        .output()
        .expect("run joularcode-bpf");
    let stderr = one_error_line(&output, expected);
    assert!(!launched.exists(), "the command was launched: {stderr}");
}

#[test]
fn outputs_through_another_users_link_or_into_a_fifo_are_refused_before_launch() {
    let _serial = serial();
    let user = User::create("link");
    let run = new_run();
    // A folder only root may write, and the user's link to it in a folder of the user's.
    let precious = run.dir.path().join("precious");
    std::fs::create_dir(&precious).expect("a root-only folder");
    let shared = user.home().join("shared");
    user.symlink(&precious, &shared);
    let launched = run.dir.path().join("launched");
    let command = ["--", "/bin/sh", "-c", "touch \"$0\""];
    let with_command = |options: &[&str]| {
        let mut record = run.bare(options);
        record.args(command).arg(&launched);
        record
    };
    let in_shared = |name: &str| shared.join(name).to_str().expect("UTF-8").to_owned();
    assert_refused_before_launch(
        &mut with_command(&["--results-path", &in_shared("sub")]),
        "is a symbolic link",
        &launched,
    );
    assert_refused_before_launch(
        &mut with_command(&["--cycle-log", &in_shared("c.log")]),
        "is a symbolic link",
        &launched,
    );
    assert_refused_before_launch(
        &mut with_command(&["--flamegraph", &in_shared("flame.svg")]),
        "is a symbolic link",
        &launched,
    );
    assert_eq!(
        std::fs::read_dir(&precious).expect("listed").count(),
        0,
        "nothing written through the link"
    );

    // A FIFO in place of a results file, or of the cycle log.
    let results = run.results();
    std::fs::create_dir(&results).expect("the results folder");
    user.mkfifo(&results.join("methods-power-all.csv"));
    let results_path = results.to_str().expect("UTF-8");
    assert_refused_before_launch(
        &mut with_command(&["--results-path", results_path]),
        "is not a regular file",
        &launched,
    );
    user.mkfifo(&run.cycle_log());
    assert_refused_before_launch(
        &mut with_command(&["--cycle-log", run.cycle_log().to_str().expect("UTF-8")]),
        "is not a regular file",
        &launched,
    );
}

#[test]
fn impossible_power_readings_are_skipped_and_said() {
    let _serial = serial();
    let jvm = Jvm::start(&jdk(17), &[], "RecordBusy", &["1"]);
    let pid = jvm.pid().to_string();
    let run = new_run();
    run.set_watts("1e308");
    let output = run
        .command(&["--pid", &pid, "--duration", "2"])
        .stdin(Stdio::null())
        .output()
        .expect("run joularcode-bpf");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("holds 1.0E308 W, more than any machine's CPUs draw"),
        "refused at start: {stderr}"
    );

    // While it runs: 100 W, 1e308, 100 W, NaN, 100 W, two seconds each.
    run.set_watts("100");
    let phases = ["100", "1e308", "100", "NaN", "100"];
    let mut phase = 0;
    let finished = watch(
        run.command(&["--pid", &pid, "--duration", "10"]),
        Duration::from_secs(10),
        |elapsed, _| {
            let now = (elapsed.as_secs() / 2) as usize;
            if now != phase && now < phases.len() {
                phase = now;
                run.set_watts(phases[now]);
            }
        },
    );
    assert!(finished.status.success(), "{}", finished.stderr);
    for said in [
        "1.0E308 W, more than any machine's CPUs draw (at most 10000.0 W)",
        "holds NaN, which is not a power in watts",
        "The CPU power can be read again",
    ] {
        assert!(
            finished.stderr.contains(said),
            "{said}: {}",
            finished.stderr
        );
    }
    for file in ["methods-power-all.csv", "methods-power-app.csv"] {
        let text = std::fs::read_to_string(run.results().join(file)).expect("the results");
        for row in text.lines().skip(1) {
            for number in row.rsplitn(5, ',').take(4) {
                let value: f64 = number.parse().unwrap_or(f64::NAN);
                assert!(value.is_finite() && value < 1e5, "{file}: {row}");
            }
        }
    }
    for cycle in run.cycles() {
        let power = cycle["source_power_w"].as_f64().expect("a power");
        assert!(power == 0.0 || power == 100.0, "{cycle}");
    }
}

#[test]
fn a_latin_1_properties_file_is_used() {
    let _serial = serial();
    let run = new_run();
    // "résultats" and a comment with "è", in ISO-8859-1 (not UTF-8)
    std::fs::write(
        run.dir.path().join("joularcodejava.properties"),
        b"# Param\xe8tres de mesure\nresults-path=r\xe9sultats\nmethods-filtering-prefix=RecordBrief\n",
    )
    .expect("the properties file");
    let mut args = vec!["--".to_owned()];
    // Two seconds of work: enough samples in its one method on a loaded machine.
    args.extend(java_command(&jdk(17), &[], "RecordBrief", &["2000", "0"]));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let finished = watch(run.bare(&args), Duration::from_secs(5), |_, _| {});
    assert!(finished.status.success(), "{}", finished.stderr);
    assert!(
        finished
            .stderr
            .contains("is not valid UTF-8 (byte 0xE8 on line 1): it is read as ISO-8859-1"),
        "{}",
        finished.stderr
    );
    let app = run.dir.path().join("résultats/methods-power-app.csv");
    let rows = std::fs::read_to_string(&app).expect("the results in résultats");
    assert!(
        rows.lines().skip(1).all(|row| row.contains("RecordBrief")),
        "{rows}"
    );
    assert!(rows.lines().count() > 1, "{rows}");
}

#[test]
fn a_full_disk_loses_rows_says_so_and_exits_non_zero() {
    let _serial = serial();
    let disk = Tmpfs::mount("256k");
    let jvm = Jvm::start(&jdk(17), &[], "RecordBusy", &["2"]);
    let run = new_run();
    let results = disk.path().join("results");
    let filler = disk.path().join("filler");
    let mut command = run.bare(&["--pid", &jvm.pid().to_string(), "--duration", "40"]);
    command.arg("--results-path").arg(&results);
    // The disk is filled after 3 s once record has written rows (a loaded machine can take longer
    // to start it), and freed once the all-file has stopped growing for 2.5 s
    // (a file's last page takes a few cycles' rows before one needs a new one); record is
    // stopped 3 s later.
    let all = results.join("methods-power-all.csv");
    let (mut filled, mut freed) = (None::<(u64, Duration)>, None::<Duration>);
    let finished = watch(command, Duration::from_secs(40), |elapsed, record| {
        let size = std::fs::metadata(&all).map_or(0, |meta| meta.len());
        match (filled, freed) {
            (None, _) if size > 0 && elapsed > Duration::from_secs(3) => {
                use std::io::Write;
                let mut file = std::fs::File::create(&filler).expect("the filler");
                while file.write_all(&[0; 4096]).is_ok() {}
                filled = Some((size, elapsed));
            }
            (Some((last, _)), None) if size != last => filled = Some((size, elapsed)),
            (Some((_, since)), None) if elapsed - since > Duration::from_millis(2500) => {
                std::fs::remove_file(&filler).expect("the filler removed");
                freed = Some(elapsed);
            }
            (Some(_), Some(at)) if elapsed - at > Duration::from_secs(3) => {
                let pid = nix::unistd::Pid::from_raw(i32::try_from(record).expect("a pid"));
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
            }
            _ => {}
        }
    });
    let freed = freed.is_some();
    assert!(freed, "{}", finished.stderr);
    assert_eq!(finished.status.code(), Some(1), "{}", finished.stderr);
    for said in [
        "SEVERE: Could not write results to",
        "works again; ",
        "could not be written (see above): the results are incomplete.",
    ] {
        assert!(
            finished.stderr.contains(said),
            "{said}: {}",
            finished.stderr
        );
    }
    let text = std::fs::read_to_string(results.join("methods-power-all.csv")).expect("results");
    for row in text.lines().skip(1) {
        assert_eq!(row.split(',').count(), 6, "a whole row: {row}");
    }
}

#[test]
fn a_command_without_a_jvm_is_said() {
    let _serial = serial();
    let run = new_run();
    let finished = watch(
        run.command(&["--", "/bin/sh", "-c", "exit 3"]),
        Duration::from_secs(2),
        |_, _| {},
    );
    assert_eq!(finished.status.code(), Some(3), "{}", finished.stderr);
    assert!(
        finished
            .stderr
            .contains("No JVM was profiled: the command started no JVM"),
        "{}",
        finished.stderr
    );
    assert!(!run.results().exists());
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
        let finished = watch(
            run.command(&["--pid", &jvm.pid().to_string(), "--duration", "3"]),
            Duration::from_secs(3),
            |_, _| seen |= trigger.exists(),
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

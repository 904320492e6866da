//! Names from outside (a method's name in a class file, a thread's name, a results file another
//! user hands root) reach what people and parsers read escaped: `report`'s tables, the folded
//! stacks of `stacks`, `top`'s plain text, `raw`'s threads, the flame graph (which parses as XML
//! and draws in chromium). A standard output that cannot be written (a closed pipe, a full
//! disk) ends each command with one line and status 1, never a panic; a stderr that cannot be
//! written loses the messages, not the recording. An oversized `--config` is refused in one line.

use super::*;

use joularcode_testkit::one_error_line;

/// What a terminal would act on: control characters (but the line end) and bidi overrides.
fn acted_on(c: char) -> bool {
    (c.is_control() && c != '\n') || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Asserts that `text` holds nothing a terminal would act on.
fn assert_shown_escaped(what: &str, text: &str) {
    assert!(!text.contains(acted_on), "{what} shows raw: {text:?}");
}

/// An SVG file read by a real XML parser: the text of its `<title>`s.
fn svg_titles(svg: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(svg).expect("the SVG");
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    let document = roxmltree::Document::parse_with_options(&text, options)
        .unwrap_or_else(|e| panic!("{} is not XML: {e}", svg.display()));
    document
        .descendants()
        .filter(|node| node.has_tag_name("title"))
        .filter_map(|node| node.text().map(str::to_string))
        .collect()
}

/// A standard output whose disk is full.
fn full_disk() -> Stdio {
    Stdio::from(
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full"),
    )
}

/// A standard output whose reader has gone, as after `| head -1`.
fn closed_pipe() -> Stdio {
    let (reader, writer) = nix::unistd::pipe().expect("a pipe");
    drop(reader);
    Stdio::from(writer)
}

/// Runs `command` with a full disk, then a closed pipe, as its standard output: each ends with
/// one error line that says so, and status 1.
fn assert_one_line_on_a_failed_stdout(what: &str, mut command: impl FnMut() -> Command) {
    for (out, reason) in [
        (full_disk(), "No space left on device"),
        (closed_pipe(), "Broken pipe"),
    ] {
        let output = command()
            .stdout(out)
            .stderr(Stdio::piped())
            .output()
            .expect("run joularcode-bpf");
        let stderr = one_error_line(&output, "cannot write on the standard output");
        assert!(stderr.contains(reason), "{what}: {stderr}");
        assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    }
}

/// A results folder as another user could write it by hand: a JVM folder whose name and
/// branches hold an escape sequence, a bell, a line end that would forge a row, a bidi override,
/// XML markup and a character XML forbids.
fn hostile_results(dir: &Path) -> PathBuf {
    let results = dir.join("results");
    let jvm = results.join("JVM 7 (\x1b]0;owned\x07)");
    std::fs::create_dir_all(&jvm).expect("the results' folder");
    let rows = [
        ("java.lang.Thread.run;a.A.wipe\x1b[2J\x07", 3),
        (
            "java.lang.Thread.run;a.A.forged\n     99.000  99.0%  a.Fake",
            2,
        ),
        ("java.lang.Thread.run;a.A.\u{202e}txt.exe", 1),
        ("java.lang.Thread.run;a.A.<b>&x\u{ffff}", 1),
    ];
    let mut text = format!("{}\n", joularcode_core::output::csv::HEADER);
    for (i, (branch, joules)) in rows.iter().enumerate() {
        text.push_str(&format!(
            "{},{},{joules}.000000000,{joules}.000000000,1.000000000,1.0000\n",
            1000 * (i + 1),
            joularcode_core::output::csv::escape(branch)
        ));
    }
    for file in ["methods-power-app.csv", "methods-power-all.csv"] {
        std::fs::write(jvm.join(file), &text).expect("a results file");
    }
    results
}

#[test]
fn report_shows_names_escaped_and_its_flame_graph_parses_and_draws() {
    let dir = work_dir().join("printed-report");
    let _ = std::fs::remove_dir_all(&dir);
    let results = hostile_results(&dir);
    let svg = dir.join("hostile.svg");
    let output = run(&mut profiler(&[
        "report",
        &results.display().to_string(),
        "--flamegraph",
        &svg.display().to_string(),
    ]));
    assert_eq!(output.status.code(), Some(0));
    let table = stdout(&output);
    assert_shown_escaped("the table", &table);
    assert!(table.contains("JVM 7 (\\u{1b}]0;owned\\u{7})"), "{table}");
    assert!(table.contains("a.A.wipe\\u{1b}[2J\\u{7}\n"), "{table}");
    assert!(
        table.contains("a.A.forged\\u{a}     99.000  99.0%  a.Fake\n"),
        "{table}"
    );
    assert!(
        !table
            .lines()
            .any(|line| line.trim_start().starts_with("99.000")),
        "a forged row: {table}"
    );
    assert!(table.contains("a.A.\\u{202e}txt.exe\n"), "{table}");
    assert!(table.contains("a.A.<b>&x\\u{ffff}\n"), "{table}");

    let titles = svg_titles(&svg);
    for name in ["a.A.wipe\\u{1b}[2J\\u{7}", "a.A.<b>&x\\u{ffff}"] {
        assert!(
            titles.iter().any(|t| t.starts_with(&format!("{name} ("))),
            "{name}: {titles:?}"
        );
    }
    let seen = flamegraph::open_in_browser(
        &svg,
        &artifacts().join("printed"),
        "a.A.wipe\\u{1b}[2J\\u{7}",
        "wipe",
    );
    let frame = flamegraph::widest_frame(&seen, "a.A.wipe\\u{1b}[2J\\u{7}");
    assert!(frame["width"].as_f64().expect("a width") > 100.0, "{seen}");
    assert!(
        seen["title"]
            .as_str()
            .is_some_and(|t| t.contains("JVM 7 (\\u{1b}]0;owned\\u{7})")),
        "{seen}"
    );
}

#[test]
fn report_ends_in_one_line_on_a_closed_pipe_or_a_full_disk() {
    let dir = work_dir().join("printed-stdout");
    let _ = std::fs::remove_dir_all(&dir);
    let results = hostile_results(&dir);
    let results = results.display().to_string();
    assert_one_line_on_a_failed_stdout("report", || profiler(&["report", &results]));
    assert_one_line_on_a_failed_stdout("report --baseline", || {
        profiler(&["report", &results, "--baseline", &results])
    });
    assert_one_line_on_a_failed_stdout("--help", || profiler(&["report", "--help"]));
}

#[test]
fn an_oversized_config_is_refused_in_one_line_before_anything_runs() {
    let dir = work_dir().join("printed-config");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the test's folder");
    let config = dir.join("big.properties");
    std::fs::write(&config, "results-path=mine\n".repeat(70_000)).expect("the file");
    let results = dir.join("results");
    let launched = dir.join("launched");
    let record = |command: &str| {
        let mut args = vec![
            command.to_string(),
            "--config".into(),
            config.display().to_string(),
            "--results-path".into(),
            results.display().to_string(),
        ];
        if command == "daemon" {
            args.extend(["--listen".into(), "127.0.0.1:0".into()]);
        } else {
            args.extend(["--".into(), "touch".into(), launched.display().to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&mut profiler(&args))
    };
    for command in ["record", "daemon"] {
        let output = record(command);
        one_error_line(&output, "larger than 1048576 bytes");
        assert!(!launched.exists(), "{command} ran its command");
        assert!(!results.exists(), "{command} made its results folder");
    }
}

/// The class `PrintedNames` with its hot method's placeholder name patched, at the same length,
/// into one no Java source can hold, in a folder of its own: the class path of the JVM.
fn patched_classes() -> PathBuf {
    let dir = work_dir().join("printed-classes");
    std::fs::create_dir_all(&dir).expect("the classes' folder");
    let class = std::fs::read(workload_classes().join("PrintedNames.class")).expect("the class");
    let (placeholder, name) = ("hotZZZZYYXXXend".as_bytes(), "hot\x1b[2J\x07\n\u{202e}end");
    assert_eq!(placeholder.len(), name.len());
    let mut patched = Vec::with_capacity(class.len());
    let mut rest = &class[..];
    while let Some(at) = rest
        .windows(placeholder.len())
        .position(|w| w == placeholder)
    {
        patched.extend_from_slice(&rest[..at]);
        patched.extend_from_slice(name.as_bytes());
        rest = &rest[at + placeholder.len()..];
    }
    patched.extend_from_slice(rest);
    assert_ne!(patched, class, "no placeholder in PrintedNames.class");
    std::fs::write(dir.join("PrintedNames.class"), patched).expect("the patched class");
    dir
}

/// The busy JVM of [`patched_classes`], 120 s at most. HotSpot refuses such a name when it
/// verifies the class: the JVM's owner, who chooses its options, turns verification off.
pub(super) fn hostile_jvm() -> Jvm {
    let mut command = Command::new(jdk(17).java());
    command
        .args([
            "-XX:+UnlockDiagnosticVMOptions",
            "-XX:-BytecodeVerificationRemote",
        ])
        .arg("-cp")
        .arg(patched_classes())
        .args(["PrintedNames", "120"]);
    Jvm::spawn(command)
}

/// `joularcode-bpf COMMAND --pid PID --duration 3 EXTRA`, the power from a constant file.
fn on_jvm(command: &str, pid: u32, extra: &[&str]) -> Command {
    let pid = pid.to_string();
    let mut args = vec![command, "--pid", &pid, "--duration", "3"];
    args.extend_from_slice(extra);
    let source = vm_source();
    if command == "top" || command == "record" {
        args.extend(source.iter().map(String::as_str));
    } else if command == "stacks" {
        args.extend(source[6..].iter().map(String::as_str));
    }
    profiler(&args)
}

#[test]
fn a_jvms_names_reach_stacks_top_raw_and_the_flame_graph_escaped() {
    let _serial = serial();
    let jvm = hostile_jvm();
    let method = "PrintedNames.hot\\u{1b}[2J\\u{7}\\u{a}\\u{202e}end";

    let stacks = run(&mut on_jvm("stacks", jvm.pid(), &[]));
    assert_eq!(stacks.status.code(), Some(0));
    let folded = stdout(&stacks);
    assert_shown_escaped("stacks", &folded);
    assert!(folded.contains(method), "{folded}");
    for line in folded.lines() {
        let count = line.rsplit_once(' ').map(|(_, count)| count);
        assert!(
            count.is_some_and(|c| c.parse::<u64>().is_ok()),
            "a forged line: {line:?}"
        );
    }

    let top = run(&mut on_jvm("top", jvm.pid(), &[]));
    assert_eq!(top.status.code(), Some(0));
    let plain = stdout(&top);
    assert_shown_escaped("top", &plain);
    assert!(plain.contains(method), "{plain}");

    let raw = run(&mut on_jvm("raw", jvm.pid(), &[]));
    assert_eq!(raw.status.code(), Some(0));
    let threads = stdout(&raw);
    assert_shown_escaped("raw", &threads);
    assert!(threads.contains("w\\u{1b}[2J\\u{7}\\u{202e}"), "{threads}");

    let dir = work_dir().join("printed-record");
    let _ = std::fs::remove_dir_all(&dir);
    let svg = dir.join("record.svg");
    let results = dir.join("results").display().to_string();
    std::fs::create_dir_all(&dir).expect("the test's folder");
    let record = run(&mut on_jvm(
        "record",
        jvm.pid(),
        &[
            "--results-path",
            &results,
            "--flamegraph",
            &svg.display().to_string(),
        ],
    ));
    assert_eq!(record.status.code(), Some(0));
    let titles = svg_titles(&svg);
    assert!(
        titles.iter().any(|t| t.starts_with(&format!("{method} ("))),
        "{titles:?}"
    );
    let report = run(&mut profiler(&["report", &results]));
    let table = stdout(&report);
    assert_shown_escaped("report", &table);
    assert!(table.contains(method), "{table}");
}

#[test]
fn stacks_top_and_raw_end_in_one_line_on_a_closed_pipe_or_a_full_disk() {
    let _serial = serial();
    let jvm = hostile_jvm();
    for command in ["stacks", "top", "raw"] {
        assert_one_line_on_a_failed_stdout(command, || on_jvm(command, jvm.pid(), &[]));
    }
}

#[test]
fn record_and_daemon_lose_messages_not_results_when_stdout_and_stderr_fail() {
    let _serial = serial();
    let jvm = hostile_jvm();
    let dir = work_dir().join("printed-lost-stderr");
    let _ = std::fs::remove_dir_all(&dir);
    let results = dir.join("results");
    let status = on_jvm(
        "record",
        jvm.pid(),
        &["--results-path", &results.display().to_string()],
    )
    .stdout(full_disk())
    .stderr(closed_pipe())
    .status()
    .expect("run record");
    assert_eq!(status.code(), Some(0));
    // Every row whole: the csv crate reads them all.
    let energy = csv_energy(&results.join("methods-power-all.csv"));
    assert!(joules_of(&energy, "PrintedNames.hot") > 0.0, "{energy:?}");

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let listen = format!("127.0.0.1:{port}");
    let mut args = vec!["daemon", "--listen", &listen];
    // The power source only: the daemon loads no agent by default.
    let source = vm_source();
    args.extend(source[..6].iter().map(String::as_str));
    let mut daemon = profiler(&args)
        .stdout(closed_pipe())
        .stderr(full_disk())
        .spawn()
        .expect("start the daemon");
    let start = Instant::now();
    let metrics = loop {
        let scraped = Command::new("curl")
            .args(["-sf", &format!("http://{listen}/metrics")])
            .output()
            .expect("curl runs");
        let text = String::from_utf8_lossy(&scraped.stdout).into_owned();
        if text.contains("PrintedNames") || start.elapsed() > Duration::from_secs(30) {
            break text;
        }
        assert!(
            daemon.try_wait().expect("wait").is_none(),
            "the daemon ended"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let pid = nix::unistd::Pid::from_raw(i32::try_from(daemon.id()).expect("a pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let status = daemon.wait().expect("the daemon's end");
    assert!(metrics.contains("PrintedNames"), "{metrics}");
    assert_eq!(status.code(), Some(0));
}

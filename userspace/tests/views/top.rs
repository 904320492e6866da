//! `top` under tmux with two JVMs: both shown with their power, keys move the view, and q,
//! Ctrl-C, SIGTERM or an error give the terminal back as it was.

use super::*;

/// A tmux session of its own, running bash, killed when dropped.
struct Tmux {
    name: String,
}

impl Tmux {
    fn new(name: &str) -> Tmux {
        let tmux = Tmux {
            name: format!("{name}-{}", std::process::id()),
        };
        let status = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                &tmux.name,
                "-x",
                "132",
                "-y",
                "34",
            ])
            .args(["bash", "--norc", "--noprofile"])
            .status()
            .expect("tmux runs (scripts/setup.sh installs it)");
        assert!(status.success(), "tmux new-session failed");
        tmux
    }

    fn tmux(&self, args: &[&str]) -> String {
        let output = Command::new("tmux").args(args).output().expect("tmux runs");
        assert!(output.status.success(), "tmux {args:?}");
        stdout(&output)
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", &self.name];
        args.extend(keys);
        self.tmux(&args);
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", &self.name])
    }

    fn display(&self, format: &str) -> String {
        self.tmux(&["display", "-p", "-t", &self.name, format])
            .trim()
            .to_string()
    }

    /// Waits until the screen satisfies `ready`, and returns it.
    fn wait_for(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if ready(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no {what} in 60 s:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The pid of the program the shell runs in the foreground.
    fn foreground_child(&self) -> u32 {
        let shell = self.display("#{pane_pid}");
        let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children"))
            .expect("the shell's children");
        children
            .split_whitespace()
            .next()
            .expect("a child")
            .parse()
            .expect("a pid")
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.name])
            .status();
    }
}

/// The JVM rows of `top`'s screen: pid and watts.
fn top_rows(screen: &str) -> HashMap<u32, f64> {
    screen
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line
                .trim_matches(|c| c == '│' || c == ' ')
                .split_whitespace()
                .collect();
            match fields[..] {
                [pid, watts, share, _, _, ..] if share.ends_with('%') => {
                    Some((pid.parse().ok()?, watts.parse().ok()?))
                }
                _ => None,
            }
        })
        .collect()
}

/// The command line of `top` with `args`, the vm power source and the demo's and RecordBusy's
/// frames as the application's.
fn top_command(args: &[String]) -> String {
    let mut command = vec![
        env!("CARGO_BIN_EXE_joularcode-bpf").to_string(),
        "top".into(),
    ];
    command.extend_from_slice(args);
    command.extend(vm_source());
    command.extend([
        "--methods-filtering-prefix".into(),
        "DemoShop,Record".into(),
    ]);
    command.join(" ")
}

/// Waits until `top`'s screen shows each JVM of `pids` with a non-zero power, by the third
/// cycle, and returns that screen and its cycle.
fn wait_for_power(tmux: &Tmux, pids: &[u32]) -> (String, u64) {
    let screen = tmux.wait_for("the JVMs with power", |screen| {
        let rows = top_rows(screen);
        pids.iter()
            .all(|pid| rows.get(pid).is_some_and(|&w| w > 0.0))
    });
    eprintln!("{screen}");
    let cycle = top_cycle(&screen).expect("a cycle in the header");
    assert!(
        cycle <= 3,
        "the JVMs {pids:?} had power only at cycle {cycle}"
    );
    (screen, cycle)
}

/// The cycle `top`'s header says.
fn top_cycle(screen: &str) -> Option<u64> {
    let after = screen.split_once("| cycle ")?.1;
    after.split(':').next()?.parse().ok()
}

/// The exit status the shell printed after `top`: `TOP-EXIT=0` (the typed command line holds
/// `TOP-EXIT=$status`).
/// The exit status the shell printed after the run named `stop` (see `run_line`). The typed line
/// holds the marker too, followed by `$status`, which is no number: a screen still showing an
/// earlier run, or the line typed but not yet run, gives `None`.
fn exit_status(screen: &str, stop: &str) -> Option<i32> {
    screen
        .split(&exit_marker(stop))
        .skip(1)
        .find_map(|rest| rest.split_whitespace().next()?.parse().ok())
}

/// What the shell prints before the exit status of the run named `stop`.
fn exit_marker(stop: &str) -> String {
    format!("TOP-EXIT[{}]=", stop.replace(' ', "-"))
}

/// The terminal is as before `top` ran: the main screen, the cursor shown, the same stty modes.
fn assert_restored(tmux: &Tmux, stop: &str, before: &Path, after: &Path) {
    let screen = tmux.wait_for("the shell back", |screen| {
        exit_status(screen, stop).is_some()
    });
    assert_eq!(
        tmux.display("#{alternate_on}"),
        "0",
        "{stop}: left the alternate screen\n{screen}"
    );
    assert_eq!(tmux.display("#{cursor_flag}"), "1", "the cursor shows");
    assert_eq!(
        std::fs::read_to_string(before).unwrap(),
        std::fs::read_to_string(after).unwrap(),
        "the terminal's modes are back"
    );
}

/// The screen with its colors, as an HTML page (aha) and a PNG (chromium).
fn save_screen(tmux: &Tmux, name: &str) {
    let ansi = tmux.tmux(&["capture-pane", "-e", "-p", "-t", &tmux.name]);
    let html_path = artifacts().join(format!("{name}.html"));
    let mut aha = Command::new("aha")
        .args(["--black", "--title", "joularcode-bpf top"])
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&html_path).unwrap())
        .spawn()
        .expect("aha runs (scripts/setup.sh installs it)");
    std::io::Write::write_all(&mut aha.stdin.take().unwrap(), ansi.as_bytes()).unwrap();
    assert!(aha.wait().unwrap().success());
    let png = artifacts().join(format!("{name}.png"));
    let args = [
        html_path.as_os_str(),
        png.as_os_str(),
        "980".as_ref(),
        "370".as_ref(),
    ];
    browser("screenshot.mjs", &args);
}

#[test]
fn top_under_tmux_shows_two_jvms_and_gives_the_terminal_back() {
    let _serial = serial();
    let busy = Jvm::start(&jdk(17), &[], "RecordBusy", &["1", "1000000", "60"]);
    let demo = Jvm::start(&jdk(21), &[], "DemoShop", &["600"]);
    let dir = work_dir().join("top");
    std::fs::create_dir_all(&dir).unwrap();
    let pids: Vec<String> = [busy.pid(), demo.pid()]
        .iter()
        .flat_map(|pid| ["--pid".to_string(), pid.to_string()])
        .collect();
    let command = top_command(&pids);
    let tmux = Tmux::new("views-top");
    let (before, after) = (dir.join("stty.before"), dir.join("stty.after"));
    let run_line = |stop: &str, command: &str| {
        format!(
            "clear; echo '# {stop}'; stty -g > {}; {command}; status=$?; stty -g > {}; \
             echo '{}'$status",
            before.display(),
            after.display(),
            exit_marker(stop)
        )
    };
    let line = |stop: &str| run_line(stop, &command);

    // q: both JVMs are there with their power within three cycles; the keys move the view.
    tmux.keys(&[&line("quit with q"), "Enter"]);
    let (screen, cycle) = wait_for_power(&tmux, &[busy.pid(), demo.pid()]);
    let selected = |screen: &str| -> u32 {
        let title = screen
            .lines()
            .find(|l| l.contains(" of JVM "))
            .expect("the list's title");
        title
            .split(" of JVM ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let first = selected(&screen);
    tmux.keys(&["Down"]);
    let screen = tmux.wait_for("the other JVM selected", |s| selected(s) != first);
    let second = selected(&screen);
    assert!([busy.pid(), demo.pid()].contains(&second) && second != first);
    tmux.keys(&["Up"]);
    tmux.wait_for("the first JVM again", |s| selected(s) == first);
    tmux.keys(&["b"]);
    tmux.wait_for("branches", |s| s.contains("Branches of JVM"));
    tmux.keys(&["s"]);
    tmux.wait_for("the order by energy", |s| s.contains("by J since start"));
    tmux.keys(&["a"]);
    tmux.wait_for("the application's branches", |s| {
        s.contains("application branches")
    });
    tmux.keys(&["m", "s", "s"]);
    for key in ["Down", "Up"] {
        let screen = tmux.wait_for("the application's methods by W", |s| {
            s.contains("application branches, by W now")
        });
        if selected(&screen) == demo.pid() {
            break;
        }
        tmux.keys(&[key]);
        std::thread::sleep(Duration::from_millis(300));
    }
    let screen = tmux.wait_for("the demo's methods", |s| {
        s.contains(&format!(
            "Methods of JVM {} (DemoShop), application branches, by W now",
            demo.pid()
        )) && s.contains("DemoShop.sign")
            && top_cycle(s).is_some_and(|c| c >= cycle + 3)
    });
    eprintln!("{screen}");
    save_screen(&tmux, "top");
    tmux.keys(&["q"]);
    assert_restored(&tmux, "quit with q", &before, &after);
    assert_eq!(
        exit_status(&tmux.screen(), "quit with q"),
        Some(0),
        "{}",
        tmux.screen()
    );
    assert!(
        tmux.screen().contains("# quit with q"),
        "the main screen is back as it was"
    );

    // Ctrl-C, a key in raw mode, ends it as q does.
    tmux.keys(&[&line("quit with Ctrl-C"), "Enter"]);
    tmux.wait_for("a cycle", |s| top_cycle(s).is_some());
    tmux.keys(&["C-c"]);
    assert_restored(&tmux, "quit with Ctrl-C", &before, &after);
    assert_eq!(
        exit_status(&tmux.screen(), "quit with Ctrl-C"),
        Some(0),
        "{}",
        tmux.screen()
    );

    // SIGTERM ends the recording, which ends the view.
    tmux.keys(&[&line("quit with SIGTERM"), "Enter"]);
    tmux.wait_for("a cycle", |s| top_cycle(s).is_some());
    let top = tmux.foreground_child();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(top).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM to top");
    assert_restored(&tmux, "quit with SIGTERM", &before, &after);
    assert_eq!(
        exit_status(&tmux.screen(), "quit with SIGTERM"),
        Some(0),
        "{}",
        tmux.screen()
    );

    // An error once the view has taken the terminal over: the terminal is given back before the
    // error's line is printed.
    let missing = dir.join("no-such-watts-file");
    let failing = format!(
        "{} top --power-source-type vm --vm-power-file {}",
        env!("CARGO_BIN_EXE_joularcode-bpf"),
        missing.display()
    );
    tmux.keys(&[&run_line("an error", &failing), "Enter"]);
    assert_restored(&tmux, "an error", &before, &after);
    let screen = tmux.screen();
    assert_eq!(exit_status(&screen, "an error"), Some(1), "{screen}");
    assert!(
        screen.contains("joularcode-bpf: Cannot measure the CPU power"),
        "{screen}"
    );
}

#[test]
fn top_of_the_host_under_tmux_shows_two_jvms() {
    let _serial = serial();
    let busy = Jvm::start(&jdk(17), &[], "RecordBusy", &["1", "1000000", "60"]);
    let demo = Jvm::start(&jdk(21), &[], "DemoShop", &["600"]);
    // No --pid: every JVM of the host, those of other tests too, left without our agent.
    let command = top_command(&["--no-attach".into()]);
    let tmux = Tmux::new("views-top-host");
    let stop = "host";
    tmux.keys(&[
        &format!("clear; {command}; echo '{}'$?", exit_marker(stop)),
        "Enter",
    ]);
    let (screen, _) = wait_for_power(&tmux, &[busy.pid(), demo.pid()]);
    let others: Vec<u32> = top_rows(&screen)
        .into_keys()
        .filter(|pid| ![busy.pid(), demo.pid()].contains(pid))
        .collect();
    eprintln!("other JVMs of the host shown: {others:?}");
    for (jvm, main_class) in [(&busy, "RecordBusy"), (&demo, "DemoShop")] {
        let row = screen
            .lines()
            .map(|line| line.trim_matches(|c| c == '│' || c == ' '))
            .find(|row| row.starts_with(&format!("{} ", jvm.pid())))
            .expect("the JVM's row");
        assert!(row.ends_with(main_class), "{row}");
    }
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("the shell back", |s| exit_status(s, stop).is_some());
    assert_eq!(exit_status(&screen, stop), Some(0), "{screen}");
}

#[test]
fn top_prints_plain_text_when_not_on_a_terminal() {
    let _serial = serial();
    let jvm = Jvm::start(&jdk(17), &[], "RecordBusy", &["1"]);
    let mut args = vec!["top".to_string(), "--pid".into(), jvm.pid().to_string()];
    args.extend(vm_source());
    args.extend([
        "--duration".into(),
        "3.5".into(),
        "--top".into(),
        "3".into(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = run(&mut profiler(&args));
    assert!(output.status.success());
    let text = stdout(&output);
    eprintln!("{text}");
    assert!(
        !text.contains('\u{1b}'),
        "no terminal escapes in plain text"
    );
    let cycles = text
        .lines()
        .filter(|line| line.starts_with("cycle "))
        .count();
    assert!(cycles >= 3, "one block per cycle: {cycles}");
    assert!(
        text.contains(&format!("Methods of JVM {} (RecordBusy)", jvm.pid())),
        "{text}"
    );
    let last = text.rsplit("cycle ").next().unwrap();
    assert!(last.contains("RecordBusy.burn"), "{last}");
    let rows = top_rows(last);
    assert!(rows.get(&jvm.pid()).is_some_and(|&w| w > 0.0), "{last}");

    // Its reader gone (`top | head -1`), it ends by itself.
    let mut args = vec!["top".to_string(), "--pid".into(), jvm.pid().to_string()];
    args.extend(vm_source());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut top = profiler(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start top");
    let mut first = [0u8; 6];
    top.stdout
        .take()
        .expect("piped")
        .read_exact(&mut first)
        .expect("a first cycle");
    assert_eq!(&first, b"cycle ");
    let start = Instant::now();
    while top.try_wait().expect("top's status").is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "top runs on with nobody reading"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn top_under_tmux_shows_a_jvms_names_escaped() {
    let _serial = serial();
    let jvm = printed::hostile_jvm();
    let tmux = Tmux::new("views-top-printed");
    let command = top_command(&["--pid".into(), jvm.pid().to_string()]);
    tmux.keys(&[&format!("clear; {command}; echo TOP-EXIT=$?"), "Enter"]);
    // The hot method, its name as its patched class file holds it, shown escaped in the list;
    // its ESC [2J would have wiped the screen, its U+202E reordered the line.
    let screen = tmux.wait_for("the method escaped", |screen| {
        screen.contains("PrintedNames.hot\\u{1b}[2J\\u{7}\\u{a}\\u{202e}end")
    });
    let ansi = tmux.tmux(&["capture-pane", "-e", "-p", "-t", &tmux.name]);
    assert!(!ansi.contains(['\u{7}', '\u{202e}']), "{ansi:?}");
    eprintln!("{screen}");
    tmux.keys(&["q"]);
    tmux.wait_for("the shell back", |screen| screen.contains("TOP-EXIT=0"));
}

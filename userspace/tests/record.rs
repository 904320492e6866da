//! End-to-end tests of `joularcode-bpf record` against real JVMs, with the `vm` power source
//! reading a constant 100 W from a file. They need root (the BPF sampler) and the JDKs of
//! scripts/setup.sh, and fail loudly without them. They run the binary as a user would, one at a
//! time (they measure CPU shares).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use joularcode_testkit::procfs::{cpu_ticks, short_lived_share};
use joularcode_testkit::profiler::{java_command, with_command};
use joularcode_testkit::record_run::RecordRun;
use joularcode_testkit::results::{assert_conservation, energy_of, rows, Row};
use joularcode_testkit::{all_jdks, jdk, one_at_a_time, one_error_line, processes_with, Jvm};
use regex::Regex;

/// The power the `vm` source reads, in W.
const WATTS: f64 = 100.0;

fn serial() -> std::sync::MutexGuard<'static, ()> {
    one_at_a_time("the record tests load the BPF sampler and measure CPU shares")
}

/// A folder for one run of this build's record, with a constant 100 W.
struct Run(RecordRun);

impl std::ops::Deref for Run {
    type Target = RecordRun;
    fn deref(&self) -> &RecordRun {
        &self.0
    }
}

impl Run {
    fn new() -> Run {
        Run(RecordRun::new(
            Path::new(env!("CARGO_BIN_EXE_joularcode-bpf")),
            &WATTS.to_string(),
        ))
    }

    fn record(&self, args: &[&str]) -> Output {
        let output = self
            .command(args)
            .stdin(Stdio::null())
            .output()
            .expect("run joularcode-bpf");
        eprintln!("{}", String::from_utf8_lossy(&output.stderr));
        output
    }

    /// The energy of the JVMs over every cycle of the cycle log, once the log is checked to add
    /// up ([`assert_conservation`]).
    fn jvm_energy(&self) -> f64 {
        let cycles = self.cycles();
        assert_conservation(&cycles, Some(WATTS));
        cycles
            .iter()
            .map(|c| c["jvm_energy_j"].as_f64().expect("energy"))
            .sum()
    }
}

/// Lets record run for `seconds`, then sends it `signal` (SIGINT is what Ctrl-C sends) and
/// checks that it ends cleanly.
fn stop_after(mut command: Command, seconds: u64, signal: nix::sys::signal::Signal) {
    let mut child = command
        .stdin(Stdio::null())
        .spawn()
        .expect("start joularcode-bpf");
    std::thread::sleep(Duration::from_secs(seconds));
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("a pid"));
    nix::sys::signal::kill(pid, signal).expect("send the signal");
    let status = child.wait().expect("joularcode-bpf ends");
    assert!(status.success(), "{signal} ends record cleanly: {status:?}");
}

#[test]
fn a_known_split_between_two_methods() {
    let _serial = serial();
    let jvm = Jvm::start(&jdk(17), &[], "RecordSplit", &[]);
    let run = Run::new();
    stop_after(
        run.command(&[
            "--pid",
            &jvm.pid().to_string(),
            "--methods-filtering-prefix",
            "RecordSplit",
            // 500 Hz: about 5,000 samples, for a sampling error well under the 3 points allowed
            "--stack-monitoring-sample-rate",
            "2",
        ]),
        10,
        nix::sys::signal::Signal::SIGINT,
    );
    let app = rows(&run.results().join("methods-power-app.csv"));
    let heavy = energy_of(&app, "RecordSplit.heavy");
    let light = energy_of(&app, "RecordSplit.light");
    let share = heavy / (heavy + light);
    eprintln!(
        "heavy {heavy:.3} J, light {light:.3} J: {:.1}%",
        share * 100.0
    );
    assert!((share - 0.75).abs() <= 0.03, "heavy's share is {share}");
    let all = rows(&run.results().join("methods-power-all.csv"));
    let whole = all.iter().find(|row| {
        row.branch.starts_with("java.lang.Thread.run;")
            && row.branch.contains("RecordSplit.work;RecordSplit.heavy")
    });
    assert!(whole.is_some(), "no whole stack in {all:?}");
    assert_conservation(&run.cycles(), Some(WATTS));
}

#[test]
fn short_lived_threads_get_their_share() {
    let _serial = serial();
    let jvm = Jvm::start(&jdk(21), &[], "RecordShortLived", &[]);
    let run = Run::new();
    let before = cpu_ticks(jvm.pid());
    let output = run.record(&["--pid", &jvm.pid().to_string(), "--duration", "8"]);
    let after = cpu_ticks(jvm.pid());
    assert!(output.status.success());
    let truth = short_lived_share(&before, &after);
    let all = rows(&run.results().join("methods-power-all.csv"));
    let measured = energy_of(&all, "RecordShortLived.brief") / run.jvm_energy();
    eprintln!(
        "short-lived threads: {:.1}% of the CPU, {:.1}% of the energy",
        truth * 100.0,
        measured * 100.0
    );
    assert!(truth > 0.1, "the short-lived threads ran: {truth}");
    assert!((measured - truth).abs() <= 0.05, "{measured} vs {truth}");
}

/// ShortTasks' `CPU <tasks> <main> <process>` line: ns of CPU of the short threads' hot loop and
/// of the whole JVM, each thread's time measured by the thread itself (ThreadMXBean).
fn short_tasks_cpu_share(stdout: &str) -> f64 {
    let line = stdout
        .lines()
        .find_map(|line| line.strip_prefix("CPU "))
        .unwrap_or_else(|| panic!("no CPU line in {stdout}"));
    let ns: Vec<f64> = line.split(' ').map(|n| n.parse().expect("ns")).collect();
    ns[0] / ns[2]
}

#[test]
fn short_lived_tasks_get_their_energy_in_whole_branches_on_every_jdk() {
    let _serial = serial();
    let thread = r"^java\.lang\.Thread\.run(;java\.lang\.Thread\.runWith)?;";
    let task = r"ShortTasks\$\$Lambda(\$\d+)?/0x[0-9a-f]+\.run;ShortTasks\.lambda\$static\$0;ShortTasks\.task;ShortTasks\.loop$";
    let whole = Regex::new(&format!("{thread}{task}")).expect("a valid regex");
    let whole_app = Regex::new(&format!("^{task}")).expect("a valid regex");
    for jdk in all_jdks() {
        let run = Run::new();
        let command = java_command(&jdk, &[], "ShortTasks", &["8"]);
        let output = run.record(&with_command(
            &[
                "--methods-filtering-prefix",
                "ShortTasks",
                "--stack-monitoring-sample-rate",
                "2",
            ],
            &command,
        ));
        assert!(output.status.success(), "Java {}", jdk.major);
        let cpu_share = short_tasks_cpu_share(&String::from_utf8_lossy(&output.stdout));
        let jvm_energy = run.jvm_energy();
        let all = rows(&run.results().join("methods-power-all.csv"));
        let energy_where = |rows: &[Row], keep: &dyn Fn(&str) -> bool| -> f64 {
            rows.iter()
                .filter(|row| keep(&row.branch))
                .map(|row| row.energy_j)
                .sum()
        };
        let short = energy_where(&all, &|b| whole.is_match(b)) / jvm_energy;
        let unknown = energy_where(&all, &|b| b.contains("[unknown]")) / jvm_energy;
        let app = rows(&run.results().join("methods-power-app.csv"));
        let loop_energy = energy_where(&app, &|b| b.contains("ShortTasks.loop"));
        let whole_energy = energy_where(&app, &|b| whole_app.is_match(b));
        eprintln!(
            "Java {}: the short task has {:.1}% of the JVM's energy for {:.1}% of its CPU; \
             [unknown] {:.2}%; {:.1}% of the loop's energy in its whole app branch",
            jdk.major,
            short * 100.0,
            cpu_share * 100.0,
            unknown * 100.0,
            100.0 * whole_energy / loop_energy
        );
        assert!(
            (short - cpu_share).abs() <= 0.02,
            "Java {}: {short} of the energy, {cpu_share} of the CPU; rows {:?}",
            jdk.major,
            all.iter()
                .filter(|row| row.energy_j > 0.5)
                .collect::<Vec<_>>()
        );
        assert!(
            unknown <= 0.005,
            "Java {}: [unknown] has {unknown} of the energy",
            jdk.major
        );
        assert!(
            whole_energy >= 0.995 * loop_energy,
            "Java {}: app rows with the loop but not the whole branch: {:?}",
            jdk.major,
            app.iter()
                .filter(|row| row.branch.contains("ShortTasks.loop")
                    && !whole_app.is_match(&row.branch))
                .collect::<Vec<_>>()
        );
    }
}

#[test]
fn two_jvms_at_once_by_their_cpu() {
    let _serial = serial();
    // Each busy thread on CPU 30% of its time: 0.9 CPU in all, so that the 2 CPUs are not full
    // and each thread gets the same CPU time wherever the scheduler puts it.
    let start = |threads| Jvm::start(&jdk(25), &[], "RecordBusy", &[threads, "1000000", "30"]);
    let (busy, calm) = (start("2"), start("1"));
    let run = Run::new();
    // Other JVMs of the machine are profiled too: leave them without our agent.
    stop_after(
        run.command(&["--all", "--no-attach"]),
        8,
        nix::sys::signal::Signal::SIGTERM,
    );
    let cycles = run.cycles();
    assert_conservation(&cycles, Some(WATTS));
    let energy = |pid: u32| -> f64 {
        cycles
            .iter()
            .filter(|c| c["pid"] == pid)
            .map(|c| c["jvm_energy_j"].as_f64().expect("energy"))
            .sum()
    };
    let ratio = energy(busy.pid()) / energy(calm.pid());
    eprintln!("energy ratio of the JVMs with 2 and 1 busy threads: {ratio:.3}");
    assert!((ratio - 2.0).abs() <= 0.2, "ratio {ratio}");
    for jvm in [&busy, &calm] {
        let folder = run.results().join(format!("{}-RecordBusy", jvm.pid()));
        let all = rows(&folder.join("methods-power-all.csv"));
        assert!(
            energy_of(&all, "RecordBusy.burn") > 0.0,
            "{}",
            folder.display()
        );
        rows(&folder.join("methods-power-app.csv"));
    }
}

#[test]
fn a_half_second_program_gets_its_rows_and_its_exit_code() {
    let _serial = serial();
    let run = Run::new();
    let mut args = vec!["--".to_owned()];
    args.extend(java_command(&jdk(17), &[], "RecordBrief", &["500", "3"]));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = run.record(&args);
    assert_eq!(output.status.code(), Some(3), "the command's exit code");
    let all = rows(&run.results().join("methods-power-all.csv"));
    assert!(energy_of(&all, "RecordBrief.burn") > 0.0, "{all:?}");
    let app = rows(&run.results().join("methods-power-app.csv"));
    assert!(energy_of(&app, "RecordBrief.burn") > 0.0, "{app:?}");
    assert_conservation(&run.cycles(), Some(WATTS));
}

/// Runs record with `args` and checks that it fails with one line that contains `expected`,
/// and leaves no results.
fn assert_refused(run: &Run, command: &mut Command, expected: &str) {
    let output = command
        .stdin(Stdio::null())
        .output()
        .expect("run joularcode-bpf");
    let stderr = one_error_line(&output, expected);
    assert!(!run.cycle_log().exists(), "{stderr}");
    if let Ok(entries) = std::fs::read_dir(run.results()) {
        assert_eq!(entries.count(), 0, "{stderr}");
    }
}

#[test]
fn a_pid_that_cannot_be_profiled_is_the_only_line_and_says_why() {
    let _serial = serial();
    let run = Run::new();
    for (pid, said) in [
        ("4000000", "process 4000000 does not exist"),
        ("1", "process 1"),
    ] {
        let output = run
            .command(&["--pid", pid])
            .stdin(Stdio::null())
            .output()
            .expect("run joularcode-bpf");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        // Checked before the configuration and the power source are: nothing else is said.
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("joularcode-bpf: ") && stderr.contains(said),
            "{stderr}"
        );
        // As root, with CAP_SYS_PTRACE, being told to run as root would be wrong.
        assert!(!stderr.contains("run as root"), "{stderr}");
    }
}

#[test]
fn bad_input_is_one_line_and_writes_nothing() {
    let _serial = serial();
    let jvm = Jvm::start(&jdk(17), &[], "RecordBusy", &["1"]);
    let pid = jvm.pid().to_string();
    let run = Run::new();
    assert_refused(
        &run,
        &mut run.command(&["--pid", &pid, "--power-source-type", "solar"]),
        "Unknown power-source-type 'solar'",
    );
    assert_refused(
        &run,
        &mut run.command(&["--pid", &pid, "--stack-monitoring-sample-rate", "0"]),
        "--stack-monitoring-sample-rate must be a number of milliseconds",
    );
    assert_refused(
        &run,
        &mut run.command(&["--pid", &std::process::id().to_string()]),
        "is not a JVM",
    );
    let mut missing = run.command(&["--pid", &pid]);
    missing.args(["--vm-power-file", "/nonexistent/watts"]);
    assert_refused(&run, &mut missing, "There is no /nonexistent/watts");

    std::fs::write(run.results(), "a file").expect("a file");
    assert_refused(
        &run,
        &mut run.command(&["--pid", &pid]),
        "is not a directory",
    );
    std::fs::remove_file(run.results()).expect("removed");
    let elsewhere = run.dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("a folder");
    std::os::unix::fs::symlink(&elsewhere, run.results()).expect("a link");
    assert_refused(
        &run,
        &mut run.command(&["--pid", &pid]),
        "is a symbolic link",
    );
    assert_eq!(std::fs::read_dir(&elsewhere).expect("listed").count(), 0);
    std::fs::remove_file(run.results()).expect("removed");

    let mut unprivileged = run.command(&["--pid", &pid]);
    std::os::unix::process::CommandExt::uid(&mut unprivileged, 65534);
    std::os::unix::process::CommandExt::gid(&mut unprivileged, 65534);
    std::fs::set_permissions(
        run.dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .expect("chmod");
    assert_refused(&run, &mut unprivileged, "root");
}

#[test]
fn a_command_still_running_at_the_end_is_terminated() {
    let _serial = serial();
    let command = java_command(&jdk(17), &[], "RecordBusy", &["1"]);
    let command: Vec<&str> = command.iter().map(String::as_str).collect();

    // After --duration: the JVM, which would run for days, gets SIGTERM and exits with 143.
    let run = Run::new();
    let mut args = vec!["--duration", "3", "--"];
    args.extend(&command);
    let output = run.record(&args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(143), "{stderr}");
    assert!(stderr.contains("still runs: sent SIGTERM"), "{stderr}");
    let watts = run.dir.path().join("watts");
    assert!(
        stderr.contains(&format!("power from vm (watts file {})", watts.display())),
        "{stderr}"
    );
    let all = rows(&run.results().join("methods-power-all.csv"));
    assert!(energy_of(&all, "RecordBusy.burn") > 0.0, "{all:?}");
    rows(&run.results().join("methods-power-app.csv"));
    assert_conservation(&run.cycles(), Some(WATTS));

    // A SIGTERM sent to record alone ends the command the same way.
    let run = Run::new();
    let mut args = vec!["--"];
    args.extend(&command);
    let mut record = run
        .command(&args)
        .stdin(Stdio::null())
        .spawn()
        .expect("start joularcode-bpf");
    std::thread::sleep(Duration::from_secs(4));
    let pid = nix::unistd::Pid::from_raw(i32::try_from(record.id()).expect("a pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("send SIGTERM");
    let status = record.wait().expect("joularcode-bpf ends");
    assert_eq!(status.code(), Some(143), "{status:?}");
    let all = rows(&run.results().join("methods-power-all.csv"));
    assert!(energy_of(&all, "RecordBusy.burn") > 0.0, "{all:?}");
    assert_conservation(&run.cycles(), Some(WATTS));
}

#[test]
fn several_pids_each_in_their_folder() {
    let _serial = serial();
    let start = || Jvm::start(&jdk(17), &[], "RecordBusy", &["1", "1000000", "30"]);
    let (a, b) = (start(), start());
    let run = Run::new();
    let output = run.record(&[
        "--pid",
        &a.pid().to_string(),
        "--pid",
        &b.pid().to_string(),
        "--duration",
        "4",
    ]);
    assert!(output.status.success());
    let cycles = run.cycles();
    assert_conservation(&cycles, Some(WATTS));
    for jvm in [&a, &b] {
        assert!(
            cycles.iter().any(|c| c["pid"] == jvm.pid()),
            "no cycle of {}",
            jvm.pid()
        );
        let folder = run.results().join(format!("{}-RecordBusy", jvm.pid()));
        let all = rows(&folder.join("methods-power-all.csv"));
        assert!(energy_of(&all, "RecordBusy.burn") > 0.0, "{all:?}");
        rows(&folder.join("methods-power-app.csv"));
    }
    let entries = std::fs::read_dir(run.results())
        .expect("the results")
        .count();
    assert_eq!(entries, 2, "only the two folders");
}

#[test]
fn a_launched_command_is_not_left_behind_when_record_fails() {
    let _serial = serial();
    let run = Run::new();
    // A cycle log that cannot be opened is refused before the command starts.
    std::fs::create_dir(run.cycle_log()).expect("a folder in the cycle log's place");
    // A duration no other process of the machine has in its command line.
    let marker = format!("{}", 900_000 + std::process::id());
    let mut args = vec!["--".to_owned()];
    args.extend(java_command(&jdk(17), &[], "RecordBusy", &["1", &marker]));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    one_error_line(&run.record(&args), "--cycle-log");
    let left = processes_with(&format!("RecordBusy 1 {marker}"));
    assert!(left.is_empty(), "the command still runs: {left:?}");
    assert!(!run.results().exists(), "nothing written");
}

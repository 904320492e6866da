//! Two signals in a row end the launched command and write the last cycle; outputs through
//! another user's link or into a FIFO are refused before anything is launched.

use super::*;

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
        if sent_ms.is_some() || run.cycles_so_far().len() < 2 {
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

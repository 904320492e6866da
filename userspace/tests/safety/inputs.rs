//! Inputs that are wrong or hostile: impossible power readings, a Latin-1 properties file, a
//! full disk, a command that starts no JVM.

use super::*;

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
    // The disk is filled once record has written rows (a loaded machine can take longer to start
    // it), and freed once the all-file has stopped growing for 2.5 s (a file's last page takes a
    // few cycles' rows before one needs a new one); record is stopped once it has written rows
    // again.
    let all = results.join("methods-power-all.csv");
    let (mut filled, mut freed) = (None::<(u64, Duration)>, None::<u64>);
    let finished = watch(command, Duration::from_secs(40), |elapsed, record| {
        let size = std::fs::metadata(&all).map_or(0, |meta| meta.len());
        match (filled, freed) {
            (None, _) if has_rows(&all) => {
                use std::io::Write;
                let mut file = std::fs::File::create(&filler).expect("the filler");
                while file.write_all(&[0; 4096]).is_ok() {}
                filled = Some((size, elapsed));
            }
            (Some((last, _)), None) if size != last => filled = Some((size, elapsed)),
            (Some((_, since)), None) if elapsed - since > Duration::from_millis(2500) => {
                std::fs::remove_file(&filler).expect("the filler removed");
                freed = Some(size);
            }
            (Some(_), Some(at_free)) if size > at_free => interrupt(record),
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

/// Whether the results file `file` holds a row after its header.
fn has_rows(file: &Path) -> bool {
    std::fs::read(file).is_ok_and(|bytes| bytes.iter().filter(|&&b| b == b'\n').count() >= 2)
}

/// `java <args>` of JDK 17.
fn java(args: &[&str]) -> Vec<String> {
    let mut command = vec![jdk(17).java().display().to_string()];
    command.extend(args.iter().map(|arg| arg.to_string()));
    command
}

/// Runs record on `command`, which exits with `code`, and returns whether it profiled a JVM:
/// then it said so and wrote results; else it said that no JVM was profiled, and wrote nothing.
fn record_brief(command: &[String], code: i32) -> bool {
    let run = new_run();
    let args = with_command(&[], command);
    let finished = watch(run.command(&args), Duration::from_secs(10), |_, _| {});
    let stderr = &finished.stderr;
    assert_eq!(finished.status.code(), Some(code), "{stderr}");
    assert!(!stderr.contains("cannot be read"), "{stderr}");
    let profiled = stderr.contains("INFO: Profiling JVM");
    let none = stderr.contains(
        "WARNING: No JVM was profiled: the command started no JVM, or none that ran long enough \
         to be seen (about 0.1 s). Nothing was written.",
    );
    assert_ne!(profiled, none, "one or the other is said: {stderr}");
    assert_eq!(run.results().exists(), profiled, "{stderr}");
    if none {
        assert!(run.cycles().is_empty(), "{stderr}");
    }
    profiled
}

#[test]
fn a_run_that_profiles_no_jvm_says_so() {
    let _serial = serial();
    let sh = |script: &str| vec!["/bin/sh".to_owned(), "-c".to_owned(), script.to_owned()];
    assert!(!record_brief(&sh("exit 3"), 3));
    assert!(!record_brief(&sh("true"), 0));
    // A JVM that ends while it starts (its thread stacks too small to run): never readable,
    // whether or not it was seen.
    for _ in 0..4 {
        assert!(!record_brief(&java(&["-Xss1k", "-version"]), 1));
    }
    // JVMs that live about 0.1 s: either they are read in time and profiled, or not, and said.
    for _ in 0..3 {
        record_brief(&java(&["-version"]), 0);
        record_brief(&java_command(&jdk(17), &[], "RecordBrief", &["0", "0"]), 0);
    }
}

#[test]
fn a_folder_given_as_config_is_refused_before_anything_starts() {
    let _serial = serial();
    let run = new_run();
    let folder = run.dir.path().join("conf.d");
    std::fs::create_dir(&folder).expect("a folder");
    let folder = folder.to_str().expect("a UTF-8 path");
    let expected = format!("--config {folder}: it is a directory");
    let launched = run.dir.path().join("launched");
    let refused = |command: &mut Command| {
        let stderr = assert_refused_before_launch(command, &expected, &launched);
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    };
    for mode in ["auto", "bpf", "agent"] {
        let mut record = run.command(&["--config", folder, "--mode", mode]);
        record
            .args(["--", "/bin/sh", "-c", "touch \"$0\""])
            .arg(&launched);
        refused(&mut record);
    }
    // The daemon, before it listens, and top read the same file.
    for args in [&["daemon", "--listen", "127.0.0.1:0"][..], &["top"]] {
        let mut command = Command::new(binary());
        command
            .current_dir(run.dir.path())
            .args(args)
            .args(["--config", folder]);
        refused(&mut command);
    }
    assert!(!run.results().exists());
    assert!(!run.cycle_log().exists());
}

#[test]
fn the_bpf_sampler_in_a_pid_namespace_of_its_own_is_refused() {
    let _serial = serial();
    // In a fresh PID namespace (no other JVM), as in a container without --pid=host. The BPF
    // programs see the host's pids: a JVM there would get no sample, silently.
    let in_namespace = |record: Command| {
        let mut command = Command::new("unshare");
        command
            .args(["--pid", "--fork", "--mount-proc"])
            .arg(record.get_program())
            .args(record.get_args())
            .current_dir(record.get_current_dir().expect("a working folder"));
        command
    };
    let run = new_run();
    let expected = "this process runs in a PID namespace of its own";
    let nothing = run.dir.path().join("nothing");
    for args in [
        &["--all", "--duration", "2"][..],
        &["--mode", "bpf", "--", "/bin/true"],
    ] {
        let stderr =
            assert_refused_before_launch(&mut in_namespace(run.command(args)), expected, &nothing);
        assert!(!run.results().exists(), "{stderr}");
    }
    // Left to choose (--mode auto), a launch runs in the agent's sampling mode instead.
    let mut args = vec!["--".to_owned()];
    args.extend(java_command(&jdk(17), &[], "RecordBrief", &["2000", "0"]));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let finished = watch(
        in_namespace(run.command(&args)),
        Duration::from_secs(5),
        |_, _| {},
    );
    assert!(finished.status.success(), "{}", finished.stderr);
    assert!(
        finished.stderr.contains(expected)
            && finished
                .stderr
                .contains("the JVMs profile themselves with the agent's sampling mode instead"),
        "{}",
        finished.stderr
    );
    let rows = std::fs::read_to_string(run.results().join("methods-power-app.csv"))
        .expect("the agent's results");
    assert!(
        rows.lines()
            .skip(1)
            .any(|row| row.contains("RecordBrief.burn")),
        "{rows}"
    );
}

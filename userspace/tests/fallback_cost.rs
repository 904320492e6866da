//! The fallback mode's cost follows the threads that run (docs/fallback.md), end to end on JDK
//! 17, 21 and 25, with the agent loaded at the JVM's start (`-agentpath`) and the `vm` source:
//! beside 500 parked threads, the agent walks only the threads that ran (the cycle log's `walks`),
//! with either sampler; a JVM whose threads are all parked uses, profiled, about the CPU time the
//! same JVM uses without the agent (both read from /proc/PID/stat over the same cycles); and a
//! JVMTI sample that comes late while no thread runs misses nothing. The last two measure CPU
//! time and run alone; the first counts walks against the JVM's own CPU time and the cycles'
//! length, which a test beside it changes alike (.config/nextest.toml).

use std::io::Read;
use std::process::Stdio;
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use joularcode_testkit::procfs::process_cpu_ms;
use joularcode_testkit::record_run::RecordRun;
use joularcode_testkit::results::rows;
use joularcode_testkit::{agent_library, all_jdks, jdk, one_at_a_time, Jvm};
use serde_json::Value;

/// The parked threads beside the busy one, or alone.
const PARKED: &str = "500";
/// `stack-monitoring-sample-rate`, in ms.
const RATE_MS: u64 = 10;
/// The cycles judged, after the one in progress when the workload is READY (its start).
const JUDGED: usize = 5;
/// How long a test waits for its cycles before it fails.
const AT_MOST: Duration = Duration::from_secs(90);

fn serial() -> MutexGuard<'static, ()> {
    one_at_a_time("the fallback cost tests measure the CPU time of JVMs")
}

fn run() -> RecordRun {
    RecordRun::new(
        std::path::Path::new(env!("CARGO_BIN_EXE_joularcode-bpf")),
        "100",
    )
}

/// The agent in sampling mode with `sampler`, no configuration file, the vm source, the results
/// and the cycle log in `run`'s folder.
fn agent_option(run: &RecordRun, sampler: &str) -> String {
    format!(
        "-agentpath:{}=sample,config=,sampler={sampler},stack-monitoring-sample-rate={RATE_MS},\
         power-source-type=vm,vm-power-format=watts,vm-power-file={},results-path={},cycle-log={}",
        agent_library().display(),
        run.watts().display(),
        run.results().display(),
        run.cycle_log().display()
    )
}

/// The `count` cycles that begin after now: those after the one in progress (one JVM per log: a
/// cycle is a line).
fn cycles_from_now(run: &RecordRun, count: usize) -> Vec<Value> {
    let now = run.cycles_so_far().len();
    run.wait_for_cycles(now + 1 + count, AT_MOST)[now + 1..now + 1 + count].to_vec()
}

/// The sum of `key` over `cycles`.
fn sum(cycles: &[Value], key: &str) -> f64 {
    cycles
        .iter()
        .map(|cycle| {
            cycle[key]
                .as_f64()
                .unwrap_or_else(|| panic!("{key}: {cycle}"))
        })
        .sum()
}

#[test]
fn beside_500_parked_threads_the_agent_walks_only_the_threads_that_ran_on_every_jdk() {
    let _serial = serial();
    for jdk in all_jdks() {
        for sampler in ["signals", "jvmti"] {
            let run = run();
            let option = agent_option(&run, sampler);
            let jvm = Jvm::start(&jdk, &[&option], "FallbackParked", &[PARKED, "1"]);
            let judged = cycles_from_now(&run, JUDGED);
            drop(jvm);
            let (walks, samples) = (sum(&judged, "walks"), sum(&judged, "samples"));
            let (seconds, cpu_s) = (sum(&judged, "interval_s"), sum(&judged, "jvm_cpu_ns") / 1e9);
            // The walks due: one per interval of each thread's CPU time (signals: the busy
            // thread's, the JIT's and GC's), or one per interval for each Java thread that ran
            // (JVMTI: the busy one). Walking every thread would be 500 more per interval.
            let due = if sampler == "signals" { cpu_s } else { seconds } * 1000.0 / RATE_MS as f64;
            eprintln!(
                "Java {} {sampler}: {walks} walks, {samples} samples in {seconds:.2} s \
                 ({cpu_s:.2} s of the JVM's CPU): {due:.0} due",
                jdk.major
            );
            let what = format!("Java {} {sampler}: {judged:?}", jdk.major);
            assert!(walks <= 1.2 * due + (10 * JUDGED) as f64, "{what}");
            // A sample is counted in the cycle it is drained in, the walk in the cycle it is
            // taken in: a few may cross the ends of the cycles judged
            assert!(walks >= 0.3 * due && samples <= walks + 5.0, "{what}");
            // None of those walks was of a parked thread: no row of those cycles is in `idle`
            let ends: Vec<u64> = judged
                .iter()
                .map(|cycle| cycle["timestamp_ms"].as_u64().expect("a timestamp"))
                .collect();
            let all = rows(&run.results().join("methods-power-all.csv"));
            let rows: Vec<_> = all
                .iter()
                .filter(|row| ends.contains(&row.timestamp_ms))
                .collect();
            assert!(
                rows.iter()
                    .any(|row| row.branch.ends_with("FallbackParked.spin")),
                "{what}: {rows:?}"
            );
            assert!(
                !rows
                    .iter()
                    .any(|row| row.branch.contains("FallbackParked.idle")),
                "{what}: {rows:?}"
            );
        }
    }
}

/// How many cycles the idle JVMs' CPU time is compared over.
const IDLE_CYCLES: usize = 8;

/// In ten runs here, the agent added 3.3 to 5.6 CPU ms a second with signals (10 allowed), 14.6 to
/// 26.0 with JVMTI on Java 17 and 21 (100 allowed) and 52.8 to 88.7 on Java 25 (150 allowed): at
/// least 4.4, 74 and 61 ms a second inside; the walks against those due are not known from these
/// runs (printed from now on).
#[test]
fn an_idle_jvm_profiled_by_the_agent_uses_about_the_cpu_of_one_without_on_every_jdk() {
    let _serial = serial();
    for jdk in all_jdks() {
        let runs = [run(), run()];
        let plain = Jvm::start(&jdk, &[], "FallbackParked", &[PARKED, "0"]);
        let profiled: Vec<Jvm> = runs
            .iter()
            .zip(["signals", "jvmti"])
            .map(|(run, sampler)| {
                let option = agent_option(run, sampler);
                Jvm::start(&jdk, &[&option], "FallbackParked", &[PARKED, "0"])
            })
            .collect();
        // Their start over (the cycle in progress at READY), the same wall time for the three
        let first: Vec<usize> = runs
            .iter()
            .map(|run| {
                cycles_from_now(run, 0);
                run.cycles_so_far().len()
            })
            .collect();
        let pids: Vec<u32> = std::iter::once(&plain)
            .chain(&profiled)
            .map(Jvm::pid)
            .collect();
        let before: Vec<u64> = pids.iter().map(|&pid| process_cpu_ms(pid)).collect();
        let start = Instant::now();
        cycles_from_now(&runs[0], IDLE_CYCLES);
        let after: Vec<u64> = pids.iter().map(|&pid| process_cpu_ms(pid)).collect();
        let seconds = start.elapsed().as_secs_f64();
        let used: Vec<f64> = before
            .iter()
            .zip(&after)
            .map(|(before, after)| (after - before) as f64 / seconds)
            .collect();
        eprintln!(
            "Java {}: {PARKED} parked threads, CPU ms per second over {seconds:.1} s: \
             {:.1} without the agent, {:.1} with signals, {:.1} with JVMTI",
            jdk.major, used[0], used[1], used[2]
        );
        // With signals, no timer fires: the monitor's wake-ups and a reading of the threads'
        // times once a cycle, under 1% of a core. JVMTI reads each thread's state at each
        // sample: 0.4 to 0.8 µs a thread (debug build), under 10% of a core for 500 threads;
        // on JDK 25 about 1.8 µs (GetThreadState waits out virtual thread transitions), 89 ms
        // a second here alone and 104 beside a build, so under 15% there. Reading each
        // thread's CPU time first instead costs more on every JDK (65 ms a second on JDK 17).
        let jvmti_bound = if jdk.major >= 25 { 150.0 } else { 100.0 };
        assert!(used[1] - used[0] <= 10.0, "Java {}: {used:?}", jdk.major);
        assert!(
            used[2] - used[0] <= jvmti_bound,
            "Java {}: {used:?}",
            jdk.major
        );
        // The JVM's own threads (VM thread, GC) use a little CPU now and then, sampled once it
        // adds up to an interval (signals); no Java thread ran (JVMTI)
        for ((run, sampler), first) in runs.iter().zip(["signals", "jvmti"]).zip(first) {
            let judged = &run.cycles_so_far()[first..];
            let due = sum(judged, "jvm_cpu_ns") / (RATE_MS * 1_000_000) as f64;
            let walks = sum(judged, "walks");
            eprintln!(
                "Java {} {sampler}, idle: {walks} walks, {due:.1} due",
                jdk.major
            );
            assert!(walks <= due + 2.0, "{sampler}: {walks} walks: {judged:?}");
        }
    }
}

/// In ten runs here, every run passed, so no sample was lost (none is allowed: there is no margin
/// to keep); the count is printed from now on.
#[test]
fn a_jvmti_sample_late_while_no_thread_runs_misses_nothing() {
    let _serial = serial();
    let run = run();
    let option = agent_option(&run, "jvmti");
    let mut command = Jvm::command(&jdk(21), &[&option], "FallbackParked", &["50", "0"]);
    command.stderr(Stdio::piped());
    let mut jvm = Jvm::spawn(command);
    cycles_from_now(&run, 0);
    let before = run.cycles_so_far().len();
    // The whole JVM stopped for 30 intervals: the monitor finds its next sample 30 late
    let pid = nix::unistd::Pid::from_raw(i32::try_from(jvm.pid()).expect("a pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).expect("stop the JVM");
    std::thread::sleep(Duration::from_millis(30 * RATE_MS));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).expect("resume the JVM");
    cycles_from_now(&run, 2);
    jvm.child.kill().expect("end the JVM");
    let mut stderr = String::new();
    jvm.child
        .stderr
        .take()
        .expect("piped stderr")
        .read_to_string(&mut stderr)
        .expect("the JVM's stderr");
    eprintln!("{stderr}");
    assert!(
        stderr.contains("the JVMTI stack traces"),
        "profiled with JVMTI: {stderr}"
    );
    // The cycle of the stop, and those after
    let judged = &run.cycles_so_far()[before..];
    eprintln!(
        "{} samples lost in {} cycles",
        sum(judged, "lost_samples"),
        judged.len()
    );
    assert!(judged.len() >= 3, "{judged:?}");
    assert_eq!(sum(judged, "lost_samples"), 0.0, "{judged:?}");
}

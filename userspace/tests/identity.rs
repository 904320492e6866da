//! Branch identity in the profiling session that `joularcode-bpf stacks` runs, against JFR on the
//! same run (JDK 17, 21 and 25): no compiled frame lost on short-lived threads, virtual threads
//! as their own stacks.
//!
//! They load the BPF sampler (root), run JVMs and compare CPU shares, so they are serialised by
//! one lock; they fail, saying so, when something is missing.

use std::collections::HashMap;
use std::process::Command;

use joularcode_bpf::resolve::ResolveStats;
use joularcode_testkit::branches::{
    alpha_share, assert_agrees_with_jfr, assert_virtual_tasks_agree_with_jfr,
    assert_virtual_threads_own_branches, short_task_branch, virtual_tasks, ShortTasksCpu,
    MAX_UNKNOWN,
};
use joularcode_testkit::jfr::{Profile, Recording, SamplePeriod};
use joularcode_testkit::{all_jdks, jdk, one_at_a_time, target_dir, workload_classes, Jdk};

mod common;

/// Five times the default rate: about 7,000 samples in an 8 s run on 2 CPUs, so that sampling
/// noise stays well under the points the shares are judged by.
const RATE_HZ: u64 = 500;

/// What a session gave for one launched JVM.
struct Profiled {
    /// Every sample, by branch, as `stacks` writes them.
    branches: Vec<(String, u64)>,
    /// The samples taken in Java code (no native frame newer than the branch's), by branch:
    /// what JFR samples.
    in_java: Vec<(String, u64)>,
    /// What resolving met.
    stats: ResolveStats,
    /// The JVM's standard output.
    stdout: String,
}

impl Profiled {
    /// Samples of the branches for which `keep` holds.
    fn samples_where(&self, keep: impl Fn(&str) -> bool) -> u64 {
        let kept = self.branches.iter().filter(|(branch, _)| keep(branch));
        kept.map(|(_, n)| n).sum()
    }
}

/// Profiles `main ARGS`, launched on `jdk` with a JFR recording of the same run sampling every
/// `period`, in a session at [`RATE_HZ`] with native frames (as `stacks --native` does); returns
/// both.
///
/// JFR samples threads running Java code only: the CPU that the JVM's runtime and the kernel
/// spend on behalf of Java code (thread starts, allocations, system calls), which the profiler
/// counts in the Java frames that called them (1 to 3.5% of ShortTasks' main thread, in starting
/// threads), is left out of the comparison by these native frames. JFR records every 1 ms: at
/// 10 ms, on a loaded machine, it took as few as 116 samples of the short threads and 300 of
/// VirtualTasks' two methods, 1.6 and 2.6 points of noise on the shares compared.
fn profile_with_jfr(
    jdk: &Jdk,
    period: SamplePeriod,
    main: &str,
    args: &[&str],
) -> (Profiled, Profile) {
    let name = format!("identity-{}-{main}-{}", std::process::id(), jdk.major);
    let recording = Recording::new(target_dir().join(format!("{name}.jfr")));
    let stdout = target_dir().join(format!("{name}.out"));
    let mut command = Command::new(jdk.java());
    command
        .arg(recording.jvm_option(period))
        .arg("-cp")
        .arg(workload_classes())
        .arg(main)
        .args(args)
        .stdout(std::fs::File::create(&stdout).expect("the JVM's output file"));
    let mut session =
        common::profile_to_end(command, RATE_HZ, &format!("Java {}: {main}", jdk.major));
    let counts = session.take_native_counts();
    assert_eq!(counts.len(), 1, "one JVM: {:?}", counts.keys());
    let (&pid, samples) = counts.iter().next().expect("one JVM");
    let jvm = session.jvm(pid).expect("the JVM");
    let mut branches: HashMap<String, u64> = HashMap::new();
    let mut in_java: HashMap<String, u64> = HashMap::new();
    for ((branch, native), &n) in samples {
        let name = jvm.branches().name(*branch).to_string();
        if native.is_empty() {
            *in_java.entry(name.clone()).or_insert(0) += n;
        }
        *branches.entry(name).or_insert(0) += n;
    }
    let profiled = Profiled {
        branches: branches.into_iter().collect(),
        in_java: in_java.into_iter().collect(),
        stats: jvm.stats(),
        stdout: std::fs::read_to_string(&stdout).expect("the JVM's output"),
    };
    let _ = std::fs::remove_file(stdout);
    let profile = recording.read(jdk);
    let _ = std::fs::remove_file(recording.path());
    (profiled, profile)
}

/// Our samples of Java code (in Java code, of branches that start with a Java frame, not a
/// pseudo-frame such as `[GC]`), by branch: what JFR samples.
fn java_weights(run: &Profiled) -> Vec<(String, f64)> {
    weights(&run.in_java)
        .into_iter()
        .filter(|(branch, _)| !branch.starts_with('['))
        .collect()
}

/// Sample counts as the weights of the shared checks.
fn weights(counts: &[(String, u64)]) -> Vec<(String, f64)> {
    counts.iter().map(|(b, n)| (b.clone(), *n as f64)).collect()
}

#[test]
fn short_lived_threads_keep_every_compiled_frame_and_agree_with_jfr() {
    let _serial = one_at_a_time("the identity tests load the BPF sampler");
    let whole = short_task_branch();
    for jdk in all_jdks() {
        let (run, jfr) = profile_with_jfr(&jdk, SamplePeriod::Ms1, "ShortTasks", &["8"]);
        let total = run.samples_where(|_| true);
        // JFR's own start and its dump at the JVM's exit are test apparatus: the dump runs code
        // for the first time as the JVM ends, which the profiler reads too late (see "Limits" in
        // docs/stacks.md): up to 175 `[unknown]` frames on Java 25 under load.
        let unknown = run.samples_where(|stack| {
            stack.contains("[unknown]") && !stack.starts_with("jdk.jfr.internal.")
        });
        let short = run.samples_where(|stack| stack.contains("ShortTasks.loop"));
        let short_whole = run.samples_where(|stack| whole.is_match(stack));
        let main =
            run.samples_where(|stack| stack.ends_with("ShortTasks.main;ShortTasks.mainWork"));
        let cpu = ShortTasksCpu::parse(&run.stdout);
        let cpu_share = cpu.tasks_ns / (cpu.tasks_ns + cpu.main_ns);
        let sample_share = short_whole as f64 / (short_whole + main) as f64;
        eprintln!(
            "Java {}: {total} samples, {unknown} with [unknown] ({:.2}%); short task {short_whole} \
             whole of {short}; its share {:.1}% of the work's samples, {:.1}% of its CPU; {:?}",
            jdk.major,
            100.0 * unknown as f64 / total as f64,
            100.0 * sample_share,
            100.0 * cpu_share,
            run.stats
        );
        assert!(total >= 2_000, "Java {}: {total} samples", jdk.major);
        assert!(
            unknown as f64 <= MAX_UNKNOWN * total as f64,
            "Java {}: {unknown} of {total} samples carry [unknown]: {:?}",
            jdk.major,
            run.branches
        );
        assert!(
            short_whole as f64 >= 0.995 * short as f64,
            "Java {}: {short_whole} of {short} samples of the short task are its whole branch: {:?}",
            jdk.major,
            run.branches
        );
        // The share of the CPU is judged by record's test, in a run without JFR: here JFR's
        // sampler, suspending each thread 1,000 times a second, is part of the threads' CPU time,
        // and takes its samples away from their Java frames.
        let what = format!("Java {} ShortTasks", jdk.major);
        let entries = ["ShortTasks.main", "java.lang.Thread.run"];
        let ours = java_weights(&run);
        assert_agrees_with_jfr(&what, &entries, (&ours, 100.0), &jfr.branch_weights());
    }
}

#[test]
fn virtual_threads_are_their_own_branches_as_jfr_shows_them() {
    let _serial = one_at_a_time("the identity tests load the BPF sampler");
    for jdk in [jdk(21), jdk(25)] {
        for sleep in [false, true] {
            // 9,000 tasks without the sleep (about 5,000 samples on each side: the methods'
            // shares are judged against JFR's), 3,000 with it.
            let args: &[&str] = if sleep { &["3000", "sleep"] } else { &["9000"] };
            let (run, jfr) = profile_with_jfr(&jdk, SamplePeriod::Ms1, "VirtualTasks", args);
            let what = format!(
                "Java {} VirtualTasks{}",
                jdk.major,
                if sleep { " sleep" } else { "" }
            );
            let tasks = virtual_tasks(&weights(&run.branches));
            eprintln!("{what}: the tasks' two methods: {tasks:?}; {:?}", run.stats);
            assert_virtual_threads_own_branches(&what, &tasks, 300.0);
            let theirs = jfr.of_threads(|s| s.virtual_thread).branch_weights();
            let (ours, theirs) = (virtual_tasks(&java_weights(&run)), virtual_tasks(&theirs));
            // With the sleep, the shares are not judged: JFR's walk of the stack chunks gave alpha
            // 61 to 80% of the samples in as many runs, and the two methods, compiled apart and
            // mounted again in between, need not take the same time per iteration.
            if sleep {
                eprintln!(
                    "{what}: alpha has {:.1}% of the two methods' samples, {:.1}% of JFR's",
                    alpha_share(&ours) * 100.0,
                    alpha_share(&theirs) * 100.0
                );
            } else {
                assert_virtual_tasks_agree_with_jfr(&what, (&ours, 100.0), &theirs);
            }
        }
    }
}

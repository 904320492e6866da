//! The checks of branch identity that the tests of `stacks` and of `record` share, on the
//! workloads of `testkit/java`: ShortTasks' short-lived threads, VirtualTasks' virtual threads and
//! NamingKinds' kinds of methods, judged against JFR's samples of the same run, the scheduler's
//! CPU time and Java's own names.
//!
//! A branch's weight is its samples under `stacks`, its joules under `record`: with a constant
//! power, a thread's energy is in proportion to its CPU time, shared by its samples, so the
//! shares of the branches of one kind of thread are their shares of its samples.

use std::collections::{BTreeSet, HashMap};

use regex::Regex;

use crate::jfr;
use crate::workload_modules;

/// Most samples carrying `[unknown]`, as a share of all.
pub const MAX_UNKNOWN: f64 = 0.005;

/// The frames of ShortTasks' short task under its thread's: the lambda, its body, the static
/// method and its hot loop, as a regex (the lambda's class in either of Java's spellings of
/// its number).
const SHORT_TASK_FRAMES: &str = r"ShortTasks\$\$Lambda(\$\d+)?/0x[0-9a-f]+\.run;ShortTasks\.lambda\$static\$0;ShortTasks\.task;ShortTasks\.loop$";

/// The short task's whole branch: the thread's run (Thread.runWith from Java 21 on), then
/// [`SHORT_TASK_FRAMES`].
pub fn short_task_branch() -> Regex {
    Regex::new(&format!(
        r"^java\.lang\.Thread\.run(;java\.lang\.Thread\.runWith)?;{SHORT_TASK_FRAMES}"
    ))
    .expect("a valid regex")
}

/// The short task's whole branch in the app file of a recording filtered by `ShortTasks`: its
/// frames from the lambda on.
pub fn short_task_app_branch() -> Regex {
    Regex::new(&format!("^{SHORT_TASK_FRAMES}")).expect("a valid regex")
}

/// ShortTasks' `CPU <tasks> <main> <process>` line: ns of CPU, each thread's own over its work
/// (ThreadMXBean: the scheduler's count).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShortTasksCpu {
    /// The short threads in their hot loop.
    pub tasks_ns: f64,
    /// The main thread in its own work.
    pub main_ns: f64,
    /// The whole JVM.
    pub process_ns: f64,
}

impl ShortTasksCpu {
    /// The line in ShortTasks' standard output `stdout`.
    pub fn parse(stdout: &str) -> ShortTasksCpu {
        let line = stdout
            .lines()
            .find_map(|line| line.strip_prefix("CPU "))
            .unwrap_or_else(|| panic!("no CPU line in {stdout}"));
        let ns: Vec<f64> = line
            .split(' ')
            .map(|n| n.parse().expect("ns of CPU"))
            .collect();
        assert_eq!(ns.len(), 3, "CPU {line}");
        ShortTasksCpu {
            tasks_ns: ns[0],
            main_ns: ns[1],
            process_ns: ns[2],
        }
    }
}

/// The weights of `weights` by their entry frame (a branch's oldest frame:
/// `java.lang.Thread.run`, `ShortTasks.main`, `java.lang.VirtualThread.run`...), each with its
/// branches.
fn by_entry(weights: &[(String, f64)]) -> HashMap<String, Vec<(String, f64)>> {
    let mut entries: HashMap<String, Vec<(String, f64)>> = HashMap::new();
    for (branch, w) in weights {
        let entry = branch.split(';').next().unwrap_or_default().to_string();
        entries.entry(entry).or_default().push((branch.clone(), *w));
    }
    entries
}

/// Checks the branches of the workload's threads against JFR's samples: the threads entered at
/// each of `entries` (a branch's oldest frame: `java.lang.Thread.run`, `ShortTasks.main`...)
/// weigh at least `least` on our side (samples, or joules) and have 100 of JFR's samples, and
/// within each entry every branch's share of its weight differs by at most 3 points from its
/// share of JFR's samples. Says the overall shares' largest difference too. (What runs before
/// the recording starts, the JVM's initialisation and JFR's own start, JFR cannot see.)
///
/// The split of the CPU between threads is judged against the scheduler instead (the tests' CPU
/// shares): JFR samples a thread whenever it is in Java code, on a CPU or waiting for one, where
/// the profiler samples CPU time. With two busy threads on 2 CPUs beside other work, the two
/// split the time differently: on the short-lived threads' workload, JFR gave main 5 to 17
/// points more than its share of the CPU (ThreadMXBean), when the profiler was within 1.5 points
/// of it; JDK 25's CPU-time sampler (jdk.CPUTimeSample) was 5 points off as well. Within a
/// thread the same holds where a thread waits for a CPU in Java code (main, woken from `join`):
/// when other work saturates the machine, JFR's share of main's own frame grew to 2%, and a
/// branch's share could differ by just over 3 points (seen twice in 30 runs at a load of 9 on 2
/// CPUs).
pub fn assert_agrees_with_jfr(
    what: &str,
    entries: &[&str],
    (ours, least): (&[(String, f64)], f64),
    theirs: &[(String, f64)],
) {
    let overall =
        jfr::largest_difference(&jfr::shares(ours.to_vec()), &jfr::shares(theirs.to_vec()));
    if let Some((branch, by)) = overall {
        eprintln!(
            "{what}: overall, the largest share difference with JFR is {:.2} points, on {branch}",
            by * 100.0
        );
    }
    let (ours, theirs) = (by_entry(ours), by_entry(theirs));
    for &entry in entries {
        let weight = |side: &HashMap<String, Vec<(String, f64)>>| -> f64 {
            side.get(entry)
                .map_or(0.0, |b| b.iter().map(|(_, w)| w).sum())
        };
        let (our_w, jfr_n) = (weight(&ours), weight(&theirs));
        assert!(
            our_w >= least && jfr_n >= 100.0,
            "{what}: threads entered at {entry} weigh {our_w:.1} on our side, {jfr_n} JFR samples"
        );
        let shares = |side: &HashMap<String, Vec<(String, f64)>>| jfr::shares(side[entry].clone());
        let (our_shares, jfr_shares) = (shares(&ours), shares(&theirs));
        let (branch, by) =
            jfr::largest_difference(&our_shares, &jfr_shares).expect("weights on both sides");
        eprintln!(
            "{what}: threads entered at {entry} ({our_w:.1} on our side, JFR {jfr_n} samples): \
             largest share difference with JFR {:.2} points, on {branch}",
            by * 100.0
        );
        assert!(
            by <= 0.03,
            "{what}: {branch}: {:.2}% of our weight of {entry}, {:.2}% of JFR's\nours: \
             {our_shares:?}\nJFR: {jfr_shares:?}",
            our_shares.get(&branch).copied().unwrap_or(0.0) * 100.0,
            jfr_shares.get(&branch).copied().unwrap_or(0.0) * 100.0
        );
    }
}

/// VirtualTasks' two methods, which each task runs.
pub const VIRTUAL_TASKS_LEAVES: [&str; 2] = ["VirtualTasks.alpha", "VirtualTasks.beta"];

/// The carrier thread's frames, which a virtual thread's branch must not hold.
const CARRIER_FRAMES: [&str; 3] = [
    "java.util.concurrent.ForkJoinWorkerThread.run",
    "jdk.internal.vm.Continuation.run",
    "jdk.internal.vm.Continuation.enter",
];

/// The branches of `weights` that end in one of VirtualTasks' two methods.
pub fn virtual_tasks(weights: &[(String, f64)]) -> Vec<(String, f64)> {
    weights
        .iter()
        .filter(|(branch, _)| VIRTUAL_TASKS_LEAVES.iter().any(|l| branch.ends_with(l)))
        .cloned()
        .collect()
}

/// Checks that the branches of VirtualTasks' methods, `tasks` ([`virtual_tasks`]), weigh at
/// least `least`, hold none of the carrier thread's frames, and that 99.5% of their weight
/// starts at `java.lang.VirtualThread.run`.
///
/// A sample of code compiled a moment before, which the agent has not reported yet, is named
/// from the code cache by its outer method only: when that is
/// VirtualThread$VThreadContinuation$1.run, VirtualThread.run compiled into it is not seen (0 to
/// 46 such frames in 5,000 samples).
pub fn assert_virtual_threads_own_branches(what: &str, tasks: &[(String, f64)], least: f64) {
    let all: f64 = tasks.iter().map(|(_, w)| w).sum();
    assert!(all >= least, "{what}: the tasks' methods weigh {all:.1}");
    for (branch, _) in tasks {
        for carrier in CARRIER_FRAMES {
            assert!(!branch.contains(carrier), "{what}: {carrier} in {branch}");
        }
    }
    let from_run: f64 = tasks
        .iter()
        .filter(|(branch, _)| branch.starts_with("java.lang.VirtualThread.run;"))
        .map(|(_, w)| w)
        .sum();
    assert!(
        from_run >= 0.995 * all,
        "{what}: {from_run:.1} of {all:.1} start at java.lang.VirtualThread.run: {tasks:?}"
    );
}

/// `VirtualTasks.alpha`'s share of the weight of the two methods' branches `tasks`.
pub fn alpha_share(tasks: &[(String, f64)]) -> f64 {
    let alpha: f64 = tasks
        .iter()
        .filter(|(branch, _)| branch.ends_with("VirtualTasks.alpha"))
        .map(|(_, w)| w)
        .sum();
    alpha / tasks.iter().map(|(_, w)| w).sum::<f64>()
}

/// Checks that the two methods' branches `ours` (samples, or joules, each weighing at least
/// `least`) split as JFR's samples of them `theirs` do: alpha's share within 3 points, and every
/// branch's (as [`assert_agrees_with_jfr`]). For tasks never unmounted, whose every frame is on
/// the carrier's stack, as JFR shows it.
pub fn assert_virtual_tasks_agree_with_jfr(
    what: &str,
    (ours, least): (&[(String, f64)], f64),
    theirs: &[(String, f64)],
) {
    let (our_alpha, jfr_alpha) = (alpha_share(ours), alpha_share(theirs));
    eprintln!(
        "{what}: alpha has {:.1}% of the two methods' weight, {:.1}% of JFR's samples",
        our_alpha * 100.0,
        jfr_alpha * 100.0
    );
    assert!(
        (our_alpha - jfr_alpha).abs() <= 0.03,
        "{what}: alpha has {:.1}% of the weight, {:.1}% of JFR's samples",
        our_alpha * 100.0,
        jfr_alpha * 100.0
    );
    let entries = ["java.lang.VirtualThread.run"];
    assert_agrees_with_jfr(
        &format!("{what}, by branch"),
        &entries,
        (ours, least),
        theirs,
    );
}

/// The JVM options that put NamingKinds' named module on the module path.
pub fn naming_module_options() -> [String; 4] {
    [
        "-p".into(),
        workload_modules().display().to_string(),
        "--add-modules".into(),
        "naming.mod".into(),
    ]
}

/// The `NAME` lines NamingKinds prints in `output` (Java's own names of its 8 hot methods), after
/// checking that its module is named.
pub fn java_names(output: &str) -> BTreeSet<String> {
    assert!(
        output.lines().any(|line| line == "MODULE naming.mod"),
        "ModWork is not in the named module naming.mod:\n{output}"
    );
    let names: BTreeSet<String> = output
        .lines()
        .filter_map(|line| line.strip_prefix("NAME "))
        .map(str::to_string)
        .collect();
    assert_eq!(names.len(), 8, "{output}");
    names
}

/// A name with the separators of a hidden class's suffix made alike (`a.B/0x1`, `a.B.0x1` and
/// `a/B+0x1` are different spellings of one class): two frames with the same key are one method.
fn spelling(name: &str) -> String {
    name.replace(['/', '+'], ".")
}

/// The frames of `branches`.
pub fn frames_of<'a>(branches: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    branches
        .into_iter()
        .flat_map(|branch| branch.split(';').map(str::to_string))
        .collect()
}

/// Checks that every method of `expected` appears among `frames` and that no other frame is the
/// same method under another spelling.
pub fn assert_same_names(what: &str, expected: &BTreeSet<String>, frames: &BTreeSet<String>) {
    let missing: Vec<&String> = expected.difference(frames).collect();
    assert!(
        missing.is_empty(),
        "{what}: no frame {missing:?} in {frames:?}"
    );
    let spellings: BTreeSet<String> = expected.iter().map(|name| spelling(name)).collect();
    let other: Vec<&String> = frames
        .iter()
        .filter(|frame| !expected.contains(*frame) && spellings.contains(&spelling(frame)))
        .collect();
    assert!(
        other.is_empty(),
        "{what}: other names {other:?} for {expected:?}"
    );
}

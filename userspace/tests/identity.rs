//! Branch identity in the profiling session that `joularcode-bpf stacks` runs (JDK 21 and 25):
//! virtual threads unmounted and mounted again are their own stacks. Short-lived threads and
//! virtual threads that are not unmounted are judged against JFR in record's tests
//! (`record.rs`), on the energy their samples get.
//!
//! They load the BPF sampler (root) and judge the branches of the JVMs they launch, not CPU
//! shares; they fail, saying so, when something is missing.

use joularcode_bpf::resolve::ResolveStats;
use joularcode_testkit::branches::{assert_virtual_threads_own_branches, virtual_tasks};
use joularcode_testkit::{jdk, one_at_a_time, workload_classes, Jdk};

mod common;

/// Five times the default rate.
const RATE_HZ: u64 = 500;

/// What a session gave for one launched JVM.
struct Profiled {
    /// Every sample, by branch, as `stacks` writes them.
    branches: Vec<(String, u64)>,
    /// What resolving met.
    stats: ResolveStats,
}

/// Profiles `main ARGS`, launched on `jdk`, in a session at [`RATE_HZ`] with native frames (as
/// `stacks --native` does).
fn profile(jdk: &Jdk, main: &str, args: &[&str]) -> Profiled {
    let mut command = std::process::Command::new(jdk.java());
    command
        .arg("-cp")
        .arg(workload_classes())
        .arg(main)
        .args(args)
        .stdout(std::process::Stdio::null());
    let mut session = common::profile_to_end(
        command,
        RATE_HZ,
        true,
        &format!("Java {}: {main}", jdk.major),
    );
    let counts = session.take_native_counts();
    assert_eq!(counts.len(), 1, "one JVM: {:?}", counts.keys());
    let (&pid, samples) = counts.iter().next().expect("one JVM");
    let jvm = session.jvm(pid).expect("the JVM");
    let mut branches: std::collections::HashMap<String, u64> = Default::default();
    for ((branch, _native), &n) in samples {
        *branches
            .entry(jvm.branches().name(*branch).to_string())
            .or_insert(0) += n;
    }
    Profiled {
        branches: branches.into_iter().collect(),
        stats: jvm.stats(),
    }
}

#[test]
fn virtual_threads_unmounted_and_mounted_again_are_their_own_branches() {
    let _serial = one_at_a_time("the identity tests load the BPF sampler");
    for jdk in [jdk(21), jdk(25)] {
        // 3,000 virtual threads, each sleeping between its two methods: unmounted from its
        // carrier, then mounted again, on another carrier or the same.
        let run = profile(&jdk, "VirtualTasks", &["3000", "sleep"]);
        let what = format!("Java {} VirtualTasks sleep", jdk.major);
        let weights: Vec<(String, f64)> = run
            .branches
            .iter()
            .map(|(branch, n)| (branch.clone(), *n as f64))
            .collect();
        let tasks = virtual_tasks(&weights);
        eprintln!("{what}: the tasks' two methods: {tasks:?}; {:?}", run.stats);
        assert_virtual_threads_own_branches(&what, &tasks, 300.0);
    }
}

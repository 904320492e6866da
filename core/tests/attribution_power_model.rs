//! Attribution, one test per case of Joular Code for Java's PowerModelTest, then the eBPF mode's
//! inputs and the JVM's own threads (docs/architecture.md, "Decisions, and why", 7).

use std::collections::HashMap;

use joularcode_core::attribution::{
    attribute, process_share, CycleInput, CycleResult, CycleThreads, JvmThreads, MachineLoad,
    ThreadKind,
};
use joularcode_core::branch::{BranchId, Branches, GC};
use joularcode_core::energy::{Interval, Power};

const SECOND: u64 = 1_000_000_000;

fn close(actual: f64, expected: f64) {
    assert!(
        (actual - expected).abs() < 1e-9,
        "{actual} is not {expected}"
    );
}

fn load(jvm_ns: u64, elapsed_ns: u64, cpus: u32, system_load: f64) -> f64 {
    process_share(
        jvm_ns,
        elapsed_ns,
        cpus,
        MachineLoad::SystemLoad(system_load),
    )
}

/// A one-frame branch per `class.method` name.
fn branch(branches: &mut Branches, qualified: &str) -> BranchId {
    let (class, method) = qualified.rsplit_once('.').unwrap();
    let frame = branches.frame(class, method);
    branches.branch(&[frame])
}

/// Attribution of `power_w` as the whole JVM's power (share 1: the JVM is the machine's only load).
fn attribute_jvm_power(
    power_w: f64,
    samples: &CycleThreads,
    branches: &Branches,
    jvm_threads: JvmThreads,
) -> CycleResult {
    let input = CycleInput {
        cpu_power: Power::from_watts(power_w),
        interval: Interval::from_ns(SECOND),
        jvm_cpu_ns: SECOND,
        cpus: 1,
        machine: MachineLoad::SystemLoad(1.0),
        threads: samples,
    };
    attribute(&input, branches, jvm_threads)
}

/// Branches of one `class.method` frame each, per thread: (thread id, CPU ns, [(branch, samples)]).
type Threads<'a> = &'a [(u64, u64, &'a [(&'a str, u64)])];

/// Attribution of `power_w` as the whole JVM's power to Java `threads`.
fn run(prefixes: &[&str], power_w: f64, threads: Threads) -> (CycleResult, Branches) {
    let mut branches = Branches::new(prefixes);
    let mut samples = CycleThreads::default();
    for &(tid, cpu_ns, counts) in threads {
        samples.add_cpu(tid, cpu_ns);
        for &(name, n) in counts {
            samples.count(tid, branch(&mut branches, name), n);
        }
    }
    let result = attribute_jvm_power(power_w, &samples, &branches, JvmThreads::Own);
    (result, branches)
}

fn all_power(result: &CycleResult, branches: &Branches) -> HashMap<String, f64> {
    result
        .all
        .iter()
        .map(|&(b, p)| (branches.name(b).to_string(), p.watts()))
        .collect()
}

fn app_power(result: &CycleResult, branches: &Branches) -> HashMap<String, f64> {
    result
        .app
        .iter()
        .map(|&(b, p)| (branches.app_name(b).to_string(), p.watts()))
        .collect()
}

// processShare

#[test]
fn process_share_is_the_jvms_load_over_the_machines_load() {
    close(load(SECOND / 2, SECOND, 4, 0.25), 0.5);
}

#[test]
fn process_share_never_above_one() {
    close(load(SECOND, SECOND, 4, 0.1), 1.0);
}

#[test]
fn process_share_unknown_system_load_falls_back_to_the_jvms_load() {
    close(load(SECOND, SECOND, 4, -1.0), 0.25);
    close(load(SECOND, SECOND, 4, f64::NAN), 0.25);
    close(load(SECOND, SECOND, 4, 0.0), 0.25);
}

#[test]
fn process_share_nothing_to_divide_is_zero() {
    assert_eq!(load(0, SECOND, 4, 0.5), 0.0);
    assert_eq!(load(SECOND, 0, 4, 0.5), 0.0);
    assert_eq!(load(SECOND, SECOND, 0, 0.5), 0.0);
}

// processShare from the machine's busy CPU time (eBPF mode)

#[test]
fn process_share_busy_cpu_is_the_jvms_cpu_over_the_machines() {
    let busy = |ns| process_share(SECOND / 2, SECOND, 4, MachineLoad::BusyCpuNs(ns));
    close(busy(Some(SECOND)), 0.5);
    close(busy(Some(SECOND / 4)), 1.0);
    // Unknown or 0: the JVM's load alone, 0.5 s over 4 CPU-seconds
    close(busy(None), 0.125);
    close(busy(Some(0)), 0.125);
    assert_eq!(
        process_share(0, SECOND, 4, MachineLoad::BusyCpuNs(Some(SECOND))),
        0.0
    );
}

// cpuUsage: which CPU time goes in the denominator, and what coverage says

#[test]
fn cpu_usage_unsampled_thread_stays_in_the_total() {
    let (result, branches) = run(&[], 10.0, &[(1, 300, &[("a.A.a", 1)]), (2, 700, &[])]);
    close(result.coverage, 0.3);
    close(all_power(&result, &branches)["a.A.a"], 3.0);
}

#[test]
fn cpu_usage_thread_started_mid_window_counts_all_of_its_cpu_time() {
    let mut branches = Branches::default();
    let a = branch(&mut branches, "a.A.a");
    let mut samples = CycleThreads::default();
    samples.add_cpu_between(&HashMap::new(), &HashMap::from([(7, 500)]));
    samples.count(7, a, 1);
    let (_, thread) = samples.threads().next().unwrap();
    assert_eq!(thread.cpu_ns, 500);
    close(
        attribute_jvm_power(1.0, &samples, &branches, JvmThreads::Own).coverage,
        1.0,
    );
}

#[test]
fn cpu_usage_idle_thread_ignored() {
    let mut branches = Branches::default();
    let a = branch(&mut branches, "a.A.a");
    let mut samples = CycleThreads::default();
    samples.add_cpu_between(
        &HashMap::from([(1, 100), (2, 900)]),
        &HashMap::from([(1, 600), (2, 900)]),
    );
    samples.count(1, a, 1);
    let cpu: Vec<_> = samples.threads().map(|(tid, t)| (tid, t.cpu_ns)).collect();
    assert_eq!(cpu, [(1, 500)]);
    close(
        attribute_jvm_power(1.0, &samples, &branches, JvmThreads::Own).coverage,
        1.0,
    );
}

#[test]
fn cpu_usage_no_cpu_used_coverage_is_zero() {
    let mut branches = Branches::default();
    let a = branch(&mut branches, "a.A.a");
    let mut samples = CycleThreads::default();
    samples.add_cpu_between(&HashMap::from([(1, 100)]), &HashMap::from([(1, 100)]));
    samples.count(1, a, 1);
    let result = attribute_jvm_power(10.0, &samples, &branches, JvmThreads::Own);
    assert_eq!(result.coverage, 0.0);
    assert!(result.all.is_empty());
    close(result.unattributed.watts(), 10.0);
}

// threadPower

#[test]
fn thread_power_splits_by_cpu_time() {
    let (result, branches) = run(
        &[],
        40.0,
        &[(1, 25, &[("a.A.a", 5)]), (2, 75, &[("b.B.b", 1)])],
    );
    let power = all_power(&result, &branches);
    close(power["a.A.a"], 10.0);
    close(power["b.B.b"], 30.0);
}

/// What is handed out is less than the JVM drew, by exactly the share never observed.
#[test]
fn thread_power_unobserved_share_is_left_unattributed() {
    let (result, branches) = run(&[], 80.0, &[(1, 250, &[("a.A.a", 1)]), (2, 750, &[])]);
    close(all_power(&result, &branches)["a.A.a"], 20.0);
    close(result.coverage * 80.0, 20.0);
    close(result.unattributed.watts(), 60.0);
}

#[test]
fn thread_power_no_power_or_no_cpu_is_empty() {
    assert!(run(&[], 80.0, &[(1, 0, &[("a.A.a", 1)])]).0.all.is_empty());
    let (result, _) = run(&[], 0.0, &[(1, 10, &[("a.A.a", 1)])]);
    assert!(result.all.is_empty());
    assert_eq!(result.unattributed.watts(), 0.0);
}

// branchPower

#[test]
fn branch_power_splits_each_thread_by_sample_count() {
    let (result, branches) = run(&[], 8.0, &[(1, 100, &[("a.A.a", 3), ("b.B.b", 1)])]);
    let power = all_power(&result, &branches);
    close(power["a.A.a"], 6.0);
    close(power["b.B.b"], 2.0);
}

#[test]
fn branch_power_same_branch_on_two_threads_is_summed() {
    let (result, branches) = run(
        &[],
        5.0,
        &[(1, 2, &[("a.A.a", 1)]), (2, 3, &[("a.A.a", 1)])],
    );
    assert_eq!(result.all.len(), 1);
    close(all_power(&result, &branches)["a.A.a"], 5.0);
    close(app_power(&result, &branches)["a.A.a"], 5.0);
}

/// Samples that matched no app frame still count for the thread, so their share is not given to
/// the app branches.
#[test]
fn branch_power_unmatched_samples_stay_in_the_thread_total() {
    let (result, branches) = run(
        &["com.app"],
        8.0,
        &[(
            1,
            100,
            &[("com.app.Main.run", 1), ("java.lang.Thread.run", 3)],
        )],
    );
    assert_eq!(
        app_power(&result, &branches),
        HashMap::from([("com.app.Main.run".to_string(), 2.0)])
    );
    close(all_power(&result, &branches)["java.lang.Thread.run"], 6.0);
}

/// Joular skips a thread whose stack is empty: such a sample is no sample, so a thread caught only
/// with an empty stack is not sampled, and its share stays unattributed.
#[test]
fn branch_power_an_empty_stack_is_no_sample() {
    let mut branches = Branches::default();
    let empty = branches.branch(&[]);
    let a = branch(&mut branches, "a.A.a");
    let mut samples = CycleThreads::default();
    samples.add_cpu(1, 300);
    samples.count(1, empty, 5);
    samples.add_cpu(2, 100);
    samples.count(2, empty, 1);
    samples.count(2, a, 1);
    let result = attribute_jvm_power(8.0, &samples, &branches, JvmThreads::Own);
    close(result.coverage, 0.25);
    assert_eq!(
        all_power(&result, &branches),
        HashMap::from([("a.A.a".to_string(), 2.0)])
    );
    close(result.unattributed.watts(), 6.0);
}

#[test]
fn branch_power_thread_without_power_is_skipped() {
    let (result, _) = run(&[], 8.0, &[(1, 0, &[("a.A.a", 1)]), (2, 100, &[])]);
    assert!(result.all.is_empty() && result.app.is_empty());
    close(result.unattributed.watts(), 8.0);
}

// The whole cycle

#[test]
fn jvm_power_is_its_share_of_the_cpu_power() {
    let mut branches = Branches::default();
    let a = branch(&mut branches, "a.A.a");
    let mut samples = CycleThreads::default();
    samples.add_cpu(1, SECOND / 2);
    samples.count(1, a, 1);
    let input = CycleInput {
        cpu_power: Power::from_watts(30.0),
        interval: Interval::from_ns(2 * SECOND),
        jvm_cpu_ns: SECOND / 2,
        cpus: 4,
        machine: MachineLoad::BusyCpuNs(Some(2 * SECOND)),
        threads: &samples,
    };
    let result = attribute(&input, &branches, JvmThreads::Own);
    close(result.interval.seconds(), 2.0);
    close(result.jvm_energy().joules(), 15.0);
    close(result.jvm_share, 0.25);
    close(result.jvm_power.watts(), 7.5);
    close(all_power(&result, &branches)["a.A.a"], 7.5);
}

#[test]
fn unreadable_power_attributes_nothing() {
    for power in [f64::NAN, -1.0, f64::INFINITY] {
        let (result, _) = run(&[], power, &[(1, 100, &[("a.A.a", 1)])]);
        assert_eq!(result.jvm_power.watts(), 0.0);
        assert!(result.all.is_empty());
    }
}

// The JVM's own threads (docs/architecture.md, "Decisions, and why", 7)

/// A Java thread and a GC thread, 3:1 in CPU time, under `jvm_threads`.
fn java_and_gc(jvm_threads: JvmThreads) -> (CycleResult, Branches) {
    let mut branches = Branches::new(&["com.app"]);
    let run = branch(&mut branches, "com.app.Main.run");
    let gc_frame = branches.jvm_frame(GC);
    let gc = branches.branch(&[gc_frame]);
    let mut samples = CycleThreads::default();
    samples.add_cpu(1, 300);
    samples.count(1, run, 1);
    samples.add_cpu(2, 100);
    samples.set_kind(2, ThreadKind::Jvm);
    samples.count(2, gc, 1);
    (
        attribute_jvm_power(8.0, &samples, &branches, jvm_threads),
        branches,
    )
}

#[test]
fn jvm_threads_own_get_their_branch_in_the_all_view_only() {
    let (result, branches) = java_and_gc(JvmThreads::Own);
    let all = all_power(&result, &branches);
    close(all["[GC]"], 2.0);
    close(all["com.app.Main.run"], 6.0);
    assert_eq!(
        app_power(&result, &branches),
        HashMap::from([("com.app.Main.run".to_string(), 6.0)])
    );
    close(result.coverage, 1.0);
}

#[test]
fn jvm_threads_own_never_in_the_app_view_even_without_prefixes() {
    let mut branches = Branches::default();
    let java_frame = branches.frame("a.Gc", "helper");
    let gc = branches.branch(&[java_frame]);
    let mut samples = CycleThreads::default();
    samples.add_cpu(1, 100);
    samples.set_kind(1, ThreadKind::Jvm);
    samples.count(1, gc, 1);
    let result = attribute_jvm_power(8.0, &samples, &branches, JvmThreads::Own);
    assert_eq!(result.all.len(), 1);
    assert!(result.app.is_empty());
}

#[test]
fn jvm_threads_spread_go_to_the_java_threads_as_in_joular() {
    let (result, branches) = java_and_gc(JvmThreads::Spread);
    assert_eq!(
        all_power(&result, &branches),
        HashMap::from([("com.app.Main.run".to_string(), 8.0)])
    );
    close(result.coverage, 1.0);
    close(result.unattributed.watts(), 0.0);
}

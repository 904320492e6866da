//! Conservation of power and energy over many random cycles: nothing is created, nothing is lost.

use joularcode_core::attribution::{
    attribute, CycleInput, CycleThreads, JvmThreads, MachineLoad, ThreadKind,
};
use joularcode_core::branch::{BranchId, Branches, GC};
use joularcode_core::energy::{Interval, Power};
use proptest::prelude::*;

/// One thread of a random cycle: CPU ns, whether it is the JVM's own, and (branch index, count).
type Thread = (u64, bool, Vec<(usize, u64)>);

fn machine() -> impl Strategy<Value = MachineLoad> {
    prop_oneof![
        prop_oneof![Just(f64::NAN), -1.0..0.0, 0.0..1.5f64].prop_map(MachineLoad::SystemLoad),
        proptest::option::of(0u64..20_000_000_000).prop_map(MachineLoad::BusyCpuNs),
    ]
}

fn thread() -> impl Strategy<Value = Thread> {
    (
        prop_oneof![Just(0u64), 1u64..2_000_000_000],
        any::<bool>(),
        proptest::collection::vec((0usize..13, 1u64..50), 0..6),
    )
}

/// Thirteen branches: application ones, JDK ones that no prefix matches, `[GC]` and an empty stack.
fn branches() -> (Branches, Vec<BranchId>) {
    let mut branches = Branches::new(&["com.app"]);
    let run = branches.frame("java.lang.Thread", "run");
    let gc = branches.jvm_frame(GC);
    let mut ids = vec![branches.branch(&[gc])];
    for i in 0..11 {
        let class = if i % 3 == 0 {
            "java.util.HashMap"
        } else {
            "com.app.Worker"
        };
        let method = branches.frame(class, &format!("m{}", i / 2));
        ids.push(branches.branch(&[run, method]));
    }
    ids.push(branches.branch(&[]));
    (branches, ids)
}

fn close(a: f64, b: f64, scale: f64) -> bool {
    (a - b).abs() <= 1e-9 * scale.max(1.0)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn power_is_conserved(
        cpu_power_w in prop_oneof![Just(0.0), 0.0..500.0f64],
        elapsed_ns in 0u64..5_000_000_000,
        jvm_cpu_ns in 0u64..20_000_000_000,
        cpus in 0u32..128,
        machine in machine(),
        threads in proptest::collection::vec(thread(), 0..12),
        spread in any::<bool>(),
    ) {
        let (branches, ids) = branches();
        let mut samples = CycleThreads::default();
        for (tid, (cpu_ns, jvm, counts)) in threads.iter().enumerate() {
            let tid = tid as u64;
            samples.add_cpu(tid, *cpu_ns);
            if *jvm {
                samples.set_kind(tid, ThreadKind::Jvm);
            }
            for &(branch, n) in counts {
                samples.count(tid, ids[branch], n);
            }
        }
        let input = CycleInput {
            cpu_power: Power::from_watts(cpu_power_w),
            interval: Interval::from_ns(elapsed_ns),
            jvm_cpu_ns,
            cpus,
            machine,
            threads: &samples,
        };
        let mode = if spread { JvmThreads::Spread } else { JvmThreads::Own };
        let result = attribute(&input, &branches, mode);

        let all: f64 = result.all.iter().map(|(_, p)| p.watts()).sum();
        let app: f64 = result.app.iter().map(|(_, p)| p.watts()).sum();
        prop_assert!((0.0..=1.0).contains(&result.jvm_share));
        prop_assert!(result.jvm_power.watts() <= cpu_power_w, "the JVM never gets more than the CPU");
        prop_assert!((0.0..=1.0).contains(&result.coverage));
        prop_assert!(result.unattributed.watts() >= -1e-9);
        prop_assert!(close(all + result.unattributed.watts(), result.jvm_power.watts(), cpu_power_w),
            "branches {all} + unattributed {} != JVM {}", result.unattributed.watts(), result.jvm_power.watts());
        prop_assert!(close(all, result.coverage * result.jvm_power.watts(), cpu_power_w),
            "branches {all} != coverage {} x JVM {}", result.coverage, result.jvm_power.watts());
        prop_assert!(app <= all + 1e-9 * cpu_power_w.max(1.0), "app {app} > all {all}");
        // The same in joules: the branches' energy and what went to none make the JVM's energy,
        // which is never more than the source's over the cycle.
        let seconds = elapsed_ns as f64 / 1e9;
        let (branches_j, unattributed_j, jvm_j) = (
            result.branches_energy().joules(),
            result.unattributed_energy().joules(),
            result.jvm_energy().joules(),
        );
        prop_assert!(close(branches_j + unattributed_j, jvm_j, cpu_power_w * seconds),
            "branches {branches_j} J + unattributed {unattributed_j} J != JVM {jvm_j} J");
        prop_assert!(jvm_j <= (Power::from_watts(cpu_power_w) * Interval::from_ns(elapsed_ns)).joules());
        prop_assert!(result.app_energy().joules() <= branches_j + 1e-9 * (cpu_power_w * seconds).max(1.0));
        prop_assert!(result.all.iter().all(|(_, p)| p.watts() > 0.0));
        prop_assert!(result.app.iter().all(|(_, p)| p.watts() > 0.0));

        // The app view is the all view regrouped, with the JVM's threads and unmatched samples out
        let mut regrouped = std::collections::HashMap::new();
        for &(branch, power) in &result.all {
            if let Some(app_branch) = branches.app(branch) {
                *regrouped.entry(app_branch).or_insert(0.0) += power.watts();
            }
        }
        for &(app_branch, power) in &result.app {
            prop_assert!(power.watts() <= regrouped[&app_branch] + 1e-9 * cpu_power_w.max(1.0));
        }
    }

}

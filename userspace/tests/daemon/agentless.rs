//! The daemon by default loads nothing into the JVMs of the host: their compiled frames, and the
//! methods inlined into them, are named from the nmethods' scopes in their memory.

use joularcode_testkit::host::User;
use joularcode_testkit::{mapped_agent, STACKS_CHAIN};

use super::*;

/// The capabilities the daemon needs when it loads nothing into the JVMs (deploy/ gives it two
/// more for `--attach`: CAP_DAC_OVERRIDE and CAP_KILL).
const AGENTLESS_CAPABILITIES: &str = "-all,+bpf,+perfmon,+sys_resource,+sys_ptrace";

/// What the profiler may leave in a JVM it loads something into: the agent in its maps, its
/// code map, or the attach socket HotSpot opens when asked to (none of them when nothing is
/// loaded).
fn traces_in(pid: u32) -> Vec<String> {
    let mut traces: Vec<String> = mapped_agent(pid).into_iter().collect();
    let root = format!("/proc/{pid}/root/tmp");
    for file in [
        format!("joularcode-{pid}.map"),
        format!(".java_pid{pid}"),
        format!(".attach_pid{pid}"),
    ] {
        let path = Path::new(&root).join(&file);
        if path.symlink_metadata().is_ok() {
            traces.push(path.display().to_string());
        }
    }
    traces
}

/// StacksChain, run by a user of its own, compiled (its chain inlined by C2) before the daemon
/// starts with its default options and the four capabilities they need (no CAP_DAC_OVERRIDE,
/// no CAP_KILL, as the systemd unit can give): the JVM never gets the agent, a code map or an
/// attach socket, and the energy of its main thread is in branches that hold the whole chain,
/// named from run's scopes in the JVM's memory (at least 90% of it; in ten runs here, 99.7% at
/// least, nearly 10 points inside the bound).
#[test]
fn by_default_nothing_is_loaded_and_inlined_chains_are_named_whole() {
    let _serial = serial();
    let name = format!("/joularcode-agentless-{}", std::process::id());
    let cgroup = TestCgroup::new(&name, &name);
    let user = User::create("nl");
    let java = Jvm::command(&jdk(17), &[], "StacksChain", &[]);
    let mut as_user = Command::new("setpriv");
    as_user
        .arg(format!("--reuid={}", user.uid))
        .arg(format!("--regid={}", user.gid))
        .args(["--clear-groups", "--"])
        .arg(java.get_program())
        .args(java.get_args());
    let jvm = Jvm::spawn_until(cgroup.command(&as_user), "READY");
    // C2 compiles the chain within a second of READY on a quiet machine.
    sleep(Duration::from_secs(3));
    let mut daemon = Command::new("setpriv");
    daemon
        .arg(format!("--bounding-set={AGENTLESS_CAPABILITIES}"))
        .arg("--inh-caps=-all")
        .arg("--")
        .arg(binary());
    let daemon = Daemon::launch(daemon, &["--cgroup", &cgroup.path]);
    let pid = format!("pid=\"{}\"", jvm.pid());
    let main_energy = |text: &str| {
        let branches = Daemon::series(text, "joularcode_branch_energy_joules_total");
        let of_main = |whole: bool| -> f64 {
            branches
                .iter()
                .filter(|(labels, _)| labels.contains(&pid))
                .filter_map(|(labels, &joules)| {
                    let branch = labels.split("branch=\"").nth(1)?.split('"').next()?;
                    let counted = branch.starts_with("StacksChain.main")
                        && (!whole || branch.starts_with(STACKS_CHAIN));
                    counted.then_some(joules)
                })
                .sum()
        };
        (of_main(true), of_main(false))
    };
    // Ten seconds of profiling (some 2,000 samples of the main thread at the default rate).
    let start = Instant::now();
    let (mut whole, mut all) = (0.0, 0.0);
    while start.elapsed() < Duration::from_secs(10) || all == 0.0 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the daemon never exported StacksChain's main thread\n{}",
            daemon.said()
        );
        sleep(Duration::from_secs(1));
        (whole, all) = main_energy(&daemon.scrape());
    }
    let share = whole / all;
    let traces = traces_in(jvm.pid());
    eprintln!(
        "{whole:.2} J of the main thread's {all:.2} J in branches of the whole chain \
         ({share:.4}); left in the JVM: {traces:?}"
    );
    assert!(traces.is_empty(), "{traces:?}\n{}", daemon.said());
    assert!(share >= 0.9, "{share:.4}\n{}", daemon.said());
    let said = daemon.said();
    assert!(
        !said.contains("agent") && !said.contains("ermission"),
        "the daemon spoke of an agent or lacked a permission:\n{said}"
    );
}

//! JVMs in their own namespaces: the container id label from a Docker-named cgroup, and the
//! kernel's process events by host pid.

use joularcode_testkit::mapped_agent;

use super::*;

#[test]
fn a_jvm_in_its_own_namespaces_and_a_docker_cgroup_gets_its_container_id() {
    let _serial = serial();
    let id = format!(
        "{:064x}",
        u128::from(std::process::id()) * 0x9e37_79b9_7f4a_7c15 + 1
    );
    let cgroup = TestCgroup::new(
        &format!("/docker/{id}"),
        &format!("/system.slice/docker-{id}.scope"),
    );
    // Narrowed to the container's cgroup: no other JVM of the host is profiled or attached to.
    let daemon = Daemon::start(&["--cgroup", &cgroup.path]);
    let mut jvm = Command::new("unshare");
    jvm.args(["--pid", "--mount", "--fork", "--mount-proc"])
        .arg(jdk(17).java())
        .args(["-XX:+PreserveFramePointer", "-cp"])
        .arg(workload_classes())
        .args(["RecordBusy", "1", "8"]);
    let mut child = cgroup
        .command(&jvm)
        .stdout(Stdio::null())
        .spawn()
        .expect("sh");
    sleep(Duration::from_secs(5));
    let text = daemon.scrape();
    let _ = child.wait();
    let energy = Daemon::series(&text, "joularcode_jvm_energy_joules_total");
    drop(cgroup);
    let ours: Vec<&String> = energy
        .keys()
        .filter(|labels| labels.contains("main_class=\"RecordBusy\""))
        .collect();
    assert!(
        ours.iter()
            .any(|labels| labels.contains(&format!("container_id=\"{id}\""))),
        "no RecordBusy series with container_id {id}: {energy:?}"
    );
}

/// The kernel's process events that discovery follows between its scans of /proc: a program
/// exec'd in its own PID and mount namespaces is named by its host pid, and so is its end.
#[test]
fn the_kernel_names_each_exec_and_end_by_host_pid_across_namespaces() {
    use joularcode_bpf::discovery::events::{ProcessEvent, ProcessEvents};
    let _serial = serial();
    let mut events = ProcessEvents::start().expect("the process tracepoints load");
    let mut child = Command::new("unshare")
        .args(["--pid", "--mount", "--fork", "--mount-proc", "sleep", "0.2"])
        .spawn()
        .expect("unshare");
    let unshare = child.id();
    child.wait().expect("unshare ends");
    let taken = events.take();
    assert!(!taken.lost);
    let position = |event: ProcessEvent| taken.events.iter().position(|e| *e == event);
    let exec = position(ProcessEvent::Exec(unshare));
    let exit = position(ProcessEvent::Exit(unshare));
    assert!(
        exec.is_some() && exit > exec,
        "no exec then exit of {unshare}: {:?}",
        taken.events
    );
    // The sleep forked in the new namespaces (pid 1 there) exec'd and ended too, under its host
    // pid: another pid than 1 and than unshare's.
    let inner: Vec<u32> = taken
        .events
        .iter()
        .filter_map(|e| match e {
            ProcessEvent::Exec(pid) if *pid != unshare && *pid != 1 => Some(*pid),
            _ => None,
        })
        .filter(|pid| taken.events.contains(&ProcessEvent::Exit(*pid)))
        .collect();
    assert!(!inner.is_empty(), "{:?}", taken.events);
    assert!(
        !events.take().events.contains(&ProcessEvent::Exec(unshare)),
        "each event is taken once"
    );
}

/// `--cgroup`: of two JVMs, the one started in the cgroup is profiled and the one outside is
/// neither exported nor given the agent.
#[test]
fn with_a_cgroup_only_its_jvms_are_profiled() {
    let _serial = serial();
    let name = format!("/joularcode-scope-{}", std::process::id());
    let cgroup = TestCgroup::new(&name, &name);
    let daemon = Daemon::start(&["--cgroup", &cgroup.path]);
    let command = || {
        Jvm::command(
            &jdk(17),
            &["-XX:+PreserveFramePointer"],
            "RecordBusy",
            &["1"],
        )
    };
    let inside = Jvm::spawn(cgroup.command(&command()));
    let outside = Jvm::spawn(command());
    let pid_label = |jvm: &Jvm| format!("pid=\"{}\"", jvm.pid());
    let start = Instant::now();
    let mut energy = BTreeMap::new();
    while !energy
        .keys()
        .any(|labels: &String| labels.contains(&pid_label(&inside)))
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the JVM in {} never appeared: {energy:?}",
            cgroup.path
        );
        sleep(Duration::from_millis(500));
        energy = Daemon::series(&daemon.scrape(), "joularcode_jvm_energy_joules_total");
    }
    // Two more cycles for the JVM outside to show up, were it taken.
    sleep(Duration::from_secs(2));
    let energy = Daemon::series(&daemon.scrape(), "joularcode_jvm_energy_joules_total");
    assert!(
        !energy
            .keys()
            .any(|labels| labels.contains(&pid_label(&outside))),
        "the JVM outside {} was profiled: {energy:?}",
        cgroup.path
    );
    let has_agent = |jvm: &Jvm| mapped_agent(jvm.pid()).is_some();
    assert!(has_agent(&inside), "the JVM inside has no agent");
    assert!(!has_agent(&outside), "the JVM outside was given the agent");
}

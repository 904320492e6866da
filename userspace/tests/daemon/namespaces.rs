//! JVMs in their own namespaces: the container id label from a Docker-named cgroup, and the
//! kernel's process events by host pid.

use super::*;

#[test]
fn a_jvm_in_its_own_namespaces_and_a_docker_cgroup_gets_its_container_id() {
    let _serial = serial();
    let id = format!(
        "{:064x}",
        u128::from(std::process::id()) * 0x9e37_79b9_7f4a_7c15 + 1
    );
    let cgroup = Path::new("/sys/fs/cgroup/pids/docker").join(&id);
    let unified = Path::new("/sys/fs/cgroup/system.slice").join(format!("docker-{id}.scope"));
    let dir = if Path::new("/sys/fs/cgroup/pids").is_dir() {
        cgroup
    } else {
        unified
    };
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    let daemon = Daemon::start(&[]);
    let java = jdk(17).java();
    let script = format!(
        "echo $$ > {}/cgroup.procs && exec unshare --pid --mount --fork --mount-proc {} -XX:+PreserveFramePointer -cp {} RecordBusy 1 8",
        dir.display(),
        java.display(),
        workload_classes().display()
    );
    let mut child = Command::new("sh")
        .args(["-c", &script])
        .stdout(Stdio::null())
        .spawn()
        .expect("sh");
    sleep(Duration::from_secs(5));
    let text = daemon.scrape();
    let _ = child.wait();
    let energy = Daemon::series(&text, "joularcode_jvm_energy_joules_total");
    let _ = std::fs::remove_dir(&dir);
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

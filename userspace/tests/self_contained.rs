//! The binary is all a user needs (docs/security.md, rule 17): copied alone into an empty folder,
//! it attaches the symbolizer agent it carries to a running JVM, which then has its inlined
//! frames named; the JVM loads that agent from /run/joularcode-bpf, a folder and a file of root
//! that nobody else can write, named by the agent's hash. A user other than root records their
//! own JVM with the agent's sampling mode from a folder of theirs. And `--version` says the
//! version and the commit.
//!
//! The attach loads the BPF sampler, and the other user is made for the test: as root.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use joularcode_testkit::host::User;
use joularcode_testkit::procfs::{busiest_thread_seconds, cpu_ticks};
use joularcode_testkit::profiler::{run_stacks_until, End};
use joularcode_testkit::results::rows;
use joularcode_testkit::{jdk, one_at_a_time, workload_classes, Jvm, STACKS_CHAIN};

#[test]
fn version_says_the_version_and_the_commit() {
    let manifest = env!("CARGO_MANIFEST_DIR");
    let commit = Command::new("git")
        .args(["-C", manifest, "rev-parse", "--short=12", "HEAD"])
        .output()
        .expect("run git");
    assert!(commit.status.success(), "the tests run in a git checkout");
    let commit = String::from_utf8(commit.stdout).expect("a hash");
    let version = Command::new(env!("CARGO_BIN_EXE_joularcode-bpf"))
        .arg("--version")
        .output()
        .expect("run joularcode-bpf --version");
    assert!(version.status.success());
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        format!(
            "joularcode-bpf {} (commit {})\n",
            env!("CARGO_PKG_VERSION"),
            commit.trim()
        )
    );
}

#[test]
fn the_binary_alone_attaches_the_agent_it_carries() {
    let _serial = one_at_a_time("the self-contained binary loads the BPF sampler");
    let alone = tempfile::tempdir().expect("a folder");
    let binary = alone.path().join("joularcode-bpf");
    std::fs::copy(env!("CARGO_BIN_EXE_joularcode-bpf"), &binary).expect("copy the binary");
    assert_eq!(std::fs::read_dir(alone.path()).expect("list").count(), 1);

    let jvm = Jvm::start(&jdk(17), &[], "StacksChain", &[]);
    let pid = jvm.pid();
    // Let the JIT compile (and inline) the chain before the agent comes
    let ran = |since: &_| busiest_thread_seconds(since, &cpu_ticks(pid));
    let ready = cpu_ticks(pid);
    let start = Instant::now();
    while ran(&ready) < 1.0 && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut sampled_from = None;
    let run = run_stacks_until(
        &binary,
        500,
        &["--pid", &pid.to_string()],
        (End::Interrupt, Duration::from_secs(60)),
        |_| ran(sampled_from.get_or_insert_with(|| cpu_ticks(pid))) >= 1.0,
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let (main, chain) = (run.samples("StacksChain.main"), run.samples(STACKS_CHAIN));
    assert!(
        main >= 50 && chain as f64 >= 0.85 * main as f64,
        "{chain} of {main} samples of main are the whole chain, inlined frames named\n{}",
        run.stderr
    );

    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("the JVM's maps");
    let agent = maps
        .lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| path.contains("libjvm_symbolizer_agent"))
        .unwrap_or_else(|| panic!("the JVM maps no agent:\n{maps}"));
    let agent = Path::new(agent);
    assert_eq!(agent.parent(), Some(Path::new("/run/joularcode-bpf")));
    let name = agent
        .file_name()
        .and_then(|name| name.to_str())
        .expect("a name");
    let hash = name
        .strip_prefix("libjvm_symbolizer_agent-")
        .and_then(|rest| rest.strip_suffix(".so"))
        .expect("named by its hash");
    assert!(
        hash.len() == 32 && hash.bytes().all(|b| b.is_ascii_hexdigit()),
        "{name}"
    );
    for (path, mode) in [
        (agent, 0o100644),
        (Path::new("/run/joularcode-bpf"), 0o40755),
    ] {
        let meta = std::fs::symlink_metadata(path).expect("there");
        assert_eq!((meta.uid(), meta.mode()), (0, mode), "{}", path.display());
    }
    drop(jvm);
}

#[test]
fn a_user_other_than_root_records_with_the_agent_from_a_folder_of_their_own() {
    let _serial = one_at_a_time("the test makes a user");
    let user = User::create("alone");
    // The runtime folder a login gives the user: /run/user/UID, theirs, 0700
    let runtime = Path::new("/run/user").join(user.uid.to_string());
    std::fs::create_dir_all(&runtime).expect("the user's runtime folder");
    user.own(&runtime);
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod 700");
    std::fs::write(user.home().join("watts"), "100\n").expect("a watts file");
    let mut command = Command::new(env!("CARGO_BIN_EXE_joularcode-bpf"));
    command
        .args(["record", "--mode", "agent", "--power-source-type", "vm"])
        .args(["--vm-power-format", "watts", "--vm-power-file", "watts"])
        .args([
            "--results-path",
            "results",
            "--",
            &jdk(17).java().display().to_string(),
        ])
        .arg("-cp")
        .arg(workload_classes())
        .args(["RecordBusy", "1", "4"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", user.home())
        .env("XDG_RUNTIME_DIR", &runtime)
        .stdin(Stdio::null());
    user.run_as(&mut command);
    let output = command.output().expect("run joularcode-bpf");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let folder = runtime.join("joularcode-bpf");
    // Each file written there, with its owner and mode
    let written: Vec<_> = std::fs::read_dir(&folder)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|entry| {
                    let meta = entry.metadata().ok()?;
                    Some((entry.file_name(), meta.uid(), meta.mode()))
                })
                .collect()
        })
        .unwrap_or_default();
    let _ = std::fs::remove_dir_all(&runtime);
    assert!(output.status.success(), "{stderr}");
    assert!(
        matches!(written.as_slice(), [(name, uid, 0o100644)]
            if *uid == user.uid && name.to_string_lossy().starts_with("libjvm_symbolizer_agent-")),
        "one agent of the user's, 0644, in {}: {written:?}",
        folder.display()
    );
    let busy = rows(&user.home().join("results/methods-power-all.csv"))
        .into_iter()
        .filter(|row| row.branch.contains("RecordBusy.burn"))
        .map(|row| row.energy_j)
        .sum::<f64>();
    assert!(busy > 0.0, "no energy for RecordBusy.burn: {stderr}");
}

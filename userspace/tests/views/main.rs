//! End-to-end tests of what people look at: the energy flame graphs (differential ones too)
//! opened in Debian's chromium (driven by playwright-core), the pprof files decoded against
//! pprof's published `profile.proto` and read by `go tool pprof`, the views of `record --app`,
//! the comparison of two recordings of a method made twice as cheap, `top` under tmux with
//! two JVMs, and the grams of CO2e of a recording whose carbon intensity changes. They run the binary as a user would, as root (the BPF sampler),
//! with the tools scripts/setup.sh installs, and fail loudly without them.
//!
//! The screenshots they take are kept in `target/test-artifacts/`.

mod app;
mod carbon;
mod compare;
mod flamegraph;
mod pprof;
mod printed;
mod top;

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use joularcode_testkit::{
    agent_library, jdk, one_at_a_time, repo_root, target_dir, workload_classes, Jvm,
};

/// The tests measure energy shares: one at a time.
fn serial() -> MutexGuard<'static, ()> {
    one_at_a_time("the views tests load the BPF sampler")
}

/// The folder of this test process's outputs, `target/views-tests/<pid>`, kept after it ends:
/// cargo-nextest runs each test in a process of its own, two at a time, so each has its own, and
/// the folders of the processes that have ended are removed as the next one starts.
fn work_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let parent = target_dir().join("views-tests");
        for entry in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
            let running = entry
                .file_name()
                .to_str()
                .and_then(|name| name.parse::<u32>().ok())
                .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
            if !running {
                let path = entry.path();
                let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
            }
        }
        let dir = parent.join(std::process::id().to_string());
        std::fs::create_dir_all(&dir).expect("the tests' folder");
        std::fs::write(dir.join("watts"), "100\n").expect("the watts file");
        dir
    })
}

/// Where the screenshots are kept.
fn artifacts() -> PathBuf {
    let dir = target_dir().join("test-artifacts");
    std::fs::create_dir_all(&dir).expect("the artifacts folder");
    dir
}

/// `joularcode-bpf ARGS`.
fn profiler(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_joularcode-bpf"));
    command.args(args).stdin(Stdio::null());
    command
}

/// The `vm` power source reading a constant 100 W, and the symbolizer agent.
fn vm_source() -> Vec<String> {
    let watts = work_dir().join("watts");
    vec![
        "--power-source-type".into(),
        "vm".into(),
        "--vm-power-format".into(),
        "watts".into(),
        "--vm-power-file".into(),
        watts.display().to_string(),
        "--agent-path".into(),
        agent_library().display().to_string(),
    ]
}

fn run(command: &mut Command) -> Output {
    let output = command.output().expect("run joularcode-bpf");
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    output
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Energy per branch of a Joular CSV file, read with the csv crate.
fn csv_energy(file: &Path) -> HashMap<String, f64> {
    let mut reader = csv::Reader::from_path(file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    let mut energy = HashMap::new();
    for record in reader.records() {
        let record = record.expect("a CSV record");
        *energy.entry(record[1].to_string()).or_insert(0.0) +=
            record[3].parse::<f64>().expect("joules");
    }
    energy
}

/// The joules of the branches whose name contains `part`.
fn joules_of(energy: &HashMap<String, f64>, part: &str) -> f64 {
    energy
        .iter()
        .filter(|(branch, _)| branch.contains(part))
        .map(|(_, joules)| joules)
        .sum()
}

/// One recording of the demo shop, with its flame graph and pprof file written by `record`.
struct Recording {
    results: PathBuf,
    svg: PathBuf,
    pprof: PathBuf,
    pid: u32,
}

/// The demo shop recorded once for the tests that look at its outputs: 6 s, from its first
/// instant, its own frames as the application's; its views show every frame.
fn demo_recording() -> &'static Recording {
    static RECORDING: OnceLock<Recording> = OnceLock::new();
    RECORDING.get_or_init(|| record_demo("demo", &[]))
}

/// The demo shop recorded as [`demo_recording`], with `--app`: its views show the application's
/// branches.
fn demo_app_recording() -> &'static Recording {
    static RECORDING: OnceLock<Recording> = OnceLock::new();
    RECORDING.get_or_init(|| record_demo("demo-app", &["--app"]))
}

/// `record` of the demo shop for 6 s into the folder `name` of the tests' folder, with its flame
/// graph and pprof file, and the options `extra`.
fn record_demo(name: &str, extra: &[&str]) -> Recording {
    let dir = work_dir().join(name);
    std::fs::create_dir_all(&dir).expect("the demo's folder");
    let recording = Recording {
        results: dir.join("results"),
        svg: dir.join("record.svg"),
        pprof: dir.join("record.pb.gz"),
        pid: 0,
    };
    let java = jdk(17).java();
    let classes = workload_classes();
    let mut args: Vec<String> = vec!["record".into()];
    args.extend(vm_source());
    for (option, value) in [
        ("--results-path", &recording.results),
        ("--flamegraph", &recording.svg),
        ("--pprof", &recording.pprof),
    ] {
        args.push(option.into());
        args.push(value.display().to_string());
    }
    args.extend(extra.iter().map(|arg| arg.to_string()));
    args.extend(
        [
            "--methods-filtering-prefix",
            "DemoShop",
            "--",
            &java.display().to_string(),
            "-cp",
            &classes.display().to_string(),
            "DemoShop",
            "6",
        ]
        .map(String::from),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = run(&mut profiler(&args));
    assert!(output.status.success(), "record failed");
    let pid = stdout(&output)
        .lines()
        .find_map(|line| line.strip_prefix("READY "))
        .and_then(|pid| pid.trim().parse().ok())
        .expect("DemoShop printed its pid");
    Recording { pid, ..recording }
}

/// Runs `node testkit/browser/SCRIPT ARGS` (playwright-core driving Debian's chromium) and returns
/// what it printed.
fn browser(script: &str, args: &[&std::ffi::OsStr]) -> Vec<u8> {
    assert!(
        repo_root()
            .join("testkit/browser/node_modules/playwright-core")
            .is_dir(),
        "playwright-core is missing: run scripts/setup.sh"
    );
    assert!(
        Path::new("/usr/bin/chromium").is_file(),
        "chromium is missing: run scripts/setup.sh"
    );
    let output = Command::new("node")
        .arg(repo_root().join("testkit/browser").join(script))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("node runs (scripts/setup.sh installs it)");
    assert!(
        output.status.success(),
        "{script} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

#[test]
fn an_output_path_that_is_a_link_is_refused_before_recording() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("precious");
    std::fs::write(&target, "keep").unwrap();
    let link = dir.path().join("flame.svg");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let output = run(&mut profiler(&[
        "record",
        "--all",
        "--flamegraph",
        &link.display().to_string(),
        "--results-path",
        &dir.path().join("results").display().to_string(),
    ]));
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--flamegraph") && stderr.contains("is a symbolic link"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    assert!(!dir.path().join("results").exists(), "nothing was recorded");
}

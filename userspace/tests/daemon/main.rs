//! End-to-end tests of `joularcode-bpf daemon` against real JVMs, with the `vm` power source
//! reading a constant 100 W from a file, scraped by a real Prometheus (Debian's package, from
//! scripts/setup.sh). They need root (the BPF sampler, cgroups) and fail loudly without it.
//!
//! The daemon profiles every JVM of the host; the tests run it with `--attach` (which gives each
//! the agent), but for those of its default, where nothing is loaded into the JVMs
//! (`agentless.rs`). It is not narrowed for the tests but in those of `--cgroup`. The tests run one at a
//! time (`SERIAL`). Each judges only its own JVMs (by pid, or by main class and container id):
//! run on a machine shared with other JVMs, a daemon without `--cgroup` profiles and attaches to
//! those too. The ten-minute churn soak (`churn.rs`) is built only with the `soak` feature and
//! run by bench/churn.sh.

mod agentless;
#[cfg(feature = "soak")]
mod churn;
mod endpoint;
mod entries;
mod failures;
mod names;
mod namespaces;
mod prometheus;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use joularcode_testkit::{agent_library, jdk, workload_classes, Jvm};

/// The tests measure energy: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    // SAFETY: geteuid only reads this process's user id.
    assert!(
        unsafe { libc::geteuid() } == 0,
        "the daemon tests load the BPF sampler: run them as root"
    );
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A cgroup made for a test (in the pids controller's hierarchy where cgroup v1 has one, else in
/// the unified one), removed when dropped.
struct TestCgroup {
    /// Its folder under /sys/fs/cgroup.
    dir: std::path::PathBuf,
    /// Its path as /proc/PID/cgroup shows it.
    path: String,
}

impl TestCgroup {
    /// The cgroup `v1` (below the pids hierarchy) or, on a host of cgroup v2 only, `v2`.
    fn new(v1: &str, v2: &str) -> TestCgroup {
        let v1_root = Path::new("/sys/fs/cgroup/pids");
        let (root, path) = if v1_root.is_dir() {
            (v1_root, v1)
        } else {
            (Path::new("/sys/fs/cgroup"), v2)
        };
        let dir = root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        TestCgroup {
            dir,
            path: path.to_string(),
        }
    }

    /// `command` run in this cgroup from its first instant: a shell joins it, then execs it.
    fn command(&self, command: &Command) -> Command {
        let mut inside = Command::new("sh");
        inside
            .args(["-c", "echo $$ > \"$0/cgroup.procs\" && exec \"$@\""])
            .arg(&self.dir)
            .arg(command.get_program())
            .args(command.get_args());
        inside
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The profiler under test: `JOULARCODE_BPF_BIN`, else this build's (the endpoint's tests
/// fail on a build from before its bounds).
fn binary() -> std::path::PathBuf {
    std::env::var_os("JOULARCODE_BPF_BIN").map_or_else(
        || env!("CARGO_BIN_EXE_joularcode-bpf").into(),
        std::path::PathBuf::from,
    )
}

/// A free TCP port of 127.0.0.1.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

/// GET `path` from 127.0.0.1:`port` with the extra `headers`: the status and the body.
fn get(port: u16, path: &str, headers: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n{headers}\r\n"
    )
    .expect("send");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .expect("read the answer");
    let (status, _, body) = parse_response(&response);
    (status, body.to_string())
}

/// An HTTP response's status (0 if it has none), head and body.
fn parse_response(response: &str) -> (u16, &str, &str) {
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((response, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head, body)
}

/// The daemon, stopped with SIGTERM when dropped; what it said is printed if the test fails.
struct Daemon {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Daemon {
    /// The daemon with `--attach` (this build's agent) and `args`.
    fn start(args: &[&str]) -> Daemon {
        let agent = agent_library().to_str().expect("a UTF-8 path");
        let with_agent = [&["--attach", "--agent-path", agent], args].concat();
        Daemon::launch(Command::new(binary()), &with_agent)
    }

    /// The daemon with its default options (nothing loaded into the JVMs) and `args`.
    fn agentless(args: &[&str]) -> Daemon {
        Daemon::launch(Command::new(binary()), args)
    }

    /// `daemon` run by `command` (the profiler, or a program that runs it) with `args`, the
    /// `vm` power source at 100 W and a port of its own.
    fn launch(mut command: Command, args: &[&str]) -> Daemon {
        let dir = tempfile::tempdir().expect("a temporary folder");
        std::fs::write(dir.path().join("watts"), "100\n").expect("the watts file");
        let port = free_port();
        let stderr = std::fs::File::create(dir.path().join("stderr")).expect("the daemon's stderr");
        let child = command
            .current_dir(dir.path())
            .arg("daemon")
            .args(["--power-source-type", "vm", "--vm-power-format", "watts"])
            .arg("--vm-power-file")
            .arg(dir.path().join("watts"))
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start joularcode-bpf daemon");
        let daemon = Daemon { child, port, dir };
        let start = Instant::now();
        while get_or_none(port).is_none() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the daemon's endpoint never answered"
            );
            sleep(Duration::from_millis(200));
        }
        daemon
    }

    /// The endpoint's classic text (what promtool reads).
    fn scrape(&self) -> String {
        let (status, body) = get(self.port, "/metrics", "");
        assert_eq!(status, 200, "{body}");
        body
    }

    /// The series of `name` in `text`: labels (as text) to value.
    fn series(text: &str, name: &str) -> BTreeMap<String, f64> {
        text.lines()
            .filter_map(|line| line.strip_prefix(name)?.strip_prefix('{'))
            .filter_map(|rest| {
                let (labels, value) = rest.rsplit_once("} ")?;
                Some((labels.to_string(), value.parse().ok()?))
            })
            .collect()
    }

    /// What the daemon wrote on stderr so far.
    fn said(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default()
    }

    /// The daemon's resident memory, in bytes: (VmRSS, RssAnon, RssFile, RssShmem), the heap
    /// apart from mapped files and shared memory (BPF maps).
    fn memory(&self) -> [u64; 4] {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the daemon runs");
        ["VmRSS:", "RssAnon:", "RssFile:", "RssShmem:"].map(|field| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(field))
                .and_then(|kb| kb.trim().trim_end_matches(" kB").parse::<u64>().ok())
                .unwrap_or_else(|| panic!("{field} in /proc/PID/status"))
                * 1024
        })
    }
}

fn get_or_none(port: u16) -> Option<()> {
    TcpStream::connect(("127.0.0.1", port)).ok().map(|_| ())
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SAFETY: kill sends a signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- the daemon's stderr (last 200 lines):");
            print_tail(&self.said(), 200);
        }
    }
}

/// Prints the last `n` lines of `text` on stderr.
fn print_tail(text: &str, n: usize) {
    let lines: Vec<&str> = text.lines().collect();
    for line in &lines[lines.len().saturating_sub(n)..] {
        eprintln!("{line}");
    }
}

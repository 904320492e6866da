//! End-to-end tests of `joularcode-bpf daemon` against real JVMs, with the `vm` power source
//! reading a constant 100 W from a file, scraped by a real Prometheus (Debian's package, from
//! scripts/setup.sh). They need root (the BPF sampler, cgroups) and fail loudly without it.
//!
//! The daemon profiles every JVM of the host, and attaches its agent to each: that is what is
//! tested, so it is not narrowed for the tests. Nothing else runs beside it in the suite: cargo
//! runs the test binaries one after another, and these tests one at a time (`SERIAL`). Run by
//! hand on a machine shared with other JVMs, their daemon attaches to those too.

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
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, body.to_string())
}

/// The daemon, stopped with SIGTERM when dropped; what it said is printed if the test fails.
struct Daemon {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Daemon {
    fn start(args: &[&str]) -> Daemon {
        let dir = tempfile::tempdir().expect("a temporary folder");
        std::fs::write(dir.path().join("watts"), "100\n").expect("the watts file");
        let port = free_port();
        let stderr = std::fs::File::create(dir.path().join("stderr")).expect("the daemon's stderr");
        let child = Command::new(env!("CARGO_BIN_EXE_joularcode-bpf"))
            .current_dir(dir.path())
            .arg("daemon")
            .args(["--power-source-type", "vm", "--vm-power-format", "watts"])
            .arg("--vm-power-file")
            .arg(dir.path().join("watts"))
            .arg("--agent-path")
            .arg(agent_library())
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

    fn rss_bytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the daemon runs");
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|kb| kb.trim().trim_end_matches(" kB").parse::<u64>().ok())
            .expect("VmRSS")
            * 1024
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

/// `promtool check metrics` on `text`: its complaints, empty when it accepts it.
fn promtool(text: &str) -> String {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool is missing: run scripts/setup.sh (Debian's prometheus package)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write to promtool");
    let output = child.wait_with_output().expect("promtool");
    let said = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    if output.status.success() {
        String::new()
    } else {
        said
    }
}

/// A Prometheus server scraping the daemon every second, stopped when dropped; if the test
/// fails, its log and the last answers to the test's queries are printed.
struct Prometheus {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
    answers: Mutex<Vec<String>>,
}

impl Prometheus {
    fn start(target_port: u16) -> Prometheus {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: joularcode\n    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
            ),
        )
        .expect("the scrape config");
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("log")).expect("Prometheus' log");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("prometheus is missing: run scripts/setup.sh (Debian's prometheus package)");
        let prometheus = Prometheus {
            child,
            port,
            dir,
            answers: Mutex::new(Vec::new()),
        };
        let start = Instant::now();
        while get_or_none(port).is_none() || get(port, "/-/ready", "").0 != 200 {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "Prometheus never got ready"
            );
            sleep(Duration::from_millis(300));
        }
        prometheus
    }

    /// The values of `query` from `start` to `end` (Unix seconds), one a second, per series.
    fn range(
        &self,
        query: &str,
        start: f64,
        end: f64,
    ) -> Vec<(serde_json::Value, Vec<(f64, f64)>)> {
        let path = format!(
            "/api/v1/query_range?query={}&start={start:.3}&end={end:.3}&step=1",
            encode(query)
        );
        let (status, body) = get(self.port, &path, "");
        {
            let mut answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
            answers.push(format!("{query} -> {status} {body}"));
            let excess = answers.len().saturating_sub(5);
            answers.drain(..excess);
        }
        assert_eq!(status, 200, "{query}: {body}");
        let answer: serde_json::Value = serde_json::from_str(&body).expect("JSON from Prometheus");
        answer["data"]["result"]
            .as_array()
            .expect("a result")
            .iter()
            .map(|series| {
                let values = series["values"]
                    .as_array()
                    .expect("values")
                    .iter()
                    .map(|pair| {
                        let at = pair[0].as_f64().expect("a time");
                        let value = pair[1]
                            .as_str()
                            .and_then(|v| v.parse().ok())
                            .expect("a value");
                        (at, value)
                    })
                    .collect();
                (series["metric"].clone(), values)
            })
            .collect()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- Prometheus' log (last 60 lines):");
            let log = std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default();
            print_tail(&log, 60);
            eprintln!("--- the last PromQL answers:");
            for answer in self
                .answers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
            {
                eprintln!("{}", joularcode_core::log::quote(answer, 4000));
            }
        }
    }
}

/// Percent-encodes a query for a URL.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64()
}

#[test]
fn prometheus_sees_three_jvms_start_run_and_end_and_a_crafted_name_breaks_no_scrape() {
    let _serial = serial();
    let jdk = jdk(17);
    let daemon = Daemon::start(&[]);
    let prometheus = Prometheus::start(daemon.port);
    let t0 = now_s();
    // Three JVMs, one after the other, overlapping: 12 s each, started 6 s apart; the third runs
    // a class and method whose names are crafted to break the exposition format.
    let mut jvms: Vec<(Jvm, f64)> = Vec::new();
    let mut promtool_said = Vec::new();
    for (i, (main, args)) in [
        ("RecordBusy", &["1", "12"][..]),
        ("RecordBusy", &["1", "12"][..]),
        ("DaemonGenerated", &["crafted", "12"][..]),
    ]
    .into_iter()
    .enumerate()
    {
        if i > 0 {
            sleep(Duration::from_secs(6));
        }
        // The crafted JVM runs interpreted, so that its samples' newest frame is the crafted
        // method: compiled, reflection's generated accessor inlines it, and its loop is named
        // after the next inlined call (Integer.valueOf, seen). The code map carries such names
        // (the agent's format::tests::a_name_from_the_jvm_never_breaks_a_line).
        let options: &[&str] = if main == "DaemonGenerated" {
            &["-Xint"]
        } else {
            &["-XX:+PreserveFramePointer"]
        };
        jvms.push((Jvm::start(&jdk, options, main, args), now_s()));
        promtool_said.push(promtool(&daemon.scrape()));
    }
    let mut ends = Vec::new();
    for (jvm, started) in &mut jvms {
        let _ = jvm.child.wait();
        ends.push((jvm.pid(), *started, now_s()));
        promtool_said.push(promtool(&daemon.scrape()));
    }
    sleep(Duration::from_secs(8));
    let text = daemon.scrape();
    promtool_said.push(promtool(&text));
    let t1 = now_s();
    assert!(t1 - t0 >= 30.0, "Prometheus scraped for {:.0} s", t1 - t0);
    for said in &promtool_said {
        assert!(said.is_empty(), "promtool check metrics: {said}");
    }

    // Every scrape worked (the OpenMetrics answer Prometheus asks for, crafted names included).
    for (_, values) in prometheus.range("up{job=\"joularcode\"}", t0 + 2.0, t1) {
        assert!(
            values.iter().all(|&(_, up)| up == 1.0),
            "a scrape failed: {values:?}"
        );
    }
    // Each JVM's energy rises while it runs, and is frozen once it ended.
    for &(pid, started, ended) in &ends {
        let query = format!("joularcode_jvm_energy_joules_total{{pid=\"{pid}\"}}");
        let series = prometheus.range(&query, t0, t1);
        assert_eq!(series.len(), 1, "{query}: {series:?}");
        let values = &series[0].1;
        let at = |time: f64| {
            values
                .iter()
                .rev()
                .find(|(t, _)| *t <= time)
                .map_or(0.0, |(_, v)| *v)
        };
        let early = at(started + 3.0);
        let late = at(ended - 1.0);
        // 12 s of one busy thread at 100 W on 2 CPUs: well above 100 J; at least 50 J in 8 s.
        assert!(
            late - early > 50.0,
            "JVM {pid}: {early} J at +3 s, {late} J before its end"
        );
        let after: Vec<f64> = values
            .iter()
            .filter(|(t, _)| *t >= ended + 3.0)
            .map(|(_, v)| *v)
            .collect();
        assert!(
            after.len() >= 3,
            "JVM {pid}: its series went too early: {values:?}"
        );
        assert!(
            after.windows(2).all(|w| w[0] == w[1]),
            "JVM {pid} after its end: {after:?}"
        );
    }
    // The JVMs' energy never exceeds the source's.
    let excess = prometheus.range(
        "sum(joularcode_jvm_energy_joules_total) - on() sum(joularcode_source_energy_joules_total)",
        t0 + 2.0,
        t1,
    );
    for (_, values) in excess {
        assert!(
            values.iter().all(|&(_, excess)| excess <= 1e-6),
            "{values:?}"
        );
    }
    // The crafted names are there, cut and escaped.
    let crafted = ends[2].0;
    let methods = Daemon::series(&text, "joularcode_method_energy_joules_total");
    let line = methods
        .keys()
        .find(|labels| {
            labels.contains(&format!("pid=\"{crafted}\""))
                && labels.contains("method=\"Crafted\\\"quote\\\\back")
        })
        .unwrap_or_else(|| panic!("no crafted method in {methods:?}"));
    let method = line.split("method=\"").nth(1).expect("a method label");
    assert!(method.len() <= 1100, "a label of {} bytes", method.len());
    assert!(
        !text.lines().any(|line| line.len() > 8000),
        "a line longer than the labels allow"
    );
}

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

/// 200 short JVMs over ten minutes, one every 3 s, beside one long JVM with ever new classes
/// and stacks: the daemon's memory after the first minute stays within 10%, and every short JVM
/// is seen.
#[test]
fn churn_for_ten_minutes_keeps_memory_bounded_and_misses_no_jvm() {
    let _serial = serial();
    let jdk = jdk(17);
    let daemon = Daemon::start(&[
        "--max-branches",
        "2000",
        "--branch-idle",
        "60",
        "--keep-ended",
        "30",
    ]);
    let _long = Jvm::start(
        &jdk,
        &["-XX:+PreserveFramePointer"],
        "DaemonGenerated",
        &["many", "660"],
    );
    let start = Instant::now();
    // When each short JVM mapped libjvm.so (seconds from the start), looked at every 100 ms: a
    // JVM missed is told apart from one that was slow to become one.
    let watched: std::sync::Arc<Mutex<Vec<u32>>> = Default::default();
    let mapped: std::sync::Arc<Mutex<BTreeMap<u32, f64>>> = Default::default();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (watched, mapped, done) = (watched.clone(), mapped.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let pids = watched.lock().unwrap_or_else(|p| p.into_inner()).clone();
                for pid in pids {
                    if mapped
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .contains_key(&pid)
                    {
                        continue;
                    }
                    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"));
                    if maps.is_ok_and(|maps| maps.contains("/libjvm.so")) {
                        let at = start.elapsed().as_secs_f64();
                        mapped
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(pid, at);
                    }
                }
                sleep(Duration::from_millis(100));
            }
        })
    };
    // Each short JVM: its pid, when it was started and when it was seen to end (seconds from
    // the start), and how it ended.
    let mut started: Vec<(u32, f64)> = Vec::new();
    let mut ended: BTreeMap<u32, (f64, String)> = BTreeMap::new();
    let mut running: Vec<Child> = Vec::new();
    let mut seen: BTreeMap<u32, f64> = BTreeMap::new();
    let mut rss = Vec::new();
    let look = |text: &str, at: f64, seen: &mut BTreeMap<u32, f64>| {
        for labels in Daemon::series(text, "joularcode_jvm_energy_joules_total").keys() {
            if let Some(pid) = labels
                .split("pid=\"")
                .nth(1)
                .and_then(|p| p.split('"').next())
                .and_then(|p| p.parse::<u32>().ok())
            {
                seen.entry(pid).or_insert(at);
            }
        }
    };
    let reap = |running: &mut Vec<Child>, ended: &mut BTreeMap<u32, (f64, String)>| {
        let at = start.elapsed().as_secs_f64();
        running.retain_mut(|child| match child.try_wait() {
            Ok(Some(status)) => {
                ended.insert(child.id(), (at, status.to_string()));
                false
            }
            _ => true,
        });
    };
    for i in 0..200u32 {
        let child = Command::new(jdk.java())
            .args(["-XX:+PreserveFramePointer", "-Xshare:auto", "-cp"])
            .arg(workload_classes())
            .args(["RecordBusy", "1", "2"])
            .stdout(Stdio::null())
            .spawn()
            .expect("a short JVM");
        started.push((child.id(), start.elapsed().as_secs_f64()));
        watched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(child.id());
        running.push(child);
        reap(&mut running, &mut ended);
        look(&daemon.scrape(), start.elapsed().as_secs_f64(), &mut seen);
        if start.elapsed() >= Duration::from_secs(60) {
            rss.push(daemon.rss_bytes());
        }
        let next = Duration::from_secs(3) * (i + 1);
        sleep(next.saturating_sub(start.elapsed()));
    }
    while !running.is_empty() {
        sleep(Duration::from_millis(100));
        reap(&mut running, &mut ended);
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = watcher.join();
    let mapped = mapped.lock().unwrap_or_else(|p| p.into_inner()).clone();
    sleep(Duration::from_secs(4));
    look(&daemon.scrape(), start.elapsed().as_secs_f64(), &mut seen);
    let missed: Vec<String> = started
        .iter()
        .filter(|(pid, _)| !seen.contains_key(pid))
        .map(|(pid, at)| {
            let (end, status) = ended.get(pid).cloned().unwrap_or((f64::NAN, "?".into()));
            let said: Vec<String> = daemon
                .said()
                .lines()
                .filter(|line| {
                    line.contains(&format!("JVM {pid} ")) || line.contains(&format!("JVM {pid}:"))
                })
                .map(str::to_owned)
                .collect();
            let libjvm = mapped
                .get(pid)
                .map_or("never seen".to_string(), |t| format!("at {t:.1} s"));
            format!(
                "pid {pid} started at {at:.1} s, mapped libjvm.so {libjvm}, ended by {end:.1} s \
                 ({status}); the daemon said of it: {said:?}"
            )
        })
        .collect();
    let delays: Vec<f64> = started
        .iter()
        .filter_map(|(pid, at)| Some(seen.get(pid)? - at))
        .collect();
    eprintln!(
        "short JVMs seen on the endpoint at most {:.1} s after their start",
        delays.iter().copied().fold(0.0, f64::max)
    );
    let first = rss[0] as f64;
    let (low, high) = (
        *rss.iter().min().expect("samples") as f64,
        *rss.iter().max().expect("samples") as f64,
    );
    eprintln!("daemon RSS after the first minute: {first} at 60 s, {low} to {high} bytes");
    assert!(
        missed.is_empty(),
        "{} of 200 JVMs missed:\n{}",
        missed.len(),
        missed.join("\n")
    );
    assert!(
        high <= first * 1.1 && low >= first * 0.9,
        "RSS {first} at 60 s, then {low} to {high}"
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

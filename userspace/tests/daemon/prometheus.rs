//! A real Prometheus scrapes the daemon while three JVMs start, run and end; a crafted class
//! name breaks no scrape.

use super::*;

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

/// In ten runs here, each JVM gained 354 to 808 J from +3 s to 1 s before its end: at least 304 J
/// above the 50 J required.
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
    assert!(t1 - t0 >= 32.0, "Prometheus scraped for {:.0} s", t1 - t0);
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
        eprintln!(
            "JVM {pid}: {:.1} J from +3 s to 1 s before its end",
            late - early
        );
        // One busy thread at 100 W on 2 CPUs: about 400 J from +3 s to 1 s before its end; at
        // least 50 J.
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

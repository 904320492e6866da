//! The endpoint under attack (issue 19, cases 1 to 4; docs/security.md, rule 15): each test
//! starts the real daemon on 127.0.0.1, attacks its endpoint as any pod or local user could,
//! while a normal client scrapes it every 100 ms on a new connection, and checks that every
//! scrape answered within 1 s, that the daemon's open files, threads and resident memory stayed
//! within the bounds said at each test, and that it is alive and listening afterwards. The daemon
//! watches a cgroup that holds no JVM and attaches no agent: only its endpoint is at stake.
//! Also: TLS and basic authentication with a web configuration file, and `/healthz`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::*;

/// The daemon's options in these tests: no JVM (an empty cgroup); by default, no agent.
const QUIET: [&str; 2] = ["--cgroup", "/joularcode-endpoint-test"];
/// The most connections the daemon keeps open (`server::MAX_CONNECTIONS`).
const MAX_CONNECTIONS: usize = 256;
/// How long a client may take to send a request head (`server::HEAD_TIMEOUT`).
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a scrape may take.
const DEADLINE: Duration = Duration::from_secs(1);

/// What procfs says of the daemon.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Usage {
    fds: usize,
    threads: usize,
    rss_mib: f64,
}

fn usage(pid: u32) -> Usage {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| -> f64 {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
            .unwrap_or(0.0)
    };
    Usage {
        fds: std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count()),
        threads: field("Threads:") as usize,
        rss_mib: field("VmRSS:") / 1024.0,
    }
}

/// One scrape of `/metrics` on a new connection: how long it took, or what went wrong.
fn scrape_once(port: u16) -> Result<Duration, String> {
    let start = Instant::now();
    let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&address, DEADLINE).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(DEADLINE))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .map_err(|e| format!("{e} after {:?}", start.elapsed()))?;
    let elapsed = start.elapsed();
    if !response.starts_with(b"HTTP/1.1 200") || !contains(&response, b"joularcode_cycles_total") {
        return Err(format!(
            "not the metrics: {:?}",
            String::from_utf8_lossy(&response[..response.len().min(200)])
        ));
    }
    if elapsed > DEADLINE {
        return Err(format!("answered in {elapsed:?}"));
    }
    Ok(elapsed)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The fewest scrapes a watch makes: it ends only once it has made them.
const MIN_SCRAPES: usize = 10;

/// A normal client scraping every 100 ms while an attack runs, and the daemon's most files,
/// threads and memory meanwhile.
struct Watch {
    stop: Arc<AtomicBool>,
    scrapes: Arc<AtomicUsize>,
    handle: JoinHandle<(Vec<String>, Duration, Usage)>,
}

impl Watch {
    fn start(daemon: &Daemon) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let scrapes = Arc::new(AtomicUsize::new(0));
        let (port, pid) = (daemon.port, daemon.child.id());
        let (stopped, made) = (stop.clone(), scrapes.clone());
        let handle = std::thread::spawn(move || {
            let (mut failures, mut slowest) = (Vec::new(), Duration::ZERO);
            let mut most = usage(pid);
            while !stopped.load(Ordering::Relaxed) {
                match scrape_once(port) {
                    Ok(took) => slowest = slowest.max(took),
                    Err(e) => failures.push(e),
                }
                made.fetch_add(1, Ordering::Relaxed);
                let now = usage(pid);
                most = Usage {
                    fds: most.fds.max(now.fds),
                    threads: most.threads.max(now.threads),
                    rss_mib: most.rss_mib.max(now.rss_mib),
                };
                sleep(Duration::from_millis(100));
            }
            (failures, slowest, most)
        });
        Watch {
            stop,
            scrapes,
            handle,
        }
    }

    /// Ends the watch, once it has made [`MIN_SCRAPES`] scrapes (a minute at most): every scrape
    /// must have answered within [`DEADLINE`]; the most files, threads and memory seen. Prints
    /// the slowest scrape and the most used.
    fn end(self) -> Usage {
        let start = Instant::now();
        while self.scrapes.load(Ordering::Relaxed) < MIN_SCRAPES
            && start.elapsed() < Duration::from_secs(60)
        {
            sleep(Duration::from_millis(50));
        }
        self.stop.store(true, Ordering::Relaxed);
        let (failures, slowest, most) = self.handle.join().expect("the scraper");
        let scrapes = self.scrapes.load(Ordering::Relaxed);
        eprintln!("{scrapes} scrapes, the slowest answered in {slowest:?}; at most {most:?}");
        assert!(scrapes >= MIN_SCRAPES, "only {scrapes} scrapes");
        assert!(
            failures.is_empty(),
            "{} of {scrapes} scrapes failed or took over {DEADLINE:?}: {:?}",
            failures.len(),
            &failures[..failures.len().min(5)]
        );
        most
    }
}

/// The daemon, with no JVM, after it has settled: it and what it uses.
fn quiet_daemon() -> (Daemon, Usage) {
    let daemon = Daemon::agentless(&QUIET);
    sleep(Duration::from_secs(2));
    scrape_once(daemon.port).expect("a first scrape");
    let base = usage(daemon.child.id());
    eprintln!("settled: {base:?}");
    (daemon, base)
}

/// The daemon is alive and answers a scrape.
fn assert_alive_and_listening(daemon: &mut Daemon) {
    assert!(
        daemon.child.try_wait().expect("wait").is_none(),
        "the daemon ended: {}",
        daemon.said()
    );
    scrape_once(daemon.port).expect("a scrape after the attack");
}

/// The daemon's limit of open files, as systemd gives a service by default (1024).
fn limit_open_files(pid: u32, limit: u64) {
    let rlimit = libc::rlimit {
        rlim_cur: limit,
        rlim_max: limit,
    };
    // SAFETY: prlimit sets a limit of our own child; the pointers are to a live value and null.
    let set = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_NOFILE,
            &rlimit,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(set, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// Whether a read shows that the other end closed the connection (not that it timed out).
fn ended(read: std::io::Result<usize>) -> bool {
    use std::io::ErrorKind;
    !matches!(read, Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut))
}

/// Case 1: `GET /metrics` with `Content-Length: 99999999999` and two body bytes, again and
/// again: no allocation of the declared size, no abort.
///
/// In ten runs here, the slowest scrape took 1.0 ms at most (1 s allowed), the daemon grew by
/// 0.02 MiB, 1 file and 0 threads at most (16 MiB, 8 and 1 allowed).
#[test]
fn a_request_declaring_a_huge_body_aborts_nothing_and_allocates_nothing() {
    let _serial = serial();
    let (mut daemon, base) = quiet_daemon();
    let watch = Watch::start(&daemon);
    for _ in 0..30 {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", daemon.port)) else {
            continue;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let _ = stream.write_all(
            b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 99999999999\r\n\r\nab",
        );
        let mut answer = [0; 12];
        let _ = stream.read(&mut answer);
        sleep(Duration::from_millis(50));
    }
    let most = watch.end();
    // Bounds: what the daemon used when it settled, plus 16 MiB of memory, 8 files, 1 thread.
    assert!(most.rss_mib < base.rss_mib + 16.0, "{base:?} -> {most:?}");
    assert!(most.fds <= base.fds + 8, "{base:?} -> {most:?}");
    assert!(most.threads <= base.threads + 1, "{base:?} -> {most:?}");
    assert_alive_and_listening(&mut daemon);
}

/// Case 2: clients that pipeline requests and never read the answers, and clients that declare
/// a body and hold it back, delay no other client's scrape.
///
/// In ten runs here, the slowest scrape took 80.1 ms at most (1 s allowed), the daemon grew by
/// 0.18 MiB, 4 files and 0 threads at most (32 MiB, 16 and 1 allowed).
#[test]
fn clients_that_never_read_or_hold_their_body_back_delay_no_scrape() {
    let _serial = serial();
    let (mut daemon, base) = quiet_daemon();
    let stop = Arc::new(AtomicBool::new(false));
    let mut attackers = Vec::new();
    for _ in 0..4 {
        let (port, stop) = (daemon.port, stop.clone());
        attackers.push(std::thread::spawn(move || {
            let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            stream
                .set_write_timeout(Some(Duration::from_millis(200)))
                .expect("timeout");
            while !stop.load(Ordering::Relaxed) {
                let _ = stream
                    .write_all(&b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".repeat(64));
            }
        }));
    }
    let mut holders = Vec::new();
    for _ in 0..8 {
        let mut stream = TcpStream::connect(("127.0.0.1", daemon.port)).expect("connect");
        stream
            .write_all(
                b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n0123456789",
            )
            .expect("send");
        holders.push(stream);
    }
    let watch = Watch::start(&daemon);
    sleep(Duration::from_secs(4));
    let most = watch.end();
    stop.store(true, Ordering::Relaxed);
    for attacker in attackers {
        attacker.join().expect("an attacker");
    }
    drop(holders);
    // Bounds: plus 32 MiB (the answers queued to clients that do not read them share one
    // encoding), 16 files, 1 thread.
    assert!(most.rss_mib < base.rss_mib + 32.0, "{base:?} -> {most:?}");
    assert!(most.fds <= base.fds + 16, "{base:?} -> {most:?}");
    assert!(most.threads <= base.threads + 1, "{base:?} -> {most:?}");
    assert_alive_and_listening(&mut daemon);
}

/// Case 3: under systemd's default limit of 1024 open files, 600 idle connections (more than the
/// daemon keeps) neither end the listener nor keep a scraper out: the quietest are closed for
/// the new ones; and a client that does not finish its request head is closed after
/// [`HEAD_TIMEOUT`].
///
/// In ten runs here, the slowest scrape took 22.6 ms at most (1 s allowed), the daemon held at most
/// 257 files more than settled (272 allowed: 15 to spare), 0 threads and 4.0 MiB more (1 and 16
/// allowed); how many idle connections it closed and how long it held the half-sent head are not
/// known from these runs (printed from now on).
#[test]
fn idle_connections_neither_end_the_listener_nor_keep_a_scraper_out() {
    let _serial = serial();
    let (mut daemon, base) = quiet_daemon();
    limit_open_files(daemon.child.id(), 1024);
    let started = Instant::now();
    let mut partial = TcpStream::connect(("127.0.0.1", daemon.port)).expect("connect");
    partial
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.")
        .expect("send");
    partial
        .set_read_timeout(Some(HEAD_TIMEOUT + Duration::from_secs(5)))
        .expect("timeout");
    let watch = Watch::start(&daemon);
    let mut idle = Vec::new();
    for _ in 0..600 {
        match TcpStream::connect(("127.0.0.1", daemon.port)) {
            Ok(stream) => idle.push(stream),
            Err(e) => panic!("connection {} refused: {e}", idle.len()),
        }
    }
    sleep(Duration::from_secs(3));
    let most = watch.end();
    // The daemon closed the quietest connections for the new ones: a read sees their end.
    let closed = idle
        .iter_mut()
        .map(|stream| {
            stream
                .set_read_timeout(Some(Duration::from_millis(10)))
                .is_ok()
                && ended(stream.read(&mut [0; 1]))
        })
        .filter(|&closed| closed)
        .count();
    eprintln!("{closed} of 600 idle connections closed");
    drop(idle);
    // Bounds: the connections kept, plus 16 files; 1 thread; 16 MiB.
    assert!(
        most.fds <= base.fds + MAX_CONNECTIONS + 16,
        "{base:?} -> {most:?}"
    );
    assert!(most.threads <= base.threads + 1, "{base:?} -> {most:?}");
    assert!(most.rss_mib < base.rss_mib + 16.0, "{base:?} -> {most:?}");
    assert!(closed >= 600 - MAX_CONNECTIONS, "{closed} closed of 600");
    let read = partial.read(&mut [0; 1024]);
    let held = started.elapsed();
    eprintln!("a half-sent head ended after {held:?}");
    assert!(
        ended(read) && held < HEAD_TIMEOUT + Duration::from_secs(4),
        "a half-sent head was held {held:?}"
    );
    assert_alive_and_listening(&mut daemon);
}

/// Case 4: a request head of 64 MiB is refused after 16 KiB without growing the daemon.
///
/// In ten runs here, the slowest scrape took 1.3 ms at most (1 s allowed), the daemon grew by
/// 0.02 MiB, 0 files and 0 threads at most (16 MiB, 8 and 1 allowed). How much of the head it
/// read is not known from these runs (printed from now on).
#[test]
fn a_huge_request_head_is_refused_without_growing_the_daemon() {
    let _serial = serial();
    let (mut daemon, base) = quiet_daemon();
    let watch = Watch::start(&daemon);
    let mut stream = TcpStream::connect(("127.0.0.1", daemon.port)).expect("connect");
    stream
        .set_write_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
        .expect("send");
    let chunk = vec![b'a'; 64 * 1024];
    let mut sent = 0;
    while sent < 64 << 20 && stream.write_all(&chunk).is_ok() {
        sent += chunk.len();
    }
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    sleep(Duration::from_secs(1));
    let most = watch.end();
    eprintln!(
        "sent {} KiB of the head before the daemon stopped reading",
        sent >> 10
    );
    assert!(
        sent < 64 << 20,
        "the daemon read a head of 64 MiB (answer: {:?})",
        String::from_utf8_lossy(&answer[..answer.len().min(100)])
    );
    // Bounds: plus 16 MiB, 8 files, 1 thread.
    assert!(most.rss_mib < base.rss_mib + 16.0, "{base:?} -> {most:?}");
    assert!(most.fds <= base.fds + 8, "{base:?} -> {most:?}");
    assert!(most.threads <= base.threads + 1, "{base:?} -> {most:?}");
    assert_alive_and_listening(&mut daemon);
}

#[test]
fn healthz_answers_ok() {
    let _serial = serial();
    let daemon = Daemon::agentless(&QUIET);
    assert_eq!(get(daemon.port, "/healthz", ""), (200, "ok\n".to_string()));
}

/// A TLS client of 127.0.0.1:`port` that trusts `cert` only: the status and the body of GET
/// `path` with the extra `headers`.
fn get_tls(port: u16, cert: &rcgen::Certificate, path: &str, headers: &str) -> (u16, String) {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone()).expect("the certificate");
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("a name");
    let connection =
        rustls::ClientConnection::new(Arc::new(config), name).expect("a TLS connection");
    let tcp = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{headers}\r\n"
    )
    .expect("send");
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response).to_string();
    let (status, head, body) = parse_response(&response);
    let head = head.to_ascii_lowercase();
    let body = if head.contains("www-authenticate: basic") {
        format!("[asks for a password] {body}")
    } else {
        body.to_string()
    };
    (status, body)
}

fn basic(user: &str, password: &str) -> String {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Authorization: Basic {encoded}\r\n")
}

#[test]
fn with_a_web_configuration_the_endpoint_speaks_tls_and_asks_for_a_password() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("a folder");
    let key =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).expect("a certificate");
    std::fs::write(dir.path().join("tls.crt"), key.cert.pem()).expect("write");
    std::fs::write(dir.path().join("tls.key"), key.signing_key.serialize_pem()).expect("write");
    let hash = bcrypt::hash("correct horse", 10).expect("bcrypt");
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        format!(
            "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\nbasic_auth_users:\n  prometheus: {hash}\n"
        ),
    )
    .expect("write");
    let web = web.to_str().expect("a UTF-8 path");
    let daemon = Daemon::agentless(&[&QUIET[..], &["--web-config-file", web]].concat());
    let port = daemon.port;
    let (status, body) = get_tls(port, &key.cert, "/metrics", "");
    assert_eq!(status, 401, "{body}");
    assert!(body.starts_with("[asks for a password]"), "{body}");
    let (status, _) = get_tls(port, &key.cert, "/metrics", &basic("prometheus", "wrong"));
    assert_eq!(status, 401);
    let (status, _) = get_tls(
        port,
        &key.cert,
        "/metrics",
        &basic("nobody", "correct horse"),
    );
    assert_eq!(status, 401);
    for _ in 0..2 {
        let (status, body) = get_tls(
            port,
            &key.cert,
            "/metrics",
            &basic("prometheus", "correct horse"),
        );
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("joularcode_cycles_total"), "{body}");
    }
    // Probes need no password.
    assert_eq!(
        get_tls(port, &key.cert, "/healthz", ""),
        (200, "ok\n".to_string())
    );
    // Plain HTTP on the TLS port gets no metrics.
    let mut plain = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    plain
        .write_all(b"GET /metrics HTTP/1.0\r\n\r\n")
        .expect("send");
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer);
    assert!(!contains(&answer, b"joularcode_cycles_total"));
}

#[test]
fn a_wrong_web_configuration_is_one_error_line_before_anything_listens() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("a folder");
    let cases: BTreeMap<&str, &str> = BTreeMap::from([
        (
            "basic_auth_users:\n  alice: plain\n",
            "is not a bcrypt hash",
        ),
        (
            "tls_server_config:\n  cert_file: none.crt\n  key_file: none.key\n",
            "cannot read",
        ),
        (
            "tls_server_config:\n  client_auth_type: x\n",
            "unknown field",
        ),
    ]);
    for (text, said) in cases {
        let web = dir.path().join("web.yml");
        std::fs::write(&web, text).expect("write");
        let port = free_port();
        let output = Command::new(binary())
            .args(["daemon", "--listen", &format!("127.0.0.1:{port}")])
            .arg("--web-config-file")
            .arg(&web)
            .args(QUIET)
            .output()
            .expect("run the daemon");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{text}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{text}: {stderr}");
        assert!(stderr.contains(said), "{text}: {stderr}");
    }
}

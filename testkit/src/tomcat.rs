//! Debian's Tomcat 10 (`tomcat10`, from scripts/test-setup.sh) serving `testkit/tomcat`: two
//! servlets of the webapp `energy`, `/energy/heavy` doing three times the rounds of the same loop
//! as `/energy/light` per request, and `wrk` sending them requests in turn (`alternate.lua`), so
//! that their CPU time is 3:1 by construction.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{jdk, repo_root};

/// Where Debian installs Tomcat 10 (`CATALINA_HOME`).
const HOME: &str = "/usr/share/tomcat10";
/// Debian's configuration, copied into each server's own base.
const CONF: &str = "/etc/tomcat10";
/// The servlets' classes (`methods-filtering-prefix`).
pub const PREFIX: &str = "energy.";
/// The heavy servlet's entry point.
pub const HEAVY: &str = "energy.HeavyServlet.doGet";
/// The light servlet's entry point.
pub const LIGHT: &str = "energy.LightServlet.doGet";
/// [`HEAVY`]'s share of the two servlets' CPU time.
pub const HEAVY_SHARE: f64 = 0.75;
/// Keeps the servlets out of the compiled code of Tomcat's `HttpServlet.service`, as an
/// application's are (it sees many servlets, each too large to inline): inlined there, C2's debug
/// information names their loop's samples after `HttpServlet.service`, for JFR as for us.
const JVM_ARGS: &[&str] = &[
    "-XX:CompileCommand=quiet",
    "-XX:CompileCommand=dontinline,energy.*::*",
];

/// A Tomcat of its own (its base in a temporary folder, its port free), killed when dropped.
pub struct Tomcat {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    base: tempfile::TempDir,
}

impl Tomcat {
    /// Starts Tomcat with Java 17 and the webapp, and waits until both servlets answer.
    pub fn start() -> Tomcat {
        Tomcat::start_with(|command| command)
    }

    /// [`Tomcat::start`] with the command `wrap` makes of Tomcat's (in a cgroup, say).
    pub fn start_with(wrap: impl FnOnce(Command) -> Command) -> Tomcat {
        assert!(
            Path::new(HOME).join("bin/bootstrap.jar").is_file(),
            "no Tomcat at {HOME}: run scripts/test-setup.sh (apt-get install tomcat10)"
        );
        let base = tempfile::tempdir().expect("a temporary folder");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        for folder in [
            "conf",
            "logs",
            "temp",
            "work",
            "webapps/energy/WEB-INF/classes",
        ] {
            std::fs::create_dir_all(base.path().join(folder)).expect("the base's folders");
        }
        for file in [
            "catalina.properties",
            "context.xml",
            "web.xml",
            "logging.properties",
        ] {
            std::fs::copy(
                Path::new(CONF).join(file),
                base.path().join("conf").join(file),
            )
            .unwrap_or_else(|e| panic!("cannot copy {CONF}/{file}: {e}"));
        }
        std::fs::write(
            base.path().join("conf/server.xml"),
            format!(
                "<Server port=\"-1\" shutdown=\"SHUTDOWN\"><Service name=\"Catalina\">\
                 <Connector port=\"{port}\" address=\"127.0.0.1\" protocol=\"HTTP/1.1\"/>\
                 <Engine name=\"Catalina\" defaultHost=\"localhost\">\
                 <Host name=\"localhost\" appBase=\"webapps\" autoDeploy=\"false\"/>\
                 </Engine></Service></Server>"
            ),
        )
        .expect("server.xml");
        let webapp = base.path().join("webapps/energy/WEB-INF");
        std::fs::copy(sources().join("web.xml"), webapp.join("web.xml")).expect("web.xml");
        compile(&webapp.join("classes"));
        let mut java = Command::new(jdk(17).java());
        java.args(JVM_ARGS)
            .arg(format!("-Dcatalina.home={HOME}"))
            .arg(format!("-Dcatalina.base={}", base.path().display()))
            .arg(format!(
                "-Djava.io.tmpdir={}",
                base.path().join("temp").display()
            ))
            .arg("-cp")
            .arg(format!(
                "{HOME}/bin/bootstrap.jar:{HOME}/bin/tomcat-juli.jar"
            ))
            .args(["org.apache.catalina.startup.Bootstrap", "start"]);
        let child = wrap(java)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(
                std::fs::File::create(base.path().join("logs/stderr"))
                    .expect("Tomcat's stderr file"),
            )
            .spawn()
            .expect("start Tomcat");
        let tomcat = Tomcat { child, port, base };
        let start = Instant::now();
        while !["/energy/heavy", "/energy/light"]
            .iter()
            .all(|path| tomcat.get(path).starts_with("HTTP/1.1 200"))
        {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "Tomcat did not serve the servlets within 60 s: {}",
                tomcat.said()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        tomcat
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The answer to GET `path`, or "" when there is none yet.
    fn get(&self, path: &str) -> String {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return String::new();
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let _ = write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        );
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer
    }

    /// What Tomcat wrote on its standard error.
    pub fn said(&self) -> String {
        std::fs::read_to_string(self.base.path().join("logs/stderr")).unwrap_or_default()
    }

    /// `clients` runs of `wrk`, each on one connection sending the two servlets requests in
    /// turn for `seconds` (one connection each: `wrk`'s script alternates per thread, and a
    /// thread's connections would each keep to one servlet), killed when dropped.
    pub fn load(&self, clients: u32, seconds: u32) -> Load {
        let start = || {
            Command::new("wrk")
                .args(["-t", "1", "-c", "1", "-d", &format!("{seconds}s"), "-s"])
                .arg(sources().join("alternate.lua"))
                .arg(format!("http://127.0.0.1:{}/", self.port))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .expect("wrk runs (scripts/test-setup.sh installs it)")
        };
        Load((0..clients).map(|_| start()).collect())
    }
}

impl Drop for Tomcat {
    fn drop(&mut self) {
        crate::kill_jvm(&mut self.child);
    }
}

/// Runs of `wrk`, killed when dropped.
pub struct Load(Vec<Child>);

impl Drop for Load {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `testkit/tomcat`.
fn sources() -> PathBuf {
    repo_root().join("testkit/tomcat")
}

/// Compiles the servlets into `classes`, against Tomcat's servlet API.
fn compile(classes: &Path) {
    let javac = jdk(17).home.join("bin/javac");
    let package = sources().join("energy");
    let files: Vec<PathBuf> = std::fs::read_dir(&package)
        .expect("testkit/tomcat/energy")
        .map(|entry| entry.expect("an entry").path())
        .collect();
    let status = Command::new(&javac)
        .args(["--release", "17", "-cp"])
        .arg(format!("{HOME}/lib/servlet-api.jar"))
        .arg("-d")
        .arg(classes)
        .args(&files)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", javac.display()));
    assert!(status.success(), "javac failed on testkit/tomcat");
}

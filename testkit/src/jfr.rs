//! JFR, the JVM's own sampler, as an oracle for stacks: the same run is recorded by JFR
//! (`jdk.ExecutionSample`) and profiled by joularcode-bpf, and the two must agree on which
//! branches burned the CPU.
//!
//! ```no_run
//! use joularcode_testkit::{jdk, jfr::{Recording, SamplePeriod}};
//!
//! let jdk = jdk(21);
//! let recording = Recording::new("/tmp/run.jfr");
//! let option = recording.jvm_option(SamplePeriod::Ms10); // for the JVM's command line
//! // ... run `java <option> ...` and let it end ...
//! let profile = recording.read(&jdk);
//! let shares = profile.shares(); // branch -> share of the samples
//! ```
//!
//! Frames are named exactly as Joular (and joularcode-bpf) names them: `package.Class.method`,
//! oldest first, joined by `;`, hidden classes as Java's `getClass().getName()` gives them
//! (`a.B$$Lambda/0x...`). JFR writes hidden classes in forms of its own (`a/B$$Lambda+0x.../<id>`
//! on Java 17 and 21, `a.B$$Lambda/0x...` on Java 25): [`class_name`] turns each into Java's.
//!
//! JFR samples a thread only while it runs Java code (not in native code nor in the JVM), and
//! samples threads that are runnable but waiting for a CPU as well: compare shares of the Java
//! branches of threads that keep a CPU busy.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use crate::Jdk;

/// How often JFR samples each thread in Java code: `jdk.ExecutionSample`'s period, set through
/// the `method-profiling` option of JFR's `profile` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplePeriod {
    /// 20 ms (`method-profiling=normal`, JFR's default settings).
    Ms20,
    /// 10 ms (`method-profiling=high`, the `profile` settings).
    Ms10,
    /// 1 ms (`method-profiling=max`: costs the JVM more).
    Ms1,
}

impl SamplePeriod {
    fn option(self) -> &'static str {
        match self {
            SamplePeriod::Ms20 => "normal",
            SamplePeriod::Ms10 => "high",
            SamplePeriod::Ms1 => "max",
        }
    }
}

/// A JFR recording that a JVM makes of itself from its start to its end.
#[derive(Debug, Clone)]
pub struct Recording {
    path: PathBuf,
}

impl Recording {
    /// A recording to be written at `path` (when the JVM ends).
    pub fn new(path: impl Into<PathBuf>) -> Recording {
        Recording { path: path.into() }
    }

    /// Where the recording is written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The JVM option that starts the recording at the JVM's start and writes it at its end:
    /// `-XX:StartFlightRecording=filename=<path>,settings=profile,method-profiling=<period>`.
    pub fn jvm_option(&self, period: SamplePeriod) -> String {
        format!(
            "-XX:StartFlightRecording=filename={},settings=profile,method-profiling={}",
            self.path.display(),
            period.option()
        )
    }

    /// The recording's execution samples, read with JFR's own parser (`jdk.jfr.consumer`) on
    /// `jdk` (the JDK that ran the recording) by `testkit/jfr/ExecutionSamples.java`, which
    /// gives what `jfr print --json --stack-depth 512 --events jdk.ExecutionSample` gives, field
    /// for field (the start time in nanoseconds since the epoch, not as a date), without the hundreds of MB of every other field that it writes for a run of
    /// javac. Panics, saying why, when the recording or the JDK is missing or gives something
    /// else than JSON lines.
    pub fn read(&self, jdk: &Jdk) -> Profile {
        let output = Command::new(jdk.java())
            .arg("-cp")
            .arg(reader_classes())
            .arg("ExecutionSamples")
            .arg(&self.path)
            .arg(STACK_DEPTH.to_string())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", jdk.java().display()));
        assert!(
            output.status.success(),
            "ExecutionSamples {}: {}",
            self.path.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        let text = String::from_utf8(output.stdout).expect("UTF-8 from ExecutionSamples");
        let samples = text
            .lines()
            .filter_map(|line| {
                let event: Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("ExecutionSamples gave no JSON ({e}): {line}"));
                sample(&event)
            })
            .collect();
        Profile { samples }
    }
}

/// How many frames of a stack are read, the newest first, as `jfr print --stack-depth`.
const STACK_DEPTH: usize = 512;

/// The compiled `testkit/jfr/ExecutionSamples.java`.
fn reader_classes() -> &'static Path {
    static CLASSES: OnceLock<PathBuf> = OnceLock::new();
    CLASSES.get_or_init(|| {
        let source = [crate::repo_root().join("testkit/jfr/ExecutionSamples.java")];
        crate::compiled_once("jfr-reader", &source, |out| {
            crate::javac(out, &source, "testkit/jfr")
        })
    })
}

/// One `jdk.ExecutionSample`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// The sampled thread's Java name.
    pub thread: String,
    /// Its OS thread id (for a virtual thread, its carrier's).
    pub os_thread_id: u64,
    /// Whether it is a virtual thread.
    pub virtual_thread: bool,
    /// The stack, oldest frame first, each `package.Class.method`. For a virtual thread, from
    /// `java.lang.VirtualThread.run` on, as Java's own stack traces show it: JFR also lists
    /// the continuation's entry frames below it (`jdk.internal.vm.Continuation.enterSpecial`,
    /// `enter`, `enter0`, `java.lang.VirtualThread$VThreadContinuation$1.run`), which are left
    /// out, as joularcode-bpf leaves them out.
    pub frames: Vec<String>,
    /// JFR cut the stack at the depth asked for (512).
    pub truncated: bool,
    /// When it was taken, in nanoseconds since the Unix epoch (0 when the recording does not
    /// say).
    pub start_ns: u64,
}

impl Sample {
    /// The branch: the frames joined by `;`.
    pub fn branch(&self) -> String {
        self.frames.join(";")
    }
}

/// The frame a virtual thread's stack starts with (see [`Sample::frames`]).
pub const VIRTUAL_THREAD_START: &str = "java.lang.VirtualThread.run";

/// The execution samples of a recording.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    /// Every sample, in the order the recording holds them (`jfr print` sorts them by time).
    pub samples: Vec<Sample>,
}

impl Profile {
    /// How many samples each branch has.
    pub fn branch_counts(&self) -> HashMap<String, u64> {
        let mut counts = HashMap::new();
        for sample in &self.samples {
            *counts.entry(sample.branch()).or_insert(0) += 1;
        }
        counts
    }

    /// How many samples each branch has, as weights for [`shares`].
    pub fn branch_weights(&self) -> Vec<(String, f64)> {
        let counts = self.branch_counts().into_iter();
        counts.map(|(branch, n)| (branch, n as f64)).collect()
    }

    /// Each branch's share of the samples, from 0 to 1.
    pub fn shares(&self) -> HashMap<String, f64> {
        shares(self.branch_weights())
    }

    /// The samples of the threads whose Java name satisfies `keep`.
    pub fn of_threads(&self, keep: impl Fn(&Sample) -> bool) -> Profile {
        Profile {
            samples: self.samples.iter().filter(|s| keep(s)).cloned().collect(),
        }
    }

    /// The mean number of frames of the samples whose branch contains `part` (0 without any).
    pub fn mean_depth(&self, part: &str) -> f64 {
        let depths: Vec<usize> = self
            .samples
            .iter()
            .filter(|s| s.branch().contains(part))
            .map(|s| s.frames.len())
            .collect();
        if depths.is_empty() {
            return 0.0;
        }
        depths.iter().sum::<usize>() as f64 / depths.len() as f64
    }
}

/// Each branch's share of `weights` (branch, weight: samples, or joules), from 0 to 1; empty
/// without weight.
pub fn shares(weights: impl IntoIterator<Item = (String, f64)>) -> HashMap<String, f64> {
    let weights: Vec<(String, f64)> = weights.into_iter().collect();
    let total: f64 = weights.iter().map(|(_, w)| w).sum();
    weights
        .into_iter()
        .filter(|_| total > 0.0)
        .fold(HashMap::new(), |mut shares, (branch, w)| {
            *shares.entry(branch).or_insert(0.0) += w / total;
            shares
        })
}

/// Each method's inclusive share of `weights` (branch, weight: samples, or joules): the weight of
/// the branches that have the method among their frames, over all the weight, from 0 to 1. A
/// method that recurses counts once per branch. Empty without weight.
pub fn inclusive_shares(weights: impl IntoIterator<Item = (String, f64)>) -> HashMap<String, f64> {
    let mut methods: HashMap<String, f64> = HashMap::new();
    let mut total = 0.0;
    for (branch, weight) in weights {
        total += weight;
        let mut frames: Vec<&str> = branch.split(';').collect();
        frames.sort_unstable();
        frames.dedup();
        for frame in frames {
            *methods.entry(frame.to_string()).or_insert(0.0) += weight;
        }
    }
    if total <= 0.0 {
        return HashMap::new();
    }
    methods.values_mut().for_each(|weight| *weight /= total);
    methods
}

/// The branch whose shares differ most between `a` and `b` (a branch missing from one has share
/// 0 there), and by how much (from 0 to 1). `None` when both are empty.
pub fn largest_difference(
    a: &HashMap<String, f64>,
    b: &HashMap<String, f64>,
) -> Option<(String, f64)> {
    a.keys()
        .chain(b.keys())
        .map(|branch| {
            let share = |m: &HashMap<String, f64>| m.get(branch).copied().unwrap_or(0.0);
            (branch.clone(), (share(a) - share(b)).abs())
        })
        .max_by(|x, y| x.1.total_cmp(&y.1))
}

/// Java's name of a class (`Class.getName()`) from the name JFR writes and whether JFR says it is
/// hidden. JFR writes plain classes in internal form (`java/lang/Thread`), and hidden classes as
/// `a/B$$Lambda+0x00007f4044000a08/1384010761` (Java 17 and 21: the internal name, then JFR's own
/// id after a `/`) or `a.B$$Lambda/0x0000000083143800` (Java 25); Java names both
/// `a.B$$Lambda/0x...`.
pub fn class_name(jfr_name: &str, hidden: bool) -> String {
    if !hidden {
        return jfr_name.replace('/', ".");
    }
    let (base, suffix) = match jfr_name.split_once('+') {
        Some((base, suffix)) => (base, suffix),
        None => match jfr_name.rfind("/0x") {
            Some(slash) => (&jfr_name[..slash], &jfr_name[slash + 1..]),
            None => return jfr_name.replace('/', "."),
        },
    };
    let address = suffix.split('/').next().unwrap_or(suffix);
    format!("{}/{address}", base.replace('/', "."))
}

/// One event of `jfr print --json`, if it is a sample with a stack.
fn sample(event: &Value) -> Option<Sample> {
    let values = &event["values"];
    let thread = &values["sampledThread"];
    let stack = &values["stackTrace"];
    let mut frames: Vec<String> = stack["frames"]
        .as_array()?
        .iter()
        .rev()
        .map(|frame| {
            let method = &frame["method"];
            let class = &method["type"];
            format!(
                "{}.{}",
                class_name(
                    class["name"].as_str().unwrap_or("[unknown class]"),
                    class["hidden"].as_bool().unwrap_or(false)
                ),
                method["name"].as_str().unwrap_or("[unknown method]")
            )
        })
        .collect();
    let virtual_thread = thread["virtual"].as_bool().unwrap_or(false);
    if virtual_thread {
        if let Some(start) = frames.iter().rposition(|f| f == VIRTUAL_THREAD_START) {
            frames.drain(..start);
        }
    }
    Some(Sample {
        thread: thread["javaName"].as_str().unwrap_or_default().to_string(),
        os_thread_id: thread["osThreadId"].as_u64().unwrap_or(0),
        virtual_thread,
        frames,
        truncated: stack["truncated"].as_bool().unwrap_or(false),
        start_ns: values["startTime"].as_u64().unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_classes_as_java_names_them() {
        assert_eq!(class_name("java/lang/Thread", false), "java.lang.Thread");
        assert_eq!(
            class_name("ShortTasks$$Lambda$90+0x00007fc030007a08/1384010761", true),
            "ShortTasks$$Lambda$90/0x00007fc030007a08"
        );
        assert_eq!(
            class_name("a/b/C$$Lambda+0x00000008000c5a08/1987169128", true),
            "a.b.C$$Lambda/0x00000008000c5a08"
        );
        assert_eq!(
            class_name("java.lang.VirtualThread$$Lambda/0x0000000083127c28", true),
            "java.lang.VirtualThread$$Lambda/0x0000000083127c28"
        );
        assert_eq!(
            class_name("VirtualTasks$$Lambda/0x0000000083143800", true),
            "VirtualTasks$$Lambda/0x0000000083143800"
        );
    }

    #[test]
    fn a_virtual_thread_starts_at_its_run_method() {
        let frame = |class: &str, name: &str, hidden: bool| serde_json::json!({"method": {"type": {"name": class, "hidden": hidden}, "name": name}});
        let event = serde_json::json!({"values": {
            "startTime": 1_700_000_000_123_456_789u64,
            "sampledThread": {"javaName": "", "osThreadId": 7, "virtual": true},
            "stackTrace": {"truncated": false, "frames": [
                frame("T", "alpha", false),
                frame("T$$Lambda+0x10/5", "run", true),
                frame("java/lang/VirtualThread", "run", false),
                frame("java/lang/VirtualThread$VThreadContinuation$1", "run", false),
                frame("jdk/internal/vm/Continuation", "enter0", false),
            ]}
        }});
        let sample = sample(&event).expect("a sample");
        assert_eq!(
            sample.branch(),
            "java.lang.VirtualThread.run;T$$Lambda/0x10.run;T.alpha"
        );
        assert!(sample.virtual_thread);
        assert_eq!(sample.os_thread_id, 7);
        assert_eq!(sample.start_ns, 1_700_000_000_123_456_789);
    }

    #[test]
    fn shares_and_differences() {
        let a = shares([("x".to_string(), 3.0), ("y".to_string(), 1.0)]);
        let b = shares([("x".to_string(), 1.0), ("z".to_string(), 1.0)]);
        assert_eq!(a["x"], 0.75);
        let (branch, by) = largest_difference(&a, &b).expect("branches");
        assert_eq!((branch.as_str(), by), ("z", 0.5));
        assert!(shares(Vec::new()).is_empty());
    }

    #[test]
    fn inclusive_shares_count_a_method_once_per_branch() {
        let shares =
            inclusive_shares([("main;a;b;a".to_string(), 3.0), ("main;c".to_string(), 1.0)]);
        assert_eq!(shares["main"], 1.0);
        assert_eq!(shares["a"], 0.75);
        assert_eq!(shares["b"], 0.75);
        assert_eq!(shares["c"], 0.25);
        assert!(inclusive_shares(Vec::new()).is_empty());
    }
}

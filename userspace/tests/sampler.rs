//! End-to-end tests of the sampler: the real BPF programs, loaded into this kernel (they need
//! root, and fail saying so without it), against real JVMs running tests/java/Sampler*.java.
//!
//! They measure CPU time, so they run one at a time (LOCK), whatever --test-threads says.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::thread::sleep;
use std::time::Duration;

use joularcode_bpf::discovery::{Discovery, Target};
use joularcode_bpf::sampler::{monotonic_ns, Sample, Sampler, ThreadTime, Walk, CONSUME_INTERVAL};
use joularcode_tests::{all_jdks, jdk, Jvm};

fn sampler() -> Sampler {
    sampler_at(100)
}

static LOCK: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn sampler_at(rate_hz: u64) -> Sampler {
    Sampler::new(rate_hz)
        .unwrap_or_else(|e| panic!("these tests load BPF programs and need root: {e}"))
}

/// name -> (tid, schedstat runtime in ns) of every thread of `pid`.
fn schedstat(pid: u32) -> HashMap<String, (u32, u64)> {
    let mut threads = HashMap::new();
    for entry in fs::read_dir(format!("/proc/{pid}/task")).expect("the JVM's tasks") {
        let dir = entry.expect("task").path();
        let tid = dir
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .parse()
            .expect("a tid");
        let (Ok(comm), Ok(stat)) = (
            fs::read_to_string(dir.join("comm")),
            fs::read_to_string(dir.join("schedstat")),
        ) else {
            continue;
        };
        let runtime = stat
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .expect("schedstat runtime");
        threads.insert(comm.trim_end().to_string(), (tid, runtime));
    }
    threads
}

fn times_by_tid(times: Vec<ThreadTime>) -> HashMap<u32, ThreadTime> {
    times.into_iter().map(|time| (time.tid, time)).collect()
}

/// The samples taken up to now (after the consumer thread has drained the ring buffer).
fn samples_until_now(sampler: &Sampler) -> Vec<Sample> {
    let now = monotonic_ns();
    sleep(CONSUME_INTERVAL * 3);
    sampler
        .samples()
        .try_iter()
        .filter(|sample| sample.time_ns <= now)
        .collect()
}

/// A busy shell loop, killed when dropped (also when a test fails).
struct Spinner(Child);

impl Spinner {
    fn start() -> Spinner {
        Spinner(
            Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .expect("start sh"),
        )
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn busy_threads_on_cpu_time_matches_schedstat_and_sets_the_sample_count() {
    const RATE_HZ: u64 = 1000;
    let _serial = serial();
    let jvm = Jvm::start(&jdk(17), &["-XX:+PreserveFramePointer"], "SamplerBusy", &[]);
    let pid = jvm.pid();
    // A busy process beside it, not tracked: none of its samples may show up.
    let untracked = Spinner::start();
    // At 1000 Hz, so that the count of samples is large enough to check within 10% on this
    // shared 2-CPU machine, where the busy threads may get well under a CPU each.
    let sampler = sampler_at(RATE_HZ);
    sampler.track(pid).expect("track the JVM");
    sleep(Duration::from_millis(300));

    samples_until_now(&sampler);
    let t0 = monotonic_ns();
    let (before, bpf_before) = (schedstat(pid), times_by_tid(sampler.thread_times()));
    sleep(Duration::from_secs(5));
    let (after, bpf_after) = (schedstat(pid), times_by_tid(sampler.thread_times()));
    let t1 = monotonic_ns();
    let samples = samples_until_now(&sampler);
    drop(untracked);

    let bpf_delta =
        |tid: u32| bpf_after[&tid].on_cpu_ns - bpf_before.get(&tid).map_or(0, |t| t.on_cpu_ns);
    for name in ["Busy-1", "Busy-2"] {
        let (tid, end) = after[name];
        let expected = end - before[name].1;
        let measured = bpf_delta(tid);
        let error = (measured as f64 - expected as f64) / expected as f64;
        println!(
            "{name}: schedstat {expected} ns, sampler {measured} ns ({:+.2}%)",
            error * 100.0
        );
        assert!(
            expected > 500_000_000,
            "{name} ran only {expected} ns in 5 s"
        );
        assert!(
            error.abs() < 0.02,
            "{name}: sampler {measured} ns vs schedstat {expected} ns"
        );
    }
    for i in 1..=4 {
        let (tid, _) = after[&format!("Sleeper-{i}")];
        let slept = bpf_after.get(&tid).map_or(0, |t| t.on_cpu_ns)
            - bpf_before.get(&tid).map_or(0, |t| t.on_cpu_ns);
        assert!(
            slept < 1_000_000,
            "Sleeper-{i} was on CPU {slept} ns while asleep"
        );
    }

    assert!(
        samples.iter().all(|sample| sample.pid == pid),
        "a sample of an untracked process"
    );
    let in_window = samples
        .iter()
        .filter(|s| s.time_ns >= t0 && s.time_ns <= t1)
        .count() as f64;
    let busy_ns: u64 = bpf_after.keys().map(|&tid| bpf_delta(tid)).sum();
    let expected = busy_ns as f64 * RATE_HZ as f64 / 1e9;
    println!(
        "samples: {in_window} for {busy_ns} ns on CPU ({expected:.0} expected at {RATE_HZ} Hz)"
    );
    assert!(
        (in_window - expected).abs() <= expected * 0.10,
        "{in_window} samples, {expected:.0} expected"
    );
    assert_eq!(sampler.drops(), 0);
}

#[test]
fn threads_that_end_within_a_second_are_accounted_once_marked_exited() {
    let _serial = serial();
    let mut jvm = Jvm::start(&jdk(17), &[], "SamplerBusy", &["short"]);
    let sampler = sampler();
    sampler.track(jvm.pid()).expect("track the JVM");
    let mut reported: Vec<ThreadTime> = Vec::new();
    let mut printed = HashMap::new();
    for _ in 0..3 {
        // "SHORT Short-N <its own CPU time in ns, read just before it ended>"
        let line = jvm.wait_for_line("SHORT", Duration::from_secs(20));
        let fields: Vec<&str> = line.split_whitespace().collect();
        printed.insert(fields[1].to_string(), fields[2].parse::<u64>().expect("ns"));
        sleep(Duration::from_millis(200));
        reported.extend(
            sampler
                .thread_times()
                .into_iter()
                .filter(|time| time.exited),
        );
    }
    for (name, java_ns) in printed {
        let found: Vec<&ThreadTime> = reported.iter().filter(|time| time.name == name).collect();
        assert_eq!(
            found.len(),
            1,
            "{name} reported {} times as exited",
            found.len()
        );
        let bpf_ns = found[0].on_cpu_ns;
        println!("{name}: the thread measured {java_ns} ns, the sampler {bpf_ns} ns");
        assert!(
            bpf_ns >= java_ns && bpf_ns <= java_ns + java_ns / 50 + 5_000_000,
            "{name}: sampler {bpf_ns} ns, the thread itself {java_ns} ns"
        );
    }
    // Reported once: later reads do not list them again.
    let names: HashSet<String> = sampler
        .thread_times()
        .into_iter()
        .map(|time| time.name)
        .collect();
    assert!(reported.iter().all(|time| !names.contains(&time.name)));
}

/// The samples of the JVM thread named `name`, over `seconds`, walked the `walk` way.
fn thread_samples(jvm: &Jvm, name: &str, seconds: u64, walk: Walk) -> Vec<Sample> {
    let (tid, _) = schedstat(jvm.pid())[name];
    let sampler = Sampler::with_walk(100, walk)
        .unwrap_or_else(|e| panic!("these tests load BPF programs and need root: {e}"));
    sampler.track(jvm.pid()).expect("track the JVM");
    sleep(Duration::from_secs(seconds));
    let samples: Vec<Sample> = samples_until_now(&sampler)
        .into_iter()
        .filter(|s| s.tid == tid)
        .collect();
    assert!(
        samples.len() >= 50,
        "only {} samples of {name}",
        samples.len()
    );
    samples
}

/// At least 90% of the `total` samples of a run on Java `major` passed the check.
fn assert_nine_in_ten(passed: usize, total: usize, major: u32) {
    assert!(
        passed * 10 >= total * 9,
        "Java {major}: {passed} of {total} samples"
    );
}

#[test]
fn a_nine_deep_java_chain_is_walked_at_least_nine_frames_deep() {
    let _serial = serial();
    assert_eq!(Walk::detect(), Walk::BpfLoop, "this kernel has bpf_loop");
    for jdk in all_jdks() {
        let jvm = Jvm::start(&jdk, &["-XX:+PreserveFramePointer"], "SamplerDeep", &[]);
        // Both ways of walking: bpf_loop, and the bounded loop that kernels before 5.17 get.
        for walk in [Walk::BpfLoop, Walk::Bounded] {
            let samples = thread_samples(&jvm, "Deep", 2, walk);
            let deep = samples.iter().filter(|s| s.frames.len() >= 9).count();
            println!(
                "Java {} ({walk:?}): {deep} of {} samples at least 9 frames deep",
                jdk.major,
                samples.len()
            );
            assert_nine_in_ten(deep, samples.len(), jdk.major);
        }
    }
}

#[test]
fn interpreted_frames_carry_their_method_pointer() {
    let _serial = serial();
    for jdk in all_jdks() {
        let jvm = Jvm::start(
            &jdk,
            &["-Xint", "-XX:+PreserveFramePointer"],
            "SamplerDeep",
            &[],
        );
        let samples = thread_samples(&jvm, "Deep", 2, Walk::detect());
        // Each interpreted frame of d1..d9 holds its Method* at fp-3 words: the same nine (or
        // more) non-zero values recur in (nearly) every sample.
        let mut seen: HashMap<u64, usize> = HashMap::new();
        for sample in &samples {
            let slots: HashSet<u64> = sample
                .frames
                .iter()
                .map(|f| f.method_slot)
                .filter(|&m| m != 0)
                .collect();
            for slot in slots {
                *seen.entry(slot).or_default() += 1;
            }
        }
        let recurring = seen
            .values()
            .filter(|&&n| n * 10 >= samples.len() * 9)
            .count();
        println!(
            "Java {}: {recurring} Method* values recur in 90% of {} samples",
            jdk.major,
            samples.len()
        );
        assert!(
            recurring >= 9,
            "Java {}: only {recurring} recurring Method* values",
            jdk.major
        );
        let deep = samples
            .iter()
            .filter(|s| s.frames.iter().take(9).all(|f| f.method_slot != 0))
            .count();
        assert_nine_in_ten(deep, samples.len(), jdk.major);
    }
}

#[test]
fn children_of_a_followed_process_are_tracked_from_their_start_until_they_end() {
    let _serial = serial();
    let sampler = sampler();
    let mut parent = Command::new("sh")
        .args([
            "-c",
            "read go; sh -c 'while :; do :; done' & child=$!; sleep 2; kill $child",
        ])
        .stdin(Stdio::piped())
        .spawn()
        .expect("start sh");
    let parent_pid = parent.id();
    sampler.follow(parent_pid).expect("follow sh");
    use std::io::Write;
    writeln!(parent.stdin.as_mut().expect("stdin"), "go").expect("tell sh to start its child");
    sleep(Duration::from_secs(1));
    let tracked = sampler.tracked();
    let samples = samples_until_now(&sampler);
    parent.wait().expect("sh ends");
    assert!(
        tracked.contains(&parent_pid) && tracked.len() >= 2,
        "tracked: {tracked:?}"
    );
    let child_samples = samples
        .iter()
        .filter(|s| s.pid != parent_pid && tracked.contains(&s.pid))
        .count();
    assert!(
        child_samples >= 20,
        "{child_samples} samples of the busy child"
    );
    // Once a process has ended, it is neither tracked nor followed any more.
    let mut left = sampler.tracked();
    for _ in 0..50 {
        if left.is_empty() {
            break;
        }
        sleep(Duration::from_millis(100));
        left = sampler.tracked();
    }
    assert!(left.is_empty(), "still tracked after they ended: {left:?}");
}

fn raw(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_joularcode-bpf"))
        .arg("raw")
        .args(args)
        .output()
        .expect("run joularcode-bpf raw")
}

#[test]
fn the_raw_command_shows_busy_threads_and_refuses_non_jvms() {
    let _serial = serial();
    let jvm = Jvm::start(&jdk(17), &["-XX:+PreserveFramePointer"], "SamplerBusy", &[]);
    let out = raw(&["--pid", &jvm.pid().to_string(), "--duration", "2"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "raw failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("sampled 1 JVM(s) for 2."), "{stdout}");
    for name in ["Busy-1", "Busy-2"] {
        let line = stdout
            .lines()
            .find(|line| line.contains(name))
            .unwrap_or_else(|| panic!("no {name} line"));
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert!(fields[3].parse::<u64>().expect("samples") > 20, "{line}");
        assert!(
            fields[5].parse::<f64>().expect("on-cpu-ms") > 200.0,
            "{line}"
        );
    }
    assert!(
        stdout
            .lines()
            .last()
            .unwrap()
            .contains(" 0 samples dropped"),
        "{stdout}"
    );

    let me = std::process::id().to_string();
    let out = raw(&["--pid", &me]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim_end(),
        format!("joularcode-bpf: process {me} is not a JVM (it does not map libjvm.so)")
    );
}

#[test]
fn without_privileges_raw_says_what_it_needs_in_one_line() {
    let _serial = serial();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_joularcode-bpf"))
        .args(["raw", "--all"])
        .output()
        .expect("run setpriv (util-linux)");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr,
        "joularcode-bpf: loading the BPF sampler needs root, or the capabilities CAP_BPF and CAP_PERFMON (missing: CAP_BPF, CAP_PERFMON): run it with sudo\n"
    );
}

/// How many BPF programs of the sampler are loaded in the kernel now.
fn loaded_sampler_programs() -> usize {
    libbpf_rs::query::ProgInfoIter::default()
        .filter(|prog| {
            prog.name
                .to_str()
                .is_some_and(|name| name.starts_with("jp_on_"))
        })
        .count()
}

/// Waits until no program of the sampler is loaded: the kernel frees tracing programs after an
/// RCU grace period once their links are gone.
fn wait_until_unloaded() -> bool {
    for _ in 0..100 {
        if loaded_sampler_programs() == 0 {
            return true;
        }
        sleep(Duration::from_millis(100));
    }
    false
}

#[test]
fn dropping_the_sampler_unloads_its_programs() {
    let _serial = serial();
    assert!(wait_until_unloaded(), "a sampler is already loaded");
    let sampler = sampler();
    assert_eq!(loaded_sampler_programs(), 4);
    drop(sampler);
    assert!(
        wait_until_unloaded(),
        "{} programs left",
        loaded_sampler_programs()
    );
}

#[test]
fn sigterm_ends_the_raw_command_with_its_report_and_unloads_it() {
    let _serial = serial();
    assert!(wait_until_unloaded(), "a sampler is already loaded");
    let raw = Command::new(env!("CARGO_BIN_EXE_joularcode-bpf"))
        .args(["raw", "--all", "--duration", "120"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run joularcode-bpf raw");
    sleep(Duration::from_secs(2));
    assert_eq!(loaded_sampler_programs(), 4);
    let pid = nix::unistd::Pid::from_raw(raw.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("send SIGTERM");
    let out = raw.wait_with_output().expect("raw ends");
    assert!(out.status.success(), "{:?}", out.status);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("sampled "), "{stdout}");
    assert!(stdout.contains("total: "), "{stdout}");
    assert!(
        wait_until_unloaded(),
        "{} programs left",
        loaded_sampler_programs()
    );
}

#[test]
fn discovery_finds_a_jvm_that_starts_and_loses_it_when_it_ends() {
    let _serial = serial();
    let mut discovery = Discovery::new(Target::All).expect("discovery of every JVM");
    let before = discovery.rescan();
    let mut jvm = Jvm::start(&jdk(17), &[], "SamplerBusy", &[]);
    let pid = jvm.pid();
    assert!(!before.started.contains(&pid));
    let started = discovery.rescan();
    assert!(started.started.contains(&pid), "{started:?}");
    assert!(Discovery::new(Target::Pid(pid)).is_ok());
    jvm.child.kill().expect("stop the JVM");
    jvm.child.wait().expect("the JVM ends");
    let ended = discovery.rescan();
    assert!(ended.ended.contains(&pid), "{ended:?}");
    assert!(!discovery.jvms().contains(&pid));
}

#[test]
fn a_jvm_that_ends_reports_its_threads_final_times_once() {
    let _serial = serial();
    let mut jvm = Jvm::start(&jdk(17), &[], "SamplerBusy", &[]);
    let pid = jvm.pid();
    let sampler = sampler();
    sampler.track(pid).expect("track the JVM");
    sleep(Duration::from_millis(500));
    let before = times_by_tid(sampler.thread_times());
    sleep(Duration::from_millis(500));
    jvm.child.kill().expect("stop the JVM");
    jvm.child.wait().expect("the JVM ends");
    assert!(
        !sampler.tracked().contains(&pid),
        "still tracked after it ended"
    );
    sampler.untrack(pid);
    let last = sampler.thread_times();
    for name in ["Busy-1", "Busy-2"] {
        let thread = last
            .iter()
            .find(|time| time.name == name)
            .unwrap_or_else(|| panic!("no final time for {name}: {last:?}"));
        assert!(thread.exited, "{thread:?}");
        assert!(
            thread.on_cpu_ns > before[&thread.tid].on_cpu_ns,
            "{thread:?}"
        );
    }
    assert!(last.iter().all(|time| time.pid == pid && time.exited));
    assert!(sampler.thread_times().is_empty());
}

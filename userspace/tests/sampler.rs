//! End-to-end tests of the sampler: the real BPF programs, loaded into this kernel (they need
//! root, and fail saying so without it), against real JVMs running testkit/java/Sampler*.java.
//!
//! They measure CPU time, so they run one at a time (`serial`), whatever --test-threads says.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::MutexGuard;
use std::thread::sleep;
use std::time::Duration;

use joularcode_bpf::discovery::{Cgroups, Discovery, Scope};
use joularcode_bpf::sampler::{
    monotonic_ns, privileges, Sample, Sampler, ThreadTime, CONSUME_INTERVAL,
};
use joularcode_core::procstat::{self, CpuTimes};
use joularcode_testkit::{bpf_programs_of as programs_held_by, jdk, one_at_a_time, Jvm};

fn sampler() -> Sampler {
    sampler_at(100)
}

/// The tests measure CPU time: one at a time (they load the BPF programs: root).
fn serial() -> MutexGuard<'static, ()> {
    one_at_a_time("the sampler tests load the BPF sampler")
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

/// The tid of the thread of `pid` named `name`. A Java thread names its OS thread itself once it
/// runs, which may be after the workload printed READY: polled for up to 30 s.
fn tid_of(pid: u32, name: &str) -> u32 {
    for _ in 0..300 {
        if let Some(&(tid, _)) = schedstat(pid).get(name) {
            return tid;
        }
        sleep(Duration::from_millis(100));
    }
    panic!("JVM {pid} has no thread named {name}");
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
        .flatten()
        .filter(|sample| sample.time_ns <= now)
        .collect()
}

/// The host's CPU time, all CPUs together, in clock ticks (`/proc/stat`).
fn host_cpu() -> CpuTimes {
    procstat::read(Path::new("/proc")).expect("/proc/stat").cpu
}

/// The share of the CPUs' busy time, from `before` to `after`, that the hypervisor took.
fn stolen_share(before: CpuTimes, after: CpuTimes) -> f64 {
    let busy = after.busy - before.busy;
    if busy == 0 {
        return 0.0;
    }
    (after.steal - before.steal) as f64 / busy as f64
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

/// The busy and the sleeping threads of SamplerBusy.
const BUSY_THREADS: [&str; 2] = ["Busy-1", "Busy-2"];
const SLEEPERS: [&str; 4] = ["Sleeper-1", "Sleeper-2", "Sleeper-3", "Sleeper-4"];

/// What a sampler saw of the JVM `pid` over one window, with schedstat at both ends.
struct Window {
    pid: u32,
    rate_hz: u64,
    /// The samples taken between the window's two ends.
    samples: Vec<Sample>,
    /// Samples of any other process, taken at any time.
    foreign_samples: usize,
    before: HashMap<u32, ThreadTime>,
    after: HashMap<u32, ThreadTime>,
    sched_before: HashMap<String, (u32, u64)>,
    sched_after: HashMap<String, (u32, u64)>,
    /// The share of the window's busy CPU time the hypervisor took.
    stolen: f64,
}

impl Window {
    /// Tracks the SamplerBusy JVM `pid` at `rate_hz`, while a busy process that is not tracked
    /// runs beside it, until `done(time since the window began, JVM's on-CPU ns in it)`.
    fn sample(pid: u32, rate_hz: u64, done: impl Fn(Duration, u64) -> bool) -> Window {
        for name in BUSY_THREADS.iter().chain(&SLEEPERS) {
            tid_of(pid, name);
        }
        let untracked = Spinner::start();
        let sampler = sampler_at(rate_hz);
        sampler.track(pid).expect("track the JVM");
        sleep(Duration::from_millis(300));
        let mut samples = samples_until_now(&sampler);
        let t0 = monotonic_ns();
        let host_before = host_cpu();
        let (sched_before, before) = (schedstat(pid), times_by_tid(sampler.thread_times()));
        let busy_ns = |now: &HashMap<u32, ThreadTime>| -> u64 {
            let at = |tid| before.get(tid).map_or(0, |t: &ThreadTime| t.on_cpu_ns);
            now.iter().map(|(tid, t)| t.on_cpu_ns - at(tid)).sum()
        };
        let start = std::time::Instant::now();
        let mut after = before.clone();
        while !done(start.elapsed(), busy_ns(&after)) {
            // Drained as it goes: the channel holds only a few seconds of samples.
            sleep(CONSUME_INTERVAL);
            samples.extend(sampler.samples().try_iter().flatten());
            // A thread that ended is reported once: kept from the read that reported it.
            after.extend(times_by_tid(sampler.thread_times()));
        }
        let sched_after = schedstat(pid);
        after.extend(times_by_tid(sampler.thread_times()));
        let t1 = monotonic_ns();
        let stolen = stolen_share(host_before, host_cpu());
        samples.extend(samples_until_now(&sampler));
        drop(untracked);
        assert_eq!(sampler.drops(), 0, "samples dropped");
        Window {
            pid,
            rate_hz,
            foreign_samples: samples.iter().filter(|s| s.pid != pid).count(),
            samples: samples
                .into_iter()
                .filter(|s| s.time_ns >= t0 && s.time_ns <= t1)
                .collect(),
            before,
            after,
            sched_before,
            sched_after,
            stolen,
        }
    }

    /// The on-CPU time of thread `tid` during the window, as the sampler counted it.
    fn on_cpu_ns(&self, tid: u32) -> u64 {
        let at = |times: &HashMap<u32, ThreadTime>| times.get(&tid).map_or(0, |t| t.on_cpu_ns);
        at(&self.after) - at(&self.before)
    }

    /// No sample of another process, and as many samples as the rate times the JVM's time on
    /// the CPUs during the window, within 10%.
    ///
    /// The sampling clock is the CPU's wall clock, where a thread's on-CPU time (the scheduler's
    /// sum_exec_runtime) leaves out what the hypervisor stole while it ran: the expected count
    /// adds the window's stolen share back.
    fn assert_samples_follow_the_rate(&self) {
        assert_eq!(self.foreign_samples, 0, "samples of an untracked process");
        assert!(self.samples.iter().all(|sample| sample.pid == self.pid));
        let busy_ns: u64 = self.after.keys().map(|&tid| self.on_cpu_ns(tid)).sum();
        let expected = busy_ns as f64 * self.rate_hz as f64 / 1e9 / (1.0 - self.stolen);
        let taken = self.samples.len() as f64;
        println!(
            "samples: {taken} for {busy_ns} ns on CPU, {:.2}% of the busy CPUs' time stolen \
             ({expected:.0} expected at {} Hz)",
            self.stolen * 100.0,
            self.rate_hz
        );
        assert!(
            (taken - expected).abs() <= expected * 0.10,
            "{taken} samples at {} Hz, {expected:.0} expected",
            self.rate_hz
        );
    }
}

/// In ten runs here, the sampler's on-CPU time was 0.12% at most off schedstat's (2 allowed) and
/// the samples -1.4 to +2.8% off the rate (10 allowed): at least 1.88 and 7.2 points inside; the
/// sleepers' on-CPU time is not known from these runs (printed from now on).
#[test]
fn busy_threads_on_cpu_time_matches_schedstat_and_sets_the_sample_count() {
    let _serial = serial();
    let jvm = Jvm::start(&jdk(17), &[], "SamplerBusy", &[]);
    // At 1000 Hz, so that the count of samples over 5 s is large enough to check within 10% on
    // this shared 2-CPU machine, where the busy threads may get well under a CPU each (the
    // default rate is checked over a longer window below).
    let window = Window::sample(jvm.pid(), 1000, |elapsed, _| {
        elapsed >= Duration::from_secs(5)
    });
    for name in BUSY_THREADS {
        let (tid, end) = window.sched_after[name];
        let expected = end - window.sched_before[name].1;
        let measured = window.on_cpu_ns(tid);
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
    for name in SLEEPERS {
        let (tid, _) = window.sched_after[name];
        let slept = window.on_cpu_ns(tid);
        println!("{name} on CPU {slept} ns while asleep");
        assert!(
            slept < 1_000_000,
            "{name} was on CPU {slept} ns while asleep"
        );
    }
    window.assert_samples_follow_the_rate();
}

/// In ten runs here, the samples were -2.5 to +5.0% off the rate: at least 5.0 points inside the 10
/// allowed.
#[test]
fn the_default_rate_sets_the_sample_count_over_a_longer_window() {
    let _serial = serial();
    let jvm = Jvm::start(&jdk(17), &[], "SamplerBusy", &[]);
    // 100 Hz (stack-monitoring-sample-rate=10 ms) until the JVM has run 15 s on the CPUs (about
    // 1,500 samples, so that 10% is about four times the sampling noise), for up to two minutes
    // on a loaded machine.
    let window = Window::sample(jvm.pid(), 100, |elapsed, busy_ns| {
        busy_ns >= 15_000_000_000 || elapsed >= Duration::from_secs(120)
    });
    window.assert_samples_follow_the_rate();
}

#[test]
fn threads_that_end_within_a_second_are_accounted_once_marked_exited() {
    let _serial = serial();
    // Loaded first: the first short thread starts 1 s after READY, and loading the programs can
    // take longer than that on a loaded machine (the thread's time before tracking is not
    // counted, by design, or the thread is missed altogether).
    let sampler = sampler();
    let mut jvm = Jvm::start(&jdk(17), &[], "SamplerBusy", &["short"]);
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

/// The processes whose threads alone the task iterators of this process go over (the `pid:` of
/// each iterator link over tasks in /proc/self/fdinfo; 0 for one over the host's tasks).
fn task_iterator_pids() -> Vec<u32> {
    let mut pids: Vec<u32> = fs::read_dir("/proc/self/fdinfo")
        .expect("/proc/self/fdinfo")
        .filter_map(|entry| fs::read_to_string(entry.ok()?.path()).ok())
        .filter(|info| info.contains("link_type:\titer") && info.contains("target_name:\ttask"))
        .map(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("pid:")?.trim().parse().ok())
                .unwrap_or(0)
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// More threads end between two reads than the BPF side's table of exited threads holds (4,096):
/// the ones left over are read from the table of all threads, and every thread is still reported
/// once, marked exited, with the live ones beside them.
#[test]
fn more_threads_than_the_exited_table_holds_end_between_two_reads() {
    let _serial = serial();
    const THREADS: usize = 6_000;
    let sampler = sampler();
    let mut command = Jvm::command(&jdk(17), &[], "SamplerBusy", &["churn", "6000"]);
    command.stdin(Stdio::piped());
    let mut jvm = Jvm::spawn(command);
    sampler.track(jvm.pid()).expect("track the JVM");
    // One tracked process: its own pass (from Linux 6.1 on), beside the host's.
    let own_pass = privileges::kernel_is_at_least((6, 1)).then_some(jvm.pid());
    let expected: Vec<u32> = [Some(0), own_pass].into_iter().flatten().collect();
    assert_eq!(task_iterator_pids(), expected);
    let before = sampler.thread_times();
    assert!(
        before.iter().any(|time| time.name == "Busy-1"),
        "{before:?}"
    );
    let mut go = jvm.child.stdin.take().expect("the JVM's stdin");
    std::io::Write::write_all(&mut go, b"go\n").expect("start the churn");
    jvm.wait_for_line("CHURNED", Duration::from_secs(120));
    // Thread.join returns once the Java thread has terminated: its task may still be exiting.
    let tasks = format!("/proc/{}/task", jvm.pid());
    let churning = || {
        fs::read_dir(&tasks).map_or(0, |entries| {
            entries
                .filter_map(|entry| fs::read_to_string(entry.ok()?.path().join("comm")).ok())
                .filter(|name| name.starts_with("Churn-"))
                .count()
        })
    };
    for _ in 0..100 {
        if churning() == 0 {
            break;
        }
        sleep(Duration::from_millis(100));
    }
    assert_eq!(churning(), 0, "Churn threads still running");
    let times = sampler.thread_times();
    let churned: Vec<&ThreadTime> = times
        .iter()
        .filter(|time| time.name.starts_with("Churn-"))
        .collect();
    let names: HashSet<&str> = churned.iter().map(|time| time.name.as_str()).collect();
    assert_eq!(churned.len(), THREADS, "threads reported");
    assert_eq!(names.len(), THREADS, "threads reported more than once");
    let live: Vec<&&ThreadTime> = churned.iter().filter(|time| !time.exited).collect();
    assert!(live.is_empty(), "reported live: {live:?}");
    let idle: Vec<&&ThreadTime> = churned.iter().filter(|time| time.on_cpu_ns == 0).collect();
    assert!(idle.is_empty(), "no CPU time: {idle:?}");
    let busy = |times: &[ThreadTime]| {
        times
            .iter()
            .find(|time| time.name == "Busy-1" && !time.exited)
            .map(|time| time.on_cpu_ns)
            .expect("Busy-1 reported live")
    };
    let busy_then = busy(&times);
    sleep(Duration::from_millis(300));
    let later = sampler.thread_times();
    assert!(later.iter().all(|time| !time.name.starts_with("Churn-")));
    assert!(busy(&later) > busy_then, "Busy-1's time did not grow");
}

#[test]
fn children_of_a_followed_process_are_tracked_from_their_start_until_they_end() {
    let _serial = serial();
    let sampler = sampler();
    // The child spins from "go" until "stop": as long as it takes to sample it on a busy machine.
    let mut parent = Command::new("sh")
        .args([
            "-c",
            "read go; sh -c 'while :; do :; done' & child=$!; read stop; kill $child",
        ])
        .stdin(Stdio::piped())
        .spawn()
        .expect("start sh");
    let parent_pid = parent.id();
    sampler.follow(parent_pid).expect("follow sh");
    // Its children are tracked by the BPF side: the pass goes over the host's tasks.
    assert_eq!(task_iterator_pids(), [0]);
    use std::io::Write;
    let mut stdin = parent.stdin.take().expect("stdin");
    writeln!(stdin, "go").expect("tell sh to start its child");
    let mut child_samples = 0;
    let mut tracked = Vec::new();
    for _ in 0..600 {
        sleep(CONSUME_INTERVAL);
        tracked = sampler.tracked();
        child_samples += sampler
            .samples()
            .try_iter()
            .flatten()
            .filter(|s| s.pid != parent_pid && tracked.contains(&s.pid))
            .count();
        if child_samples >= 20 {
            break;
        }
    }
    writeln!(stdin, "stop").expect("tell sh to stop its child");
    parent.wait().expect("sh ends");
    assert!(
        tracked.contains(&parent_pid) && tracked.len() >= 2,
        "tracked: {tracked:?}"
    );
    assert!(
        child_samples >= 20,
        "{child_samples} samples of the busy child in a minute"
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
    let jvm = Jvm::start(&jdk(17), &[], "SamplerBusy", &[]);
    let out = raw(&["--pid", &jvm.pid().to_string(), "--duration", "3"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "raw failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("sampled 1 JVM(s) for 3."), "{stdout}");
    for name in BUSY_THREADS {
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

/// How many of the programs `ids` are still loaded in the kernel.
fn still_loaded(ids: &HashSet<u32>) -> usize {
    libbpf_rs::query::ProgInfoIter::default()
        .filter(|prog| ids.contains(&prog.id))
        .count()
}

/// Waits until none of the programs `ids` is loaded: the kernel frees tracing programs after an
/// RCU grace period once their links are gone. Polls for up to 10 s, however loaded the machine.
fn wait_until_unloaded(ids: &HashSet<u32>) -> bool {
    for _ in 0..100 {
        if still_loaded(ids) == 0 {
            return true;
        }
        sleep(Duration::from_millis(100));
    }
    false
}

/// The names of the loaded programs among `ids`, sorted.
fn program_names(ids: &HashSet<u32>) -> Vec<String> {
    let mut names: Vec<String> = libbpf_rs::query::ProgInfoIter::default()
        .filter(|prog| ids.contains(&prog.id))
        .map(|prog| prog.name.to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The five programs a sampler loads (one of the two walks, task exit, free and fork, the task
/// iterator), and the `extra` ones (discovery's process events for `--all`), by their kernel
/// names (truncated to 15 bytes).
fn assert_sampler_programs(ids: &HashSet<u32>, extra: &[&str]) {
    let names = program_names(ids);
    assert_eq!(names.len(), 5 + extra.len(), "programs: {names:?}");
    assert!(
        names.iter().all(|name| name.starts_with("jp_")),
        "programs: {names:?}"
    );
    assert!(
        names.iter().any(|name| name == "jp_iter_threads"),
        "programs: {names:?}"
    );
    for name in extra {
        assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
    }
}

#[test]
fn dropping_the_sampler_unloads_its_programs() {
    let _serial = serial();
    let before = programs_held_by("self");
    let sampler = sampler();
    let ours: HashSet<u32> = programs_held_by("self")
        .difference(&before)
        .copied()
        .collect();
    assert_sampler_programs(&ours, &[]);
    drop(sampler);
    assert!(
        programs_held_by("self").is_disjoint(&ours),
        "descriptors of the programs left open"
    );
    assert!(
        wait_until_unloaded(&ours),
        "{} programs left",
        still_loaded(&ours)
    );
}

#[test]
fn sigint_and_sigterm_end_the_raw_command_with_its_report_and_unload_it() {
    let _serial = serial();
    for signal in [
        nix::sys::signal::Signal::SIGINT,
        nix::sys::signal::Signal::SIGTERM,
    ] {
        let raw = Command::new(env!("CARGO_BIN_EXE_joularcode-bpf"))
            .args(["raw", "--all", "--duration", "120"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("run joularcode-bpf raw");
        let pid = raw.id().to_string();
        // Polls until raw holds its seven programs (the sampler's and discovery's), however
        // long loading takes on a busy machine.
        let mut ours = programs_held_by(&pid);
        for _ in 0..300 {
            if ours.len() >= 7 {
                break;
            }
            sleep(Duration::from_millis(100));
            ours = programs_held_by(&pid);
        }
        assert_sampler_programs(&ours, &["jp_on_exec", "jp_on_process_e"]);
        let pid = nix::unistd::Pid::from_raw(raw.id() as i32);
        nix::sys::signal::kill(pid, signal).expect("send the signal");
        let out = raw.wait_with_output().expect("raw ends");
        assert!(out.status.success(), "{signal}: {:?}", out.status);
        let stdout = String::from_utf8_lossy(&out.stdout);
        // Lines about other JVMs of the host that could not be walked may come first.
        assert!(
            stdout.lines().any(|line| line.starts_with("sampled ")),
            "{signal}: {stdout}"
        );
        assert!(stdout.contains("total: "), "{signal}: {stdout}");
        assert!(
            wait_until_unloaded(&ours),
            "{signal}: {} programs left",
            still_loaded(&ours)
        );
    }
}

#[test]
fn discovery_finds_a_jvm_that_starts_and_loses_it_when_it_ends() {
    let _serial = serial();
    let mut discovery =
        Discovery::new(Scope::All(Cgroups::every())).expect("discovery of every JVM");
    let before = discovery.rescan();
    let mut jvm = Jvm::start(&jdk(17), &[], "SamplerBusy", &[]);
    let pid = jvm.pid();
    assert!(!before.started.contains(&pid));
    let started = discovery.rescan();
    assert!(started.started.contains(&pid), "{started:?}");
    assert!(Discovery::new(Scope::Pid(pid)).is_ok());
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
    for name in BUSY_THREADS {
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

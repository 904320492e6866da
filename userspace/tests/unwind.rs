//! Whole stacks without -XX:+PreserveFramePointer, end to end on JDK 17, 21 and 25: the BPF
//! walker (docs/sampler.md) unwinds HotSpot frames by kind, and the session names them. Threads
//! whose leaves are native code reach their Java caller and their entry; a JVM profiled by pid
//! after it ran a while is walked as a launched one is; compiled code deoptimised while sampled
//! and OSR frames lose nothing.
//!
//! They load the BPF sampler (root), run JVMs and measure CPU, so they are serialised by one
//! lock; they fail, saying so, when something is missing.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use joularcode_bpf::hotspot::HotSpot;
use joularcode_bpf::sampler::{FrameKind, Sample, Sampler, Walk, WalkEnd, WalkedJvm};
use joularcode_bpf::session::{Session, SessionOptions, Targets};
use joularcode_core::log::Recorded;
use joularcode_testkit::{
    agent_library, all_jdks, target_dir, workload_classes, Jdk, Jvm, STACKS_CHAIN,
};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Five times the default rate, so that each thread of a loaded machine still gets enough samples.
const RATE_HZ: u64 = 500;

fn session_options() -> SessionOptions {
    let mut options = SessionOptions::new(Arc::new(Recorded::default()));
    options.agent_path = Some(agent_library().to_path_buf());
    options.rate_hz = RATE_HZ;
    options
}

/// The branches of one thread: its samples per branch name.
type ThreadBranches = HashMap<String, u64>;

/// Pumps `session` for `warm_up`, forgets what it counted, pumps for `measure` more, and returns
/// each thread's branches by thread name (threads of one name pooled).
fn measure(
    session: &mut Session,
    warm_up: Duration,
    measure: Duration,
) -> HashMap<String, ThreadBranches> {
    let pump_for = |session: &mut Session, time: Duration| {
        let start = Instant::now();
        while start.elapsed() < time && !session.finished() {
            session.pump(Duration::from_millis(100)).expect("pump");
        }
    };
    pump_for(session, warm_up);
    session.take_counts();
    pump_for(session, measure);
    let mut threads: HashMap<String, ThreadBranches> = HashMap::new();
    for (pid, by_tid) in session.take_counts() {
        let jvm = session.jvm(pid).expect("a sampled JVM");
        for counts in by_tid.into_values() {
            let branches = threads.entry(counts.name).or_default();
            for (branch, count) in counts.counts {
                *branches
                    .entry(jvm.branches().name(branch).to_string())
                    .or_default() += count;
            }
        }
    }
    threads
}

/// The share of `branches`' samples whose branch `whole` accepts, and their number.
fn share(branches: &ThreadBranches, whole: impl Fn(&str) -> bool) -> (f64, u64) {
    let total: u64 = branches.values().sum();
    let good: u64 = branches
        .iter()
        .filter(|(branch, _)| whole(branch))
        .map(|(_, count)| count)
        .sum();
    (good as f64 / total.max(1) as f64, total)
}

/// The command that runs `main` on `jdk`.
fn java(jdk: &Jdk, jvm_args: &[&str], main: &str, args: &[&str]) -> Command {
    let mut command = Command::new(jdk.java());
    command
        .args(jvm_args)
        .arg("-cp")
        .arg(workload_classes())
        .arg(main)
        .args(args)
        .stdout(Stdio::null());
    command
}

/// The branches of each thread of `main` launched on `jdk` for 12 s in a session: 4 s of them,
/// after 2 s of warm-up.
fn launched_threads(jdk: &Jdk, main: &str) -> HashMap<String, ThreadBranches> {
    let command = java(jdk, &[], main, &["12"]);
    let mut session =
        Session::start(Targets::Launch(command), &session_options()).expect("session starts");
    let threads = measure(&mut session, Duration::from_secs(2), Duration::from_secs(4));
    let _ = session
        .stop()
        .map(|mut child| child.kill().and_then(|_| child.wait()));
    threads
}

#[test]
fn native_leaves_reach_their_java_caller_and_the_thread_entry() {
    let _serial = serial();
    let loops = [
        "file",
        "socket",
        "echo",
        "arraycopy",
        "hashcode",
        "intern",
        "crypto",
        "clock",
    ];
    for jdk in all_jdks() {
        let threads = launched_threads(&jdk, "UnwindNative");
        for name in loops {
            let branches = threads
                .get(name)
                .unwrap_or_else(|| panic!("Java {}: no thread {name}", jdk.major));
            let caller = format!(";UnwindNative.{name}Loop");
            let (whole, samples) = share(branches, |branch| {
                branch.starts_with("java.lang.Thread.run;") && branch.contains(&caller)
            });
            println!(
                "Java {} {name}: {:.2}% of {samples} samples reach UnwindNative.{name}Loop and Thread.run",
                jdk.major,
                whole * 100.0
            );
            assert!(
                samples >= 50,
                "Java {} {name}: {samples} samples",
                jdk.major
            );
            let others: Vec<_> = branches
                .iter()
                .filter(|(branch, _)| {
                    !(branch.starts_with("java.lang.Thread.run;") && branch.contains(&caller))
                })
                .collect();
            if !others.is_empty() {
                println!("  cut short: {others:?}");
            }
            let worst = others.iter().max_by_key(|(_, n)| **n);
            assert!(
                whole >= 0.99,
                "Java {} {name}: only {:.2}% whole; the most common other branch: {worst:?}",
                jdk.major,
                whole * 100.0
            );
        }
    }
}

#[test]
fn threads_just_started_reach_their_entry_from_native_leaves() {
    let _serial = serial();
    for jdk in all_jdks() {
        let threads = launched_threads(&jdk, "UnwindNewThreads");
        // A thread that ended before its name was read is counted under an empty name.
        let mut branches = ThreadBranches::new();
        for name in ["fresh", ""] {
            for (branch, n) in threads.get(name).into_iter().flatten() {
                *branches.entry(branch.clone()).or_default() += n;
            }
        }
        // Samples at a thread's very start or end, in the VM before or after its Java code, have
        // no Java frame ([native], [VM]): every other one must reach the thread's entry.
        let java: ThreadBranches = branches
            .iter()
            .filter(|(branch, _)| !branch.starts_with('['))
            .map(|(branch, n)| (branch.clone(), *n))
            .collect();
        let entry = |branch: &str| {
            branch.starts_with("java.lang.Thread.run")
                || branch.starts_with("java.lang.Thread.exit")
        };
        let (whole, samples) = share(&java, entry);
        let (in_life, _) = share(&java, |branch| branch.contains(";UnwindNewThreads.life"));
        let others: Vec<_> = branches
            .iter()
            .filter(|(branch, _)| !entry(branch))
            .collect();
        println!(
            "Java {}: {:.2}% of {samples} samples of 20 ms threads with Java frames reach \
             Thread.run ({:.2}% in UnwindNewThreads.life); the others: {others:?}",
            jdk.major,
            whole * 100.0,
            in_life * 100.0
        );
        assert!(samples >= 300, "Java {}: {samples} samples", jdk.major);
        assert!(
            whole >= 0.99,
            "Java {}: only {:.2}% whole; the others: {others:?}",
            jdk.major,
            whole * 100.0
        );
    }
}

#[test]
fn threads_not_listed_yet_are_found_in_r15_and_only_java_threads() {
    let _serial = serial();
    for jdk in all_jdks() {
        let jvm = Jvm::start(&jdk, &[], "UnwindNewThreads", &[]);
        let sampler = Sampler::new(RATE_HZ).expect("these tests load BPF programs and need root");
        let hotspot = HotSpot::open(jvm.pid()).expect("read the JVM");
        // Registered once and never refreshed: every "fresh" thread started later is one the
        // walker was not told of.
        let _walked = WalkedJvm::register(&sampler, &hotspot).expect("the walker takes it");
        let listed: Vec<u32> = hotspot
            .java_threads()
            .iter()
            .filter_map(|t| t.tid)
            .collect();
        sampler.track(jvm.pid()).expect("track the JVM");
        let mut samples: Vec<Sample> = Vec::new();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(100));
            samples.extend(sampler.samples().try_iter().flatten());
        }
        // The threads alive at the end that are not Java threads (GC, VM thread...).
        // (The list cannot be read while the JVM replaces it, as it does for each new thread.)
        let java_now: Vec<u32> = (0..100)
            .map(|_| hotspot.java_threads())
            .find(|threads| !threads.is_empty())
            .expect("the Java threads")
            .iter()
            .filter_map(|t| t.tid)
            .collect();
        let others: Vec<u32> = std::fs::read_dir(format!("/proc/{}/task", jvm.pid()))
            .expect("the JVM's threads")
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
            .filter(|tid| !java_now.contains(tid) && !listed.contains(tid))
            .collect();
        let new: Vec<&Sample> = samples
            .iter()
            .filter(|s| !listed.contains(&s.tid) && !others.contains(&s.tid))
            .collect();
        let in_java = new.iter().filter(|s| s.end == WalkEnd::Entry).count();
        let found = new
            .iter()
            .filter(|s| s.java_thread && s.thread_in_r15)
            .count();
        let listed_java = new
            .iter()
            .filter(|s| s.java_thread && !s.thread_in_r15)
            .count();
        println!(
            "Java {}: {} samples of threads not listed, {in_java} walked to their entry; \
             {found} found their JavaThread in r15, {listed_java} in the map",
            jdk.major,
            new.len()
        );
        assert!(
            new.len() >= 200,
            "Java {}: {} samples",
            jdk.major,
            new.len()
        );
        // Every sample of a new thread knows its thread (from r15, or the map once r15 found
        // it) but those at its very start or end, outside Java code.
        assert!(
            (found + listed_java) * 100 >= new.len() * 95 && found > 0,
            "Java {}: {found} + {listed_java} of {} samples knew their JavaThread",
            jdk.major,
            new.len()
        );
        let wrong: Vec<&Sample> = samples
            .iter()
            .filter(|s| others.contains(&s.tid) && s.java_thread)
            .collect();
        assert!(wrong.is_empty(), "Java {}: {wrong:?}", jdk.major);
    }
}

/// Profiles a StacksChain JVM that has run for 3 s by pid: once the agent is attached (the first
/// inlined frame is named), the busiest thread's branches over 5 s.
fn attached_chain(jdk: &Jdk, flags: &[&str]) -> ThreadBranches {
    let jvm = Jvm::start(jdk, flags, "StacksChain", &[]);
    std::thread::sleep(Duration::from_secs(3));
    let mut session =
        Session::start(Targets::Pids(vec![jvm.pid()]), &session_options()).expect("session starts");
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30)
        && session
            .jvm(jvm.pid())
            .is_none_or(|profiled| profiled.stats().inlined_frames == 0)
    {
        session.pump(Duration::from_millis(100)).expect("pump");
    }
    let mut threads = measure(&mut session, Duration::ZERO, Duration::from_secs(5));
    let busiest = threads
        .iter()
        .max_by_key(|(_, branches)| branches.values().sum::<u64>())
        .map(|(name, _)| name.clone())
        .expect("a sampled thread");
    threads.remove(&busiest).expect("its branches")
}

#[test]
fn a_jvm_that_ran_a_while_is_walked_whole_once_attached() {
    let _serial = serial();
    for jdk in all_jdks() {
        let branches = attached_chain(&jdk, &[]);
        let (main, samples) = share(&branches, |branch| {
            branch.starts_with("StacksChain.main;StacksChain.run")
        });
        let (whole, _) = share(&branches, |branch| branch == STACKS_CHAIN);
        println!(
            "Java {} attached: {:.2}% of {samples} samples reach main, {:.2}% show the whole chain",
            jdk.major,
            main * 100.0,
            whole * 100.0
        );
        assert!(samples >= 100, "Java {}: {samples} samples", jdk.major);
        assert!(
            main >= 0.99 && whole >= 0.99,
            "Java {}: {branches:?}",
            jdk.major
        );
    }
}

/// The WhiteBox class, alone in a folder for -Xbootclasspath/a.
fn white_box() -> PathBuf {
    let boot = target_dir().join(format!("whitebox-{}", std::process::id()));
    let dir = boot.join("jdk/test/whitebox");
    std::fs::create_dir_all(&dir).expect("a folder for WhiteBox");
    std::fs::copy(
        workload_classes().join("jdk/test/whitebox/WhiteBox.class"),
        dir.join("WhiteBox.class"),
    )
    .expect("the compiled WhiteBox class");
    boot
}

/// The tid of the thread of `pid` named `name`. A Java thread names its OS thread itself once it
/// runs, which may be after the workload printed READY: polled for up to 30 s.
fn thread_named(pid: u32, name: &str) -> u32 {
    for _ in 0..300 {
        let found = std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .find(|tid| {
                std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
                    .is_ok_and(|comm| comm.trim_end() == name)
            });
        if let Some(tid) = found {
            return tid;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("JVM {pid} has no thread named {name}");
}

/// How many samples of one thread the walk tests look at.
const THREAD_SAMPLES: usize = 100;

/// The first [`THREAD_SAMPLES`] samples of the JVM thread named `name`, walked the `walk` way.
/// Sampled for as long as it takes (up to a minute): on a loaded machine the thread may get a
/// small share of a CPU. The JVM is registered with the stack walker first, as the profiler does.
fn thread_samples(jvm: &Jvm, name: &str, walk: Walk) -> (HotSpot, Vec<Sample>) {
    let tid = thread_named(jvm.pid(), name);
    let sampler = Sampler::with_walk(RATE_HZ, walk)
        .unwrap_or_else(|e| panic!("these tests load BPF programs and need root: {e}"));
    let hotspot = HotSpot::open(jvm.pid()).expect("read the JVM");
    let _walked = WalkedJvm::register(&sampler, &hotspot).expect("the walker takes the JVM");
    sampler.track(jvm.pid()).expect("track the JVM");
    let mut samples = Vec::new();
    for _ in 0..600 {
        if samples.len() >= THREAD_SAMPLES {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        samples.extend(
            sampler
                .samples()
                .try_iter()
                .flatten()
                .filter(|s| s.tid == tid),
        );
    }
    assert!(
        samples.len() >= THREAD_SAMPLES,
        "only {} samples of {name} in a minute",
        samples.len()
    );
    samples.truncate(THREAD_SAMPLES);
    (hotspot, samples)
}

/// The Java frames of `sample`, named (`Class.method`; compiled ones by their outer method),
/// newest first.
fn java_frames(hotspot: &HotSpot, sample: &Sample) -> Vec<String> {
    sample
        .frames
        .iter()
        .filter_map(|frame| {
            let method = match frame.kind {
                FrameKind::Interpreted { method } => hotspot.method(method),
                FrameKind::Compiled { .. } => hotspot
                    .compiled_method_at(frame.lookup_pc())
                    .map(|compiled| compiled.method),
                _ => return None,
            };
            Some(method.map_or("?".into(), |m| format!("{}.{}", m.class, m.name)))
        })
        .collect()
}

#[test]
fn a_nine_deep_java_chain_is_walked_whole_without_frame_pointers() {
    let _serial = serial();
    assert_eq!(Walk::detect(), Walk::BpfLoop, "this kernel has bpf_loop");
    let chain: Vec<String> = (1..=9).rev().map(|i| format!("SamplerDeep.d{i}")).collect();
    for jdk in all_jdks() {
        for tier in [&["-Xint"][..], &["-XX:TieredStopAtLevel=1"], &[]] {
            let jvm = Jvm::start(&jdk, tier, "SamplerDeep", &[]);
            // Both ways of walking: bpf_loop, and the bounded loop that kernels before 5.17 get.
            for walk in [Walk::BpfLoop, Walk::Bounded] {
                let (hotspot, samples) = thread_samples(&jvm, "Deep", walk);
                let whole = samples
                    .iter()
                    .filter(|s| {
                        let frames = java_frames(&hotspot, s);
                        s.end == WalkEnd::Entry
                            && frames.starts_with(&chain)
                            && frames.last().map(String::as_str) == Some("java.lang.Thread.run")
                    })
                    .count();
                println!(
                    "Java {} {tier:?} ({walk:?}): {whole} of {} walks whole",
                    jdk.major,
                    samples.len()
                );
                assert!(
                    whole * 100 >= samples.len() * 99,
                    "Java {} {tier:?} ({walk:?}): {whole} of {} walks whole; one was {:?}",
                    jdk.major,
                    samples.len(),
                    samples.iter().map(|s| java_frames(&hotspot, s)).next()
                );
            }
        }
    }
}

#[test]
fn deoptimised_and_osr_frames_lose_nothing() {
    let _serial = serial();
    let boot = format!("-Xbootclasspath/a:{}", white_box().display());
    let flags = [
        "-XX:+UnlockDiagnosticVMOptions",
        "-XX:+WhiteBoxAPI",
        "-XX:-PrintWarnings",
        &boot,
    ];
    for jdk in all_jdks() {
        let jvm = Jvm::start(&jdk, &flags, "UnwindDeopt", &[]);
        let sampler = Sampler::new(RATE_HZ).expect("these tests load BPF programs and need root");
        let hotspot = HotSpot::open(jvm.pid()).expect("read the JVM");
        let mut walked = WalkedJvm::register(&sampler, &hotspot).expect("the walker takes it");
        sampler.track(jvm.pid()).expect("track the JVM");
        let (deopt, osr) = (
            thread_named(jvm.pid(), "deopt"),
            thread_named(jvm.pid(), "osr"),
        );
        let mut samples: Vec<Sample> = Vec::new();
        let mut names: HashMap<u32, Vec<Vec<String>>> = HashMap::new();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(100));
            for sample in sampler.samples().try_iter().flatten() {
                walked.saw(&sample);
                if sample.tid == deopt || sample.tid == osr {
                    // Named at once: deoptimised code is freed soon after.
                    names
                        .entry(sample.tid)
                        .or_default()
                        .push(java_frames(&hotspot, &sample));
                    samples.push(sample);
                }
            }
            walked.refresh(&sampler, &hotspot);
        }
        for (tid, name, bottom) in [
            (deopt, "deopt", "UnwindDeopt.loop"),
            (osr, "osr", "UnwindDeopt.osr"),
        ] {
            let of_thread: Vec<&Sample> = samples.iter().filter(|s| s.tid == tid).collect();
            let whole = of_thread.iter().filter(|s| s.end == WalkEnd::Entry).count();
            let reach = names[&tid]
                .iter()
                .filter(|frames| {
                    frames.ends_with(&[bottom.to_string(), "java.lang.Thread.run".to_string()])
                        || frames.contains(&bottom.to_string())
                            && frames.last().map(String::as_str) == Some("java.lang.Thread.run")
                })
                .count();
            println!(
                "Java {} {name}: {whole} of {} walks whole, {reach} reach {bottom} and Thread.run",
                jdk.major,
                of_thread.len()
            );
            assert!(of_thread.len() >= 100, "Java {}: {name}", jdk.major);
            assert!(
                whole * 100 >= of_thread.len() * 99,
                "Java {} {name}",
                jdk.major
            );
            assert!(
                reach * 100 >= of_thread.len() * 99,
                "Java {} {name}",
                jdk.major
            );
        }
        // Frames whose return address was redirected to their deoptimisation handler: their
        // original pc is recorded, and names the method that was running there.
        let deoptimised: Vec<String> = samples
            .iter()
            .zip(samples.iter().map(|s| java_frames(&hotspot, s)))
            .filter(|(s, _)| s.frames.iter().any(|f| f.deoptimized))
            .map(|(_, frames)| frames.join(";"))
            .collect();
        println!(
            "Java {}: {} samples with a deoptimised frame, e.g. {:?}",
            jdk.major,
            deoptimised.len(),
            deoptimised.first()
        );
        assert!(
            !deoptimised.is_empty(),
            "Java {}: no deoptimised frame seen",
            jdk.major
        );
        drop(jvm);
    }
}

//! `joularcode-bpf stacks` and the profiling session against real JVMs (JDK 17, 21 and 25): Java
//! frames named in every tier (interpreted, C1, C2 with inlined methods), lambdas, classes
//! unloaded while sampling, attach to a running JVM, JVMs that refuse attach, the JVM's own
//! threads, exit codes.
//!
//! They load the BPF sampler (root), run JVMs and measure CPU, so they are serialised by one
//! lock; they fail, saying so, when something is missing.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use joularcode_bpf::hotspot::HotSpot;
use joularcode_bpf::jit::codemap::CodeMap;
use joularcode_bpf::resolve::{JitNames, ResolveStats, Resolver};
use joularcode_bpf::sampler::{Sampler, WalkedJvm};
use joularcode_bpf::session::{Session, SessionOptions, Targets};
use joularcode_bpf::thread_names;
use joularcode_core::branch::Branches;
use joularcode_core::log::Recorded;
use joularcode_testkit::procfs::{busiest_thread_seconds, children, cpu_ticks};
use joularcode_testkit::profiler::{
    java_command, run_stacks, run_stacks_until, with_command, End, StacksRun,
};
use joularcode_testkit::{
    agent_library, all_jdks, one_at_a_time, workload_classes, Jdk, Jvm, JIT_MODES, STACKS_CHAIN,
};

mod handles;
mod unload;

/// The tests load the BPF sampler, run JVMs and measure CPU: one at a time.
fn serial() -> MutexGuard<'static, ()> {
    one_at_a_time("the stacks tests load the BPF sampler")
}

/// The sampling rate of these tests: five times the default, so that a thread that gets a small
/// share of a CPU on a loaded machine still gives enough samples to judge how they are named.
const RATE_HZ: u64 = 500;

/// Runs `joularcode-bpf stacks ARGS` at [`RATE_HZ`].
fn stacks(args: &[&str]) -> StacksRun {
    run_stacks(
        Path::new(env!("CARGO_BIN_EXE_joularcode-bpf")),
        RATE_HZ,
        args,
    )
}

/// Runs `joularcode-bpf stacks ARGS` at [`RATE_HZ`] until `enough` holds once it samples (a
/// minute at most), then ends it as `end` says.
fn stacks_until(args: &[&str], end: End, mut enough: impl FnMut() -> bool) -> StacksRun {
    run_stacks_until(
        Path::new(env!("CARGO_BIN_EXE_joularcode-bpf")),
        RATE_HZ,
        args,
        (end, Duration::from_secs(60)),
        |_| enough(),
    )
}

/// Runs `joularcode-bpf stacks ARGS -- <command>` (a workload run with `stdin`) at [`RATE_HZ`]
/// until the busiest thread of the JVM it launched has run `seconds` of CPU time while sampled (a
/// minute at most), then closes its standard input, on which the workload ends normally.
fn stacks_launched(args: &[&str], command: &[String], seconds: f64) -> StacksRun {
    let mut sampled_from = None;
    run_stacks_until(
        Path::new(env!("CARGO_BIN_EXE_joularcode-bpf")),
        RATE_HZ,
        &with_command(args, command),
        (End::EndOfInput, Duration::from_secs(60)),
        |stacks| {
            let Some(&jvm) = children(stacks).first() else {
                return false;
            };
            let now = cpu_ticks(jvm);
            busiest_thread_seconds(sampled_from.get_or_insert_with(|| now.clone()), &now) >= seconds
        },
    )
}

fn java(jdk: &Jdk, jvm_args: &[&str], main: &str, args: &[&str]) -> Vec<String> {
    java_command(jdk, jvm_args, main, args)
}

fn session_options() -> SessionOptions {
    let mut options = SessionOptions::new(Arc::new(Recorded::default()));
    options.agent_path = Some(agent_library().to_path_buf());
    options.rate_hz = RATE_HZ;
    options
}

/// What one run of StacksChain in a session gave.
struct ChainRun {
    /// The JVM's pid.
    pid: u32,
    /// The share of its busiest thread's samples that show the whole chain.
    share: f64,
    /// The share of them whose stack is whole: the chain, or the start of it (a sample in the
    /// code of `run` or of an outer method of the chain, or in the `System.nanoTime` that `run`
    /// calls), every frame named.
    whole: f64,
    /// The busiest thread's samples.
    samples: u64,
    /// What resolving met.
    stats: ResolveStats,
    /// The busiest thread's other branches, the most frequent first.
    others: Vec<(String, u64)>,
    /// The agent's code map, read while the JVM ran (its agent removes it when it ends).
    map: CodeMap,
}

/// A pipe: its read end, its write end (neither inherited by the processes started).
fn pipe() -> (std::fs::File, std::fs::File) {
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("a pipe");
    (read.into(), write.into())
}

/// How many samples of StacksChain's JVM a session measures: at [`RATE_HZ`], 2 s of its main
/// thread's CPU time, however long a loaded machine takes to give it that.
const CHAIN_SAMPLES: u64 = 1000;

/// Launches StacksChain in a session, forgets what was sampled until it printed READY (the JVM's
/// start) and `warm_up` samples more, measures until [`CHAIN_SAMPLES`] more are in (or a minute),
/// then closes its standard input, on which it ends normally (what it does from then on is not
/// counted).
fn chain_run(jdk: &Jdk, jvm_args: &[&str], warm_up: u64) -> ChainRun {
    let (stdin, input) = pipe();
    let (stdout, writer) = pipe();
    let mut command = Command::new(jdk.java());
    command
        .args(jvm_args)
        .arg("-cp")
        .arg(workload_classes())
        .args(["StacksChain", "60", "stdin"])
        .stdin(stdin)
        .stdout(writer);
    let mut session =
        Session::start(Targets::Launch(command), &session_options()).expect("session starts");
    let ready = joularcode_testkit::line_starting_with(stdout, "READY");
    let start = Instant::now();
    while ready.try_recv().is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(60) && !session.finished(),
            "Java {}: StacksChain did not print READY",
            jdk.major
        );
        session.pump(Duration::from_millis(100)).expect("pump");
    }
    let sampled = |session: &Session| session.jvms().map(|jvm| jvm.stats().samples).sum::<u64>();
    let ready = sampled(&session);
    while sampled(&session) < ready + warm_up && !session.finished() {
        session.pump(Duration::from_millis(100)).expect("pump");
    }
    session.take_counts();
    let before = sampled(&session);
    let (mut input, mut map, mut measured) = (Some(input), None, None);
    while !session.finished() {
        session.pump(Duration::from_millis(100)).expect("pump");
        if measured.is_none() && sampled(&session) >= before + CHAIN_SAMPLES {
            // What the main thread does once its input ends (the `"DONE " + sink` call site
            // bootstrapped, interpreted under -Xint; the JVM's exit) is not the chain
            measured = Some(session.take_counts());
            drop(input.take());
        }
        let pid = session.jvms().next().map(|jvm| jvm.pid());
        if let Some(map) = map.get_or_insert_with(|| pid.map(|pid| CodeMap::of_process(pid, pid))) {
            let _ = map.refresh(u64::MAX);
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    session.pump(Duration::ZERO).expect("pump");
    assert_eq!(session.launched_exit(), Some(0), "StacksChain exit code");
    let counts = measured.unwrap_or_else(|| session.take_counts());
    assert_eq!(counts.len(), 1, "one JVM: {:?}", counts.keys());
    let (&pid, threads) = counts.iter().next().expect("one JVM");
    let jvm = session.jvm(pid).expect("the JVM");
    let busiest = threads
        .values()
        .max_by_key(|t| t.counts.values().sum::<u64>())
        .expect("a sampled thread");
    let total: u64 = busiest.counts.values().sum();
    let full: u64 = busiest
        .counts
        .iter()
        .filter(|(&branch, _)| jvm.branches().name(branch) == STACKS_CHAIN)
        .map(|(_, count)| count)
        .sum();
    let whole: u64 = busiest
        .counts
        .iter()
        .filter(|(&branch, _)| {
            let name = jvm.branches().name(branch);
            let stack = name
                .strip_suffix(";java.lang.System.nanoTime")
                .unwrap_or(name);
            stack.starts_with("StacksChain.main;StacksChain.run")
                && STACKS_CHAIN
                    .strip_prefix(stack)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(';'))
        })
        .map(|(_, count)| count)
        .sum();
    let mut others: Vec<(String, u64)> = busiest
        .counts
        .iter()
        .map(|(&branch, &count)| (jvm.branches().name(branch).to_string(), count))
        .filter(|(name, _)| name != STACKS_CHAIN)
        .collect();
    others.sort_by_key(|(_, count)| std::cmp::Reverse(*count));
    let mut map = map.flatten().expect("the JVM was seen while it ran");
    map.refresh(u64::MAX)
        .expect("the agent's code map, read to its end");
    ChainRun {
        pid,
        share: full as f64 / total as f64,
        whole: whole as f64 / total as f64,
        samples: total,
        stats: jvm.stats(),
        others,
        map,
    }
}

impl ChainRun {
    /// Checks that at least 90% of the samples show the chain, and at least `whole` of them are
    /// whole stacks (see [`ChainRun::whole`]).
    fn assert_chain(&self, jdk: &Jdk, mode: &str, whole: f64) {
        let (share, samples, stats) = (self.share, self.samples, self.stats);
        eprintln!(
            "Java {} {mode}: {:.1}% of {samples} samples show the chain, {:.1}% are whole; {stats:?}",
            jdk.major,
            share * 100.0,
            self.whole * 100.0
        );
        assert!(
            samples >= 50,
            "Java {} {mode}: {samples} samples",
            jdk.major
        );
        assert!(
            share >= 0.9 && self.whole >= whole,
            "Java {} {mode}: {:.1}% of the main thread's samples show the chain, {:.1}% are whole; \
             others: {:?}",
            jdk.major,
            share * 100.0,
            self.whole * 100.0,
            &self.others[..self.others.len().min(8)]
        );
    }
}

#[test]
fn the_chain_is_named_interpreted_with_c1_and_with_c2_inlining() {
    let _serial = serial();
    for jdk in all_jdks() {
        for (mode, jvm_args) in JIT_MODES {
            // Until the JIT has compiled the chain: about 1.5 s of the main thread's CPU time.
            let run = chain_run(&jdk, jvm_args, 750);
            // Without -XX:+PreserveFramePointer (launched JVMs do not get it).
            run.assert_chain(&jdk, mode, 0.99);
            let (samples, stats) = (run.samples, run.stats);
            match mode {
                "interpreted" => assert_eq!(stats.inlined_frames, 0, "Java {}", jdk.major),
                _ => assert!(
                    stats.inlined_frames > samples,
                    "Java {} {mode}: inlined frames come from the agent: {stats:?}",
                    jdk.major
                ),
            }
        }
    }
}

/// How long StacksChain's main thread runs under `stacks --pid`: at [`RATE_HZ`], about 1,000
/// samples, however long a loaded machine takes to give them.
const RUNNING_CPU_S: f64 = 2.0;

/// Starts StacksChain with `flags`, lets its main thread run `warm_up_s` seconds of CPU time after
/// READY, then profiles it by pid until that thread has run [`RUNNING_CPU_S`] more once sampled
/// (a minute at most): the samples taken while the agent attaches (named from the code cache, outer methods
/// only) are a small part of them even on a loaded machine, where attaching takes longer.
fn profile_running(jdk: &Jdk, flags: &[&str], warm_up_s: f64) -> StacksRun {
    let jvm = Jvm::start(jdk, flags, "StacksChain", &[]);
    let pid = jvm.pid();
    let ran = |since: &_| busiest_thread_seconds(since, &cpu_ticks(pid));
    let ready = cpu_ticks(pid);
    let start = Instant::now();
    while ran(&ready) < warm_up_s && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut sampled_from = None;
    let run = stacks_until(&["--pid", &pid.to_string()], End::Interrupt, || {
        ran(sampled_from.get_or_insert_with(|| cpu_ticks(pid))) >= RUNNING_CPU_S
    });
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    run
}

/// Checks that at least `share` of the samples of StacksChain's main thread are `stack` (or
/// longer stacks that start with it).
fn assert_main_share(run: &StacksRun, jdk: &Jdk, stack: &str, share: f64) {
    let main = run.samples("StacksChain.main");
    let found = run.samples(stack);
    eprintln!(
        "Java {}: {found} of {main} samples of main are {stack}",
        jdk.major
    );
    assert!(
        main >= 50 && found as f64 >= share * main as f64,
        "Java {}: {found} of {main} samples of main are {stack}\n{}",
        jdk.major,
        run.stderr
    );
}

#[test]
fn a_method_recompiled_at_a_higher_tier_keeps_its_names() {
    let _serial = serial();
    for jdk in all_jdks() {
        // Tiered compilation, measured from about 0.2 s of the main thread's CPU time after
        // READY on (half a second after the launch on a quiet machine): C1, then C2 code.
        // While the tiers change, fresh code may not be named yet.
        let run = chain_run(&jdk, &[], 100);
        run.assert_chain(&jdk, "tiered", 0.9);
        let copies = |name: &str| {
            let code = run.map.iter();
            code.filter(|code| code.frames().eq([name])).count()
        };
        let (leaf, run_copies) = (copies("StacksChain.leaf"), copies("StacksChain.run"));
        assert!(
            leaf >= 2 || run_copies >= 2,
            "Java {}: compiled copies: leaf {leaf}, run {run_copies}",
            jdk.major
        );
        let path = format!("/tmp/joularcode-{}.map", run.pid);
        assert!(
            !Path::new(&path).exists(),
            "Java {}: the agent removes {path} when the JVM ends",
            jdk.major
        );
    }
}

#[test]
fn a_running_jvm_gets_the_agent_and_its_compiled_code_named() {
    let _serial = serial();
    for jdk in all_jdks() {
        // Let the JIT compile the chain before the agent comes.
        let run = profile_running(&jdk, &[], 1.0);
        assert_main_share(&run, &jdk, STACKS_CHAIN, 0.85);
        assert_eq!(run.said("cannot be loaded"), 0, "{}", run.stderr);
        assert_eq!(run.said("PreserveFramePointer"), 0, "{}", run.stderr);
    }
}

#[test]
fn a_jvm_that_refuses_attach_is_named_from_its_code_cache() {
    let _serial = serial();
    for jdk in all_jdks() {
        let flags = ["-XX:+DisableAttachMechanism"];
        let run = profile_running(&jdk, &flags, 1.0);
        // The chain is compiled into run (inlined): without the agent, named from run's scopes
        // (measured: 99% of main's samples the whole chain on each JDK).
        assert_main_share(&run, &jdk, "StacksChain.main;StacksChain.run", 0.99);
        assert_main_share(&run, &jdk, STACKS_CHAIN, 0.9);
        assert_eq!(run.said("DisableAttachMechanism"), 1, "{}", run.stderr);
        let fallback = run.said("from its code cache (VMStructs)");
        assert_eq!(fallback, 1, "{}", run.stderr);

        // Interpreted frames need nothing: the whole chain, and nothing to say about frame
        // pointers.
        let flags = ["-XX:+DisableAttachMechanism", "-Xint"];
        let run = profile_running(&jdk, &flags, 0.0);
        assert_main_share(&run, &jdk, STACKS_CHAIN, 0.9);
        assert_eq!(run.said("PreserveFramePointer"), 0, "{}", run.stderr);
    }
}

#[test]
fn a_jvm_that_refuses_agents_is_named_from_its_code_cache_and_perf_map() {
    let _serial = serial();
    for jdk in [joularcode_testkit::jdk(21), joularcode_testkit::jdk(25)] {
        let flags = ["-XX:-EnableDynamicAgentLoading"];
        let run = profile_running(&jdk, &flags, 1.0);
        assert_main_share(&run, &jdk, "StacksChain.main;StacksChain.run", 0.99);
        assert_eq!(run.said("EnableDynamicAgentLoading"), 1, "{}", run.stderr);
        let fallback = run.said("from its code cache and its perf map (Compiler.perfmap)");
        assert_eq!(fallback, 1, "{}", run.stderr);
    }
}

/// A launched JVM is read within milliseconds of mapping libjvm.so: until then its stacks are
/// walked by frame pointers, which compiled code does not keep, and a sample of FixedWork.unit's
/// first compiled code (on-stack replacement, a few milliseconds after the start) lacks its
/// caller. JFR puts every sample of unit under main: here at most 4% of them may lack it (7%
/// did when the JVM was looked for at each of the session's passes only; with three busy loops
/// and two other tests beside it, 2.3% at most).
#[test]
fn a_launched_jvm_is_walked_whole_from_its_first_moments() {
    let _serial = serial();
    for jdk in all_jdks() {
        let command = java(&jdk, &[], "FixedWork", &["1", "1200"]);
        let run = stacks(&with_command(&[], &command));
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        let unit = run.samples_where(|stack| stack.ends_with("FixedWork.unit"));
        let alone = run.samples_where(|stack| stack == "FixedWork.unit");
        eprintln!(
            "Java {}: {alone} of {unit} samples of FixedWork.unit lack its caller",
            jdk.major
        );
        assert!(
            unit >= 500 && alone * 100 <= unit * 4,
            "Java {}: {alone} of {unit} samples of FixedWork.unit lack its caller: {:?}",
            jdk.major,
            run.folded
        );
    }
}

#[test]
fn lambdas_are_named_as_java_names_their_hidden_classes() {
    let _serial = serial();
    for jdk in all_jdks() {
        // Until its worker has run 1 s of CPU time while sampled.
        let command = java(&jdk, &[], "StacksLambda", &["60", "stdin"]);
        let run = stacks_launched(&[], &command, 1.0);
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        let lambda = run
            .stdout
            .lines()
            .find_map(|line| line.strip_prefix("READY "))
            .and_then(|rest| rest.split(' ').nth(1))
            .expect("READY <pid> <lambda class>")
            .to_string();
        assert!(
            lambda.contains("$$Lambda") && lambda.contains("/0x"),
            "{lambda}"
        );
        let frames = format!("{lambda}.run;StacksLambda.lambda$main$0;StacksLambda.spin");
        let found = run.folded.iter().any(|(stack, _)| stack.contains(&frames));
        eprintln!(
            "Java {}: {} of {} samples hold {frames}",
            jdk.major,
            run.samples_where(|stack| stack.contains(&frames)),
            run.total()
        );
        assert!(
            found,
            "Java {}: no stack holds {frames}:\n{:?}",
            jdk.major, run.folded
        );
    }
}

#[test]
fn jvm_threads_are_classified_and_native_frames_named() {
    let _serial = serial();
    for jdk in all_jdks() {
        // Until an allocating thread has run 0.5 s of CPU time while sampled (the collector's
        // threads run a lot meanwhile).
        let command = java(&jdk, &["-Xmx64m"], "StacksAlloc", &["60", "stdin"]);
        let run = stacks_launched(&["--native"], &command, 0.5);
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        let gc = run.samples("[GC]");
        eprintln!("Java {}: {gc} [GC] samples of {}", jdk.major, run.total());
        assert!(
            gc > 0,
            "Java {}: no [GC] samples: {:?}",
            jdk.major,
            run.folded
        );
        let demangled = run
            .folded
            .iter()
            .any(|(stack, _)| stack.starts_with("[GC];") && stack.contains("::"));
        assert!(
            demangled,
            "Java {}: GC threads' libjvm frames are named",
            jdk.major
        );
        assert!(
            run.folded
                .iter()
                .any(|(stack, _)| stack.ends_with("StacksAlloc.lambda$main$0")),
            "{:?}",
            run.folded
        );
        assert_eq!(run.said("frames [unknown]"), 1, "{}", run.stderr);
    }
}

#[test]
fn every_jvm_gets_a_root_frame_with_all() {
    let _serial = serial();
    let jdk = joularcode_testkit::jdk(21);
    let jvms: Vec<Jvm> = (0..2)
        .map(|_| Jvm::start(&jdk, &[], "StacksChain", &[]))
        .collect();
    let run = stacks(&["--all", "--no-attach", "--duration", "3"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    for jvm in &jvms {
        let root = format!(
            "[{} StacksChain];StacksChain.main;StacksChain.run",
            jvm.pid()
        );
        assert!(run.samples(&root) >= 20, "{root}: {:?}", run.folded);
    }
}

#[test]
fn exit_codes_and_errors() {
    let _serial = serial();
    let run = stacks(&["--", "sh", "-c", "exit 3"]);
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    assert!(run.folded.is_empty());

    let me = std::process::id();
    let run = stacks(&["--pid", &me.to_string()]);
    assert_eq!(run.code, Some(1));
    assert_eq!(
        run.stderr.trim_end(),
        format!("joularcode-bpf: process {me} is not a JVM (it does not map libjvm.so)")
    );

    let run = stacks(&["--pid", "4000000"]);
    assert_eq!(run.code, Some(1));
    assert_eq!(
        run.stderr.trim_end(),
        "joularcode-bpf: process 4000000 does not exist"
    );

    let unprivileged = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_joularcode-bpf"))
        .args(["stacks", "--all", "--duration", "1"])
        .output()
        .expect("run setpriv (util-linux)");
    let stderr = String::from_utf8_lossy(&unprivileged.stderr);
    assert_eq!(unprivileged.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("needs root"), "{stderr}");

    let missing = Path::new("/nonexistent/libjvm_symbolizer_agent.so");
    let run = stacks(&["--agent-path", &missing.display().to_string(), "--", "true"]);
    assert_eq!(run.code, Some(1));
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(run.stderr.contains("--agent-path"), "{}", run.stderr);
}

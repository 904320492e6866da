//! One name per method, whichever way it is named, on JDK 17, 21 and 25: a lambda and its body,
//! a class defined by Lookup.defineHiddenClass, a static nested and an anonymous class, a generic
//! method, and methods of classes in the unnamed and in a named module (NamingKinds), named by
//! the JVM's own data (VMStructs: nmethods and Method*s), the symbolizer agent's code map and perf
//! map, the JDK's perf map (Compiler.perfmap) and the profiler's stacks, each compared with the
//! name Java gives them (Class.getName). JFR's names of the same workload are compared in
//! record's tests (`record.rs`).
//!
//! They run JVMs and load the BPF sampler (root), and judge names only; they fail, saying so,
//! when something is missing.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use joularcode_bpf::hotspot::{CompiledFrame, HotSpot};
use joularcode_bpf::jit::codemap::CodeMap;
use joularcode_bpf::jit::perfmap::PerfMap;
use joularcode_bpf::sampler::monotonic_ns;
use joularcode_testkit::branches::{
    assert_same_names, frames_of, java_names, naming_module_options,
};
use joularcode_testkit::profiler::{java_command, run_stacks, with_command};
use joularcode_testkit::{agent_library, all_jdks, one_at_a_time, Jdk, Jvm};

/// The tests run JVMs and load the BPF sampler: one at a time.
fn serial() -> MutexGuard<'static, ()> {
    one_at_a_time("the naming tests load the BPF sampler")
}

#[test]
fn stacks_name_every_kind_of_method_as_java_does() {
    let _serial = serial();
    for jdk in all_jdks() {
        for (mode, flags) in [("tiered", &[][..]), ("interpreted", &["-Xint"][..])] {
            let mut options: Vec<String> = naming_module_options().to_vec();
            options.extend(flags.iter().map(|flag| flag.to_string()));
            let options: Vec<&str> = options.iter().map(String::as_str).collect();
            let command = java_command(&jdk, &options, "NamingKinds", &["4"]);
            let run = run_stacks(
                Path::new(env!("CARGO_BIN_EXE_joularcode-bpf")),
                500,
                &with_command(&[], &command),
            );
            let what = format!("Java {} {mode}", jdk.major);
            assert_eq!(run.code, Some(0), "{what}: {}", run.stderr);
            let expected = java_names(&run.stdout);
            let ours = frames_of(run.folded.iter().map(|(stack, _)| stack.as_str()));
            assert_same_names(&format!("{what}, stacks"), &expected, &ours);
            eprintln!("{what}: stacks name {expected:?} as Java does");
        }
    }
}

/// The code the JVM has compiled for the methods of `names` now, from its code cache.
fn compiled(hotspot: &HotSpot, names: &BTreeSet<String>) -> Vec<(String, CompiledFrame)> {
    hotspot
        .compiled_methods()
        .into_iter()
        .map(|code| (format!("{}.{}", code.method.class, code.method.name), code))
        .filter(|(name, _)| names.contains(name))
        .collect()
}

#[test]
fn every_naming_path_gives_one_method_one_name() {
    let _serial = serial();
    let agent = format!("-agentpath:{}=perfmap=yes", agent_library().display());
    for jdk in all_jdks() {
        let mut options: Vec<String> = naming_module_options().to_vec();
        options.push(agent.clone());
        let options: Vec<&str> = options.iter().map(String::as_str).collect();
        let mut jvm = Jvm::start(&jdk, &options, "NamingKinds", &["60"]);
        let mut output = String::new();
        loop {
            let line = jvm.wait_for_line("N", Duration::from_secs(60));
            if line == "NAMES END" {
                break;
            }
            output.push_str(&line);
            output.push('\n');
        }
        output.push_str("MODULE naming.mod\n");
        let expected = java_names(&output);
        let hotspot = HotSpot::open(jvm.pid()).expect("open the JVM");
        assert_paths_agree(&jdk, &hotspot, &expected);
    }
}

/// Waits until the code cache holds compiled code of the methods of `expected`, then checks, for
/// each piece of it that stays until the maps are read, that the code map, the agent's perf map
/// and the JDK's perf map give the code at its middle the same name as its nmethod's Method*,
/// which is the name Java gives the method.
fn assert_paths_agree(jdk: &Jdk, hotspot: &HotSpot, expected: &BTreeSet<String>) {
    let pid = hotspot.pid();
    let start = Instant::now();
    let mut code = compiled(hotspot, expected);
    // The lambda's body is compiled into its caller, and may never be compiled on its own.
    let must: BTreeSet<&String> = expected
        .iter()
        .filter(|name| !name.contains("lambda$"))
        .collect();
    while !must
        .iter()
        .all(|name| code.iter().any(|(compiled, _)| compiled == *name))
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "Java {}: compiled after a minute: {:?}",
            jdk.major,
            code.iter().map(|(name, _)| name).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(200));
        code = compiled(hotspot, expected);
    }
    // HotSpot reports compiled code to the agent after installing it, and the agent writes its
    // maps every 20 ms: what the code cache holds now is in them within a moment.
    std::thread::sleep(Duration::from_millis(500));
    let mut map = CodeMap::of_process(pid, pid);
    map.refresh(u64::MAX).expect("the agent's code map");
    let agent_perf_map =
        PerfMap::read(Path::new(&format!("/tmp/perf-{pid}.map"))).expect("the agent's perf map");
    let target = joularcode_bpf::attach::JvmProcess::new(pid).expect("a JVM");
    let jdk_perf_map = target.perf_map().expect("Compiler.perfmap");
    let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
    let now = monotonic_ns();
    let still: BTreeSet<u32> = compiled(hotspot, expected)
        .into_iter()
        .map(|(_, code)| code.compile_id)
        .collect();
    let mut checked = BTreeSet::new();
    for (name, code) in code.iter().filter(|(_, c)| still.contains(&c.compile_id)) {
        let pc = code.code_begin + (code.code_end - code.code_begin) / 2;
        let by_map = map
            .lookup(pc, now)
            .and_then(|frames| frames.frames().next().map(str::to_string));
        let by_agent = agent_perf_map.lookup(pc).map(|e| e.name.clone());
        let by_jdk = jdk_perf_map.lookup(pc).map(|e| e.name.clone());
        let names = [by_map.as_deref(), by_agent.as_deref(), by_jdk.as_deref()];
        assert_eq!(
            names,
            [Some(name.as_str()); 3],
            "Java {}: compiled code of {name} at {pc:#x} (code map, agent's perf map, JDK's perf \
             map)",
            jdk.major
        );
        checked.insert(name.clone());
    }
    eprintln!(
        "Java {}: VMStructs, the code map, the agent's and the JDK's perf maps name {checked:?} \
         alike",
        jdk.major
    );
    let unchecked: Vec<&&String> = must.iter().filter(|n| !checked.contains(**n)).collect();
    assert!(
        unchecked.is_empty(),
        "Java {}: no code of {unchecked:?} stayed while the maps were read",
        jdk.major
    );
}

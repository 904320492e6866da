//! Code of classes unloaded while sampling never names a later sample.

use super::*;

/// `PHASE <class> <start> <end>` lines: when each payload class ran.
fn phases(jvm: &mut Jvm) -> Vec<(String, u64, u64)> {
    let mut phases = Vec::new();
    loop {
        let line = jvm.wait_for_line("P", Duration::from_secs(60));
        let fields: Vec<&str> = line.split(' ').collect();
        match fields[..] {
            ["PHASE", class, start, end] => phases.push((
                class.to_string(),
                start.parse().expect("start"),
                end.parse().expect("end"),
            )),
            _ => return phases,
        }
    }
}

#[test]
fn code_of_unloaded_classes_never_names_a_later_sample() {
    let _serial = serial();
    for jdk in all_jdks() {
        let agent = format!("-agentpath:{}", agent_library().display());
        let mut jvm = Jvm::start(&jdk, &[&agent], "StacksUnload", &["12"]);
        let pid = jvm.pid();
        let sampler = Sampler::new(1000).expect("sampler");
        sampler.track(pid).expect("track");
        let hotspot = HotSpot::open(pid).expect("open the JVM");
        let _walked = WalkedJvm::register(&sampler, &hotspot).expect("the walker takes the JVM");
        let map = CodeMap::of_process(pid, pid);
        let mut resolver = Resolver::new(hotspot, JitNames::Agent(Box::new(map)), false);
        let mut branches = Branches::new(&[] as &[&str]);
        let mut named: Vec<(u64, String, String)> = Vec::new();
        let reader = std::thread::spawn(move || phases(&mut jvm));
        while !reader.is_finished() {
            let batch: Vec<_> = sampler
                .samples()
                .recv_timeout(Duration::from_millis(100))
                .into_iter()
                .chain(sampler.samples().try_iter())
                .flatten()
                .collect();
            // The JVM ends after its last phase: its map is gone then.
            let _ = resolver.refresh(u64::MAX);
            for sample in batch.iter().filter(|s| s.pid == pid) {
                // As the session does: the JVM's own threads are not walked for Java frames.
                let name = thread_names::thread_name(pid, sample.tid).unwrap_or_default();
                let thread = thread_names::classify(&name);
                let branch = resolver.resolve(sample, thread, &mut branches).branch;
                for class in ["StacksUnloadA", "StacksUnloadB"] {
                    let stack = branches.name(branch);
                    if stack.contains(&format!("{class}.work")) {
                        let what = format!("{class} thread {} {name:?}: {stack}", sample.tid);
                        named.push((sample.time_ns, class.to_string(), what));
                    }
                }
            }
        }
        let phases = reader.join().expect("phases read");
        let JitNames::Agent(map) = resolver.jit() else {
            panic!("the agent's code map names compiled code")
        };
        assert!(
            map.len() > 100,
            "Java {}: {} pieces of code",
            jdk.major,
            map.len()
        );
        let work_code: Vec<_> = map
            .iter()
            .filter(|code| code.frames().any(|f| f.ends_with(".work")))
            .map(|code| (code.start, code.load_ns, code.unload_ns))
            .collect();
        let unloaded = work_code
            .iter()
            .filter(|(_, _, unload)| unload.is_some())
            .count();
        let reused = work_code.iter().filter(|(start, load, _)| {
            work_code
                .iter()
                .any(|(s, l, unload)| s == start && l < load && unload.is_some())
        });
        eprintln!(
            "Java {}: {} compiled copies of work, {unloaded} unloaded, {} at a reused address",
            jdk.major,
            work_code.len(),
            reused.count()
        );
        assert!(
            unloaded > 0,
            "Java {}: no work code was unloaded",
            jdk.major
        );
        assert_eq!(phases.len(), 12, "Java {}: {phases:?}", jdk.major);
        for class in ["StacksUnloadA", "StacksUnloadB"] {
            let n = named.iter().filter(|(_, c, _)| c == class).count();
            assert!(
                n >= 50,
                "Java {}: {n} samples named {class}.work",
                jdk.major
            );
        }
        for (time, class, what) in &named {
            let valid = phases
                .iter()
                .any(|(c, start, end)| c == class && start <= time && time <= end);
            assert!(
                valid,
                "Java {}: a sample at {time} is named {class}.work outside its phases {phases:?}: {what}",
                jdk.major
            );
        }
        eprintln!(
            "Java {}: {} samples named by unloaded classes' code, all in their phases; {:?}",
            jdk.major,
            named.len(),
            resolver.stats()
        );
    }
}

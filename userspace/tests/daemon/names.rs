//! Issue 19, case 5 for the daemon: methods named with 65 000 bytes, recursing 20 deep, once
//! grew the daemon from 11 MB to 1.38 GB in 11 s. Each name is cut where it is read, once, so
//! the daemon's memory and its answer stay bounded, and two long names stay two series.

use std::collections::BTreeSet;

use joularcode_core::names::{method_name, MAX_FRAME_NAME_BYTES};
use joularcode_testkit::odd_names::{long_name, odd_names_class_path, LONG_NAME_METHODS};

use super::*;

#[test]
fn methods_named_with_65_000_bytes_keep_the_daemons_memory_and_answer_small() {
    let _serial = serial();
    // The daemon watches the test's cgroup only: no other JVM of the host moves its memory.
    let cgroup = TestCgroup::new(
        &format!("/joularcode-names-{}", std::process::id()),
        &format!("/joularcode-names-{}", std::process::id()),
    );
    let daemon = Daemon::start(&["--cgroup", &cgroup.path]);
    sleep(Duration::from_secs(2));
    let before = daemon.memory()[0];
    // Interpreted: every frame is named from the JVM's Symbols.
    let mut command = Command::new(jdk(17).java());
    command
        .args(["-Xint", "-cp"])
        .arg(odd_names_class_path())
        .args(["LongNames", "40"]);
    let jvm = Jvm::spawn(cgroup.command(&command));
    let pid = format!("pid=\"{}\"", jvm.pid());
    let (mut peak, mut largest, mut ours) = (before, 0, Vec::new());
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(25) {
        sleep(Duration::from_secs(1));
        let text = daemon.scrape();
        largest = largest.max(text.len());
        peak = peak.max(daemon.memory()[0]);
        ours = text
            .lines()
            .filter(|line| line.contains(&pid))
            .map(str::to_owned)
            .collect();
    }
    let our_bytes: usize = ours.iter().map(String::len).sum();
    eprintln!(
        "RSS {} MiB before the JVM, {} MiB at most after; answers of {largest} bytes at most, \
         {our_bytes} of them on the JVM",
        before >> 20,
        peak >> 20
    );
    assert!(peak < before + (32 << 20), "{} MiB", peak >> 20);
    assert!(our_bytes < 256 << 10, "{our_bytes} bytes: {ours:?}");
    let methods: BTreeSet<&str> = ours
        .iter()
        .filter(|line| line.starts_with("joularcode_method_energy"))
        .filter_map(|line| line.split("method=\"").nth(1)?.split('"').next())
        .filter(|method| method.starts_with("LongNames.LLLL"))
        .collect();
    let expected: BTreeSet<String> = (0..LONG_NAME_METHODS)
        .map(|k| format!("LongNames.{}", method_name(&long_name(k))))
        .collect();
    assert_eq!(
        methods,
        expected.iter().map(String::as_str).collect(),
        "one series per method, cut, none merged"
    );
    assert!(methods.iter().all(|m| m.len() <= MAX_FRAME_NAME_BYTES));
}

//! The fallback mode writes what `record` writes (docs/fallback.md), on JDK 17: on the same
//! workload (RecordSplit: two threads, each 3/4 of its CPU in `heavy`, 1/4 in `light`), `record
//! --mode bpf` and `record --mode agent` write both CSV files with lines of the same shape
//! (the header, then `timestamp,branch,power,energy,interval,coverage` with the same digits and
//! line ends), the same hot branches with the same shares of their energy within what sampling
//! alone makes two runs differ by (four standard errors), and the same messages but for the start line, which says how the agent samples. It loads the BPF
//! programs: as root, one at a time.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use joularcode_testkit::record_run::{record_until, RecordRun};
use joularcode_testkit::results::rows;
use joularcode_testkit::{jdk, one_at_a_time, workload_classes};
use regex::Regex;

/// The samples each run takes.
const SAMPLES: u64 = 3000;

/// How far two runs' shares `a` and `b` of a branch may differ by sampling alone: four standard
/// errors of the difference of two proportions of [`SAMPLES`] samples each (4.5 points at the
/// workload's 3:1), so that noise fails it about once in 16,000 runs; a branch named or weighed
/// differently by one mode differs by far more.
fn sampling_bound(a: f64, b: f64) -> f64 {
    let p = (a + b) / 2.0;
    4.0 * (2.0 * p * (1.0 - p) / SAMPLES as f64).sqrt()
}

/// The shape of a line of a CSV file: the header as it is; a row as the number of digits of its
/// timestamp, whether its branch is quoted, and each number's form (`N.` and its decimals).
fn shape(line: &str) -> String {
    let Some((timestamp, rest)) = line.split_once(',') else {
        return line.to_owned();
    };
    if !timestamp.bytes().all(|b| b.is_ascii_digit()) {
        return line.to_owned();
    }
    let mut fields: Vec<&str> = rest.rsplitn(5, ',').collect();
    fields.reverse();
    let number = |field: &str| match field.split_once('.') {
        Some((whole, decimals))
            if !whole.is_empty()
                && whole
                    .chars()
                    .chain(decimals.chars())
                    .all(|c| c.is_ascii_digit()) =>
        {
            format!("N.{}", decimals.len())
        }
        _ => format!("{field:?}"),
    };
    let branch = if fields[0].starts_with('"') {
        "\"B\""
    } else {
        "B"
    };
    let numbers: Vec<String> = fields[1..].iter().map(|field| number(field)).collect();
    format!("{}d,{branch},{}", timestamp.len(), numbers.join(","))
}

/// The shapes of the lines of `file`, and checks that each ends with `\n`, not `\r\n`.
fn shapes(file: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(file).expect("a CSV file");
    text.split_inclusive('\n')
        .map(|line| {
            let line = line.strip_suffix('\n').expect("a whole line");
            assert!(!line.ends_with('\r'), "{}: {line:?}", file.display());
            shape(line)
        })
        .collect()
}

/// Each branch's share of the energy of the app file, a hidden class's address left out.
fn shares(file: &Path) -> BTreeMap<String, f64> {
    let address = Regex::new("/0x[0-9a-f]+").expect("a regex");
    let mut energy: BTreeMap<String, f64> = BTreeMap::new();
    for row in rows(file) {
        *energy
            .entry(address.replace_all(&row.branch, "/0x").into_owned())
            .or_default() += row.energy_j;
    }
    let total: f64 = energy.values().sum();
    energy.values_mut().for_each(|e| *e /= total);
    energy
}

/// What `record` said, each line without its time, the pid, the run's folder and the JVM's own
/// lines left out, the agent's start line made `record`'s.
fn messages(stderr: &str, pid: &str, dir: &Path) -> Vec<String> {
    let dir = dir.display().to_string();
    let time = Regex::new(r"^\d\d-\d\d-\d{4} \d\d:\d\d:\d\d ").expect("a regex");
    let agent = Regex::new(r" with the agent, sampling [^;]*;").expect("a regex");
    stderr
        .lines()
        .filter(|line| !line.starts_with("Picked up JAVA_TOOL_OPTIONS"))
        .map(|line| {
            let line = time.replace(line, "");
            agent
                .replace(&line, ",")
                .replace(pid, "PID")
                .replace(&dir, "DIR")
        })
        .collect()
}

/// In ten runs here, the hot branches' shares differed by 2.4 points at most between the two modes:
/// at least 2.0 points inside the four standard errors allowed (4.4 points).
#[test]
fn agent_mode_writes_the_files_and_messages_of_the_bpf_mode() {
    let _serial = one_at_a_time("the BPF mode loads the BPF programs");
    let binary = Path::new(env!("CARGO_BIN_EXE_joularcode-bpf"));
    let java = jdk(17).java();
    let classes = workload_classes();
    let start_line = Regex::new(r"Profiling JVM (\d+) ").expect("a regex");
    let mut files = Vec::new();
    for mode in ["bpf", "agent"] {
        let run = RecordRun::new(binary, "100");
        let mut command = run.command(&["--mode", mode, "--stack-monitoring-sample-rate", "2"]);
        command
            .arg("--")
            .arg(&java)
            .arg("-cp")
            .arg(classes)
            .arg("RecordSplit");
        let output = record_until(command, &run.cycle_log(), SAMPLES, Duration::from_secs(60));
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(
            output.status.code(),
            Some(143),
            "{mode}: the JVM ended by SIGTERM: {stderr}"
        );
        let pid = start_line
            .captures(&stderr)
            .unwrap_or_else(|| panic!("{mode}: no start line: {stderr}"))[1]
            .to_owned();
        files.push((mode, messages(&stderr, &pid, run.dir.path()), run));
    }
    let (bpf, agent) = (&files[0], &files[1]);
    assert_eq!(bpf.1, agent.1, "the same messages");
    for file in ["methods-power-all.csv", "methods-power-app.csv"] {
        let (ours, theirs) = (
            shapes(&bpf.2.results().join(file)),
            shapes(&agent.2.results().join(file)),
        );
        eprintln!("{file}: {ours:?}");
        assert_eq!(ours, theirs, "{file}: the same shapes of lines");
    }
    let app = "methods-power-app.csv";
    let (ours, theirs) = (
        shares(&bpf.2.results().join(app)),
        shares(&agent.2.results().join(app)),
    );
    let hot = |shares: &BTreeMap<String, f64>| -> BTreeSet<String> {
        shares
            .iter()
            .filter(|(_, &s)| s >= 0.05)
            .map(|(b, _)| b.clone())
            .collect()
    };
    assert_eq!(hot(&ours), hot(&theirs), "the same hot branches");
    // Each hot branch's share of the hot branches' energy: the split the workload makes. The
    // rest differs by mode, not by naming: the eBPF sampler sees the JVM from its first
    // instant (start-up branches, a few percent of a short run), the agent from its VMInit.
    let of_hot = |shares: &BTreeMap<String, f64>, branch: &String| {
        shares[branch] / hot(shares).iter().map(|b| shares[b]).sum::<f64>()
    };
    for branch in hot(&ours) {
        let (a, b) = (of_hot(&ours, &branch), of_hot(&theirs, &branch));
        eprintln!(
            "{branch}: {:.1}% with BPF, {:.1}% with the agent",
            a * 100.0,
            b * 100.0
        );
        assert!(
            (a - b).abs() <= sampling_bound(a, b),
            "{branch}: {a} with BPF, {b} with the agent, more apart than sampling makes them ({})",
            sampling_bound(a, b)
        );
    }
}

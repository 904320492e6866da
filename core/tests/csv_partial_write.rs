//! A cycle that cannot be written whole leaves no half row: the file is cut back to where it was.
//!
//! The test runs itself again in a child process whose file size limit (`ulimit -f 1`, with
//! SIGXFSZ ignored) makes the second cycle's write fail part way, as a full disk would.

#![cfg(unix)]

use std::fs;
use std::path::Path;
use std::process::Command;

use joularcode_core::attribution::CycleResult;
use joularcode_core::branch::Branches;
use joularcode_core::energy::{Interval, Power};
use joularcode_core::log::{Level, Recorded};
use joularcode_core::output::csv::{CsvWriter, ALL_FILE, HEADER};

const CHILD: &str = "JOULARCODE_CSV_PARTIAL_WRITE_DIR";

/// A cycle with `rows` branches of 1 W each.
fn cycle(branches: &mut Branches, rows: usize) -> CycleResult {
    let all = (0..rows)
        .map(|i| {
            let frame = branches.frame("com.example.Worker", &format!("method{i}"));
            (branches.branch(&[frame]), Power::from_watts(1.0))
        })
        .collect();
    CycleResult {
        interval: Interval::from_ns(1_000_000_000),
        coverage: 1.0,
        all,
        ..CycleResult::default()
    }
}

/// What the child does under the limit: one small cycle that fits, one large one that does not.
fn write_under_the_limit(dir: &Path) {
    let mut branches = Branches::default();
    let log = Recorded::default();
    let mut writer = CsvWriter::open(dir).unwrap();
    writer.write(1, &cycle(&mut branches, 2), &branches, &log);
    assert!(log.messages().is_empty(), "{:?}", log.messages());
    writer.write(2, &cycle(&mut branches, 40), &branches, &log);
    let messages = log.messages();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0].0, Level::Severe);
    assert!(messages[0].1.starts_with("Could not write results to "));
}

#[test]
fn a_failed_write_leaves_no_half_row() {
    if let Some(dir) = std::env::var_os(CHILD) {
        write_under_the_limit(Path::new(&dir));
        return;
    }
    let temp = tempfile::tempdir().unwrap();
    let test = std::env::current_exe().unwrap();
    let output = Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 1 && exec \"$0\" --exact a_failed_write_leaves_no_half_row --nocapture")
        .arg(&test)
        .env(CHILD, temp.path())
        // The limit applies to every file the child writes: its output goes to pipes, never to a
        // file that may already be over the limit (as when the tests' output is logged).
        .output()
        .expect("sh runs");
    assert!(
        output.status.success(),
        "the child failed: {}\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );

    let text = fs::read_to_string(temp.path().join(ALL_FILE)).unwrap();
    let expected = format!(
        "{HEADER}\n\
         1,com.example.Worker.method0,1.000000000,1.000000000,1.000000000,1.0000\n\
         1,com.example.Worker.method1,1.000000000,1.000000000,1.000000000,1.0000\n"
    );
    assert_eq!(text, expected);
}

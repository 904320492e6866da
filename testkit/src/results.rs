//! Reading what a recording wrote, as Joular's users read it: the two CSV files, checked line by
//! line against Java's format, and the cycle log.

use std::collections::HashMap;
use std::path::Path;

use regex::Regex;

/// One row of a CSV file.
#[derive(Debug, Clone)]
pub struct Row {
    /// The end of its cycle, in ms since the epoch (the cycle log's `timestamp_ms`).
    pub timestamp_ms: u64,
    /// The branch.
    pub branch: String,
    /// Its energy in the row's cycle, in J.
    pub energy_j: f64,
}

/// The first line of both files.
const HEADER: &str = "timestamp,branch,power_watts,energy_joules,interval_seconds,coverage";

/// The rows of a Joular CSV file whose lines end with `line_end` (`\n`, or `\r\n` as a JVM on
/// Windows writes them), read with the csv crate under the exact header; every line checked
/// field by field against Java's `%d,%s,%.9f,%.9f,%.9f,%.4f%n`, and each energy against its power
/// and interval.
pub fn rows_ending(file: &Path, line_end: &str) -> Vec<Row> {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    let line = Regex::new(
        r#"^\d+,("(?:[^"]|"")*"|[^",\r\n]+),\d+\.\d{9},\d+\.\d{9},\d+\.\d{9},\d\.\d{4}$"#,
    )
    .expect("a valid regex");
    let mut lines = text.split_inclusive('\n');
    assert_eq!(lines.next(), Some(format!("{HEADER}{line_end}").as_str()));
    for row in lines {
        let row = row
            .strip_suffix(line_end)
            .unwrap_or_else(|| panic!("a line that does not end with {line_end:?}: {row:?}"));
        assert!(line.is_match(row), "not a Joular row: {row:?}");
    }
    let mut reader = csv::Reader::from_path(file).expect("a CSV file");
    assert_eq!(
        reader.headers().expect("a header"),
        HEADER.split(',').collect::<Vec<_>>()
    );
    reader
        .records()
        .map(|record| {
            let record = record.expect("a CSV record");
            let number = |i: usize| record[i].parse::<f64>().expect("a number");
            let (power, energy, interval) = (number(2), number(3), number(4));
            // Each of the three is rounded to 9 decimals: the power's rounding counts once per
            // second of the interval, the interval's once per watt.
            let rounding = 0.5e-9 * (1.0 + interval + power) + 1e-12;
            assert!(
                power > 0.0 && (energy - power * interval).abs() <= rounding,
                "{}: {record:?}",
                file.display()
            );
            Row {
                timestamp_ms: record[0].parse().expect("a timestamp"),
                branch: record[1].to_owned(),
                energy_j: energy,
            }
        })
        .collect()
}

/// [`rows_ending`] of a file written on Linux.
pub fn rows(file: &Path) -> Vec<Row> {
    rows_ending(file, "\n")
}

/// The energy of the rows whose branch contains `part`.
pub fn energy_of(rows: &[Row], part: &str) -> f64 {
    rows.iter()
        .filter(|row| row.branch.contains(part))
        .map(|row| row.energy_j)
        .sum()
}

/// The cycle log at `file` of a run that has ended, one JSON object per cycle and JVM; panics
/// when there is no log, or when its last line was left unfinished.
pub fn cycles(file: &Path) -> Vec<serde_json::Value> {
    read_cycles(file, false)
}

/// The cycle log at `file` while its run goes on: the lines written so far (none when there is no
/// log yet), a line still being written left out.
pub fn cycles_so_far(file: &Path) -> Vec<serde_json::Value> {
    read_cycles(file, true)
}

/// The reader of [`cycles`] and [`cycles_so_far`]: every whole line of the log, each a JSON
/// object; `running` says whether its writer may still be at work, when a missing log is an
/// empty one and an unfinished last line is one still being written.
fn read_cycles(file: &Path, running: bool) -> Vec<serde_json::Value> {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if running && e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => panic!("cannot read {}: {e}", file.display()),
    };
    // Only the last line can lack its end
    text.split_inclusive('\n')
        .filter_map(|line| match line.strip_suffix('\n') {
            Some(line) => Some(serde_json::from_str(line).expect("a JSON line")),
            None => {
                assert!(
                    running,
                    "{}: an unfinished last line: {line:?}",
                    file.display()
                );
                None
            }
        })
        .collect()
}

/// Per cycle, the branches' energy plus the unattributed energy is the JVM's energy, the source's
/// energy is `watts` × the interval (when `watts` is given), and the JVMs' energy together is at
/// most the source's.
pub fn assert_conservation(cycles: &[serde_json::Value], watts: Option<f64>) {
    assert!(!cycles.is_empty(), "no cycle was logged");
    // A cycle's lines (one per JVM) share its end and its length: the last, partial cycle of a
    // run may end within the same millisecond as the one before it.
    let mut per_cycle: HashMap<(i64, u64), (f64, f64)> = HashMap::new();
    for cycle in cycles {
        let value = |key: &str| cycle[key].as_f64().expect(key);
        let jvm = value("jvm_energy_j");
        let parts = value("branches_energy_j") + value("unattributed_energy_j");
        assert!((parts - jvm).abs() <= 1e-9 * jvm.max(1.0), "{cycle}");
        if let Some(watts) = watts {
            assert!(
                (value("source_energy_j") - watts * value("interval_s")).abs() < 1e-6,
                "{cycle}"
            );
        }
        let key = (
            cycle["timestamp_ms"].as_i64().expect("timestamp"),
            value("interval_s").to_bits(),
        );
        let entry = per_cycle.entry(key).or_default();
        entry.0 += jvm;
        entry.1 = value("source_energy_j");
    }
    for ((timestamp, _), (jvms, source)) in per_cycle {
        assert!(
            jvms <= source * (1.0 + 1e-12),
            "{timestamp}: {jvms} J > {source} J"
        );
    }
}

//! The Joular CSV files, one test per case of Joular Code for Java's ResultWriterTest, then what
//! we add: the files read back by a CSV reader, no link followed, write errors said once.

use std::fs;
use std::path::Path;

use joularcode_core::attribution::CycleResult;
use joularcode_core::branch::{BranchId, Branches};
use joularcode_core::energy::{Interval, Power};
use joularcode_core::log::{Level, Recorded};
use joularcode_core::output::csv::{escape, CsvWriter, ALL_FILE, APP_FILE, HEADER, LINE_END};
use joularcode_core::output::java_float::fixed;
use joularcode_core::output::losses::Lost;
use proptest::prelude::*;

/// The branch named `name` (`class.method` frames joined by `;`; a frame without a dot is a
/// pseudo-frame, so any text can be a name).
fn named(branches: &mut Branches, name: &str) -> BranchId {
    let frames: Vec<_> = name
        .split(';')
        .map(|frame| match frame.rsplit_once('.') {
            Some((class, method)) => branches.frame(class, method),
            None => branches.jvm_frame(frame),
        })
        .collect();
    let id = branches.branch(&frames);
    assert_eq!(branches.name(id), name);
    id
}

/// A cycle giving `power` to the branches of the all file, with an app file mirroring its
/// application names.
fn cycle(
    branches: &mut Branches,
    power: &[(&str, f64)],
    interval_ms: u64,
    coverage: f64,
) -> CycleResult {
    let all: Vec<_> = power
        .iter()
        .map(|&(name, p)| (named(branches, name), Power::from_watts(p)))
        .collect();
    let app = all
        .iter()
        .filter_map(|&(b, p)| branches.app(b).map(|a| (a, p)))
        .collect();
    CycleResult {
        interval: Interval::from_ns(interval_ms * 1_000_000),
        coverage,
        all,
        app,
        ..CycleResult::default()
    }
}

fn lines(dir: &Path, file: &str) -> Vec<String> {
    fs::read_to_string(dir.join(file))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn write_all(dir: &Path, power: &[(&str, f64)], interval_ms: u64) {
    let mut branches = Branches::default();
    let result = cycle(&mut branches, power, interval_ms, 1.0);
    let mut writer = CsvWriter::open(dir).unwrap();
    writer.write(1000, &result, &branches, &Recorded::default());
    writer.close();
}

// Opening

#[test]
fn open_creates_the_directory_and_both_files_with_a_header() {
    let temp = tempfile::tempdir().unwrap();
    let nested = temp.path().join("sub/nested");
    CsvWriter::open(&nested).unwrap().close();
    assert_eq!(lines(&nested, ALL_FILE), [HEADER]);
    assert_eq!(lines(&nested, APP_FILE), [HEADER]);
    assert_eq!(
        fs::read_to_string(nested.join(ALL_FILE)).unwrap(),
        format!("{HEADER}{LINE_END}")
    );
}

#[test]
fn open_path_is_a_file_fails() {
    let temp = tempfile::tempdir().unwrap();
    let blocking = temp.path().join("blocked");
    fs::write(&blocking, "not a directory").unwrap();
    let error = CsvWriter::open(&blocking).unwrap_err().to_string();
    assert_eq!(
        error,
        format!(
            "Cannot write the results in {0}: {0} is not a directory: remove it, or give another \
             path. Set results-path to a directory the profiler can write to.",
            blocking.display()
        )
    );
    assert_eq!(fs::read_to_string(&blocking).unwrap(), "not a directory");
}

#[cfg(unix)]
#[test]
fn open_symbolic_link_is_refused() {
    let temp = tempfile::tempdir().unwrap();
    let target = temp.path().join("target.txt");
    fs::write(&target, "precious").unwrap();
    let link = temp.path().join(ALL_FILE);
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let error = CsvWriter::open(temp.path()).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "Cannot write the results in {}: {} (to {}) is a symbolic link, and outputs are never \
             written through one, as another user could have made it: give a path without links. \
             Set results-path to a directory the profiler can write to.",
            temp.path().display(),
            link.display(),
            target.display()
        )
    );
    assert_eq!(fs::read_to_string(&target).unwrap(), "precious");
}

#[cfg(unix)]
#[test]
fn open_symlinked_directory_is_refused() {
    let temp = tempfile::tempdir().unwrap();
    let real = temp.path().join("real");
    fs::create_dir(&real).unwrap();
    let link = temp.path().join("results");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let error = CsvWriter::open(&link.join("sub")).unwrap_err();
    assert!(
        error.to_string().contains(&format!(
            "{} (to {}) is a symbolic link, and outputs",
            link.display(),
            real.display()
        )),
        "{error}"
    );
    assert_eq!(fs::read_dir(&real).unwrap().count(), 0);
}

#[test]
fn open_directory_in_place_of_a_file_is_refused() {
    let temp = tempfile::tempdir().unwrap();
    fs::create_dir(temp.path().join(APP_FILE)).unwrap();
    let error = CsvWriter::open(temp.path()).unwrap_err();
    assert!(
        error.to_string().contains(&format!(
            "{} is not a regular file: remove it, or give another path.",
            temp.path().join(APP_FILE).display()
        )),
        "{error}"
    );
}

#[test]
fn open_existing_results_appends_without_a_second_header() {
    let temp = tempfile::tempdir().unwrap();
    write_all(temp.path(), &[("A.m", 1.0)], 1000);
    write_all(temp.path(), &[("B.m", 2.0)], 1000);
    let lines = lines(temp.path(), ALL_FILE);
    assert_eq!(lines.len(), 3);
    assert_eq!(lines.iter().filter(|l| *l == HEADER).count(), 1);
}

#[test]
fn open_existing_empty_file_gets_the_header() {
    let temp = tempfile::tempdir().unwrap();
    fs::write(temp.path().join(ALL_FILE), "").unwrap();
    CsvWriter::open(temp.path()).unwrap();
    assert_eq!(lines(temp.path(), ALL_FILE), [HEADER]);
}

// Rows

#[test]
fn write_each_file_gets_its_own_rows() {
    let temp = tempfile::tempdir().unwrap();
    let mut branches = Branches::new(&["com.app"]);
    let result = cycle(
        &mut branches,
        &[("java.lang.Thread.run;com.app.Main.run", 3.0)],
        1000,
        0.75,
    );
    let mut writer = CsvWriter::open(temp.path()).unwrap();
    writer.write(1746000000000, &result, &branches, &Recorded::default());
    writer.close();
    assert_eq!(
        fs::read_to_string(temp.path().join(ALL_FILE)).unwrap(),
        format!(
            "{HEADER}{LINE_END}1746000000000,java.lang.Thread.run;com.app.Main.run,3.000000000,3.000000000,1.000000000,0.7500{LINE_END}"
        )
    );
    assert_eq!(
        fs::read_to_string(temp.path().join(APP_FILE)).unwrap(),
        format!(
            "{HEADER}{LINE_END}1746000000000,com.app.Main.run,3.000000000,3.000000000,1.000000000,0.7500{LINE_END}"
        )
    );
}

#[test]
fn write_energy_is_power_times_interval() {
    let temp = tempfile::tempdir().unwrap();
    write_all(temp.path(), &[("m.m", 4.0)], 2500);
    let row = &lines(temp.path(), ALL_FILE)[1];
    assert_eq!(row, "1000,m.m,4.000000000,10.000000000,2.500000000,1.0000");
}

#[test]
fn write_zero_or_negative_power_row_skipped() {
    let temp = tempfile::tempdir().unwrap();
    write_all(
        temp.path(),
        &[
            ("A.zero", 0.0),
            ("B.negative", -1.0),
            ("D.nan", f64::NAN),
            ("C.positive", 3.0),
        ],
        1000,
    );
    let lines = lines(temp.path(), ALL_FILE);
    assert_eq!(lines.len(), 2);
    assert!(lines[1].contains("C.positive"));
}

#[test]
fn write_branch_with_a_comma_is_quoted() {
    let temp = tempfile::tempdir().unwrap();
    write_all(temp.path(), &[("foo,bar", 3.0)], 1000);
    assert!(lines(temp.path(), ALL_FILE)[1].contains("\"foo,bar\""));
}

#[test]
fn write_nothing_to_write_leaves_the_files_alone() {
    let temp = tempfile::tempdir().unwrap();
    write_all(temp.path(), &[], 1000);
    write_all(temp.path(), &[("A.zero", 0.0)], 1000);
    assert_eq!(lines(temp.path(), ALL_FILE), [HEADER]);
    assert_eq!(lines(temp.path(), APP_FILE), [HEADER]);
}

#[test]
fn close_is_idempotent() {
    let temp = tempfile::tempdir().unwrap();
    let mut writer = CsvWriter::open(temp.path()).unwrap();
    writer.close();
    writer.close();
}

// csvEscape

#[test]
fn csv_escape() {
    for (name, field) in [
        ("org.example.Foo.bar", "org.example.Foo.bar"),
        ("", ""),
        ("a,b", "\"a,b\""),
        ("foo\"bar", "\"foo\"\"bar\""),
        ("a\nb", "\"a\nb\""),
        ("a\rb", "\"a\rb\""),
        ("a,\"b\"", "\"a,\"\"b\"\"\""),
    ] {
        assert_eq!(escape(name), field, "escaping {name:?}");
    }
}

// Read back by a CSV reader

#[test]
fn a_csv_reader_reads_the_files_back() {
    let temp = tempfile::tempdir().unwrap();
    let names = [
        "java.lang.Thread.run;demo.Burn$$Lambda/0x00000008000c5898.run",
        "odd,name",
        "with \"quotes\"",
        "two\nlines",
        "cr\rhere",
        "plain",
    ];
    let power: Vec<_> = names
        .iter()
        .enumerate()
        .map(|(i, &n)| (n, 0.03125 * (i + 1) as f64))
        .collect();
    write_all(temp.path(), &power, 500);

    let mut reader = csv::Reader::from_path(temp.path().join(ALL_FILE)).unwrap();
    assert_eq!(
        reader.headers().unwrap().iter().collect::<Vec<_>>(),
        HEADER.split(',').collect::<Vec<_>>()
    );
    let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(records.len(), names.len());
    for (record, &(name, power)) in records.iter().zip(&power) {
        assert_eq!(&record[0], "1000");
        assert_eq!(&record[1], name);
        assert_eq!(record[2], fixed(power, 9));
        assert_eq!(record[3], fixed(power * 0.5, 9));
        assert_eq!(&record[4], "0.500000000");
        assert_eq!(&record[5], "1.0000");
    }
}

// Write errors

#[test]
fn a_write_error_is_said_once_and_the_files_are_opened_again() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("results");
    let mut branches = Branches::default();
    let result = cycle(&mut branches, &[("A.m", 1.0)], 1000, 1.0);
    let log = Recorded::default();
    let mut writer = CsvWriter::open(&dir).unwrap();
    writer.write(1, &result, &branches, &log);

    // The directory is replaced by a file: the files cannot be opened again
    writer.close();
    fs::rename(&dir, temp.path().join("kept")).unwrap();
    fs::write(&dir, "in the way").unwrap();
    writer.write(2, &result, &branches, &log);
    writer.write(3, &result, &branches, &log);
    let severe: Vec<_> = log
        .messages()
        .into_iter()
        .filter(|(level, _)| *level == Level::Severe)
        .collect();
    assert_eq!(severe.len(), 1, "{severe:?}");
    assert!(
        severe[0]
            .1
            .starts_with(&format!("Could not write results to {}", dir.display())),
        "{severe:?}"
    );

    // Back: the next cycle opens the files again and writes; a new failure is said again
    fs::remove_file(&dir).unwrap();
    fs::rename(temp.path().join("kept"), &dir).unwrap();
    writer.write(4, &result, &branches, &log);
    let back = log.messages().last().cloned().unwrap();
    assert_eq!(
        back,
        (
            Level::Warning,
            format!(
                "Writing results to {} works again; 4 row(s) of 2 cycle(s) could not be written \
                 meanwhile.",
                dir.display()
            )
        )
    );
    assert_eq!(
        writer.lost(),
        Lost { rows: 4, cycles: 2 },
        "both files' rows"
    );
    let rows: Vec<_> = lines(&dir, ALL_FILE)
        .into_iter()
        .skip(1)
        .map(|l| l.split(',').next().unwrap().to_string())
        .collect();
    assert_eq!(rows, ["1", "4"]);
    writer.close();
    fs::remove_dir_all(&dir).unwrap();
    writer.write(5, &result, &branches, &log);
    assert_eq!(
        lines(&dir, ALL_FILE).len(),
        2,
        "a removed folder is made again"
    );
    writer.close();
    fs::remove_dir_all(&dir).unwrap();
    fs::write(&dir, "in the way").unwrap();
    writer.write(6, &result, &branches, &log);
    assert_eq!(
        log.messages()
            .iter()
            .filter(|(level, _)| *level == Level::Severe)
            .count(),
        2
    );
}

proptest! {
    #[test]
    fn energy_is_power_times_interval(power in 1e-6..1e4f64, interval_ms in 1u64..10_000) {
        let temp = tempfile::tempdir().unwrap();
        let interval_s = Interval::from_ns(interval_ms * 1_000_000).seconds();
        write_all(temp.path(), &[("a.A.a", power)], interval_ms);
        let row = lines(temp.path(), ALL_FILE)[1].clone();
        let fields: Vec<&str> = row.split(',').collect();
        prop_assert_eq!(fields[2], fixed(power, 9));
        prop_assert_eq!(fields[3], fixed(power * interval_s, 9));
        prop_assert_eq!(fields[4], fixed(interval_s, 9));
    }
}

//! Grams of CO2e of a real recording (docs/carbon.md): the demo shop recorded with
//! `--carbon-intensity FILE` while the test rewrites the file, 200 then 500 g/kWh; `report`'s
//! table and flame graph give the grams that the CSV rows' joules make at the intensity the file
//! held when each cycle ended, by the test's own clock.

use std::time::SystemTime;

use super::*;

/// Unix milliseconds now.
fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

/// Writes `grams` per kWh into the intensity file `path` whole, as a host agent should
/// (another file renamed onto it), and returns when, in Unix milliseconds.
fn write(path: &Path, grams: &str) -> i64 {
    let next = path.with_extension("next");
    std::fs::write(&next, format!("{grams}\n")).expect("the intensity");
    std::fs::rename(&next, path).expect("the intensity in place");
    unix_ms()
}

/// Grams written as the views write them: `12.345 mg`.
fn grams(text: &str) -> f64 {
    let (value, unit) = text.trim().split_once(' ').expect("a value and a unit");
    let value: f64 = value.parse().expect("a number of grams");
    value
        * match unit {
            "kg" => 1000.0,
            "g" => 1.0,
            "mg" => 1e-3,
            "µg" => 1e-6,
            other => panic!("not a unit of grams: {other}"),
        }
}

/// The grams of the app file's rows at the intensity in force at each row's end (`before`
/// until `switched_ms`, `after` since), the cycles that ended within `slack_ms` of the switch
/// counted at `low` of the two, or at the other: the range the grams must be in.
fn expected_grams(csv: &Path, switched_ms: i64, slack_ms: i64) -> (f64, f64) {
    let (before, after) = (200.0, 500.0);
    let mut reader = csv::Reader::from_path(csv).expect("the app file");
    let (mut low, mut high) = (0.0, 0.0);
    for record in reader.records() {
        let record = record.expect("a CSV record");
        let end_ms: i64 = record[0].parse().expect("a timestamp");
        let kwh = record[3].parse::<f64>().expect("joules") / 3.6e6;
        let (lo, hi) = if end_ms < switched_ms - slack_ms {
            (before, before)
        } else if end_ms > switched_ms + slack_ms {
            (after, after)
        } else {
            (before, after)
        };
        low += kwh * lo;
        high += kwh * hi;
    }
    (low, high)
}

/// Its margin is not known from the ten runs here: the table's grams and their range are printed
/// from now on.
#[test]
fn grams_follow_a_changing_intensity_file_into_report_and_its_flame_graph() {
    let _serial = serial();
    let dir = work_dir().join("carbon-intensity");
    std::fs::create_dir_all(&dir).expect("the test's folder");
    let intensity = dir.join("intensity");
    write(&intensity, "200");
    let file = intensity.clone();
    let switch = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(4));
        write(&file, "500")
    });
    let path = intensity.display().to_string();
    let recording = record_demo("carbon", &["--carbon-intensity", &path]);
    let switched_ms = switch.join().expect("the intensity switched");
    let results = recording.results;
    let drawn = std::fs::read_to_string(&recording.svg).expect("record's flame graph");
    assert!(
        drawn.contains(" CO2e, "),
        "record's tooltips give grams too"
    );

    // The file was followed: cycles at 200, then at 500.
    let recorded =
        std::fs::read_to_string(results.join("carbon-intensity.csv")).expect("the intensities");
    eprintln!("{recorded}");
    let intensities: Vec<&str> = recorded
        .lines()
        .skip(1)
        .map(|line| line.split(',').nth(2).expect("an intensity"))
        .collect();
    assert!(
        intensities.contains(&"200") && intensities.contains(&"500"),
        "{recorded}"
    );

    // The table's total and the flame graph's root: the rows' kWh times each cycle's intensity.
    // A cycle ends when its power is read, a few milliseconds before its intensity is.
    let (low, high) = expected_grams(&results.join("methods-power-app.csv"), switched_ms, 100);
    let svg = dir.join("report.svg");
    let output = run(&mut profiler(&[
        "report",
        &results.display().to_string(),
        "--app",
        "--flamegraph",
        &svg.display().to_string(),
    ]));
    assert!(output.status.success(), "report failed");
    let table = stdout(&output);
    eprintln!("{table}");
    let total = table
        .lines()
        .find_map(|line| {
            line.split_once(" J, ")?
                .1
                .split_once(" CO2e (carbon intensity: file)")
        })
        .map(|(total, _)| grams(total))
        .expect("the total grams in the table");
    eprintln!("the table's {total} g, within {low}..{high} g");
    // Printed with three decimals of a unit in which it is at least 1.
    assert!(
        total >= low * (1.0 - 1e-3) && total <= high * (1.0 + 1e-3),
        "{total} g, not within {low}..{high} g: {table}"
    );
    let text = std::fs::read_to_string(&svg).expect("the flame graph");
    let root = text
        .split("<title>all (")
        .nth(1)
        .and_then(|rest| rest.split_once(" CO2e"))
        .and_then(|(numbers, _)| numbers.split_once(" J, "))
        .map(|(_, grams_text)| grams(grams_text))
        .expect("the grams of the root's tooltip");
    assert!(
        (root - total).abs() <= 1e-3 * total,
        "the flame graph's {root} g, the table's {total} g"
    );
}

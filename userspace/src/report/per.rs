//! `report --baseline ... --per UNITS`: the units of work each run did, given on the command
//! line or read from a file the benchmark wrote, for a comparison per unit of work
//! ([`Per::Unit`]).
//!
//! `UNITS` is one item for both runs, or two, `BEFORE,AFTER`; an item is a number of units
//! (`1000`, `2.5e6`) or `@FILE`, a file whose first line is that number: a relative `FILE` is
//! looked for in each run's results-path (the folder of a CSV file given instead), so that
//! `--per @units.txt` reads `before/units.txt` and `after/units.txt`.

use std::path::{Path, PathBuf};

use joularcode_core::input::{self, StartError};

use crate::profile::Per;

/// The most bytes of a units file read: a number never takes that many.
const MAX_FILE: usize = 256;

/// How one run's units of work are given.
#[derive(Debug, Clone, PartialEq)]
pub enum Units {
    /// A number of units.
    Count(f64),
    /// A file holding it (relative to the run's results-path unless absolute).
    File(PathBuf),
}

/// `--per`'s value: the units of the run before and of the run after.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkUnits {
    /// The run before's.
    pub before: Units,
    /// The run after's.
    pub after: Units,
}

/// What every message about `--per` ends with.
const SYNTAX: &str = "give the units of work of each run: N for both, BEFORE,AFTER, or @FILE, \
                      a file in each results-path that holds the number (such as --per 1000, \
                      --per 1000,800 or --per @units.txt)";

/// A number of units of work: finite and above 0.
fn count(text: &str) -> Option<f64> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|units| units.is_finite() && *units > 0.0)
}

/// Parses `--per`'s value (clap's value parser): the message says what is wrong and the syntax.
pub fn parse(text: &str) -> Result<WorkUnits, String> {
    let item = |item: &str| -> Result<Units, String> {
        match item.strip_prefix('@') {
            Some("") => Err(format!("@ names no file: {SYNTAX}")),
            Some(file) => Ok(Units::File(PathBuf::from(file))),
            None => count(item).map(Units::Count).ok_or_else(|| {
                format!("{item:?} is not a number of units of work above 0: {SYNTAX}")
            }),
        }
    };
    let items: Vec<&str> = text.split(',').collect();
    match items[..] {
        [both] => {
            let units = item(both)?;
            Ok(WorkUnits {
                before: units.clone(),
                after: units,
            })
        }
        [before, after] => Ok(WorkUnits {
            before: item(before)?,
            after: item(after)?,
        }),
        _ => Err(format!("{text:?} has more than two items: {SYNTAX}")),
    }
}

/// The folder a relative units file of the run at `results` is looked for in.
fn folder(results: &Path) -> &Path {
    if results.is_file() {
        results.parent().unwrap_or(Path::new("."))
    } else {
        results
    }
}

/// The units of work of the run whose results are at `results`.
fn resolve(units: &Units, results: &Path) -> Result<f64, String> {
    let path = match units {
        Units::Count(count) => return Ok(*count),
        Units::File(file) => folder(results).join(file),
    };
    let start = input::read_start(&path, MAX_FILE + 1).map_err(|error| {
        let hint = match error {
            StartError::NotFound => " (the benchmark writes its units of work there)",
            StartError::NotRegular | StartError::Io(_) => "",
        };
        format!("--per: cannot read {}: {error}{hint}", path.display())
    })?;
    let text = String::from_utf8_lossy(&start);
    let line = text.lines().next().unwrap_or("");
    if start.len() > MAX_FILE {
        return Err(format!(
            "--per: {} is larger than {MAX_FILE} bytes: it should hold a number of units of work",
            path.display()
        ));
    }
    count(line).ok_or_else(|| {
        format!(
            "--per: the first line of {} is not a number of units of work above 0",
            path.display()
        )
    })
}

/// The comparison per unit of work of the runs at `before` and `after`.
pub fn per_unit(units: &WorkUnits, before: &Path, after: &Path) -> Result<Per, String> {
    Ok(Per::Unit {
        before: resolve(&units.before, before)?,
        after: resolve(&units.after, after)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_item_is_both_runs_two_are_before_and_after() {
        let both = parse("1000").unwrap();
        assert_eq!(both.before, Units::Count(1000.0));
        assert_eq!(both.after, Units::Count(1000.0));
        let two = parse("1000,2.5e2").unwrap();
        assert_eq!(
            (two.before, two.after),
            (Units::Count(1000.0), Units::Count(250.0))
        );
        let files = parse("@units.txt,@/abs/u").unwrap();
        assert_eq!(files.before, Units::File(PathBuf::from("units.txt")));
        assert_eq!(files.after, Units::File(PathBuf::from("/abs/u")));
        for bad in ["0", "-5", "NaN", "inf", "x", "1,2,3", "@", ""] {
            let error = parse(bad).unwrap_err();
            assert!(error.ends_with("--per @units.txt)"), "{bad}: {error}");
            assert!(!error.contains('\n'), "{error}");
        }
    }

    #[test]
    fn a_units_file_is_read_in_each_results_path() {
        let dir = tempfile::tempdir().unwrap();
        let (before, after) = (dir.path().join("before"), dir.path().join("after"));
        for (run, text) in [(&before, "1000\n"), (&after, " 800 \nmore\n")] {
            std::fs::create_dir(run).unwrap();
            std::fs::write(run.join("units.txt"), text).unwrap();
        }
        let units = parse("@units.txt").unwrap();
        assert_eq!(
            per_unit(&units, &before, &after).unwrap(),
            Per::Unit {
                before: 1000.0,
                after: 800.0
            }
        );
        // A CSV file given for a run: its folder.
        std::fs::write(after.join("methods-power-app.csv"), "").unwrap();
        let csv = after.join("methods-power-app.csv");
        assert!(per_unit(&units, &before, &csv).is_ok());
        std::fs::write(after.join("units.txt"), "many\n").unwrap();
        let error = per_unit(&units, &before, &after).unwrap_err();
        assert!(
            error.contains("is not a number of units of work"),
            "{error}"
        );
        std::fs::write(after.join("units.txt"), "1".repeat(300)).unwrap();
        let error = per_unit(&units, &before, &after).unwrap_err();
        assert!(error.contains("larger than 256 bytes"), "{error}");
        std::fs::remove_file(after.join("units.txt")).unwrap();
        let error = per_unit(&units, &before, &after).unwrap_err();
        assert!(error.contains("there is no such file"), "{error}");
        std::fs::create_dir(after.join("units.txt")).unwrap();
        let error = per_unit(&units, &before, &after).unwrap_err();
        assert!(error.contains("not a regular file"), "{error}");
    }
}

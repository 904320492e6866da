//! `joularcode-bpf report`: where the energy went, from the CSV files of a recording.
//!
//! It reads `methods-power-app.csv` (or `-all`) in a results folder, or in each JVM's folder
//! below it, adds up the energy of each branch over every row, and prints the branches that used
//! the most, with their share of the total. The files are Joular Code for Java's, so it reads
//! that agent's results too.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use joularcode_core::output::csv::{ALL_FILE, APP_FILE, HEADER};

/// The energy of each branch in one results file.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Totals {
    /// Joules per branch.
    pub energy: HashMap<String, f64>,
    /// Rows read.
    pub rows: u64,
    /// Rows that could not be read (wrong number of fields, a value that is not a number).
    pub bad_rows: u64,
}

impl Totals {
    /// The total energy, in joules.
    pub fn total(&self) -> f64 {
        self.energy.values().sum()
    }

    /// The branches, most energy first (ties by name, so the order is stable).
    pub fn ranked(&self) -> Vec<(&str, f64)> {
        let mut ranked: Vec<(&str, f64)> = self
            .energy
            .iter()
            .map(|(name, joules)| (name.as_str(), *joules))
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        ranked
    }
}

/// Adds up the energy per branch of a Joular CSV file's text.
pub fn totals(text: &str) -> Result<Totals, String> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_reader(text.as_bytes());
    let header = reader
        .headers()
        .map_err(|e| format!("the header cannot be read: {e}"))?;
    if header.iter().collect::<Vec<_>>().join(",") != HEADER {
        return Err(format!("the header is not Joular's ({HEADER})"));
    }
    let mut totals = Totals::default();
    for record in reader.records() {
        let energy = record
            .ok()
            .filter(|record| record.len() == 6)
            .and_then(|record| {
                let joules = record[3].parse::<f64>().ok()?;
                joules.is_finite().then(|| (record[1].to_string(), joules))
            });
        match energy {
            Some((branch, joules)) => {
                *totals.energy.entry(branch).or_default() += joules;
                totals.rows += 1;
            }
            None => totals.bad_rows += 1,
        }
    }
    Ok(totals)
}

/// The results files to report on: `dir/<file>` when it exists, else `dir/*/<file>` (one folder
/// per JVM), sorted by path.
pub fn results_files(dir: &Path, file: &str) -> Result<Vec<PathBuf>, String> {
    let direct = dir.join(file);
    if direct.is_file() {
        return Ok(vec![direct]);
    }
    let entries = fs::read_dir(dir).map_err(|e| {
        format!(
            "cannot read the results folder {}: {e} (give the results-path of the recording)",
            dir.display()
        )
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path().join(file))
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(format!(
            "no {file} in {} or in its folders: is it the results-path of a recording?",
            dir.display()
        ));
    }
    Ok(files)
}

/// The report of one file: a line that names it, then one line per branch (at most `top`).
pub fn render(path: &Path, totals: &Totals, top: usize) -> String {
    let total = totals.total();
    let mut out = format!(
        "{}: {:.3} J in {} rows{}\n",
        path.display(),
        total,
        totals.rows,
        if totals.bad_rows > 0 {
            format!(" ({} unreadable rows left out)", totals.bad_rows)
        } else {
            String::new()
        }
    );
    out.push_str("    energy (J)   share  branch\n");
    for (branch, joules) in totals.ranked().into_iter().take(top) {
        let share = if total > 0.0 {
            100.0 * joules / total
        } else {
            0.0
        };
        let _ = writeln!(out, "{joules:>14.3} {share:>6.1}%  {branch}");
    }
    out
}

/// Runs `report`: prints the `top` branches of every results file found in `dir`.
pub fn run(dir: &Path, all_branches: bool, top: usize) -> Result<String, String> {
    let file = if all_branches { ALL_FILE } else { APP_FILE };
    let mut out = String::new();
    for path in results_files(dir, file)? {
        let text = fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let totals = totals(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        out.push_str(&render(&path, &totals, top));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "timestamp,branch,power_watts,energy_joules,interval_seconds,coverage\n\
        1,a.A.run;a.A.x,3.000000000,3.000000000,1.000000000,1.0000\n\
        2,\"a.A.run;a.A.y,z\",1.000000000,1.000000000,1.000000000,1.0000\n\
        3,a.A.run;a.A.x,2.000000000,1.000000000,0.500000000,0.9000\n\
        4,broken\n";

    #[test]
    fn energy_is_summed_per_branch_and_ranked() {
        let totals = totals(FILE).unwrap();
        assert_eq!(totals.rows, 3);
        assert_eq!(totals.bad_rows, 1);
        assert_eq!(
            totals.ranked(),
            vec![("a.A.run;a.A.x", 4.0), ("a.A.run;a.A.y,z", 1.0)]
        );
        let text = render(Path::new("r.csv"), &totals, 1);
        assert!(text.starts_with("r.csv: 5.000 J in 3 rows (1 unreadable rows left out)\n"));
        assert!(text.contains("4.000   80.0%  a.A.run;a.A.x\n"), "{text}");
        assert!(!text.contains("a.A.y"), "top 1 only: {text}");
    }

    #[test]
    fn a_file_that_is_not_joulars_is_refused() {
        assert!(totals("a,b\n1,2\n").unwrap_err().contains("header"));
    }

    #[test]
    fn files_are_found_directly_or_per_jvm() {
        let dir = tempfile::tempdir().unwrap();
        let err = results_files(dir.path(), APP_FILE).unwrap_err();
        assert!(err.contains("is it the results-path"), "{err}");
        for jvm in ["20-b.Main", "10-a.Main"] {
            fs::create_dir(dir.path().join(jvm)).unwrap();
            fs::write(dir.path().join(jvm).join(APP_FILE), FILE).unwrap();
        }
        let files = results_files(dir.path(), APP_FILE).unwrap();
        assert_eq!(
            files,
            vec![
                dir.path().join("10-a.Main").join(APP_FILE),
                dir.path().join("20-b.Main").join(APP_FILE)
            ]
        );
        fs::write(dir.path().join(APP_FILE), FILE).unwrap();
        assert_eq!(
            results_files(dir.path(), APP_FILE).unwrap(),
            vec![dir.path().join(APP_FILE)]
        );
        let report = run(dir.path(), false, 10).unwrap();
        assert!(report.contains("80.0%"), "{report}");
        assert!(run(&dir.path().join("missing"), false, 10).is_err());
    }
}

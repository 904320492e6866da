//! Where the energy went, from the CSV files of a recording (the command is
//! `commands/report.rs`).
//!
//! It reads `methods-power-app.csv` (or `-all`) in a results folder, or in each JVM's folder
//! below it, adds up the energy of each branch over every row, and prints the branches that used
//! the most, with their share of the total. The files are Joular Code for Java's, so it reads
//! that agent's results too. It also draws the recording's energy flame graph
//! (`--flamegraph`), writes it as a pprof profile (`--pprof`), and compares it with a baseline
//! recording (`--baseline`, [`compare`]) per second of run, per run or per unit of work
//! ([`per`]).

pub mod carbon;
pub mod compare;
pub mod per;
pub mod read;

use std::fmt::Write as _;
use std::path::Path;

use joularcode_core::log::printable;

use crate::profile::{carbon_sources, format_grams, BranchSet};
use read::{FileEnergy, ReadError};

/// The exit status of `report` when `--fail-above` finds an energy regression.
pub const REGRESSION_EXIT: i32 = 3;

/// The report of one file: a line that names it, then one line per branch (at most `top`),
/// with its grams of CO2e when a carbon intensity was recorded. The files are another user's as
/// often as not: their names and the branches' are shown as [`printable`] gives them.
pub fn render(path: &Path, file: &FileEnergy, top: usize) -> String {
    let total = file.total();
    let mut out = format!(
        "{}: {:.3} J{} in {} rows{}\n",
        printable(&path.display().to_string()),
        total,
        carbon_total(file),
        file.rows,
        if file.bad_rows > 0 {
            format!(" ({} unreadable rows left out)", file.bad_rows)
        } else {
            String::new()
        }
    );
    let carbon = file.carbon.is_some();
    out.push_str(if carbon {
        "    energy (J)   share          CO2e  branch\n"
    } else {
        "    energy (J)   share  branch\n"
    });
    for (branch, joules) in file.ranked().into_iter().take(top) {
        let share = if total > 0.0 {
            100.0 * joules / total
        } else {
            0.0
        };
        let grams = if carbon {
            let grams = file.grams.get(branch).copied().unwrap_or(0.0);
            format!(" {:>13}", format_grams(grams))
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{joules:>14.3} {share:>6.1}%{grams}  {}",
            printable(branch)
        );
    }
    out
}

/// What the first line of a file's report says of its grams of CO2e: `, 0.486 mg CO2e (carbon
/// intensity: constant)`, and the rows whose cycle had no intensity; nothing without one.
fn carbon_total(file: &FileEnergy) -> String {
    let Some(carbon) = &file.carbon else {
        return String::new();
    };
    let mut text = format!(
        ", {} CO2e (carbon intensity: {})",
        format_grams(file.total_grams()),
        carbon_sources(&carbon.sources).unwrap_or_else(|| "none readable".to_string())
    );
    if carbon.rows_without > 0 {
        let _ = write!(
            text,
            " ({} rows without a carbon intensity have no grams)",
            carbon.rows_without
        );
    }
    text
}

/// The table of the `top` branches of every results file found at `path`.
pub fn table(path: &Path, all_branches: bool, top: usize) -> Result<String, ReadError> {
    let set = if all_branches {
        BranchSet::All
    } else {
        BranchSet::App
    };
    let mut out = String::new();
    for file in read::results_files(path, set)? {
        out.push_str(&render(&file, &read::read_file(&file)?, top));
    }
    Ok(out)
}

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

pub mod compare;
pub mod per;
pub mod read;

use std::fmt::Write as _;
use std::path::Path;

use joularcode_core::log::printable;

use crate::profile::BranchSet;
use read::{FileEnergy, ReadError};

/// The exit status of `report` when `--fail-above` finds an energy regression.
pub const REGRESSION_EXIT: i32 = 3;

/// The report of one file: a line that names it, then one line per branch (at most `top`).
/// The files are another user's as often as not: their names and the branches' are shown as
/// [`printable`] gives them.
pub fn render(path: &Path, file: &FileEnergy, top: usize) -> String {
    let total = file.total();
    let mut out = format!(
        "{}: {:.3} J in {} rows{}\n",
        printable(&path.display().to_string()),
        total,
        file.rows,
        if file.bad_rows > 0 {
            format!(" ({} unreadable rows left out)", file.bad_rows)
        } else {
            String::new()
        }
    );
    out.push_str("    energy (J)   share  branch\n");
    for (branch, joules) in file.ranked().into_iter().take(top) {
        let share = if total > 0.0 {
            100.0 * joules / total
        } else {
            0.0
        };
        let _ = writeln!(out, "{joules:>14.3} {share:>6.1}%  {}", printable(branch));
    }
    out
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

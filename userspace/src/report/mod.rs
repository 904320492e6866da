//! Where the energy went, from the CSV files of a recording (the command is
//! `commands/report.rs`).
//!
//! It reads `methods-power-app.csv` (or `-all`) in a results folder, or in each JVM's folder
//! below it, adds up the energy of each branch over every row, and prints the branches that used
//! the most, with their share of the total. The files are Joular Code for Java's, so it reads
//! that agent's results too. It also draws the recording's energy flame graph
//! (`--flamegraph`), writes it as a pprof profile (`--pprof`), and compares it with a baseline
//! recording (`--baseline`, [`compare`]).

pub mod compare;
pub mod read;

use std::fmt::Write as _;
use std::path::Path;

use clap::ValueEnum;
use joularcode_core::entry::EntryRule;
use joularcode_core::log::printable;

use crate::profile::BranchSet;
use read::{FileEnergy, ReadError};

/// The exit status of `report` when `--fail-above` finds an energy regression.
pub const REGRESSION_EXIT: i32 = 3;

/// What the table adds the energy up by (`--by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum By {
    /// Each branch.
    Branch,
    /// Each entry point ([`joularcode_core::entry`]).
    Entry,
}

/// Where the stacks of the flame graph and the pprof profile start (`--root`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Root {
    /// At the thread's start: the branches as recorded.
    Thread,
    /// At each branch's entry point.
    Entry,
}

/// The report of one file: a line that names it, then one line per branch, or per whatever the
/// `column` says the names are (at most `top`). The files are another user's as often as not:
/// their names and the branches' are shown as [`printable`] gives them.
pub fn render(path: &Path, file: &FileEnergy, column: &str, top: usize) -> String {
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
    let _ = writeln!(out, "    energy (J)   share  {column}");
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

/// The table of the `top` branches of every results file of `set` found at `path`; with
/// `entries`, of the `top` entry points that rule finds (give it the files of all branches,
/// whose frameworks' frames say where work was dispatched).
pub fn table(
    path: &Path,
    set: BranchSet,
    entries: Option<&EntryRule>,
    top: usize,
) -> Result<String, ReadError> {
    let mut out = String::new();
    for file in read::results_files(path, set)? {
        let energy = read::read_file(&file)?;
        out.push_str(&match entries {
            Some(rule) => render(&file, &energy.by_entry(rule), "entry", top),
            None => render(&file, &energy, "branch", top),
        });
    }
    Ok(out)
}

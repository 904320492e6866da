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

use clap::ValueEnum;
use joularcode_core::entry::EntryRule;
use joularcode_core::log::printable;

use crate::profile::{carbon_sources, format_grams, BranchSet};
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
/// `column` says the names are (at most `top`), with its grams of CO2e when a carbon intensity
/// was recorded. The files are another user's as often as not: their names and the branches'
/// are shown as [`printable`] gives them.
pub fn render(path: &Path, file: &FileEnergy, column: &str, top: usize) -> String {
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
    let co2e = if carbon { "          CO2e" } else { "" };
    let _ = writeln!(out, "    energy (J)   share{co2e}  {column}");
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

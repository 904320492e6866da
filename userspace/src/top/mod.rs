//! The view of `top` (the command is `commands/top.rs`): a live view of the energy of the JVMs,
//! refreshed every cycle: per JVM its power and share of the CPU power, and for the selected one
//! its methods or branches by power; on the terminal ([`screen`]), or as plain text after each
//! cycle when the standard output is not a terminal.

pub mod screen;
pub mod state;

use joularcode_core::entry::EntryRule;
use joularcode_core::log::{printable, Log};

use crate::output::stdout::{self, StdoutError};
use crate::output::OutputError;
use crate::profile::{BranchSet, NO_ENTRY};
use crate::record::sink::{CycleView, Sink};
use crate::signals;
use screen::Screen;
use state::{JvmSnapshot, Snapshot, Top};

/// The sink of `top`'s recording: each JVM's entry points found by `entries`, and where the
/// cycles are shown.
pub struct View {
    /// The rule that finds the entry points.
    pub entries: EntryRule,
    /// Where the cycles are shown.
    pub output: Output,
}

/// Where `top`'s cycles are shown.
pub enum Output {
    /// On the terminal.
    Screen(Screen),
    /// As plain text on the standard output, with the first `lines` of each JVM's list;
    /// `failed` holds the error of a write on it, which ends the recording and then the command.
    Plain {
        top: Top,
        lines: usize,
        failed: Option<StdoutError>,
    },
}

/// A cycle's results, owned, as the view takes them: names (of methods, branches, main classes)
/// as [`printable`] gives them, so that neither the screen nor the plain text shows a JVM's
/// escape sequence, line end or bidi override. The entry points are found by `entries` in the
/// names as the JVM gave them, then made printable.
fn snapshot(view: &CycleView<'_>, entries: &EntryRule) -> Snapshot {
    let owned = |set| {
        move |jvm: &crate::record::sink::JvmView<'_>| -> Vec<(String, f64)> {
            jvm.powers(set)
                .into_iter()
                .map(|power| (printable(power.name).into_owned(), power.power.watts()))
                .collect()
        }
    };
    Snapshot {
        source: printable(view.source).into_owned(),
        power_w: view.cycle.power.watts(),
        interval: view.cycle.interval,
        carbon: view.cycle.carbon,
        jvms: view
            .jvms
            .iter()
            .map(|jvm| JvmSnapshot {
                pid: jvm.pid(),
                main_class: printable(jvm.main_class).into_owned(),
                watts: jvm.result.result.jvm_power.watts(),
                share: jvm.result.result.jvm_share,
                ended: jvm.ended,
                all: owned(BranchSet::All)(jvm),
                app: owned(BranchSet::App)(jvm),
                entries: jvm
                    .powers(BranchSet::All)
                    .into_iter()
                    .map(|power| {
                        let entry = entries.find(power.name).map_or(NO_ENTRY, |e| e.method);
                        (printable(entry).into_owned(), power.power.watts())
                    })
                    .collect(),
            })
            .collect(),
    }
}

impl Sink for View {
    fn cycle(&mut self, view: &CycleView<'_>) {
        let snapshot = snapshot(view, &self.entries);
        match &mut self.output {
            Output::Screen(screen) => screen.show(snapshot),
            Output::Plain { top, lines, failed } => {
                if failed.is_some() {
                    return;
                }
                top.apply(&snapshot);
                // Nobody reads any more (`top | head`) or the disk is full: the recording ends,
                // as on Ctrl-C, and the command with the error.
                if let Err(error) = stdout::print(format!("{}\n", top.plain(*lines))) {
                    *failed = Some(error);
                    signals::stop();
                }
            }
        }
    }

    fn finish(&mut self, _: &dyn Log) -> Result<(), OutputError> {
        match &mut self.output {
            Output::Screen(screen) => screen.end(),
            Output::Plain { failed, .. } => {
                if let Some(error) = failed.take() {
                    return Err(error.into());
                }
            }
        }
        Ok(())
    }
}

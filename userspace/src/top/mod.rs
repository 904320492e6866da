//! `joularcode-bpf top`: a live view of the energy of the host's JVMs (or of the chosen ones),
//! refreshed every cycle: per JVM its power and share of the CPU power, and for the selected one
//! its methods or branches by power. It records as `record` does ([`record::run_with`]), without
//! CSV files; its cycles go to the view. When the standard output is not a terminal, it prints
//! the view as plain text after each cycle instead.

pub mod screen;
pub mod state;

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use joularcode_core::log::{Log, Stderr};

use crate::cli::TopArgs;
use crate::profile::BranchSet;
use crate::record::sink::{CycleView, Sink};
use crate::record::{self, Outputs};
use crate::sampler::signals;
use screen::Screen;
use state::{JvmSnapshot, Snapshot, Top};

/// Runs `top` until q, Ctrl-C, SIGTERM, `--duration`, the end of the JVMs given by `--pid`, or,
/// in plain text, the end of the reader of its output.
pub fn run(args: &TopArgs) -> Result<i32, String> {
    let recording = args.recording();
    record::check_targets(&recording)?;
    // Counted from now on, not from when the recording starts: a SIGTERM while the BPF programs
    // load would otherwise end the process with the terminal still taken over.
    signals::stop_on_signals()?;
    if std::io::stdout().is_terminal() {
        let screen = Screen::start()?;
        let log = screen.log();
        let sinks: Vec<Box<dyn Sink>> = vec![Box::new(View::Screen(screen))];
        record::run_with(
            &recording,
            Outputs {
                log,
                csv: false,
                sinks,
            },
        )
    } else {
        let sinks: Vec<Box<dyn Sink>> = vec![Box::new(View::Plain {
            top: Top::default(),
            lines: args.top,
        })];
        record::run_with(
            &recording,
            Outputs {
                log: Arc::new(Stderr::default()),
                csv: false,
                sinks,
            },
        )
    }
}

/// Where the cycles are shown.
enum View {
    /// On the terminal.
    Screen(Screen),
    /// As plain text on the standard output, with the first `lines` methods of each JVM.
    Plain { top: Top, lines: usize },
}

/// A cycle's results, owned, as the view takes them.
fn snapshot(view: &CycleView<'_>) -> Snapshot {
    let owned = |set| {
        move |jvm: &crate::record::sink::JvmView<'_>| -> Vec<(String, f64)> {
            jvm.powers(set)
                .into_iter()
                .map(|power| (power.name.to_string(), power.power.watts()))
                .collect()
        }
    };
    Snapshot {
        source: view.source.to_string(),
        power_w: view.cycle.power.watts(),
        interval: view.cycle.interval,
        jvms: view
            .jvms
            .iter()
            .map(|jvm| JvmSnapshot {
                pid: jvm.pid(),
                main_class: jvm.main_class.to_string(),
                watts: jvm.result.result.jvm_power.watts(),
                share: jvm.result.result.jvm_share,
                ended: jvm.ended,
                all: owned(BranchSet::All)(jvm),
                app: owned(BranchSet::App)(jvm),
            })
            .collect(),
    }
}

impl Sink for View {
    fn cycle(&mut self, view: &CycleView<'_>) {
        let snapshot = snapshot(view);
        match self {
            View::Screen(screen) => screen.show(snapshot),
            View::Plain { top, lines } => {
                top.apply(&snapshot);
                let mut stdout = std::io::stdout().lock();
                let written =
                    writeln!(stdout, "{}", top.plain(*lines)).and_then(|()| stdout.flush());
                // Nobody reads any more (`top | head`): the recording ends, as on Ctrl-C.
                if written.is_err() {
                    signals::stop();
                }
            }
        }
    }

    fn finish(&mut self, _: &dyn Log) -> Result<(), String> {
        if let View::Screen(screen) = self {
            screen.end();
        }
        Ok(())
    }
}

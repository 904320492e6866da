//! `joularcode-bpf top`: a live view of the energy of the host's JVMs (or of the chosen ones),
//! refreshed every cycle. It records as `record` does ([`record::run_with`]), without CSV files;
//! its cycles go to the view ([`crate::top`]), which finds the entry points with the
//! recording's configuration: on the terminal, or as plain text after each cycle
//! when the standard output is not a terminal.

use std::io::IsTerminal;
use std::sync::Arc;

use joularcode_core::entry::EntryRule;
use joularcode_core::log::{Log, Stderr};

use crate::cli::TopArgs;
use crate::record::sink::Sink;
use crate::record::{self, Outputs};
use crate::signals;
use crate::top::screen::Screen;
use crate::top::state::Top;
use crate::top::{Output, View};

/// Runs `top` until q, Ctrl-C, SIGTERM, `--duration`, the end of the JVMs given by `--pid`, or,
/// in plain text, the end of the reader of its output.
pub fn run(args: &TopArgs) -> Result<i32, String> {
    let recording = args.recording();
    record::check_targets(&recording).map_err(|e| e.to_string())?;
    // Counted from now on, not from when the recording starts: a SIGTERM while the BPF programs
    // load would otherwise end the process with the terminal still taken over.
    signals::stop_on_signals().map_err(|e| e.to_string())?;
    let (output, log): (Output, Arc<dyn Log>) = if std::io::stdout().is_terminal() {
        let screen = Screen::start(args.list).map_err(|e| e.to_string())?;
        let log = screen.log();
        (Output::Screen(screen), log)
    } else {
        let output = Output::Plain {
            top: Top::new(args.list),
            lines: args.top,
            failed: None,
        };
        (output, Arc::new(Stderr::default()))
    };
    let config = record::configure(&recording, &*log).map_err(|e| e.to_string())?;
    let sinks: Vec<Box<dyn Sink>> = vec![Box::new(View {
        entries: EntryRule::of(&config),
        output,
    })];
    record::run_configured(
        recording,
        config,
        Outputs {
            log,
            csv: false,
            sinks,
        },
    )
    .map_err(|e| e.to_string())
}

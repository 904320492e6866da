//! `joularcode-bpf record`: energy per Java branch for one JVM, a launched command, or every JVM
//! of the host, written in Joular Code for Java's CSV files (see docs/record.md), with a status
//! line on the terminal and, when asked, the recording's flame graph and pprof profile.

use std::sync::Arc;

use joularcode_core::entry::EntryRule;

use crate::cli::RecordArgs;
use crate::profile::BranchSet;
use crate::record::sink::Sink;
use crate::record::status::{StatusLine, Terminal};
use crate::record::views::ViewFiles;
use crate::record::{self, Outputs};

/// Runs `record` until its duration is over, a signal arrives, or the JVMs (or the command) end
/// ([`record::run_configured`]). Returns the exit code, or the error to print.
pub fn run(args: &RecordArgs) -> Result<i32, String> {
    let recording = args.recording();
    record::check_targets(&recording).map_err(|e| e.to_string())?;
    let views = ViewFiles::create(
        args.flamegraph.as_deref(),
        args.pprof.as_deref(),
        BranchSet::from_app_flag(args.app),
    )
    .map_err(|e| e.to_string())?;
    let terminal = Arc::new(Terminal::new());
    let config = record::configure(&recording, &*terminal).map_err(|e| e.to_string())?;
    let mut sinks: Vec<Box<dyn Sink>> = vec![Box::new(StatusLine::new(terminal.clone()))];
    if let Some(views) = views {
        sinks.push(Box::new(if args.root.at_entries() {
            views.from_entries(EntryRule::of(&config))
        } else {
            views
        }));
    }
    record::run_configured(
        recording,
        config,
        Outputs {
            log: terminal,
            csv: true,
            sinks,
        },
    )
    .map_err(|e| e.to_string())
}

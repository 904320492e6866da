//! The subcommands, one file each, all of one shape: `run(&Args) -> Result<i32, String>` takes the
//! subcommand's options ([`crate::cli`]) and returns the exit code, or the one line to print
//! when it fails. The library modules fail with their own error types (thiserror), each a message
//! that says what failed and how to fix it; a command turns one into its line with `to_string`.

pub mod daemon;
pub mod generate;
pub mod raw;
pub mod record;
pub mod report;
pub mod stacks;
pub mod top;

use crate::cli::Command;

/// Runs `command`; returns its exit code, or the error to print.
pub fn run(command: &Command) -> Result<i32, String> {
    match command {
        Command::Raw(args) => raw::run(args),
        Command::Stacks(args) => stacks::run(args),
        Command::Record(args) => record::run(args),
        Command::Report(args) => report::run(args),
        Command::Top(args) => top::run(args),
        Command::Daemon(args) => daemon::run(args),
        Command::Generate(args) => generate::run(args),
    }
}

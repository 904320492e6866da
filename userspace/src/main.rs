//! The `joularcode-bpf` command.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use joularcode_bpf::cli::Cli;
use joularcode_bpf::commands;
use joularcode_bpf::output::stdout::StdoutError;
use joularcode_core::log::printable;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // The help, the version, or what is wrong with the command line.
        Err(error) => {
            let code = error.exit_code();
            return match error.print() {
                Ok(()) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
                Err(e) => fail(&StdoutError::from(e).to_string()),
            };
        }
    };
    match commands::run(&cli.command) {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(message) => fail(&message),
    }
}

/// Says `message` on stderr as the command's one error line; the exit status is 1.
fn fail(message: &str) -> ExitCode {
    // A stderr that cannot be written has nowhere to say so: the status still tells.
    let _ = writeln!(
        std::io::stderr().lock(),
        "joularcode-bpf: {}",
        printable(message)
    );
    ExitCode::FAILURE
}

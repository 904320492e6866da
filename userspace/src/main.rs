//! The `joularcode-bpf` command.

use std::process::ExitCode;

use clap::Parser;
use joularcode_bpf::cli::Cli;
use joularcode_bpf::commands;
use joularcode_core::log::printable;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match commands::run(&cli.command) {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(message) => {
            eprintln!("joularcode-bpf: {}", printable(&message));
            ExitCode::FAILURE
        }
    }
}

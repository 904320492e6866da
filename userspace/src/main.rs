//! The `joularcode-bpf` command.

use std::process::ExitCode;

use clap::Parser;
use joularcode_bpf::cli::{Cli, Command};
use joularcode_bpf::sampler::raw;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Raw(args) => raw::run(
            args.target.target(),
            args.duration(),
            args.rate,
            &mut std::io::stdout(),
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("joularcode-bpf: {message}");
            ExitCode::FAILURE
        }
    }
}

//! The `joularcode-bpf` command.

use std::process::ExitCode;

use clap::Parser;
use joularcode_bpf::cli::{Cli, Command};
use joularcode_bpf::commands::stacks;
use joularcode_bpf::daemon;
use joularcode_bpf::record;
use joularcode_bpf::report;
use joularcode_bpf::sampler::raw;
use joularcode_bpf::top;
use joularcode_core::log::printable;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Raw(args) => raw::run(
            args.target.target(),
            args.duration(),
            args.rate,
            &mut std::io::stdout(),
        )
        .map(|()| 0),
        Command::Stacks(args) => stacks::run(&args),
        Command::Record(args) => record::run(&args),
        Command::Top(args) => top::run(&args),
        Command::Daemon(args) => daemon::run(&args),
        Command::Report(args) => report::run(&args).map(|(text, code)| {
            print!("{text}");
            code
        }),
    };
    match result {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(message) => {
            eprintln!("joularcode-bpf: {}", printable(&message));
            ExitCode::FAILURE
        }
    }
}

//! The command line: `joularcode-bpf <SUBCOMMAND>`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Args, Parser, Subcommand};

use crate::discovery::Target;
use crate::record::options::ConfigOptions;

/// Energy per Java execution branch, for one JVM or every JVM of this host, sampled from
/// outside the JVM with eBPF. Needs root (or CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE).
#[derive(Debug, Parser)]
#[command(name = "joularcode-bpf", version)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Debugging: sample JVM threads for a few seconds and show, per thread, the samples, the
    /// on-CPU time, the depth of the frame-pointer walks, and the samples lost.
    Raw(RawArgs),
    /// Sample JVMs and print their folded stacks: one line per distinct stack, frames named as
    /// Joular Code for Java names them (package.Class.method), oldest first, then the count.
    Stacks(StacksArgs),
    /// Energy per Java branch of one JVM, of the JVMs a command starts, or of every JVM of the
    /// host, written in Joular Code for Java's CSV files (methods-power-all.csv and
    /// methods-power-app.csv in results-path; one folder per JVM when there are several).
    Record(RecordArgs),
    /// Where the energy went: the branches of a recording's CSV files (ours or Joular Code for
    /// Java's) that used the most energy, with their share of the total.
    Report(ReportArgs),
}

/// `joularcode-bpf report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The results-path of the recording (a folder holding the CSV files, or one folder per JVM).
    #[arg(
        value_name = "RESULTS_PATH",
        default_value = "joular-code-java-results"
    )]
    pub results: PathBuf,
    /// Report methods-power-all.csv (every frame, JDK and JVM threads included) instead of
    /// methods-power-app.csv.
    #[arg(long)]
    pub all_branches: bool,
    /// How many branches to show per JVM.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
}

/// Which JVMs to profile: `--pid PID` or `--all`.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct TargetArgs {
    /// The JVM with this process id.
    #[arg(long, value_name = "PID", allow_negative_numbers = true)]
    pub pid: Option<u32>,
    /// Every JVM of the host, including those that start while it runs.
    #[arg(long)]
    pub all: bool,
}

impl TargetArgs {
    /// The target these flags name.
    pub fn target(&self) -> Target {
        match self.pid {
            Some(pid) => Target::Pid(pid),
            None => Target::All,
        }
    }
}

/// `joularcode-bpf raw`.
#[derive(Debug, Args)]
pub struct RawArgs {
    /// Which JVMs.
    #[command(flatten)]
    pub target: TargetArgs,
    /// How long to sample, in seconds (Ctrl-C stops earlier).
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0, value_parser = parse_seconds, allow_negative_numbers = true)]
    pub duration: f64,
    /// Samples per second of CPU time of each thread.
    #[arg(long, value_name = "HZ", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10_000), allow_negative_numbers = true)]
    pub rate: u64,
}

impl RawArgs {
    /// `--duration` as a Duration.
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.duration)
    }
}

/// `joularcode-bpf stacks`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("target").required(true).args(["pid", "all", "command"])))]
pub struct StacksArgs {
    /// The JVM with this process id.
    #[arg(long, value_name = "PID", allow_negative_numbers = true)]
    pub pid: Option<u32>,
    /// Every JVM of the host, including those that start while it runs.
    #[arg(long)]
    pub all: bool,
    /// How long to sample, in seconds (default: until the JVMs or the command end, or Ctrl-C).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds, allow_negative_numbers = true)]
    pub duration: Option<f64>,
    /// Write the stacks to FILE instead of the standard output.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Samples per second of CPU time of each thread.
    #[arg(long, value_name = "HZ", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10_000), allow_negative_numbers = true)]
    pub rate: u64,
    /// Add the native frames (libjvm.so, libc, ...) newer than the Java frames of each stack.
    #[arg(long)]
    pub native: bool,
    /// Do not load the symbolizer agent into running JVMs (`--pid`, `--all`): their compiled
    /// frames are then named by their outer methods only.
    #[arg(long)]
    pub no_attach: bool,
    /// The symbolizer agent library (default: libjvm_symbolizer_agent.so beside this program).
    #[arg(long, value_name = "FILE")]
    pub agent_path: Option<PathBuf>,
    /// Run this command and sample the JVMs it starts, until it ends; exit with its exit code.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `joularcode-bpf record`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("what").required(true).args(["pids", "all", "command"])))]
pub struct RecordArgs {
    /// The JVM with this process id (repeat it for several JVMs).
    #[arg(
        long = "pid",
        value_name = "PID",
        conflicts_with_all = ["all", "command"],
        allow_negative_numbers = true
    )]
    pub pids: Vec<u32>,
    /// Every JVM of the host, including those that start while it runs.
    #[arg(long, conflicts_with = "command")]
    pub all: bool,
    /// Stop after this many seconds (else at Ctrl-C, SIGTERM, or when the JVMs or the command end).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds, allow_negative_numbers = true)]
    pub duration: Option<f64>,
    /// The properties file to read instead of ./joularcodejava.properties (it must exist).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Also write, per cycle and JVM, one JSON line with the source's energy, the JVM's share,
    /// energy, branches' energy and unattributed energy (see docs/record.md).
    #[arg(long, value_name = "FILE")]
    pub cycle_log: Option<PathBuf>,
    /// The symbolizer agent library (default: libjvm_symbolizer_agent.so beside this program).
    #[arg(long, value_name = "FILE")]
    pub agent_path: Option<PathBuf>,
    /// Do not load the symbolizer agent into running JVMs (--pid, --all): their compiled frames
    /// are then named from their code caches, by their outer methods only.
    #[arg(long)]
    pub no_attach: bool,
    /// The keys of joularcodejava.properties.
    #[command(flatten)]
    pub options: ConfigOptions,
    /// The command to launch and profile (after `--`), with the JVMs it starts from their
    /// first instant; record ends when it ends, with its exit code.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

impl RecordArgs {
    /// `--duration` as a Duration.
    pub fn duration(&self) -> Option<Duration> {
        self.duration.map(Duration::from_secs_f64)
    }
}

/// A number of seconds above 0 and at most a day.
fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds > 0.0 && seconds <= 86_400.0 => Ok(seconds),
        _ => Err(format!(
            "give a number of seconds above 0 and at most 86400 (a day), such as 10 or 0.5, \
             not {text:?}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn raw_takes_a_pid_or_all() {
        let cli = Cli::try_parse_from(["joularcode-bpf", "raw", "--pid", "42", "--duration", "2"])
            .expect("valid");
        let Command::Raw(raw) = cli.command else {
            panic!("raw parsed as {:?}", cli.command)
        };
        assert_eq!(raw.target.target(), Target::Pid(42));
        assert_eq!(raw.duration(), Duration::from_secs(2));
        assert_eq!(raw.rate, 100);
        let cli = Cli::try_parse_from(["joularcode-bpf", "raw", "--all", "--rate", "1000"])
            .expect("valid");
        let Command::Raw(raw) = cli.command else {
            panic!("raw parsed as {:?}", cli.command)
        };
        assert_eq!((raw.target.target(), raw.rate), (Target::All, 1000));
        for bad in [
            &["joularcode-bpf", "raw"][..],
            &["joularcode-bpf", "raw", "--pid", "1", "--all"],
            &["joularcode-bpf", "raw", "--all", "--duration", "-1"],
            &["joularcode-bpf", "raw", "--all", "--rate", "0"],
        ] {
            assert!(Cli::try_parse_from(bad).is_err(), "{bad:?}");
        }
    }

    fn stacks(args: &[&str]) -> Result<StacksArgs, clap::Error> {
        let cli = Cli::try_parse_from(["joularcode-bpf", "stacks"].iter().chain(args))?;
        match cli.command {
            Command::Stacks(stacks) => Ok(stacks),
            other => panic!("stacks parsed as {other:?}"),
        }
    }

    fn record(args: &[&str]) -> Result<RecordArgs, clap::Error> {
        let cli = Cli::try_parse_from(["joularcode-bpf", "record"].iter().chain(args))?;
        match cli.command {
            Command::Record(record) => Ok(record),
            other => panic!("record parsed as {other:?}"),
        }
    }

    #[test]
    fn stacks_takes_a_pid_all_or_a_command() {
        let args = stacks(&["--pid", "7", "--duration", "3", "--native"]).expect("valid");
        assert_eq!(
            (args.pid, args.duration, args.native),
            (Some(7), Some(3.0), true)
        );
        let args =
            stacks(&["--output", "out.folded", "--", "java", "-Xint", "Main"]).expect("valid");
        assert_eq!(args.command, ["java", "-Xint", "Main"]);
        assert_eq!(args.output, Some(PathBuf::from("out.folded")));
        assert_eq!((args.rate, args.duration), (100, None));
        assert!(stacks(&["--all"]).expect("valid").all);
        for bad in [
            &[][..],
            &["--pid", "1", "--all"],
            &["--pid", "1", "--", "java"],
            &["--all", "--rate", "0"],
        ] {
            assert!(stacks(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn record_takes_pids_all_or_a_command() {
        let args = record(&["--pid", "4", "--pid", "5", "--duration", "1.5"]).expect("valid");
        assert_eq!(args.pids, [4, 5]);
        assert_eq!(args.duration(), Some(Duration::from_millis(1500)));
        let args = record(&[
            "--results-path",
            "out",
            "--jvm-threads=spread",
            "--",
            "java",
            "-cp",
            ".",
            "Main",
        ])
        .expect("valid");
        assert_eq!(args.command, ["java", "-cp", ".", "Main"]);
        assert_eq!(
            args.options.values,
            [
                ("results-path", "out".into()),
                ("jvm-threads", "spread".into())
            ]
        );
        assert!(
            record(&["--all", "--cycle-log", "c.json"])
                .expect("valid")
                .all
        );
        for bad in [
            &[][..],
            &["--pid", "1", "--all"],
            &["--all", "--", "java"],
            &["--pid", "1", "--", "java"],
            &["--all", "--duration", "0"],
            &["--all", "--unknown-key", "1"],
        ] {
            assert!(record(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_bad_number_is_refused_in_words_that_say_what_to_give() {
        for (args, value) in [
            (&["--all", "--duration", "0"][..], "\"0\""),
            (&["--all", "--duration", "-1"], "\"-1\""),
            (&["--all", "--duration", "NaN"], "\"NaN\""),
        ] {
            let error = record(args).unwrap_err().to_string();
            assert!(
                error.contains(&format!(
                    "give a number of seconds above 0 and at most 86400 (a day), such as 10 or \
                     0.5, not {value}"
                )),
                "{error}"
            );
            assert!(
                !error.contains("-- -1"),
                "no tip to make it the command: {error}"
            );
        }
        for args in [&["--pid", "-5"][..], &["--all", "--", "java"]] {
            let error = record(args).unwrap_err().to_string();
            assert!(!error.contains("'-- "), "{error}");
        }
        let error = stacks(&["--all", "--rate", "-3"]).unwrap_err().to_string();
        assert!(
            error.contains("-3") && !error.contains("'-- -3'"),
            "{error}"
        );
    }
}

//! The command line: `joularcode-bpf <SUBCOMMAND>`.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Args, Parser, Subcommand};

use crate::discovery::{CgroupPath, Cgroups};
use crate::record::options::ConfigOptions;
use crate::record::{Mode, Recording};
use crate::report::per::{self, WorkUnits};
use crate::report::{By, Root};
use crate::session::{AgentArgs, BranchLimit, DaemonAgentArgs, Targets};
use crate::top::state::List;

/// What `--version` says after the name: the version of Cargo.toml and the git commit built
/// (`unknown` when built outside a git checkout, from a source package), set by build.rs.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("JOULARCODE_BPF_COMMIT"),
    ")"
);

/// Energy per Java execution branch, for one JVM or every JVM of this host, sampled from
/// outside the JVM with eBPF. Needs root (or CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE).
#[derive(Debug, Parser)]
#[command(name = "joularcode-bpf", version = VERSION)]
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
    /// A live view of the energy of the host's JVMs (or of those given by --pid), refreshed every
    /// cycle: per JVM its power and share of the CPU power, and for the selected one its methods
    /// or branches by power. Keys: up/down select a JVM, m methods, b branches, s sort, a all or
    /// application branches, q quit. Not on a terminal, it prints plain text after each cycle.
    Top(TopArgs),
    /// Profile every JVM of the host, always (new JVMs within a second, in any container), and
    /// export their energy per JVM, method and branch on a Prometheus endpoint
    /// (http://127.0.0.1:29100/metrics by default). Runs until SIGTERM or Ctrl-C.
    Daemon(DaemonArgs),
    /// Write the manual pages and shell completions into DIR (for the packages).
    #[command(hide = true)]
    Generate(GenerateArgs),
}

/// Where `generate` writes the manual pages (`DIR/man`) and completions (`DIR/completions`).
#[derive(Debug, Clone, Args)]
pub struct GenerateArgs {
    /// The folder, made if missing.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// Which running JVMs to profile: `--pid PID` (repeated for several) or `--all`, shared by the
/// subcommands that profile (`raw`, `stacks`, `record`, `top`); each says whether one is required
/// and whether a command to launch is the other choice.
#[derive(Debug, Clone, Default, Args)]
pub struct JvmArgs {
    /// The JVM with this process id (repeat it for several JVMs).
    #[arg(
        long = "pid",
        value_name = "PID",
        conflicts_with = "all",
        allow_negative_numbers = true
    )]
    pub pids: Vec<u32>,
    /// Every JVM of the host, including those that start while it runs.
    #[arg(long)]
    pub all: bool,
}

impl JvmArgs {
    /// What these options (and `command`, the command line after `--`, if any) ask to profile:
    /// the command's JVMs when there is one, else every JVM with `--all` or when no pid is given,
    /// else the pids.
    pub fn targets(&self, command: &[OsString]) -> Targets {
        if let Some((program, rest)) = command.split_first() {
            let mut command = std::process::Command::new(program);
            command.args(rest);
            Targets::Launch(command)
        } else if self.all || self.pids.is_empty() {
            Targets::All(Cgroups::every())
        } else {
            Targets::Pids(self.pids.clone())
        }
    }
}

/// The sample rate of the subcommands that take it as an option (`raw`, `stacks`).
#[derive(Debug, Clone, Args)]
pub struct RateArgs {
    /// Samples per second of CPU time of each thread.
    #[arg(long, value_name = "HZ", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10_000), allow_negative_numbers = true)]
    pub rate: u64,
}

/// `joularcode-bpf daemon`.
#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// Where the Prometheus endpoint listens (GET /metrics). 0.0.0.0:29100 opens it to the
    /// network.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:29100")]
    pub listen: SocketAddr,
    /// TLS and basic authentication of the endpoint: a web configuration file as Prometheus
    /// exporters read it (tls_server_config: cert_file, key_file; basic_auth_users: user: bcrypt
    /// hash).
    #[arg(long, value_name = "FILE")]
    pub web_config_file: Option<PathBuf>,
    /// The properties file to read instead of ./joularcodejava.properties (it must exist).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// How many methods, branches and entry points of each JVM are exported, each; the energy of
    /// the others goes to method="other", branch="other" and entry="other".
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub top: u16,
    /// The most distinct branches kept per JVM; the stacks beyond are counted in one "[other]"
    /// branch until idle branches are dropped.
    #[arg(long, value_name = "N", default_value_t = 5000, value_parser = clap::value_parser!(u32).range(10..=1_000_000))]
    pub max_branches: u32,
    /// A branch or method with no sample for this many seconds is dropped.
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0, value_parser = parse_seconds)]
    pub branch_idle: f64,
    /// How long the series of a JVM that ended stay on the endpoint, frozen, before they go.
    #[arg(long, value_name = "SECONDS", default_value_t = 300.0, value_parser = parse_seconds)]
    pub keep_ended: f64,
    /// Only the JVMs of this cgroup or below it (its path as /proc/PID/cgroup shows it, in any
    /// hierarchy: /system.slice/app.service, /kubepods.slice); repeat it for several. A JVM is
    /// judged by the cgroup it is in when it starts. Default: every JVM of the host.
    #[arg(long = "cgroup", value_name = "PATH")]
    pub cgroups: Vec<CgroupPath>,
    /// The symbolizer agent's options.
    #[command(flatten)]
    pub agent: DaemonAgentArgs,
    /// The keys of joularcodejava.properties. Joular's CSV files are written (one folder per JVM)
    /// only when --results-path is given.
    #[command(flatten)]
    pub options: ConfigOptions,
}

impl DaemonArgs {
    /// The recording the daemon makes: `record --all` with no end but a signal, each JVM's
    /// branches bounded.
    pub fn recording(&self) -> Recording {
        Recording {
            branch_limit: Some(BranchLimit {
                max: self.max_branches as usize,
                idle: Duration::from_secs_f64(self.branch_idle),
            }),
            ..of_jvms(
                Targets::All(Cgroups::new(self.cgroups.clone())),
                None,
                self.config.clone(),
                &self.agent.agent_args(),
                self.options.clone(),
            )
        }
    }

    /// Whether Joular's CSV files are written: when --results-path is given.
    pub fn writes_csv(&self) -> bool {
        self.options
            .values
            .iter()
            .any(|(key, _)| *key == "results-path")
    }
}

/// `joularcode-bpf top`.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// Which JVMs (default: every JVM of the host).
    #[command(flatten)]
    pub jvms: JvmArgs,
    /// Stop after this many seconds (else at q, Ctrl-C, SIGTERM, or when the JVMs given end).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds, allow_negative_numbers = true)]
    pub duration: Option<f64>,
    /// In plain text (not on a terminal), how many lines of each JVM's list to print.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// The list shown for a JVM at first: its methods, its branches, or its entry points (the
    /// methods that started each branch's unit of work; keys m, b and e change it).
    #[arg(long, value_enum, default_value_t = List::Methods)]
    pub list: List,
    /// The properties file to read instead of ./joularcodejava.properties (it must exist).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The symbolizer agent's options.
    #[command(flatten)]
    pub agent: AgentArgs,
    /// The keys of joularcodejava.properties (the power source's, the sample rate, the
    /// methods-filtering-prefix of the application's branches; results-path is not used).
    #[command(flatten)]
    pub options: ConfigOptions,
}

impl TopArgs {
    /// The recording `top` makes: the same as `record` would with these options.
    pub fn recording(&self) -> Recording {
        of_jvms(
            self.jvms.targets(&[]),
            self.duration,
            self.config.clone(),
            &self.agent,
            self.options.clone(),
        )
    }
}

/// `--root`, of `record` and `report` (whose `--flamegraph` and `--pprof` form the group
/// `views`).
#[derive(Debug, Clone, Copy, Args)]
pub struct RootArgs {
    /// Where the stacks of the flame graph and the pprof profile start: at the thread's start,
    /// or at the branch's entry point (of all branches, found with the methods-filtering-prefix
    /// and entry-points settings; branches without one under "[no entry]").
    #[arg(
        long,
        value_enum,
        default_value_t = Root::Thread,
        requires = "views",
        conflicts_with = "app"
    )]
    pub root: Root,
}

impl RootArgs {
    /// Whether the stacks start at their entry points.
    pub fn at_entries(self) -> bool {
        self.root == Root::Entry
    }
}

/// `joularcode-bpf report`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("views").args(["flamegraph", "pprof"]).multiple(true)))]
pub struct ReportArgs {
    /// The results-path of the recording (a folder holding the CSV files, one folder per JVM, or
    /// one CSV file).
    #[arg(
        value_name = "RESULTS_PATH",
        default_value = "joular-code-java-results"
    )]
    pub results: PathBuf,
    /// The table shows methods-power-all.csv (every frame, JDK and JVM threads included) instead
    /// of methods-power-app.csv.
    #[arg(long)]
    pub all_branches: bool,
    /// How many branches (and methods, in a comparison) to show per JVM; with --fail-above, how
    /// many of the methods using the most energy are checked.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// Write the energy flame graph (an SVG to open in a browser) to FILE: the branches are the
    /// stacks, their joules the widths. With --baseline, a differential flame graph per second of
    /// run: red grew, blue shrank.
    #[arg(long, value_name = "FILE")]
    pub flamegraph: Option<PathBuf>,
    /// Write the energy per branch as a pprof profile (gzipped profile.proto) to FILE, for
    /// go tool pprof, Grafana Pyroscope or speedscope.
    #[arg(long, value_name = "FILE", conflicts_with = "baseline")]
    pub pprof: Option<PathBuf>,
    /// The flame graph and the pprof profile show methods-power-app.csv (the application's
    /// frames) instead of methods-power-all.csv.
    #[arg(long)]
    pub app: bool,
    /// Compare RESULTS, the recording before a change, with AFTER, the recording after it (its
    /// results-path): the branches and methods whose energy per second of run changed most.
    #[arg(long, value_name = "AFTER", conflicts_with = "root")]
    pub baseline: Option<PathBuf>,
    /// With --baseline: exit with status 3 when the total energy per second, or that of one of
    /// the --top methods, grew from RESULTS to AFTER by more than PCT percent (an energy
    /// regression gate for CI).
    #[arg(
        long,
        value_name = "PCT",
        requires = "baseline",
        value_parser = parse_percent,
        allow_negative_numbers = true
    )]
    pub fail_above: Option<f64>,
    /// With --baseline: compare the whole energy of each run rather than its energy per second
    /// (and gate on it), for benchmarks that do the same fixed amount of work in each run.
    #[arg(long, requires = "baseline", conflicts_with = "per")]
    pub per_run: bool,
    /// With --baseline: compare the energy per unit of work (and gate on it). UNITS is N for
    /// both runs, BEFORE,AFTER, or @FILE: a file in each run's results-path (or @B,@A: one each)
    /// whose first line is the number the benchmark did, such as @units.txt.
    #[arg(long, value_name = "UNITS", requires = "baseline", value_parser = per::parse)]
    pub per: Option<WorkUnits>,
    /// What the table adds the energy up by: each branch, or each entry point (the method that
    /// started the branch's unit of work: the handler a framework dispatched to, else the
    /// thread's first application method), read from methods-power-all.csv.
    #[arg(long, value_enum, default_value_t = By::Branch, conflicts_with = "baseline")]
    pub by: By,
    /// Where the flame graph's and the pprof profile's stacks start.
    #[command(flatten)]
    pub root: RootArgs,
    /// The properties file whose methods-filtering-prefix and entry-points find the entry points
    /// (default: ./joularcodejava.properties, if there is one).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The application's frames, for the entry points: comma-separated prefixes (overrides the
    /// file).
    #[arg(long, value_name = "PREFIXES")]
    pub methods_filtering_prefix: Option<String>,
    /// Methods (package.Class.method, comma-separated) that are entry points whenever they are
    /// on the stack, the oldest winning (overrides the file).
    #[arg(long, value_name = "METHODS")]
    pub entry_points: Option<String>,
}

/// `joularcode-bpf raw`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("target").required(true).args(["pids", "all"])))]
pub struct RawArgs {
    /// Which JVMs.
    #[command(flatten)]
    pub jvms: JvmArgs,
    /// How long to sample, in seconds (Ctrl-C stops earlier).
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0, value_parser = parse_seconds, allow_negative_numbers = true)]
    pub duration: f64,
    /// The sample rate.
    #[command(flatten)]
    pub rate: RateArgs,
}

impl RawArgs {
    /// `--duration` as a Duration.
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.duration)
    }
}

/// `joularcode-bpf stacks`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("target").required(true).args(["pids", "all", "command"])))]
pub struct StacksArgs {
    /// Which running JVMs.
    #[command(flatten)]
    pub jvms: JvmArgs,
    /// How long to sample, in seconds (default: until the JVMs or the command end, or Ctrl-C).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds, allow_negative_numbers = true)]
    pub duration: Option<f64>,
    /// Write the stacks to FILE instead of the standard output.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The sample rate.
    #[command(flatten)]
    pub rate: RateArgs,
    /// Add the native frames (libjvm.so, libc, ...) newer than the Java frames of each stack.
    #[arg(long)]
    pub native: bool,
    /// The symbolizer agent's options.
    #[command(flatten)]
    pub agent: AgentArgs,
    /// Run this command and sample the JVMs it starts, until it ends; exit with its exit code.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// `joularcode-bpf record`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("what").required(true).args(["pids", "all", "command"])))]
#[command(group(ArgGroup::new("views").args(["flamegraph", "pprof"]).multiple(true)))]
pub struct RecordArgs {
    /// Which running JVMs.
    #[command(flatten)]
    pub jvms: JvmArgs,
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
    /// The symbolizer agent's options.
    #[command(flatten)]
    pub agent: AgentArgs,
    /// At the end, write the recording's energy flame graph (an SVG to open in a browser) to
    /// FILE: the branches are the stacks, their joules the widths.
    #[arg(long, value_name = "FILE")]
    pub flamegraph: Option<PathBuf>,
    /// At the end, write the recording's energy per branch as a pprof profile (gzipped
    /// profile.proto: energy and samples) to FILE, for go tool pprof, Grafana Pyroscope or
    /// speedscope.
    #[arg(long, value_name = "FILE")]
    pub pprof: Option<PathBuf>,
    /// The flame graph and the pprof profile show the application's branches (those of
    /// methods-power-app.csv) instead of all of them.
    #[arg(long)]
    pub app: bool,
    /// Where the flame graph's and the pprof profile's stacks start.
    #[command(flatten)]
    pub root: RootArgs,
    /// How the JVMs are profiled: bpf (the eBPF sampler, from outside), agent (the agent's
    /// sampling mode, inside each JVM: launched with it, or attached for --pid), or auto (bpf,
    /// and agent when the BPF programs cannot be loaded, which it says).
    #[arg(long, value_enum, default_value_t = Mode::Auto)]
    pub mode: Mode,
    /// The keys of joularcodejava.properties.
    #[command(flatten)]
    pub options: ConfigOptions,
    /// The command to launch and profile (after `--`), with the JVMs it starts from their
    /// first instant; record ends when it ends, with its exit code.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

impl RecordArgs {
    /// The recording these options ask for.
    pub fn recording(&self) -> Recording {
        Recording {
            cycle_log: self.cycle_log.clone(),
            mode: self.mode,
            views: self.flamegraph.is_some() || self.pprof.is_some(),
            ..of_jvms(
                self.jvms.targets(&self.command),
                self.duration,
                self.config.clone(),
                &self.agent,
                self.options.clone(),
            )
        }
    }
}

/// A recording of `targets` that writes no file of its own but Joular's CSV files, in the eBPF
/// mode: what `top` and the daemon run, and what `record` adds its own options to.
fn of_jvms(
    targets: Targets,
    duration: Option<f64>,
    config: Option<PathBuf>,
    agent: &AgentArgs,
    options: ConfigOptions,
) -> Recording {
    Recording {
        targets,
        duration: duration.map(Duration::from_secs_f64),
        config,
        options,
        agent: agent.clone(),
        mode: Mode::Bpf,
        cycle_log: None,
        views: false,
        branch_limit: None,
    }
}

fn parse_percent(text: &str) -> Result<f64, String> {
    match text.trim_end_matches('%').parse::<f64>() {
        Ok(percent) if percent >= 0.0 && percent.is_finite() => Ok(percent),
        _ => Err(format!(
            "{text:?} is not a percentage (0 or more), such as 5"
        )),
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
    fn the_version_names_the_commit_or_says_it_is_unknown() {
        let rest = VERSION
            .strip_prefix(concat!(env!("CARGO_PKG_VERSION"), " (commit "))
            .and_then(|rest| rest.strip_suffix(')'))
            .expect("the version, then the commit");
        assert!(
            rest == "unknown" || (rest.len() == 12 && rest.bytes().all(|b| b.is_ascii_hexdigit())),
            "{VERSION}"
        );
        let err = Cli::try_parse_from(["joularcode-bpf", "--version"]).unwrap_err();
        assert_eq!(err.to_string(), format!("joularcode-bpf {VERSION}\n"));
    }

    #[test]
    fn raw_takes_a_pid_or_all() {
        let cli = Cli::try_parse_from(["joularcode-bpf", "raw", "--pid", "42", "--duration", "2"])
            .expect("valid");
        let Command::Raw(raw) = cli.command else {
            panic!("raw parsed as {:?}", cli.command)
        };
        assert!(matches!(raw.jvms.targets(&[]), Targets::Pids(pids) if pids == [42]));
        assert_eq!(raw.duration(), Duration::from_secs(2));
        assert_eq!(raw.rate.rate, 100);
        let cli = Cli::try_parse_from(["joularcode-bpf", "raw", "--all", "--rate", "1000"])
            .expect("valid");
        let Command::Raw(raw) = cli.command else {
            panic!("raw parsed as {:?}", cli.command)
        };
        assert!(matches!(raw.jvms.targets(&[]), Targets::All(c) if c.is_every()));
        assert_eq!(raw.rate.rate, 1000);
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
    fn top_watches_the_host_or_the_pids_given() {
        let top = |args: &[&str]| {
            let cli = Cli::try_parse_from(["joularcode-bpf", "top"].iter().chain(args))?;
            match cli.command {
                Command::Top(top) => Ok::<TopArgs, clap::Error>(top),
                other => panic!("top parsed as {other:?}"),
            }
        };
        let host = top(&[]).expect("valid").recording();
        assert!(matches!(host.targets, Targets::All(c) if c.is_every()));
        let two = top(&["--pid", "3", "--pid", "4", "--power-source-type", "vm"])
            .expect("valid")
            .recording();
        assert!(matches!(two.targets, Targets::Pids(pids) if pids == [3, 4]));
        assert_eq!(two.options.values, [("power-source-type", "vm".into())]);
        for bad in [&["--pid", "1", "--all"][..], &["--duration", "0"]] {
            assert!(top(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn report_compares_only_with_a_baseline() {
        let report = |args: &[&str]| {
            Cli::try_parse_from(["joularcode-bpf", "report"].iter().chain(args)).map(
                |cli| match cli.command {
                    Command::Report(report) => report,
                    other => panic!("report parsed as {other:?}"),
                },
            )
        };
        let args = report(&["before", "--baseline", "after", "--fail-above", "5%"]).expect("valid");
        assert_eq!(args.fail_above, Some(5.0));
        assert_eq!(args.baseline, Some(PathBuf::from("after")));
        for bad in [
            &["r", "--fail-above", "5"][..],
            &["r", "--baseline", "b", "--fail-above", "-1"],
            &["r", "--baseline", "b", "--pprof", "p.pb.gz"],
            &["r", "--per-run"],
            &["r", "--per", "5"],
            &["r", "--baseline", "b", "--per-run", "--per", "5"],
            &["r", "--baseline", "b", "--per", "0"],
        ] {
            assert!(report(bad).is_err(), "{bad:?}");
        }
        let args = report(&["b", "--baseline", "a", "--per", "10,@u"]).expect("valid");
        assert_eq!(
            args.per.map(|units| units.after),
            Some(per::Units::File(PathBuf::from("u")))
        );
        assert!(
            report(&["b", "--baseline", "a", "--per-run"])
                .unwrap()
                .per_run
        );
    }

    #[test]
    fn the_daemon_loads_nothing_into_the_jvms_unless_asked() {
        let daemon = |args: &[&str]| {
            let cli = Cli::try_parse_from(["joularcode-bpf", "daemon"].iter().chain(args))?;
            match cli.command {
                Command::Daemon(daemon) => Ok::<DaemonArgs, clap::Error>(daemon),
                other => panic!("daemon parsed as {other:?}"),
            }
        };
        let default = daemon(&[]).expect("valid").recording().agent;
        assert!(default.no_attach && default.agent_path.is_none());
        let attach = daemon(&["--attach", "--agent-path", "a.so"]).expect("valid");
        let agent = attach.recording().agent;
        assert!(!agent.no_attach);
        assert_eq!(agent.agent_path, Some(PathBuf::from("a.so")));
        for bad in [&["--agent-path", "a.so"][..], &["--no-attach"]] {
            assert!(daemon(bad).is_err(), "{bad:?}");
        }
        // The other commands load it unless told not to.
        assert!(
            !record(&["--all"])
                .expect("valid")
                .recording()
                .agent
                .no_attach
        );
        assert!(
            record(&["--no-attach", "--", "java"])
                .expect("valid")
                .recording()
                .agent
                .no_attach
        );
    }

    #[test]
    fn stacks_takes_a_pid_all_or_a_command() {
        let args = stacks(&["--pid", "7", "--duration", "3", "--native"]).expect("valid");
        assert_eq!(
            (&args.jvms.pids[..], args.duration, args.native),
            (&[7][..], Some(3.0), true)
        );
        let args =
            stacks(&["--output", "out.folded", "--", "java", "-Xint", "Main"]).expect("valid");
        assert_eq!(args.command, ["java", "-Xint", "Main"]);
        assert_eq!(args.output, Some(PathBuf::from("out.folded")));
        assert_eq!((args.rate.rate, args.duration), (100, None));
        assert!(stacks(&["--all"]).expect("valid").jvms.all);
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
        assert_eq!(args.jvms.pids, [4, 5]);
        assert_eq!(args.recording().duration, Some(Duration::from_millis(1500)));
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
                .jvms
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

//! A recording: energy per Java branch for one JVM, a launched command, or every JVM of the host
//! (`record`, `top` and the daemon are recordings; see docs/record.md).
//!
//! A thin loop over a [`Session`] (which samples, follows the JVMs and counts samples per thread
//! and branch): at the end of each power window, core's cycle [`Engine`] shares the power read out
//! between the JVMs, and each JVM's rows go to its results folder ([`results::Results`]) and the
//! [`Outputs`]' sinks.

pub mod agent;
pub mod cycle_log;
pub mod options;
pub mod results;
pub mod sink;
pub mod status;
pub mod views;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::ValueEnum;
use joularcode_core::carbon::{self, IntensityReader, IntensitySetting};
use joularcode_core::config::{Config, SourceKind};
use joularcode_core::cycle::{Engine, JvmInput};
use joularcode_core::log::{Level, Log, Recorded};
use joularcode_core::machine::{BusyCpu, CpuSource};
use joularcode_core::output::losses::Lost;
use joularcode_core::power::{self, PowerError, PowerSource, SystemClock, SystemRoots};
use joularcode_core::threads::{cycle_threads, ThreadCpu};

use crate::discovery::{self, DiscoveryError};
use crate::launch::{self, LaunchError};
use crate::output::OutputError;
use crate::sampler::{monotonic_ns, Sampler, SamplerError, CONSUME_INTERVAL};
use crate::session::{AgentArgs, BranchLimit, Session, SessionError, SessionOptions, Targets};
use crate::signals::{self, SignalError};
use agent::AgentModeError;
use cycle_log::{CycleLog, CycleLogError};
use options::{ConfigOptions, OptionsError};
use results::{Results, ResultsError};
use sink::{CycleView, JvmView, Sink};

/// How long the loop waits for samples between two looks at the clock: the consumer's pass.
const PUMP_INTERVAL: Duration = CONSUME_INTERVAL;

/// What a recording profiles and how: `record`, `top` and the daemon each build one from their
/// options ([`crate::cli`]).
#[derive(Debug)]
pub struct Recording {
    /// The JVMs to profile.
    pub targets: Targets,
    /// Stop after this long (else at Ctrl-C, SIGTERM, or when the JVMs or the command end).
    pub duration: Option<Duration>,
    /// The properties file to read instead of ./joularcodejava.properties (it must exist).
    pub config: Option<PathBuf>,
    /// The keys of joularcodejava.properties given as options.
    pub options: ConfigOptions,
    /// The symbolizer agent's options.
    pub agent: AgentArgs,
    /// How the JVMs are profiled.
    pub mode: Mode,
    /// Where one JSON line per cycle and JVM goes, if asked for.
    pub cycle_log: Option<PathBuf>,
    /// Whether a flame graph or a pprof profile is asked for (the eBPF mode alone makes them).
    pub views: bool,
    /// A bound on each JVM's branches (the daemon's).
    pub branch_limit: Option<BranchLimit>,
}

impl Recording {
    /// The pids given (none for `--all` or a command).
    pub fn pids(&self) -> &[u32] {
        match &self.targets {
            Targets::Pids(pids) => pids,
            Targets::All(_) | Targets::Launch(_) => &[],
        }
    }

    /// Whether every JVM of the host is profiled.
    pub fn all(&self) -> bool {
        matches!(self.targets, Targets::All(_))
    }

    /// Why a recording of these targets would have profiled no JVM.
    fn none_profiled(&self) -> &'static str {
        match &self.targets {
            Targets::Launch(_) => {
                "the command started no JVM, or none that ran long enough to be seen (about 0.1 s)"
            }
            Targets::All(cgroups) if cgroups.is_every() => {
                "no JVM ran on this host during the recording"
            }
            Targets::All(_) => "no JVM ran in the given cgroups during the recording",
            Targets::Pids(_) => "the JVMs ended before they could be profiled",
        }
    }
}

/// How a recording profiles the JVMs (`--mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// The eBPF sampler, and the agent's sampling mode when the BPF programs cannot be loaded.
    Auto,
    /// The eBPF sampler only.
    Bpf,
    /// The agent's sampling mode only.
    Agent,
}

/// Why a recording cannot start or go on: one line each, that says what failed and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// A `--pid` is not a JVM this process can read.
    #[error("{0}")]
    Target(#[from] DiscoveryError),
    /// The working directory, which relative paths start from, cannot be read.
    #[error("cannot read the working directory: {0}")]
    WorkingDir(#[source] std::io::Error),
    /// The configuration file or an option cannot be used.
    #[error("{0}")]
    Options(#[from] OptionsError),
    /// The eBPF sampler cannot run.
    #[error("{0}")]
    Sampler(#[from] SamplerError),
    /// `results-path` cannot hold the results.
    #[error("{0}")]
    Results(#[from] ResultsError),
    /// The `--cycle-log` file cannot be created.
    #[error("{0}")]
    CycleLog(#[from] CycleLogError),
    /// The power source cannot be opened or read.
    #[error("Cannot measure the CPU power: {0}")]
    Power(#[source] PowerError),
    /// The carbon intensity file cannot be read at start.
    #[error("Cannot count grams of CO2e: {0} Fix carbon-intensity, or leave it unset.")]
    Carbon(String),
    /// The signals cannot be caught.
    #[error("{0}")]
    Signals(#[from] SignalError),
    /// The session cannot start or go on.
    #[error("{0}")]
    Session(#[from] SessionError),
    /// The launched command could not be ended.
    #[error("{0}")]
    Launch(#[from] LaunchError),
    /// The agent's sampling mode cannot run.
    #[error("{0}")]
    AgentMode(#[from] AgentModeError),
    /// A flame graph or pprof profile cannot be written.
    #[error("{0}")]
    Output(#[from] OutputError),
}

/// Where a recording's cycles go.
pub struct Outputs {
    /// Where messages go.
    pub log: Arc<dyn Log>,
    /// Whether the CSV files of results-path are written (`top` writes none).
    pub csv: bool,
    /// The other outputs, fed with each cycle.
    pub sinks: Vec<Box<dyn Sink>>,
}

/// Checks that each pid given is a JVM this process can read: the one line a mistyped pid gives,
/// before anything else is said or done (the configuration read, the power source chosen).
pub fn check_targets(recording: &Recording) -> Result<(), RecordError> {
    for &pid in recording.pids() {
        discovery::check_jvm(Path::new("/proc"), pid)?;
    }
    Ok(())
}

/// Runs `recording` until its duration is over, a signal arrives, or the JVMs (or the command)
/// end, its cycles going to `outputs`. Returns the exit code: the launched command's (ended with
/// SIGTERM if it still runs then: [`launch::end`]), else 0; 1 (unless the command's is not 0)
/// when rows could not be written. Errors are one line each ([`RecordError`]).
pub fn run_with(args: Recording, outputs: Outputs) -> Result<i32, RecordError> {
    let config = configure(&args, &*outputs.log)?;
    run_configured(args, config, outputs)
}

/// The configuration of `args`: its file (or the working folder's) and its options, what the
/// file says said to `log`.
pub fn configure(args: &Recording, log: &dyn Log) -> Result<Config, RecordError> {
    let working_dir = std::env::current_dir().map_err(RecordError::WorkingDir)?;
    Ok(options::load(
        args.config.as_deref(),
        &args.options,
        &working_dir,
        log,
    )?)
}

/// [`run_with`] with the configuration already read ([`configure`]).
pub fn run_configured(
    args: Recording,
    config: Config,
    mut outputs: Outputs,
) -> Result<i32, RecordError> {
    let log = outputs.log.clone();
    let working_dir = std::env::current_dir().map_err(RecordError::WorkingDir)?;
    let rate_hz = 1000 / config.sample_rate_ms;
    let sampler = match args.mode {
        Mode::Agent => return agent_mode(&args, &config, &working_dir, &*log),
        Mode::Bpf => Sampler::new(rate_hz)?,
        Mode::Auto => match Sampler::new(rate_hz) {
            Ok(sampler) => sampler,
            Err(error) if error.is_unavailable() && !args.all() => {
                log.log(
                    Level::Warning,
                    &format!(
                        "The BPF programs cannot be loaded ({error}): the JVMs profile themselves with the agent's sampling mode instead (--mode agent)."
                    ),
                );
                return agent_mode(&args, &config, &working_dir, &*log);
            }
            Err(error) => return Err(error.into()),
        },
    };
    let results = if outputs.csv {
        Some(Results::new(
            &config.results_path,
            args.all() || args.pids().len() > 1,
        )?)
    } else {
        None
    };
    if let Some(path) = args.cycle_log.as_deref() {
        CycleLog::check(path)?;
    }
    let source = open_power(&config, &*log)?;
    check_carbon(&config, &*log)?;

    let session_options = SessionOptions {
        prefixes: config.methods_filtering_prefix.clone(),
        branch_limit: args.branch_limit,
        ..args.agent.session_options(rate_hz, log.clone())
    };
    signals::stop_on_signals()?;
    let none_profiled = args.none_profiled();
    let mut session = Session::with_sampler(sampler, args.targets, &session_options)?;
    let recorded = record(
        args.cycle_log.as_deref(),
        args.duration,
        &config,
        source,
        results,
        &mut session,
        &mut outputs,
    );
    // What was gathered is written even when recording failed.
    let finished = outputs
        .sinks
        .iter_mut()
        .map(|sink| sink.finish(&*log))
        .fold(Ok(()), Result::and);
    let none_profiled = unreadable(&session).unwrap_or_else(|| none_profiled.to_string());
    // A launched command is ended even when recording failed, rather than left behind.
    let exit = match session.stop() {
        Some(mut child) => launch::end(&mut child, launch::GRACE, &*log),
        None => Ok(0),
    };
    let summary = recorded?;
    finished?;
    Ok(conclude(&summary, exit?, &none_profiled, &*log))
}

/// The JVMs of `session` that run but could not be read, each with why: what to say rather than
/// that they ended, when none was profiled.
fn unreadable(session: &Session) -> Option<String> {
    let said: Vec<String> = session
        .jvms()
        .filter_map(|jvm| {
            let why = jvm.unreadable_because()?;
            Some(format!(
                "JVM {} ({}) is running but could not be read: {why}",
                jvm.pid(),
                jvm.main_class()
            ))
        })
        .collect();
    (!said.is_empty()).then(|| said.join("; "))
}

/// What a run did, for its last words.
struct Summary {
    /// JVMs profiled.
    profiled: usize,
    /// Rows (CSV rows and cycle log lines) that could not be written.
    lost: Lost,
}

/// Says what the run missed, and returns its exit code: `code` (the command's), or 1 when rows
/// were lost and `code` is 0.
/// `why` says why no JVM was profiled, when none was.
fn conclude(summary: &Summary, code: i32, why: &str, log: &dyn Log) -> i32 {
    if summary.profiled == 0 {
        log.log(
            Level::Warning,
            &format!("No JVM was profiled: {why}. Nothing was written."),
        );
    }
    if summary.lost.rows == 0 {
        return code;
    }
    log.log(
        Level::Severe,
        &format!(
            "{} row(s) of {} cycle(s) could not be written (see above): the results are incomplete.",
            summary.lost.rows, summary.lost.cycles
        ),
    );
    if code == 0 {
        1
    } else {
        code
    }
}

/// Records the cycles of `session` into `results` and `sinks` until its duration is over, a
/// signal arrives, or the JVMs (or the command) end.
fn record(
    cycle_log: Option<&Path>,
    duration: Option<Duration>,
    config: &Config,
    source: Box<dyn PowerSource>,
    results: Option<Results>,
    session: &mut Session,
    outputs: &mut Outputs,
) -> Result<Summary, RecordError> {
    let log = &*outputs.log.clone();
    let sinks = &mut outputs.sinks;
    let cycle_log = cycle_log.map(CycleLog::create).transpose()?;
    let cpus = u32::try_from(session.sampler().cpus()).unwrap_or(u32::MAX);
    let mut recorder = Recorder {
        threads: ThreadCpu::default(),
        opened: HashSet::new(),
        source: power::describe_choice(config, &*source),
        results,
        cycle_log,
        sinks,
        profiled: 0,
    };
    let machine = Box::new(BusyCpu::start(CpuSource::proc_stat(Path::new("/proc"))));
    let mut engine = Engine::start(source, config, machine, cpus, monotonic_ns());

    let deadline = duration.map(|duration| Instant::now() + duration);
    loop {
        session.pump(PUMP_INTERVAL)?;
        recorder.open_new(session, log)?;
        let stop = signals::stop_requested()
            || deadline.is_some_and(|deadline| Instant::now() >= deadline)
            || session.finished();
        let now_ns = monotonic_ns();
        if stop || engine.window_over(now_ns) {
            recorder.end_cycle(session, &mut engine, now_ns, log)?;
        }
        if stop {
            let mut lost = recorder
                .results
                .as_ref()
                .map(Results::lost)
                .unwrap_or_default();
            if let Some(cycle_log) = &recorder.cycle_log {
                lost += cycle_log.lost();
            }
            return Ok(Summary {
                profiled: recorder.profiled,
                lost,
            });
        }
    }
}

/// The power source of `config`, what it says going to `log`. A `vm` source is read once: its
/// file must be there now, as a typo would otherwise only show as warnings.
fn open_power(config: &Config, log: &dyn Log) -> Result<Box<dyn PowerSource>, RecordError> {
    let mut source = power::open(
        config,
        &SystemRoots::default(),
        Arc::new(SystemClock::default()),
        log,
    )
    .map_err(RecordError::Power)?;
    if config.source_kind() == Ok(SourceKind::Vm) {
        source.watts().map_err(RecordError::Power)?;
    }
    Ok(source)
}

/// Checks the `carbon-intensity` file, if that is the setting, and says what the grams of CO2e
/// are counted from: the file must be there now, as a typo would otherwise only show as
/// warnings (a vm power file is checked so too).
fn check_carbon(config: &Config, log: &dyn Log) -> Result<(), RecordError> {
    let Some(setting) = &config.carbon_intensity else {
        return Ok(());
    };
    if let IntensitySetting::File(path) = setting {
        carbon::read_intensity(path).map_err(RecordError::Carbon)?;
    }
    log.log(
        Level::Info,
        &format!(
            "Grams of CO2e are counted at the carbon intensity of {}.",
            IntensityReader::new(setting).describe()
        ),
    );
    Ok(())
}

/// `record --mode agent` ([`agent`]), after the checks `record` makes before anything starts:
/// the results path, and the power source (opened here and closed, what it says kept quiet: the
/// agent says it).
fn agent_mode(
    args: &Recording,
    config: &Config,
    working_dir: &Path,
    log: &dyn Log,
) -> Result<i32, RecordError> {
    Results::new(&config.results_path, args.pids().len() > 1)?;
    drop(open_power(config, &Recorded::default())?);
    check_carbon(config, log)?;
    Ok(agent::run(args, config, working_dir, log)?)
}

/// The state of the loop between cycles, and where the cycles' results go.
struct Recorder<'a> {
    threads: ThreadCpu,
    opened: HashSet<u32>,
    source: String,
    results: Option<Results>,
    cycle_log: Option<CycleLog>,
    sinks: &'a mut [Box<dyn Sink>],
    /// JVMs profiled so far.
    profiled: usize,
}

impl Recorder<'_> {
    /// Opens the results of the JVMs profiled for the first time (once they could be read: one
    /// that ends before gets no file), and says what is profiled. Results that cannot be written
    /// end the run when they are the first JVM's and go in `results-path` itself (one `--pid`, a
    /// command); otherwise (`--all`, the daemon, several `--pid`, a command's later JVMs) they
    /// are said (SEVERE) and the run goes on for the other JVMs.
    fn open_new(&mut self, session: &Session, log: &dyn Log) -> Result<(), RecordError> {
        for jvm in session.jvms().filter(|jvm| jvm.is_profiled()) {
            let first = self.opened.is_empty();
            if !self.opened.insert(jvm.pid()) {
                continue;
            }
            let name = format!("JVM {} ({})", jvm.pid(), jvm.main_class());
            self.profiled += 1;
            let Some(results) = self.results.as_mut() else {
                log.log(
                    Level::Info,
                    &format!("Profiling {name}, power from {}.", self.source),
                );
                continue;
            };
            let own_folder = results.per_jvm();
            match results.open(jvm.pid(), jvm.main_class()) {
                Ok(dir) => log.log(
                    Level::Info,
                    &format!(
                        "Profiling {name}, power from {}, results in {}.",
                        self.source,
                        dir.display()
                    ),
                ),
                Err(error) if first && !own_folder => return Err(error.into()),
                Err(error) => log.log(
                    Level::Severe,
                    &format!("{name} is profiled without results: {error}"),
                ),
            }
        }
        Ok(())
    }

    /// Ends the cycle at `now_ns`: takes the threads' CPU time, the power and the machine's busy
    /// time, waits for the cycle's samples, shares the power out and writes the rows and the
    /// cycle log, and hands the cycle to the sinks; then forgets the JVMs that ended, so that a new one with the same pid
    /// starts afresh.
    fn end_cycle(
        &mut self,
        session: &mut Session,
        engine: &mut Engine,
        now_ns: u64,
        log: &dyn Log,
    ) -> Result<(), RecordError> {
        let times = session.sampler().thread_times();
        session.note_threads(&times);
        let uses = self.threads.cycle(times);
        let measures = engine.measure(now_ns, log);
        // A sample reaches the session up to one consumer pass after it was taken, in about the
        // order they were taken: the samples of this cycle are in once one taken after its end
        // is, or after one pass (when nothing runs).
        let lag_ns = u64::try_from(CONSUME_INTERVAL.as_nanos()).unwrap_or(u64::MAX);
        let wait_until_ns = now_ns.saturating_add(lag_ns);
        while session.sampled_until() <= now_ns {
            let left = wait_until_ns.saturating_sub(monotonic_ns());
            if left == 0 {
                break;
            }
            session.pump(Duration::from_nanos(left))?;
        }
        self.open_new(session, log)?;

        let mut counts = session.take_counts_until(now_ns);
        let jvms: Vec<JvmInput> = session
            .jvms()
            .filter(|jvm| self.opened.contains(&jvm.pid()))
            .map(|jvm| {
                let threads = cycle_threads(
                    jvm.pid(),
                    counts.remove(&jvm.pid()).unwrap_or_default(),
                    &uses,
                );
                JvmInput {
                    pid: jvm.pid(),
                    branches: jvm.branches(),
                    cpu_ns: threads.cpu_ns(),
                    threads,
                }
            })
            .collect();
        let cycle = engine.share(&measures, session.sampler().drops(), &jvms, log);
        if let Some(results) = self.results.as_mut() {
            for (jvm, input) in cycle.jvms.iter().zip(&jvms) {
                results.write(
                    jvm.pid,
                    cycle.timestamp_ms,
                    &jvm.result,
                    input.branches,
                    cycle.carbon,
                    log,
                );
            }
        }
        if let Some(cycle_log) = self.cycle_log.as_mut() {
            cycle_log.write(&cycle.json_lines(), log);
        }
        let view = CycleView {
            source: &self.source,
            cycle: &cycle,
            jvms: cycle
                .jvms
                .iter()
                .zip(&jvms)
                .map(|(result, input)| {
                    let jvm = session.jvm(result.pid);
                    JvmView {
                        main_class: jvm.map_or("", |jvm| jvm.main_class()),
                        ended: jvm.is_some_and(|jvm| jvm.ended()),
                        branches: input.branches,
                        threads: &input.threads,
                        result,
                    }
                })
                .collect(),
        };
        for sink in self.sinks.iter_mut() {
            sink.cycle(&view);
        }

        for jvm in session.jvms().filter(|jvm| jvm.ended()) {
            if let Some(results) = self.results.as_mut() {
                results.close(jvm.pid());
            }
            engine.forget(jvm.pid());
            self.threads.forget(jvm.pid());
            self.opened.remove(&jvm.pid());
        }
        session.forget_ended();
        Ok(())
    }
}

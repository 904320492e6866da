//! `joularcode-bpf record`: energy per Java branch for one JVM, a launched command, or every JVM
//! of the host, written in Joular Code for Java's CSV files (see docs/record.md).
//!
//! A thin loop over a [`Session`] (which samples, follows the JVMs and counts samples per thread
//! and branch): at the end of each power window, the [`cycle::Engine`] shares the power read out
//! between the JVMs, and each JVM's rows go to its results folder ([`results::Results`]).

pub mod cycle;
pub mod options;
pub mod results;
pub mod status;

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use joularcode_core::attribution::{Samples, ThreadKind};
use joularcode_core::config::{Config, SourceKind};
use joularcode_core::log::{Level, Log};
use joularcode_core::power::{self, SystemClock, SystemRoots};

use crate::cli::RecordArgs;
use crate::launch;
use crate::sampler::{monotonic_ns, signals, CONSUME_INTERVAL};
use crate::session::{Session, SessionOptions, Targets, ThreadCounts};
use crate::threads;
use cycle::{Engine, JvmInput, ThreadCpu, ThreadUse};
use results::Results;
use status::{Status, Terminal};

/// How long the loop waits for samples between two looks at the clock.
const PUMP_INTERVAL: Duration = Duration::from_millis(100);

/// Runs `record` until its duration is over, a signal arrives, or the JVMs (or the command) end.
/// Returns the exit code: the launched command's (once it has ended: it is waited for), else 0.
/// Errors are one line each.
pub fn run(args: &RecordArgs) -> Result<i32, String> {
    let terminal = Arc::new(Terminal::new());
    let log: Arc<dyn Log> = terminal.clone();
    let working_dir = std::env::current_dir()
        .map_err(|error| format!("cannot read the working directory: {error}"))?;
    let config = options::load(args.config.as_deref(), &args.options, &working_dir, &*log)?;
    let mut results = Results::new(&config.results_path, args.all || args.pids.len() > 1)?;
    let mut source = power::open(
        &config,
        &SystemRoots::default(),
        Arc::new(SystemClock::default()),
        &*log,
    )
    .map_err(|error| format!("Cannot measure the CPU power: {error}"))?;
    if config.source_kind() == Ok(SourceKind::Vm) {
        // The file must be there now: a typo would otherwise only show as warnings
        source
            .watts()
            .map_err(|error| format!("Cannot measure the CPU power: {error}"))?;
    }

    let mut session_options = SessionOptions::new(log.clone());
    session_options.rate_hz = 1000 / config.sample_rate_ms;
    session_options.prefixes = config.methods_filtering_prefix.clone();
    session_options.agent_path = args.agent_path.clone();
    let mut session =
        Session::start(targets(args), &session_options).map_err(|error| error.to_string())?;
    signals::stop_on_signals()?;
    let mut cycle_log = args.cycle_log.as_deref().map(open_cycle_log).transpose()?;
    let cpus = u32::try_from(session.sampler().cpus()).unwrap_or(u32::MAX);
    let mut engine = Engine::start(source, &config, Path::new("/proc"), cpus, monotonic_ns());
    let mut recorder = Recorder {
        threads: ThreadCpu::default(),
        opened: HashSet::new(),
        source: describe_source(&config),
        status: Status::default(),
    };

    let deadline = args.duration().map(|duration| Instant::now() + duration);
    loop {
        session
            .pump(PUMP_INTERVAL)
            .map_err(|error| error.to_string())?;
        recorder.open_new(&session, &mut results, &*log)?;
        let stop = signals::stop_requested()
            || deadline.is_some_and(|deadline| Instant::now() >= deadline)
            || session.finished();
        let now_ns = monotonic_ns();
        if stop || engine.window_over(now_ns) {
            let uses = recorder.threads.cycle(session.sampler().thread_times());
            if stop {
                // The samples of the last instants are still in the sampler's ring buffer
                std::thread::sleep(2 * CONSUME_INTERVAL);
                session
                    .pump(Duration::ZERO)
                    .map_err(|error| error.to_string())?;
                recorder.open_new(&session, &mut results, &*log)?;
            }
            let cycle = recorder.cycle(&mut session, &mut engine, now_ns, &uses, &*log);
            for jvm in &cycle.jvms {
                if let Some(profiled) = session.jvm(jvm.pid) {
                    results.write(
                        jvm.pid,
                        cycle.timestamp_ms,
                        &jvm.result,
                        profiled.branches(),
                        &*log,
                    );
                }
            }
            if let Some(file) = cycle_log.as_mut() {
                if let Err(error) = file.write_all(cycle.json_lines().as_bytes()) {
                    log.log(
                        Level::Severe,
                        &format!("Could not write the cycle log: {error}"),
                    );
                    cycle_log = None;
                }
            }
            for jvm in session.jvms().filter(|jvm| jvm.ended()) {
                results.close(jvm.pid());
                engine.forget(jvm.pid());
                recorder.threads.forget(jvm.pid());
            }
            session.forget_ended();
        }
        recorder.status.jvms = session.jvms().count();
        terminal.show(&recorder.status);
        if stop {
            break;
        }
    }
    terminal.finish();
    drop(results);
    let exit = session.launched_exit();
    match (exit, session.stop()) {
        (Some(code), _) => Ok(code),
        (None, Some(mut child)) => child
            .wait()
            .map(launch::exit_code)
            .map_err(|error| format!("cannot wait for the command: {error}")),
        (None, None) => Ok(0),
    }
}

/// What the command line asks to profile.
fn targets(args: &RecordArgs) -> Targets {
    match args.command.split_first() {
        Some((program, rest)) => {
            let mut command = Command::new(program);
            command.args(rest);
            Targets::Launch(command)
        }
        None if args.all => Targets::All,
        None => Targets::Pids(args.pids.clone()),
    }
}

/// The power source, as the start lines name it.
fn describe_source(config: &Config) -> String {
    let path = |path: Option<&Path>| path.map_or(String::new(), |p| format!(" {}", p.display()));
    match config.source_kind() {
        Ok(SourceKind::Vm) => format!(
            "vm ({} file{})",
            config.vm_power_format,
            path(config.vm_power_file.as_deref())
        ),
        Ok(SourceKind::RingBuffer) => {
            format!("ringbuffer{}", path(config.ringbuffer_path.as_deref()))
        }
        _ => config.power_source_type.clone(),
    }
}

/// Opens the `--cycle-log` file, emptied, refusing a symbolic link.
fn open_cycle_log(path: &Path) -> Result<File, String> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|error| {
            format!(
                "--cycle-log {}: {error}. Give a path to a file that can be written (not a \
                 symbolic link).",
                path.display()
            )
        })
}

/// The state of the loop between cycles.
struct Recorder {
    threads: ThreadCpu,
    opened: HashSet<u32>,
    source: String,
    status: Status,
}

impl Recorder {
    /// Opens the results of the JVMs seen for the first time, and says what is profiled.
    fn open_new(
        &mut self,
        session: &Session,
        results: &mut Results,
        log: &dyn Log,
    ) -> Result<(), String> {
        for jvm in session.jvms() {
            if self.opened.insert(jvm.pid()) {
                let dir = results.open(jvm.pid(), jvm.main_class())?;
                log.log(
                    Level::Info,
                    &format!(
                        "Profiling JVM {} ({}), power from {}, results in {}.",
                        jvm.pid(),
                        jvm.main_class(),
                        self.source,
                        dir.display()
                    ),
                );
            }
        }
        Ok(())
    }

    /// Ends the cycle at `now_ns` with the threads' CPU `uses` and the samples counted.
    fn cycle(
        &mut self,
        session: &mut Session,
        engine: &mut Engine,
        now_ns: u64,
        uses: &[ThreadUse],
        log: &dyn Log,
    ) -> cycle::Cycle {
        let mut counts = session.take_counts();
        let jvms: Vec<JvmInput> = session
            .jvms()
            .map(|jvm| JvmInput {
                pid: jvm.pid(),
                branches: jvm.branches(),
                samples: jvm_samples(
                    jvm.pid(),
                    counts.remove(&jvm.pid()).unwrap_or_default(),
                    uses,
                ),
            })
            .collect();
        let cycle = engine.end(now_ns, session.sampler().drops(), &jvms, log);
        self.status.cycles += 1;
        self.status.samples += cycle.jvms.iter().map(|jvm| jvm.samples).sum::<u64>();
        self.status.energy_j += cycle.jvms_energy_j();
        self.status.drops = session.sampler().drops();
        cycle
    }
}

/// One JVM's samples for core: the counts of its sampled threads, and the CPU time of all its
/// threads that ran, each classified as a Java thread or one of the JVM's own.
fn jvm_samples(pid: u32, counts: HashMap<u32, ThreadCounts>, uses: &[ThreadUse]) -> Samples {
    let mut samples = Samples::default();
    for thread in uses.iter().filter(|thread| thread.pid == pid) {
        let tid = u64::from(thread.tid);
        samples.add_cpu(tid, thread.cpu_ns);
        if threads::classify(&thread.name).is_some() {
            samples.set_kind(tid, ThreadKind::Jvm);
        }
    }
    for (tid, thread) in counts {
        let tid = u64::from(tid);
        samples.set_kind(tid, thread.kind);
        for (branch, n) in thread.counts {
            samples.count(tid, branch, n);
        }
    }
    samples
}

//! The monitor thread of a profile (`joularcode-sampler`, attached to the JVM as a daemon): it
//! opens the power source and the results, starts the sampler, then names the samples as they
//! come and, at the end of each power window, shares the power out with core's cycle engine and
//! writes the rows: the loop of `record`, inside the JVM.
//!
//! Everything is opened on the monitor thread, and what failed is said to the thread that
//! started the profile before it returns, so that an attach is refused with its reason.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use joularcode_core::config::{Config, SourceKind};
use joularcode_core::cycle::{Engine, JvmInput};
use joularcode_core::log::{Level, Log, Stderr};
use joularcode_core::machine::{CpuSource, SystemLoad};
use joularcode_core::names::fit_for_file_name;
use joularcode_core::output::carbon::CarbonWriter;
use joularcode_core::output::csv::CsvWriter;
use joularcode_core::power::{self, PowerError, SystemClock, SystemRoots};
use joularcode_core::threads::{cycle_threads, ThreadCounts, ThreadCpu};

use super::frames::Frames;
use super::options::{OptionsError, SampleOptions, SamplerChoice};
use super::{dumps, process, set_events, Sampler};
use crate::jvmti::{self, Env, JavaVm, Jni};
use crate::lock;

/// How long a profile's end waits for its last cycle to be written.
const END_WAIT: Duration = Duration::from_secs(5);
/// How long the start of a profile waits for the monitor thread to be ready.
const START_WAIT: Duration = Duration::from_secs(30);
/// The name of the monitor thread (also its Java name).
const THREAD_NAME: &str = "joularcode-sampler";

/// Why a profile cannot start: the one line said before the JVM runs on unprofiled.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The monitor thread could not be made.
    #[error("cannot start the monitor thread: {0}.")]
    Thread(std::io::Error),
    /// The monitor thread said nothing within [`START_WAIT`].
    #[error("the monitor thread did not start.")]
    NotStarted,
    /// The monitor thread could not attach to the JVM.
    #[error("the monitor thread cannot attach to the JVM.")]
    Attach,
    /// The working directory, where the configuration is looked for, cannot be read.
    #[error("cannot read the working directory: {0}.")]
    WorkingDir(std::io::Error),
    /// The options, or the configuration they make, cannot be used.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// The power source cannot be opened or read.
    #[error("Cannot measure the CPU power: {0}")]
    Power(PowerError),
    /// The results folder or its files cannot be written.
    #[error("{0}")]
    Results(std::io::Error),
    /// The cycle log cannot be written.
    #[error("cycle-log={}: {source}. Give a file that can be written (not a symbolic link).", path.display())]
    CycleLog {
        /// The file given.
        path: PathBuf,
        /// The OS's error.
        source: std::io::Error,
    },
    /// The signal sampler cannot start.
    #[cfg(unix)]
    #[error(transparent)]
    Signals(#[from] super::signals::SignalError),
    /// `sampler=signals` in a JVM without AsyncGetCallTrace.
    #[cfg(unix)]
    #[error("sampler=signals: this JVM has no AsyncGetCallTrace. Use sampler=auto or jvmti.")]
    NoAsyncGetCallTrace,
    /// `sampler=signals` on Windows.
    #[cfg(not(unix))]
    #[error("sampler=signals needs signals, which Windows has not. Use sampler=auto or jvmti.")]
    NoSignals,
}

/// The running profile, as the rest of the agent holds it.
pub struct Handle {
    control: Arc<Control>,
    thread: JoinHandle<()>,
}

/// The stop request, and the monitor's answer.
#[derive(Default)]
struct Control {
    state: Mutex<(bool, bool)>,
    changed: Condvar,
}

impl Control {
    fn stop_requested(&self) -> bool {
        lock(&self.state).0
    }

    /// Waits `timeout`, or less if a stop is asked.
    fn wait(&self, timeout: Duration) {
        let state = lock(&self.state);
        if !state.0 {
            let _ = self.changed.wait_timeout(state, timeout);
        }
    }

    fn finished(&self) {
        lock(&self.state).1 = true;
        self.changed.notify_all();
    }
}

impl Handle {
    /// Asks the monitor to end the profile and waits, at most [`END_WAIT`], for its last cycle.
    pub fn stop(self) {
        let mut state = lock(&self.control.state);
        state.0 = true;
        self.control.changed.notify_all();
        let deadline = Instant::now() + END_WAIT;
        while !state.1 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            state = self
                .control
                .changed
                .wait_timeout(state, left)
                .map(|(state, _)| state)
                .unwrap_or_else(|poisoned| poisoned.into_inner().0);
        }
        drop(state);
        let _ = self.thread.join();
    }
}

/// What a profile needs, open.
pub struct Monitor {
    sampler: Box<dyn Sampler>,
    frames: Frames,
    engine: Engine,
    writer: CsvWriter,
    carbon: CarbonWriter,
    cycle_log: Option<File>,
    counts: HashMap<u32, ThreadCounts>,
    threads: ThreadCpu,
    pid: u32,
    clock: Instant,
    process_cpu_ns: u64,
    own_cpu_ns: u64,
    /// The sampler's walks at the end of the previous cycle.
    walks: u64,
    log: Stderr,
}

/// A JNI environment pointer carried to the monitor thread.
struct SendVm(*mut JavaVm);
// SAFETY: the JavaVM may be used from any thread.
unsafe impl Send for SendVm {}

impl Monitor {
    /// Starts the monitor thread of a profile with `options`, and waits until it is sampling, or
    /// has said why it cannot.
    pub fn spawn(
        vm: *mut JavaVm,
        env: Env,
        options: SampleOptions,
    ) -> Result<Handle, ProfileError> {
        let control = Arc::new(Control::default());
        let (ready, started) = mpsc::channel();
        let vm = SendVm(vm);
        let thread_control = control.clone();
        let thread = std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || {
                let vm = vm;
                crate::guarded((), || run(vm.0, env, options, &thread_control, &ready));
                thread_control.finished();
            })
            .map_err(ProfileError::Thread)?;
        match started.recv_timeout(START_WAIT) {
            Ok(Ok(())) => Ok(Handle { control, thread }),
            Ok(Err(error)) => {
                let _ = thread.join();
                Err(error)
            }
            Err(_) => Err(ProfileError::NotStarted),
        }
    }
}

/// The monitor thread: attaches, opens the profile, says it is ready, and runs it until stopped.
fn run(
    vm: *mut JavaVm,
    env: Env,
    options: SampleOptions,
    control: &Control,
    ready: &mpsc::Sender<Result<(), ProfileError>>,
) {
    super::mark_agent_thread();
    // SAFETY: the process's JavaVM; the thread is attached as a daemon until it ends.
    let Some(jni) = (unsafe { jvmti::attach_current_thread(vm, c"joularcode-sampler") }) else {
        let _ = ready.send(Err(ProfileError::Attach));
        return;
    };
    match Monitor::open(vm, env, jni, &options) {
        Ok(mut monitor) => {
            let _ = ready.send(Ok(()));
            monitor.run(jni, control);
        }
        Err(error) => {
            let _ = ready.send(Err(error));
        }
    }
    set_events(None);
    // SAFETY: detaches the thread attached above, which holds no monitor.
    unsafe { ((**vm).detach_current_thread)(vm) };
}

/// The main class of this JVM, as `record` names it: the first word of `sun.java.command` (a
/// class, or a jar's file name).
fn main_class(env: Env) -> String {
    let command = env.system_property(c"sun.java.command").unwrap_or_default();
    let first = command.split_whitespace().next().unwrap_or("");
    let name = first.rsplit(['/', '\\']).next().unwrap_or(first);
    fit_for_file_name(if name.is_empty() { "jvm" } else { name })
}

/// Opens the `cycle-log` file, emptied, without following a symbolic link.
fn open_cycle_log(path: &PathBuf) -> Result<File, ProfileError> {
    let mut open = std::fs::OpenOptions::new();
    open.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        open.custom_flags(libc::O_NOFOLLOW);
    }
    open.open(path).map_err(|source| ProfileError::CycleLog {
        path: path.clone(),
        source,
    })
}

/// The slots of the signal sampler's ring: enough for 50 ms of samples of every CPU, twice.
#[cfg(unix)]
fn ring_slots(cpus: u32, rate_ms: u64) -> usize {
    let per_drain = u64::from(cpus) * 50 / rate_ms.max(1);
    usize::try_from(per_drain * 2)
        .unwrap_or(usize::MAX)
        .clamp(64, 2048)
}

/// The sampler `choice` asks for, on this platform and JVM.
fn sampler(
    vm: *mut JavaVm,
    env: Env,
    jni: Jni,
    choice: SamplerChoice,
    config: &Config,
    cpus: u32,
) -> Result<Box<dyn Sampler>, ProfileError> {
    let interval = Duration::from_millis(config.sample_rate_ms);
    let pid = std::process::id();
    #[cfg(unix)]
    if choice != SamplerChoice::Jvmti {
        match super::signals::find_async_get_call_trace(env) {
            Some(agct) => {
                return Ok(Box::new(super::signals::Signals::start(
                    vm,
                    agct,
                    interval,
                    ring_slots(cpus, config.sample_rate_ms),
                    pid,
                )?))
            }
            None if choice == SamplerChoice::Signals => {
                return Err(ProfileError::NoAsyncGetCallTrace)
            }
            None => Stderr::default().log(
                Level::Warning,
                "joularcode agent: this JVM has no AsyncGetCallTrace: stacks are sampled with JVMTI stack traces, at safepoints.",
            ),
        }
    }
    #[cfg(not(unix))]
    if choice == SamplerChoice::Signals {
        return Err(ProfileError::NoSignals);
    }
    let _ = (vm, cpus);
    Ok(Box::new(dumps::Dumps::start(env, jni, interval, pid)))
}

impl Monitor {
    /// Opens everything a profile needs, on the monitor thread; the error says what failed.
    fn open(
        vm: *mut JavaVm,
        env: Env,
        jni: Jni,
        options: &SampleOptions,
    ) -> Result<Monitor, ProfileError> {
        let log = Stderr::default();
        let working_dir = std::env::current_dir().map_err(ProfileError::WorkingDir)?;
        let config = options.config(&working_dir, &log)?;
        let roots = SystemRoots::default();
        let mut source = power::open(&config, &roots, Arc::new(SystemClock::default()), &log)
            .map_err(ProfileError::Power)?;
        if config.source_kind() == Ok(SourceKind::Vm) {
            // The file must be there now: a typo would otherwise only show as warnings
            source.watts().map_err(ProfileError::Power)?;
        }
        let writer = CsvWriter::open(&config.results_path).map_err(ProfileError::Results)?;
        let cycle_log = options.cycle_log.as_ref().map(open_cycle_log).transpose()?;
        let cpu = CpuSource::system();
        let cpus = cpu.read().map(|use_| use_.cpus).unwrap_or(1);
        let mut sampler = sampler(vm, env, jni, options.sampler, &config, cpus)?;
        set_events(Some(sampler.events()));
        // Classes loaded before the agent: their methods' ids, for AsyncGetCallTrace
        if jni.push_local_frame(16) {
            for class in env.loaded_classes() {
                // SAFETY: a class reference GetLoadedClasses gave.
                unsafe { env.make_method_ids(class) };
            }
            jni.pop_local_frame();
        }
        let source_name = power::describe_choice(&config, &*source);
        // The threads' CPU time so far is not this profile's (a JVM attached to has run before)
        let mut threads = ThreadCpu::default();
        threads.cycle(sampler.thread_times());
        let clock = Instant::now();
        let monitor = Monitor {
            frames: Frames::new(env, &config.methods_filtering_prefix),
            engine: Engine::start(source, &config, Box::new(SystemLoad::start(cpu)), cpus, 0),
            writer,
            carbon: CarbonWriter::new(&config.results_path),
            cycle_log,
            counts: HashMap::new(),
            threads,
            pid: std::process::id(),
            clock,
            process_cpu_ns: process::cpu_ns(),
            own_cpu_ns: sampler.own_cpu_ns(),
            walks: sampler.walks(),
            sampler,
            log,
        };
        monitor.log.log(
            Level::Info,
            &format!(
                "Profiling JVM {} ({}) with the agent, sampling {}; power from {}, results in {}.",
                monitor.pid,
                main_class(env),
                monitor.sampler.describe(),
                source_name,
                config.results_path.display()
            ),
        );
        Ok(monitor)
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.clock.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Samples and ends cycles until a stop is asked; the last, partial cycle is written too.
    fn run(&mut self, jni: Jni, control: &Control) {
        loop {
            if jni.push_local_frame(64) {
                self.sampler
                    .collect(jni, &mut self.frames, &mut self.counts);
                jni.pop_local_frame();
            }
            let stop = control.stop_requested();
            let now_ns = self.now_ns();
            if stop || self.engine.window_over(now_ns) {
                self.end_cycle(now_ns);
            }
            if stop {
                break;
            }
            control.wait(self.sampler.collect_every());
        }
        self.sampler.stop(jni);
        self.writer.close();
    }

    /// Ends the cycle at `now_ns`: the threads' CPU time, the JVM's, the power and the machine's
    /// load; shares the power out and writes the rows.
    fn end_cycle(&mut self, now_ns: u64) {
        let uses = self.threads.cycle(self.sampler.thread_times());
        let process_cpu_ns = process::cpu_ns();
        let own_cpu_ns = self.sampler.own_cpu_ns();
        let jvm_cpu_ns = process_cpu_ns
            .saturating_sub(self.process_cpu_ns)
            .saturating_sub(own_cpu_ns.saturating_sub(self.own_cpu_ns));
        (self.process_cpu_ns, self.own_cpu_ns) = (process_cpu_ns, own_cpu_ns);
        let measures = self.engine.measure(now_ns, &self.log);
        let threads = cycle_threads(self.pid, std::mem::take(&mut self.counts), &uses);

        let input = [JvmInput {
            pid: self.pid,
            branches: &self.frames.branches,
            threads,
            cpu_ns: jvm_cpu_ns,
        }];
        let cycle = self
            .engine
            .share(&measures, self.sampler.drops(), &input, &self.log);
        self.writer.write(
            cycle.timestamp_ms,
            &cycle.jvms[0].result,
            &self.frames.branches,
            &self.log,
        );
        if let Some(intensity) = cycle.carbon {
            self.carbon
                .write(cycle.timestamp_ms, cycle.interval, intensity, &self.log);
        }
        let walks = self.sampler.walks();
        let cycle_walks = walks.saturating_sub(std::mem::replace(&mut self.walks, walks));
        let failed_walks = serde_json::json!(self.sampler.failed_walks());
        if let Some(file) = self.cycle_log.as_mut() {
            // record's lines, the stacks the sampler took in the cycle and those it failed
            let lines: String = cycle
                .json_objects()
                .into_iter()
                .map(|mut line| {
                    line["walks"] = cycle_walks.into();
                    line["failed_walks"] = failed_walks.clone();
                    format!("{line}\n")
                })
                .collect();
            if let Err(error) = file.write_all(lines.as_bytes()) {
                self.log.log(
                    Level::Severe,
                    &format!("Could not write the cycle log: {error}"),
                );
                self.cycle_log = None;
            }
        }
    }
}

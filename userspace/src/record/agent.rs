//! `record --mode agent`: the JVMs profile themselves with the agent's sampling mode, where the
//! eBPF sampler cannot run. A launched command's JVMs get the agent through `JAVA_TOOL_OPTIONS`;
//! a running JVM (`--pid`) gets it through an attach, and an attach of `stop` ends its profile
//! when `record` ends before it. Each JVM writes its own CSV files, in the same folders as
//! `record` would write them, and says what it does on its standard error.
//!
//! The agent is given the configuration `record` resolved (the file and the options, relative
//! paths made absolute) as options, every key of it and no file of its own (`config=`), so that
//! a JVM with another working folder profiles exactly as asked.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use joularcode_core::carbon::IntensitySetting;
use joularcode_core::config::Config;
use joularcode_core::log::{Level, Log};

use super::results::folder_name;
use super::Recording;
use crate::attach::{self, AttachError};
use crate::launch::{self, LaunchError};
use crate::proc_files;
use crate::session::Targets;
use crate::signals::{self, SignalError};

/// How often the loop looks at the JVMs and the clock.
const POLL: Duration = Duration::from_millis(100);

/// Why `record` cannot run in agent mode, or its command or attaches failed: one line each.
#[derive(Debug, thiserror::Error)]
pub enum AgentModeError {
    /// `--all` was given.
    #[error("--all needs the eBPF sampler: in agent mode, give --pid PID or a command to launch.")]
    All,
    /// `--flamegraph` or `--pprof` was given.
    #[error(
        "--flamegraph and --pprof need the eBPF mode: in agent mode, make them from the results \
         afterwards with joularcode-bpf report RESULTS --flamegraph FILE --pprof FILE."
    )]
    Views,
    /// `--no-attach` was given.
    #[error("--no-attach cannot be used with --mode agent, which loads the agent into the JVMs.")]
    NoAttach,
    /// `--cycle-log` was given with several `--pid`.
    #[error("--cycle-log takes one JVM in agent mode: give one --pid.")]
    CycleLogOfSeveral,
    /// The agent library is missing, or the command could not be ended.
    #[error("{0}")]
    Launch(#[from] LaunchError),
    /// The signals cannot be caught.
    #[error("{0}")]
    Signals(#[from] SignalError),
    /// The agent's option holds a space, which `JAVA_TOOL_OPTIONS` cannot carry.
    #[error(
        "{0} holds a space, which JAVA_TOOL_OPTIONS cannot carry: give the agent, the results \
         and the files paths without spaces."
    )]
    Space(String),
    /// The command could not be started.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// The program, as given.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// The command could not be waited for.
    #[error("cannot wait for the command: {0}")]
    Wait(#[source] std::io::Error),
    /// The agent could not be attached to the first JVM.
    #[error("{0}")]
    Attach(#[from] AttachError),
}

/// Runs `record` in agent mode, paths relative to `working_dir`; returns the exit code (the
/// launched command's, else 0).
pub fn run(
    args: &Recording,
    config: &Config,
    working_dir: &Path,
    log: &dyn Log,
) -> Result<i32, AgentModeError> {
    if args.all() {
        return Err(AgentModeError::All);
    }
    if args.views {
        return Err(AgentModeError::Views);
    }
    if args.agent.no_attach {
        return Err(AgentModeError::NoAttach);
    }
    if args.cycle_log.is_some() && args.pids().len() > 1 {
        return Err(AgentModeError::CycleLogOfSeveral);
    }
    let agent = launch::find_agent(args.agent.agent_path.as_deref())?;
    let deadline = args.duration.map(|duration| Instant::now() + duration);
    signals::stop_on_signals()?;
    match &args.targets {
        Targets::Launch(command) => {
            let program = command.get_program().to_os_string();
            let rest: Vec<OsString> = command.get_args().map(OsStr::to_os_string).collect();
            let options = agent_options(config, working_dir, args.cycle_log.as_deref(), None);
            launch_command(&program, &rest, &agent, &options, deadline, log)
        }
        Targets::Pids(_) | Targets::All(_) => {
            attach_all(args, config, working_dir, &agent, deadline, log)?;
            Ok(0)
        }
    }
}

/// The agent's options for `config`: `sample`, no file, `from-record=yes`, every key
/// (`results_path` instead of the configuration's when given), paths relative to `working_dir`
/// made absolute.
fn agent_options(
    config: &Config,
    working_dir: &Path,
    cycle_log: Option<&Path>,
    results_path: Option<&Path>,
) -> String {
    let absolute = |value: &str| {
        if value.is_empty() {
            String::new()
        } else {
            working_dir.join(value).display().to_string()
        }
    };
    // record has said what the settings warn of: the agent does not say it again
    let mut options = String::from("sample,config=,from-record=yes");
    for (key, value) in config.settings() {
        let value = match key {
            "results-path" => match results_path {
                Some(path) => path.display().to_string(),
                None => absolute(&value),
            },
            "vm-power-file" | "powerjoular-ringbuffer-path" => absolute(&value),
            "carbon-intensity" => match &config.carbon_intensity {
                Some(IntensitySetting::File(_)) => absolute(&value),
                _ => value,
            },
            _ => value,
        };
        options.push_str(&format!(",{key}={value}"));
    }
    if let Some(file) = cycle_log {
        options.push_str(&format!(",cycle-log={}", working_dir.join(file).display()));
    }
    options
}

/// Launches `program` with the agent in its JVMs' options, until it ends, the duration is over
/// or a signal comes (then it is asked to end, and its JVMs write their last cycle).
fn launch_command(
    program: &OsString,
    rest: &[OsString],
    agent: &Path,
    options: &str,
    deadline: Option<Instant>,
    log: &dyn Log,
) -> Result<i32, AgentModeError> {
    let agent_option = format!("-agentpath:{}={options}", agent.display());
    if agent_option.contains(char::is_whitespace) {
        return Err(AgentModeError::Space(agent_option));
    }
    let mut value = OsString::new();
    if let Some(existing) = std::env::var_os("JAVA_TOOL_OPTIONS").filter(|v| !v.is_empty()) {
        value.push(existing);
        value.push(" ");
    }
    value.push(&agent_option);
    let mut child: Child = Command::new(program)
        .args(rest)
        .env("JAVA_TOOL_OPTIONS", value)
        .spawn()
        .map_err(|source| AgentModeError::Spawn {
            program: program.to_string_lossy().into_owned(),
            source,
        })?;
    loop {
        if let Some(status) = child.try_wait().map_err(AgentModeError::Wait)? {
            return Ok(launch::exit_code(status));
        }
        if signals::stop_requested() || deadline.is_some_and(|deadline| Instant::now() >= deadline)
        {
            return Ok(launch::end(&mut child, launch::GRACE, log)?);
        }
        std::thread::sleep(POLL);
    }
}

/// Attaches the agent to each `--pid` JVM (each in its own folder when there are several), and
/// ends their profiles when the duration is over or a signal comes, unless they ended first.
fn attach_all(
    args: &Recording,
    config: &Config,
    working_dir: &Path,
    agent: &Path,
    deadline: Option<Instant>,
    log: &dyn Log,
) -> Result<(), AgentModeError> {
    let root = working_dir.join(&config.results_path);
    let mut attached = Vec::new();
    for &pid in args.pids() {
        let results: PathBuf = if args.pids().len() > 1 {
            root.join(folder_name(pid, &proc_files::main_class(pid)))
        } else {
            root.clone()
        };
        let options = agent_options(
            config,
            working_dir,
            args.cycle_log.as_deref(),
            Some(&results),
        );
        match attach::load_agent(pid, agent, &options) {
            Ok(()) => {
                log.log(
                    Level::Info,
                    &format!(
                        "Profiling JVM {pid} with the agent's sampling mode, results in {}; its messages go to its own standard error.",
                        results.display()
                    ),
                );
                attached.push(pid);
            }
            Err(error) if attached.is_empty() => return Err(error.into()),
            Err(error) => log.log(
                Level::Severe,
                &format!("JVM {pid} is not profiled: {error}"),
            ),
        }
    }
    loop {
        attached.retain(|pid| Path::new(&format!("/proc/{pid}")).exists());
        if attached.is_empty() {
            return Ok(());
        }
        if signals::stop_requested() || deadline.is_some_and(|deadline| Instant::now() >= deadline)
        {
            break;
        }
        std::thread::sleep(POLL);
    }
    for pid in attached {
        if let Err(error) = attach::load_agent(pid, agent, "stop") {
            log.log(
                Level::Warning,
                &format!("Could not end the profile of JVM {pid}: {error}"),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use joularcode_core::log::Recorded;

    #[test]
    fn the_agent_gets_every_key_with_absolute_paths() {
        let mut config = Config::default();
        let log = Recorded::default();
        for (key, value) in [
            ("power-source-type", "vm"),
            ("vm-power-file", "host/watts"),
            ("methods-filtering-prefix", "com.a,com.b"),
        ] {
            config.set(key, value, &log).unwrap();
        }
        let options = agent_options(
            &config,
            Path::new("/work"),
            Some(Path::new("c.jsonl")),
            None,
        );
        assert_eq!(
            options,
            "sample,config=,from-record=yes,power-source-type=vm,powerjoular-ringbuffer-path=,\
             vm-power-file=/work/host/watts,vm-power-format=powerjoular,\
             stack-monitoring-sample-rate=10,results-path=/work/joular-code-java-results,\
             methods-filtering-prefix=com.a,com.b,entry-points=,jvm-threads=own,\
             estimate-idle-watts-per-cpu=0.74,estimate-max-watts-per-cpu=3.5,\
             carbon-intensity=,cycle-log=/work/c.jsonl"
        );
        // A constant stays a number, a file becomes absolute.
        config.set("carbon-intensity", "350", &log).unwrap();
        let options = agent_options(&config, Path::new("/work"), None, None);
        assert!(options.contains(",carbon-intensity=350"), "{options}");
        config.set("carbon-intensity", "run/carbon", &log).unwrap();
        let options = agent_options(&config, Path::new("/work"), None, None);
        assert!(
            options.contains(",carbon-intensity=/work/run/carbon"),
            "{options}"
        );
        let options = agent_options(&config, Path::new("/work"), None, Some(Path::new("/r/1-A")));
        assert!(options.contains(",results-path=/r/1-A,"), "{options}");
    }
}

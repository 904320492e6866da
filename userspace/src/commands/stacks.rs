//! `joularcode-bpf stacks`: samples JVMs and prints their folded stacks (one line per distinct
//! stack with its sample count), frames named as Joular Code for Java names them, oldest first.
//! See docs/stacks.md.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use joularcode_core::log::{Level, Log, Stderr};
use joularcode_core::output::path::{create_file, Mode};

use crate::cli::StacksArgs;
use crate::launch;
use crate::output::folded::Folded;
use crate::output::stdout;
use crate::sampler::CONSUME_INTERVAL;
use crate::session::{Session, SessionOptions};
use crate::signals;

/// Runs `stacks`; returns the exit code (the launched command's, or 0), or the error to print.
pub fn run(args: &StacksArgs) -> Result<i32, String> {
    let log: Arc<dyn Log> = Arc::new(Stderr::default());
    let targets = args.jvms.targets(&args.command);
    let options = SessionOptions {
        native_frames: args.native,
        ..args.agent.session_options(args.rate.rate, log.clone())
    };
    // Open the output first: a bad path fails before anything is sampled.
    let file = args.output.as_deref().map(create_output).transpose()?;
    signals::stop_on_signals().map_err(|e| e.to_string())?;
    let mut session = Session::start(targets, &options).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let duration = args.duration.map(Duration::from_secs_f64);
    while !session.finished()
        && !signals::stop_requested()
        && duration.is_none_or(|d| start.elapsed() < d)
    {
        session.pump(CONSUME_INTERVAL).map_err(|e| e.to_string())?;
    }
    // The samples taken up to now reach the channel within one consumer pass.
    std::thread::sleep(CONSUME_INTERVAL * 2);
    session.pump(Duration::ZERO).map_err(|e| e.to_string())?;
    let folded = fold(&mut session, args.native);
    report(&session, &*log);
    let child = session.stop();
    let written = write(&folded, file);
    // A launched command is ended even when the stacks could not be written.
    let code = match child {
        Some(mut child) => launch::end(&mut child, launch::GRACE, &*log).map_err(|e| e.to_string()),
        None => Ok(0),
    };
    written?;
    code
}

/// Writes `folded` to `file`, or on the standard output without one.
fn write(folded: &Folded, file: Option<std::fs::File>) -> Result<(), String> {
    match file {
        Some(file) => {
            let mut out = BufWriter::new(file);
            folded
                .write(&mut out)
                .and_then(|()| out.flush())
                .map_err(|e| format!("cannot write the stacks: {e}"))
        }
        None => {
            let mut text = Vec::new();
            folded
                .write(&mut text)
                .map_err(|e| format!("cannot write the stacks: {e}"))?;
            stdout::print(text).map_err(|e| e.to_string())
        }
    }
}

/// Creates (or empties) the output file, following no symbolic link on its path.
fn create_output(path: &Path) -> Result<std::fs::File, String> {
    create_file(path, Mode::Truncate).map_err(|e| format!("--output {}: {e}", path.display()))
}

/// The folded stacks of every JVM profiled. With more than one, each stack starts with a root
/// frame `[PID MainClass]` naming its JVM.
fn fold(session: &mut Session, native: bool) -> Folded {
    let several = session.jvms().filter(|jvm| jvm.is_profiled()).count() > 1;
    let mut folded = Folded::new();
    let root = |pid: u32, session: &Session| {
        session
            .jvm(pid)
            .filter(|_| several)
            .map(|jvm| format!("[{} {}]", pid, jvm.main_class()))
    };
    if native {
        for (pid, stacks) in session.take_native_counts() {
            let (root, Some(jvm)) = (root(pid, session), session.jvm(pid)) else {
                continue;
            };
            for ((branch, natives), count) in stacks {
                let java = jvm.branches().name(branch).split(';');
                let frames = root.as_deref().into_iter().chain(java);
                folded.add(frames.chain(natives.iter().map(|n| &**n)), count);
            }
        }
    } else {
        for (pid, threads) in session.take_counts() {
            let (root, Some(jvm)) = (root(pid, session), session.jvm(pid)) else {
                continue;
            };
            for (branch, count) in threads.values().flat_map(|t| &t.counts) {
                let java = jvm.branches().name(*branch).split(';');
                folded.add(root.as_deref().into_iter().chain(java), *count);
            }
        }
    }
    folded
}

/// Says, per JVM profiled, how many samples were taken and how many frames could not be named.
fn report(session: &Session, log: &dyn Log) {
    for jvm in session.jvms().filter(|jvm| jvm.is_profiled()) {
        let stats = jvm.stats();
        let message = format!(
            "JVM {} ({}): {} samples, {} Java frames named ({} inlined), {} frames [unknown], \
             {} samples of application threads without a named Java frame",
            jvm.pid(),
            jvm.main_class(),
            stats.samples,
            stats.java_frames,
            stats.inlined_frames,
            stats.unknown_frames,
            stats.without_java_frame,
        );
        log.log(Level::Info, &message);
    }
    let drops = session.sampler().drops();
    if drops > 0 {
        log.log(
            Level::Warning,
            &format!("{drops} samples were lost (the ring buffer or the channel was full)"),
        );
    }
}

//! The CPU power on macOS, from Apple's `powermetrics` (root only), run for the whole recording
//! with its `cpu_power` sampler: `powermetrics --samplers cpu_power -i 1000`, whose text output
//! gives, once a second, a sample that starts with its header and its length:
//!
//! ```text
//! *** Sampled system activity (Tue Dec  1 10:00:00 2026 +0100) (1001.84ms elapsed) ***
//! ```
//!
//! then, on Apple silicon, `CPU Power: 1523 mW` (the CPU clusters; `GPU Power`, `ANE Power` and
//! `Combined Power (CPU + GPU + ANE)` follow and are not used), or, on Intel, the package's
//! power from Intel's energy model, `Intel energy model derived package power (CPUs+GT+SA):
//! 4.81W`, as RAPL's package domain on Linux.
//!
//! A window ends when a new sample has come, or after [`MAX_WINDOW`] without one; its power is
//! the average of the samples that came since the previous reading, weighted by their lengths.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::{PowerError, PowerSource};

/// How long a window waits for powermetrics' next sample.
pub const MAX_WINDOW: Duration = Duration::from_secs(2);
/// The sample interval asked of powermetrics, in ms.
pub const INTERVAL_MS: u32 = 1000;

/// One sample of powermetrics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Its length, in ms.
    pub elapsed_ms: f64,
    /// The CPU power over it, in W.
    pub cpu_watts: f64,
}

/// Reads powermetrics' text output line by line, and gives each sample once its CPU power is
/// known.
#[derive(Debug, Default)]
pub struct Parser {
    /// The length of the sample being read, until its power is found.
    elapsed_ms: Option<f64>,
}

impl Parser {
    /// Reads one line; returns the sample it completes, if any.
    pub fn line(&mut self, line: &str) -> Option<Sample> {
        let line = line.trim();
        if line.starts_with("*** Sampled system activity") {
            self.elapsed_ms = sample_length(line);
            return None;
        }
        let watts = cpu_watts(line)?;
        let elapsed_ms = self.elapsed_ms.take()?;
        Some(Sample {
            elapsed_ms,
            cpu_watts: watts,
        })
    }
}

/// The `(1001.84ms elapsed)` of a sample's header.
fn sample_length(header: &str) -> Option<f64> {
    let end = header.find("ms elapsed)")?;
    let start = header[..end].rfind('(')? + 1;
    let ms: f64 = header[start..end].trim().parse().ok()?;
    (ms.is_finite() && ms > 0.0).then_some(ms)
}

/// The CPU power of a line that gives it, in W.
fn cpu_watts(line: &str) -> Option<f64> {
    let (value, per_watt) = if let Some(rest) = line.strip_prefix("CPU Power:") {
        (rest.trim().strip_suffix("mW")?, 1000.0)
    } else if let Some(rest) = line.strip_prefix("Intel energy model derived package power") {
        (rest.split_once(':')?.1.trim().strip_suffix('W')?, 1.0)
    } else {
        return None;
    };
    let value: f64 = value.trim().parse().ok()?;
    (value.is_finite() && value >= 0.0).then_some(value / per_watt)
}

/// What the reader thread shares with the source.
#[derive(Debug, Default)]
struct Shared {
    samples: Mutex<VecDeque<Sample>>,
    /// A sample came since the last reading: the window can end.
    fresh: AtomicBool,
    /// Why powermetrics stopped giving samples, once it has.
    ended: Mutex<Option<String>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// powermetrics running, and the samples it gave.
pub struct Powermetrics {
    child: Child,
    shared: Arc<Shared>,
    program: PathBuf,
}

impl Powermetrics {
    /// Starts `program` (normally `/usr/bin/powermetrics`) with the `cpu_power` sampler; the
    /// samples are read by a thread of their own.
    pub fn open(program: &Path) -> Result<Powermetrics, PowerError> {
        let mut child = Command::new(program)
            .args(["--samplers", "cpu_power", "-i"])
            .arg(INTERVAL_MS.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| {
                PowerError::new(format!(
                    "Cannot run {}: {error}. Set power-source-type to estimate, or ringbuffer with PowerJoular.",
                    program.display()
                ))
            })?;
        let shared = Arc::new(Shared::default());
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let reader = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("joularcode-powermetrics".into())
            .spawn(move || read_samples(stdout, stderr, &reader));
        if let Err(error) = spawned {
            let _ = child.kill();
            let _ = child.wait();
            return Err(PowerError::new(format!(
                "Cannot start a thread to read powermetrics: {error}."
            )));
        }
        Ok(Powermetrics {
            child,
            shared,
            program: program.to_path_buf(),
        })
    }
}

/// Feeds powermetrics' output to a [`Parser`] until it ends, then says why.
fn read_samples(stdout: Option<impl Read>, stderr: Option<impl Read>, shared: &Shared) {
    let mut parser = Parser::default();
    if let Some(stdout) = stdout {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(sample) = parser.line(&line) {
                lock(&shared.samples).push_back(sample);
                shared.fresh.store(true, Ordering::Release);
            }
        }
    }
    let mut said = String::new();
    if let Some(mut stderr) = stderr {
        let _ = stderr.read_to_string(&mut said);
    }
    let last = said.lines().map(str::trim).rfind(|line| !line.is_empty());
    *lock(&shared.ended) = Some(match last {
        Some(line) => format!("it said: {}", line.chars().take(200).collect::<String>()),
        None => "it gave no reason".to_owned(),
    });
}

impl PowerSource for Powermetrics {
    fn describe(&self) -> String {
        format!(
            "powermetrics ({} --samplers cpu_power)",
            self.program.display()
        )
    }

    fn window_over(&self, elapsed: Duration) -> bool {
        self.shared.fresh.load(Ordering::Acquire) || elapsed >= MAX_WINDOW
    }

    fn watts(&mut self) -> Result<f64, PowerError> {
        self.shared.fresh.store(false, Ordering::Release);
        let samples: Vec<Sample> = lock(&self.shared.samples).drain(..).collect();
        let ms: f64 = samples.iter().map(|s| s.elapsed_ms).sum();
        if ms > 0.0 {
            let joules_ms: f64 = samples.iter().map(|s| s.cpu_watts * s.elapsed_ms).sum();
            return Ok(joules_ms / ms);
        }
        Err(PowerError::new(match lock(&self.shared.ended).as_ref() {
            Some(reason) => format!(
                "powermetrics ({}) has stopped: {reason}",
                self.program.display()
            ),
            None => format!(
                "powermetrics gave no sample for {} s.",
                MAX_WINDOW.as_secs()
            ),
        }))
    }
}

impl Drop for Powermetrics {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_and_power_lines() {
        assert_eq!(
            sample_length(
                "*** Sampled system activity (Tue Dec  1 10:00:00 2026 +0100) (1001.84ms elapsed) ***"
            ),
            Some(1001.84)
        );
        assert_eq!(sample_length("*** Sampled system activity (x) ***"), None);
        assert_eq!(cpu_watts("CPU Power: 1523 mW"), Some(1.523));
        assert_eq!(
            cpu_watts("Intel energy model derived package power (CPUs+GT+SA): 4.81W"),
            Some(4.81)
        );
        for other in [
            "GPU Power: 12 mW",
            "Combined Power (CPU + GPU + ANE): 1600 mW",
            "CPU Power: lots mW",
            "CPU Power: -3 mW",
            "E-Cluster Power: 120 mW",
        ] {
            assert_eq!(cpu_watts(other), None, "{other}");
        }
    }

    #[test]
    fn a_power_line_outside_a_sample_is_not_one() {
        let mut parser = Parser::default();
        assert_eq!(parser.line("CPU Power: 1000 mW"), None);
        assert_eq!(
            parser.line("*** Sampled system activity (d) (500ms elapsed) ***"),
            None
        );
        assert_eq!(
            parser.line("CPU Power: 1000 mW"),
            Some(Sample {
                elapsed_ms: 500.0,
                cpu_watts: 1.0
            })
        );
        assert_eq!(parser.line("CPU Power: 1000 mW"), None, "once per sample");
    }
}

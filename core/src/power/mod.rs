//! Where the CPU power comes from. Every source follows Joular Code for Java's window semantics:
//! [`PowerSource::watts`] is the average CPU power since the previous call (or since the source
//! was opened), and [`PowerSource::window_over`] says when a window should end.
//!
//! The sources: [`rapl`] (Linux powercap), [`perf`] (the same RAPL counters through the perf
//! `power` PMU), [`ringbuffer`] (PowerJoular 2.0's shared memory), [`vm`] (a file written by the
//! host of a virtual machine) and [`estimate`] (a model of the CPU utilisation). [`open`] picks
//! and opens the one a [`Config`] names. Every root of the system they read can be pointed
//! elsewhere ([`SystemRoots`]) and the clock injected ([`Clock`]), so tests run on fake trees.

pub mod clock;
pub mod estimate;
pub mod perf;
pub mod rapl;
pub mod ringbuffer;
pub mod vm;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::config::{default_ringbuffer_path, Config, ConfigError, SourceKind};
use crate::log::{Level, Log};

pub use clock::{Clock, ManualClock, SystemClock};

/// The most power a machine's CPUs can draw, in W: the largest servers (8 sockets of 500 W)
/// draw about 4 kW. A reading above it is no measurement, and is skipped.
pub const MAX_WATTS: f64 = 10_000.0;

/// The length of a window for a source with no cadence of its own.
pub const ONE_SECOND: Duration = Duration::from_secs(1);

/// Why no power could be had: one line saying what went wrong and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PowerError(String);

impl PowerError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        PowerError(message.into())
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PowerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PowerError {}

impl From<ConfigError> for PowerError {
    fn from(error: ConfigError) -> Self {
        PowerError(error.to_string())
    }
}

/// A source of CPU power, read once per window as the window ends.
pub trait PowerSource: Send {
    /// The machine's average CPU power since the previous call, in watts: finite, >= 0 and
    /// at most [`MAX_WATTS`] (a reading that is not is skipped by the caller, as an error is).
    /// An error means the window gets no energy.
    fn watts(&mut self) -> Result<f64, PowerError>;

    /// What the source reads, for the user (`rapl (powercap)`, `vm (watts file /x)`...): says
    /// what `auto` chose.
    fn describe(&self) -> String;

    /// Whether a window that began `elapsed` ago should end now. Called often, so cheap.
    fn window_over(&self, elapsed: Duration) -> bool {
        elapsed >= ONE_SECOND
    }
}

/// Where the sources find the system: the real paths by default, a fake tree in tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemRoots {
    /// `/sys/class/powercap`.
    pub powercap: PathBuf,
    /// `/sys/bus/event_source`, where the perf `power` PMU is described.
    pub event_source: PathBuf,
    /// `/proc`.
    pub proc: PathBuf,
    /// The ring buffer when `powerjoular-ringbuffer-path` is not set (`/dev/shm/powerjoular` on Linux).
    pub ringbuffer: PathBuf,
    /// Whether this is Linux, the only OS with powercap and perf.
    pub linux: bool,
}

impl Default for SystemRoots {
    fn default() -> Self {
        SystemRoots {
            powercap: PathBuf::from("/sys/class/powercap"),
            event_source: PathBuf::from("/sys/bus/event_source"),
            proc: PathBuf::from("/proc"),
            ringbuffer: default_ringbuffer_path(),
            linux: cfg!(target_os = "linux"),
        }
    }
}

/// Opens the source `config` names. `auto` picks, as Joular Code for Java does, RAPL when
/// powercap's `intel-rapl:0` exists (readable or not), and else the ring buffer; and, beyond
/// Joular, the perf `power` PMU when powercap is absent but the PMU exists, and the estimate,
/// said once through `log`, when there is no ring buffer either and `/proc/stat` can be read.
/// An error means monitoring off.
pub fn open(
    config: &Config,
    roots: &SystemRoots,
    clock: Arc<dyn Clock>,
    log: &dyn Log,
) -> Result<Box<dyn PowerSource>, PowerError> {
    let ring_path = config
        .ringbuffer_path
        .clone()
        .unwrap_or_else(|| roots.ringbuffer.clone());
    Ok(match config.source_kind()? {
        SourceKind::Auto => {
            if has_powercap_rapl(roots) || has_power_pmu(roots) {
                open_rapl(roots, clock, log)?
            } else if ring_path.symlink_metadata().is_ok() || !roots.proc.join("stat").is_file() {
                // Without /proc/stat (macOS, Windows) there is nothing to estimate from: wait for
                // PowerJoular, as Joular does
                Box::new(ringbuffer::RingBuffer::open(&ring_path, clock, log))
            } else {
                log.log(
                    Level::Warning,
                    &format!(
                        "No power meter was found: no RAPL in {}, no perf power PMU in {}, no PowerJoular ring buffer at {}. The CPU power is estimated from the CPU utilisation instead (see estimate-idle-watts-per-cpu and estimate-max-watts-per-cpu); to measure it, run PowerJoular with -r before starting, or set power-source-type.",
                        roots.powercap.display(),
                        roots.event_source.display(),
                        ring_path.display()
                    ),
                );
                Box::new(estimate::Estimate::open(config, &roots.proc, log)?)
            }
        }
        SourceKind::Rapl => open_rapl(roots, clock, log)?,
        SourceKind::RingBuffer => Box::new(ringbuffer::RingBuffer::open(&ring_path, clock, log)),
        SourceKind::Vm => {
            let file = config
                .vm_power_file
                .as_deref()
                .ok_or(ConfigError::VmWithoutFile)?;
            Box::new(vm::VmPowerFile::open(file, config.vm_format()?, log))
        }
        SourceKind::Estimate => Box::new(estimate::Estimate::open(config, &roots.proc, log)?),
    })
}

/// Whether powercap has the first RAPL zone, as Joular checks it.
fn has_powercap_rapl(roots: &SystemRoots) -> bool {
    roots.linux && roots.powercap.join("intel-rapl:0").is_dir()
}

/// Whether the perf `power` PMU offers energy-pkg.
fn has_power_pmu(roots: &SystemRoots) -> bool {
    roots.linux && perf::is_present(&roots.event_source)
}

/// RAPL through powercap, or through the perf PMU when powercap has no RAPL but the PMU exists.
fn open_rapl(
    roots: &SystemRoots,
    clock: Arc<dyn Clock>,
    log: &dyn Log,
) -> Result<Box<dyn PowerSource>, PowerError> {
    if !roots.linux {
        return Err(PowerError::new(
            "power-source-type=rapl only works on Linux. Use auto or ringbuffer instead.",
        ));
    }
    if !has_powercap_rapl(roots) && has_power_pmu(roots) {
        return perf::open(&roots.event_source, clock, log);
    }
    Ok(Box::new(rapl::Rapl::open(&roots.powercap, clock, log)?))
}

/// The time since a counter source's previous reading, on an injected clock.
struct Span {
    clock: Arc<dyn Clock>,
    last_read_ns: u64,
}

impl Span {
    /// A span that starts now.
    fn start(clock: Arc<dyn Clock>) -> Span {
        let last_read_ns = clock.monotonic_ns();
        Span {
            clock,
            last_read_ns,
        }
    }

    /// The seconds since the previous reading, which becomes now; `same_instant` is the error
    /// when no time passed.
    fn next(&mut self, same_instant: &str) -> Result<f64, PowerError> {
        let now = self.clock.monotonic_ns();
        let elapsed_ns = now.saturating_sub(self.last_read_ns);
        if elapsed_ns == 0 {
            return Err(PowerError::new(same_instant));
        }
        self.last_read_ns = now;
        Ok(elapsed_ns as f64 / 1e9)
    }
}

/// A number read from a file, shown in a message: trimmed and cut short, since the file is not ours.
fn shown(text: &str) -> String {
    text.trim().chars().take(64).collect()
}

/// The error for a file whose text is not what it should hold.
fn unexpected(path: &Path, text: &str) -> PowerError {
    PowerError::new(format!(
        "Unexpected value in {}: '{}'.",
        path.display(),
        shown(text)
    ))
}

/// Reads a small sysfs text file, naming the file in the error (and the ways out when only
/// root may read it).
fn read_text(path: &Path) -> Result<String, PowerError> {
    std::fs::read(path)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .map_err(|error| rapl::read_error(path, &error))
}

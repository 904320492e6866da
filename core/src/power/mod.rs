//! Where the CPU power comes from. Every source follows Joular Code for Java's window semantics:
//! [`PowerSource::watts`] is the average CPU power since the previous call (or since the source
//! was opened), and [`PowerSource::window_over`] says when a window should end.
//!
//! The sources: [`rapl`] (Linux powercap), [`perf`] (the same RAPL counters through the perf
//! `power` PMU), [`ringbuffer`] (PowerJoular 2.0's shared memory), [`vm`] (a file written by the
//! host of a virtual machine), [`estimate`] (a model of the CPU utilisation), [`energy_meter`]
//! (Windows' RAPL counters through PDH) and [`powermetrics`] (macOS). [`open`] picks and opens
//! the one a [`Config`] names. Every root of the system they read can be pointed elsewhere
//! ([`SystemRoots`]) and the clock injected ([`Clock`]), so tests run on fake trees.

pub mod clock;
pub mod energy_meter;
pub mod estimate;
pub mod perf;
pub mod powermetrics;
pub mod rapl;
pub mod ringbuffer;
pub mod vm;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::config::{default_ringbuffer_path, Config, ConfigError, SourceKind};
use crate::energy::Interval;
use crate::log::{Level, Log};
use crate::machine::CpuSource;

pub use clock::{Clock, ManualClock, SystemClock};

/// The most power a machine's CPUs can draw, in W: the largest servers (8 sockets of 500 W)
/// draw about 4 kW. A reading above it is no measurement, and is skipped.
pub const MAX_WATTS: f64 = 10_000.0;

/// The length of a window for a source with no cadence of its own.
pub const ONE_SECOND: Duration = Duration::from_secs(1);

/// Why no power could be had: one line saying what went wrong and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
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

/// The OS, which decides the meters there can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// Linux: powercap and the perf `power` PMU; `/proc/stat` for the estimate.
    Linux,
    /// Windows: the Energy Meter performance counters; `GetSystemTimes` for the estimate.
    Windows,
    /// macOS: powermetrics; `host_statistics` for the estimate.
    MacOs,
    /// Another Unix: the ring buffer, the vm file, and the estimate if it has a procfs.
    Other,
}

impl Platform {
    /// The platform this was built for.
    pub fn current() -> Platform {
        if cfg!(target_os = "linux") {
            Platform::Linux
        } else if cfg!(windows) {
            Platform::Windows
        } else if cfg!(target_os = "macos") {
            Platform::MacOs
        } else {
            Platform::Other
        }
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
    /// The `powermetrics` program (macOS).
    pub powermetrics: PathBuf,
    /// The OS.
    pub platform: Platform,
    /// Whether this process runs as root, which powermetrics needs.
    pub root: bool,
}

impl Default for SystemRoots {
    fn default() -> Self {
        SystemRoots {
            powercap: PathBuf::from("/sys/class/powercap"),
            event_source: PathBuf::from("/sys/bus/event_source"),
            proc: PathBuf::from("/proc"),
            ringbuffer: default_ringbuffer_path(),
            powermetrics: PathBuf::from("/usr/bin/powermetrics"),
            platform: Platform::current(),
            root: is_root(),
        }
    }
}

impl SystemRoots {
    /// Where the estimate reads the machine's CPU time: `stat` under `proc` on Linux and the
    /// other Unix systems, the OS's counters on Windows and macOS.
    pub fn cpu_source(&self) -> CpuSource {
        match self.platform {
            Platform::Linux | Platform::Other => CpuSource::proc_stat(&self.proc),
            Platform::Windows | Platform::MacOs => CpuSource::system(),
        }
    }
}

/// Opens the source `config` names. `auto` picks, as Joular Code for Java does, RAPL when
/// powercap's `intel-rapl:0` exists (readable or not), and else the ring buffer; and, beyond
/// Joular, the perf `power` PMU when powercap is absent but the PMU exists, the Energy Meter
/// counters on Windows and powermetrics on macOS (as root) where they can be read, and the
/// estimate, said once through `log`, when nothing else is there and the machine's CPU time can
/// be read. An error means monitoring off.
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
    let ring = |clock| -> Box<dyn PowerSource> {
        Box::new(ringbuffer::RingBuffer::open(&ring_path, clock, log))
    };
    Ok(match config.source_kind()? {
        SourceKind::Auto => {
            if has_powercap_rapl(roots) || has_power_pmu(roots) {
                open_rapl(roots, clock, log)?
            } else if let Some(meter) = platform_meter(roots, clock.clone()) {
                meter
            } else if ring_path.symlink_metadata().is_ok() || roots.cpu_source().read().is_err() {
                // Without the machine's CPU time there is nothing to estimate from: wait for
                // PowerJoular, as Joular does
                ring(clock)
            } else {
                log.log(Level::Warning, &no_meter(roots, &ring_path));
                Box::new(estimate::Estimate::open(config, &roots.cpu_source(), log)?)
            }
        }
        SourceKind::Rapl => open_rapl(roots, clock, log)?,
        SourceKind::RingBuffer => ring(clock),
        SourceKind::Vm => {
            let file = config
                .vm_power_file
                .as_deref()
                .ok_or(ConfigError::VmWithoutFile)?;
            Box::new(vm::VmPowerFile::open(file, config.vm_format()?, log))
        }
        SourceKind::Estimate => {
            Box::new(estimate::Estimate::open(config, &roots.cpu_source(), log)?)
        }
        SourceKind::EnergyMeter => open_energy_meter(roots, clock)?,
        SourceKind::Powermetrics => open_powermetrics(roots)?,
    })
}

/// What `source` reads, for the start lines: and that `auto` chose it, when it did.
pub fn describe_choice(config: &Config, source: &dyn PowerSource) -> String {
    match config.source_kind() {
        Ok(SourceKind::Auto) => format!("{} (chosen by power-source-type=auto)", source.describe()),
        _ => source.describe(),
    }
}

/// The warning of `auto` when it estimates: where it looked for a meter, and the ways to measure.
fn no_meter(roots: &SystemRoots, ring_path: &Path) -> String {
    let looked = match roots.platform {
        Platform::Linux => format!(
            "no RAPL in {}, no perf power PMU in {}",
            roots.powercap.display(),
            roots.event_source.display()
        ),
        Platform::Windows => "no Energy Meter performance counters".to_owned(),
        Platform::MacOs => format!(
            "no powermetrics at {} that this user may run (it needs root)",
            roots.powermetrics.display()
        ),
        Platform::Other => "no power meter this OS offers".to_owned(),
    };
    format!(
        "No power meter was found: {looked}, no PowerJoular ring buffer at {}. The CPU power is estimated from the CPU utilisation instead (see estimate-idle-watts-per-cpu and estimate-max-watts-per-cpu); to measure it, run PowerJoular with -r before starting, or set power-source-type.",
        ring_path.display()
    )
}

/// The meter of Windows or macOS that `auto` takes when it can be read: the Energy Meter
/// counters, or powermetrics as root.
fn platform_meter(roots: &SystemRoots, clock: Arc<dyn Clock>) -> Option<Box<dyn PowerSource>> {
    match roots.platform {
        Platform::Windows => open_energy_meter(roots, clock).ok(),
        Platform::MacOs if roots.powermetrics.is_file() && roots.root => {
            open_powermetrics(roots).ok()
        }
        _ => None,
    }
}

/// Whether this process runs as root, which powermetrics needs.
fn is_root() -> bool {
    #[cfg(unix)]
    {
        // SAFETY: geteuid only reads this process's user id.
        unsafe { libc::geteuid() == 0 }
    }
    #[cfg(not(unix))]
    {
        false
    }
}

/// The Energy Meter counters, on Windows only.
fn open_energy_meter(
    roots: &SystemRoots,
    clock: Arc<dyn Clock>,
) -> Result<Box<dyn PowerSource>, PowerError> {
    if roots.platform != Platform::Windows {
        return Err(PowerError::new(
            "power-source-type=energy-meter only works on Windows. Use auto instead.",
        ));
    }
    #[cfg(windows)]
    {
        let counters = energy_meter::pdh::Pdh::open()?;
        Ok(Box::new(energy_meter::EnergyMeter::open(
            Box::new(counters),
            clock,
        )?))
    }
    #[cfg(not(windows))]
    {
        let _ = clock;
        Err(PowerError::new(
            "power-source-type=energy-meter needs a build for Windows.",
        ))
    }
}

/// powermetrics, on macOS only (the program's path comes from `roots`).
fn open_powermetrics(roots: &SystemRoots) -> Result<Box<dyn PowerSource>, PowerError> {
    if roots.platform != Platform::MacOs {
        return Err(PowerError::new(
            "power-source-type=powermetrics only works on macOS. Use auto instead.",
        ));
    }
    if !roots.root {
        return Err(PowerError::new(
            "powermetrics only runs as root: run as root (sudo), or set power-source-type to estimate, or to ringbuffer with PowerJoular.",
        ));
    }
    Ok(Box::new(powermetrics::Powermetrics::open(
        &roots.powermetrics,
    )?))
}

/// Whether powercap has the first RAPL zone, as Joular checks it.
fn has_powercap_rapl(roots: &SystemRoots) -> bool {
    roots.platform == Platform::Linux && roots.powercap.join("intel-rapl:0").is_dir()
}

/// Whether the perf `power` PMU offers energy-pkg.
fn has_power_pmu(roots: &SystemRoots) -> bool {
    roots.platform == Platform::Linux && perf::is_present(&roots.event_source)
}

/// RAPL through powercap, or through the perf PMU when powercap has no RAPL but the PMU exists.
fn open_rapl(
    roots: &SystemRoots,
    clock: Arc<dyn Clock>,
    log: &dyn Log,
) -> Result<Box<dyn PowerSource>, PowerError> {
    if roots.platform != Platform::Linux {
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

    /// The interval since the previous reading, which becomes now; `same_instant` is the error
    /// when no time passed.
    fn next(&mut self, same_instant: &str) -> Result<Interval, PowerError> {
        let now = self.clock.monotonic_ns();
        let elapsed_ns = now.saturating_sub(self.last_read_ns);
        if elapsed_ns == 0 {
            return Err(PowerError::new(same_instant));
        }
        self.last_read_ns = now;
        Ok(Interval::from_ns(elapsed_ns))
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

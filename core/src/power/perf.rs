//! RAPL through the perf `power` PMU, for kernels that expose the package energy to perf but have
//! no powercap zones: `devices/power/type` under `/sys/bus/event_source` is the PMU's type,
//! `events/energy-pkg` its event (`event=0x02`), `energy-pkg.scale` the joules per count and
//! `energy-pkg.unit` says `Joules`; `cpumask` names one CPU per package. One counter is opened
//! per package with perf_event_open and their energies are summed. The kernel keeps the counts
//! as 64-bit numbers, so they do not wrap.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{read_text, shown, unexpected, Clock, PowerError, PowerSource};
use crate::cpu_list;
use crate::log::Log;

/// What sysfs says about the package energy event.
#[derive(Debug, Clone, PartialEq)]
pub struct EnergyEvent {
    /// The PMU's perf type.
    pub pmu_type: u32,
    /// The event's config.
    pub config: u64,
    /// Joules per count.
    pub scale: f64,
    /// One CPU of each package, to open a counter on.
    pub cpus: Vec<u32>,
}

/// The `power` PMU's directory.
fn pmu_dir(event_source: &Path) -> PathBuf {
    event_source.join("devices").join("power")
}

/// Whether the `power` PMU and its `energy-pkg` event exist.
pub fn is_present(event_source: &Path) -> bool {
    pmu_dir(event_source)
        .join("events")
        .join("energy-pkg")
        .is_file()
}

/// Parses an event description such as `event=0x02` into its config.
pub fn parse_event_config(text: &str) -> Option<u64> {
    let mut config = None;
    for term in text.trim().split(',') {
        let (name, value) = term.split_once('=')?;
        if name.trim() != "event" {
            return None;
        }
        let value = value.trim();
        config = Some(match value.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok()?,
            None => value.parse().ok()?,
        });
    }
    config
}

/// Reads the `energy-pkg` event of the `power` PMU under `event_source`.
pub fn energy_event(event_source: &Path) -> Result<EnergyEvent, PowerError> {
    let dir = pmu_dir(event_source);
    let events = dir.join("events");
    let type_file = dir.join("type");
    let type_text = read_text(&type_file)?;
    let pmu_type = type_text
        .trim()
        .parse()
        .map_err(|_| unexpected(&type_file, &type_text))?;
    let event_file = events.join("energy-pkg");
    let event_text = read_text(&event_file)?;
    let config =
        parse_event_config(&event_text).ok_or_else(|| unexpected(&event_file, &event_text))?;
    let scale_file = events.join("energy-pkg.scale");
    let scale_text = read_text(&scale_file)?;
    let scale = scale_text
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|scale| scale.is_finite() && *scale > 0.0)
        .ok_or_else(|| unexpected(&scale_file, &scale_text))?;
    let unit_file = events.join("energy-pkg.unit");
    let unit_text = read_text(&unit_file)?;
    if unit_text.trim() != "Joules" {
        return Err(PowerError::new(format!(
            "{} says '{}', not Joules: this PMU's energy-pkg cannot be read as energy.",
            unit_file.display(),
            shown(&unit_text)
        )));
    }
    let mask_file = dir.join("cpumask");
    let mask_text = read_text(&mask_file)?;
    let cpus = cpu_list::parse(&mask_text).ok_or_else(|| unexpected(&mask_file, &mask_text))?;
    Ok(EnergyEvent {
        pmu_type,
        config,
        scale,
        cpus,
    })
}

/// Opens one energy-pkg counter per package.
#[cfg(target_os = "linux")]
pub fn open(
    event_source: &Path,
    clock: Arc<dyn Clock>,
    log: &dyn Log,
) -> Result<Box<dyn PowerSource>, PowerError> {
    let event = energy_event(event_source)?;
    Ok(Box::new(counters::PerfRapl::open(event, clock, log)?))
}

/// The perf PMU exists only on Linux.
#[cfg(not(target_os = "linux"))]
pub fn open(
    _event_source: &Path,
    _clock: Arc<dyn Clock>,
    _log: &dyn Log,
) -> Result<Box<dyn PowerSource>, PowerError> {
    Err(PowerError::new(
        "power-source-type=rapl only works on Linux. Use auto or ringbuffer instead.",
    ))
}

#[cfg(target_os = "linux")]
mod counters {
    use std::fs::File;
    use std::io::Read;
    use std::os::fd::FromRawFd;
    use std::sync::Arc;

    use perf_event_open_sys::bindings::{perf_event_attr, PERF_FLAG_FD_CLOEXEC};

    use super::EnergyEvent;
    use crate::energy::Energy;
    use crate::log::{Level, Log};
    use crate::power::{Clock, PowerError, PowerSource, Span};

    /// Package energy counters opened through perf_event_open.
    pub struct PerfRapl {
        counters: Vec<(u32, File, u64)>,
        scale: f64,
        span: Span,
    }

    fn read_count(cpu: u32, file: &mut File) -> Result<u64, PowerError> {
        let mut bytes = [0u8; 8];
        file.read_exact(&mut bytes).map_err(|error| {
            PowerError::new(format!(
                "Cannot read the perf energy-pkg counter of CPU {cpu}: {error}."
            ))
        })?;
        Ok(u64::from_ne_bytes(bytes))
    }

    impl PerfRapl {
        pub fn open(
            event: EnergyEvent,
            clock: Arc<dyn Clock>,
            log: &dyn Log,
        ) -> Result<PerfRapl, PowerError> {
            let mut counters = Vec::new();
            for &cpu in &event.cpus {
                let mut attr = perf_event_attr {
                    type_: event.pmu_type,
                    size: std::mem::size_of::<perf_event_attr>() as u32,
                    config: event.config,
                    ..Default::default()
                };
                let cpu_arg = i32::try_from(cpu)
                    .map_err(|_| PowerError::new(format!("CPU {cpu} is out of range.")))?;
                // SAFETY: attr is a valid, initialised perf_event_attr that outlives the call
                let fd = unsafe {
                    perf_event_open_sys::perf_event_open(
                        &mut attr,
                        -1,
                        cpu_arg,
                        -1,
                        PERF_FLAG_FD_CLOEXEC as _,
                    )
                };
                if fd < 0 {
                    let error = std::io::Error::last_os_error();
                    return Err(PowerError::new(format!(
                        "Cannot open the perf energy-pkg counter on CPU {cpu}: {error}. Run as root, or give the CAP_PERFMON capability, or set kernel.perf_event_paranoid to 0."
                    )));
                }
                // SAFETY: fd was just returned by perf_event_open and is owned by no one else
                let mut file = unsafe { File::from_raw_fd(fd) };
                let count = read_count(cpu, &mut file)?;
                counters.push((cpu, file, count));
            }
            log.log(
                Level::Info,
                &format!(
                    "Reading CPU power from the perf power PMU (energy-pkg) on CPUs {:?}",
                    event.cpus
                ),
            );
            Ok(PerfRapl {
                counters,
                scale: event.scale,
                span: Span::start(clock),
            })
        }
    }

    impl PowerSource for PerfRapl {
        fn describe(&self) -> String {
            "rapl (perf power PMU)".to_string()
        }

        fn watts(&mut self) -> Result<f64, PowerError> {
            let counts = self
                .counters
                .iter_mut()
                .map(|(cpu, file, _)| read_count(*cpu, file))
                .collect::<Result<Vec<u64>, PowerError>>()?;
            let interval = self
                .span
                .next("The perf energy counters were read twice at the same instant.")?;
            let mut joules = 0.0;
            for ((_, _, last), count) in self.counters.iter_mut().zip(counts) {
                joules += count.wrapping_sub(*last) as f64 * self.scale;
                *last = count;
            }
            Ok((Energy::from_joules(joules) / interval).watts())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn fake_pmu(root: &Path, event: &str, scale: &str, unit: &str, mask: &str) {
        let events = root.join("devices/power/events");
        fs::create_dir_all(&events).unwrap();
        fs::write(root.join("devices/power/type"), "23\n").unwrap();
        fs::write(root.join("devices/power/cpumask"), mask).unwrap();
        fs::write(events.join("energy-pkg"), event).unwrap();
        fs::write(events.join("energy-pkg.scale"), scale).unwrap();
        fs::write(events.join("energy-pkg.unit"), unit).unwrap();
    }

    #[test]
    fn reads_the_energy_pkg_event_of_a_fake_tree() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_present(dir.path()));
        fake_pmu(
            dir.path(),
            "event=0x02\n",
            "2.3283064365386962890625e-10\n",
            "Joules\n",
            "0,18\n",
        );
        assert!(is_present(dir.path()));
        let event = energy_event(dir.path()).unwrap();
        assert_eq!(
            event,
            EnergyEvent {
                pmu_type: 23,
                config: 2,
                scale: 2f64.powi(-32),
                cpus: vec![0, 18],
            }
        );
    }

    #[test]
    fn bad_sysfs_values_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        fake_pmu(dir.path(), "umask=0x1\n", "1e-6", "Joules", "0");
        let error = energy_event(dir.path()).unwrap_err().to_string();
        assert!(error.contains("energy-pkg: 'umask=0x1'"), "{error}");
        fake_pmu(dir.path(), "event=0x02", "-1", "Joules", "0");
        assert!(energy_event(dir.path())
            .unwrap_err()
            .to_string()
            .contains("energy-pkg.scale"));
        fake_pmu(dir.path(), "event=0x02", "1e-6", "Watts", "0");
        assert!(energy_event(dir.path())
            .unwrap_err()
            .to_string()
            .contains("not Joules"));
        fake_pmu(dir.path(), "event=0x02", "1e-6", "Joules", "");
        assert!(energy_event(dir.path())
            .unwrap_err()
            .to_string()
            .contains("cpumask"));
    }

    #[test]
    fn event_configs() {
        assert_eq!(parse_event_config("event=0x3b"), Some(0x3b));
        assert_eq!(parse_event_config("event=7"), Some(7));
        assert_eq!(parse_event_config("event=zz"), None);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_counter_the_kernel_refuses_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        fake_pmu(dir.path(), "event=0x02", "1e-6", "Joules", "0");
        fs::write(dir.path().join("devices/power/type"), "2147483600\n").unwrap();
        let clock: Arc<dyn Clock> = Arc::new(crate::power::ManualClock::new(0));
        let log = crate::log::Recorded::default();
        let error = open(dir.path(), clock, &log)
            .err()
            .expect("no such PMU type");
        assert!(
            error
                .to_string()
                .starts_with("Cannot open the perf energy-pkg counter on CPU 0: "),
            "{error}"
        );
    }
}

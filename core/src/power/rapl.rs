//! RAPL through Linux powercap: the energy counters of every CPU package, summed.
//!
//! A package zone is a top-level `intel-rapl:N` directory whose `name` starts with `package` (AMD
//! processors use the same names). Its sub-zones `intel-rapl:N:M` (core, uncore, dram) and `psys`,
//! which covers more than the CPU, are left out. Counters are in microjoules and wrap back to 0
//! past `max_energy_range_uj`.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{read_text as read, unexpected, Clock, PowerError, PowerSource, Span};
use crate::energy::Energy;
use crate::log::{Level, Log};

/// One package's energy counter.
#[derive(Debug)]
struct Zone {
    energy_file: PathBuf,
    max_uj: u64,
    last_uj: u64,
}

/// The CPU packages' energy, read from powercap.
pub struct Rapl {
    zones: Vec<Zone>,
    span: Span,
}

/// The message for a powercap file only root can read, with the three ways out.
pub fn access_denied(path: &Path) -> PowerError {
    PowerError::new(format!(
        "Cannot read {}. RAPL is only readable by root on most Linux systems: run as root, give the user read access to the energy_uj files (for example with a udev rule), or run PowerJoular with -r as root and set power-source-type=ringbuffer.",
        path.display()
    ))
}

/// The error for a file of the tree that could not be read.
pub fn read_error(path: &Path, error: &io::Error) -> PowerError {
    if error.kind() == io::ErrorKind::PermissionDenied {
        access_denied(path)
    } else {
        PowerError::new(format!("Cannot read {}: {error}.", path.display()))
    }
}

/// Parses a counter file's text: a number of microjoules, which cannot be negative. As Joular
/// reads it with `Long.parseLong`, it is at most 2^63 − 1, and `+5` and `-0` are numbers.
pub fn parse_microjoules(path: &Path, text: &str) -> Result<u64, PowerError> {
    text.trim()
        .parse::<i64>()
        .ok()
        .and_then(|value| u64::try_from(value).ok())
        .ok_or_else(|| unexpected(path, text))
}

/// The energy used between two readings of a counter that wraps back to 0 past `max_uj`. More
/// than half the range in one window is not a wrap but a reset (after a suspend, say): 0.
pub fn energy_between(before_uj: u64, after_uj: u64, max_uj: u64) -> u64 {
    if after_uj >= before_uj {
        return after_uj - before_uj;
    }
    let wrapped = max_uj.saturating_sub(before_uj).saturating_add(after_uj);
    if wrapped > max_uj / 2 {
        0
    } else {
        wrapped
    }
}

impl Zone {
    fn read_energy(&self) -> Result<u64, PowerError> {
        let energy = parse_microjoules(&self.energy_file, &read(&self.energy_file)?)?;
        if energy > self.max_uj {
            return Err(PowerError::new(format!(
                "RAPL counter {} is above its range: {energy} uJ.",
                self.energy_file.display()
            )));
        }
        Ok(energy)
    }
}

/// Whether a directory name is a top-level zone, `intel-rapl:<digits>`.
fn is_top_level(name: &str) -> bool {
    name.strip_prefix("intel-rapl:")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

impl Rapl {
    /// Finds the package zones under `powercap` and reads their ranges and first counts.
    pub fn open(powercap: &Path, clock: Arc<dyn Clock>, log: &dyn Log) -> Result<Rapl, PowerError> {
        let entries = std::fs::read_dir(powercap).map_err(|error| read_error(powercap, &error))?;
        let mut zones = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|error| read_error(powercap, &error))?;
            let dir = entry.path();
            if !is_top_level(&entry.file_name().to_string_lossy()) {
                continue;
            }
            if !read(&dir.join("name"))?.trim().starts_with("package") {
                continue;
            }
            let range_file = dir.join("max_energy_range_uj");
            let max_uj = parse_microjoules(&range_file, &read(&range_file)?)?;
            zones.push(Zone {
                energy_file: dir.join("energy_uj"),
                max_uj,
                last_uj: 0,
            });
        }
        if zones.is_empty() {
            return Err(PowerError::new(format!(
                "No RAPL package zone found in {}.",
                powercap.display()
            )));
        }
        zones.sort_by(|a, b| a.energy_file.cmp(&b.energy_file));
        for zone in &mut zones {
            zone.last_uj = zone.read_energy()?;
        }
        let dirs: Vec<String> = zones
            .iter()
            .filter_map(|zone| zone.energy_file.parent())
            .map(|dir| dir.display().to_string())
            .collect();
        log.log(
            Level::Info,
            &format!("Reading CPU power from Linux RAPL: [{}]", dirs.join(", ")),
        );
        Ok(Rapl {
            zones,
            span: Span::start(clock),
        })
    }
}

impl PowerSource for Rapl {
    fn describe(&self) -> String {
        "rapl (powercap)".to_string()
    }

    fn watts(&mut self) -> Result<f64, PowerError> {
        // Every counter is read before any is updated: a failure leaves them all as they were,
        // and the next success averages over the longer span
        let energies = self
            .zones
            .iter()
            .map(Zone::read_energy)
            .collect::<Result<Vec<u64>, PowerError>>()?;
        let interval = self.span.next("RAPL was read twice at the same instant.")?;
        let mut used_uj = 0u64;
        for (zone, energy) in self.zones.iter_mut().zip(energies) {
            used_uj = used_uj.saturating_add(energy_between(zone.last_uj, energy, zone.max_uj));
            zone.last_uj = energy;
        }
        Ok((Energy::from_joules(used_uj as f64 / 1e6) / interval).watts())
    }
}

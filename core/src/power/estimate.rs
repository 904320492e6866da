//! An estimate of the CPU power from the CPU utilisation, for machines where nothing can be
//! measured (cloud virtual machines, mostly). The model is Cloud Carbon Footprint's linear one:
//!
//! P = cpus × (idle + (max − idle) × utilisation)
//!
//! with `cpus` the CPUs `/proc/stat` lists, `utilisation` the machine's busy share of CPU time
//! since the previous reading (from 0 to 1), and `idle` and `max` the watts per CPU at 0 % and
//! 100 % (defaults: Cloud Carbon Footprint's AWS averages, 0.74 W and 3.5 W; set with
//! `estimate-idle-watts-per-cpu` and `estimate-max-watts-per-cpu`).

use std::path::{Path, PathBuf};

use super::{PowerError, PowerSource};
use crate::config::Config;
use crate::log::{Level, Log};
use crate::procstat::{self, CpuTimes, ProcStat};

/// The model's power for `cpus` CPUs busy for the share `utilisation` of their time.
pub fn model_watts(cpus: usize, idle_watts: f64, max_watts: f64, utilisation: f64) -> f64 {
    cpus as f64 * (idle_watts + (max_watts - idle_watts) * utilisation.clamp(0.0, 1.0))
}

/// Reads `stat` under `proc_root`, which must list at least one CPU: the model counts them.
fn read_stat(proc_root: &Path) -> Result<ProcStat, PowerError> {
    let stat = procstat::read(proc_root).map_err(|error| PowerError::new(error.to_string()))?;
    if stat.cpus == 0 {
        return Err(PowerError::new(format!(
            "Cannot use {}: it lists no cpuN line. Point the proc root at a Linux procfs.",
            proc_root.join("stat").display()
        )));
    }
    Ok(stat)
}

/// CPU power estimated from `/proc/stat`.
pub struct Estimate {
    proc_root: PathBuf,
    idle_watts: f64,
    max_watts: f64,
    last: CpuTimes,
}

impl Estimate {
    /// Reads `/proc/stat` under `proc_root` once, as the start of the first window.
    pub fn open(config: &Config, proc_root: &Path, log: &dyn Log) -> Result<Estimate, PowerError> {
        let (idle_watts, max_watts) = (
            config.estimate_idle_watts_per_cpu,
            config.estimate_max_watts_per_cpu,
        );
        if max_watts < idle_watts {
            return Err(PowerError::new(format!(
                "estimate-max-watts-per-cpu ({max_watts}) is below estimate-idle-watts-per-cpu ({idle_watts}). Set it to the watts per CPU at full load, at least the idle ones."
            )));
        }
        let stat = read_stat(proc_root).map_err(|error| {
            PowerError::new(format!(
                "{error} The CPU power cannot be estimated without it."
            ))
        })?;
        log.log(
            Level::Info,
            &format!(
                "Estimating CPU power from the CPU utilisation: {} CPUs × ({idle_watts} W + ({max_watts} W − {idle_watts} W) × utilisation)",
                stat.cpus
            ),
        );
        Ok(Estimate {
            proc_root: proc_root.to_owned(),
            idle_watts,
            max_watts,
            last: stat.cpu,
        })
    }
}

impl PowerSource for Estimate {
    fn describe(&self) -> String {
        "estimate (from the CPU utilisation)".to_string()
    }

    fn watts(&mut self) -> Result<f64, PowerError> {
        let stat = read_stat(&self.proc_root)?;
        // No tick since the last reading (or counters that went back): nothing ran that was seen
        let utilisation = stat.cpu.utilisation_since(&self.last).unwrap_or(0.0);
        self.last = stat.cpu;
        Ok(model_watts(
            stat.cpus,
            self.idle_watts,
            self.max_watts,
            utilisation,
        ))
    }
}

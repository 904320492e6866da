//! An estimate of the CPU power from the CPU utilisation, for machines where nothing can be
//! measured (cloud virtual machines, mostly). The model is Cloud Carbon Footprint's linear one:
//!
//! P = cpus × (idle + (max − idle) × utilisation)
//!
//! with `cpus` the CPUs the OS counts, `utilisation` the machine's busy share of CPU time since
//! the previous reading (from 0 to 1; `/proc/stat` on Linux, `GetSystemTimes` on Windows,
//! `host_statistics` on macOS: [`CpuSource`]), and `idle` and `max` the watts per CPU at 0 % and
//! 100 % (defaults: Cloud Carbon Footprint's AWS averages, 0.74 W and 3.5 W; set with
//! `estimate-idle-watts-per-cpu` and `estimate-max-watts-per-cpu`).

use super::{PowerError, PowerSource};
use crate::config::Config;
use crate::log::{Level, Log};
use crate::machine::{CpuSource, CpuUse};

/// The model's power for `cpus` CPUs busy for the share `utilisation` of their time.
pub fn model_watts(cpus: usize, idle_watts: f64, max_watts: f64, utilisation: f64) -> f64 {
    cpus as f64 * (idle_watts + (max_watts - idle_watts) * utilisation.clamp(0.0, 1.0))
}

/// CPU power estimated from the machine's CPU time.
pub struct Estimate {
    cpu: CpuSource,
    idle_watts: f64,
    max_watts: f64,
    last: CpuUse,
}

impl Estimate {
    /// Reads the machine's CPU time from `cpu` once, as the start of the first window.
    pub fn open(config: &Config, cpu: &CpuSource, log: &dyn Log) -> Result<Estimate, PowerError> {
        let (idle_watts, max_watts) = (
            config.estimate_idle_watts_per_cpu,
            config.estimate_max_watts_per_cpu,
        );
        if max_watts < idle_watts {
            return Err(PowerError::new(format!(
                "estimate-max-watts-per-cpu ({max_watts}) is below estimate-idle-watts-per-cpu ({idle_watts}). Set it to the watts per CPU at full load, at least the idle ones."
            )));
        }
        let stat = cpu.read().map_err(|error| {
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
            cpu: cpu.clone(),
            idle_watts,
            max_watts,
            last: stat,
        })
    }
}

impl PowerSource for Estimate {
    fn describe(&self) -> String {
        "estimate (from the CPU utilisation)".to_string()
    }

    fn watts(&mut self) -> Result<f64, PowerError> {
        let stat = self
            .cpu
            .read()
            .map_err(|error| PowerError::new(error.to_string()))?;
        // No tick since the last reading (or counters that went back): nothing ran that was seen
        let utilisation = stat.utilisation_since(&self.last).unwrap_or(0.0);
        self.last = stat;
        Ok(model_watts(
            stat.cpus as usize,
            self.idle_watts,
            self.max_watts,
            utilisation,
        ))
    }
}

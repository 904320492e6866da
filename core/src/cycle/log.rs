//! The cycle log's format: one JSON object per cycle and JVM, one a line (docs/record.md), with
//! the source's energy, the JVM's share and energy, and what went to no branch; with
//! `carbon-intensity`, the intensity in force and the JVM's grams of CO2e.

use serde_json::json;

use super::Cycle;
use crate::attribution::MachineLoad;

impl Cycle {
    /// One JSON object per JVM, one a line, for the cycle log.
    pub fn json_lines(&self) -> String {
        self.json_objects()
            .iter()
            .map(|line| format!("{line}\n"))
            .collect()
    }

    /// The objects of [`Cycle::json_lines`], one per JVM, for a writer that adds its own keys.
    pub fn json_objects(&self) -> Vec<serde_json::Value> {
        let mut objects = Vec::with_capacity(self.jvms.len());
        for jvm in &self.jvms {
            let result = &jvm.result;
            let mut line = json!({
                "timestamp_ms": self.timestamp_ms,
                "pid": jvm.pid,
                "interval_s": self.interval.seconds(),
                "source_power_w": self.power.watts(),
                "source_energy_j": self.source_energy().joules(),
                "jvm_cpu_ns": jvm.cpu_ns,
                "jvm_share": result.jvm_share,
                "jvm_energy_j": result.jvm_energy().joules(),
                "branches_energy_j": result.branches_energy().joules(),
                "app_energy_j": result.app_energy().joules(),
                "unattributed_energy_j": result.unattributed_energy().joules(),
                "coverage": result.coverage,
                "samples": jvm.samples,
                "lost_samples": self.lost_samples,
            });
            if let Some(carbon) = self.carbon {
                line["carbon_intensity_g_per_kwh"] = json!(carbon.grams_per_kwh);
                line["carbon_intensity_source"] = json!(carbon.source.label());
                line["jvm_co2e_g"] = json!(carbon.grams(result.jvm_energy()));
            }
            match self.machine {
                MachineLoad::BusyCpuNs(busy) => line["busy_cpu_ns"] = json!(busy),
                MachineLoad::SystemLoad(load) => line["system_load"] = json!(load),
            }
            objects.push(line);
        }
        objects
    }
}

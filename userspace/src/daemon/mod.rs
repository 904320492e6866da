//! The host daemon's parts (the command is `commands/daemon.rs`, see docs/daemon.md): it is
//! `record --all` with no end but a signal, whose cycles go to the [`Metrics`] the endpoint
//! serves (and to Joular's CSV files when `--results-path` is given), with each JVM's branches
//! bounded ([`crate::session::BranchLimit`]) so that its memory stays bounded for weeks.

pub mod basic_auth;
pub mod container;
pub mod labels;
pub mod metrics;
pub mod ranked;
pub mod selfstat;
pub mod server;
pub mod web_config;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use joularcode_core::log::Log;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::output::OutputError;
use crate::record::sink::{CycleView, Sink};
use metrics::Metrics;

/// The metrics, shared by the cycles that update them and the scrapes that read them.
#[derive(Debug, Clone)]
pub struct Shared(pub Arc<Mutex<Metrics>>);

/// Keeps a process that runs for weeks from holding the memory it freed: with glibc, two malloc
/// arenas at most (each thread that attaches to a JVM would otherwise get one of its own, up to
/// eight per CPU, each holding its freed pieces), called once at start.
pub fn bound_the_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; called before the daemon's threads start.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Gives the heap's free pages back to the system (glibc keeps them otherwise: the tables
/// compacted after a JVM of ever-new classes leave holes that RSS would go on counting).
fn trim_the_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of the allocator to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

impl Sink for Shared {
    fn cycle(&mut self, cycle: &CycleView<'_>) {
        let mut metrics = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        metrics.cycle(cycle, Instant::now());
        drop(metrics);
        trim_the_heap();
    }

    fn finish(&mut self, _: &dyn Log) -> Result<(), OutputError> {
        Ok(())
    }
}

impl Collector for Shared {
    fn encode(&self, encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .encode(encoder)
    }
}

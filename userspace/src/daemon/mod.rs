//! The host daemon's parts (the command is `commands/daemon.rs`, see docs/daemon.md): it is
//! `record --all` with no end but a signal, whose cycles go to the [`Metrics`] the endpoint
//! serves (and to Joular's CSV files when `--results-path` is given), with each JVM's branches
//! bounded ([`crate::session::BranchLimit`]) so that its memory stays bounded for weeks.

pub mod container;
pub mod metrics;
pub mod ranked;
pub mod selfstat;
pub mod server;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use joularcode_core::log::Log;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::record::sink::{CycleView, Sink};
use metrics::Metrics;

/// The metrics, shared by the cycles that update them and the scrapes that read them.
#[derive(Debug, Clone)]
pub struct Shared(pub Arc<Mutex<Metrics>>);

impl Sink for Shared {
    fn cycle(&mut self, cycle: &CycleView<'_>) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .cycle(cycle, Instant::now());
    }

    fn finish(&mut self, _: &dyn Log) -> Result<(), String> {
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

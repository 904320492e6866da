//! The processes that exec'd a program or ended, told by the kernel (bpf/processes.bpf.c), so
//! that discovery reads /proc only for them instead of every process of the host at every pass.
//!
//! The kernel names processes by their pid in the host's PID namespace, whatever namespaces they
//! run in. Events are read on the caller's timer; if the ring buffer overflowed in between, some
//! events are lost and [`ProcessEvents::take`] says so, for the caller to rescan /proc.

use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex};

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{OpenObject, RingBuffer, RingBufferBuilder};

use crate::sampler::SamplerError;

mod skel {
    include!(concat!(env!("OUT_DIR"), "/processes.skel.rs"));
}
use skel::{ProcessesSkel, ProcessesSkelBuilder};

/// What happened to a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessEvent {
    /// Process `pid` exec'd a program (a new process, or an old one that became another).
    Exec(u32),
    /// The last thread of process `pid` exited.
    Exit(u32),
}

impl ProcessEvent {
    /// Parses a `struct jp_process_event` (pid, kind; 8 bytes).
    fn parse(bytes: &[u8]) -> Option<ProcessEvent> {
        let pid = u32::from_ne_bytes(bytes.get(0..4)?.try_into().ok()?);
        match u32::from_ne_bytes(bytes.get(4..8)?.try_into().ok()?) {
            1 => Some(ProcessEvent::Exec(pid)),
            2 => Some(ProcessEvent::Exit(pid)),
            _ => None,
        }
    }
}

/// The events since the last [`ProcessEvents::take`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Taken {
    /// In the order they happened.
    pub events: Vec<ProcessEvent>,
    /// Whether some were lost (the ring buffer was full): /proc must be rescanned.
    pub lost: bool,
}

/// Why the process tracepoints cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum EventsError {
    /// Not root, and without the capabilities needed (the message names them).
    #[error("{0}")]
    Privileges(#[from] SamplerError),
    /// The BPF object could not be opened, loaded or attached.
    #[error("cannot {what} (bpf/processes.bpf.c): {source}")]
    Bpf {
        /// What failed.
        what: &'static str,
        /// Why.
        source: libbpf_rs::Error,
    },
}

/// The loaded and attached process tracepoints.
pub struct ProcessEvents {
    skel: ProcessesSkel<'static>,
    ring: RingBuffer<'static>,
    received: Arc<Mutex<Vec<ProcessEvent>>>,
    lost_before: u64,
}

impl ProcessEvents {
    /// Loads and attaches the tracepoints; events are kept from now on.
    pub fn start() -> Result<ProcessEvents, EventsError> {
        // The same one line as the sampler's when the privileges are missing, before libbpf
        // tries and prints its own complaints.
        crate::sampler::privileges::check_privileges()?;
        let error = |what| move |source| EventsError::Bpf { what, source };
        // The skeleton borrows the storage of its object for its whole life: these few bytes
        // are leaked (the object itself is freed with the skeleton).
        let storage: &'static mut MaybeUninit<OpenObject> =
            Box::leak(Box::new(MaybeUninit::uninit()));
        let open = ProcessesSkelBuilder::default()
            .open(storage)
            .map_err(error("open the BPF object"))?;
        let mut skel = open.load().map_err(error("load the BPF programs"))?;
        skel.attach()
            .map_err(error("attach the process tracepoints"))?;
        let received: Arc<Mutex<Vec<ProcessEvent>>> = Arc::default();
        let sink = received.clone();
        let mut builder = RingBufferBuilder::new();
        builder
            .add(&skel.maps.process_events, move |bytes: &[u8]| {
                if let Some(event) = ProcessEvent::parse(bytes) {
                    sink.lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .push(event);
                }
                0
            })
            .map_err(error("read the ring buffer"))?;
        let ring = builder.build().map_err(error("map the ring buffer"))?;
        Ok(ProcessEvents {
            skel,
            ring,
            received,
            lost_before: 0,
        })
    }

    /// The events that happened since the last call.
    pub fn take(&mut self) -> Taken {
        let _ = self.ring.consume();
        let lost = self.skel.maps.bss_data.as_ref().map_or(0, |bss| {
            // SAFETY: the .bss is mapped shared with the kernel; a volatile read sees the
            // counter the BPF programs increment atomically.
            unsafe { std::ptr::read_volatile(&bss.lost_events) }
        });
        let taken = Taken {
            events: std::mem::take(
                &mut *self
                    .received
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner()),
            ),
            lost: lost != self.lost_before,
        };
        self.lost_before = lost;
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_parsed_and_garbage_is_not() {
        let event = |pid: u32, kind: u32| [pid.to_ne_bytes(), kind.to_ne_bytes()].concat();
        assert_eq!(
            ProcessEvent::parse(&event(42, 1)),
            Some(ProcessEvent::Exec(42))
        );
        assert_eq!(
            ProcessEvent::parse(&event(7, 2)),
            Some(ProcessEvent::Exit(7))
        );
        assert_eq!(ProcessEvent::parse(&event(7, 3)), None);
        assert_eq!(ProcessEvent::parse(&[1, 2, 3]), None);
    }
}

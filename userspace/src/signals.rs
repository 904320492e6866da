//! Ctrl-C and SIGTERM end a run cleanly, whatever their number and timing: the handler only
//! counts them, the command's loop stops at the first, writes what it has (the cycle in
//! progress), and ends a launched command; a second one only makes that end quicker
//! ([`crate::launch::end`] kills the command at once instead of waiting for it). The profiler
//! itself is never ended by them midway, so nothing is left behind.

use std::sync::atomic::{AtomicU32, Ordering};

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

static RECEIVED: AtomicU32 = AtomicU32::new(0);

extern "C" fn count(_: libc::c_int) {
    RECEIVED.fetch_add(1, Ordering::Relaxed);
}

/// A signal whose handler could not be installed.
#[derive(Debug, thiserror::Error)]
#[error("cannot handle {signal}: {source}")]
pub struct SignalError {
    signal: Signal,
    source: nix::Error,
}

/// Makes SIGINT and SIGTERM counted ([`received`]) instead of ending the process. Calling it
/// again changes nothing.
pub fn stop_on_signals() -> Result<(), SignalError> {
    let action = SigAction::new(
        SigHandler::Handler(count),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only adds to an atomic, which is async-signal-safe.
        unsafe { sigaction(signal, &action) }.map_err(|source| SignalError { signal, source })?;
    }
    Ok(())
}

/// True once SIGINT or SIGTERM has arrived.
pub fn stop_requested() -> bool {
    received() > 0
}

/// How many SIGINT and SIGTERM have arrived.
pub fn received() -> u32 {
    RECEIVED.load(Ordering::Relaxed)
}

/// Counts as one signal: `top` stops this way on its quit key (in a terminal's raw mode, Ctrl-C
/// is a key, not a signal).
pub fn stop() {
    RECEIVED.fetch_add(1, Ordering::Relaxed);
}

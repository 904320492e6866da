//! Ctrl-C and SIGTERM end a run cleanly: the handler only sets a flag that the command's loop
//! checks, so the sampler is dropped (and detached) on the normal path. A second signal kills
//! the process as usual.

use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn request_stop(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Makes SIGINT and SIGTERM set the flag that [`stop_requested`] reads (once: the handler is
/// reset after the first signal).
pub fn stop_on_signals() -> Result<(), String> {
    let action = SigAction::new(
        SigHandler::Handler(request_stop),
        SaFlags::SA_RESETHAND | SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { sigaction(signal, &action) }
            .map_err(|e| format!("cannot handle {signal}: {e}"))?;
    }
    Ok(())
}

/// True once SIGINT or SIGTERM has arrived.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Sets the flag that [`stop_requested`] reads, as a signal would: `top` stops this way on its
/// quit key (in a terminal's raw mode, Ctrl-C is a key, not a signal).
pub fn stop() {
    STOP.store(true, Ordering::Relaxed);
}

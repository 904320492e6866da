//! What the end-to-end tests that profile JVMs in a session share: the session's options, a
//! session pumped to its end, a command profiled to its end, the samples of its one JVM.

// Each test program compiles this module and uses a part of it.
#![allow(dead_code)]

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use joularcode_bpf::session::{Session, SessionOptions, Targets};
use joularcode_core::log::Recorded;
use joularcode_testkit::agent_library;

/// A session at `rate_hz` with native frames (as `stacks --native` does), its JVMs with this
/// build's agent or, without `agent`, with nothing (`--no-attach`).
pub fn native_options(rate_hz: u64, agent: bool) -> SessionOptions {
    let mut options = SessionOptions::new(Arc::new(Recorded::default()));
    options.agent_path = Some(agent_library().to_path_buf());
    options.attach_agent = agent;
    options.rate_hz = rate_hz;
    options.native_frames = true;
    options
}

/// Pumps `session` until there is nothing left to sample and its last samples are in.
pub fn pump_to_end(session: &mut Session) {
    while !session.finished() {
        session.pump(Duration::from_millis(100)).expect("pump");
    }
    // The last samples arrive within a consumer pass.
    std::thread::sleep(Duration::from_millis(300));
    session.pump(Duration::ZERO).expect("pump");
}

/// Profiles `command` in a session with [`native_options`] until it has ended and its last
/// samples are in, and checks that it exited with 0 (`what` names it in the message). The counts
/// are left in the session.
pub fn profile_to_end(command: Command, rate_hz: u64, agent: bool, what: &str) -> Session {
    let options = native_options(rate_hz, agent);
    let mut session = Session::start(Targets::Launch(command), &options).expect("session starts");
    pump_to_end(&mut session);
    assert_eq!(session.launched_exit(), Some(0), "{what} failed");
    session
}

/// The samples of the session's one JVM, taken out: (branch, whether native frames are newer than
/// its Java frames, samples).
pub fn one_jvm_samples(session: &mut Session) -> Vec<(String, bool, u64)> {
    let counts = session.take_native_counts();
    assert_eq!(counts.len(), 1, "one JVM: {:?}", counts.keys());
    let (&pid, samples) = counts.iter().next().expect("one JVM");
    let jvm = session.jvm(pid).expect("the JVM");
    samples
        .iter()
        .map(|((branch, native), &n)| {
            let name = jvm.branches().name(*branch).to_string();
            (name, !native.is_empty(), n)
        })
        .collect()
}

//! What the end-to-end tests that profile a launched command in a session share: a command profiled
//! to its end.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use joularcode_bpf::session::{Session, SessionOptions, Targets};
use joularcode_core::log::Recorded;
use joularcode_testkit::agent_library;

/// Profiles `command` in a session at `rate_hz` with native frames (as `stacks --native` does),
/// its JVMs launched with this build's agent or, without `agent`, with nothing (`--no-attach`),
/// until it has ended and its last samples are in, and checks that it exited with 0 (`what`
/// names it in the message). The counts are left in the session.
pub fn profile_to_end(command: Command, rate_hz: u64, agent: bool, what: &str) -> Session {
    let mut options = SessionOptions::new(Arc::new(Recorded::default()));
    options.agent_path = Some(agent_library().to_path_buf());
    options.attach_agent = agent;
    options.rate_hz = rate_hz;
    options.native_frames = true;
    let mut session = Session::start(Targets::Launch(command), &options).expect("session starts");
    while !session.finished() {
        session.pump(Duration::from_millis(100)).expect("pump");
    }
    // The last samples arrive within a consumer pass.
    std::thread::sleep(Duration::from_millis(300));
    session.pump(Duration::ZERO).expect("pump");
    assert_eq!(session.launched_exit(), Some(0), "{what} failed");
    session
}

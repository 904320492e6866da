//! The JVMs among the processes of a launched command: every process the command starts is
//! tracked by the sampler from its first instant, and those that map `libjvm.so` within
//! [`LAUNCH_WINDOW`] of their start or an exec are its JVMs.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use super::{alive, maps_libjvm};

/// How long after its start (or its last exec) a process of a launched command is looked at for
/// libjvm.so before it is taken for something else than a JVM.
pub const LAUNCH_WINDOW: Duration = Duration::from_secs(5);

/// A process of the command, as far as it is known.
struct Descendant {
    comm: String,
    /// When it was first seen under this name.
    since: Instant,
    jvm: bool,
}

/// The processes of a launched command seen so far.
#[derive(Default)]
pub struct Launched {
    seen: HashMap<u32, Descendant>,
}

impl Launched {
    /// Looks at the command's processes (`processes`: those the sampler tracks) and returns those
    /// found to be JVMs since the last look, leaving out those `known` already.
    pub fn started(
        &mut self,
        processes: impl IntoIterator<Item = u32>,
        known: impl Fn(u32) -> bool,
    ) -> Vec<u32> {
        let proc = Path::new("/proc");
        let now = Instant::now();
        let mut started = Vec::new();
        for pid in processes {
            let Some(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok() else {
                continue;
            };
            let entry = self.seen.entry(pid).or_insert_with(|| Descendant {
                comm: comm.clone(),
                since: now,
                jvm: false,
            });
            if entry.comm != comm {
                *entry = Descendant {
                    comm,
                    since: now,
                    jvm: false,
                };
            }
            if !entry.jvm && now.duration_since(entry.since) < LAUNCH_WINDOW {
                entry.jvm = matches!(maps_libjvm(proc, pid), Ok(true));
                if entry.jvm && !known(pid) {
                    started.push(pid);
                }
            }
        }
        self.seen.retain(|&pid, _| alive(pid));
        started
    }

    /// Whether a process seen is still looked at, at `now`: one that is not a JVM yet, within
    /// [`LAUNCH_WINDOW`] of its start or exec.
    pub fn watching(&self, now: Instant) -> bool {
        self.seen
            .values()
            .any(|seen| !seen.jvm && now.saturating_duration_since(seen.since) < LAUNCH_WINDOW)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_that_maps_no_libjvm_is_watched_for_its_window_only() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("run sleep");
        let mut launched = Launched::default();
        let now = Instant::now();
        assert!(!launched.watching(now), "nothing seen yet");
        assert!(launched.started([child.id()], |_| false).is_empty());
        assert!(launched.watching(now));
        assert!(!launched.watching(now + LAUNCH_WINDOW + Duration::from_secs(1)));
        let _ = child.kill();
        let _ = child.wait();
        assert!(launched.started([child.id()], |_| false).is_empty());
        assert!(!launched.watching(now), "an ended process is forgotten");
    }
}

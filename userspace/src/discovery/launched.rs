//! The JVMs among the processes of a launched command: every process the command starts is
//! tracked by the sampler from its first instant, and those that map `libjvm.so` within their
//! first looks (after their start or an exec) are its JVMs.

use std::collections::HashMap;
use std::path::Path;

use super::{alive, maps_libjvm};

/// A process of a launched command is checked this many times for libjvm.so (after its start or
/// its last exec) before it is taken for something else than a JVM.
const LAUNCH_CHECKS: u32 = 20;

/// A process of the command, as far as it is known.
struct Descendant {
    comm: String,
    checks: u32,
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
        let mut started = Vec::new();
        for pid in processes {
            let Some(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok() else {
                continue;
            };
            let entry = self.seen.entry(pid).or_insert_with(|| Descendant {
                comm: comm.clone(),
                checks: 0,
                jvm: false,
            });
            if entry.comm != comm {
                *entry = Descendant {
                    comm,
                    checks: 0,
                    jvm: false,
                };
            }
            if !entry.jvm && entry.checks < LAUNCH_CHECKS {
                entry.checks += 1;
                entry.jvm = matches!(maps_libjvm(proc, pid), Ok(true));
                if entry.jvm && !known(pid) {
                    started.push(pid);
                }
            }
        }
        self.seen.retain(|&pid, _| alive(pid));
        started
    }
}

//! The names and kinds of one JVM's threads sampled ([`ThreadKinds`]): a thread's name is read
//! from /proc at its first sample, kept while it has samples not taken, and after that only while
//! the sampler's thread times show it alive under the same name (a tid can be reused, a thread
//! renamed), so that a thread sampled every cycle is not named again every cycle.

use std::collections::{HashMap, HashSet};

use joularcode_core::attribution::ThreadKind;

use crate::sampler::ThreadTime;
use crate::thread_names::{self, JvmThread};

/// The threads of one JVM named so far.
#[derive(Debug, Default)]
pub struct ThreadKinds {
    /// The name and kind of each thread sampled, read from /proc at its first sample.
    kinds: HashMap<u32, (String, Option<JvmThread>)>,
    /// The threads of `kinds` that the sampler's last times showed alive under the same name
    /// ([`ThreadKinds::note`]): their names are kept after the next [`ThreadKinds::retain`].
    named: HashSet<u32>,
}

impl ThreadKinds {
    /// The JVM thread that thread `tid` of `pid` is (GC, JIT compiler...), `None` for an
    /// application thread: from its name, read now if it is not known.
    pub fn kind(&mut self, pid: u32, tid: u32) -> Option<JvmThread> {
        self.kinds
            .entry(tid)
            .or_insert_with(|| {
                let name = thread_names::thread_name(pid, tid).unwrap_or_default();
                let kind = thread_names::classify(&name);
                (name, kind)
            })
            .1
    }

    /// The name and kind of thread `tid` (an empty name and [`ThreadKind::Java`] if it was never
    /// sampled).
    pub fn name_and_kind(&self, tid: u32) -> (String, ThreadKind) {
        let (name, kind) = self.kinds.get(&tid).cloned().unwrap_or_default();
        let kind = if kind.is_some() {
            ThreadKind::Jvm
        } else {
            ThreadKind::Java
        };
        (name, kind)
    }

    /// Notes the sampler's times of the JVM's threads: the names of the threads still alive
    /// under the same name (the comm the sampler saw) are kept after the next
    /// [`ThreadKinds::retain`], rather than read again at their next sample.
    pub fn note<'a>(&mut self, times: impl Iterator<Item = &'a ThreadTime>) {
        let live: HashMap<u32, &str> = times
            .filter(|time| !time.exited)
            .map(|time| (time.tid, time.name.as_str()))
            .collect();
        self.named = self
            .kinds
            .iter()
            .filter(|(tid, (name, _))| live.get(tid) == Some(&name.as_str()))
            .map(|(&tid, _)| tid)
            .collect();
    }

    /// After a take of counts: keeps the names of the threads `held` (with samples not taken
    /// yet) and of those the last [`ThreadKinds::note`] showed alive; the others are read again
    /// when they are next sampled.
    pub fn retain(&mut self, held: &HashSet<u32>) {
        let named = std::mem::take(&mut self.named);
        self.kinds
            .retain(|tid, _| held.contains(tid) || named.contains(tid));
    }

    /// Whether no thread is named.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    /// Whether thread `tid` is named.
    #[cfg(test)]
    pub fn knows(&self, tid: u32) -> bool {
        self.kinds.contains_key(&tid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_threads_alive_under_the_same_name_are_kept_across_cycles() {
        let pid = std::process::id();
        let name = thread_names::thread_name(pid, pid).expect("this thread's name");
        let time = |name: &str, exited: bool| ThreadTime {
            pid,
            tid: pid,
            on_cpu_ns: 1,
            name: name.to_string(),
            exited,
        };
        let nothing_held = HashSet::new();
        let mut kinds = ThreadKinds::default();
        kinds.kind(pid, pid);
        assert_eq!(kinds.name_and_kind(pid), (name.clone(), ThreadKind::Java));
        kinds.note([time(&name, false)].iter());
        kinds.retain(&nothing_held);
        assert!(kinds.knows(pid), "alive, same name: kept");
        kinds.note([time("renamed", false)].iter());
        kinds.retain(&nothing_held);
        assert!(kinds.is_empty(), "renamed: read again");
        kinds.kind(pid, pid);
        kinds.note([time(&name, true)].iter());
        kinds.retain(&HashSet::from([pid]));
        assert!(
            kinds.knows(pid),
            "exited with samples held: kept until taken"
        );
        kinds.retain(&nothing_held);
        assert!(kinds.is_empty(), "exited: forgotten");
    }
}

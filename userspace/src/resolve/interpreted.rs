//! Interpreted frames, named by the `Method*` their frame holds, read through VMStructs (as are
//! the methods of compiled frames' scopes); what a Method* was named when last read still names
//! the last samples of a JVM that has ended.

use joularcode_core::branch::Branches;

use super::{Named, Pc, Resolver};
use crate::discovery;
use crate::hotspot::JavaMethod;
use crate::sampler::monotonic_ns;

/// Most Method* reads remembered.
const MAX_METHODS: usize = 100_000;

/// The last read of one Method* from the target.
#[derive(Debug, Default)]
pub(super) struct MethodRead {
    /// When it was read ([`monotonic_ns`], the samples' clock).
    pub(super) at_ns: u64,
    /// Whether it was a readable Method then.
    readable: bool,
    /// Its name when it was last readable: what the samples that arrive after the JVM ended get.
    name: Option<JavaMethod>,
}

impl Resolver {
    /// An interpreted frame, by the Method* in its frame, taken at `time_ns`.
    pub(super) fn interpreted(&mut self, pc: Pc, time_ns: u64, branches: &mut Branches) -> Named {
        let Some(name) = pc
            .method_slot
            .and_then(|method| self.method_at(method, time_ns))
        else {
            return Named::Unknown;
        };
        self.frames.push(branches, &name.class, &name.name);
        Named::Frames
    }

    /// The name of the Method* `method_ptr` in a sample taken at `time_ns`.
    ///
    /// A read of the Method* made after the sample's time answers for it, as a read made now
    /// would: so each Method* is read from the target about once per batch of samples, not once
    /// per frame.
    pub(super) fn method_at(&mut self, method_ptr: u64, time_ns: u64) -> Option<JavaMethod> {
        let fresh = self
            .methods
            .get(&method_ptr)
            .is_some_and(|read| read.at_ns >= time_ns);
        if !fresh {
            let at_ns = monotonic_ns();
            let readable = self.hotspot.method(method_ptr);
            if self.methods.len() >= MAX_METHODS {
                self.methods.clear();
            }
            let read = self.methods.entry(method_ptr).or_default();
            read.at_ns = at_ns;
            read.readable = readable.is_some();
            if readable.is_some() {
                read.name = readable;
            }
        }
        let read = &self.methods[&method_ptr];
        // An unreadable Method* is named only in the last samples of a JVM that has ended: its
        // memory is gone, but nothing can have reused its Methods since they were last read.
        match &read.name {
            Some(name) if read.readable || !discovery::alive(self.hotspot.pid()) => {
                Some(name.clone())
            }
            _ => None,
        }
    }
}

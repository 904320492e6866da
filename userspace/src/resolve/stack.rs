//! The Java frames of the sample being resolved, and where a virtual thread's stack begins on its
//! carrier's.

use joularcode_core::branch::{Branches, FrameId, UNKNOWN};

/// The Java frames of the sample being resolved, newest first.
#[derive(Debug, Default)]
pub(super) struct Stack {
    pub(super) ids: Vec<FrameId>,
    /// The stack has reached its oldest frame: the start of a virtual thread. The older frames
    /// are its carrier's, not part of it.
    pub(super) complete: bool,
}

impl Stack {
    pub(super) fn clear(&mut self) {
        self.ids.clear();
        self.complete = false;
    }

    /// Completes the stack of a virtual thread whose older frames are frozen in its stack chunk
    /// (see [`returns_to_barrier`]): they are `[unknown]`, and its oldest frame is
    /// `java.lang.VirtualThread.run`, as for every virtual thread.
    pub(super) fn frozen(&mut self, branches: &mut Branches) {
        if self.complete {
            return;
        }
        self.ids.push(branches.jvm_frame(UNKNOWN));
        self.ids
            .push(branches.frame(VIRTUAL_THREAD_RUN.0, VIRTUAL_THREAD_RUN.1));
        self.complete = true;
    }

    /// Adds the next older frame, unless the stack is complete; a virtual thread's boundary
    /// completes it.
    pub(super) fn push(&mut self, branches: &mut Branches, class: &str, method: &str) {
        if self.complete {
            return;
        }
        match Boundary::of(class, method) {
            Some(Boundary::First) => {
                self.ids.push(branches.frame(class, method));
                self.complete = true;
            }
            Some(Boundary::Below) => self.complete = true,
            None => self.ids.push(branches.frame(class, method)),
        }
    }
}

/// Where a virtual thread's stack begins, on its carrier thread's stack.
///
/// A carrier thread (a ForkJoinPool worker) runs a virtual thread through its continuation:
/// `...ForkJoinWorkerThread.run;...;jdk.internal.vm.Continuation.run` (the carrier's frames),
/// then `Continuation.enterSpecial;Continuation.enter;Continuation.enter0;
/// java.lang.VirtualThread$VThreadContinuation$1.run` (the continuation's entry, frames that
/// Java's own stack traces hide), then `java.lang.VirtualThread.run` and the virtual thread's own
/// code. The branch is the virtual thread's stack, from `VirtualThread.run` on, as
/// `Thread.getStackTrace` shows it and as JFR samples it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Boundary {
    /// The oldest frame of a virtual thread's stack: it is kept, the older ones are not.
    First,
    /// A frame of the continuation's entry, met when `VirtualThread.run` was not (compiled into
    /// one of them and named by the outer method only): it and the older frames are left out.
    Below,
}

/// The oldest frame of every virtual thread's stack: `java.lang.VirtualThread.run`.
const VIRTUAL_THREAD_RUN: (&str, &str) = ("java.lang.VirtualThread", "run");

impl Boundary {
    fn of(class: &str, method: &str) -> Option<Boundary> {
        match (class, method) {
            VIRTUAL_THREAD_RUN => Some(Boundary::First),
            ("java.lang.VirtualThread$VThreadContinuation$1", "run")
            | ("jdk.internal.vm.Continuation", "enter0" | "enter" | "enterSpecial") => {
                Some(Boundary::Below)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The branch name of `frames` (newest first) pushed onto a stack, and whether it completed;
    /// `frozen` stands for a return into the continuation's return barrier.
    fn stack_of(frames: &[&str]) -> (String, bool) {
        let mut branches = Branches::default();
        let mut stack = Stack::default();
        for &name in frames {
            if name == "frozen" {
                stack.frozen(&mut branches);
            } else {
                let (class, method) = name.rsplit_once('.').expect("class.method");
                stack.push(&mut branches, class, method);
            }
        }
        stack.ids.reverse();
        let branch = branches.branch(&stack.ids);
        (branches.name(branch).to_string(), stack.complete)
    }

    const CARRIER: [&str; 3] = [
        "jdk.internal.vm.Continuation.run",
        "java.lang.VirtualThread.runContinuation",
        "java.util.concurrent.ForkJoinWorkerThread.run",
    ];

    #[test]
    fn a_virtual_thread_is_its_own_stack_from_its_run_method() {
        let mut frames = vec![
            "T.alpha",
            "T$$Lambda/0x10.run",
            "java.lang.Thread.runWith",
            "java.lang.VirtualThread.run",
            "java.lang.VirtualThread$VThreadContinuation$1.run",
            "jdk.internal.vm.Continuation.enter0",
            "jdk.internal.vm.Continuation.enter",
            "jdk.internal.vm.Continuation.enterSpecial",
        ];
        frames.extend(CARRIER);
        assert_eq!(
            stack_of(&frames),
            (
                "java.lang.VirtualThread.run;java.lang.Thread.runWith;T$$Lambda/0x10.run;T.alpha"
                    .to_string(),
                true
            )
        );
        // VirtualThread.run compiled into its caller and named by the outer method only.
        assert_eq!(
            stack_of(&[
                "T.alpha",
                "java.lang.VirtualThread$VThreadContinuation$1.run",
                CARRIER[0]
            ]),
            ("T.alpha".to_string(), true)
        );
        // Mounted again, its older frames still frozen in its stack chunk.
        let mut thawed = vec!["T.beta", "T.lambda$main$0", "frozen"];
        thawed.extend(CARRIER);
        assert_eq!(
            stack_of(&thawed),
            (
                "java.lang.VirtualThread.run;[unknown];T.lambda$main$0;T.beta".to_string(),
                true
            )
        );
    }

    #[test]
    fn a_platform_thread_keeps_every_frame() {
        let frames = ["T.work", "java.lang.Thread.run"];
        assert_eq!(
            stack_of(&frames),
            ("java.lang.Thread.run;T.work".to_string(), false)
        );
        // The carrier's own frames, when it runs no virtual thread.
        assert_eq!(
            stack_of(&CARRIER),
            (
                "java.util.concurrent.ForkJoinWorkerThread.run;java.lang.VirtualThread.runContinuation;jdk.internal.vm.Continuation.run"
                    .to_string(),
                false
            )
        );
    }
}

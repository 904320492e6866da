//! Stack samples as branches: each jmethodID is named once through JVMTI (`package.Class.method`,
//! as Joular names it) and interned in core's [`Branches`]; a stack of method ids, newest frame
//! first as the JVM gives it, becomes the branch of its frames oldest first.
//!
//! A jmethodID stays valid, and names the same method, for as long as its class is loaded; the
//! samples are named within a few milliseconds of being taken, so a method is named before its
//! class can be unloaded. A method that cannot be named any more is `[unknown]`.

use std::collections::HashMap;

use joularcode_core::branch::{BranchId, Branches, FrameId, UNKNOWN};

use crate::jvmti::{Env, JmethodId};

/// The branches of one JVM, and the names of the methods seen.
pub struct Frames {
    env: Env,
    names: HashMap<usize, FrameId>,
    /// The branches seen, with their names in the all file and the app file.
    pub branches: Branches,
    /// Reused for each stack.
    stack: Vec<FrameId>,
}

impl Frames {
    /// No branch yet; application names keep the frames matching one of `prefixes`.
    pub fn new(env: Env, prefixes: &[String]) -> Frames {
        Frames {
            env,
            names: HashMap::new(),
            branches: Branches::new(prefixes),
            stack: Vec::new(),
        }
    }

    /// The frame of `method`, named on first sight.
    ///
    /// # Safety
    /// `method` is null or a method id the JVM gave (it may belong to an unloaded class).
    unsafe fn frame(&mut self, method: JmethodId) -> FrameId {
        if let Some(&frame) = self.names.get(&(method as usize)) {
            return frame;
        }
        let frame = match (!method.is_null()).then(|| self.env.method_names(method)) {
            Some((Some(class), Some(name))) => self.branches.frame(&class, &name),
            _ => self.branches.jvm_frame(UNKNOWN),
        };
        self.names.insert(method as usize, frame);
        frame
    }

    /// The branch of a stack given newest frame first.
    ///
    /// # Safety
    /// Each method is null or a method id the JVM gave.
    pub unsafe fn branch(
        &mut self,
        newest_first: impl DoubleEndedIterator<Item = JmethodId>,
    ) -> BranchId {
        let mut stack = std::mem::take(&mut self.stack);
        stack.clear();
        for method in newest_first.rev() {
            stack.push(self.frame(method));
        }
        let branch = self.branches.branch(&stack);
        self.stack = stack;
        branch
    }

    /// The branch of one pseudo-frame, such as `[GC]` or `[unknown]`.
    pub fn pseudo(&mut self, name: &str) -> BranchId {
        let frame = self.branches.jvm_frame(name);
        self.branches.branch(&[frame])
    }
}

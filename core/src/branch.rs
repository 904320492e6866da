//! Java execution branches: the methods on a thread's stack, oldest first, named as Joular Code
//! for Java names them (`java.lang.Thread.run;com.app.Main.run`).
//!
//! Identity is the sequence of (class, method) of the frames: line numbers are not part of a
//! [`Frame`] at all, so samples on different lines of the same methods add up. The JVM's own work
//! (garbage collection, JIT compilation, the VM thread) has no Java frame; it is shown by
//! pseudo-frames such as [`GC`] (`[GC]`), which are never part of the application's name.
//!
//! [`Branches`] interns frames and stacks, so that counting a sample of a stack already seen looks
//! up a hash table and allocates nothing; names are built once, when a stack is first seen.

use hashbrown::{Equivalent, HashMap};

/// Pseudo-frame of the garbage collector's threads.
pub const GC: &str = "[GC]";
/// Pseudo-frame of the JIT compiler threads.
pub const JIT_COMPILER: &str = "[JIT compiler]";
/// Pseudo-frame of the VM thread and the JVM's other service threads.
pub const VM: &str = "[VM]";
/// Pseudo-frame of code that could not be named.
pub const UNKNOWN: &str = "[unknown]";

/// One frame of a stack: a Java method, or a pseudo-frame standing for the JVM's own work.
///
/// A Java method is its class's binary name (`java.lang.Thread`, see [`crate::names`]) and its
/// method name. A pseudo-frame has an empty class and a bracketed name (`[GC]`) as its method.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    class: Box<str>,
    method: Box<str>,
}

/// A frame borrowed from the caller, to look an interned [`Frame`] up without allocating.
/// Its fields are in the same order as [`Frame`]'s, so both hash alike.
#[derive(Hash)]
struct FrameRef<'a> {
    class: &'a str,
    method: &'a str,
}

impl Equivalent<Frame> for FrameRef<'_> {
    fn equivalent(&self, frame: &Frame) -> bool {
        *self.class == *frame.class && *self.method == *frame.method
    }
}

impl Frame {
    /// A Java method: `class` is the binary name (`java.lang.Thread`), `method` the method name.
    pub fn java(class: &str, method: &str) -> Frame {
        Frame {
            class: class.into(),
            method: method.into(),
        }
    }

    /// A pseudo-frame of the JVM's own work, such as [`GC`] or [`JIT_COMPILER`].
    pub fn jvm(name: &str) -> Frame {
        Frame::java("", name)
    }

    /// The class's binary name, empty for a pseudo-frame.
    pub fn class(&self) -> &str {
        &self.class
    }

    /// The method's name, or the pseudo-frame's bracketed name.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// Whether this is a pseudo-frame of the JVM's own work rather than a Java method.
    pub fn is_jvm(&self) -> bool {
        self.class.is_empty()
    }

    /// Whether `className + "." + methodName` starts with `prefix`, as plain text (`com.example`
    /// also matches `com.examples`). A pseudo-frame never matches.
    pub fn matches(&self, prefix: &str) -> bool {
        if self.is_jvm() {
            return false;
        }
        if prefix.len() <= self.class.len() {
            // The prefix ends inside the class name, or exactly at its end
            return self.class.starts_with(prefix);
        }
        prefix
            .strip_prefix(&*self.class)
            .and_then(|rest| rest.strip_prefix('.'))
            .is_some_and(|in_method| self.method.starts_with(in_method))
    }

    /// Appends the frame's name: `class.method`, or the pseudo-frame's name alone.
    fn push_name(&self, out: &mut String) {
        if !self.is_jvm() {
            out.push_str(&self.class);
            out.push('.');
        }
        out.push_str(&self.method);
    }
}

/// An interned frame, valid in the [`Branches`] that gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameId(u32);

/// An interned branch (a stack of frames), valid in the [`Branches`] that gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BranchId(u32);

/// An interned application name (the app file's branch), valid in the [`Branches`] that gave it.
/// Several branches share one when they differ only in frames that no prefix matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppBranchId(u32);

/// What is known of an interned frame.
#[derive(Debug)]
struct FrameEntry {
    frame: Frame,
    /// Whether the frame belongs in application names.
    app: bool,
}

/// What is known of an interned branch.
#[derive(Debug)]
struct BranchEntry {
    frames: Box<[FrameId]>,
    name: Box<str>,
    app: Option<AppBranchId>,
}

/// The frames and branches seen so far, with their names in the all file and in the app file.
///
/// The application's name of a branch keeps only the Java frames whose `class.method` starts with
/// one of the `methods-filtering-prefix` prefixes, oldest first, so that JDK frames called by an
/// application method collapse onto it. With no prefixes it keeps every Java frame. Pseudo-frames
/// are never kept, and a branch that keeps no frame has no application name.
#[derive(Debug, Default)]
pub struct Branches {
    prefixes: Vec<String>,
    frames: Vec<FrameEntry>,
    frame_ids: HashMap<Frame, FrameId>,
    branches: Vec<BranchEntry>,
    branch_ids: HashMap<Box<[FrameId]>, BranchId>,
    app_names: Vec<Box<str>>,
    app_ids: HashMap<Box<str>, AppBranchId>,
}

/// The next id of a table of `len` entries. Ids are u32 to keep stacks small; four billion
/// distinct frames or branches would exhaust memory long before.
fn next_id(len: usize) -> u32 {
    u32::try_from(len).expect("fewer than 2^32 interned frames and branches")
}

impl Branches {
    /// An empty table whose application names keep the frames matching one of `prefixes`.
    /// Empty prefixes are ignored (they would match everything).
    pub fn new<S: AsRef<str>>(prefixes: &[S]) -> Branches {
        Branches {
            prefixes: prefixes
                .iter()
                .map(|p| p.as_ref().to_string())
                .filter(|p| !p.is_empty())
                .collect(),
            ..Branches::default()
        }
    }

    /// The id of the Java method `class.method`, interned on first sight.
    pub fn frame(&mut self, class: &str, method: &str) -> FrameId {
        if let Some(&id) = self.frame_ids.get(&FrameRef { class, method }) {
            return id;
        }
        let frame = Frame::java(class, method);
        let app = !frame.is_jvm()
            && (self.prefixes.is_empty() || self.prefixes.iter().any(|p| frame.matches(p)));
        let id = FrameId(next_id(self.frames.len()));
        self.frames.push(FrameEntry {
            frame: frame.clone(),
            app,
        });
        self.frame_ids.insert(frame, id);
        id
    }

    /// The id of a pseudo-frame of the JVM's own work, such as [`GC`].
    pub fn jvm_frame(&mut self, name: &str) -> FrameId {
        self.frame("", name)
    }

    /// The id of the branch made of `frames`, oldest first, interned on first sight. For a stack
    /// already seen this allocates nothing.
    ///
    /// # Panics
    /// If a frame id comes from another table.
    pub fn branch(&mut self, frames: &[FrameId]) -> BranchId {
        if let Some(&id) = self.branch_ids.get(frames) {
            return id;
        }
        let name = self.join(frames, false);
        let app_name = self.join(frames, true);
        let app = (!app_name.is_empty()).then(|| self.app_id(app_name));
        let id = BranchId(next_id(self.branches.len()));
        let frames: Box<[FrameId]> = frames.into();
        self.branches.push(BranchEntry {
            frames: frames.clone(),
            name: name.into(),
            app,
        });
        self.branch_ids.insert(frames, id);
        id
    }

    fn app_id(&mut self, name: String) -> AppBranchId {
        if let Some(&id) = self.app_ids.get(name.as_str()) {
            return id;
        }
        let id = AppBranchId(next_id(self.app_names.len()));
        let name: Box<str> = name.into();
        self.app_names.push(name.clone());
        self.app_ids.insert(name, id);
        id
    }

    /// The frames' names joined by `;`, only those of the application when `app_only`.
    fn join(&self, frames: &[FrameId], app_only: bool) -> String {
        let mut name = String::new();
        for entry in frames.iter().map(|id| &self.frames[id.0 as usize]) {
            if app_only && !entry.app {
                continue;
            }
            if !name.is_empty() {
                name.push(';');
            }
            entry.frame.push_name(&mut name);
        }
        name
    }

    /// The branch's name in the all file: every frame, oldest first, joined by `;`.
    pub fn name(&self, branch: BranchId) -> &str {
        &self.branches[branch.0 as usize].name
    }

    /// The branch's application name, if any of its frames belongs to the application.
    pub fn app(&self, branch: BranchId) -> Option<AppBranchId> {
        self.branches[branch.0 as usize].app
    }

    /// The name of an application branch in the app file.
    pub fn app_name(&self, app: AppBranchId) -> &str {
        &self.app_names[app.0 as usize]
    }

    /// The frames of a branch, oldest first.
    pub fn frames(&self, branch: BranchId) -> impl Iterator<Item = &Frame> + '_ {
        self.branches[branch.0 as usize]
            .frames
            .iter()
            .map(|id| &self.frames[id.0 as usize].frame)
    }

    /// How many distinct branches were seen.
    pub fn len(&self) -> usize {
        self.branches.len()
    }

    /// Whether no branch was seen yet.
    pub fn is_empty(&self) -> bool {
        self.branches.is_empty()
    }
}

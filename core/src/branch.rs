//! Java execution branches: the methods on a thread's stack, oldest first, named as Joular Code
//! for Java names them (`java.lang.Thread.run;com.app.Main.run`).
//!
//! Identity is the sequence of (class, method) of the frames: line numbers are not part of a
//! [`Frame`] at all, so samples on different lines of the same methods add up. The JVM's own work
//! (garbage collection, JIT compilation, the VM thread) has no Java frame; it is shown by
//! pseudo-frames such as [`GC`] (`[GC]`), which are never part of the application's name.
//!
//! [`Branches`] interns frames and stacks, so that counting a sample of a stack already seen looks
//! up a hash table and allocates nothing; a name is built once, when it is first asked for.

use std::hash::BuildHasher;
use std::sync::OnceLock;

use hashbrown::{DefaultHashBuilder, Equivalent, HashMap, HashTable};

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

/// Interned sequences of frames (the branches, or the application branches), each with its
/// name built the first time it is asked for: the per-sample path never builds one.
#[derive(Debug, Default)]
struct Stacks {
    entries: Vec<Stack>,
    /// Indexes into `entries`, hashed by their frames, so each stack is stored once.
    ids: HashTable<u32>,
    hasher: DefaultHashBuilder,
}

#[derive(Debug)]
struct Stack {
    frames: Box<[FrameId]>,
    name: OnceLock<Box<str>>,
}

impl Stacks {
    /// The index of `frames`, and whether it is new.
    fn intern(&mut self, frames: &[FrameId]) -> (u32, bool) {
        let hash = self.hasher.hash_one(frames);
        let entries = &self.entries;
        if let Some(&index) = self
            .ids
            .find(hash, |&index| *entries[index as usize].frames == *frames)
        {
            return (index, false);
        }
        let index = next_id(self.entries.len());
        self.entries.push(Stack {
            frames: frames.into(),
            name: OnceLock::new(),
        });
        let (entries, hasher) = (&self.entries, &self.hasher);
        self.ids.insert_unique(hash, index, |&index| {
            hasher.hash_one(&*entries[index as usize].frames)
        });
        (index, true)
    }

    fn frames(&self, index: u32) -> &[FrameId] {
        &self.entries[index as usize].frames
    }

    /// The stack's frames' names joined by `;`, oldest first.
    fn name<'a>(&'a self, index: u32, frames: &[FrameEntry]) -> &'a str {
        let stack = &self.entries[index as usize];
        stack.name.get_or_init(|| {
            let mut name = String::new();
            for (i, id) in stack.frames.iter().enumerate() {
                if i > 0 {
                    name.push(';');
                }
                frames[id.0 as usize].frame.push_name(&mut name);
            }
            name.into()
        })
    }
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
    branches: Stacks,
    /// The application branch of each branch, by branch index.
    branch_apps: Vec<Option<AppBranchId>>,
    /// The application branches: the application frames of branches.
    apps: Stacks,
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
        let (index, new) = self.branches.intern(frames);
        if new {
            let app_frames: Vec<FrameId> = frames
                .iter()
                .copied()
                .filter(|id| self.frames[id.0 as usize].app)
                .collect();
            let app =
                (!app_frames.is_empty()).then(|| AppBranchId(self.apps.intern(&app_frames).0));
            self.branch_apps.push(app);
        }
        BranchId(index)
    }

    /// The branch's name in the all file: every frame, oldest first, joined by `;`.
    pub fn name(&self, branch: BranchId) -> &str {
        self.branches.name(branch.0, &self.frames)
    }

    /// The branch's application branch, if any of its frames belongs to the application.
    pub fn app(&self, branch: BranchId) -> Option<AppBranchId> {
        self.branch_apps[branch.0 as usize]
    }

    /// The name of an application branch in the app file: its frames, oldest first, joined by `;`.
    pub fn app_name(&self, app: AppBranchId) -> &str {
        self.apps.name(app.0, &self.frames)
    }

    /// The frames of a branch, oldest first.
    pub fn frames(&self, branch: BranchId) -> impl Iterator<Item = &Frame> + '_ {
        self.branches
            .frames(branch.0)
            .iter()
            .map(|id| &self.frames[id.0 as usize].frame)
    }

    /// Whether the branch has no frame at all (an empty stack).
    pub fn is_empty_stack(&self, branch: BranchId) -> bool {
        self.branches.frames(branch.0).is_empty()
    }

    /// How many distinct branches were seen.
    pub fn len(&self) -> usize {
        self.branch_apps.len()
    }

    /// Whether no branch was seen yet.
    pub fn is_empty(&self) -> bool {
        self.branch_apps.is_empty()
    }
}

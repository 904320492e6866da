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
//!
//! Names are bounded: a frame's class and method as [`crate::names`] cuts them, a branch's name
//! at most [`MAX_BRANCH_FRAMES`] frames and [`MAX_BRANCH_BYTES`] bytes ([`bounded_branch_name`]).
//! The sampler walks 256 native frames at most and HotSpot inlines 15 levels deep at most;
//! stacks of servers and compilers are a few hundred frames of under 100 bytes each, well within
//! the bounds, so only a stack of names made to be long is ever cut.

use std::borrow::Cow;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use hashbrown::{DefaultHashBuilder, Equivalent, HashMap, HashTable};

use crate::names::{cut, short_hash, CUT_MARK, MAX_CLASS_NAME_BYTES, MAX_METHOD_NAME_BYTES};

/// The most frames a branch's name shows.
pub const MAX_BRANCH_FRAMES: usize = 1024;
/// The longest branch name, in bytes.
pub const MAX_BRANCH_BYTES: usize = 32 * 1024;

/// Pseudo-frame of the garbage collector's threads.
pub const GC: &str = "[GC]";
/// Pseudo-frame of the JIT compiler threads.
pub const JIT_COMPILER: &str = "[JIT compiler]";
/// Pseudo-frame of the VM thread and the JVM's other service threads.
pub const VM: &str = "[VM]";
/// Pseudo-frame of code that could not be named.
pub const UNKNOWN: &str = "[unknown]";
/// Pseudo-frame of the branch that stands for every branch a full table could not take
/// ([`Branches::with_limit`]).
pub const OTHER: &str = "[other]";

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
    /// The index of `frames`, and whether it is new; `None` when it is new and `may_add` is
    /// false.
    fn intern(&mut self, frames: &[FrameId], may_add: bool) -> Option<(u32, bool)> {
        let hash = self.hasher.hash_one(frames);
        let entries = &self.entries;
        if let Some(&index) = self
            .ids
            .find(hash, |&index| *entries[index as usize].frames == *frames)
        {
            return Some((index, false));
        }
        if !may_add {
            return None;
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
        Some((index, true))
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
            match bounded_branch_name(&name, MAX_BRANCH_FRAMES, MAX_BRANCH_BYTES) {
                Cow::Borrowed(_) => name.into(),
                Cow::Owned(cut) => cut.into(),
            }
        })
    }
}

/// `branch` (frame names joined by `;`, oldest first) if it has at most `max_frames` frames and
/// `max_bytes` bytes (at least 2 × [`crate::names::CUT_BYTES`]); else [`CUT_MARK`] and the [`short_hash`] of the
/// whole as its first frame, then its newest frames, as many as fit: the frames where branches
/// differ and energy is spent. Two long branches stay two, a branch is always cut the same way,
/// and one cut is not cut again. A newest frame alone longer than the room left is itself cut.
pub fn bounded_branch_name(branch: &str, max_frames: usize, max_bytes: usize) -> Cow<'_, str> {
    let frames = branch.split(';').count();
    if frames <= max_frames && branch.len() <= max_bytes {
        return Cow::Borrowed(branch);
    }
    let mut out = format!("{CUT_MARK}{}", short_hash(branch.as_bytes()));
    let room = max_bytes.saturating_sub(out.len() + 1);
    let start = branch
        .rmatch_indices(';')
        .take(max_frames.saturating_sub(1))
        .map(|(at, _)| at + 1)
        .take_while(|&start| branch.len() - start <= room)
        .last()
        .unwrap_or(branch.len());
    out.push(';');
    if start == branch.len() {
        let newest = branch.rsplit(';').next().unwrap_or(branch);
        out.push_str(&cut(newest, room));
    } else {
        out.push_str(&branch[start..]);
    }
    Cow::Owned(out)
}

/// The frames and branches seen so far, with their names in the all file and in the app file.
///
/// The application's name of a branch keeps only the Java frames whose `class.method` starts with
/// one of the `methods-filtering-prefix` prefixes, oldest first, so that JDK frames called by an
/// application method collapse onto it. With no prefixes it keeps every Java frame. Pseudo-frames
/// are never kept, and a branch that keeps no frame has no application name.
#[derive(Debug)]
pub struct Branches {
    /// This table's identity ([`Branches::table_id`]).
    table: u64,
    prefixes: Vec<String>,
    frames: Vec<FrameEntry>,
    frame_ids: HashMap<Frame, FrameId>,
    branches: Stacks,
    /// The application branch of each branch, by branch index.
    branch_apps: Vec<Option<AppBranchId>>,
    /// The application branches: the application frames of branches.
    apps: Stacks,
    /// The most distinct branches the table takes ([`Branches::with_limit`]).
    limit: Option<usize>,
}

/// The identity of the last table made ([`Branches::table_id`]).
static LAST_TABLE: AtomicU64 = AtomicU64::new(0);

impl Default for Branches {
    /// An empty table, with no prefixes and no limit.
    fn default() -> Branches {
        Branches {
            table: LAST_TABLE.fetch_add(1, Ordering::Relaxed) + 1,
            prefixes: Vec::new(),
            frames: Vec::new(),
            frame_ids: HashMap::default(),
            branches: Stacks::default(),
            branch_apps: Vec::new(),
            apps: Stacks::default(),
            limit: None,
        }
    }
}

/// How many distinct frames a table limited to `branches` branches takes: a branch has several
/// frames, and most frames are shared by many branches.
const FRAMES_PER_BRANCH: usize = 4;

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

    /// A table as [`Branches::new`] gives, that takes at most `limit` distinct branches (and
    /// `4 × limit` distinct frames): the stacks it cannot take are all the one branch
    /// `[other]` ([`OTHER`]), the frames it cannot take `[other]` frames. Memory stays bounded
    /// whatever the stacks a program runs; [`Branches::retain`] makes room again.
    pub fn with_limit<S: AsRef<str>>(prefixes: &[S], limit: usize) -> Branches {
        Branches {
            limit: Some(limit.max(1)),
            ..Branches::new(prefixes)
        }
    }

    /// The id of the Java method `class.method`, interned on first sight. Names beyond
    /// [`MAX_CLASS_NAME_BYTES`] and [`MAX_METHOD_NAME_BYTES`] are cut as [`crate::names`] cuts
    /// them (the readers of names cut them already, once per method).
    pub fn frame(&mut self, class: &str, method: &str) -> FrameId {
        if class.len() > MAX_CLASS_NAME_BYTES || method.len() > MAX_METHOD_NAME_BYTES {
            return self.frame(
                &cut(class, MAX_CLASS_NAME_BYTES),
                &cut(method, MAX_METHOD_NAME_BYTES),
            );
        }
        if let Some(&id) = self.frame_ids.get(&FrameRef { class, method }) {
            return id;
        }
        if self
            .limit
            .is_some_and(|limit| self.frames.len() >= limit.saturating_mul(FRAMES_PER_BRANCH))
            && !(class.is_empty() && method == OTHER)
        {
            return self.frame("", OTHER);
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
        let full = self.limit.is_some_and(|limit| self.len() >= limit);
        let Some((index, new)) = self.branches.intern(frames, !full) else {
            let other = self.jvm_frame(OTHER);
            return self.other_branch(other);
        };
        if new {
            let app_frames: Vec<FrameId> = frames
                .iter()
                .copied()
                .filter(|id| self.frames[id.0 as usize].app)
                .collect();
            let app = (!app_frames.is_empty()).then(|| {
                let (app, _) = self.apps.intern(&app_frames, true).unwrap_or_default();
                AppBranchId(app)
            });
            self.branch_apps.push(app);
        }
        BranchId(index)
    }

    /// The `[other]` branch of a full table: interned beyond the limit, once.
    fn other_branch(&mut self, other: FrameId) -> BranchId {
        let (index, new) = self.branches.intern(&[other], true).unwrap_or_default();
        if new {
            self.branch_apps.push(None);
        }
        BranchId(index)
    }

    /// A new table holding the branches `keep` keeps (with their frames), and where each
    /// branch of this table went in it: the way to free the branches of a long run that are not
    /// seen any more. The ids of this table mean nothing in the new one: map them with the
    /// [`Remap`].
    pub fn retain(&self, mut keep: impl FnMut(BranchId) -> bool) -> (Branches, Remap) {
        let mut kept = Branches {
            prefixes: self.prefixes.clone(),
            limit: self.limit,
            ..Branches::default()
        };
        let mut ids = Vec::with_capacity(self.len());
        let mut frames = Vec::new();
        for index in 0..self.len() {
            let branch = BranchId(next_id(index));
            if !keep(branch) {
                ids.push(None);
                continue;
            }
            frames.clear();
            frames.extend(
                self.frames(branch)
                    .map(|frame| kept.frame(frame.class(), frame.method())),
            );
            ids.push(Some(kept.branch(&frames)));
        }
        (kept, Remap { ids })
    }

    /// The identity of this table, unique in the process: a branch id names the same branch in
    /// every table of the same identity, so what is worked out from a branch's name can be kept
    /// by (identity, id). A table made by [`Branches::retain`] has a new identity.
    pub fn table_id(&self) -> u64 {
        self.table
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

/// Where the branches of a table went in the table [`Branches::retain`] made of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remap {
    ids: Vec<Option<BranchId>>,
}

impl Remap {
    /// The id in the new table of `branch` of the old one; `None` if it was dropped.
    pub fn get(&self, branch: BranchId) -> Option<BranchId> {
        self.ids.get(branch.0 as usize).copied().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_table_folds_new_stacks_into_other() {
        let mut branches = Branches::with_limit::<&str>(&[], 2);
        let frames: Vec<FrameId> = (0..4)
            .map(|i| branches.frame("a.B", &format!("m{i}")))
            .collect();
        let first = branches.branch(&frames[..1]);
        let second = branches.branch(&frames[..2]);
        let third = branches.branch(&frames[..3]);
        assert_eq!(branches.name(third), OTHER);
        assert_eq!(branches.branch(&frames[..4]), third, "one [other] branch");
        assert_eq!(
            branches.branch(&frames[..1]),
            first,
            "known stacks still count"
        );
        assert_eq!(branches.name(second), "a.B.m0;a.B.m1");
        assert_eq!(branches.app(third), None);
        assert_eq!(branches.len(), 3);
        // 2 branches take at most 8 frames: later frames are [other].
        let many: Vec<FrameId> = (0..20)
            .map(|i| branches.frame("c.D", &format!("n{i}")))
            .collect();
        assert_eq!(branches.frames.len(), 8, "[other] among them");
        assert_eq!(many[19], branches.jvm_frame(OTHER));
    }

    #[test]
    fn branch_names_are_bounded_and_long_ones_stay_apart() {
        let mut branches = Branches::new::<&str>(&[]);
        let long = |i: usize| format!("{i}{}", "m".repeat(65_000));
        let frames: Vec<FrameId> = (0..20)
            .map(|i| branches.frame(&"p.C".repeat(30_000), &long(i)))
            .collect();
        let frame = &branches.frames[frames[0].0 as usize].frame;
        assert!(frame.class().len() <= MAX_CLASS_NAME_BYTES);
        assert!(frame.method().len() <= MAX_METHOD_NAME_BYTES);
        assert_eq!(
            branches.frame(&"p.C".repeat(30_000), &long(0)),
            frames[0],
            "a long name is one frame"
        );
        let deep: Vec<FrameId> = (0..20).flat_map(|_| frames.iter().copied()).collect();
        let a = branches.branch(&deep);
        let b = branches.branch(&deep[1..]);
        let (name_a, name_b) = (branches.name(a).to_string(), branches.name(b).to_string());
        assert!(name_a.len() <= MAX_BRANCH_BYTES, "{}", name_a.len());
        assert!(name_a.starts_with(CUT_MARK));
        assert_ne!(name_a, name_b, "two long branches stay two");
        assert!(
            name_a.ends_with(branches.frames[frames[19].0 as usize].frame.method()),
            "the newest frames are kept"
        );

        let many: Vec<String> = (0..3000).map(|i| format!("a.B.m{i}")).collect();
        let joined = many.join(";");
        let cut = bounded_branch_name(&joined, MAX_BRANCH_FRAMES, MAX_BRANCH_BYTES);
        assert_eq!(cut.split(';').count(), MAX_BRANCH_FRAMES);
        assert!(cut.ends_with(";a.B.m2999"));
        assert_eq!(
            bounded_branch_name(&cut, MAX_BRANCH_FRAMES, MAX_BRANCH_BYTES),
            cut,
            "a cut branch is not cut again"
        );
        let normal = "java.lang.Thread.run;a.B.work";
        assert_eq!(bounded_branch_name(normal, 2, 1024), normal);
        // A newest frame longer than the room is itself cut.
        let one = format!("a.B.c;{}", "x".repeat(5000));
        let cut = bounded_branch_name(&one, 10, 1024);
        assert!(cut.len() <= 1024 && cut.split(';').count() == 2, "{cut}");
    }

    #[test]
    fn every_table_has_an_identity_of_its_own() {
        let one = Branches::new(&["a."]);
        let two = Branches::default();
        let (kept, _) = one.retain(|_| true);
        assert_ne!(one.table_id(), two.table_id());
        assert_ne!(one.table_id(), kept.table_id());
        assert_ne!(two.table_id(), kept.table_id());
    }

    #[test]
    fn retain_keeps_the_branches_asked_for_under_new_ids() {
        let mut branches = Branches::with_limit(&["app."], 3);
        let run = branches.frame("java.lang.Thread", "run");
        let work = branches.frame("app.A", "work");
        let old = branches.frame("app.Old", "gone");
        let a = branches.branch(&[run, work]);
        let b = branches.branch(&[run, old]);
        let c = branches.branch(&[work]);
        let (mut kept, remap) = branches.retain(|branch| branch != b);
        assert_eq!(remap.get(b), None);
        let (a2, c2) = (remap.get(a).expect("kept"), remap.get(c).expect("kept"));
        assert_eq!(kept.name(a2), "java.lang.Thread.run;app.A.work");
        assert_eq!(kept.name(c2), "app.A.work");
        assert_eq!(kept.app_name(kept.app(a2).expect("app")), "app.A.work");
        assert_eq!(kept.len(), 2);
        assert!(
            !kept.frame_ids.contains_key(&Frame::java("app.Old", "gone")),
            "its frames went with it"
        );
        // There is room again for a new branch.
        let new = kept.frame("app.New", "work");
        let n = kept.branch(&[new]);
        assert_eq!(kept.name(n), "app.New.work");
    }
}

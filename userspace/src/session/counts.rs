//! The samples of one JVM counted per thread and branch, each with the time it was taken, until a
//! cycle takes them ([`Counts::take_until`]): a pure type, tested without BPF.
//!
//! A sample stays timed while it is recent, so that a cycle takes exactly the samples taken up to
//! its end; once older than a bound ([`Counts::settle`]) it is kept as a count only, which bounds
//! the memory of a long run that takes its counts only at its end. With a [`BranchLimit`], the
//! branches whose samples were last taken long ago are dropped from the JVM's [`Branches`], and
//! the counts held move to the new ids.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use joularcode_core::branch::{BranchId, Branches};

/// Native frames (oldest first) under a branch, as `--native` shows them.
pub type NativeStack = Arc<[Arc<str>]>;

/// A bound on each JVM's branches, for a session that runs for weeks whatever the JVMs do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BranchLimit {
    /// The most distinct branches of a JVM: the stacks beyond are counted in one `[other]`
    /// branch ([`Branches::with_limit`]).
    pub max: usize,
    /// A branch whose samples were last taken this long ago is dropped (at the next take of the
    /// counts, once every quarter of this time, or at once when the table is full); it starts
    /// afresh if it comes back.
    pub idle: Duration,
}

/// One sample counted, until it is taken out or settles.
#[derive(Debug, Clone, Copy)]
struct Counted {
    /// When it was taken (CLOCK_MONOTONIC).
    time_ns: u64,
    tid: u32,
    branch: BranchId,
}

/// The samples of one JVM counted and not taken yet.
#[derive(Debug)]
pub struct Counts {
    /// Recent samples, with their times.
    counted: Vec<Counted>,
    /// Older samples, as counts by thread and branch.
    settled: HashMap<u32, HashMap<BranchId, u64>>,
    /// Samples by branch and native frames, when native frames are named.
    native: HashMap<(BranchId, NativeStack), u64>,
    /// With a [`BranchLimit`]: when each branch's samples were last taken, and when idle branches
    /// were last dropped.
    taken_at: HashMap<BranchId, Instant>,
    trimmed_at: Instant,
}

impl Counts {
    /// No sample yet; idle branches are first dropped `idle` after `now` (or when the table is
    /// full).
    pub fn new(now: Instant) -> Counts {
        Counts {
            counted: Vec::new(),
            settled: HashMap::new(),
            native: HashMap::new(),
            taken_at: HashMap::new(),
            trimmed_at: now,
        }
    }

    /// Counts one sample of thread `tid`, taken at `time_ns`, in `branch`; with `native`, also
    /// under its native frames.
    pub fn add(&mut self, time_ns: u64, tid: u32, branch: BranchId, native: Option<NativeStack>) {
        self.counted.push(Counted {
            time_ns,
            tid,
            branch,
        });
        if let Some(stack) = native {
            *self.native.entry((branch, stack)).or_insert(0) += 1;
        }
    }

    /// Keeps the samples taken before `before_ns` as counts only, without their times: the next
    /// take takes them whatever its time.
    pub fn settle(&mut self, before_ns: u64) {
        if !self
            .counted
            .iter()
            .any(|counted| counted.time_ns < before_ns)
        {
            return;
        }
        let (old, recent): (Vec<Counted>, Vec<Counted>) = std::mem::take(&mut self.counted)
            .into_iter()
            .partition(|counted| counted.time_ns < before_ns);
        self.counted = recent;
        for counted in old {
            *self
                .settled
                .entry(counted.tid)
                .or_default()
                .entry(counted.branch)
                .or_insert(0) += 1;
        }
    }

    /// Takes out the samples taken at or before `until_ns` (and those settled), by thread, then
    /// by branch; later ones stay for a later take.
    pub fn take_until(&mut self, until_ns: u64) -> HashMap<u32, HashMap<BranchId, u64>> {
        self.settle(until_ns.saturating_add(1));
        std::mem::take(&mut self.settled)
    }

    /// The threads with samples counted and not taken yet.
    pub fn threads_held(&self) -> HashSet<u32> {
        self.counted.iter().map(|counted| counted.tid).collect()
    }

    /// Takes out the samples counted by branch and native frames.
    pub fn take_native(&mut self) -> HashMap<(BranchId, NativeStack), u64> {
        std::mem::take(&mut self.native)
    }

    /// Notes that the samples of `branches` were taken at `now` (what [`Counts::drop_idle`]
    /// judges idleness by).
    pub fn taken(&mut self, branches: impl IntoIterator<Item = BranchId>, now: Instant) {
        for branch in branches {
            self.taken_at.insert(branch, now);
        }
    }

    /// Drops from `branches` those whose samples were last taken `limit.idle` ago or more, once
    /// per quarter of `limit.idle` (so no branch outlives 1.25 times it), or at once when the
    /// table is full; the branches of the samples held stay, and their counts move to the new
    /// ids.
    pub fn drop_idle(&mut self, branches: &mut Branches, limit: BranchLimit, now: Instant) {
        let full = branches.len() >= limit.max;
        if !full && now.duration_since(self.trimmed_at) < limit.idle / 4 {
            return;
        }
        self.trimmed_at = now;
        let mut keep: HashSet<BranchId> = self
            .taken_at
            .iter()
            .filter(|(_, &at)| now.duration_since(at) < limit.idle)
            .map(|(&branch, _)| branch)
            .collect();
        keep.extend(self.counted.iter().map(|counted| counted.branch));
        keep.extend(
            self.settled
                .values()
                .flat_map(|counts| counts.keys().copied()),
        );
        keep.extend(self.native.keys().map(|(branch, _)| *branch));
        if keep.len() >= branches.len() {
            return;
        }
        let (kept, remap) = branches.retain(|branch| keep.contains(&branch));
        *branches = kept;
        self.counted
            .retain_mut(|counted| match remap.get(counted.branch) {
                Some(branch) => {
                    counted.branch = branch;
                    true
                }
                None => false,
            });
        for counts in self.settled.values_mut() {
            *counts = std::mem::take(counts)
                .into_iter()
                .filter_map(|(branch, n)| Some((remap.get(branch)?, n)))
                .collect();
        }
        self.native = std::mem::take(&mut self.native)
            .into_iter()
            .filter_map(|((branch, stack), n)| Some(((remap.get(branch)?, stack), n)))
            .collect();
        self.taken_at = std::mem::take(&mut self.taken_at)
            .into_iter()
            .filter_map(|(branch, at)| Some((remap.get(branch)?, at)))
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn branches(names: &[&str]) -> (Branches, Vec<BranchId>) {
        let mut branches = Branches::new::<&str>(&[]);
        let ids = names
            .iter()
            .map(|name| {
                let frame = branches.frame("a.B", name);
                branches.branch(&[frame])
            })
            .collect();
        (branches, ids)
    }

    fn total(threads: &HashMap<u32, HashMap<BranchId, u64>>, tid: u32) -> u64 {
        threads.get(&tid).map_or(0, |counts| counts.values().sum())
    }

    #[test]
    fn samples_are_taken_up_to_a_time_and_the_later_ones_kept() {
        let (_, ids) = branches(&["x"]);
        let mut counts = Counts::new(Instant::now());
        for (tid, time_ns) in [(1, 100), (1, 200), (2, 150), (2, 300), (1, 250)] {
            counts.add(time_ns, tid, ids[0], None);
        }
        let first = counts.take_until(200);
        assert_eq!((total(&first, 1), total(&first, 2)), (2, 1));
        assert_eq!(counts.threads_held(), HashSet::from([1, 2]));
        let second = counts.take_until(250);
        assert_eq!((total(&second, 1), total(&second, 2)), (1, 0));
        assert_eq!(counts.threads_held(), HashSet::from([2]));
        let rest = counts.take_until(u64::MAX);
        assert_eq!((total(&rest, 1), total(&rest, 2)), (0, 1));
        assert!(counts.take_until(u64::MAX).is_empty());
        assert!(counts.threads_held().is_empty());
    }

    #[test]
    fn settled_samples_are_taken_whatever_the_time() {
        let (_, ids) = branches(&["x", "y"]);
        let mut counts = Counts::new(Instant::now());
        counts.add(100, 1, ids[0], None);
        counts.add(900, 1, ids[1], None);
        counts.settle(500);
        assert_eq!(counts.threads_held(), HashSet::from([1]), "900 stays timed");
        let taken = counts.take_until(0);
        assert_eq!(taken[&1], HashMap::from([(ids[0], 1)]));
        assert_eq!(counts.take_until(900)[&1], HashMap::from([(ids[1], 1)]));
    }

    #[test]
    fn native_stacks_are_counted_apart_and_taken_once() {
        let (_, ids) = branches(&["x"]);
        let mut counts = Counts::new(Instant::now());
        let stack: NativeStack = vec![Arc::from("libc.so`read")].into();
        counts.add(1, 1, ids[0], Some(stack.clone()));
        counts.add(2, 2, ids[0], Some(stack.clone()));
        counts.add(3, 2, ids[0], None);
        assert_eq!(counts.take_native(), HashMap::from([((ids[0], stack), 2)]));
        assert!(counts.take_native().is_empty());
        assert_eq!(
            total(&counts.take_until(3), 2),
            2,
            "counted as branches too"
        );
    }

    #[test]
    fn idle_branches_are_dropped_and_the_counts_held_keep_their_names() {
        let limit = BranchLimit {
            max: 3,
            idle: Duration::from_secs(60),
        };
        let now = Instant::now();
        let (mut branches, ids) = branches(&["old", "recent", "pending"]);
        let (old, recent, pending) = (ids[0], ids[1], ids[2]);
        let mut counts = Counts::new(now);
        counts.taken([old], now - Duration::from_secs(61));
        counts.taken([recent], now - Duration::from_secs(59));
        counts.add(5, 7, pending, None);
        counts.add(1, 8, recent, None);
        counts.add(2, 8, recent, None);
        counts.settle(3);
        counts.drop_idle(&mut branches, limit, now);
        assert_eq!(branches.len(), 2, "the full table dropped the idle branch");
        let names = |taken: &HashMap<BranchId, u64>| -> Vec<String> {
            taken
                .keys()
                .map(|&branch| branches.name(branch).to_string())
                .collect()
        };
        let taken = counts.take_until(u64::MAX);
        assert_eq!(names(&taken[&7]), ["a.B.pending"]);
        assert_eq!(names(&taken[&8]), ["a.B.recent"]);
        assert_eq!(taken[&8].values().sum::<u64>(), 2);
        assert_eq!(
            counts.taken_at.len(),
            1,
            "only the recent branch's time is kept"
        );
    }

    #[test]
    fn idle_branches_are_looked_for_every_quarter_of_the_idle_time_unless_the_table_is_full() {
        let limit = BranchLimit {
            max: 10,
            idle: Duration::from_secs(60),
        };
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let (mut branches, ids) = branches(&["a", "b"]);
        let mut counts = Counts::new(start);
        counts.taken(ids.iter().copied(), start);
        counts.drop_idle(&mut branches, limit, at(10));
        assert_eq!(
            branches.len(),
            2,
            "not 15 s since the start: nothing is looked at"
        );
        counts.taken([ids[0]], at(50));
        counts.drop_idle(&mut branches, limit, at(61));
        assert_eq!(branches.len(), 1, "b, taken 61 s ago, is dropped; a stays");
        counts.drop_idle(&mut branches, limit, at(100));
        assert_eq!(branches.len(), 1, "a, taken 50 s ago, stays");
        counts.drop_idle(&mut branches, limit, at(112));
        assert_eq!(
            branches.len(),
            1,
            "12 s since the last look: a is not looked at"
        );
        counts.drop_idle(&mut branches, limit, at(115));
        assert_eq!(branches.len(), 0, "a, taken 65 s ago, is dropped");
    }
}

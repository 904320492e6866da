//! The label values of a JVM's branches (the branch, its newest method, its entry point) and
//! whether it holds an `[unknown]` frame, worked out once per branch of the JVM's branch table
//! and kept by branch id ([`LabelCache`]), so that a cycle works out only those of the branches
//! it meets for the first time rather than those of every branch with energy.

use std::collections::HashMap;

use joularcode_core::branch::{BranchId, UNKNOWN};
use joularcode_core::entry::EntryRule;

use super::metrics::{branch_label, label};
use crate::profile::NO_ENTRY;

/// Branches whose labels are kept per JVM: the cache starts afresh beyond (a JVM whose branches
/// with energy are more than this in every cycle costs what it cost without the cache). Each
/// holds three labels of at most 1 KiB, a few hundred bytes in practice.
const MAX_KEPT: usize = 1024;

/// The label values of one branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchLabels {
    /// The branch's newest frame.
    pub method: String,
    /// The branch itself, bounded ([`branch_label`]).
    pub branch: String,
    /// Its entry point ([`EntryRule::find`]), or [`NO_ENTRY`].
    pub entry: String,
    /// Whether one of its frames is `[unknown]`.
    pub unknown: bool,
}

impl BranchLabels {
    /// The labels of the branch named `name` (frames oldest first, joined by `;`).
    pub fn of(name: &str, entries: &EntryRule) -> BranchLabels {
        BranchLabels {
            method: label(name.rsplit(';').next().unwrap_or(name)),
            branch: branch_label(name),
            entry: label(entries.find(name).map_or(NO_ENTRY, |entry| entry.method)),
            unknown: name.split(';').any(|frame| frame == UNKNOWN),
        }
    }
}

/// The labels of one JVM's branches, by id in one branch table (identified by
/// [`joularcode_core::branch::Branches::table_id`]: the ids of another table name other
/// branches, so a new table empties the cache).
#[derive(Debug, Default)]
pub struct LabelCache {
    table: u64,
    labels: HashMap<BranchId, BranchLabels>,
}

impl LabelCache {
    /// The labels of branch `id`, named `name`, of the table `table`: worked out on first sight.
    pub fn get(
        &mut self,
        table: u64,
        id: BranchId,
        name: &str,
        entries: &EntryRule,
    ) -> &BranchLabels {
        if self.table != table || (self.labels.len() >= MAX_KEPT && !self.labels.contains_key(&id))
        {
            self.table = table;
            self.labels.clear();
        }
        self.labels
            .entry(id)
            .or_insert_with(|| BranchLabels::of(name, entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use joularcode_core::branch::Branches;

    #[test]
    fn labels_are_kept_per_branch_of_one_table_and_bounded() {
        let rule = EntryRule::default();
        let mut branches = Branches::new(&["app."]);
        let run = branches.frame("java.lang.Thread", "run");
        let work = branches.frame("app.Work", "go");
        let unknown = branches.jvm_frame(UNKNOWN);
        let known = branches.branch(&[run, work]);
        let lost = branches.branch(&[run, unknown]);
        let mut cache = LabelCache::default();
        let table = branches.table_id();
        let labels = cache.get(table, known, branches.name(known), &rule).clone();
        assert_eq!(
            labels,
            BranchLabels::of("java.lang.Thread.run;app.Work.go", &rule)
        );
        assert_eq!(labels.method, "app.Work.go");
        assert!(!labels.unknown);
        assert!(cache.get(table, lost, branches.name(lost), &rule).unknown);
        // The id is what is kept: the name given again is not looked at.
        assert_eq!(cache.get(table, known, "other", &rule), &labels);
        // Another table's ids name other branches.
        let (kept, _) = branches.retain(|branch| branch == lost);
        let moved = cache.get(kept.table_id(), known, "x.Y.z", &rule);
        assert_eq!(moved.method, "x.Y.z");
        // Bounded: a full cache starts afresh.
        let mut many = Branches::default();
        for n in 0..MAX_KEPT + 10 {
            let frame = many.frame("a.B", &format!("m{n}"));
            let id = many.branch(&[frame]);
            cache.get(many.table_id(), id, many.name(id), &rule);
            assert!(cache.labels.len() <= MAX_KEPT);
        }
        assert_eq!(cache.labels.len(), 10);
    }
}

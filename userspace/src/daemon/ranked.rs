//! The energy counters of one JVM's methods or branches, of which only the top N are exported,
//! the rest in one "other" counter: bounded label cardinality whatever the JVM does.
//!
//! Every counter only grows, and the exported counters and "other" always add up to the JVM's
//! energy, so `rate()` and `sum()` mean what they say:
//! - energy of a name that is not exported goes to "other";
//! - a name exported from now on starts at 0 (its energy so far stays in "other");
//! - a name no longer exported hands its energy to "other", and its series goes.
//!
//! Names are ranked by their recent energy (halved every [`HALF_LIFE`]); a name takes the place
//! of the weakest exported one only when its recent energy is [`SWAP_FACTOR`] times larger, so
//! that two names of about the same energy do not swap back and forth. Names not seen for the
//! idle time given are forgotten.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The recent energy of a name halves over this time without energy.
pub const HALF_LIFE: Duration = Duration::from_secs(60);
/// How much more recent energy a name needs to take the place of an exported one.
pub const SWAP_FACTOR: f64 = 1.5;

/// One method or branch.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    /// Its exported counter, in J (0 while not exported).
    energy_j: f64,
    /// Its recent energy, in J, decayed.
    recent_j: f64,
    /// When it last had energy.
    seen: Instant,
    exported: bool,
}

/// The counters of one JVM's methods, or of its branches.
#[derive(Debug, Clone, Default)]
pub struct Ranked {
    entries: HashMap<String, Entry>,
    other_j: f64,
    decayed_at: Option<Instant>,
}

impl Ranked {
    /// Adds `joules` to `name` at `now`.
    pub fn add(&mut self, name: &str, joules: f64, now: Instant) {
        if joules.is_nan() || joules <= 0.0 {
            return;
        }
        let entry = match self.entries.get_mut(name) {
            Some(entry) => entry,
            None => self.entries.entry(name.to_string()).or_insert(Entry {
                energy_j: 0.0,
                recent_j: 0.0,
                seen: now,
                exported: false,
            }),
        };
        entry.recent_j += joules;
        entry.seen = now;
        if entry.exported {
            entry.energy_j += joules;
        } else {
            self.other_j += joules;
        }
    }

    /// After a cycle's [`Ranked::add`]s: decays the recent energies, chooses the `top` names
    /// exported, and forgets the names not exported that had no energy for `idle`.
    pub fn review(&mut self, top: usize, idle: Duration, now: Instant) {
        if let Some(at) = self.decayed_at {
            let halves = now.duration_since(at).as_secs_f64() / HALF_LIFE.as_secs_f64();
            let factor = 0.5f64.powf(halves);
            for entry in self.entries.values_mut() {
                entry.recent_j *= factor;
            }
        }
        self.decayed_at = Some(now);
        self.entries
            .retain(|_, entry| entry.exported || now.duration_since(entry.seen) < idle);

        let mut exported = self.entries.values().filter(|entry| entry.exported).count();
        loop {
            let strongest_out = self
                .entries
                .iter()
                .filter(|(_, entry)| !entry.exported)
                .max_by(|a, b| a.1.recent_j.total_cmp(&b.1.recent_j))
                .map(|(name, entry)| (name.clone(), entry.recent_j));
            let Some((name, recent)) = strongest_out else {
                break;
            };
            if exported >= top {
                let weakest_in = self
                    .entries
                    .iter()
                    .filter(|(_, entry)| entry.exported)
                    .min_by(|a, b| a.1.recent_j.total_cmp(&b.1.recent_j))
                    .map(|(name, entry)| (name.clone(), entry.recent_j));
                let Some((weakest, weakest_recent)) = weakest_in else {
                    break;
                };
                if recent <= weakest_recent * SWAP_FACTOR || top == 0 {
                    break;
                }
                if let Some(entry) = self.entries.get_mut(&weakest) {
                    self.other_j += entry.energy_j;
                    entry.energy_j = 0.0;
                    entry.exported = false;
                }
                exported -= 1;
            }
            if let Some(entry) = self.entries.get_mut(&name) {
                entry.exported = true;
            }
            exported += 1;
        }
    }

    /// The exported names and their energy in J, by name.
    pub fn exported(&self) -> Vec<(&str, f64)> {
        let mut exported: Vec<(&str, f64)> = self
            .entries
            .iter()
            .filter(|(_, entry)| entry.exported)
            .map(|(name, entry)| (name.as_str(), entry.energy_j))
            .collect();
        exported.sort_by(|a, b| a.0.cmp(b.0));
        exported
    }

    /// The energy of the names not exported, in J.
    pub fn other_j(&self) -> f64 {
        self.other_j
    }

    /// How many names are held (exported or not).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no name is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn total(ranked: &Ranked) -> f64 {
        ranked.exported().iter().map(|(_, j)| j).sum::<f64>() + ranked.other_j()
    }

    #[test]
    fn the_top_names_are_exported_and_the_rest_is_other() {
        let mut ranked = Ranked::default();
        let now = Instant::now();
        for (name, joules) in [("a", 5.0), ("b", 3.0), ("c", 1.0)] {
            ranked.add(name, joules, now);
        }
        ranked.review(2, HALF_LIFE, now);
        // Before the first review every name was in "other"; exported ones start at 0.
        assert_eq!(ranked.exported(), [("a", 0.0), ("b", 0.0)]);
        assert_eq!(ranked.other_j(), 9.0);
        ranked.add("a", 1.0, now);
        ranked.add("c", 2.0, now);
        ranked.review(2, HALF_LIFE, now);
        assert_eq!(
            ranked.exported(),
            [("a", 1.0), ("b", 0.0)],
            "c is not 1.5 × b yet"
        );
        assert_eq!(total(&ranked), 12.0);
    }

    #[test]
    fn counters_never_go_down_when_names_swap() {
        let mut ranked = Ranked::default();
        let start = Instant::now();
        let mut last: HashMap<String, f64> = HashMap::new();
        let mut last_other = 0.0;
        for second in 0..600u64 {
            let now = start + Duration::from_secs(second);
            // The hot name changes every 100 s.
            let hot = format!("m{}", second / 100);
            ranked.add(&hot, 10.0, now);
            ranked.add("steady", 1.0, now);
            ranked.add(&format!("once{second}"), 0.1, now);
            ranked.review(2, Duration::from_secs(30), now);
            assert!(ranked.other_j() >= last_other);
            last_other = ranked.other_j();
            for (name, joules) in ranked.exported() {
                if let Some(&before) = last.get(name) {
                    assert!(joules >= before, "{name} went down at {second} s");
                }
            }
            last = ranked
                .exported()
                .into_iter()
                .map(|(name, joules)| (name.to_string(), joules))
                .collect();
            assert!((total(&ranked) - (second + 1) as f64 * 11.1).abs() < 1e-6);
            assert!(ranked.exported().len() <= 2);
        }
        assert!(ranked.exported().iter().any(|(name, _)| *name == "m5"));
        assert!(
            ranked.len() < 40,
            "idle names are forgotten: {}",
            ranked.len()
        );
    }
}

//! `report BEFORE --baseline AFTER`: which branches and methods use more or less energy after a
//! change than before it, per second of each run so that runs of different length compare (or
//! per run, or per unit of work: [`Per`]), and the energy regression gate `--fail-above PCT`.
//!
//! A method's energy here is its own: that of the branches it is the newest frame of. Frames
//! are matched by name, with the hidden classes' run-to-run addresses masked
//! ([`crate::profile::mask_hidden`]): give profiles made by [`EnergyProfile::masked`].

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;

use joularcode_core::log::printable;

use crate::profile::{divided, figure, signed, EnergyProfile, Per};

/// How much a method's energy per second (or run, or unit) must grow, in parts of the total
/// before, for the gate to judge it: a method whose growth moves the total by less is decided by a
/// few samples more or less (a method holding 1% of a run, sampled 10 times, varies by a third
/// from run to run).
pub const MIN_GROWTH: f64 = 0.01;

/// The energy of one branch or method in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The branch or the method.
    pub name: String,
    /// Joules in the run before.
    pub before_j: f64,
    /// Joules in the run after.
    pub after_j: f64,
    /// Joules per second (or run, or unit of work) of the run before.
    pub before_rate: f64,
    /// Joules per second (or run, or unit of work) of the run after.
    pub after_rate: f64,
}

impl Change {
    /// The change of energy per second (or run, or unit of work).
    pub fn delta(&self) -> f64 {
        self.after_rate - self.before_rate
    }

    /// The change in percent of the run before's, `None` when that run had none.
    pub fn percent(&self) -> Option<f64> {
        (self.before_rate > 0.0).then(|| 100.0 * self.delta() / self.before_rate)
    }

    /// The change as the table shows it: `-50.0%`, `new` or `gone`.
    fn percent_text(&self) -> String {
        match self.percent() {
            Some(_) if self.after_rate == 0.0 => "gone".to_string(),
            Some(percent) => format!("{percent:+.1}%"),
            None => "new".to_string(),
        }
    }
}

/// Two recordings side by side.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// The whole recordings.
    pub total: Change,
    /// Each method, by its own energy.
    pub methods: Vec<Change>,
    /// Each branch.
    pub branches: Vec<Change>,
    before_seconds: f64,
    after_seconds: f64,
    per: Per,
}

/// Joules per name in one run, with `key` naming what a branch counts for.
fn by_name(profile: &EnergyProfile, key: fn(&str) -> &str) -> HashMap<String, f64> {
    let mut energy: HashMap<String, f64> = HashMap::new();
    for jvm in &profile.jvms {
        for (branch, weight) in &jvm.branches {
            *energy.entry(key(branch).to_string()).or_default() += weight.joules;
        }
    }
    energy
}

/// The newest frame of a branch: the method whose own work it is.
fn method(branch: &str) -> &str {
    branch.rsplit(';').next().unwrap_or(branch)
}

/// The changes of every name of `before` and `after`, their energy divided by `divisors`, the
/// largest change first.
fn changes(
    before: &HashMap<String, f64>,
    after: &HashMap<String, f64>,
    divisors: (f64, f64),
) -> Vec<Change> {
    let names: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let mut changes: Vec<Change> = names
        .into_iter()
        .map(|name| {
            let before_j = before.get(name).copied().unwrap_or(0.0);
            let after_j = after.get(name).copied().unwrap_or(0.0);
            Change {
                name: name.clone(),
                before_j,
                after_j,
                before_rate: divided(before_j, divisors.0),
                after_rate: divided(after_j, divisors.1),
            }
        })
        .collect();
    changes.sort_by(|a, b| {
        b.delta()
            .abs()
            .total_cmp(&a.delta().abs())
            .then_with(|| a.name.cmp(&b.name))
    });
    changes
}

impl Comparison {
    /// Compares `after` with `before`, their energy divided as `per` says.
    pub fn new(before: &EnergyProfile, after: &EnergyProfile, per: Per) -> Comparison {
        let divisors = per.divisors(before, after);
        let (before_j, after_j) = (before.joules(), after.joules());
        Comparison {
            total: Change {
                name: "total".to_string(),
                before_j,
                after_j,
                before_rate: divided(before_j, divisors.0),
                after_rate: divided(after_j, divisors.1),
            },
            methods: changes(&by_name(before, method), &by_name(after, method), divisors),
            branches: changes(&by_name(before, |b| b), &by_name(after, |b| b), divisors),
            before_seconds: before.seconds,
            after_seconds: after.seconds,
            per,
        }
    }

    /// The run's length and, per unit of work, its units: `8.1 s`, `8.1 s, 1000 units`.
    fn extent(&self, seconds: f64, units: Option<f64>) -> String {
        match units {
            Some(units) => format!("{seconds:.1} s, {units} units"),
            None => format!("{seconds:.1} s"),
        }
    }

    /// The table: the totals, then the `top` methods and the `top` branches whose energy per
    /// second (or run, or unit of work) changed most, named as [`printable`] shows them.
    pub fn render(&self, top: usize) -> String {
        let total = &self.total;
        let unit = self.per.unit();
        let (before_units, after_units) = match self.per {
            Per::Unit { before, after } => (Some(before), Some(after)),
            Per::Second | Per::Run => (None, None),
        };
        let mut out = format!(
            "before:   {:.3} J in {} = {} {unit}\n\
             after:    {:.3} J in {} = {} {unit}\n\
             change:   {} {unit} ({})\n",
            total.before_j,
            self.extent(self.before_seconds, before_units),
            figure(total.before_rate, 3),
            total.after_j,
            self.extent(self.after_seconds, after_units),
            figure(total.after_rate, 3),
            signed(total.delta(), 3),
            total.percent_text()
        );
        for (what, changes) in [
            ("methods (their own energy)", &self.methods),
            ("branches", &self.branches),
        ] {
            // As wide as the widest heading, `before J/unit`.
            let w = "before ".len() + unit.len();
            let _ = write!(
                out,
                "\n{what} whose energy {} changed most:\n\
                 {:>10} {:>10} {:>w$} {:>w$} {:>w$} {:>8}  name\n",
                self.per.describe(),
                "before J",
                "after J",
                format!("before {unit}"),
                format!("after {unit}"),
                format!("change {unit}"),
                "change"
            );
            for change in changes.iter().take(top) {
                let _ = writeln!(
                    out,
                    "{:>10.3} {:>10.3} {:>w$} {:>w$} {:>w$} {:>8}  {}",
                    change.before_j,
                    change.after_j,
                    figure(change.before_rate, 4),
                    figure(change.after_rate, 4),
                    signed(change.delta(), 4),
                    change.percent_text(),
                    printable(&change.name)
                );
            }
        }
        out
    }

    /// What grew by more than `percent` per second (or run, or unit of work): the total, or one of the top methods (the
    /// `top` with the most energy per second in either run) whose growth is also at least
    /// [`MIN_GROWTH`] of the total before. One line each (names as [`printable`] shows them);
    /// none means the gate passes.
    pub fn regressions(&self, percent: f64, top: usize) -> Vec<String> {
        let grew = |change: &Change| match change.percent() {
            Some(growth) => growth > percent,
            None => change.after_rate > 0.0,
        };
        let describe = |what: &str, change: &Change| {
            format!(
                "{what} grew from {} to {} {} ({}), more than --fail-above {percent}%",
                figure(change.before_rate, 4),
                figure(change.after_rate, 4),
                self.per.unit(),
                change.percent_text()
            )
        };
        let mut lines = Vec::new();
        if grew(&self.total) {
            let what = format!("the total energy {}", self.per.describe());
            lines.push(describe(&what, &self.total));
        }
        let top_of = |rate: fn(&Change) -> f64| {
            let mut ranked: Vec<&Change> = self
                .methods
                .iter()
                .filter(|change| rate(change) > 0.0)
                .collect();
            ranked.sort_by(|a, b| {
                rate(b)
                    .total_cmp(&rate(a))
                    .then_with(|| a.name.cmp(&b.name))
            });
            ranked.truncate(top);
            ranked
        };
        let mut top_methods = top_of(|c| c.before_rate);
        for change in top_of(|c| c.after_rate) {
            if !top_methods.iter().any(|c| c.name == change.name) {
                top_methods.push(change);
            }
        }
        let noticeable = |change: &Change| change.delta() >= MIN_GROWTH * self.total.before_rate;
        for change in top_methods.into_iter().filter(|c| grew(c) && noticeable(c)) {
            lines.push(describe(
                &format!("method {}", printable(&change.name)),
                change,
            ));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{BranchSet, JvmEnergy, Weight};

    fn profile(branches: &[(&str, f64)], seconds: f64) -> EnergyProfile {
        EnergyProfile {
            jvms: vec![JvmEnergy {
                name: "a".into(),
                branches: branches
                    .iter()
                    .map(|&(b, joules)| {
                        (
                            b.to_string(),
                            Weight {
                                joules,
                                ..Weight::default()
                            },
                        )
                    })
                    .collect(),
            }],
            set: BranchSet::App,
            seconds,
            start_ms: None,
            power_source: None,
            sampled: false,
            carbon: None,
            from_entries: false,
        }
    }

    /// Before: 10 s, hot 6 J, cold 2 J (through two branches), lambda 1 J. After: 20 s, hot 6 J
    /// (half the rate), cold 4 J (the same rate), a new method 0.2 J; the lambda's class has
    /// another address.
    fn comparison() -> Comparison {
        let before = profile(
            &[
                ("m.Main.run;m.Main.hot", 6.0),
                ("m.Main.run;m.Main.cold", 1.5),
                ("m.Main.other;m.Main.cold", 0.5),
                ("m.Main$$Lambda/0x01.run;m.Main.lambda", 1.0),
            ],
            10.0,
        );
        let after = profile(
            &[
                ("m.Main.run;m.Main.hot", 6.0),
                ("m.Main.run;m.Main.cold", 3.0),
                ("m.Main.other;m.Main.cold", 1.0),
                ("m.Main.run;m.Main.fresh", 0.2),
                ("m.Main.run;m.Main.tiny", 0.1),
                ("m.Main$$Lambda/0x02.run;m.Main.lambda", 2.0),
            ],
            20.0,
        );
        Comparison::new(&before.masked(), &after.masked(), Per::Second)
    }

    #[test]
    fn changes_are_per_second_of_run_largest_first() {
        let comparison = comparison();
        assert_eq!(comparison.total.before_rate, 0.9);
        assert_eq!(comparison.total.after_rate, 0.615);
        let hot = &comparison.methods[0];
        assert_eq!(hot.name, "m.Main.hot");
        assert_eq!((hot.before_rate, hot.after_rate), (0.6, 0.3));
        assert_eq!(hot.percent(), Some(-50.0));
        let cold = comparison
            .methods
            .iter()
            .find(|c| c.name == "m.Main.cold")
            .unwrap();
        assert_eq!(
            (cold.before_j, cold.after_j, cold.percent()),
            (2.0, 4.0, Some(0.0))
        );
        let lambda = comparison
            .branches
            .iter()
            .find(|c| c.name.contains("Lambda"))
            .unwrap();
        assert_eq!(lambda.name, "m.Main$$Lambda.run;m.Main.lambda");
        assert_eq!(
            lambda.percent(),
            Some(0.0),
            "the lambda matches across runs"
        );
        let table = comparison.render(2);
        assert!(table.contains("change:   -0.285 J/s (-31.7%)"), "{table}");
        assert!(
            table.contains(
                "     6.000      6.000     0.6000     0.3000    -0.3000   -50.0%  m.Main.hot\n"
            ),
            "{table}"
        );
        assert!(table.contains("new  m.Main.run;m.Main.fresh"), "{table}");
        assert!(!table.contains("m.Main.other"), "top 2 only: {table}");
    }

    #[test]
    fn the_gate_fails_on_the_total_or_a_top_method() {
        let comparison = comparison();
        assert!(comparison
            .regressions(10.0, 10)
            .iter()
            .all(|l| !l.contains("total")));
        let lines = comparison.regressions(10.0, 10);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].starts_with("method m.Main.fresh grew from 0.0000 to 0.0100 J/s (new)"));
        // fresh is not among the top 2 of either run; hot and lambda are, and did not grow.
        assert!(comparison.regressions(10.0, 2).is_empty());
        // tiny's growth (0.005 J/s) moves the total (0.9 J/s) by under 1%: too few samples to
        // judge. fresh's (0.01 J/s) does not.
        assert!(comparison
            .regressions(10.0, 10)
            .iter()
            .all(|l| !l.contains("tiny")));
        let reversed = Comparison::new(&comparison_after(), &comparison_before(), Per::Second);
        let lines = reversed.regressions(40.0, 1);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with("the total energy per second grew from 0.6050 to 0.9000"));
        assert!(lines[1].starts_with("method m.Main.hot grew"), "{lines:?}");
    }

    fn comparison_before() -> EnergyProfile {
        profile(&[("m.Main.hot", 6.0), ("m.Main.cold", 3.0)], 10.0)
    }

    fn comparison_after() -> EnergyProfile {
        profile(&[("m.Main.hot", 6.0), ("m.Main.cold", 6.1)], 20.0)
    }
}

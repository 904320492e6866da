//! What `top` shows, apart from any terminal: the JVMs with their power and share of the CPU
//! power, and for the selected one its methods or branches; the keys change the selection, the
//! list and its order. Each cycle's results come in as a [`Snapshot`].

use std::collections::HashMap;
use std::fmt::Write as _;

use clap::ValueEnum;
use joularcode_core::carbon::Intensity;
use joularcode_core::energy::{Interval, Power};

use crate::profile::{format_grams, BranchSet};

/// One cycle's results, owned, as the view takes them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The power source.
    pub source: String,
    /// The CPU power over the cycle, in W.
    pub power_w: f64,
    /// The cycle's length.
    pub interval: Interval,
    /// The carbon intensity in force for the cycle, when `carbon-intensity` is set and could be
    /// read.
    pub carbon: Option<Intensity>,
    /// The JVMs of the cycle.
    pub jvms: Vec<JvmSnapshot>,
}

/// One JVM in a cycle.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JvmSnapshot {
    /// Its process id.
    pub pid: u32,
    /// Its main class.
    pub main_class: String,
    /// Its power, in W.
    pub watts: f64,
    /// Its share of the CPU power, from 0 to 1.
    pub share: f64,
    /// It ended in the cycle.
    pub ended: bool,
    /// The power of each of its branches (all of them), in W.
    pub all: Vec<(String, f64)>,
    /// The power of each of its application branches, in W.
    pub app: Vec<(String, f64)>,
    /// The power of each of its entry points (found in all its branches), in W.
    pub entries: Vec<(String, f64)>,
}

/// The list shown for the selected JVM (`--list`, and the keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum List {
    /// Methods, each with the energy of the branches it is the newest frame of.
    Methods,
    /// Branches.
    Branches,
    /// Entry points, each with the energy of the branches it started (of all branches).
    Entries,
}

/// The order of that list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Power in the last cycle, highest first.
    Watts,
    /// Energy since `top` started, highest first.
    Energy,
    /// Name.
    Name,
}

impl Order {
    fn next(self) -> Order {
        match self {
            Order::Watts => Order::Energy,
            Order::Energy => Order::Name,
            Order::Name => Order::Watts,
        }
    }

    /// How the screen names it.
    pub fn describe(self) -> &'static str {
        match self {
            Order::Watts => "W now",
            Order::Energy => "J since start",
            Order::Name => "name",
        }
    }
}

/// What a key asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// Select the JVM above.
    Up,
    /// Select the JVM below.
    Down,
    /// Show methods.
    Methods,
    /// Show branches.
    Branches,
    /// Show entry points.
    Entries,
    /// Change the order of the list.
    Order,
    /// Switch between all branches and the application's.
    Set,
}

/// Power now and energy so far of a JVM, a method or a branch.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// In the last cycle, in W.
    pub watts: f64,
    /// Since `top` started, in J.
    pub joules: f64,
    /// Since `top` started, in grams of CO2e (of the cycles with a carbon intensity).
    pub grams: f64,
}

impl Usage {
    fn add(&mut self, watts: f64, interval: Interval, carbon: Option<Intensity>) {
        let energy = Power::from_watts(watts) * interval;
        self.watts += watts;
        self.joules += energy.joules();
        self.grams += carbon.map_or(0.0, |carbon| carbon.grams(energy));
    }
}

/// One JVM as listed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JvmRow {
    /// Its process id.
    pub pid: u32,
    /// Its main class.
    pub main_class: String,
    /// Its power and energy.
    pub usage: Usage,
    /// Its share of the CPU power in the last cycle, from 0 to 1.
    pub share: f64,
    /// It ended.
    pub ended: bool,
    all: HashMap<String, Usage>,
    app: HashMap<String, Usage>,
    entries: HashMap<String, Usage>,
}

/// One line of the selected JVM's list.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// The method or branch.
    pub name: String,
    /// Its power and energy.
    pub usage: Usage,
    /// Its share of the JVM's power in the last cycle, from 0 to 1.
    pub share: f64,
}

/// The state of the view.
#[derive(Debug, Clone)]
pub struct Top {
    /// Cycles seen.
    pub cycles: u64,
    /// The power source.
    pub source: String,
    /// The CPU power in the last cycle, in W.
    pub power_w: f64,
    /// The carbon intensity of the last cycle.
    pub carbon_now: Option<Intensity>,
    /// Whether a cycle had a carbon intensity: grams of CO2e are shown.
    pub carbon: bool,
    /// The JVMs, most power first.
    pub jvms: Vec<JvmRow>,
    /// The selected JVM's pid.
    pub selected: Option<u32>,
    /// Which list.
    pub list: List,
    /// In which order.
    pub order: Order,
    /// Of which branches.
    pub set: BranchSet,
}

impl Default for Top {
    fn default() -> Top {
        Top::new(List::Methods)
    }
}

impl Top {
    /// No cycle yet, showing `list`.
    pub fn new(list: List) -> Top {
        Top {
            cycles: 0,
            source: String::new(),
            power_w: 0.0,
            carbon_now: None,
            carbon: false,
            jvms: Vec::new(),
            selected: None,
            list,
            order: Order::Watts,
            set: BranchSet::All,
        }
    }

    /// Takes in one cycle.
    pub fn apply(&mut self, snapshot: &Snapshot) {
        self.cycles += 1;
        self.source.clone_from(&snapshot.source);
        self.power_w = snapshot.power_w;
        self.carbon_now = snapshot.carbon;
        self.carbon |= snapshot.carbon.is_some();
        let (interval, carbon) = (snapshot.interval, snapshot.carbon);
        for row in &mut self.jvms {
            row.usage.watts = 0.0;
            row.share = 0.0;
            for usage in row
                .all
                .values_mut()
                .chain(row.app.values_mut())
                .chain(row.entries.values_mut())
            {
                usage.watts = 0.0;
            }
        }
        for jvm in &snapshot.jvms {
            let index = match self.jvms.iter().position(|row| row.pid == jvm.pid) {
                Some(index) => index,
                None => {
                    self.jvms.push(JvmRow {
                        pid: jvm.pid,
                        main_class: jvm.main_class.clone(),
                        ..JvmRow::default()
                    });
                    self.jvms.len() - 1
                }
            };
            let row = &mut self.jvms[index];
            row.usage.add(jvm.watts, interval, carbon);
            row.share = jvm.share;
            row.ended = jvm.ended;
            for (branches, powers) in [
                (&mut row.all, &jvm.all),
                (&mut row.app, &jvm.app),
                (&mut row.entries, &jvm.entries),
            ] {
                for (name, watts) in powers {
                    branches
                        .entry(name.clone())
                        .or_default()
                        .add(*watts, interval, carbon);
                }
            }
        }
        self.jvms.sort_by(|a, b| {
            a.ended
                .cmp(&b.ended)
                .then_with(|| b.usage.watts.total_cmp(&a.usage.watts))
                .then_with(|| a.pid.cmp(&b.pid))
        });
        if self.selected().is_none() {
            self.selected = self.jvms.first().map(|row| row.pid);
        }
    }

    /// The selected JVM.
    pub fn selected(&self) -> Option<&JvmRow> {
        self.jvms.iter().find(|row| Some(row.pid) == self.selected)
    }

    /// Acts on a key.
    pub fn key(&mut self, key: Key) {
        match key {
            Key::Up | Key::Down => {
                let Some(at) = self
                    .jvms
                    .iter()
                    .position(|row| Some(row.pid) == self.selected)
                else {
                    self.selected = self.jvms.first().map(|row| row.pid);
                    return;
                };
                let to = if key == Key::Up {
                    at.saturating_sub(1)
                } else {
                    (at + 1).min(self.jvms.len() - 1)
                };
                self.selected = Some(self.jvms[to].pid);
            }
            Key::Methods => self.list = List::Methods,
            Key::Branches => self.list = List::Branches,
            Key::Entries => self.list = List::Entries,
            Key::Order => self.order = self.order.next(),
            Key::Set => {
                self.set = match self.set {
                    BranchSet::All => BranchSet::App,
                    BranchSet::App => BranchSet::All,
                }
            }
        }
    }

    /// The list of `row`, as chosen and ordered.
    pub fn lines(&self, row: &JvmRow) -> Vec<Line> {
        let branches = match (self.list, self.set) {
            (List::Entries, _) => &row.entries,
            (_, BranchSet::All) => &row.all,
            (_, BranchSet::App) => &row.app,
        };
        let mut by_name: HashMap<&str, Usage> = HashMap::new();
        for (branch, usage) in branches {
            let name = match self.list {
                List::Methods => branch.rsplit(';').next().unwrap_or(branch),
                List::Branches | List::Entries => branch.as_str(),
            };
            let total = by_name.entry(name).or_default();
            total.watts += usage.watts;
            total.joules += usage.joules;
            total.grams += usage.grams;
        }
        let mut lines: Vec<Line> = by_name
            .into_iter()
            .map(|(name, usage)| Line {
                name: name.to_string(),
                usage,
                share: if row.usage.watts > 0.0 {
                    usage.watts / row.usage.watts
                } else {
                    0.0
                },
            })
            .collect();
        lines.sort_by(|a, b| {
            let order = match self.order {
                Order::Watts => b.usage.watts.total_cmp(&a.usage.watts),
                Order::Energy => b.usage.joules.total_cmp(&a.usage.joules),
                Order::Name => std::cmp::Ordering::Equal,
            };
            order.then_with(|| a.name.cmp(&b.name))
        });
        lines
    }

    /// The line that says where the numbers come from.
    pub fn header(&self) -> String {
        let carbon = match (self.carbon_now, self.carbon) {
            (Some(now), _) => format!(
                ", {} g CO2e/kWh ({})",
                now.grams_per_kwh,
                now.source.label()
            ),
            (None, true) => ", carbon intensity unknown".to_string(),
            (None, false) => String::new(),
        };
        format!(
            "cycle {}: CPU power {:.2} W from {}{carbon}, {} JVM(s)",
            self.cycles,
            self.power_w,
            self.source,
            self.jvms.iter().filter(|row| !row.ended).count()
        )
    }

    /// The grams of CO2e of `usage`, for a column shown when grams are counted.
    pub fn grams(&self, usage: &Usage) -> Option<String> {
        self.carbon.then(|| format_grams(usage.grams))
    }

    /// What the list of the selected JVM is, for its title.
    pub fn list_title(&self, row: &JvmRow) -> String {
        format!(
            "{} of JVM {} ({}), {}, by {}",
            match self.list {
                List::Methods => "Methods",
                List::Branches => "Branches",
                List::Entries => "Entry points",
            },
            row.pid,
            row.main_class,
            match self.list {
                List::Entries => BranchSet::All.describe(),
                _ => self.set.describe(),
            },
            self.order.describe()
        )
    }

    /// The plain text of the state, for a standard output that is not a terminal: the header,
    /// the JVMs, and the first `top` lines of each JVM's list.
    pub fn plain(&self, top: usize) -> String {
        let mut out = format!("{}\n", self.header());
        let column = |grams: Option<String>| grams.map_or(String::new(), |g| format!(" {g:>12}"));
        let _ = writeln!(
            out,
            "{:>8} {:>9} {:>7} {:>11}{}  JVM",
            "PID",
            "W",
            "share",
            "J",
            column(self.carbon.then(|| "CO2e".to_string()))
        );
        for row in &self.jvms {
            let _ = writeln!(
                out,
                "{:>8} {:>9.3} {:>6.1}% {:>11.3}{}  {}{}",
                row.pid,
                row.usage.watts,
                100.0 * row.share,
                row.usage.joules,
                column(self.grams(&row.usage)),
                row.main_class,
                if row.ended { " (ended)" } else { "" }
            );
        }
        for row in self.jvms.iter().filter(|row| !row.ended) {
            let _ = writeln!(out, "  {}:", self.list_title(row));
            for line in self.lines(row).into_iter().take(top) {
                let _ = writeln!(
                    out,
                    "  {:>9.3} {:>6.1}% {:>11.3}{}  {}",
                    line.usage.watts,
                    100.0 * line.share,
                    line.usage.joules,
                    column(self.grams(&line.usage)),
                    line.name
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jvm(pid: u32, watts: f64, all: &[(&str, f64)]) -> JvmSnapshot {
        JvmSnapshot {
            pid,
            main_class: format!("m{pid}.Main"),
            watts,
            share: watts / 100.0,
            ended: false,
            all: all.iter().map(|&(n, w)| (n.to_string(), w)).collect(),
            app: all
                .iter()
                .filter(|(n, _)| n.contains("app."))
                .map(|&(n, w)| (n.to_string(), w))
                .collect(),
            entries: Vec::new(),
        }
    }

    fn snapshot(jvms: Vec<JvmSnapshot>) -> Snapshot {
        Snapshot {
            source: "vm (watts file /w)".into(),
            power_w: 100.0,
            interval: Interval::from_ns(2_000_000_000),
            carbon: None,
            jvms,
        }
    }

    #[test]
    fn jvms_are_listed_by_power_and_the_selection_follows_the_keys() {
        let mut top = Top::default();
        top.apply(&snapshot(vec![
            jvm(10, 20.0, &[("t.run;app.A.x", 20.0)]),
            jvm(20, 50.0, &[("t.run;app.B.y", 30.0), ("[GC]", 20.0)]),
        ]));
        let pids: Vec<u32> = top.jvms.iter().map(|row| row.pid).collect();
        assert_eq!(pids, [20, 10]);
        assert_eq!(top.selected, Some(20), "the busiest is selected first");
        assert_eq!(
            top.jvms[0].usage,
            Usage {
                watts: 50.0,
                joules: 100.0,
                grams: 0.0
            }
        );
        top.key(Key::Down);
        assert_eq!(top.selected, Some(10));
        top.key(Key::Down);
        assert_eq!(top.selected, Some(10), "the last stays selected");
        top.key(Key::Up);
        assert_eq!(top.selected, Some(20));
        // The next cycle: JVM 10 is busier now and moves up; the selection stays on 20.
        top.apply(&snapshot(vec![
            jvm(10, 60.0, &[("t.run;app.A.x", 60.0)]),
            jvm(20, 10.0, &[("t.run;app.B.y", 10.0)]),
        ]));
        assert_eq!(top.jvms[0].pid, 10);
        assert_eq!(top.selected, Some(20));
        let twenty = top.selected().unwrap().clone();
        assert_eq!(
            twenty.usage,
            Usage {
                watts: 10.0,
                joules: 120.0,
                grams: 0.0
            }
        );
        assert_eq!(top.cycles, 2);
        assert!(top
            .header()
            .starts_with("cycle 2: CPU power 100.00 W from vm"));
    }

    #[test]
    fn the_list_is_methods_or_branches_in_the_order_asked() {
        let mut top = Top::default();
        top.apply(&snapshot(vec![jvm(
            1,
            60.0,
            &[
                ("t.run;app.A.hot", 30.0),
                ("t.run;app.A.cold;app.A.hot", 10.0),
                ("t.run;app.A.cold", 15.0),
                ("[GC]", 5.0),
            ],
        )]));
        top.apply(&snapshot(vec![jvm(
            1,
            11.0,
            &[("[GC]", 10.0), ("t.run;app.A.hot", 1.0)],
        )]));
        let row = top.selected().unwrap().clone();
        let names = |top: &Top| -> Vec<String> {
            top.lines(&row).into_iter().map(|line| line.name).collect()
        };
        assert_eq!(names(&top), ["[GC]", "app.A.hot", "app.A.cold"]);
        let gc = &top.lines(&row)[0];
        assert_eq!((gc.usage.watts, gc.share), (10.0, 10.0 / 11.0));
        top.key(Key::Order);
        assert_eq!(
            names(&top),
            ["app.A.hot", "[GC]", "app.A.cold"],
            "by energy"
        );
        assert_eq!(top.lines(&row)[0].usage.joules, 82.0);
        top.key(Key::Order);
        assert_eq!(names(&top), ["[GC]", "app.A.cold", "app.A.hot"], "by name");
        top.key(Key::Branches);
        top.key(Key::Set);
        assert_eq!(
            names(&top),
            [
                "t.run;app.A.cold",
                "t.run;app.A.cold;app.A.hot",
                "t.run;app.A.hot"
            ]
        );
        assert_eq!(
            top.list_title(&row),
            "Branches of JVM 1 (m1.Main), application branches, by name"
        );
        top.key(Key::Order);
        top.key(Key::Methods);
        assert_eq!(
            top.list_title(&row),
            "Methods of JVM 1 (m1.Main), application branches, by W now"
        );
    }

    #[test]
    fn plain_text_lists_every_jvm_and_its_top_lines() {
        let mut top = Top::default();
        let mut ended = jvm(2, 0.0, &[]);
        ended.ended = true;
        top.apply(&snapshot(vec![
            jvm(
                1,
                25.0,
                &[("t.run;app.A.hot", 20.0), ("t.run;app.A.cold", 5.0)],
            ),
            ended,
        ]));
        let text = top.plain(1);
        assert!(
            text.contains("       1    25.000   25.0%      50.000  m1.Main\n"),
            "{text}"
        );
        assert!(
            text.contains("       2     0.000    0.0%       0.000  m2.Main (ended)\n"),
            "{text}"
        );
        assert!(
            text.contains("     20.000   80.0%      40.000  app.A.hot\n"),
            "{text}"
        );
        assert!(!text.contains("app.A.cold"), "top 1: {text}");
        assert!(text.contains("1 JVM(s)"));
        assert!(!text.contains("CO2e"), "no grams unless counted: {text}");
    }

    #[test]
    fn grams_follow_the_intensity_of_each_cycle() {
        use joularcode_core::carbon::IntensitySource;
        let mut top = Top::default();
        // 2 s cycles: hot 20 W is 40 J a cycle, at 360 then 90 g/kWh (4 mg, then 1 mg), then
        // with no intensity (the file could not be read).
        for grams_per_kwh in [Some(360.0), Some(90.0), None] {
            let mut cycle = snapshot(vec![jvm(
                1,
                25.0,
                &[("t.run;app.A.hot", 20.0), ("t.run;app.A.cold", 5.0)],
            )]);
            cycle.carbon = grams_per_kwh.map(|grams_per_kwh| Intensity {
                grams_per_kwh,
                source: IntensitySource::File,
            });
            top.apply(&cycle);
            if grams_per_kwh == Some(90.0) {
                assert!(
                    top.header()
                        .contains("W from vm (watts file /w), 90 g CO2e/kWh (file), 1 JVM"),
                    "{}",
                    top.header()
                );
            }
        }
        let row = top.selected().unwrap().clone();
        assert!((row.usage.grams - 0.00625).abs() < 1e-12, "{:?}", row.usage);
        let text = top.plain(1);
        assert!(
            text.contains("     PID         W   share           J         CO2e  JVM\n"),
            "{text}"
        );
        assert!(
            text.contains("       1    25.000   25.0%     150.000     6.250 mg  m1.Main\n"),
            "{text}"
        );
        assert!(
            text.contains("     20.000   80.0%     120.000     5.000 mg  app.A.hot\n"),
            "{text}"
        );
        assert!(top.header().contains(", carbon intensity unknown, "));
    }

    #[test]
    fn entry_points_are_listed_from_all_branches_whatever_the_set() {
        let mut top = Top::new(List::Entries);
        let mut jvm = jvm(3, 8.0, &[("t.run;app.A.x", 8.0)]);
        jvm.entries = vec![
            ("app.Orders.handle".into(), 3.0),
            ("app.Users.handle".into(), 1.0),
            ("app.Orders.handle".into(), 3.0),
            ("[no entry]".into(), 1.0),
        ];
        top.apply(&snapshot(vec![jvm.clone()]));
        top.apply(&snapshot(vec![jvm]));
        top.key(Key::Set);
        let row = top.selected().unwrap().clone();
        let lines = top.lines(&row);
        let names: Vec<&str> = lines.iter().map(|line| line.name.as_str()).collect();
        assert_eq!(
            names,
            ["app.Orders.handle", "[no entry]", "app.Users.handle"]
        );
        assert_eq!(lines[0].usage.watts, 6.0);
        assert_eq!(lines[0].usage.joules, 24.0, "two cycles of 2 s at 6 W");
        assert_eq!(lines[0].share, 0.75);
        assert_eq!(
            top.list_title(&row),
            "Entry points of JVM 3 (m3.Main), all branches, by W now"
        );
        assert!(
            top.plain(1)
                .contains("      6.000   75.0%      24.000  app.Orders.handle\n"),
            "{}",
            top.plain(1)
        );
        top.key(Key::Methods);
        assert_eq!(top.lines(&row)[0].name, "app.A.x");
        top.key(Key::Entries);
        assert_eq!(top.list, List::Entries);
    }

    #[test]
    fn entry_points_have_the_grams_of_each_cycle() {
        use joularcode_core::carbon::IntensitySource;
        let mut top = Top::new(List::Entries);
        let mut jvm = jvm(3, 8.0, &[("t.run;app.A.x", 8.0)]);
        jvm.entries = vec![
            ("app.Orders.handle".into(), 6.0),
            ("app.Users.handle".into(), 2.0),
        ];
        // 2 s cycles at 360 then 90 g/kWh: Orders.handle's 12 J a cycle are 1.2 mg then
        // 0.3 mg of CO2e, Users.handle's 4 J 0.4 mg then 0.1 mg.
        for grams_per_kwh in [360.0, 90.0] {
            let mut cycle = snapshot(vec![jvm.clone()]);
            cycle.carbon = Some(Intensity {
                grams_per_kwh,
                source: IntensitySource::Constant,
            });
            top.apply(&cycle);
        }
        let text = top.plain(2);
        assert!(
            text.contains("  Entry points of JVM 3 (m3.Main), all branches, by W now:\n"),
            "{text}"
        );
        assert!(
            text.contains("      6.000   75.0%      24.000     1.500 mg  app.Orders.handle\n"),
            "{text}"
        );
        assert!(
            text.contains("      2.000   25.0%       8.000   500.000 µg  app.Users.handle\n"),
            "{text}"
        );
    }
}

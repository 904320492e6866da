//! A recording's energy per branch: what the views show (report's table, flame graphs, pprof
//! files, comparisons). `report` builds it from Joular CSV files, `record` from its cycles.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;

use joularcode_core::carbon::IntensitySource;
use joularcode_core::entry::EntryRule;
use joularcode_core::output::csv::{ALL_FILE, APP_FILE};

/// How the views name the entry of a branch that has none (no application frame).
pub const NO_ENTRY: &str = "[no entry]";

/// Which branches a view shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BranchSet {
    /// Every frame, JDK and JVM threads included (`methods-power-all.csv`).
    All,
    /// The application's frames only (`methods-power-app.csv`).
    App,
}

impl BranchSet {
    /// `--app` given or not.
    pub fn from_app_flag(app: bool) -> BranchSet {
        if app {
            BranchSet::App
        } else {
            BranchSet::All
        }
    }

    /// The CSV file of these branches.
    pub fn file(self) -> &'static str {
        match self {
            BranchSet::All => ALL_FILE,
            BranchSet::App => APP_FILE,
        }
    }

    /// The set named by a CSV file's name, if it is one of the two.
    pub fn of_file(name: &str) -> Option<BranchSet> {
        match name {
            ALL_FILE => Some(BranchSet::All),
            APP_FILE => Some(BranchSet::App),
            _ => None,
        }
    }

    /// How titles name it.
    pub fn describe(self) -> &'static str {
        match self {
            BranchSet::All => "all branches",
            BranchSet::App => "application branches",
        }
    }
}

/// The energy of one branch, and the stack samples that caught it when they are known.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Weight {
    /// Joules.
    pub joules: f64,
    /// Stack samples (0 when the profile does not count them, see [`EnergyProfile::sampled`]).
    pub samples: u64,
    /// Grams of CO2e (0 when the profile counts none, see [`EnergyProfile::carbon`]).
    pub grams: f64,
}

impl Weight {
    /// Adds `other` to this weight.
    pub fn add(&mut self, other: Weight) {
        self.joules += other.joules;
        self.samples = self.samples.saturating_add(other.samples);
        self.grams += other.grams;
    }
}

/// One JVM's energy per branch.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct JvmEnergy {
    /// How the views name it: `JVM 12345 (com.example.Main)`, or the results file it comes from.
    pub name: String,
    /// Per branch name (frames oldest first, joined by `;`), its weight.
    pub branches: HashMap<String, Weight>,
}

impl JvmEnergy {
    /// The name of JVM `pid` whose main class is `main_class`.
    pub fn name_of(pid: u32, main_class: &str) -> String {
        format!("JVM {pid} ({main_class})")
    }

    /// Its total energy, in joules.
    pub fn joules(&self) -> f64 {
        self.branches
            .values()
            .fold(0.0, |sum, weight| sum + weight.joules)
    }

    /// The branches, most energy first (ties by name, so the order is stable).
    pub fn ranked(&self) -> Vec<(&str, f64)> {
        let mut ranked: Vec<(&str, f64)> = self
            .branches
            .iter()
            .map(|(name, weight)| (name.as_str(), weight.joules))
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        ranked
    }
}

/// What a recording's energy went to: per JVM, the energy of each branch.
#[derive(Debug, Clone, PartialEq)]
pub struct EnergyProfile {
    /// The JVMs, in the order the views show them.
    pub jvms: Vec<JvmEnergy>,
    /// Which branches.
    pub set: BranchSet,
    /// The wall-clock time the recording covers, in seconds.
    pub seconds: f64,
    /// When it started, in Unix milliseconds, if known.
    pub start_ms: Option<i64>,
    /// The power source, when known: `record` knows it, Joular's CSV files do not say.
    pub power_source: Option<String>,
    /// Whether [`Weight::samples`] are counted (by `record`; the CSV files hold none).
    pub sampled: bool,
    /// Where the carbon intensity of [`Weight::grams`] came from (`constant`, `file`), when
    /// grams of CO2e are counted (`carbon-intensity` was set).
    pub carbon: Option<String>,
    /// Whether each branch starts at its entry point ([`EnergyProfile::from_entries`]).
    pub from_entries: bool,
}

impl EnergyProfile {
    /// All the JVMs' energy, in joules.
    pub fn joules(&self) -> f64 {
        self.jvms.iter().fold(0.0, |sum, jvm| sum + jvm.joules())
    }

    /// What the profile is about: the JVM's name, or how many JVMs.
    pub fn subject(&self) -> String {
        match &self.jvms[..] {
            [jvm] => jvm.name.clone(),
            jvms => format!("{} JVMs", jvms.len()),
        }
    }

    /// The title of its views: the subject, the total energy and the duration.
    pub fn title(&self) -> String {
        format!(
            "Energy of {}: {} in {:.1} s",
            self.subject(),
            format_joules(self.joules()),
            self.seconds
        )
    }

    /// The line below the title: the power source and the branches shown.
    pub fn subtitle(&self) -> String {
        let source = match &self.power_source {
            Some(source) => format!("power from {source}"),
            None => "power source not recorded in the CSV files".to_string(),
        };
        let carbon = match &self.carbon {
            Some(carbon) => format!("; CO2e at the carbon intensity of the {carbon}"),
            None => String::new(),
        };
        let from = if self.from_entries {
            ", from their entry points"
        } else {
            ""
        };
        format!("{source}{carbon}; {}{from}", self.set.describe())
    }

    /// The same profile with the hidden classes' addresses masked in every frame
    /// ([`mask_hidden`]); branches that differed only there are added up.
    pub fn masked(&self) -> EnergyProfile {
        self.rekeyed(|branch| {
            let masked: Vec<Cow<'_, str>> = branch.split(';').map(mask_hidden).collect();
            masked.join(";")
        })
    }

    /// The same profile with each branch starting at its entry point as `rule` finds it (its
    /// frame and the newer ones); a branch without one under [`NO_ENTRY`], whole. Branches that
    /// share their part from the entry on are added up.
    pub fn from_entries(&self, rule: &EntryRule) -> EnergyProfile {
        EnergyProfile {
            from_entries: true,
            ..self.rekeyed(|branch| match rule.find(branch) {
                Some(entry) => entry.stack.to_owned(),
                None => format!("{NO_ENTRY};{branch}"),
            })
        }
    }

    /// The same profile with each branch named by `name`, the weights of the branches that get
    /// the same name added up.
    fn rekeyed(&self, name: impl Fn(&str) -> String) -> EnergyProfile {
        let jvms = self
            .jvms
            .iter()
            .map(|jvm| {
                let mut branches: HashMap<String, Weight> = HashMap::new();
                for (branch, weight) in &jvm.branches {
                    branches.entry(name(branch)).or_default().add(*weight);
                }
                JvmEnergy {
                    name: jvm.name.clone(),
                    branches,
                }
            })
            .collect();
        EnergyProfile {
            jvms,
            power_source: self.power_source.clone(),
            carbon: self.carbon.clone(),
            ..*self
        }
    }

    /// Every branch as its frames, oldest first, with its weight. With several JVMs, each
    /// stack starts with a frame naming its JVM, so that they stand side by side.
    pub fn stacks(&self) -> Vec<(Vec<&str>, Weight)> {
        let several = self.jvms.len() > 1;
        let mut stacks = Vec::new();
        for jvm in &self.jvms {
            for (branch, weight) in &jvm.branches {
                let mut frames: Vec<&str> = Vec::new();
                if several {
                    frames.push(&jvm.name);
                }
                frames.extend(branch.split(';'));
                stacks.push((frames, *weight));
            }
        }
        stacks
    }
}

/// [`EnergyProfile::carbon`] of a recording whose cycles had intensities from `sources`: their
/// labels (`constant`, `file`, `constant and file`), `None` when there were none.
pub fn carbon_sources(sources: &BTreeSet<IntensitySource>) -> Option<String> {
    let labels: Vec<&str> = sources.iter().map(|source| source.label()).collect();
    (!labels.is_empty()).then(|| labels.join(" and "))
}

/// What a comparison of two recordings divides each one's energy by, so that they compare
/// (`report --baseline`, docs/views.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Per {
    /// A second of the run: for runs of different lengths that work at the same pace.
    Second,
    /// The whole run: for benchmarks that do the same fixed amount of work in each run.
    Run,
    /// A unit of work, each run having done this many.
    Unit {
        /// The units of work of the run before.
        before: f64,
        /// The units of work of the run after.
        after: f64,
    },
}

impl Per {
    /// What the energy of `before` and of `after` are divided by.
    pub fn divisors(self, before: &EnergyProfile, after: &EnergyProfile) -> (f64, f64) {
        match self {
            Per::Second => (before.seconds, after.seconds),
            Per::Run => (1.0, 1.0),
            Per::Unit { before, after } => (before, after),
        }
    }

    /// The unit of energy divided so: `J/s`, `J/run`, `J/unit`.
    pub fn unit(self) -> &'static str {
        match self {
            Per::Second => "J/s",
            Per::Run => "J/run",
            Per::Unit { .. } => "J/unit",
        }
    }

    /// How titles and messages say it: `per second`, `per run`, `per unit of work`.
    pub fn describe(self) -> &'static str {
        match self {
            Per::Second => "per second",
            Per::Run => "per run",
            Per::Unit { .. } => "per unit of work",
        }
    }
}

/// `joules` divided by `divisor`, 0 when the divisor is not above 0 (a run of no length).
pub fn divided(joules: f64, divisor: f64) -> f64 {
    if divisor > 0.0 {
        joules / divisor
    } else {
        0.0
    }
}

/// `frame` without what makes a hidden class's name differ from run to run, so that two
/// recordings compare: the address of a hidden class (`X$$Lambda/0x0000000800c5a08.run` and
/// `java.lang.invoke.LambdaForm$MH/0x00007f01.invoke` lose `/0x...`), and the sequence number and
/// hash of a lambda's class on older JDKs (`X$$Lambda$14/0x...` and `X$$Lambda$14/1234` become
/// `X$$Lambda`).
pub fn mask_hidden(frame: &str) -> Cow<'_, str> {
    if !frame.contains("/0x") && !frame.contains("$$Lambda$") {
        return Cow::Borrowed(frame);
    }
    let mut out = String::with_capacity(frame.len());
    let mut rest = frame;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("$$Lambda$") {
            let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if digits > 0 {
                out.push_str("$$Lambda");
                rest = &after[digits..];
                // The older JDKs' `/<identity hash>` follows the sequence number.
                if let Some(hash) = rest.strip_prefix('/') {
                    let digits =
                        hash.len() - hash.trim_start_matches(|c: char| c.is_ascii_digit()).len();
                    if digits > 0 && !hash.starts_with("0x") {
                        rest = &hash[digits..];
                    }
                }
                continue;
            }
        }
        if let Some(after) = rest.strip_prefix("/0x") {
            let hex = after.len()
                - after
                    .trim_start_matches(|c: char| c.is_ascii_hexdigit())
                    .len();
            if hex > 0 {
                rest = &after[hex..];
                continue;
            }
        }
        let mut chars = rest.chars();
        if let Some(c) = chars.next() {
            out.push(c);
        }
        rest = chars.as_str();
    }
    Cow::Owned(out)
}

/// `value` with `decimals` decimals, or more so that it keeps three significant digits (energy
/// per unit of work is often a small fraction of a joule).
pub fn figure(value: f64, decimals: usize) -> String {
    let magnitude = if value != 0.0 && value.is_finite() {
        -value.abs().log10().floor()
    } else {
        0.0
    };
    let significant = (magnitude + 2.0).clamp(0.0, 15.0) as usize;
    format!("{value:.0$}", decimals.max(significant))
}

/// [`figure`] with its sign.
pub fn signed(value: f64, decimals: usize) -> String {
    let text = figure(value, decimals);
    if text.starts_with('-') {
        text
    } else {
        format!("+{text}")
    }
}

/// Grams (of CO2e) as people read them: three decimals in the unit that fits (`1.234 kg`,
/// `12.345 g`, `4.860 mg`, `3.210 µg`).
pub fn format_grams(grams: f64) -> String {
    let (value, unit) = match grams.abs() {
        g if g >= 1000.0 => (grams / 1000.0, "kg"),
        g if g >= 1.0 || g == 0.0 => (grams, "g"),
        g if g >= 1e-3 => (grams * 1e3, "mg"),
        _ => (grams * 1e6, "µg"),
    };
    format!("{value:.3} {unit}")
}

/// Joules as people read them: three decimals, six below 0.1 J.
pub fn format_joules(joules: f64) -> String {
    let mut text = String::new();
    if joules.abs() >= 0.1 || joules == 0.0 {
        let _ = write!(text, "{joules:.3} J");
    } else {
        let _ = write!(text, "{joules:.6} J");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jvm(name: &str, branches: &[(&str, f64)]) -> JvmEnergy {
        JvmEnergy {
            name: name.into(),
            branches: branches
                .iter()
                .map(|&(branch, joules)| {
                    (
                        branch.to_string(),
                        Weight {
                            joules,
                            ..Weight::default()
                        },
                    )
                })
                .collect(),
        }
    }

    fn profile(jvms: Vec<JvmEnergy>) -> EnergyProfile {
        EnergyProfile {
            jvms,
            set: BranchSet::All,
            seconds: 4.0,
            start_ms: None,
            power_source: None,
            sampled: false,
            carbon: None,
            from_entries: false,
        }
    }

    #[test]
    fn titles_say_what_how_much_and_how_long() {
        let one = profile(vec![jvm(
            "JVM 7 (a.Main)",
            &[("a.A.run", 3.0), ("a.A.x", 1.0)],
        )]);
        assert_eq!(one.title(), "Energy of JVM 7 (a.Main): 4.000 J in 4.0 s");
        assert_eq!(
            one.subtitle(),
            "power source not recorded in the CSV files; all branches"
        );
        let mut two = profile(vec![jvm("a", &[]), jvm("b", &[("x", 0.01)])]);
        two.power_source = Some("vm (file /w)".into());
        assert_eq!(two.title(), "Energy of 2 JVMs: 0.010000 J in 4.0 s");
        assert!(two.subtitle().starts_with("power from vm (file /w)"));
    }

    #[test]
    fn several_jvms_stand_side_by_side() {
        let one = profile(vec![jvm("a", &[("x.X.run;x.X.y", 2.0)])]);
        assert_eq!(one.stacks()[0].0, ["x.X.run", "x.X.y"]);
        let two = profile(vec![jvm("a", &[("x.X.run", 2.0)]), jvm("b", &[("y", 1.0)])]);
        let mut stacks: Vec<Vec<&str>> = two.stacks().into_iter().map(|(f, _)| f).collect();
        stacks.sort();
        assert_eq!(stacks, [vec!["a", "x.X.run"], vec!["b", "y"]]);
    }

    #[test]
    fn hidden_class_addresses_are_masked() {
        for (frame, masked) in [
            ("X$$Lambda/0x0000000800c5a08.run", "X$$Lambda.run"),
            (
                "DemoShop$$Lambda$4/0x00007f4144000a08.run",
                "DemoShop$$Lambda.run",
            ),
            ("a.B$$Lambda$12/1869997857.accept", "a.B$$Lambda.accept"),
            (
                "java.lang.invoke.LambdaForm$MH/0x00007f01c0001800.invoke",
                "java.lang.invoke.LambdaForm$MH.invoke",
            ),
            ("a.B.lambda$main$0", "a.B.lambda$main$0"),
            ("a.B$$Lambda$x.run", "a.B$$Lambda$x.run"),
            ("a.B/0xZ", "a.B/0xZ"),
        ] {
            assert_eq!(mask_hidden(frame), masked, "{frame}");
        }
        let mut run = profile(vec![jvm(
            "a",
            &[
                ("t.run;X$$Lambda/0x01.run;X.work", 1.0),
                ("t.run;X$$Lambda/0x02.run;X.work", 2.0),
            ],
        )]);
        run.power_source = Some("rapl".into());
        let masked = run.masked();
        assert_eq!(
            masked.jvms[0].ranked(),
            [("t.run;X$$Lambda.run;X.work", 3.0)]
        );
        assert_eq!(masked.power_source.as_deref(), Some("rapl"));
    }

    #[test]
    fn branches_rank_by_energy_then_name() {
        let jvm = jvm("a", &[("b", 1.0), ("a", 1.0), ("c", 5.0)]);
        assert_eq!(jvm.ranked(), [("c", 5.0), ("a", 1.0), ("b", 1.0)]);
        assert_eq!(format_joules(0.0), "0.000 J");
        assert_eq!(format_joules(12.3456), "12.346 J");
        assert_eq!(format_joules(0.0123456), "0.012346 J");
        assert_eq!(figure(2.8714, 3), "2.871");
        assert_eq!(format_grams(1234.5), "1.234 kg");
        assert_eq!(format_grams(12.3456), "12.346 g");
        assert_eq!(format_grams(0.0), "0.000 g");
        assert_eq!(format_grams(0.00486), "4.860 mg");
        assert_eq!(format_grams(0.00000321), "3.210 µg");
        assert_eq!(figure(0.0258, 4), "0.0258");
        assert_eq!(figure(0.003, 3), "0.00300");
        assert_eq!(figure(0.0, 4), "0.0000");
        assert_eq!(signed(-0.5, 3), "-0.500");
        assert_eq!(signed(0.0, 3), "+0.000");
    }
}

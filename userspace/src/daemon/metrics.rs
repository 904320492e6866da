//! What the endpoint exports: the state the daemon's cycles update ([`Metrics::cycle`]) and the
//! scrapes read ([`Metrics::encode`]), in OpenMetrics text through the `prometheus-client` crate.
//!
//! Per JVM (labels `pid`, `main_class`, `container_id`, `pod_uid`): its energy and power, and the
//! energy of its top methods, branches and entry points ([`Ranked`]; the entry points found by
//! [`EntryRule`] in all its branches). For the host: the power source's power and energy, and
//! the profiler's own health. With `carbon-intensity`, the same in grams of CO2e
//! (`..._co2e_grams_total`, labelled with the intensity's `source`, `constant` or `file`; the top
//! methods, branches and entry points by their own recent grams), and the intensity in force. An ended JVM's
//! series stay, frozen, for the time given, then go. Label values come from the JVMs: [`label`]
//! bounds them.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

use super::container::Container;
use super::labels::LabelCache;
use super::ranked::Ranked;
use super::selfstat::SelfStat;
use crate::profile::BranchSet;
use crate::record::sink::CycleView;
use joularcode_core::branch::{bounded_branch_name, MAX_BRANCH_FRAMES};
use joularcode_core::carbon::Intensity;
use joularcode_core::entry::EntryRule;
use joularcode_core::names;

/// The longest label value, in bytes, the longest frame name: longer ones are cut as names are
/// ([`names::cut`], a branch as [`bounded_branch_name`] cuts it, keeping its newest frames).
pub const MAX_LABEL_BYTES: usize = names::MAX_FRAME_NAME_BYTES;

/// How the daemon exports.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportOptions {
    /// Methods, branches and entry points exported per JVM, the rest in "other".
    pub top: usize,
    /// Methods and branches with no energy for this long are forgotten.
    pub idle: Duration,
    /// An ended JVM's series stay this long.
    pub keep_ended: Duration,
    /// The rule that finds the entry points.
    pub entries: EntryRule,
}

/// One JVM's counters.
#[derive(Debug)]
struct Jvm {
    labels: [String; 4],
    energy_j: f64,
    watts: f64,
    ended_at: Option<Instant>,
    methods: Ranked,
    branches: Ranked,
    entries: Ranked,
    /// Grams of CO2e, of the JVM, its methods, its branches and its entry points.
    grams: f64,
    methods_grams: Ranked,
    branches_grams: Ranked,
    entries_grams: Ranked,
    /// The label values of its branches.
    names: LabelCache,
}

/// Everything the endpoint exports.
#[derive(Debug)]
pub struct Metrics {
    options: ExportOptions,
    proc_root: std::path::PathBuf,
    source: String,
    source_watts: f64,
    source_energy_j: f64,
    cycles: u64,
    cycles_late: u64,
    samples: u64,
    samples_lost: u64,
    samples_unknown: u64,
    /// The carbon intensity of the last cycle that had one.
    carbon: Option<Intensity>,
    /// Grams of CO2e of the source's energy.
    source_grams: f64,
    jvms: BTreeMap<u32, Jvm>,
}

impl Metrics {
    /// No cycle yet; containers are read from `proc_root` (`/proc`).
    pub fn new(options: ExportOptions, proc_root: &Path) -> Metrics {
        Metrics {
            options,
            proc_root: proc_root.to_path_buf(),
            source: String::new(),
            source_watts: 0.0,
            source_energy_j: 0.0,
            cycles: 0,
            cycles_late: 0,
            samples: 0,
            samples_lost: 0,
            samples_unknown: 0,
            carbon: None,
            source_grams: 0.0,
            jvms: BTreeMap::new(),
        }
    }

    /// How many cycles have ended.
    pub fn cycles(&self) -> u64 {
        self.cycles
    }

    /// Adds one cycle's results at `now`.
    pub fn cycle(&mut self, view: &CycleView<'_>, now: Instant) {
        let cycle = view.cycle;
        self.source = label(view.source.split_whitespace().next().unwrap_or(""));
        self.source_watts = cycle.power.watts();
        self.source_energy_j += cycle.source_energy().joules();
        self.cycles += 1;
        let window_s = if view.source.contains("ringbuffer") {
            2.0
        } else {
            1.0
        };
        if cycle.interval.seconds() > 1.5 * window_s {
            self.cycles_late += 1;
        }
        self.samples_lost += cycle.lost_samples;
        let grams = |energy| cycle.carbon.map_or(0.0, |carbon| carbon.grams(energy));
        self.carbon = cycle.carbon.or(self.carbon);
        self.source_grams += grams(cycle.source_energy());
        for jvm in &view.jvms {
            let pid = jvm.pid();
            let proc_root = &self.proc_root;
            let state = self.jvms.entry(pid).or_insert_with(|| {
                let container = Container::of(proc_root, pid);
                Jvm {
                    labels: [
                        pid.to_string(),
                        label(jvm.main_class),
                        container.id,
                        container.pod_uid,
                    ],
                    energy_j: 0.0,
                    watts: 0.0,
                    ended_at: None,
                    methods: Ranked::default(),
                    branches: Ranked::default(),
                    entries: Ranked::default(),
                    grams: 0.0,
                    methods_grams: Ranked::default(),
                    branches_grams: Ranked::default(),
                    entries_grams: Ranked::default(),
                    names: LabelCache::default(),
                }
            });
            state.watts = jvm.result.result.jvm_power.watts();
            state.energy_j += jvm.result.result.jvm_energy().joules();
            state.grams += grams(jvm.result.result.jvm_energy());
            let table = jvm.branches.table_id();
            for branch in jvm.powers(BranchSet::All) {
                let Some(id) = branch.id else {
                    continue;
                };
                let joules = branch.energy.joules();
                let names = state
                    .names
                    .get(table, id, branch.name, &self.options.entries);
                state.methods.add(&names.method, joules, now);
                state.branches.add(&names.branch, joules, now);
                state.entries.add(&names.entry, joules, now);
                if cycle.carbon.is_some() {
                    let grams = grams(branch.energy);
                    state.methods_grams.add(&names.method, grams, now);
                    state.branches_grams.add(&names.branch, grams, now);
                    state.entries_grams.add(&names.entry, grams, now);
                }
                self.samples += branch.samples;
                if names.unknown {
                    self.samples_unknown += branch.samples;
                }
            }
            for ranked in [
                &mut state.methods,
                &mut state.branches,
                &mut state.entries,
                &mut state.methods_grams,
                &mut state.branches_grams,
                &mut state.entries_grams,
            ] {
                ranked.review(self.options.top, self.options.idle, now);
            }
            if jvm.ended {
                state.watts = 0.0;
                state.ended_at.get_or_insert(now);
            }
        }
        let keep = self.options.keep_ended;
        self.jvms.retain(|_, jvm| {
            jvm.ended_at
                .is_none_or(|ended| now.duration_since(ended) < keep)
        });
    }

    /// The series of the JVMs held (ended ones included until they go).
    pub fn jvm_count(&self) -> usize {
        self.jvms.len()
    }

    /// Encodes every metric, with the profiler's own CPU time and memory read now.
    pub fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let jvm_keys = ["pid", "main_class", "container_id", "pod_uid"];
        fn jvm_labels<'a>(keys: &[&'a str; 4], jvm: &'a Jvm) -> Vec<(&'a str, &'a str)> {
            keys.iter()
                .zip(&jvm.labels)
                .map(|(key, value)| (*key, value.as_str()))
                .collect()
        }
        let watts_unit = Unit::Other("watts".into());

        let energy = encoder.encode_descriptor(
            "joularcode_jvm_energy",
            "Energy of each JVM's CPU use since the daemon first saw it.",
            Some(&Unit::Joules),
            ConstCounter::new(0.0).metric_type(),
        );
        let mut energy = energy?;
        for jvm in self.jvms.values() {
            let labels = jvm_labels(&jvm_keys, jvm);
            ConstCounter::new(jvm.energy_j).encode(energy.encode_family(&labels)?)?;
        }

        let mut watts = encoder.encode_descriptor(
            "joularcode_jvm_power",
            "Power of each JVM over the last cycle (0 once it ended).",
            Some(&watts_unit),
            ConstGauge::new(0.0).metric_type(),
        )?;
        for jvm in self.jvms.values() {
            let labels = jvm_labels(&jvm_keys, jvm);
            ConstGauge::new(jvm.watts).encode(watts.encode_family(&labels)?)?;
        }

        let grams_unit = Unit::Other("grams".into());
        let intensity_unit = Unit::Other("grams_per_kwh".into());
        // The intensity's source, when grams are counted.
        let carbon = self.carbon.map(|carbon| ("source", carbon.source.label()));
        if let Some(carbon) = carbon {
            let mut family = encoder.encode_descriptor(
                "joularcode_jvm_co2e",
                "Grams of CO2e of each JVM's energy since the daemon first saw it, at the carbon intensity of each cycle.",
                Some(&grams_unit),
                ConstCounter::new(0.0).metric_type(),
            )?;
            for jvm in self.jvms.values() {
                let mut labels = jvm_labels(&jvm_keys, jvm);
                labels.push(carbon);
                ConstCounter::new(jvm.grams).encode(family.encode_family(&labels)?)?;
            }
        }

        type Family<'a> = (&'a str, &'a str, &'a Unit, &'a str, fn(&Jvm) -> &Ranked);
        let mut families: Vec<(Family, Option<(&str, &str)>)> = vec![
            (
                (
                    "joularcode_method_energy",
                    "Energy of each JVM's top methods (the newest frame of the branches), the rest in method=\"other\".",
                    &Unit::Joules,
                    "method",
                    |jvm| &jvm.methods,
                ),
                None,
            ),
            (
                (
                    "joularcode_branch_energy",
                    "Energy of each JVM's top branches (frames oldest first, joined by ;), the rest in branch=\"other\".",
                    &Unit::Joules,
                    "branch",
                    |jvm| &jvm.branches,
                ),
                None,
            ),
            (
                (
                    "joularcode_entry_energy",
                    "Energy of each JVM's top entry points (the method that started each branch's unit of work), the rest in entry=\"other\".",
                    &Unit::Joules,
                    "entry",
                    |jvm| &jvm.entries,
                ),
                None,
            ),
        ];
        if carbon.is_some() {
            families.push((
                (
                    "joularcode_method_co2e",
                    "Grams of CO2e of each JVM's top methods by grams, the rest in method=\"other\".",
                    &grams_unit,
                    "method",
                    |jvm| &jvm.methods_grams,
                ),
                carbon,
            ));
            families.push((
                (
                    "joularcode_branch_co2e",
                    "Grams of CO2e of each JVM's top branches by grams, the rest in branch=\"other\".",
                    &grams_unit,
                    "branch",
                    |jvm| &jvm.branches_grams,
                ),
                carbon,
            ));
            families.push((
                (
                    "joularcode_entry_co2e",
                    "Grams of CO2e of each JVM's top entry points by grams, the rest in entry=\"other\".",
                    &grams_unit,
                    "entry",
                    |jvm| &jvm.entries_grams,
                ),
                carbon,
            ));
        }
        for ((name, help, unit, key, pick), source) in families {
            let mut family = encoder.encode_descriptor(
                name,
                help,
                Some(unit),
                ConstCounter::new(0.0).metric_type(),
            )?;
            for jvm in self.jvms.values() {
                let ranked = pick(jvm);
                let exported = ranked.exported();
                let rows = exported
                    .iter()
                    .copied()
                    .chain(std::iter::once(("other", ranked.other_j())));
                for (value, amount) in rows {
                    let mut labels = jvm_labels(&jvm_keys, jvm);
                    labels.push((key, value));
                    labels.extend(source);
                    ConstCounter::new(amount).encode(family.encode_family(&labels)?)?;
                }
            }
        }

        if let (Some(carbon), Some(intensity)) = (carbon, self.carbon) {
            let mut family = encoder.encode_descriptor(
                "joularcode_co2e",
                "Grams of CO2e of the CPU energy the power source gave since the daemon started.",
                Some(&grams_unit),
                ConstCounter::new(0.0).metric_type(),
            )?;
            ConstCounter::new(self.source_grams).encode(family.encode_family(&[carbon])?)?;
            let mut family = encoder.encode_descriptor(
                "joularcode_carbon_intensity",
                "The carbon intensity of the last cycle that had one.",
                Some(&intensity_unit),
                ConstGauge::new(0.0).metric_type(),
            )?;
            ConstGauge::new(intensity.grams_per_kwh).encode(family.encode_family(&[carbon])?)?;
        }

        let source = [("source", self.source.as_str())];
        let mut family = encoder.encode_descriptor(
            "joularcode_source_power",
            "The CPU power the power source gave for the last cycle.",
            Some(&watts_unit),
            ConstGauge::new(0.0).metric_type(),
        )?;
        ConstGauge::new(self.source_watts).encode(family.encode_family(&source)?)?;
        let mut family = encoder.encode_descriptor(
            "joularcode_source_energy",
            "The CPU energy the power source gave since the daemon started (the JVMs' energy is a part of it).",
            Some(&Unit::Joules),
            ConstCounter::new(0.0).metric_type(),
        )?;
        ConstCounter::new(self.source_energy_j).encode(family.encode_family(&source)?)?;

        let counters = [
            ("joularcode_cycles", "Cycles ended.", self.cycles),
            (
                "joularcode_cycles_late",
                "Cycles that ended more than half a window late (the daemon was held up).",
                self.cycles_late,
            ),
            ("joularcode_samples", "Stack samples counted.", self.samples),
            (
                "joularcode_samples_lost",
                "Stack samples the sampler lost (ring buffer or channel full).",
                self.samples_lost,
            ),
            (
                "joularcode_samples_unknown",
                "Stack samples with a frame that could not be named ([unknown]).",
                self.samples_unknown,
            ),
        ];
        for (name, help, value) in counters {
            ConstCounter::new(value).encode(encoder.encode_descriptor(
                name,
                help,
                None,
                ConstCounter::new(0u64).metric_type(),
            )?)?;
        }
        ConstGauge::new(self.jvms.len() as i64).encode(encoder.encode_descriptor(
            "joularcode_jvms",
            "JVMs exported (ended ones until their series go).",
            None,
            ConstGauge::new(0i64).metric_type(),
        )?)?;

        let own = SelfStat::read();
        ConstCounter::new(own.cpu_seconds).encode(encoder.encode_descriptor(
            "process_cpu",
            "CPU time the daemon used (user and system).",
            Some(&Unit::Seconds),
            ConstCounter::new(0.0).metric_type(),
        )?)?;
        ConstGauge::new(own.resident_bytes as i64).encode(encoder.encode_descriptor(
            "process_resident_memory",
            "The daemon's resident memory.",
            Some(&Unit::Bytes),
            ConstGauge::new(0i64).metric_type(),
        )?)?;
        Ok(())
    }
}

/// A label value from a JVM: control characters become spaces, and beyond [`MAX_LABEL_BYTES`]
/// it is cut as [`names::cut`] cuts names, with a hash of the whole, so that two long values stay
/// two series (the exposition format's escaping of `\`, `"` and newlines is the encoder's).
pub fn label(value: &str) -> String {
    names::cut(value, MAX_LABEL_BYTES)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// A branch's label value: as [`label`], but a long branch keeps its newest frames, where it
/// differs from the others, and loses its oldest ([`bounded_branch_name`]).
pub fn branch_label(branch: &str) -> String {
    label(&bounded_branch_name(
        branch,
        MAX_BRANCH_FRAMES,
        MAX_LABEL_BYTES,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::sink::JvmView;
    use joularcode_core::attribution::{CycleResult, CycleThreads, MachineLoad};
    use joularcode_core::branch::Branches;
    use joularcode_core::carbon::IntensitySource;
    use joularcode_core::cycle::{Cycle, JvmCycle};
    use joularcode_core::energy::{Interval, Power};

    /// The metrics' text after cycles of 2 s in which JVM 9's hot branch draws 3 W and its cold
    /// one 1 W, at each of `intensities` (g/kWh from a file; `None`: none in force).
    fn scraped(intensities: &[Option<f64>]) -> String {
        let proc = tempfile::tempdir().unwrap();
        let options = ExportOptions {
            top: 10,
            idle: Duration::from_secs(600),
            keep_ended: Duration::from_secs(600),
            entries: EntryRule::new(&["a."], &[]),
        };
        let mut metrics = Metrics::new(options, proc.path());
        let mut branches = Branches::new::<&str>(&[]);
        let run = branches.frame("a.A", "run");
        let (hot, cold) = (branches.frame("a.A", "hot"), branches.frame("a.A", "cold"));
        let hot = branches.branch(&[run, hot]);
        let cold = branches.branch(&[run, cold]);
        let threads = CycleThreads::default();
        let now = Instant::now();
        for intensity in intensities {
            let interval = Interval::from_ns(2_000_000_000);
            let cycle = Cycle {
                timestamp_ms: 0,
                interval,
                power: Power::from_watts(10.0),
                machine: MachineLoad::BusyCpuNs(None),
                lost_samples: 0,
                carbon: intensity.map(|grams_per_kwh| Intensity {
                    grams_per_kwh,
                    source: IntensitySource::File,
                }),
                jvms: vec![JvmCycle {
                    pid: 9,
                    cpu_ns: 0,
                    samples: 0,
                    result: CycleResult {
                        interval,
                        jvm_power: Power::from_watts(4.0),
                        all: vec![
                            (hot, Power::from_watts(3.0)),
                            (cold, Power::from_watts(1.0)),
                        ],
                        ..CycleResult::default()
                    },
                }],
            };
            metrics.cycle(
                &CycleView {
                    source: "vm (watts file /w)",
                    cycle: &cycle,
                    jvms: vec![JvmView {
                        main_class: "a.Main",
                        ended: false,
                        branches: &branches,
                        threads: &threads,
                        result: &cycle.jvms[0],
                    }],
                },
                now,
            );
        }
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(super::super::Shared(std::sync::Arc::new(
            std::sync::Mutex::new(metrics),
        ))));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    }

    /// The value of the series of `text` whose line starts with `series`.
    fn value(text: &str, series: &str) -> f64 {
        let line = text
            .lines()
            .find(|line| line.starts_with(series))
            .unwrap_or_else(|| panic!("no {series} in {text}"));
        line.rsplit_once(' ').unwrap().1.parse().unwrap()
    }

    #[test]
    fn grams_are_counted_at_the_intensity_of_each_cycle() {
        // 8 J of the JVM a cycle (20 J of the source) at 360, 90, then no g/kWh.
        let text = scraped(&[Some(360.0), Some(90.0), None]);
        let kwh = |joules: f64| joules / 3.6e6;
        let jvm = "joularcode_jvm_co2e_grams_total{pid=\"9\",main_class=\"a.Main\"";
        let expected = kwh(8.0) * (360.0 + 90.0);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1e-9);
        assert!(close(value(&text, jvm), expected), "{text}");
        assert!(text.contains(",source=\"file\"} "), "{text}");
        let hot = "joularcode_method_co2e_grams_total{pid=\"9\",main_class=\"a.Main\",container_id=\"\",pod_uid=\"\",method=\"a.A.hot\",source=\"file\"}";
        // Exported from the second cycle on, the first one's grams in "other", as joules are.
        assert!(close(value(&text, hot), kwh(6.0) * 90.0), "{text}");
        let branch = "joularcode_branch_co2e_grams_total{pid=\"9\",main_class=\"a.Main\",container_id=\"\",pod_uid=\"\",branch=\"a.A.run;a.A.cold\",source=\"file\"}";
        assert!(close(value(&text, branch), kwh(2.0) * 90.0), "{text}");
        // Both branches start at their entry point a.A.run.
        let entry = "joularcode_entry_co2e_grams_total{pid=\"9\",main_class=\"a.Main\",container_id=\"\",pod_uid=\"\",entry=\"a.A.run\",source=\"file\"}";
        assert!(close(value(&text, entry), kwh(8.0) * 90.0), "{text}");
        for family in ["method", "branch", "entry"] {
            let total: f64 = text
                .lines()
                .filter(|line| line.starts_with(&format!("joularcode_{family}_co2e_grams_total{{")))
                .map(|line| line.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
                .sum();
            assert!(
                close(total, expected),
                "the {family}s and other add up: {text}"
            );
        }
        let host = "joularcode_co2e_grams_total{source=\"file\"}";
        assert!(close(value(&text, host), kwh(20.0) * 450.0), "{text}");
        let intensity = "joularcode_carbon_intensity_grams_per_kwh{source=\"file\"}";
        assert_eq!(value(&text, intensity), 90.0, "the last one read");
        // The joules are there as before, and no grams unless an intensity is set.
        assert_eq!(
            value(&text, "joularcode_jvm_energy_joules_total{pid=\"9\""),
            24.0
        );
        assert!(!scraped(&[None, None]).contains("co2e"));
    }

    #[test]
    fn labels_are_bounded_and_clean() {
        assert_eq!(label("a.B"), "a.B");
        assert_eq!(label("a\nb\rc\"d\\"), "a b c\"d\\");
        let long = "é".repeat(100_000);
        let cut = label(&long);
        assert!(cut.len() <= MAX_LABEL_BYTES, "{}", cut.len());
        assert_ne!(
            cut,
            label(&(long.clone() + "x")),
            "two long values stay two"
        );
        let branch = format!("{};leaf.Method", "x".repeat(5000));
        let cut = branch_label(&branch);
        assert!(cut.len() <= MAX_LABEL_BYTES);
        assert!(cut.starts_with(names::CUT_MARK) && cut.ends_with(";leaf.Method"));
        let other = format!("{};leaf.Method", "y".repeat(5000));
        assert_ne!(cut, branch_label(&other), "two long branches stay two");
    }

    #[test]
    fn each_jvm_exports_its_top_entry_points_and_the_rest_as_other() {
        use crate::daemon::Shared;
        use crate::record::sink::{one_jvm_cycle, one_jvm_view};
        use joularcode_core::attribution::CycleThreads;
        use joularcode_core::branch::Branches;
        use joularcode_core::energy::{Interval, Power};
        use prometheus_client::registry::Registry;
        use std::sync::{Arc, Mutex};

        let mut branches = Branches::new(&["a."]);
        let mut branch = |frames: &[(&str, &str)]| {
            let frames: Vec<_> = frames
                .iter()
                .map(|(class, method)| branches.frame(class, method))
                .collect();
            branches.branch(&frames)
        };
        let router = [("java.lang.Thread", "run"), ("a.Router", "route")];
        let orders = branch(&[
            router[0],
            router[1],
            ("java.lang.reflect.Method", "invoke"),
            ("a.Orders", "handle"),
        ]);
        let users = branch(&[
            router[0],
            router[1],
            ("a.Main$$Lambda/0x0000000801001a00", "handle"),
            ("a.Users", "handle"),
        ]);
        let other = branch(&[router[0], ("a.Users", "handle\n\"x")]);
        let mut threads = CycleThreads::default();
        for id in [orders, users, other] {
            threads.count(1, id, 1);
        }
        let cycle = one_jvm_cycle(
            9,
            1000,
            Interval::from_ns(1_000_000_000),
            vec![
                (orders, Power::from_watts(3.0)),
                (users, Power::from_watts(1.0)),
                (other, Power::from_watts(0.5)),
            ],
        );
        let dir = tempfile::tempdir().unwrap();
        let mut metrics = Metrics::new(
            ExportOptions {
                top: 1,
                idle: Duration::from_secs(60),
                keep_ended: Duration::from_secs(60),
                entries: EntryRule::new(&["a."], &[]),
            },
            dir.path(),
        );
        let start = Instant::now();
        for second in 0..2 {
            metrics.cycle(
                &one_jvm_view(&cycle, &branches, &threads),
                start + Duration::from_secs(second),
            );
        }
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Shared(Arc::new(Mutex::new(metrics)))));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let series: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with("joularcode_entry_energy_joules_total{"))
            .collect();
        // The first cycle's energy is in "other": a name starts at 0 when it joins the top.
        assert_eq!(
            series,
            [
                "joularcode_entry_energy_joules_total{pid=\"9\",main_class=\"a.Main\",container_id=\"\",pod_uid=\"\",entry=\"a.Orders.handle\"} 3.0",
                "joularcode_entry_energy_joules_total{pid=\"9\",main_class=\"a.Main\",container_id=\"\",pod_uid=\"\",entry=\"other\"} 6.0",
            ],
            "{text}"
        );
    }
}

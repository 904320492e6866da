//! What the endpoint exports: the state the daemon's cycles update ([`Metrics::cycle`]) and the
//! scrapes read ([`Metrics::encode`]), in OpenMetrics text through the `prometheus-client` crate.
//!
//! Per JVM (labels `pid`, `main_class`, `container_id`, `pod_uid`): its energy and power, and the
//! energy of its top methods, branches and entry points ([`Ranked`]; the entry points found by
//! [`EntryRule`] in all its branches). For the host: the power source's power
//! and energy, and the profiler's own health. An ended JVM's series stay, frozen, for the time
//! given, then go. Label values come from the JVMs: [`label`] bounds them.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

use super::container::Container;
use super::ranked::Ranked;
use super::selfstat::SelfStat;
use crate::profile::{BranchSet, NO_ENTRY};
use crate::record::sink::CycleView;
use joularcode_core::branch::{bounded_branch_name, MAX_BRANCH_FRAMES, UNKNOWN};
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
                }
            });
            state.watts = jvm.result.result.jvm_power.watts();
            state.energy_j += jvm.result.result.jvm_energy().joules();
            for branch in jvm.powers(BranchSet::All) {
                let joules = branch.energy.joules();
                let method = branch.name.rsplit(';').next().unwrap_or(branch.name);
                state.methods.add(&label(method), joules, now);
                state.branches.add(&branch_label(branch.name), joules, now);
                let entry = self
                    .options
                    .entries
                    .find(branch.name)
                    .map_or(NO_ENTRY, |entry| entry.method);
                state.entries.add(&label(entry), joules, now);
                self.samples += branch.samples;
                if branch.name.split(';').any(|frame| frame == UNKNOWN) {
                    self.samples_unknown += branch.samples;
                }
            }
            for ranked in [&mut state.methods, &mut state.branches, &mut state.entries] {
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

        for (name, help, key, pick) in [
            (
                "joularcode_method_energy",
                "Energy of each JVM's top methods (the newest frame of the branches), the rest in method=\"other\".",
                "method",
                (|jvm: &Jvm| &jvm.methods) as fn(&Jvm) -> &Ranked,
            ),
            (
                "joularcode_branch_energy",
                "Energy of each JVM's top branches (frames oldest first, joined by ;), the rest in branch=\"other\".",
                "branch",
                |jvm: &Jvm| &jvm.branches,
            ),
            (
                "joularcode_entry_energy",
                "Energy of each JVM's top entry points (the method that started each branch's unit of work), the rest in entry=\"other\".",
                "entry",
                |jvm: &Jvm| &jvm.entries,
            ),
        ] {
            let mut family = encoder.encode_descriptor(
                name,
                help,
                Some(&Unit::Joules),
                ConstCounter::new(0.0).metric_type(),
            )?;
            for jvm in self.jvms.values() {
                let ranked = pick(jvm);
                let exported = ranked.exported();
                let rows = exported
                    .iter()
                    .copied()
                    .chain(std::iter::once(("other", ranked.other_j())));
                for (value, joules) in rows {
                    let mut labels = jvm_labels(&jvm_keys, jvm);
                    labels.push((key, value));
                    ConstCounter::new(joules).encode(family.encode_family(&labels)?)?;
                }
            }
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

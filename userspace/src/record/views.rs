//! `record --flamegraph FILE` and `record --pprof FILE`: the recording's energy per branch,
//! gathered cycle by cycle, drawn and written when the recording ends.

use std::collections::{BTreeMap, BTreeSet};

use joularcode_core::carbon::IntensitySource;
use joularcode_core::entry::EntryRule;
use joularcode_core::log::{Level, Log};

use super::sink::{CycleView, Sink};
use crate::output::{flamegraph, pprof, OutputError, OutputFile};
use crate::profile::{carbon_sources, format_joules, BranchSet, EnergyProfile, JvmEnergy, Weight};

/// The flame graph and the pprof profile of a recording.
#[derive(Debug)]
pub struct ViewFiles {
    set: BranchSet,
    /// The rule the stacks start at the entry points of, if asked (`--root entry`).
    entries: Option<EntryRule>,
    flamegraph: Option<OutputFile>,
    pprof: Option<OutputFile>,
    /// Per JVM (pid and main class: a pid can be reused), its energy so far.
    jvms: BTreeMap<(u32, String), JvmEnergy>,
    seconds: f64,
    start_ms: Option<i64>,
    source: String,
    /// The sources of the carbon intensities of the cycles, when grams are counted.
    carbon: BTreeSet<IntensitySource>,
}

impl ViewFiles {
    /// The files asked for (none: `None`), checked now so that a path that cannot be written
    /// is refused before the recording starts (before its settings are even read); `set` says
    /// which branches they show.
    pub fn create(
        flamegraph: Option<&std::path::Path>,
        pprof: Option<&std::path::Path>,
        set: BranchSet,
    ) -> Result<Option<ViewFiles>, OutputError> {
        if flamegraph.is_none() && pprof.is_none() {
            return Ok(None);
        }
        Ok(Some(ViewFiles {
            set,
            entries: None,
            flamegraph: flamegraph
                .map(|path| OutputFile::create("--flamegraph", path))
                .transpose()?,
            pprof: pprof
                .map(|path| OutputFile::create("--pprof", path))
                .transpose()?,
            jvms: BTreeMap::new(),
            seconds: 0.0,
            start_ms: None,
            source: String::new(),
            carbon: BTreeSet::new(),
        }))
    }

    /// Starts the stacks at the entry points `rule` finds (`--root entry`).
    pub fn from_entries(self, rule: EntryRule) -> ViewFiles {
        ViewFiles {
            entries: Some(rule),
            ..self
        }
    }

    /// The energy gathered so far.
    pub fn profile(&self) -> EnergyProfile {
        EnergyProfile {
            jvms: self.jvms.values().cloned().collect(),
            set: self.set,
            seconds: self.seconds,
            start_ms: self.start_ms,
            power_source: Some(self.source.clone()),
            sampled: true,
            carbon: carbon_sources(&self.carbon),
            from_entries: false,
        }
    }
}

impl Sink for ViewFiles {
    fn cycle(&mut self, view: &CycleView<'_>) {
        let cycle = view.cycle;
        self.seconds += cycle.interval.seconds();
        if self.start_ms.is_none() {
            self.start_ms = Some(cycle.timestamp_ms - cycle.interval.millis());
        }
        if self.source.is_empty() {
            self.source = view.source.to_string();
        }
        self.carbon.extend(cycle.carbon.map(|carbon| carbon.source));
        for jvm in &view.jvms {
            let energy = self
                .jvms
                .entry((jvm.pid(), jvm.main_class.to_string()))
                .or_insert_with(|| JvmEnergy {
                    name: JvmEnergy::name_of(jvm.pid(), jvm.main_class),
                    branches: Default::default(),
                });
            for power in jvm.powers(self.set) {
                energy
                    .branches
                    .entry(power.name.to_string())
                    .or_default()
                    .add(Weight {
                        joules: power.energy.joules(),
                        samples: power.samples,
                        grams: cycle
                            .carbon
                            .map_or(0.0, |carbon| carbon.grams(power.energy)),
                    });
            }
        }
    }

    fn finish(&mut self, log: &dyn Log) -> Result<(), OutputError> {
        let profile = match &self.entries {
            Some(rule) => self.profile().from_entries(rule),
            None => self.profile(),
        };
        let what = format!(
            "{} ({}, {})",
            profile.subject(),
            format_joules(profile.joules()),
            profile.set.describe()
        );
        if let Some(file) = self.flamegraph.take() {
            let path = file.path().display().to_string();
            file.write(|out| flamegraph::write(&profile, out))?;
            log.log(
                Level::Info,
                &format!("The flame graph of {what} is in {path}."),
            );
        }
        if let Some(file) = self.pprof.take() {
            let path = file.path().display().to_string();
            file.write(|out| pprof::write(&profile, out))?;
            log.log(
                Level::Info,
                &format!("The pprof profile of {what} is in {path}."),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::sink::{one_jvm_cycle, one_jvm_view};
    use joularcode_core::attribution::CycleThreads;
    use joularcode_core::branch::Branches;
    use joularcode_core::carbon::Intensity;
    use joularcode_core::energy::{Interval, Power};
    use joularcode_core::log::Recorded;

    #[test]
    fn cycles_add_up_into_the_files_written_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let (svg, pb) = (dir.path().join("fg.svg"), dir.path().join("p.pb.gz"));
        let mut files = ViewFiles::create(Some(&svg), Some(&pb), BranchSet::All)
            .unwrap()
            .expect("files asked for");
        let mut branches = Branches::new::<&str>(&[]);
        let frame = branches.frame("a.A", "run");
        let branch = branches.branch(&[frame]);
        let mut samples = CycleThreads::default();
        samples.count(1, branch, 2);
        // The second cycle's energy (2 J) at 360 g/kWh is 0.2 mg of CO2e.
        for (timestamp_ms, grams_per_kwh) in [(10_500, None), (11_000, Some(360.0))] {
            let mut cycle = one_jvm_cycle(
                9,
                timestamp_ms,
                Interval::from_ns(500_000_000),
                vec![(branch, Power::from_watts(4.0))],
            );
            cycle.carbon = grams_per_kwh.map(|grams_per_kwh| Intensity {
                grams_per_kwh,
                source: IntensitySource::Constant,
            });
            files.cycle(&one_jvm_view(&cycle, &branches, &samples));
        }
        let profile = files.profile();
        assert_eq!((profile.seconds, profile.start_ms), (1.0, Some(10_000)));
        let weight = profile.jvms[0].branches["a.A.run"];
        assert_eq!((weight.joules, weight.samples), (4.0, 4));
        assert!((weight.grams - 0.0002).abs() < 1e-15, "{weight:?}");
        assert_eq!(profile.carbon.as_deref(), Some("constant"));
        let log = Recorded::default();
        files.finish(&log).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("Energy of JVM 9 (a.Main): 4.000 J in 1.0 s"));
        assert!(text.contains("power from vm (file /w)"));
        assert!(std::fs::metadata(&pb).unwrap().len() > 0);
        assert_eq!(log.messages().len(), 2, "{:?}", log.messages());
        assert!(ViewFiles::create(None, None, BranchSet::All)
            .unwrap()
            .is_none());
    }

    #[test]
    fn the_stacks_can_start_at_their_entry_points() {
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("fg.svg");
        let rule = EntryRule::new(&["a."], &[]);
        let mut files = ViewFiles::create(Some(&svg), None, BranchSet::All)
            .unwrap()
            .expect("a file asked for")
            .from_entries(rule);
        let mut branches = Branches::new(&["a."]);
        let frames = [
            branches.frame("java.lang.Thread", "run"),
            branches.frame("a.R", "route"),
            branches.frame("java.lang.reflect.Method", "invoke"),
            branches.frame("a.H", "handle"),
        ];
        let branch = branches.branch(&frames);
        let mut samples = CycleThreads::default();
        samples.count(1, branch, 2);
        let mut cycle = one_jvm_cycle(
            9,
            1000,
            Interval::from_ns(1_000_000_000),
            vec![(branch, Power::from_watts(2.0))],
        );
        // 2 J at 360 g/kWh: 0.2 mg of CO2e.
        cycle.carbon = Some(Intensity {
            grams_per_kwh: 360.0,
            source: IntensitySource::Constant,
        });
        files.cycle(&one_jvm_view(&cycle, &branches, &samples));
        files.finish(&Recorded::default()).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(
            text.contains("all branches, from their entry points"),
            "{text}"
        );
        assert!(
            text.contains("<title>a.H.handle (2.000 J, 200.000 µg CO2e, 100.00%)</title>"),
            "{text}"
        );
        assert!(!text.contains("a.R.route"), "{text}");
    }
}

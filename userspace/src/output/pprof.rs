//! pprof profiles (`profile.proto`, gzipped), read by `go tool pprof`, Grafana Pyroscope and
//! speedscope: one sample per branch (and JVM), its stack leaf first, with two values: its
//! energy, in nanojoules (the CSV files' precision), and the stack samples that caught it
//! (`record` only: the CSV files do not count samples). Each sample carries its JVM as the
//! label `jvm`; the profile's comments hold the title and the power source.
//!
//! The messages below are those of pprof's published `profile.proto` (package
//! `perftools.profiles`), with its field numbers.

use std::collections::HashMap;
use std::io::{self, Write};

use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;

use crate::profile::EnergyProfile;

/// `perftools.profiles.Profile`.
#[derive(Clone, PartialEq, Message)]
pub struct Profile {
    /// What each value of a sample is.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    /// The samples.
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// Every location a sample refers to.
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    /// Every function a location refers to.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// The strings the other fields index; the first is "".
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// When the profile starts, in Unix nanoseconds.
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// How long it lasts, in nanoseconds.
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// Free text about the profile (indexes into the string table).
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// The type of `sample_type` shown by default (an index into the string table).
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// `perftools.profiles.ValueType`.
#[derive(Clone, PartialEq, Message)]
pub struct ValueType {
    /// The type, e.g. `energy` (an index into the string table).
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// Its unit, e.g. `nanojoules` (an index into the string table).
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// `perftools.profiles.Sample`.
#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    /// The stack, leaf first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One value per sample type.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    /// Labels, such as the JVM.
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// `perftools.profiles.Label`.
#[derive(Clone, PartialEq, Message)]
pub struct Label {
    /// Its key (an index into the string table).
    #[prost(int64, tag = "1")]
    pub key: i64,
    /// Its text value (an index into the string table).
    #[prost(int64, tag = "2")]
    pub str: i64,
}

/// `perftools.profiles.Location`.
#[derive(Clone, PartialEq, Message)]
pub struct Location {
    /// Its id, from 1.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// The function there.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

/// `perftools.profiles.Line`.
#[derive(Clone, PartialEq, Message)]
pub struct Line {
    /// The function's id.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
}

/// `perftools.profiles.Function`.
#[derive(Clone, PartialEq, Message)]
pub struct Function {
    /// Its id, from 1.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Its name, `package.Class.method` (an index into the string table).
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// The same name, as the system names it.
    #[prost(int64, tag = "3")]
    pub system_name: i64,
}

/// Builds a [`Profile`]: its string table and one location per function.
#[derive(Default)]
struct Builder {
    profile: Profile,
    strings: HashMap<String, i64>,
    locations: HashMap<String, u64>,
}

impl Builder {
    fn new() -> Builder {
        let mut builder = Builder::default();
        builder.string("");
        builder
    }

    fn string(&mut self, text: &str) -> i64 {
        if let Some(&index) = self.strings.get(text) {
            return index;
        }
        let index = i64::try_from(self.profile.string_table.len()).unwrap_or(i64::MAX);
        self.profile.string_table.push(text.to_string());
        self.strings.insert(text.to_string(), index);
        index
    }

    /// The location of the function named `name`.
    fn location(&mut self, name: &str) -> u64 {
        if let Some(&id) = self.locations.get(name) {
            return id;
        }
        let id = self.profile.location.len() as u64 + 1;
        let name_index = self.string(name);
        self.profile.function.push(Function {
            id,
            name: name_index,
            system_name: name_index,
        });
        self.profile.location.push(Location {
            id,
            line: vec![Line { function_id: id }],
        });
        self.locations.insert(name.to_string(), id);
        id
    }
}

/// The pprof profile of `profile`.
pub fn profile(energy: &EnergyProfile) -> Profile {
    let mut builder = Builder::new();
    let mut types = vec![("energy", "nanojoules")];
    if energy.sampled {
        types.push(("samples", "count"));
    }
    for (kind, unit) in types {
        let value_type = ValueType {
            r#type: builder.string(kind),
            unit: builder.string(unit),
        };
        builder.profile.sample_type.push(value_type);
    }
    builder.profile.default_sample_type = builder.string("energy");
    let jvm_key = builder.string("jvm");
    for jvm in &energy.jvms {
        let jvm_name = builder.string(&jvm.name);
        let mut branches: Vec<_> = jvm.branches.iter().collect();
        branches.sort_by(|a, b| a.0.cmp(b.0));
        for (branch, weight) in branches {
            let location_id = branch
                .rsplit(';')
                .map(|frame| builder.location(frame))
                .collect();
            let mut value = vec![nanojoules(weight.joules)];
            if energy.sampled {
                value.push(i64::try_from(weight.samples).unwrap_or(i64::MAX));
            }
            builder.profile.sample.push(Sample {
                location_id,
                value,
                label: vec![Label {
                    key: jvm_key,
                    str: jvm_name,
                }],
            });
        }
    }
    builder.profile.time_nanos = energy.start_ms.map_or(0, |ms| ms.saturating_mul(1_000_000));
    builder.profile.duration_nanos = (energy.seconds * 1e9).round() as i64;
    for comment in [energy.title(), energy.subtitle()] {
        let index = builder.string(&comment);
        builder.profile.comment.push(index);
    }
    builder.profile
}

/// Joules as whole nanojoules.
fn nanojoules(joules: f64) -> i64 {
    let nanojoules = (joules * 1e9).round();
    if nanojoules.is_finite() {
        nanojoules as i64
    } else {
        0
    }
}

/// Writes the gzipped pprof profile of `energy` to `out`.
pub fn write(energy: &EnergyProfile, out: &mut dyn Write) -> io::Result<()> {
    let mut gzip = GzEncoder::new(out, Compression::default());
    gzip.write_all(&profile(energy).encode_to_vec())?;
    gzip.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{BranchSet, JvmEnergy, Weight};
    use std::io::Read;

    fn energy(sampled: bool) -> EnergyProfile {
        let weight = |joules, samples| Weight {
            joules,
            samples,
            grams: 0.0,
        };
        EnergyProfile {
            jvms: vec![JvmEnergy {
                name: "JVM 7 (a.Main)".into(),
                branches: HashMap::from([
                    ("t.run;a.A.hot".to_string(), weight(1.5, 30)),
                    ("t.run;a.A.cold".to_string(), weight(0.000000002, 1)),
                ]),
            }],
            set: BranchSet::All,
            seconds: 2.5,
            start_ms: Some(1_700_000_000_000),
            power_source: None,
            sampled,
            carbon: None,
            from_entries: false,
        }
    }

    #[test]
    fn one_sample_per_branch_leaf_first() {
        let profile = profile(&energy(true));
        let text = |index: i64| profile.string_table[index as usize].as_str();
        assert_eq!(text(0), "");
        let types: Vec<(&str, &str)> = profile
            .sample_type
            .iter()
            .map(|t| (text(t.r#type), text(t.unit)))
            .collect();
        assert_eq!(types, [("energy", "nanojoules"), ("samples", "count")]);
        assert_eq!(text(profile.default_sample_type), "energy");
        assert_eq!(profile.sample.len(), 2);
        let name = |location: u64| {
            let function = profile.location[location as usize - 1].line[0].function_id;
            text(profile.function[function as usize - 1].name)
        };
        let hot = &profile.sample[1];
        let stack: Vec<&str> = hot.location_id.iter().map(|&id| name(id)).collect();
        assert_eq!(stack, ["a.A.hot", "t.run"]);
        assert_eq!(hot.value, [1_500_000_000, 30]);
        assert_eq!(profile.sample[0].value, [2, 1]);
        assert_eq!(text(hot.label[0].key), "jvm");
        assert_eq!(text(hot.label[0].str), "JVM 7 (a.Main)");
        assert_eq!(profile.location.len(), 3, "t.run is one location");
        assert_eq!(profile.duration_nanos, 2_500_000_000);
        assert_eq!(profile.time_nanos, 1_700_000_000_000_000_000);
        assert!(text(profile.comment[0]).starts_with("Energy of JVM 7 (a.Main)"));
    }

    #[test]
    fn without_samples_energy_is_the_only_type_and_the_file_is_gzipped() {
        let mut out = Vec::new();
        write(&energy(false), &mut out).unwrap();
        let mut decoded = Vec::new();
        flate2::read::GzDecoder::new(&out[..])
            .read_to_end(&mut decoded)
            .unwrap();
        let profile = Profile::decode(&decoded[..]).unwrap();
        assert_eq!(profile.sample_type.len(), 1);
        assert!(profile.sample.iter().all(|sample| sample.value.len() == 1));
    }
}

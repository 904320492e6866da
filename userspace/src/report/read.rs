//! Reading a recording's Joular CSV files (ours or Joular Code for Java's) into the energy of
//! each branch, per results file, and its grams of CO2e when a carbon intensity was recorded
//! beside them ([`super::carbon`]).

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use joularcode_core::carbon::IntensitySource;
use joularcode_core::entry::EntryRule;
use joularcode_core::output::carbon::CARBON_HEADER;
use joularcode_core::output::csv::HEADER;
use thiserror::Error;

use super::carbon::{self, Intensities};
use crate::profile::{carbon_sources, BranchSet, EnergyProfile, JvmEnergy, Weight, NO_ENTRY};

/// What one results file holds.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct FileEnergy {
    /// Joules per branch.
    pub energy: HashMap<String, f64>,
    /// Grams of CO2e per branch, of the rows whose cycle has a carbon intensity.
    pub grams: HashMap<String, f64>,
    /// What the grams come from, when a carbon intensity was recorded.
    pub carbon: Option<CarbonTotals>,
    /// Rows read.
    pub rows: u64,
    /// Rows that could not be read (wrong number of fields, a value that is not a number).
    pub bad_rows: u64,
    /// The start of the first cycle and the end of the last, in Unix milliseconds, if any row
    /// says it.
    pub span_ms: Option<(i64, i64)>,
}

impl FileEnergy {
    /// The total energy, in joules.
    pub fn total(&self) -> f64 {
        self.energy.values().fold(0.0, |sum, joules| sum + joules)
    }

    /// The branches, most energy first (ties by name, so the order is stable).
    pub fn ranked(&self) -> Vec<(&str, f64)> {
        let mut ranked: Vec<(&str, f64)> = self
            .energy
            .iter()
            .map(|(name, joules)| (name.as_str(), *joules))
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        ranked
    }

    /// The total grams of CO2e.
    pub fn total_grams(&self) -> f64 {
        self.grams.values().fold(0.0, |sum, grams| sum + grams)
    }

    /// The same file's energy and grams of CO2e per entry point that `rule` finds in each
    /// branch (under [`NO_ENTRY`] for a branch without one).
    pub fn by_entry(&self, rule: &EntryRule) -> FileEnergy {
        let per_entry = |per_branch: &HashMap<String, f64>| {
            let mut per_entry: HashMap<String, f64> = HashMap::new();
            for (branch, amount) in per_branch {
                let entry = rule.find(branch).map_or(NO_ENTRY, |entry| entry.method);
                *per_entry.entry(entry.to_owned()).or_default() += amount;
            }
            per_entry
        };
        FileEnergy {
            energy: per_entry(&self.energy),
            grams: per_entry(&self.grams),
            carbon: self.carbon.clone(),
            rows: self.rows,
            bad_rows: self.bad_rows,
            span_ms: self.span_ms,
        }
    }

    /// Widens the span to the cycle that ended at `end_ms` and lasted `interval_s`.
    fn cover(&mut self, end_ms: i64, interval_s: f64) {
        let start_ms = end_ms.saturating_sub((interval_s * 1000.0).round() as i64);
        self.span_ms = Some(match self.span_ms {
            Some((start, end)) => (start.min(start_ms), end.max(end_ms)),
            None => (start_ms, end_ms),
        });
    }
}

/// Where the grams of CO2e of a results file come from.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct CarbonTotals {
    /// The sources of the intensities of its cycles.
    pub sources: BTreeSet<IntensitySource>,
    /// Rows whose cycle has no intensity recorded (it could not be read then): they have no
    /// grams.
    pub rows_without: u64,
}

/// Why a recording's results could not be read.
#[derive(Debug, Error)]
pub enum ReadError {
    /// The CSV header cannot be read.
    #[error("the header cannot be read: {0}")]
    Header(#[source] csv::Error),
    /// A `carbon-intensity.csv` that is not ours.
    #[error(
        "{}: its first line is not {CARBON_HEADER}: remove it, or give the results-path of a recording",
        path.display()
    )]
    CarbonHeader {
        /// The file.
        path: PathBuf,
    },
    /// The header lacks a column that every Joular results file has.
    #[error("the header has no {0} column: not a Joular results file ({HEADER})")]
    Column(&'static str),
    /// A results file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A results file is not a Joular results file.
    #[error("{}: {source}", path.display())]
    Content {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: Box<ReadError>,
    },
    /// The results folder cannot be listed.
    #[error(
        "cannot read the results folder {}: {source} (give the results-path of the recording)",
        path.display()
    )]
    Folder {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Neither the folder nor its folders hold the results file.
    #[error(
        "no {file} in {} or in its folders: is it the results-path of a recording?",
        path.display()
    )]
    NoResults {
        /// The file looked for.
        file: &'static str,
        /// The folder.
        path: PathBuf,
    },
}

/// Adds up the energy per branch of a Joular CSV file's text, and its grams of CO2e at the
/// `intensities` of its cycles, if they were recorded.
pub fn file_energy(text: &str, intensities: Option<&Intensities>) -> Result<FileEnergy, ReadError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_reader(text.as_bytes());
    let header = reader.headers().map_err(ReadError::Header)?.clone();
    let column = |name: &'static str| {
        header
            .iter()
            .position(|field| field == name)
            .ok_or(ReadError::Column(name))
    };
    let (timestamp, branch, energy, interval) = (
        column("timestamp")?,
        column("branch")?,
        column("energy_joules")?,
        column("interval_seconds")?,
    );
    let mut file = FileEnergy {
        carbon: intensities.map(|intensities| CarbonTotals {
            sources: intensities.sources(),
            rows_without: 0,
        }),
        ..FileEnergy::default()
    };
    for record in reader.records() {
        let row = record
            .ok()
            .filter(|record| record.len() == header.len())
            .and_then(|record| {
                let joules = record[energy].parse::<f64>().ok()?;
                let end_ms = record[timestamp].parse::<i64>().ok()?;
                let interval_s = record[interval].parse::<f64>().ok()?;
                (joules.is_finite() && interval_s.is_finite() && interval_s >= 0.0)
                    .then(|| (record[branch].to_string(), joules, end_ms, interval_s))
            });
        match row {
            Some((branch, joules, end_ms, interval_s)) => {
                if let (Some(intensities), Some(totals)) = (intensities, file.carbon.as_mut()) {
                    match intensities.grams(end_ms, joules) {
                        Some(grams) => *file.grams.entry(branch.clone()).or_default() += grams,
                        None => totals.rows_without += 1,
                    }
                }
                *file.energy.entry(branch).or_default() += joules;
                file.rows += 1;
                file.cover(end_ms, interval_s);
            }
            None => file.bad_rows += 1,
        }
    }
    Ok(file)
}

/// Reads the results file at `path`, and the carbon intensities recorded beside it.
pub fn read_file(path: &Path) -> Result<FileEnergy, ReadError> {
    let text = fs::read_to_string(path).map_err(|source| ReadError::File {
        path: path.to_path_buf(),
        source,
    })?;
    let intensities = carbon::read(path)?;
    file_energy(&text, intensities.as_ref()).map_err(|error| ReadError::Content {
        path: path.to_path_buf(),
        source: Box::new(error),
    })
}

/// The results files of `set` to read at `path`: `path` itself when it is a file, else
/// `path/<file>` when it exists, else `path/*/<file>` (one folder per JVM), sorted by path.
pub fn results_files(path: &Path, set: BranchSet) -> Result<Vec<PathBuf>, ReadError> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let file = set.file();
    let direct = path.join(file);
    if direct.is_file() {
        return Ok(vec![direct]);
    }
    let entries = fs::read_dir(path).map_err(|source| ReadError::Folder {
        path: path.to_path_buf(),
        source,
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path().join(file))
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(ReadError::NoResults {
            file,
            path: path.to_path_buf(),
        });
    }
    Ok(files)
}

/// How the views name the JVM whose results are in `file`: `JVM 12345 (com.example.Main)` for a
/// folder that `record` named `12345-com.example.Main`, else the folder's path.
pub fn jvm_name(file: &Path) -> String {
    let dir = file.parent().unwrap_or(Path::new("."));
    let folder = dir.file_name().and_then(|name| name.to_str()).unwrap_or("");
    match folder.split_once('-') {
        Some((pid, main)) if !main.is_empty() => match pid.parse::<u32>() {
            Ok(pid) => JvmEnergy::name_of(pid, main),
            Err(_) => dir.display().to_string(),
        },
        _ => dir.display().to_string(),
    }
}

/// The energy profile of the recording at `path` (a results folder, or one CSV file), from the
/// files of `set` (a CSV file given by name says its own set).
pub fn profile(path: &Path, set: BranchSet) -> Result<EnergyProfile, ReadError> {
    let set = if path.is_file() {
        path.file_name()
            .and_then(|name| name.to_str())
            .and_then(BranchSet::of_file)
            .unwrap_or(set)
    } else {
        set
    };
    let mut jvms = Vec::new();
    let mut span: Option<(i64, i64)> = None;
    let mut carbon = BTreeSet::new();
    for file in results_files(path, set)? {
        let energy = read_file(&file)?;
        if let Some((start, end)) = energy.span_ms {
            span = Some(span.map_or((start, end), |(s, e)| (s.min(start), e.max(end))));
        }
        if let Some(totals) = &energy.carbon {
            carbon.extend(&totals.sources);
        }
        let grams = energy.grams;
        jvms.push(JvmEnergy {
            name: jvm_name(&file),
            branches: energy
                .energy
                .into_iter()
                .map(|(branch, joules)| {
                    let grams = grams.get(&branch).copied().unwrap_or(0.0);
                    let weight = Weight {
                        joules,
                        samples: 0,
                        grams,
                    };
                    (branch, weight)
                })
                .collect(),
        });
    }
    Ok(EnergyProfile {
        jvms,
        set,
        seconds: span.map_or(0.0, |(start, end)| (end - start).max(0) as f64 / 1000.0),
        start_ms: span.map(|(start, _)| start),
        power_source: None,
        sampled: false,
        carbon: carbon_sources(&carbon),
        from_entries: false,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use joularcode_core::output::csv::{ALL_FILE, APP_FILE};

    /// Three cycles of 1 s ending at 2 s, 3 s and 3.5 s (the last one half a second long), and
    /// a row that cannot be read.
    pub(crate) const FILE: &str =
        "timestamp,branch,power_watts,energy_joules,interval_seconds,coverage\n\
        2000,a.A.run;a.A.x,3.000000000,3.000000000,1.000000000,1.0000\n\
        3000,\"a.A.run;a.A.y,z\",1.000000000,1.000000000,1.000000000,1.0000\n\
        3500,a.A.run;a.A.x,2.000000000,1.000000000,0.500000000,0.9000\n\
        4,broken\n";

    #[test]
    fn energy_is_summed_per_branch_over_the_span_of_the_cycles() {
        let file = file_energy(FILE, None).unwrap();
        assert_eq!((file.rows, file.bad_rows), (3, 1));
        assert_eq!(
            file.ranked(),
            vec![("a.A.run;a.A.x", 4.0), ("a.A.run;a.A.y,z", 1.0)]
        );
        assert_eq!(file.span_ms, Some((1000, 3500)));
        assert_eq!(file.total(), 5.0);
    }

    #[test]
    fn names_with_commas_quotes_and_line_ends_come_back_whole_from_the_csv_written() {
        use joularcode_core::output::csv::{escape, HEADER};
        let names = [
            "a.A.run;a.A.f,g",
            "a.A.run;a.A.\"quoted\"",
            "a.A.run;a.A.two\nlines\r\n",
            "a.A.run;a.A.wipe\x1b[2J\x07\u{202e}",
        ];
        let mut text = format!("{HEADER}\n");
        for (i, name) in names.iter().enumerate() {
            text.push_str(&format!(
                "{},{},1.000000000,{}.000000000,1.000000000,1.0000\n",
                1000 * (i + 1),
                escape(name),
                i + 1
            ));
        }
        let file = file_energy(&text, None).unwrap();
        assert_eq!(file.bad_rows, 0, "{text}");
        let mut read: Vec<&str> = file.ranked().into_iter().map(|(name, _)| name).collect();
        read.reverse();
        assert_eq!(read, names);
    }

    #[test]
    fn a_file_that_is_not_joulars_is_refused() {
        assert!(file_energy("a,b\n1,2\n", None)
            .unwrap_err()
            .to_string()
            .contains("header"));
    }

    #[test]
    fn columns_are_found_by_their_names() {
        let reordered = "branch,coverage,energy_joules,interval_seconds,power_watts,timestamp\n\
                         a.B.c,1.0,2.5,1.0,2.5,1700000001000\n";
        let file = file_energy(reordered, None).unwrap();
        assert_eq!(file.energy["a.B.c"], 2.5);
        assert_eq!(file.span_ms, Some((1_700_000_000_000, 1_700_000_001_000)));
    }

    #[test]
    fn files_are_found_directly_or_per_jvm() {
        let dir = tempfile::tempdir().unwrap();
        let err = results_files(dir.path(), BranchSet::App)
            .unwrap_err()
            .to_string();
        assert!(err.contains("is it the results-path"), "{err}");
        for jvm in ["20-b.Main", "10-a.Main"] {
            fs::create_dir(dir.path().join(jvm)).unwrap();
            fs::write(dir.path().join(jvm).join(APP_FILE), FILE).unwrap();
        }
        let files = results_files(dir.path(), BranchSet::App).unwrap();
        assert_eq!(
            files,
            vec![
                dir.path().join("10-a.Main").join(APP_FILE),
                dir.path().join("20-b.Main").join(APP_FILE)
            ]
        );
        let profile = profile(dir.path(), BranchSet::App).unwrap();
        let names: Vec<&str> = profile.jvms.iter().map(|jvm| jvm.name.as_str()).collect();
        assert_eq!(names, ["JVM 10 (a.Main)", "JVM 20 (b.Main)"]);
        assert_eq!((profile.seconds, profile.start_ms), (2.5, Some(1000)));
        assert_eq!(profile.joules(), 10.0);
        fs::write(dir.path().join(APP_FILE), FILE).unwrap();
        assert_eq!(
            results_files(dir.path(), BranchSet::App).unwrap(),
            vec![dir.path().join(APP_FILE)]
        );
        assert!(results_files(&dir.path().join("missing"), BranchSet::App).is_err());
    }

    #[test]
    fn a_file_given_by_name_says_its_set() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(ALL_FILE);
        fs::write(&path, FILE).unwrap();
        let profile = profile(&path, BranchSet::App).unwrap();
        assert_eq!(profile.set, BranchSet::All);
        assert_eq!(profile.jvms[0].name, dir.path().display().to_string());
        assert_eq!(
            jvm_name(Path::new("r/123-x.Main/f.csv")),
            "JVM 123 (x.Main)"
        );
        assert_eq!(jvm_name(Path::new("r/old-run/f.csv")), "r/old-run");
    }
}

//! The carbon intensity of each cycle of a results folder, read back from its
//! `carbon-intensity.csv` ([`joularcode_core::output::carbon`]), so that each row of Joular's
//! files gets its grams of CO2e: those of the cycle with its timestamp.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::Path;

use joularcode_core::carbon::{check, Intensity, IntensitySource};
use joularcode_core::energy::Energy;
use joularcode_core::output::carbon::{CARBON_FILE, CARBON_HEADER};

use super::read::ReadError;

/// The intensity of each cycle, by the timestamp of its rows.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Intensities {
    by_timestamp: HashMap<i64, Intensity>,
}

impl Intensities {
    /// The grams of CO2e of `joules` used in the cycle that ended at `timestamp_ms`, if its
    /// intensity was recorded.
    pub fn grams(&self, timestamp_ms: i64, joules: f64) -> Option<f64> {
        self.by_timestamp
            .get(&timestamp_ms)
            .map(|intensity| intensity.grams(Energy::from_joules(joules)))
    }

    /// The sources of the intensities recorded.
    pub fn sources(&self) -> BTreeSet<IntensitySource> {
        self.by_timestamp
            .values()
            .map(|intensity| intensity.source)
            .collect()
    }
}

/// The intensities recorded beside the results file `file` (in its folder), `None` when there
/// are none (no `carbon-intensity` was set, or the files are Joular Code for Java's). A row that
/// cannot be read is left out: its cycle's rows get no grams.
pub fn read(file: &Path) -> Result<Option<Intensities>, ReadError> {
    let path = file.parent().unwrap_or(Path::new(".")).join(CARBON_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    let text = fs::read_to_string(&path).map_err(|source| ReadError::File {
        path: path.clone(),
        source,
    })?;
    let mut lines = text.lines();
    if lines.next() != Some(CARBON_HEADER) {
        return Err(ReadError::CarbonHeader { path });
    }
    let mut intensities = Intensities::default();
    for line in lines {
        let fields: Vec<&str> = line.split(',').collect();
        let [timestamp, _, grams, source] = fields[..] else {
            continue;
        };
        let intensity = (|| {
            Some(Intensity {
                grams_per_kwh: check(grams.parse().ok()?).ok()?,
                source: IntensitySource::from_label(source)?,
            })
        })();
        if let (Ok(timestamp), Some(intensity)) = (timestamp.parse(), intensity) {
            intensities.by_timestamp.insert(timestamp, intensity);
        }
    }
    Ok(Some(intensities))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cycle_has_its_own_intensity() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("methods-power-app.csv");
        assert_eq!(read(&csv).unwrap(), None, "no file, no grams");
        fs::write(
            dir.path().join(CARBON_FILE),
            format!(
                "{CARBON_HEADER}\n1000,1.000000000,360,constant\n2000,1.000000000,36,file\n\
                 3000,1.0,-5,file\n4000,broken\n5000,1.0,5,elsewhere\n"
            ),
        )
        .unwrap();
        let intensities = read(&csv).unwrap().unwrap();
        assert_eq!(intensities.grams(1000, 10.0), Some(0.001));
        assert_eq!(intensities.grams(2000, 10.0), Some(0.0001));
        for unread in [3000, 4000, 5000, 6000] {
            assert_eq!(intensities.grams(unread, 10.0), None, "{unread}");
        }
        assert_eq!(
            intensities.sources(),
            BTreeSet::from([IntensitySource::Constant, IntensitySource::File])
        );
        fs::write(dir.path().join(CARBON_FILE), "a,b\n").unwrap();
        let error = read(&csv).unwrap_err().to_string();
        assert!(
            error.contains("its first line is not timestamp,"),
            "{error}"
        );
    }
}

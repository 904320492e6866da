//! The CPU packages' energy on Windows: the "Energy Meter" performance counters, which Windows 10
//! and 11 publish from the processor's RAPL counters (Energy Metering Interface) where the
//! machine has them, read through PDH.
//!
//! Each RAPL domain is an instance of the counter set (`RAPL_Package0_PKG`, `RAPL_Package0_PP0`,
//! `RAPL_Package0_DRAM`...), and its `Energy` counter is the energy used since boot, in
//! picowatt-hours. As on Linux, the package domains (`RAPL_Package<N>_PKG`) of every socket are
//! summed, and the others (cores, graphics, memory, platform) are left out. A counter lower than
//! before was reset (by a driver reload, say): the window counts 0 for it.
//!
//! The arithmetic is here and tested everywhere; reading the counters ([`Counters`]) is PDH's,
//! on Windows only.

use std::sync::Arc;

use super::{Clock, PowerError, PowerSource, Span};
use crate::energy::Energy;

/// Joules in one picowatt-hour.
pub const JOULES_PER_PICOWATT_HOUR: f64 = 3.6e-9;

/// The counter set and counter read, in the English names PDH takes whatever the system's
/// language.
pub const COUNTER_PATH: &str = "\\Energy Meter(*)\\Energy";

/// Whether an Energy Meter instance is a CPU package: `RAPL_Package<N>_PKG`, in any case.
pub fn is_package(instance: &str) -> bool {
    let upper = instance.to_ascii_uppercase();
    upper
        .strip_prefix("RAPL_PACKAGE")
        .and_then(|rest| rest.strip_suffix("_PKG"))
        .is_some_and(|number| !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()))
}

/// The energy counters of the instances, as read: (instance name, picowatt-hours since boot).
pub type Readings = Vec<(String, u64)>;

/// What reads the Energy Meter counters: PDH on Windows, a fake in tests.
pub trait Counters: Send {
    /// Every instance's `Energy` counter now.
    fn read(&mut self) -> Result<Readings, PowerError>;
}

/// The package energy between two readings, in joules: per package instance present in both,
/// the growth of its counter (0 when it went back), summed.
pub fn joules_between(before: &Readings, after: &Readings) -> f64 {
    let picowatt_hours: u64 = after
        .iter()
        .filter(|(name, _)| is_package(name))
        .filter_map(|(name, now)| {
            let (_, then) = before.iter().find(|(earlier, _)| earlier == name)?;
            Some(now.checked_sub(*then).unwrap_or(0))
        })
        .fold(0u64, u64::saturating_add);
    picowatt_hours as f64 * JOULES_PER_PICOWATT_HOUR
}

/// The CPU packages' power from the Energy Meter counters.
pub struct EnergyMeter {
    counters: Box<dyn Counters>,
    last: Readings,
    span: Span,
}

impl EnergyMeter {
    /// Reads `counters` once, as the start of the first window; fails when no package instance
    /// is among them.
    pub fn open(
        mut counters: Box<dyn Counters>,
        clock: Arc<dyn Clock>,
    ) -> Result<EnergyMeter, PowerError> {
        let last = counters.read()?;
        if !last.iter().any(|(name, _)| is_package(name)) {
            let names: Vec<&str> = last.iter().map(|(name, _)| name.as_str()).collect();
            return Err(PowerError::new(format!(
                "The Energy Meter counters have no CPU package (RAPL_Package<N>_PKG) among their instances ({}). Set power-source-type to vm or estimate.",
                if names.is_empty() { "none".to_owned() } else { names.join(", ") }
            )));
        }
        Ok(EnergyMeter {
            counters,
            last,
            span: Span::start(clock),
        })
    }
}

impl PowerSource for EnergyMeter {
    fn describe(&self) -> String {
        "energy-meter (the Energy Meter performance counters of the CPU packages)".to_owned()
    }

    fn watts(&mut self) -> Result<f64, PowerError> {
        // A failed reading leaves the last one, so the next success averages over the longer span
        let now = self.counters.read()?;
        let interval = self
            .span
            .next("The Energy Meter counters were read twice at the same instant.")?;
        let joules = joules_between(&self.last, &now);
        self.last = now;
        Ok((Energy::from_joules(joules) / interval).watts())
    }
}

/// The Energy Meter counters through PDH.
#[cfg(windows)]
pub mod pdh {
    use windows_sys::Win32::System::Performance::{
        PdhAddEnglishCounterW, PdhCloseQuery, PdhCollectQueryData, PdhGetRawCounterArrayW,
        PdhOpenQueryW, PDH_HCOUNTER, PDH_HQUERY, PDH_MORE_DATA, PDH_RAW_COUNTER_ITEM_W,
    };

    use super::{Counters, Readings, COUNTER_PATH};
    use crate::power::PowerError;

    /// A PDH query holding the `Energy` counter of every Energy Meter instance.
    pub struct Pdh {
        query: PDH_HQUERY,
        counter: PDH_HCOUNTER,
    }

    // SAFETY: PDH handles may be used from any thread, one at a time (the source is used by one).
    unsafe impl Send for Pdh {}

    /// A PDH status as an error that says what failed.
    fn failed(what: &str, status: u32) -> PowerError {
        PowerError::new(format!(
            "{what} failed with PDH status 0x{status:08X}: this machine publishes no Energy Meter performance counters. Set power-source-type to vm or estimate."
        ))
    }

    impl Pdh {
        /// Opens the query: fails when the machine has no Energy Meter counter set.
        pub fn open() -> Result<Pdh, PowerError> {
            let mut query: PDH_HQUERY = std::ptr::null_mut();
            // SAFETY: PdhOpenQueryW writes the query handle; a null data source means live data.
            let status = unsafe { PdhOpenQueryW(std::ptr::null(), 0, &mut query) };
            if status != 0 {
                return Err(failed("PdhOpenQuery", status));
            }
            let mut pdh = Pdh {
                query,
                counter: std::ptr::null_mut(),
            };
            let path: Vec<u16> = COUNTER_PATH.encode_utf16().chain([0]).collect();
            // SAFETY: the path is NUL-terminated UTF-16; the counter handle is written.
            let status =
                unsafe { PdhAddEnglishCounterW(pdh.query, path.as_ptr(), 0, &mut pdh.counter) };
            if status != 0 {
                return Err(failed(
                    &format!("Adding the counter {COUNTER_PATH}"),
                    status,
                ));
            }
            Ok(pdh)
        }
    }

    impl Counters for Pdh {
        fn read(&mut self) -> Result<Readings, PowerError> {
            // SAFETY: a query opened by PdhOpenQueryW.
            let status = unsafe { PdhCollectQueryData(self.query) };
            if status != 0 {
                return Err(failed("PdhCollectQueryData", status));
            }
            let (mut size, mut count) = (0u32, 0u32);
            // SAFETY: a null buffer asks for the size needed.
            let status = unsafe {
                PdhGetRawCounterArrayW(self.counter, &mut size, &mut count, std::ptr::null_mut())
            };
            if status != PDH_MORE_DATA {
                return Err(failed("PdhGetRawCounterArray", status));
            }
            // u64 words, so that the items in front of the names are aligned
            let mut buffer = vec![0u64; (size as usize).div_ceil(8) + 1];
            let items = buffer.as_mut_ptr().cast::<PDH_RAW_COUNTER_ITEM_W>();
            // SAFETY: the buffer holds at least `size` bytes.
            let status =
                unsafe { PdhGetRawCounterArrayW(self.counter, &mut size, &mut count, items) };
            if status != 0 {
                return Err(failed("PdhGetRawCounterArray", status));
            }
            let mut readings = Vec::with_capacity(count as usize);
            for index in 0..count as usize {
                // SAFETY: PDH wrote `count` items into the buffer, each name a NUL-terminated
                // UTF-16 string inside it.
                let (name, raw) = unsafe {
                    let item = &*items.add(index);
                    (wide_string(item.szName), item.RawValue)
                };
                // A counter that did not give valid data (status above 1) is left out of the sum
                if raw.CStatus <= 1 {
                    readings.push((name, u64::try_from(raw.FirstValue).unwrap_or(0)));
                }
            }
            Ok(readings)
        }
    }

    /// A NUL-terminated UTF-16 string.
    ///
    /// # Safety
    /// `text` is null or points to a NUL-terminated UTF-16 string.
    unsafe fn wide_string(text: *const u16) -> String {
        if text.is_null() {
            return String::new();
        }
        let mut len = 0;
        while *text.add(len) != 0 {
            len += 1;
        }
        String::from_utf16_lossy(std::slice::from_raw_parts(text, len))
    }

    impl Drop for Pdh {
        fn drop(&mut self) {
            // SAFETY: the query was opened by PdhOpenQueryW and is closed once.
            unsafe { PdhCloseQuery(self.query) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::power::ManualClock;
    use std::sync::Mutex;
    use std::time::Duration;

    #[test]
    fn package_instances_of_every_socket() {
        for (name, package) in [
            ("RAPL_Package0_PKG", true),
            ("rapl_package1_pkg", true),
            ("RAPL_Package0_PP0", false),
            ("RAPL_Package0_DRAM", false),
            ("RAPL_Package0_Core3_CORE", false),
            ("RAPL_Package_PKG", false),
            ("_Total", false),
        ] {
            assert_eq!(is_package(name), package, "{name}");
        }
    }

    /// Counters that give the readings pushed, in order.
    struct Fake(Arc<Mutex<Vec<Result<Readings, PowerError>>>>);

    impl Counters for Fake {
        fn read(&mut self) -> Result<Readings, PowerError> {
            self.0.lock().unwrap().remove(0)
        }
    }

    fn readings(values: &[(&str, u64)]) -> Result<Readings, PowerError> {
        Ok(values.iter().map(|&(n, v)| (n.to_owned(), v)).collect())
    }

    /// 1 J in picowatt-hours.
    const JOULE: u64 = 277_777_778;

    #[test]
    fn packages_are_summed_over_the_window_and_resets_count_nothing() {
        let queue = Arc::new(Mutex::new(vec![
            readings(&[
                ("RAPL_Package0_PKG", 0),
                ("RAPL_Package1_PKG", 0),
                ("RAPL_Package0_DRAM", 0),
            ]),
            readings(&[
                ("RAPL_Package0_PKG", 6 * JOULE),
                ("RAPL_Package1_PKG", 2 * JOULE),
                ("RAPL_Package0_DRAM", 50 * JOULE),
            ]),
            Err(PowerError::new("busy")),
            readings(&[
                ("RAPL_Package0_PKG", 10 * JOULE),
                ("RAPL_Package1_PKG", JOULE),
            ]),
        ]));
        let clock = Arc::new(ManualClock::new(0));
        let mut meter = EnergyMeter::open(Box::new(Fake(queue.clone())), clock.clone()).unwrap();
        assert!(meter.describe().starts_with("energy-meter"));
        clock.advance(Duration::from_secs(2));
        let watts = meter.watts().unwrap();
        assert!((watts - 4.0).abs() < 1e-6, "8 J over 2 s: {watts}");
        clock.advance(Duration::from_secs(1));
        assert_eq!(meter.watts().unwrap_err().message(), "busy");
        clock.advance(Duration::from_secs(1));
        // Package 1 went back: 0 for it; package 0 gave 4 J over the 2 s since the last success
        let watts = meter.watts().unwrap();
        assert!((watts - 2.0).abs() < 1e-6, "{watts}");
    }

    #[test]
    fn no_package_instance_is_refused_naming_those_there() {
        let queue = Arc::new(Mutex::new(vec![readings(&[("RAPL_Package0_DRAM", 1)])]));
        let error = EnergyMeter::open(Box::new(Fake(queue)), Arc::new(ManualClock::new(0)))
            .err()
            .unwrap();
        assert!(error.message().contains("(RAPL_Package0_DRAM)"), "{error}");
    }
}

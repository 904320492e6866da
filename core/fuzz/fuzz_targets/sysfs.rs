//! The sysfs text the RAPL sources read: a powercap counter, and the perf power PMU's event and
//! CPU list; then the energy between two counter readings, from the first 24 bytes.
#![no_main]

use std::path::Path;

use joularcode_core::power::{perf, rapl};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let text = String::from_utf8_lossy(bytes);
    let file = Path::new("/sys/class/powercap/intel-rapl:0/energy_uj");
    if let Ok(uj) = rapl::parse_microjoules(file, &text) {
        assert!(i64::try_from(uj).is_ok());
    }
    let _ = perf::parse_event_config(&text);
    let _ = perf::parse_cpu_list(&text);
    if let Some(words) = bytes.get(..24) {
        let word = |i: usize| u64::from_ne_bytes(words[i * 8..i * 8 + 8].try_into().unwrap());
        let (before, after, max) = (word(0), word(1), word(2));
        let energy = rapl::energy_between(before, after, max);
        if after >= before {
            assert_eq!(energy, after - before);
        } else {
            assert!(energy <= max / 2);
        }
    }
});

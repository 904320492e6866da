//! The text of /proc/stat.
#![no_main]

use joularcode_core::procstat;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(stat) = procstat::parse(&String::from_utf8_lossy(bytes)) {
        assert!(stat.cpu.busy <= stat.cpu.total);
    }
});

//! The start of a VM power file, in both formats.
#![no_main]

use std::path::Path;

use joularcode_core::config::VmFormat;
use joularcode_core::power::vm;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let start = &bytes[..bytes.len().min(vm::MAX_LINE_LENGTH + 1)];
    for format in [VmFormat::PowerJoular, VmFormat::Watts] {
        if let Ok(row) = vm::parse(Path::new("/host/vm.csv"), start, format) {
            assert!(row.power.is_finite() && row.power >= 0.0);
        }
    }
});

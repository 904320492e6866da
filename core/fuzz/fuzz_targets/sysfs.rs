//! See joularcode_core_fuzz::sysfs.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| joularcode_core_fuzz::sysfs(bytes));

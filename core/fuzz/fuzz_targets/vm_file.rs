//! See joularcode_core_fuzz::vm_file.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| joularcode_core_fuzz::vm_file(bytes));

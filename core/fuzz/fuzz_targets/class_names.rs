//! See joularcode_core_fuzz::class_names.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| joularcode_core_fuzz::class_names(bytes));

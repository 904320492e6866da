//! See joularcode_core_fuzz::proc_stat.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| joularcode_core_fuzz::proc_stat(bytes));

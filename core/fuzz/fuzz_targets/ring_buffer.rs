//! See joularcode_core_fuzz::ring_buffer.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| joularcode_core_fuzz::ring_buffer(bytes));

//! See joularcode_bpf_fuzz::hotspot_open.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| joularcode_bpf_fuzz::hotspot_open(bytes));

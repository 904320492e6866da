//! See joularcode_bpf_fuzz::endpoint.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| joularcode_bpf_fuzz::endpoint(bytes));

//! See joularcode_bpf_fuzz::nmethod_scopes.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| joularcode_bpf_fuzz::nmethod_scopes(bytes));

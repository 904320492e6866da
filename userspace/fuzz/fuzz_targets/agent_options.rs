//! See joularcode_bpf_fuzz::agent_options.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| joularcode_bpf_fuzz::agent_options(bytes));

//! See joularcode_bpf_fuzz::proc_files.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| joularcode_bpf_fuzz::proc_files(bytes));

//! See joularcode_bpf_fuzz::main_class.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| joularcode_bpf_fuzz::main_class(bytes));

//! Benchmarks of joularcode-bpf. They are run by hand (see bench/README.md), never as tests.

//! joularcode-core: what turns CPU power and stack samples into energy per Java branch, exactly as
//! Joular Code for Java does it. Pure Rust with no Linux-only code, so that both the eBPF profiler
//! and the JVMTI agent's fallback mode link it on every OS.

pub mod attribution;
pub mod branch;
pub mod carbon;
pub mod code_map;
pub mod config;
pub mod cpu_list;
pub mod cycle;
pub mod energy;
pub mod entry;
pub mod input;
pub mod log;
pub mod machine;
pub mod mutf8;
pub mod names;
pub mod output;
pub mod power;
pub mod procstat;
pub mod threads;
pub mod warnings;

//! joularcode-bpf: the Linux profiler. It samples JVM threads with eBPF, names their frames and
//! shares out the CPU power among Java branches with joularcode-core.

pub mod agent_library;
pub mod attach;
pub mod cli;
pub mod commands;
pub mod daemon;
pub mod discovery;
pub mod foreign;
pub mod hotspot;
pub mod jit;
pub mod launch;
pub mod output;
pub mod proc_files;
pub mod profile;
pub mod record;
pub mod report;
pub mod resolve;
pub mod sampler;
pub mod session;
pub mod signals;
pub mod thread_names;
pub mod top;

//! `joularcode-bpf record`: energy per Java branch for one JVM, a launched command, or every JVM
//! of the host, written in Joular Code for Java's CSV files (see docs/record.md).

pub mod cycle;
pub mod options;
pub mod results;
pub mod status;

//! Sinks fed by each cycle's result.

pub mod carbon;
pub mod csv;
pub mod java_float;
pub mod losses;
pub mod path;

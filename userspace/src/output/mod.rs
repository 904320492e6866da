//! Outputs fed by the profiler's results.

pub mod folded;

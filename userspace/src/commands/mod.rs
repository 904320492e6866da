//! The subcommands that run a profiling session.

pub mod stacks;

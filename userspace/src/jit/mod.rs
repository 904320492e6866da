//! Names of JIT-compiled code: the symbolizer agent's code map (with inline records and the time
//! each piece of code was valid), perf maps (the agent's, or the JDK's `Compiler.perfmap`), and
//! the removal of the code maps of JVMs that ended without their agent removing them.

pub mod codemap;
pub mod perfmap;
pub mod stale;

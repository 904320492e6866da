//! Names of JIT-compiled code: the symbolizer agent's code map (with inline records and the time
//! each piece of code was valid), and perf maps (the agent's, or the JDK's `Compiler.perfmap`).

pub mod codemap;
pub mod perfmap;

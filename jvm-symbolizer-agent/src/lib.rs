//! jvm-symbolizer-agent: a JVMTI agent that writes a code map of the JVM's JIT-compiled code.

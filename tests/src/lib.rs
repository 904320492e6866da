//! Helpers shared by the end-to-end tests: the JDKs, the Java workloads, and processes to run.

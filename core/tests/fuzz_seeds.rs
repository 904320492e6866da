//! The fuzz targets' checks (core/fuzz/checks.rs) on their seed corpora (core/fuzz/seeds) and on
//! random bytes: what `cargo +nightly fuzz` runs for hours, run here in a moment on stable.

#[path = "../fuzz/checks.rs"]
mod checks;

joularcode_testkit::fuzz_checks!(
    concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds"),
    properties,
    vm_file,
    ring_buffer,
    proc_stat,
    sysfs,
    class_names,
);

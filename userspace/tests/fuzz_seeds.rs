//! The fuzz targets' checks (userspace/fuzz/checks.rs) on their seed corpora
//! (userspace/fuzz/seeds) and on random bytes: what `cargo +nightly fuzz` runs for hours, run
//! here in a moment on stable. Every target reads what a JVM or its owner controls.

#[path = "../fuzz/checks.rs"]
mod checks;

use proptest::prelude::*;

joularcode_testkit::fuzz_checks!(
    concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds"),
    code_map,
    code_map_round_trip,
    perf_map,
    attach_reply,
    proc_files,
    main_class,
    agent_options,
    hotspot_open,
    nmethod_scopes,
    endpoint,
);

proptest! {
    #[test]
    fn a_code_map_with_random_records_passes(lines in proptest::collection::vec(
        "(M|L|R|U|S) [0-9a-f ]{0,30}(%[0-9A-F]{2}|[a-z.:,-]){0,12}", 0..40,
    )) {
        let mut text = b"\x80joularcode-code-map 2 monotonic 42\n".to_vec();
        for line in lines {
            text.extend_from_slice(line.as_bytes());
            text.push(b'\n');
        }
        checks::code_map(&text);
    }
}

//! The fuzz targets' checks (userspace/fuzz/checks.rs) on their seed corpora
//! (userspace/fuzz/seeds) and on random bytes: what `cargo +nightly fuzz` runs for hours, run
//! here in a moment on stable. Every target reads what a JVM or its owner controls.

#[path = "../fuzz/checks.rs"]
mod checks;

use proptest::prelude::*;

/// Runs `check` on every seed of `target`, of which there must be some.
fn replay(target: &str, check: fn(&[u8])) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(target);
    let seeds: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a seed").path())
        .collect();
    assert!(seeds.len() >= 3, "{}: too few seeds", dir.display());
    for seed in seeds {
        check(&std::fs::read(&seed).expect("a readable seed"));
    }
}

#[test]
fn the_seeds_pass_every_check() {
    replay("code_map", checks::code_map);
    replay("code_map_round_trip", checks::code_map_round_trip);
    replay("perf_map", checks::perf_map);
    replay("attach_reply", checks::attach_reply);
    replay("proc_files", checks::proc_files);
    replay("main_class", checks::main_class);
    replay("agent_options", checks::agent_options);
}

proptest! {
    #[test]
    fn random_bytes_pass_every_check(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        checks::code_map(&bytes);
        checks::code_map_round_trip(&bytes);
        checks::perf_map(&bytes);
        checks::attach_reply(&bytes);
        checks::proc_files(&bytes);
        checks::main_class(&bytes);
        checks::agent_options(&bytes);
    }

    #[test]
    fn a_code_map_with_random_records_passes(lines in proptest::collection::vec(
        "(M|L|R|U|S) [0-9a-f ]{0,30}(%[0-9A-F]{2}|[a-z.:,-]){0,12}", 0..40,
    )) {
        let mut text = b"\x80joularcode-code-map 1 monotonic 42\n".to_vec();
        for line in lines {
            text.extend_from_slice(line.as_bytes());
            text.push(b'\n');
        }
        checks::code_map(&text);
    }
}

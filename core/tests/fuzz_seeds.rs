//! The fuzz targets' checks (core/fuzz/checks.rs) on their seed corpora (core/fuzz/seeds) and on
//! random bytes: what `cargo +nightly fuzz` runs for hours, run here in a moment on stable.

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
    replay("properties", checks::properties);
    replay("vm_file", checks::vm_file);
    replay("ring_buffer", checks::ring_buffer);
    replay("proc_stat", checks::proc_stat);
    replay("sysfs", checks::sysfs);
    replay("class_names", checks::class_names);
}

proptest! {
    #[test]
    fn random_bytes_pass_every_check(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        checks::properties(&bytes);
        checks::vm_file(&bytes);
        checks::ring_buffer(&bytes);
        checks::proc_stat(&bytes);
        checks::sysfs(&bytes);
        checks::class_names(&bytes);
    }
}

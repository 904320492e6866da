//! The cases of Joular Code for Java's LinuxRaplTest, on fake powercap trees with an injected clock.
//! Zone names hold a `:`, which Windows file names cannot: the fake trees need a Unix.
#![cfg(unix)]

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use joularcode_core::log::{Level, Recorded};
use joularcode_core::power::rapl::{
    access_denied, energy_between, parse_microjoules, read_error, Rapl,
};
use joularcode_core::power::{ManualClock, PowerSource};

const MAX: u64 = 262_143_328_850;

fn zone(root: &Path, dir: &str, name: &str, energy: u64) {
    let dir = root.join(dir);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("name"), format!("{name}\n")).unwrap();
    fs::write(dir.join("max_energy_range_uj"), format!("{MAX}\n")).unwrap();
    fs::write(dir.join("energy_uj"), format!("{energy}\n")).unwrap();
}

fn set_energy(root: &Path, dir: &str, text: &str) {
    fs::write(root.join(dir).join("energy_uj"), text).unwrap();
}

fn open(root: &Path) -> (Rapl, Arc<ManualClock>, Recorded) {
    let clock = Arc::new(ManualClock::new(1_746_000_000));
    let log = Recorded::default();
    let rapl = Rapl::open(root, clock.clone(), &log).unwrap();
    (rapl, clock, log)
}

#[test]
fn linux_rapl_test_4_joules_over_2_seconds_is_2_watts() {
    let tree = tempfile::tempdir().unwrap();
    zone(tree.path(), "intel-rapl:0", "package-0", 1_000_000);
    let (mut rapl, clock, log) = open(tree.path());
    assert_eq!(rapl.describe(), "rapl (powercap)");
    assert_eq!(
        log.messages(),
        vec![(
            Level::Info,
            format!(
                "Reading CPU power from Linux RAPL: [{}]",
                tree.path().join("intel-rapl:0").display()
            )
        )]
    );
    set_energy(tree.path(), "intel-rapl:0", "5000000\n");
    clock.advance(Duration::from_secs(2));
    assert_eq!(rapl.watts().unwrap(), 2.0);
    assert!(!rapl.window_over(Duration::from_millis(999)));
    assert!(rapl.window_over(Duration::from_secs(1)));
}

#[test]
fn linux_rapl_test_sums_every_package_but_not_core_dram_or_psys() {
    let tree = tempfile::tempdir().unwrap();
    zone(tree.path(), "intel-rapl:1", "package-1", 0);
    zone(tree.path(), "intel-rapl:0", "package-0", 0);
    zone(tree.path(), "intel-rapl:0:0", "core", 0);
    zone(tree.path(), "intel-rapl:0:2", "dram", 0);
    zone(tree.path(), "intel-rapl:2", "psys", 0);
    zone(tree.path(), "intel-rapl-mmio:0", "package-0", 0);
    let (mut rapl, clock, log) = open(tree.path());
    let message = &log.messages()[0].1;
    let zero = tree.path().join("intel-rapl:0").display().to_string();
    let one = tree.path().join("intel-rapl:1").display().to_string();
    assert_eq!(
        message,
        &format!("Reading CPU power from Linux RAPL: [{zero}, {one}]")
    );
    set_energy(tree.path(), "intel-rapl:0", "1000000");
    set_energy(tree.path(), "intel-rapl:1", "3000000");
    for sub in [
        "intel-rapl:0:0",
        "intel-rapl:0:2",
        "intel-rapl:2",
        "intel-rapl-mmio:0",
    ] {
        set_energy(tree.path(), sub, "50000000");
    }
    clock.advance(Duration::from_secs(1));
    assert_eq!(rapl.watts().unwrap(), 4.0);
}

#[test]
fn linux_rapl_test_a_wrap_is_counted() {
    let tree = tempfile::tempdir().unwrap();
    zone(tree.path(), "intel-rapl:0", "package-0", MAX - 1_000_000);
    let (mut rapl, clock, _) = open(tree.path());
    set_energy(tree.path(), "intel-rapl:0", "1000000");
    clock.advance(Duration::from_secs(1));
    assert_eq!(rapl.watts().unwrap(), 2.0);
}

#[test]
fn linux_rapl_test_garbage_throws_and_leaves_the_counters_alone() {
    let tree = tempfile::tempdir().unwrap();
    zone(tree.path(), "intel-rapl:0", "package-0", 1_000_000);
    zone(tree.path(), "intel-rapl:1", "package-1", 0);
    let (mut rapl, clock, _) = open(tree.path());
    // package-1 reads fine each time; only package-0 is bad, and neither may move
    set_energy(tree.path(), "intel-rapl:1", "4000000");
    let energy0 = tree.path().join("intel-rapl:0").join("energy_uj");
    for (bad, expected) in [
        (
            "not-a-number".to_owned(),
            format!("Unexpected value in {}: 'not-a-number'.", energy0.display()),
        ),
        (
            "-1".to_owned(),
            format!("Unexpected value in {}: '-1'.", energy0.display()),
        ),
        (
            format!("{}", MAX + 1),
            format!(
                "RAPL counter {} is above its range: {} uJ.",
                energy0.display(),
                MAX + 1
            ),
        ),
    ] {
        set_energy(tree.path(), "intel-rapl:0", &bad);
        clock.advance(Duration::from_secs(1));
        assert_eq!(rapl.watts().unwrap_err().to_string(), expected);
    }
    // 8 J over the 4 s since the last good reading
    set_energy(tree.path(), "intel-rapl:0", "5000000");
    clock.advance(Duration::from_secs(1));
    assert_eq!(rapl.watts().unwrap(), 2.0);
}

#[test]
fn linux_rapl_test_a_reset_counts_0_then_counting_goes_on() {
    let tree = tempfile::tempdir().unwrap();
    zone(tree.path(), "intel-rapl:0", "package-0", 2_000_000);
    let (mut rapl, clock, _) = open(tree.path());
    set_energy(tree.path(), "intel-rapl:0", "1000000");
    clock.advance(Duration::from_secs(1));
    assert_eq!(rapl.watts().unwrap(), 0.0);
    set_energy(tree.path(), "intel-rapl:0", "4000000");
    clock.advance(Duration::from_secs(1));
    assert_eq!(rapl.watts().unwrap(), 3.0);
}

#[test]
fn linux_rapl_test_no_package_zone_or_a_malformed_range_makes_open_throw() {
    let clock = Arc::new(ManualClock::new(0));
    let log = Recorded::default();
    let tree = tempfile::tempdir().unwrap();
    zone(tree.path(), "intel-rapl:0", "psys", 0);
    zone(tree.path(), "intel-rapl:0:0", "package-0", 0);
    let error = Rapl::open(tree.path(), clock.clone(), &log).err().unwrap();
    assert_eq!(
        error.to_string(),
        format!("No RAPL package zone found in {}.", tree.path().display())
    );
    zone(tree.path(), "intel-rapl:1", "package-1", 0);
    let range = tree.path().join("intel-rapl:1").join("max_energy_range_uj");
    fs::write(&range, "lots\n").unwrap();
    let error = Rapl::open(tree.path(), clock.clone(), &log).err().unwrap();
    assert_eq!(
        error.to_string(),
        format!("Unexpected value in {}: 'lots'.", range.display())
    );
    let missing = tree.path().join("nothing");
    let error = Rapl::open(&missing, clock, &log).err().unwrap();
    assert!(error
        .to_string()
        .starts_with(&format!("Cannot read {}: ", missing.display())));
}

#[test]
fn linux_rapl_counters_are_read_as_javas_long_parse_long_reads_them() {
    let file = Path::new("/sys/class/powercap/intel-rapl:0/energy_uj");
    for (text, uj) in [
        ("123\n", 123),
        (" +5 ", 5),
        ("-0", 0),
        ("9223372036854775807", i64::MAX as u64),
    ] {
        assert_eq!(parse_microjoules(file, text), Ok(uj), "{text:?}");
    }
    for text in [
        "9223372036854775808",
        "18446744073709551615",
        "-1",
        "1.5",
        "",
        "0x10",
        "٣",
    ] {
        assert_eq!(
            parse_microjoules(file, text).unwrap_err().to_string(),
            format!("Unexpected value in {}: '{}'.", file.display(), text.trim()),
            "{text:?}"
        );
    }
}

#[test]
fn linux_rapl_test_energy_between() {
    assert_eq!(energy_between(100, 400, 1000), 300);
    assert_eq!(energy_between(400, 400, 1000), 0);
    assert_eq!(energy_between(900, 50, 1000), 150);
    assert_eq!(energy_between(100, 50, 1000), 0);
}

#[test]
fn linux_rapl_test_read_twice_at_the_same_instant_is_an_error() {
    let tree = tempfile::tempdir().unwrap();
    zone(tree.path(), "intel-rapl:0", "package-0", 0);
    let (mut rapl, _, _) = open(tree.path());
    assert_eq!(
        rapl.watts().unwrap_err().to_string(),
        "RAPL was read twice at the same instant."
    );
}

/// The tree of the root-only test, for the child that runs it as a user who is not root.
const ROOT_ONLY_TREE: &str = "JOULARCODE_RAPL_ROOT_ONLY_TREE";

/// What a user who is not root sees of a tree whose counter only root may read.
fn check_root_only(tree: &Path) {
    let energy = tree.join("intel-rapl:0").join("energy_uj");
    let log = Recorded::default();
    let error = Rapl::open(tree, Arc::new(ManualClock::new(0)), &log)
        .err()
        .expect("a counter only root may read");
    assert_eq!(
        error.to_string(),
        format!(
            "Cannot read {}. RAPL is only readable by root on most Linux systems: run as root, give \
             the user read access to the energy_uj files (for example with a udev rule), or run \
             PowerJoular with -r as root and set power-source-type=ringbuffer.",
            energy.display()
        )
    );
    assert_eq!(error, access_denied(&energy));
}

/// A counter only root may read (mode 000), opened by a user who is not root: as root, the test
/// runs itself again as `nobody` (uid 65534) to get the kernel's EACCES.
#[test]
fn linux_rapl_root_only_files_give_the_three_ways_out() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;

    if let Some(tree) = std::env::var_os(ROOT_ONLY_TREE) {
        check_root_only(Path::new(&tree));
        return;
    }
    let tree = tempfile::tempdir().unwrap();
    fs::set_permissions(tree.path(), fs::Permissions::from_mode(0o755)).unwrap();
    zone(tree.path(), "intel-rapl:0", "package-0", 0);
    let energy = tree.path().join("intel-rapl:0").join("energy_uj");
    fs::set_permissions(&energy, fs::Permissions::from_mode(0o000)).unwrap();
    // SAFETY: geteuid has no preconditions
    if unsafe { libc::geteuid() } != 0 {
        check_root_only(tree.path());
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "linux_rapl_root_only_files_give_the_three_ways_out",
            "--nocapture",
        ])
        .env(ROOT_ONLY_TREE, tree.path())
        .uid(65534)
        .gid(65534)
        .output()
        .expect("the test runs itself as nobody");
    assert!(
        output.status.success(),
        "as nobody: {}\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Any other error reading a counter (here a directory in its place) names the file and the reason.
#[test]
fn linux_rapl_a_counter_that_cannot_be_read_names_the_file() {
    let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
    let file = Path::new("/sys/class/powercap/intel-rapl:0/energy_uj");
    assert_eq!(read_error(file, &denied), access_denied(file));

    let tree = tempfile::tempdir().unwrap();
    zone(tree.path(), "intel-rapl:0", "package-0", 0);
    let energy = tree.path().join("intel-rapl:0").join("energy_uj");
    fs::remove_file(&energy).unwrap();
    fs::create_dir(&energy).unwrap();
    let log = Recorded::default();
    let error = Rapl::open(tree.path(), Arc::new(ManualClock::new(0)), &log)
        .err()
        .unwrap();
    assert!(error
        .to_string()
        .starts_with(&format!("Cannot read {}: ", energy.display())));
}

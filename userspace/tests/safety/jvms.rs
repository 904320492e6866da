//! Fake JVMs a user runs beside real ones (testkit's [`FakeJvm`]): one whose VMStructs tables
//! are larger than any HotSpot's, and one that never ends starting.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use joularcode_testkit::fake_jvm::{FakeJvm, Table};

use super::*;

/// The fake JVMs' program, built for `user` in a folder of its own (kept as long as the result).
fn fake_jvm(
    user: &User,
    table: Table,
) -> (tempfile::TempDir, joularcode_testkit::fake_jvm::Running) {
    let dir = tempfile::Builder::new()
        .prefix("jcsafe-fakejvm")
        .tempdir()
        .expect("a folder");
    let fake = FakeJvm::build(dir.path());
    let mut command = fake.command(table);
    user.run_as(&mut command);
    (dir, FakeJvm::spawn(command))
}

/// In ten runs here, record --duration 8 took 8.52 s at most (12 allowed), logged 8 cycles every
/// time (7 required) at most 1010 ms apart (2,000 allowed); the cycles without the real JVM and
/// record's peak memory are not known from these runs (printed from now on).
#[test]
fn a_fake_jvm_with_huge_tables_delays_no_other_jvm() {
    let _serial = serial();
    let user = User::create("fk");
    let (_dir, fake) = fake_jvm(&user, Table::Huge(131_072));
    let real = user_jvm(&user, "RecordBusy", &["1"]);
    let run = new_run();
    let duration = 8;
    let finished = watch(
        run.command(&["--all", "--duration", &duration.to_string()]),
        Duration::from_secs(duration),
        |_, _| {},
    );
    assert_eq!(finished.status.code(), Some(0), "{}", finished.stderr);
    // Loading the BPF programs comes before the duration's clock starts: a second or two.
    assert!(
        finished.wall < Duration::from_secs(duration + 4),
        "record --duration {duration} took {:?}",
        finished.wall
    );
    let cycles = run.cycles();
    let mut pids_by_cycle: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    for line in &cycles {
        let time = line["timestamp_ms"].as_u64().expect("a timestamp");
        let pid = line["pid"].as_u64().unwrap_or(0);
        pids_by_cycle.entry(time).or_default().insert(pid);
    }
    let times: Vec<u64> = pids_by_cycle.keys().copied().collect();
    let widest = times.windows(2).map(|pair| pair[1] - pair[0]).max();
    eprintln!(
        "record --duration {duration} took {:?}; {} cycles, at most {widest:?} ms apart",
        finished.wall,
        times.len()
    );
    assert!(times.len() >= duration as usize - 1, "cycles at {times:?}");
    for pair in times.windows(2) {
        assert!(
            pair[1] - pair[0] <= 2000,
            "the cycles kept no clock: {times:?}"
        );
    }
    let real_pid = u64::from(real.pid());
    let with_real = pids_by_cycle
        .values()
        .filter(|pids| pids.contains(&real_pid))
        .count();
    eprintln!(
        "the real JVM in {with_real} of {} cycles; record's peak resident memory {} KiB",
        times.len(),
        finished.peak_rss_kib
    );
    assert!(
        with_real + 1 >= times.len(),
        "the real JVM has a row in {with_real} of {} cycles",
        times.len()
    );
    let warning = format!("WARNING: JVM {} (", fake.pid());
    let said: Vec<&str> = finished
        .stderr
        .lines()
        .filter(|line| line.contains(&warning))
        .collect();
    assert_eq!(
        said.len(),
        1,
        "one warning names the fake JVM: {}",
        finished.stderr
    );
    assert!(said[0].contains("more than 4096 entries"), "{}", said[0]);
    assert!(
        !finished.stderr.contains("_of_a_table_larger"),
        "{}",
        finished.stderr
    );
    assert!(
        finished.peak_rss_kib < 100 * 1024,
        "record held {} KiB",
        finished.peak_rss_kib
    );
    drop(real);
    drop(fake);
}

#[test]
fn a_live_jvm_that_cannot_be_read_is_not_said_to_have_ended() {
    let _serial = serial();
    let user = User::create("fu");
    let (_dir, fake) = fake_jvm(&user, Table::Unset);
    let run = new_run();
    let finished = watch(
        run.command(&["--pid", &fake.pid().to_string(), "--duration", "3"]),
        Duration::from_secs(3),
        |_, _| {},
    );
    let stderr = &finished.stderr;
    assert!(!stderr.contains("ended before"), "{stderr}");
    let expected = format!(
        "WARNING: No JVM was profiled: JVM {} (fakejava) is running but could not be read: \
         the JVM is not initialised yet (gHotSpotVMStructs is not set yet): try again in a moment.",
        fake.pid()
    );
    assert!(stderr.contains(&expected), "{expected}: {stderr}");
    drop(fake);
}

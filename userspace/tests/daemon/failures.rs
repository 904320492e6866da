//! One JVM that fails never stops the daemon nor stalls the others: a fake JVM of a local user
//! with tables larger than any HotSpot's, and results folders that cannot be made (a link planted
//! where a JVM's folder would go, a full disk).

use std::path::Path;

use joularcode_testkit::fake_jvm::{FakeJvm, Table};
use joularcode_testkit::host::{Tmpfs, User};

use super::*;

/// The value of the series of `name` whose labels hold `pid="<pid>"`, if it is there.
fn of_pid(text: &str, name: &str, pid: u32) -> Option<f64> {
    let label = format!("pid=\"{pid}\"");
    Daemon::series(text, name)
        .into_iter()
        .find(|(labels, _)| labels.contains(&label))
        .map(|(_, value)| value)
}

/// The `joularcode_cycles` counter.
fn cycles(text: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix("joularcode_cycles_total "))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no joularcode_cycles_total: {text}"))
}

/// Whether the daemon's process still runs.
fn runs(daemon: &mut Daemon) -> bool {
    daemon
        .child
        .try_wait()
        .expect("the daemon's status")
        .is_none()
}

/// In ten runs here, the energy and the cycles stopped for 1.00 s at most (3 s allowed: 2.0 s to
/// spare) and the heap stayed under 4 MB (64 allowed).
#[test]
fn a_fake_jvm_with_huge_tables_stalls_no_cycle_of_the_daemon() {
    let _serial = serial();
    let mut daemon = Daemon::start(&[]);
    let user = User::create("fd");
    let mut command = Jvm::command(&jdk(17), &[], "RecordBusy", &["1"]);
    user.run_as(&mut command);
    let real = Jvm::spawn(command);
    let start = Instant::now();
    while of_pid(
        &daemon.scrape(),
        "joularcode_jvm_energy_joules_total",
        real.pid(),
    )
    .is_none()
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the real JVM is never profiled: {}",
            daemon.said()
        );
        sleep(Duration::from_millis(250));
    }
    let dir = tempfile::tempdir().expect("a folder");
    let fake_jvm = FakeJvm::build(dir.path());
    let mut command = fake_jvm.command(Table::Huge(131_072));
    user.run_as(&mut command);
    let fake = FakeJvm::spawn(command);
    // The real JVM's energy and the cycles advance every 3 s at least, for 15 s.
    let start = Instant::now();
    let (mut energy, mut cycle) = (0.0, 0.0);
    let mut last_advance = Instant::now();
    let (mut most_memory, mut longest_stop) = (0, Duration::ZERO);
    while start.elapsed() < Duration::from_secs(15) {
        sleep(Duration::from_millis(500));
        assert!(runs(&mut daemon), "the daemon ended: {}", daemon.said());
        let text = daemon.scrape();
        let now = (
            of_pid(&text, "joularcode_jvm_energy_joules_total", real.pid()).unwrap_or(0.0),
            cycles(&text),
        );
        longest_stop = longest_stop.max(last_advance.elapsed());
        if now.0 > energy && now.1 > cycle {
            last_advance = Instant::now();
        }
        (energy, cycle) = now;
        assert!(
            last_advance.elapsed() < Duration::from_secs(3),
            "the real JVM's energy ({energy} J) and the cycles ({cycle}) stopped for 3 s, at {:?} \
             after the fake JVM started: {}",
            start.elapsed(),
            daemon.said()
        );
        most_memory = most_memory.max(daemon.memory()[1]);
    }
    eprintln!(
        "the real JVM's energy and the cycles stopped for {longest_stop:?} at most; the \
         daemon's heap at most {} MB",
        most_memory >> 20
    );
    assert!(energy > 0.0, "the real JVM is profiled: {}", daemon.said());
    assert!(
        most_memory < 64 << 20,
        "the daemon's heap grew to {} MB",
        most_memory >> 20
    );
    let said = daemon.said();
    let warnings = said
        .lines()
        .filter(|line| line.contains(&format!("WARNING: JVM {} (", fake.pid())))
        .count();
    assert_eq!(warnings, 1, "one warning names the fake JVM: {said}");
    assert!(!said.contains("_of_a_table_larger"), "{said}");
    drop(real);
    drop(fake);
}

/// Two JVMs in a cgroup of their own, the daemon watching that cgroup with its results in
/// `results`; `plant` is called with the JVMs' pids before the daemon starts. Returns the cgroup
/// (to drop last: it is removed once the JVMs have ended), the daemon after it ran 10 s, still
/// serving the JVMs' energy (which advanced), and the JVMs.
fn daemon_with_results(
    results: &Path,
    plant: impl FnOnce(u32, u32),
) -> (TestCgroup, Daemon, Jvm, Jvm) {
    let cgroup = TestCgroup::new(
        &format!("/joularcode-folders-{}", std::process::id()),
        &format!("/joularcode-folders-{}", std::process::id()),
    );
    let busy = || Jvm::command(&jdk(17), &[], "RecordBusy", &["1"]);
    let first = Jvm::spawn(cgroup.command(&busy()));
    let second = Jvm::spawn(cgroup.command(&busy()));
    plant(first.pid(), second.pid());
    let results = results.to_str().expect("a UTF-8 path");
    let mut daemon = Daemon::start(&["--cgroup", &cgroup.path, "--results-path", results]);
    let start = Instant::now();
    let mut energy = [0.0; 2];
    while start.elapsed() < Duration::from_secs(10) {
        sleep(Duration::from_millis(500));
        assert!(runs(&mut daemon), "the daemon ended: {}", daemon.said());
        let text = daemon.scrape();
        for (jvm, energy) in [&first, &second].into_iter().zip(&mut energy) {
            *energy = of_pid(&text, "joularcode_jvm_energy_joules_total", jvm.pid()).unwrap_or(0.0);
        }
    }
    assert!(
        energy.iter().all(|&joules| joules > 0.0),
        "both JVMs' energy is served ({energy:?}): {}",
        daemon.said()
    );
    (cgroup, daemon, first, second)
}

/// The SEVERE lines of `said` that name JVM `pid`.
fn severe_of(said: &str, pid: u32) -> usize {
    let name = format!("SEVERE: JVM {pid} (");
    said.lines().filter(|line| line.contains(&name)).count()
}

#[test]
fn a_link_planted_where_a_jvms_folder_goes_stops_only_that_jvms_results() {
    let _serial = serial();
    let user = User::create("fl");
    let results = tempfile::tempdir().expect("a results folder");
    let elsewhere = user.home().to_path_buf();
    let (_cgroup, daemon, first, second) = daemon_with_results(results.path(), |first, _| {
        user.symlink(
            &elsewhere,
            &results.path().join(format!("{first}-RecordBusy")),
        );
    });
    let said = daemon.said();
    assert_eq!(severe_of(&said, first.pid()), 1, "{said}");
    assert_eq!(severe_of(&said, second.pid()), 0, "{said}");
    assert!(
        std::fs::read_dir(&elsewhere)
            .expect("the link's target")
            .next()
            .is_none(),
        "nothing is written through the link: {said}"
    );
    let rows = results
        .path()
        .join(format!("{}-RecordBusy", second.pid()))
        .join("methods-power-all.csv");
    let text = std::fs::read_to_string(&rows).unwrap_or_default();
    assert!(text.lines().count() > 1, "{}: {said}", rows.display());
    drop((daemon, first, second));
}

#[test]
fn a_full_disk_under_the_results_stops_no_jvm_nor_the_daemon() {
    let _serial = serial();
    let disk = Tmpfs::mount("64k");
    {
        use std::io::Write;
        let mut filler = std::fs::File::create(disk.path().join("filler")).expect("the filler");
        while filler.write_all(&[0; 4096]).is_ok() {}
    }
    let (_cgroup, daemon, first, second) = daemon_with_results(&disk.path(), |_, _| {});
    let said = daemon.said();
    for jvm in [&first, &second] {
        assert_eq!(severe_of(&said, jvm.pid()), 1, "{said}");
    }
    assert!(
        said.contains("No space left on device") && said.contains("Set results-path to"),
        "the folder and the fix are said: {said}"
    );
    drop((daemon, first, second));
}

//! The daemon's entry points: the two servlets of a webapp in Debian's Tomcat under `wrk` are
//! exported as entries with the split of their work, 3:1 by construction (`tests/entry.rs` holds
//! the same of `report`, and of a router of the application's own).

use super::*;
use joularcode_testkit::tomcat::{self, Tomcat, HEAVY, HEAVY_SHARE, LIGHT};

/// Samples counted between the two scrapes judged: a standard error of the split of half a point,
/// several within the 3 points allowed (see `tests/entry.rs`).
const SAMPLES: f64 = 8000.0;

/// The stack samples the daemon counted so far.
fn samples(text: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix("joularcode_samples_total "))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The energy of the entry points `a` and `b` of the JVM `pid` in a scrape, once both are
/// exported.
fn energy_of(text: &str, pid: u32, [a, b]: [&str; 2]) -> Option<(f64, f64)> {
    let series = Daemon::series(text, "joularcode_entry_energy_joules_total");
    let of = |entry: &str| {
        series.iter().find_map(|(labels, joules)| {
            (labels.contains(&format!("pid=\"{pid}\""))
                && labels.contains(&format!("entry=\"{entry}\"")))
            .then_some(*joules)
        })
    };
    Some((of(a)?, of(b)?))
}

/// What the entry points `entries` of the JVM `pid` gained over [`SAMPLES`] samples, from the
/// scrape where both are exported on (a counter starts at 0 when its name joins the exported
/// ones): `a`'s share of the two, and the last scrape.
fn share_gained(daemon: &Daemon, pid: u32, entries: [&str; 2]) -> (f64, String) {
    let start = Instant::now();
    let (first, first_samples) = loop {
        let text = daemon.scrape();
        if let Some(energy) = energy_of(&text, pid, entries) {
            break (energy, samples(&text));
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{entries:?} are not exported: {text}"
        );
        sleep(Duration::from_millis(500));
    };
    loop {
        sleep(Duration::from_millis(500));
        let text = daemon.scrape();
        if samples(&text) - first_samples >= SAMPLES {
            let last = energy_of(&text, pid, entries).expect("the entries stay exported");
            let (a, b) = (last.0 - first.0, last.1 - first.1);
            eprintln!("{entries:?}: {a:.3} J, {b:.3} J");
            return (a / (a + b), text);
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "{} samples counted of the {SAMPLES} awaited: {text}",
            samples(&text) - first_samples
        );
    }
}

/// The daemon watching only the cgroup `cgroup`, with the application's `prefix`, at 500 Hz.
fn daemon_of(cgroup: &TestCgroup, prefix: &str) -> Daemon {
    Daemon::start(&[
        "--cgroup",
        &cgroup.path,
        "--methods-filtering-prefix",
        prefix,
        "--stack-monitoring-sample-rate",
        "2",
    ])
}

/// In ten runs here, HeavyServlet's share of the servlets' gained energy was 74.6 to 75.4%: at
/// least 2.6 points inside the 3 allowed.
#[test]
fn tomcats_servlets_are_exported_as_entries_with_their_known_split() {
    let _serial = serial();
    let name = format!("/joularcode-tomcat-{}", std::process::id());
    let cgroup = TestCgroup::new(&name, &name);
    let daemon = daemon_of(&cgroup, tomcat::PREFIX);
    let tomcat = Tomcat::start_with(|command| cgroup.command(&command));
    let _wrk = tomcat.load(2, 120);
    let (share, text) = share_gained(&daemon, tomcat.pid(), [HEAVY, LIGHT]);
    assert!(
        (share - HEAVY_SHARE).abs() <= 0.03,
        "{HEAVY} has {share:.3} of the servlets' energy, not {HEAVY_SHARE}: {text}"
    );
}

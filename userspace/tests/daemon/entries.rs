//! The daemon's entry points: `EntryRouter`'s handlers, called by reflection and through a
//! method reference, are exported as entries with the split of their work, 3:1 by construction.

use super::*;
use joularcode_testkit::entry_router::{JVM_ARGS, MAIN, ORDERS, ORDERS_SHARE, PREFIX, USERS};

/// Samples counted between the two scrapes judged: a standard error of the split below a point.
const SAMPLES: f64 = 4000.0;

/// The stack samples the daemon counted so far.
fn samples(text: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix("joularcode_samples_total "))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The energy of `jvm`'s entry points `ORDERS` and `USERS` in a scrape, once both are exported.
fn handlers(text: &str, jvm: &Jvm) -> Option<(f64, f64)> {
    let series = Daemon::series(text, "joularcode_entry_energy_joules_total");
    let of = |handler: &str| {
        series.iter().find_map(|(labels, joules)| {
            (labels.contains(&format!("pid=\"{}\"", jvm.pid()))
                && labels.contains(&format!("entry=\"{handler}\"")))
            .then_some(*joules)
        })
    };
    Some((of(ORDERS)?, of(USERS)?))
}

#[test]
fn a_routers_handlers_are_exported_as_entries_with_their_known_split() {
    let _serial = serial();
    let name = format!("/joularcode-entries-{}", std::process::id());
    let cgroup = TestCgroup::new(&name, &name);
    let daemon = Daemon::start(&[
        "--cgroup",
        &cgroup.path,
        "--methods-filtering-prefix",
        PREFIX,
        "--stack-monitoring-sample-rate",
        "2",
    ]);
    let jvm = Jvm::spawn(cgroup.command(&Jvm::command(&jdk(21), JVM_ARGS, MAIN, &[])));
    // Counters start at 0 when a name joins the exported ones: the split is judged on what both
    // gained between two scrapes once both are exported.
    let start = Instant::now();
    let (first, first_samples) = loop {
        let text = daemon.scrape();
        if let Some(energy) = handlers(&text, &jvm) {
            break (energy, samples(&text));
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the handlers are not exported: {text}"
        );
        sleep(Duration::from_millis(500));
    };
    let (last, text) = loop {
        sleep(Duration::from_millis(500));
        let text = daemon.scrape();
        if samples(&text) - first_samples >= SAMPLES {
            break (
                handlers(&text, &jvm).expect("the handlers stay exported"),
                text,
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "{} samples counted of the {SAMPLES} awaited: {text}",
            samples(&text) - first_samples
        );
    };
    let (orders, users) = (last.0 - first.0, last.1 - first.1);
    let share = orders / (orders + users);
    eprintln!("{ORDERS} {orders:.3} J, {USERS} {users:.3} J: {share:.3}");
    assert!(
        (share - ORDERS_SHARE).abs() <= 0.03,
        "{ORDERS} has {share:.3} of the handlers' energy, not {ORDERS_SHARE}: {text}"
    );
    let entries = Daemon::series(&text, "joularcode_entry_energy_joules_total");
    assert!(
        !entries.keys().any(|labels| labels.contains("$Router")),
        "the router is an entry: {entries:?}"
    );
}

//! The meters of Windows and macOS, and what `auto` picks there, tested on Linux:
//! powermetrics' text output as Apple documents it, for Apple silicon and Intel (captures in
//! `tests/powermetrics/`), read from a stand-in program that prints it; the Energy Meter
//! counters' absence (their arithmetic is tested in the module; PDH itself runs in the Windows
//! end-to-end test, under Wine).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use joularcode_core::config::Config;
use joularcode_core::log::{Level, Recorded};
use joularcode_core::power::powermetrics::{Parser, Sample};
use joularcode_core::power::{open, ManualClock, Platform, PowerError, PowerSource, SystemRoots};

/// The samples of a capture.
fn samples(capture: &str) -> Vec<Sample> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/powermetrics")
        .join(capture);
    let text = fs::read_to_string(&path).unwrap();
    let mut parser = Parser::default();
    text.lines().filter_map(|line| parser.line(line)).collect()
}

fn sample(elapsed_ms: f64, cpu_watts: f64) -> Sample {
    Sample {
        elapsed_ms,
        cpu_watts,
    }
}

#[test]
fn powermetrics_apple_silicon_gives_the_cpu_clusters_power() {
    assert_eq!(
        samples("apple_silicon.txt"),
        [
            sample(1003.51, 2.847),
            sample(996.49, 1.153),
            sample(1000.0, 4.0)
        ]
    );
}

#[test]
fn powermetrics_intel_gives_the_package_power() {
    assert_eq!(
        samples("intel.txt"),
        [
            sample(1004.2, 7.32),
            sample(995.8, 2.68),
            sample(1000.0, 12.5)
        ]
    );
}

/// A machine of `platform` with nothing to measure but what a test adds.
struct Machine {
    dir: tempfile::TempDir,
    roots: SystemRoots,
}

impl Machine {
    fn new(platform: Platform) -> Machine {
        let dir = tempfile::tempdir().unwrap();
        let roots = SystemRoots {
            powercap: dir.path().join("sys/class/powercap"),
            event_source: dir.path().join("sys/bus/event_source"),
            proc: PathBuf::from("/proc"),
            ringbuffer: dir.path().join("powerjoular"),
            powermetrics: dir.path().join("powermetrics"),
            platform,
            root: true,
        };
        Machine { dir, roots }
    }

    /// A stand-in for powermetrics: a script that prints the header and the first `samples`
    /// samples of `capture` (or `stderr` on its standard error and fails), then waits to be
    /// killed.
    fn powermetrics(&self, capture: &str, samples: usize, stderr: Option<&str>) {
        let capture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/powermetrics")
            .join(capture);
        let body = match stderr {
            Some(message) => format!("echo '{message}' >&2\nexit 1\n"),
            None => format!(
                "test \"$*\" = '--samplers cpu_power -i 1000' || exit 2\nawk '/^[*]+ Sampled system activity/ {{ n++ }} n <= {samples}' '{}'\nexec sleep 60\n",
                capture.display()
            ),
        };
        fs::write(&self.roots.powermetrics, format!("#!/bin/sh\n{body}")).unwrap();
        fs::set_permissions(&self.roots.powermetrics, fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn open(
        &self,
        settings: &[(&str, &str)],
    ) -> (Result<Box<dyn PowerSource>, PowerError>, Recorded) {
        let log = Recorded::default();
        let mut config = Config::default();
        for (key, value) in settings {
            config.set(key, value, &log).unwrap();
        }
        let source = open(&config, &self.roots, Arc::new(ManualClock::new(0)), &log);
        (source, log)
    }
}

/// Waits until `source`'s window is over (a sample came), at most 10 s.
fn wait_for_sample(source: &dyn PowerSource) {
    let start = Instant::now();
    while !source.window_over(Duration::ZERO) {
        assert!(start.elapsed() < Duration::from_secs(10), "no sample came");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn macos_auto_runs_powermetrics_as_root_and_weighs_its_samples() {
    let machine = Machine::new(Platform::MacOs);
    // The header and the first two samples of the Apple silicon capture
    machine.powermetrics("apple_silicon.txt", 2, None);
    let (source, log) = machine.open(&[]);
    let mut source = source.expect("auto opens powermetrics");
    assert!(log.messages().is_empty(), "{:?}", log.messages());
    assert_eq!(
        source.describe(),
        format!(
            "powermetrics ({} --samplers cpu_power)",
            machine.roots.powermetrics.display()
        )
    );
    // Both samples come at once: read in one window, their average weighted by their lengths;
    // or, if the second was not in yet, one window each
    wait_for_sample(&*source);
    let first = source.watts().unwrap();
    let both = (2.847 * 1003.51 + 1.153 * 996.49) / 2000.0;
    if (first - 2.847).abs() < 1e-12 {
        wait_for_sample(&*source);
        assert!((source.watts().unwrap() - 1.153).abs() < 1e-12);
    } else {
        assert!((first - both).abs() < 1e-12, "{first}");
    }
    assert!(!source.window_over(Duration::from_millis(1999)));
    assert!(source.window_over(Duration::from_secs(2)));
    let error = source.watts().unwrap_err();
    assert_eq!(error.message(), "powermetrics gave no sample for 2 s.");
}

#[test]
fn powermetrics_that_stops_says_what_it_said() {
    let machine = Machine::new(Platform::MacOs);
    machine.powermetrics(
        "intel.txt",
        0,
        Some("powermetrics must be invoked as the superuser"),
    );
    let (source, _) = machine.open(&[("power-source-type", "powermetrics")]);
    let mut source = source.expect("it starts");
    let start = Instant::now();
    loop {
        let error = source.watts().unwrap_err();
        if error.message().contains("has stopped") {
            assert_eq!(
                error.message(),
                format!(
                    "powermetrics ({}) has stopped: it said: powermetrics must be invoked as the superuser",
                    machine.roots.powermetrics.display()
                )
            );
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{error}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn macos_auto_without_powermetrics_estimates_and_says_where_it_looked() {
    let machine = Machine::new(Platform::MacOs);
    let (source, log) = machine.open(&[]);
    assert_eq!(
        source.expect("the estimate").describe(),
        "estimate (from the CPU utilisation)"
    );
    let (level, warning) = &log.messages()[0];
    assert_eq!(*level, Level::Warning);
    assert!(
        warning.starts_with(&format!(
            "No power meter was found: no powermetrics at {} that this user may run (it needs root), no PowerJoular ring buffer at {}.",
            machine.roots.powermetrics.display(),
            machine.roots.ringbuffer.display()
        )),
        "{warning}"
    );
}

#[test]
fn powermetrics_without_root_is_refused_and_auto_estimates() {
    let mut machine = Machine::new(Platform::MacOs);
    machine.roots.root = false;
    machine.powermetrics("apple_silicon.txt", 2, None);
    let (source, _) = machine.open(&[("power-source-type", "powermetrics")]);
    assert_eq!(
        source.err().unwrap().message(),
        "powermetrics only runs as root: run as root (sudo), or set power-source-type to estimate, or to ringbuffer with PowerJoular."
    );
    let (source, _) = machine.open(&[]);
    assert_eq!(
        source.expect("the estimate").describe(),
        "estimate (from the CPU utilisation)"
    );
}

#[test]
fn windows_auto_without_energy_meter_estimates_and_says_so() {
    let machine = Machine::new(Platform::Windows);
    let (source, log) = machine.open(&[]);
    assert_eq!(
        source.expect("the estimate").describe(),
        "estimate (from the CPU utilisation)"
    );
    assert!(log.messages()[0]
        .1
        .starts_with("No power meter was found: no Energy Meter performance counters, no PowerJoular ring buffer at "));
    // A ring buffer there is read rather than estimating
    fs::write(&machine.roots.ringbuffer, [0u8; 248]).unwrap();
    let (source, _) = machine.open(&[]);
    assert!(source.unwrap().describe().starts_with("ringbuffer "));
    drop(machine.dir);
}

#[test]
fn each_meter_only_on_its_platform() {
    for (platform, kind, expected) in [
        (
            Platform::Linux,
            "energy-meter",
            "power-source-type=energy-meter only works on Windows. Use auto instead.",
        ),
        (
            Platform::Linux,
            "powermetrics",
            "power-source-type=powermetrics only works on macOS. Use auto instead.",
        ),
        (
            Platform::Windows,
            "rapl",
            "power-source-type=rapl only works on Linux. Use auto or ringbuffer instead.",
        ),
    ] {
        let machine = Machine::new(platform);
        let (source, _) = machine.open(&[("power-source-type", kind)]);
        assert_eq!(source.err().unwrap().message(), expected);
    }
}

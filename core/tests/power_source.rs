//! The cases of Joular Code for Java's PowerSourceTest, what `auto` picks beyond Joular, and the
//! estimate source, on fake system trees.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use joularcode_core::config::Config;
use joularcode_core::log::{Level, Recorded};
use joularcode_core::power::estimate::model_watts;
use joularcode_core::power::{open, ManualClock, Platform, PowerError, PowerSource, SystemRoots};

struct Machine {
    dir: tempfile::TempDir,
    roots: SystemRoots,
}

impl Machine {
    /// A Linux machine with nothing to measure: empty powercap and event_source, and no ring buffer.
    fn bare() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let roots = SystemRoots {
            powercap: dir.path().join("sys/class/powercap"),
            event_source: dir.path().join("sys/bus/event_source"),
            proc: dir.path().join("proc"),
            ringbuffer: dir.path().join("dev/shm/powerjoular"),
            powermetrics: dir.path().join("usr/bin/powermetrics"),
            platform: Platform::Linux,
            root: true,
        };
        for root in [&roots.powercap, &roots.event_source, &roots.proc] {
            fs::create_dir_all(root).unwrap();
        }
        fs::create_dir_all(roots.ringbuffer.parent().unwrap()).unwrap();
        let machine = Machine { dir, roots };
        machine.proc_stat(0, 1000);
        machine
    }

    /// Four CPUs that have been busy for `busy` of `total` ticks.
    fn proc_stat(&self, busy: u64, total: u64) {
        let text = format!(
            "cpu  {busy} 0 0 {} 0 0 0 0 0 0\ncpu0 0 0 0 0\ncpu1 0 0 0 0\ncpu2 0 0 0 0\ncpu3 0 0 0 0\nintr 0\n",
            total - busy
        );
        fs::write(self.roots.proc.join("stat"), text).unwrap();
    }

    fn open(
        &self,
        settings: &[(&str, &str)],
    ) -> (Result<Box<dyn PowerSource>, PowerError>, Recorded) {
        let log = Recorded::default();
        let mut config = Config::default();
        for (key, value) in settings {
            let _ = config.set(key, value, &log);
        }
        let source = open(&config, &self.roots, Arc::new(ManualClock::new(0)), &log);
        (source, log)
    }
}

fn error_of(source: Result<Box<dyn PowerSource>, PowerError>) -> String {
    source
        .err()
        .expect("the source should not open")
        .to_string()
}

#[test]
fn power_source_test_an_unknown_type_names_the_choices() {
    let (source, _) = Machine::bare().open(&[("power-source-type", "magic")]);
    assert_eq!(
        error_of(source),
        "Unknown power-source-type 'magic'. Use auto, rapl, ringbuffer, vm, estimate, energy-meter or powermetrics."
    );
}

#[test]
fn power_source_test_auto_without_rapl_gives_the_ring_buffer() {
    let machine = Machine::bare();
    fs::write(&machine.roots.ringbuffer, [0u8; 248]).unwrap();
    let (source, log) = machine.open(&[]);
    assert_eq!(
        source.expect("auto opens").describe(),
        format!("ringbuffer {}", machine.roots.ringbuffer.display())
    );
    assert_eq!(
        log.messages(),
        vec![(
            Level::Info,
            format!(
                "Reading CPU power from the PowerJoular ring buffer {}",
                machine.roots.ringbuffer.display()
            )
        )]
    );
}

#[test]
fn power_source_test_the_ring_buffer_opens_without_powerjoular() {
    let machine = Machine::bare();
    let (source, _) = machine.open(&[("power-source-type", "ringbuffer")]);
    let error = source.unwrap().watts().unwrap_err();
    assert!(error
        .to_string()
        .starts_with("There is no PowerJoular ring buffer at"));
}

#[test]
#[cfg(unix)]
fn power_source_test_rapl_throws_outside_linux() {
    let mut machine = Machine::bare();
    machine.roots.platform = Platform::MacOs;
    let (source, _) = machine.open(&[("power-source-type", "rapl")]);
    assert_eq!(
        error_of(source),
        "power-source-type=rapl only works on Linux. Use auto or ringbuffer instead."
    );
    // auto outside Linux goes to the ring buffer even with a powercap tree
    fs::create_dir_all(machine.roots.powercap.join("intel-rapl:0")).unwrap();
    fs::write(&machine.roots.ringbuffer, [0u8; 248]).unwrap();
    let (source, log) = machine.open(&[]);
    assert!(source.is_ok());
    assert!(log.messages()[0].1.contains("PowerJoular ring buffer"));
}

#[test]
fn power_source_test_vm_opens_before_the_file_exists() {
    let machine = Machine::bare();
    let file = machine.dir.path().join("host/vm.csv");
    let (source, _) = machine.open(&[
        ("power-source-type", "vm"),
        ("vm-power-file", file.to_str().unwrap()),
        ("vm-power-format", "watts"),
    ]);
    let mut source = source.unwrap();
    assert_eq!(
        source.describe(),
        format!("vm (watts file {})", file.display())
    );
    assert!(source
        .watts()
        .unwrap_err()
        .to_string()
        .starts_with("There is no"));
    fs::create_dir_all(file.parent().unwrap()).unwrap();
    fs::write(&file, "7.25\n").unwrap();
    assert_eq!(source.watts().unwrap(), 7.25);
}

#[test]
fn power_source_test_vm_without_a_file_or_with_an_unknown_format_names_the_setting() {
    let machine = Machine::bare();
    let (source, _) = machine.open(&[("power-source-type", "vm")]);
    assert_eq!(
        error_of(source),
        "power-source-type=vm needs vm-power-file, the file the host writes the power of this virtual machine to."
    );
    let (source, _) = machine.open(&[
        ("power-source-type", "vm"),
        ("vm-power-file", "/host/vm.csv"),
        ("vm-power-format", "csv"),
    ]);
    assert_eq!(
        error_of(source),
        "Unknown vm-power-format 'csv'. Use powerjoular or watts."
    );
}

#[test]
#[cfg(target_os = "linux")]
fn power_source_auto_picks_rapl_when_intel_rapl_0_exists_even_unreadable() {
    let machine = Machine::bare();
    fs::create_dir_all(machine.roots.powercap.join("intel-rapl:0")).unwrap();
    fs::write(&machine.roots.ringbuffer, [0u8; 248]).unwrap();
    let (source, _) = machine.open(&[]);
    // RAPL is there but cannot be read: monitoring off, as Joular does, not the ring buffer
    let error = error_of(source);
    assert!(error.starts_with("Cannot read "), "{error}");
    assert!(error.contains("intel-rapl:0/name"), "{error}");
}

#[test]
#[cfg(target_os = "linux")]
fn power_source_auto_picks_the_perf_pmu_when_powercap_is_absent() {
    let machine = Machine::bare();
    let pmu = machine.roots.event_source.join("devices/power");
    fs::create_dir_all(pmu.join("events")).unwrap();
    fs::write(pmu.join("type"), "2147483600\n").unwrap();
    fs::write(pmu.join("cpumask"), "0\n").unwrap();
    fs::write(pmu.join("events/energy-pkg"), "event=0x02\n").unwrap();
    fs::write(
        pmu.join("events/energy-pkg.scale"),
        "2.3283064365386962890625e-10\n",
    )
    .unwrap();
    fs::write(pmu.join("events/energy-pkg.unit"), "Joules\n").unwrap();
    for settings in [&[][..], &[("power-source-type", "rapl")][..]] {
        let (source, _) = machine.open(settings);
        // The fake PMU type does not exist in this kernel: the counter is refused
        let error = error_of(source);
        assert!(
            error.starts_with("Cannot open the perf energy-pkg counter on CPU 0: "),
            "{error}"
        );
    }
}

#[test]
fn power_source_auto_estimates_only_when_nothing_can_be_measured_and_says_so_once() {
    let machine = Machine::bare();
    let (source, log) = machine.open(&[]);
    let mut source = source.unwrap();
    assert_eq!(source.describe(), "estimate (from the CPU utilisation)");
    let messages = log.messages();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0].0, Level::Warning);
    assert!(messages[0]
        .1
        .starts_with("No power meter was found: no RAPL in "));
    assert!(messages[0].1.contains("run PowerJoular with -r"));
    assert_eq!(
        messages[1],
        (
            Level::Info,
            "Estimating CPU power from the CPU utilisation: 4 CPUs × (0.74 W + (3.5 W − 0.74 W) × utilisation)".to_owned()
        )
    );
    // 25 % busy over the window
    machine.proc_stat(250, 2000);
    let watts = source.watts().unwrap();
    assert!((watts - 4.0 * (0.74 + 2.76 * 0.25)).abs() < 1e-9, "{watts}");
    assert_eq!(log.messages().len(), 2);
}

#[test]
fn power_source_auto_without_proc_stat_waits_for_the_ring_buffer_as_joular() {
    let machine = Machine::bare();
    fs::remove_file(machine.roots.proc.join("stat")).unwrap();
    let (source, log) = machine.open(&[]);
    let mut source = source.unwrap();
    assert_eq!(log.messages().len(), 1);
    assert!(log.messages()[0].1.contains("PowerJoular ring buffer"));
    assert!(source
        .watts()
        .unwrap_err()
        .to_string()
        .starts_with("There is no PowerJoular ring buffer at"));
}

#[test]
fn power_source_estimate_follows_the_linear_model_with_the_configured_watts() {
    let machine = Machine::bare();
    let (source, _) = machine.open(&[
        ("power-source-type", "estimate"),
        ("estimate-idle-watts-per-cpu", "1"),
        ("estimate-max-watts-per-cpu", "5"),
    ]);
    let mut source = source.unwrap();
    machine.proc_stat(500, 2000);
    assert_eq!(source.watts().unwrap(), 4.0 * (1.0 + 4.0 * 0.5));
    // No tick since the last reading: idle power
    assert_eq!(source.watts().unwrap(), 4.0);
    machine.proc_stat(1500, 3000);
    assert_eq!(source.watts().unwrap(), 20.0);
    assert_eq!(model_watts(2, 1.0, 3.0, 7.0), 6.0);
}

#[test]
fn power_source_estimate_refuses_bad_settings_and_a_missing_proc_stat() {
    let machine = Machine::bare();
    let (source, _) = machine.open(&[
        ("power-source-type", "estimate"),
        ("estimate-idle-watts-per-cpu", "4"),
        ("estimate-max-watts-per-cpu", "2"),
    ]);
    assert_eq!(
        error_of(source),
        "estimate-max-watts-per-cpu (2) is below estimate-idle-watts-per-cpu (4). Set it to the watts per CPU at full load, at least the idle ones."
    );
    let stat = machine.roots.proc.join("stat");
    fs::write(&stat, "cpu  1 0 0 9 0 0 0 0 0 0\nintr 0\n").unwrap();
    let (source, _) = machine.open(&[("power-source-type", "estimate")]);
    assert_eq!(
        error_of(source),
        format!(
            "Cannot use {}: it lists no cpuN line. Point the proc root at a Linux procfs. The CPU power cannot be estimated without it.",
            stat.display()
        )
    );
    fs::remove_file(&stat).unwrap();
    let (source, _) = machine.open(&[("power-source-type", "estimate")]);
    let error = error_of(source);
    assert!(
        error.starts_with(&format!("Cannot use {}: ", stat.display())),
        "{error}"
    );
    assert!(error.ends_with("The CPU power cannot be estimated without it."));
}

#[test]
fn power_source_default_roots_are_the_real_paths() {
    let roots = SystemRoots::default();
    assert_eq!(roots.powercap, Path::new("/sys/class/powercap"));
    assert_eq!(roots.event_source, Path::new("/sys/bus/event_source"));
    assert_eq!(roots.proc, Path::new("/proc"));
    assert_eq!(roots.powermetrics, Path::new("/usr/bin/powermetrics"));
    assert_eq!(roots.platform == Platform::Linux, cfg!(target_os = "linux"));
}

//! The cases of Joular Code for Java's ConfigTest, and those of our own keys.

use std::path::{Path, PathBuf};

use joularcode_core::config::{
    default_ringbuffer_path, parse_properties, Config, ConfigError, JvmThreads, SourceKind,
    VmFormat, KEYS,
};
use joularcode_core::log::{Level, Recorded};

fn from_text(text: &str) -> (Config, Vec<(Level, String)>) {
    let log = Recorded::default();
    let config = Config::from_properties(&parse_properties(text).unwrap(), &log);
    (config, log.messages())
}

#[test]
fn config_test_defaults() {
    let (config, messages) = from_text("");
    assert!(messages.is_empty());
    assert_eq!(config.power_source_type, "auto");
    assert_eq!(config.source_kind(), Ok(SourceKind::Auto));
    assert_eq!(config.vm_power_file, None);
    assert_eq!(config.vm_format(), Ok(VmFormat::PowerJoular));
    assert_eq!(config.sample_rate_ms, 10);
    assert_eq!(
        config.results_path,
        PathBuf::from("joular-code-java-results")
    );
    assert!(config.methods_filtering_prefix.is_empty());
    assert_eq!(config.ringbuffer_path, None);
    assert_eq!(config.jvm_threads, JvmThreads::Own);
    assert_eq!(config.estimate_idle_watts_per_cpu, 0.74);
    assert_eq!(config.estimate_max_watts_per_cpu, 3.5);
    assert_eq!(config, Config::default());
}

#[test]
fn config_test_blank_value_means_default() {
    let (config, messages) = from_text(
        "power-source-type=\nvm-power-format = \t\nstack-monitoring-sample-rate=  \nresults-path=\nvm-power-file=  \npowerjoular-ringbuffer-path=\njvm-threads=\nestimate-max-watts-per-cpu=\n",
    );
    assert!(messages.is_empty(), "{messages:?}");
    assert_eq!(config, Config::default());
}

#[test]
fn config_test_trimming_and_case_insensitive_type_and_format() {
    let (config, _) = from_text(
        "power-source-type =  RingBuffer  \nvm-power-format=WATTS\nvm-power-file= /mnt/host/vm.csv \nresults-path=  out/results \npowerjoular-ringbuffer-path = /tmp/ring \n",
    );
    assert_eq!(config.source_kind(), Ok(SourceKind::RingBuffer));
    assert_eq!(config.vm_format(), Ok(VmFormat::Watts));
    assert_eq!(
        config.vm_power_file,
        Some(PathBuf::from("/mnt/host/vm.csv"))
    );
    assert_eq!(config.results_path, PathBuf::from("out/results"));
    assert_eq!(config.ringbuffer_path, Some(PathBuf::from("/tmp/ring")));
    for (text, kind) in [
        ("AUTO", SourceKind::Auto),
        ("Rapl", SourceKind::Rapl),
        ("vm", SourceKind::Vm),
        ("Estimate", SourceKind::Estimate),
    ] {
        let (config, _) = from_text(&format!("power-source-type={text}"));
        assert_eq!(config.source_kind(), Ok(kind));
    }
}

#[test]
fn config_test_invalid_sample_rates_fall_back_to_10() {
    for bad in ["0", "-5", "fast", "1001", "99999999999999999999", "1.5"] {
        let (config, messages) = from_text(&format!("stack-monitoring-sample-rate={bad}"));
        assert_eq!(config.sample_rate_ms, 10, "{bad}");
        assert_eq!(
            messages,
            vec![(
                Level::Warning,
                format!("stack-monitoring-sample-rate must be a number of milliseconds from 1 to 1000, not '{bad}'. Using 10 ms.")
            )]
        );
    }
    let (config, messages) = from_text("stack-monitoring-sample-rate= 1000 ");
    assert_eq!((config.sample_rate_ms, messages.len()), (1000, 0));
}

#[test]
fn config_test_low_sample_rate_warns_and_is_kept() {
    let (config, messages) = from_text("stack-monitoring-sample-rate=2");
    assert_eq!(config.sample_rate_ms, 2);
    assert_eq!(
        messages,
        vec![(
            Level::Warning,
            "stack-monitoring-sample-rate is 2 ms. Below 5 ms, sampling can noticeably slow the application down.".to_owned()
        )]
    );
    let (config, messages) = from_text("stack-monitoring-sample-rate=5");
    assert_eq!((config.sample_rate_ms, messages.len()), (5, 0));
}

#[test]
fn config_test_prefix_splitting() {
    let (config, _) = from_text("methods-filtering-prefix= com.example , ,org.app,,  net.x  ,");
    assert_eq!(
        config.methods_filtering_prefix,
        vec!["com.example", "org.app", "net.x"]
    );
}

#[test]
fn config_test_default_ring_path_per_os() {
    let path = default_ringbuffer_path();
    if cfg!(windows) {
        assert!(path.to_string_lossy().ends_with("\\powerjoular"));
    } else if cfg!(target_os = "linux") {
        assert_eq!(path, PathBuf::from("/dev/shm/powerjoular"));
    } else {
        assert_eq!(path, PathBuf::from("/tmp/powerjoular"));
    }
}

#[test]
fn config_test_load_through_the_explicit_path() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("joularcodejava.properties"),
        "power-source-type=vm\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("other.properties"),
        "# chosen\npower-source-type : rapl\nstack-monitoring-sample-rate 20\n",
    )
    .unwrap();
    let log = Recorded::default();
    let config = Config::load(Some("other.properties"), dir.path(), &log);
    assert_eq!(config.source_kind(), Ok(SourceKind::Rapl));
    assert_eq!(config.sample_rate_ms, 20);
    assert!(log.messages().is_empty());
    // A blank explicit path means the working folder's file
    let config = Config::load(Some("  "), dir.path(), &log);
    assert_eq!(config.source_kind(), Ok(SourceKind::Vm));
    let config = Config::load(None, dir.path(), &log);
    assert_eq!(config.source_kind(), Ok(SourceKind::Vm));
}

#[test]
fn config_test_missing_explicit_file_means_defaults_and_the_working_folder_is_not_searched() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("joularcodejava.properties"),
        "power-source-type=vm\n",
    )
    .unwrap();
    let log = Recorded::default();
    let config = Config::load(Some("missing.properties"), dir.path(), &log);
    assert_eq!(config, Config::default());
    assert_eq!(
        log.messages(),
        vec![(
            Level::Info,
            format!(
                "No configuration file at {}, using defaults.",
                dir.path().join("missing.properties").display()
            )
        )]
    );
}

#[test]
fn config_a_latin_1_file_is_read_as_iso_8859_1_and_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("latin1.properties");
    // "# Paramètres de mesure" and "résultats" in ISO-8859-1: 0xE8 and 0xE9 are not UTF-8
    std::fs::write(
        &file,
        b"# Param\xe8tres de mesure\npower-source-type=estimate\nresults-path=r\xe9sultats\n",
    )
    .unwrap();
    let log = Recorded::default();
    let config = Config::load(Some(file.to_str().unwrap()), Path::new("/"), &log);
    assert_eq!(config.results_path, PathBuf::from("résultats"));
    assert_eq!(config.source_kind(), Ok(SourceKind::Estimate));
    let messages = log.messages();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(
        messages[0],
        (
            Level::Warning,
            format!(
                "{} is not valid UTF-8 (byte 0xE8 on line 1): it is read as ISO-8859-1, as Java's \
                 Properties.load(InputStream) reads it, where Joular Code for Java would ignore \
                 the whole file. Save it as UTF-8.",
                file.display()
            )
        )
    );
    // The same file in UTF-8 reads the same, without a word
    std::fs::write(
        &file,
        "# Paramètres de mesure\npower-source-type=estimate\nresults-path=résultats\n",
    )
    .unwrap();
    let log = Recorded::default();
    assert_eq!(
        Config::load(Some(file.to_str().unwrap()), Path::new("/"), &log),
        config
    );
    assert!(log.messages().is_empty());
}

#[cfg(unix)]
#[test]
fn config_a_fifo_in_place_of_the_file_is_not_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fifo.properties");
    let c_path = std::ffi::CString::new(file.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o666) }, 0);
    let log = Recorded::default();
    let config = Config::load(Some(file.to_str().unwrap()), Path::new("/"), &log);
    assert_eq!(config, Config::default());
    assert!(log.messages()[0].1.starts_with("No configuration file at"));
}

#[test]
fn config_unreadable_file_warns_and_uses_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.properties");
    let bytes = b"power-source-type=vm\nresults-path=\\u00zz\n";
    let reason = "line 2 has a malformed \\uXXXX escape";
    std::fs::write(&file, bytes).unwrap();
    let log = Recorded::default();
    let config = Config::load(Some(file.to_str().unwrap()), Path::new("/"), &log);
    assert_eq!(config, Config::default());
    let messages = log.messages();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].0, Level::Warning);
    let expected = format!(
        "Could not read {}, using defaults. {reason}",
        file.display()
    );
    assert!(messages[0].1.starts_with(&expected), "{}", messages[0].1);
}

#[test]
fn config_properties_syntax_of_java_util_properties() {
    let (config, _) = from_text(
        "! comment\n  # comment\nmethods-filtering-prefix = com.a,\\\n    com.b\r\nresults-path:caf\\u00e9/r\\u00e9sultats\rjvm-threads\tspread\n",
    );
    assert_eq!(config.methods_filtering_prefix, vec!["com.a", "com.b"]);
    assert_eq!(config.results_path, PathBuf::from("café/résultats"));
    assert_eq!(config.jvm_threads, JvmThreads::Spread);
}

#[test]
fn config_set_applies_the_rules_of_the_file() {
    let log = Recorded::default();
    let mut config = Config::default();
    config
        .set("stack-monitoring-sample-rate", " 25 ", &log)
        .unwrap();
    config
        .set("methods-filtering-prefix", "a, b", &log)
        .unwrap();
    config.set("power-source-type", "VM", &log).unwrap();
    config.set("vm-power-file", "/host/power", &log).unwrap();
    assert_eq!(config.sample_rate_ms, 25);
    assert_eq!(config.methods_filtering_prefix, vec!["a", "b"]);
    assert_eq!(config.source_kind(), Ok(SourceKind::Vm));
    config
        .set("stack-monitoring-sample-rate", "fast", &log)
        .unwrap();
    assert_eq!(config.sample_rate_ms, 10);
    assert_eq!(log.messages().len(), 1);
    config.set("power-source-type", "", &log).unwrap();
    assert_eq!(config.source_kind(), Ok(SourceKind::Auto));
}

#[test]
fn config_set_refuses_unknown_keys_types_and_formats() {
    let log = Recorded::default();
    let mut config = Config::default();
    let error = config.set("power-source", "rapl", &log).unwrap_err();
    assert_eq!(error, ConfigError::UnknownKey("power-source".to_owned()));
    assert!(error
        .to_string()
        .contains("power-source-type, powerjoular-ringbuffer-path"));
    let error = config.set("power-source-type", "Magic", &log).unwrap_err();
    assert_eq!(
        error.to_string(),
        "Unknown power-source-type 'magic'. Use auto, rapl, ringbuffer, vm, estimate, energy-meter or powermetrics."
    );
    let error = config.set("vm-power-format", "CSV", &log).unwrap_err();
    assert_eq!(
        error.to_string(),
        "Unknown vm-power-format 'csv'. Use powerjoular or watts."
    );
    assert_eq!(config.power_source_type, "magic");
}

#[test]
fn config_unknown_type_in_a_file_is_kept_for_the_source_to_refuse() {
    let (config, messages) = from_text("power-source-type=Magic\nvm-power-format=csv");
    assert!(messages.is_empty());
    assert_eq!(
        config.source_kind(),
        Err(ConfigError::UnknownPowerSourceType("magic".to_owned()))
    );
    assert_eq!(
        config.vm_format(),
        Err(ConfigError::UnknownVmPowerFormat("csv".to_owned()))
    );
}

#[test]
fn config_our_keys_validate_like_the_sample_rate() {
    let (config, messages) = from_text(
        "jvm-threads=everywhere\nestimate-idle-watts-per-cpu=-1\nestimate-max-watts-per-cpu=NaN\n",
    );
    assert_eq!(config.jvm_threads, JvmThreads::Own);
    assert_eq!(config.estimate_idle_watts_per_cpu, 0.74);
    assert_eq!(config.estimate_max_watts_per_cpu, 3.5);
    let texts: Vec<&str> = messages.iter().map(|(_, text)| text.as_str()).collect();
    assert_eq!(
        texts,
        vec![
            "jvm-threads must be own or spread, not 'everywhere'. Using own.",
            "estimate-idle-watts-per-cpu must be a number of watts of 0 or more, not '-1'. Using 0.74 W.",
            "estimate-max-watts-per-cpu must be a number of watts of 0 or more, not 'NaN'. Using 3.5 W.",
        ]
    );
    let (config, messages) =
        from_text("estimate-idle-watts-per-cpu=1.5\nestimate-max-watts-per-cpu=6");
    assert!(messages.is_empty());
    assert_eq!(
        (
            config.estimate_idle_watts_per_cpu,
            config.estimate_max_watts_per_cpu
        ),
        (1.5, 6.0)
    );
}

#[test]
fn config_carbon_intensity_is_a_constant_or_a_file_and_off_by_default() {
    use joularcode_core::carbon::IntensitySetting;
    assert_eq!(Config::default().carbon_intensity, None);
    let (config, messages) = from_text("carbon-intensity=350");
    assert!(messages.is_empty());
    assert_eq!(
        config.carbon_intensity,
        Some(IntensitySetting::Constant(350.0))
    );
    let (config, _) = from_text("carbon-intensity = /run/host/carbon ");
    assert_eq!(
        config.carbon_intensity,
        Some(IntensitySetting::File("/run/host/carbon".into()))
    );
    // An impossible intensity counts no grams (there is no default to fall back on), and says so.
    let (config, messages) = from_text("carbon-intensity=-20");
    assert_eq!(config.carbon_intensity, None);
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(messages[0]
        .1
        .starts_with("carbon-intensity -20 is not a carbon intensity"));
    let mut strict = Config::default();
    let error = strict
        .set_strictly("carbon-intensity", "5000", &Recorded::default())
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("carbon-intensity 5000 is not a carbon intensity: give grams"),
        "{error}"
    );
    assert!(!error.contains('\n'));
}

#[test]
fn config_every_key_has_a_help_line() {
    assert_eq!(KEYS.len(), 12);
    let log = Recorded::default();
    for (key, help) in KEYS {
        assert!(!help.is_empty() && !help.contains('\n'), "{key}");
        assert!(Config::default().set(key, "", &log).is_ok(), "{key}");
    }
}

#[test]
fn config_no_file_in_the_working_folder_means_defaults_said_at_info() {
    let dir = tempfile::tempdir().unwrap();
    let log = Recorded::default();
    assert_eq!(Config::load(None, dir.path(), &log), Config::default());
    // A directory where the file should be is no file either, as Files.isRegularFile says
    std::fs::create_dir(dir.path().join("dir.properties")).unwrap();
    assert_eq!(
        Config::load(Some("dir.properties"), dir.path(), &log),
        Config::default()
    );
    assert_eq!(
        log.messages(),
        [
            (
                Level::Info,
                format!(
                    "No configuration file at {}, using defaults.",
                    dir.path().join("joularcodejava.properties").display()
                )
            ),
            (
                Level::Info,
                format!(
                    "No configuration file at {}, using defaults.",
                    dir.path().join("dir.properties").display()
                )
            ),
        ]
    );
}

#[test]
fn config_settings_give_the_same_configuration_again() {
    let log = Recorded::default();
    let mut config = Config::default();
    for (key, value) in [
        ("power-source-type", "VM"),
        ("vm-power-file", "/host/power, shared"),
        ("vm-power-format", "watts"),
        ("stack-monitoring-sample-rate", "3"),
        ("results-path", "out dir"),
        ("methods-filtering-prefix", "com.a, org.b"),
        ("jvm-threads", "spread"),
        ("estimate-idle-watts-per-cpu", "0.1"),
        ("estimate-max-watts-per-cpu", "3.3000000000000003"),
    ] {
        config.set(key, value, &log).unwrap();
    }
    for original in [Config::default(), config] {
        let mut again = Config::default();
        for (key, value) in original.settings() {
            again.set_strictly(key, &value, &log).unwrap();
        }
        assert_eq!(again, original);
    }
}

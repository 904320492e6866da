//! The cases of Joular Code for Java's VmPowerFileTest: files the host writes, in each state.

use std::fs;
use std::path::PathBuf;

use joularcode_core::config::VmFormat;
use joularcode_core::log::{Level, Recorded};
use joularcode_core::power::vm::{self, VmPowerFile};
use joularcode_core::power::PowerSource;

struct Fixture {
    _dir: tempfile::TempDir,
    file: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("vm-power.csv-4242.csv");
        Fixture { _dir: dir, file }
    }

    fn write(&self, text: &str) {
        fs::write(&self.file, text).unwrap();
    }

    fn open(&self, format: VmFormat) -> VmPowerFile {
        VmPowerFile::open(&self.file, format, &Recorded::default())
    }

    /// The first reading of `text` by a new source.
    fn read_once(&self, format: VmFormat, text: &str) -> Result<f64, String> {
        self.write(text);
        self.open(format).watts().map_err(|error| error.to_string())
    }

    fn name(&self) -> String {
        self.file.display().to_string()
    }
}

#[test]
fn vm_power_file_test_powerjoular_reads_the_power_column() {
    let f = Fixture::new();
    assert_eq!(
        f.read_once(VmFormat::PowerJoular, "1756681930,0.0310,1.9154\n"),
        Ok(1.9154)
    );
}

#[test]
fn vm_power_file_test_powerjoular_crlf_and_extra_lines_are_fine() {
    let f = Fixture::new();
    assert_eq!(
        f.read_once(
            VmFormat::PowerJoular,
            "1756681930,0.0310,1.9154\r\n1756681929,0.1,9\n"
        ),
        Ok(1.9154)
    );
}

#[test]
fn vm_power_file_test_powerjoular_a_row_without_its_newline_is_refused() {
    let f = Fixture::new();
    assert_eq!(
        f.read_once(VmFormat::PowerJoular, "1756681930,0.0310,1.91"),
        Err(format!(
            "The first line of {} is incomplete or too long.",
            f.name()
        ))
    );
}

#[test]
fn vm_power_file_test_powerjoular_a_5_column_file_is_refused() {
    let f = Fixture::new();
    let error = f
        .read_once(
            VmFormat::PowerJoular,
            "1756681930,0.2460,18.4500,15.2000,3.2500\n",
        )
        .unwrap_err();
    assert!(
        error.starts_with(&format!("{} holds the power of the whole host.", f.name())),
        "{error}"
    );
    assert!(error.contains("-p <pid> -o <file>"));
}

#[test]
fn vm_power_file_test_powerjoular_header_minus_1_two_columns_and_empty_line_are_refused() {
    let f = Fixture::new();
    let wrong_row = format!(
        "{} does not hold the row PowerJoular writes with -o for a process (timestamp,cpu_usage,cpu_power).",
        f.name()
    );
    assert_eq!(
        f.read_once(VmFormat::PowerJoular, "Timestamp,CPU Usage,CPU Power\n"),
        Err(format!("The first column of {} is not a Unix timestamp. On the host, write the file with -o, not -f: -f starts it with a header.", f.name()))
    );
    assert_eq!(
        f.read_once(VmFormat::PowerJoular, "1756681930,-1.0000,-1.0000\n"),
        Err(format!(
            "The host could not measure the power of this virtual machine ({} holds -1.0).",
            f.name()
        ))
    );
    assert_eq!(
        f.read_once(VmFormat::PowerJoular, "1756681930,1.9\n"),
        Err(wrong_row.clone())
    );
    assert_eq!(f.read_once(VmFormat::PowerJoular, "\n"), Err(wrong_row));
    // A 1.x row has a date, not a timestamp
    assert!(f
        .read_once(VmFormat::PowerJoular, "2024-01-01 10:00:00,0.1,2.0\n")
        .unwrap_err()
        .contains("is not a Unix timestamp"));
}

#[test]
fn vm_power_file_test_a_missing_file_gives_there_is_no() {
    let f = Fixture::new();
    let log = Recorded::default();
    let mut vm = VmPowerFile::open(&f.file, VmFormat::PowerJoular, &log);
    assert_eq!(
        log.messages(),
        vec![(
            Level::Info,
            format!(
                "Reading the power of this virtual machine from {} (powerjoular format)",
                f.name()
            )
        )]
    );
    assert_eq!(
        vm.watts().unwrap_err().to_string(),
        format!(
            "There is no {}. Is it shared with this virtual machine, and is the host writing it?",
            f.name()
        )
    );
}

#[test]
fn vm_power_file_test_a_directory_is_refused() {
    let f = Fixture::new();
    fs::create_dir(&f.file).unwrap();
    for format in [VmFormat::PowerJoular, VmFormat::Watts] {
        assert_eq!(
            f.open(format).watts().unwrap_err().to_string(),
            format!("{} is not a regular file.", f.name())
        );
    }
}

#[test]
#[cfg(unix)]
fn vm_power_file_a_fifo_is_refused_without_blocking() {
    let f = Fixture::new();
    let path = std::ffi::CString::new(f.name()).unwrap();
    // SAFETY: a valid NUL-terminated path
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o644) }, 0);
    assert_eq!(
        f.open(VmFormat::Watts).watts().unwrap_err().to_string(),
        format!("{} is not a regular file.", f.name())
    );
}

#[test]
fn vm_power_file_test_the_reuse_sequence() {
    let f = Fixture::new();
    f.write("1756681930,0.0310,2.5\n");
    let mut vm = f.open(VmFormat::PowerJoular);
    assert_eq!(vm.watts().unwrap(), 2.5);
    // The host is rewriting the file: empty for a moment
    f.write("");
    assert_eq!(vm.watts().unwrap(), 2.5);
    // The same row again
    f.write("1756681930,0.0310,2.5\n");
    assert_eq!(vm.watts().unwrap(), 2.5);
    assert_eq!(
        vm.watts().unwrap_err().to_string(),
        format!(
            "The host has not updated {} for 3 windows. Is PowerJoular still running on the host?",
            f.name()
        )
    );
    assert!(vm.watts().is_err());
    // A new row: recovery
    f.write("1756681931,0.0400,3.25\n");
    assert_eq!(vm.watts().unwrap(), 3.25);
    f.write("1756681931,0.0400,3.25\n");
    assert_eq!(vm.watts().unwrap(), 3.25);
}

#[test]
fn vm_power_file_test_before_the_first_success_every_error_throws() {
    let f = Fixture::new();
    f.write("");
    let mut vm = f.open(VmFormat::PowerJoular);
    for _ in 0..3 {
        assert!(vm.watts().is_err());
    }
}

#[test]
fn vm_power_file_test_watts_reads_plain_values() {
    let f = Fixture::new();
    for text in ["42.5\n", "42.5", " 42.5 \r\n", "42.5\nrest"] {
        assert_eq!(f.read_once(VmFormat::Watts, text), Ok(42.5), "{text:?}");
    }
}

#[test]
fn vm_power_file_test_watts_an_unchanged_value_is_used_every_window() {
    let f = Fixture::new();
    f.write("12\n");
    let mut vm = f.open(VmFormat::Watts);
    for _ in 0..5 {
        assert_eq!(vm.watts().unwrap(), 12.0);
    }
}

#[test]
fn vm_power_file_test_watts_refuses_minus_1_lots_nan_and_empty() {
    let f = Fixture::new();
    let not_watts = format!(
        "{} does not hold a power in watts where one is expected.",
        f.name()
    );
    assert_eq!(
        f.read_once(VmFormat::Watts, "-1\n"),
        Err(format!(
            "The host could not measure the power of this virtual machine ({} holds -1.0).",
            f.name()
        ))
    );
    assert_eq!(
        f.read_once(VmFormat::Watts, "lots\n"),
        Err(not_watts.clone())
    );
    assert_eq!(
        f.read_once(VmFormat::Watts, "-1e10"),
        Err(format!(
            "The host could not measure the power of this virtual machine ({} holds -1.0E10).",
            f.name()
        ))
    );
    for (text, shown) in [("NaN\n", "NaN"), ("-Infinity", "-Infinity")] {
        assert_eq!(
            f.read_once(VmFormat::Watts, text),
            Err(format!(
                "{} holds {shown}, which is not a power in watts.",
                f.name()
            ))
        );
    }
    for (text, shown) in [("1e308\n", "1.0E308"), ("10000.5", "10000.5")] {
        assert_eq!(
            f.read_once(VmFormat::Watts, text),
            Err(format!(
                "{} holds {shown} W, more than any machine's CPUs draw (at most 10000.0 W).",
                f.name()
            ))
        );
    }
    assert_eq!(f.read_once(VmFormat::Watts, "10000"), Ok(10000.0));
    assert_eq!(f.read_once(VmFormat::Watts, ""), Err(not_watts));
}

#[test]
fn vm_power_file_test_watts_a_line_of_300_characters_is_refused() {
    let f = Fixture::new();
    for long in [format!("{}1\n", " ".repeat(299)), "4".repeat(300)] {
        assert_eq!(
            f.read_once(VmFormat::Watts, &long),
            Err(format!(
                "The first line of {} is incomplete or too long.",
                f.name()
            ))
        );
    }
    // 256 characters and no newline is still a line
    assert_eq!(
        f.read_once(VmFormat::Watts, &format!("{}7", "0".repeat(255))),
        Ok(7.0)
    );
}

#[test]
fn vm_power_file_numbers_are_read_as_javas_double_parse_double_reads_them() {
    let file = std::path::Path::new("/host/vm.csv");
    for (text, watts) in [
        ("42.5d", 42.5),
        ("42.5F", 42.5),
        ("1e3", 1000.0),
        (".5", 0.5),
        ("5.", 5.0),
        ("+3", 3.0),
        ("\t7\u{b}", 7.0),
        ("-0", 0.0),
    ] {
        assert_eq!(vm::parse_power(file, text), Ok(watts), "{text:?}");
    }
    let not_watts = "/host/vm.csv does not hold a power in watts where one is expected.";
    for text in [
        "inf", "infinity", "nan", "NAN", "1.5dd", "0x1p3", "1,5", "--1", "d", "",
    ] {
        assert_eq!(
            vm::parse_power(file, text).unwrap_err().to_string(),
            not_watts,
            "{text:?}"
        );
    }
    for (text, shown) in [("Infinity", "Infinity"), ("-NaN", "NaN")] {
        assert_eq!(
            vm::parse_power(file, text).unwrap_err().to_string(),
            format!("/host/vm.csv holds {shown}, which is not a power in watts.")
        );
    }
    assert_eq!(
        vm::parse_power(file, "-1d").unwrap_err().to_string(),
        "The host could not measure the power of this virtual machine (/host/vm.csv holds -1.0)."
    );
}

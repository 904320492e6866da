//! What each fuzz target checks, on any bytes: nothing panics, and what is read keeps its
//! promises. core/tests/fuzz_seeds.rs runs the same checks on the seeds of seeds/<target> with
//! `cargo test`.

use joularcode_core::config::VmFormat;
use joularcode_core::config::{parse_properties, Config};
use joularcode_core::cpu_list;
use joularcode_core::log::Recorded;
use joularcode_core::mutf8;
use joularcode_core::names::{
    binary_class_name, class_name_from_signature, method_name, MAX_CLASS_NAME_BYTES,
    MAX_METHOD_NAME_BYTES,
};
use joularcode_core::power::ringbuffer::read_bytes;
use joularcode_core::power::vm;
use joularcode_core::power::MAX_WATTS;
use joularcode_core::power::{perf, rapl};
use joularcode_core::procstat;
use std::path::Path;

/// joularcodejava.properties: the parser, then the configuration's rules.
pub fn properties(bytes: &[u8]) {
    if let Ok(text) = std::str::from_utf8(bytes) {
        if let Ok(properties) = parse_properties(text) {
            let config = Config::from_properties(&properties, &Recorded::default());
            assert!((1..=1000).contains(&config.sample_rate_ms));
        }
    }
}

/// The start of a VM power file, in both formats.
pub fn vm_file(bytes: &[u8]) {
    let start = &bytes[..bytes.len().min(vm::MAX_LINE_LENGTH + 1)];
    for format in [VmFormat::PowerJoular, VmFormat::Watts] {
        if let Ok(row) = vm::parse(Path::new("/host/vm.csv"), start, format) {
            assert!(row.power.is_finite() && (0.0..=MAX_WATTS).contains(&row.power));
        }
    }
}

/// The bytes of a PowerJoular ring buffer, with the head of the window's start and the clock
/// taken from the first 16 bytes.
pub fn ring_buffer(bytes: &[u8]) {
    if bytes.len() < 16 {
        return;
    }
    let mut window_start = i64::from_ne_bytes(bytes[..8].try_into().unwrap());
    let now = i64::from_ne_bytes(bytes[8..16].try_into().unwrap());
    if let Ok(power) = read_bytes(
        &bytes[16..],
        Path::new("/dev/shm/powerjoular"),
        &mut window_start,
        now,
    ) {
        assert!(power.is_finite() && power >= 0.0);
    }
}

/// The text of /proc/stat.
pub fn proc_stat(bytes: &[u8]) {
    if let Ok(stat) = procstat::parse(&String::from_utf8_lossy(bytes)) {
        assert!(stat.cpu.busy <= stat.cpu.total);
    }
}

/// The sysfs text the RAPL sources read: a powercap counter, and the perf power PMU's event and
/// CPU list; then the energy between two counter readings, from the first 24 bytes.
pub fn sysfs(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let file = Path::new("/sys/class/powercap/intel-rapl:0/energy_uj");
    if let Ok(uj) = rapl::parse_microjoules(file, &text) {
        assert!(i64::try_from(uj).is_ok());
    }
    let _ = perf::parse_event_config(&text);
    let _ = cpu_list::parse(&text);
    if let Some(words) = bytes.get(..24) {
        let word = |i: usize| u64::from_ne_bytes(words[i * 8..i * 8 + 8].try_into().unwrap());
        let (before, after, max) = (word(0), word(1), word(2));
        let energy = rapl::energy_between(before, after, max);
        if after >= before {
            assert_eq!(energy, after - before);
        } else {
            assert!(energy <= max / 2);
        }
    }
}

/// Class and method names as the JVM holds them (a Symbol's bytes, decoded from modified UTF-8)
/// and as JVMTI gives their signatures: every name is within its bound, a `/` is left only
/// where a hidden class's `+` was, and a name that can be a class's (no `.` in its internal form,
/// JVMS §4.2) reads the same from its Symbol, from its signature, and from JVMTI's form of a
/// hidden class (`.` for the last `+`).
pub fn class_names(bytes: &[u8]) {
    let internal = mutf8::decode(bytes);
    let binary = binary_class_name(&internal);
    assert!(binary.len() <= MAX_CLASS_NAME_BYTES, "{}", binary.len());
    assert!(method_name(&internal).len() <= MAX_METHOD_NAME_BYTES);
    if !internal.contains('+') {
        assert!(!binary.contains('/'), "{binary}");
    }
    let from_signature = class_name_from_signature(&format!("L{internal};"));
    if internal.contains('.') {
        return;
    }
    assert_eq!(from_signature, binary);
    if let Some((name, suffix)) = internal.rsplit_once('+') {
        let jvmti = class_name_from_signature(&format!("L{name}.{suffix};"));
        assert_eq!(jvmti, binary);
    }
}

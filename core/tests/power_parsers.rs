//! Random bytes fed to every parser of outside input (the same functions the fuzz targets in
//! core/fuzz drive), so that stable CI checks they return an error, never panic.

use std::path::Path;

use joularcode_core::config::{parse_properties, Config, VmFormat};
use joularcode_core::cpu_list;
use joularcode_core::log::Recorded;
use joularcode_core::power::ringbuffer::{read_bytes, AREA_SIZE};
use joularcode_core::power::{perf, rapl, vm};
use joularcode_core::procstat;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn properties_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(properties) = parse_properties(&text) {
            let config = Config::from_properties(&properties, &Recorded::default());
            prop_assert!((1..=1000).contains(&config.sample_rate_ms));
        }
    }

    #[test]
    fn properties_of_keys_and_values_never_panic(text in "([a-z\\-]{0,12}[ =:\\t]{0,3}[ -~\\\\]{0,20}[\\r\\n]{0,2}){0,8}") {
        let _ = parse_properties(&text);
    }

    #[test]
    fn vm_files_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let file = Path::new("/host/vm.csv");
        for format in [VmFormat::PowerJoular, VmFormat::Watts] {
            if let Ok(row) = vm::parse(file, &bytes, format) {
                prop_assert!(row.power.is_finite() && row.power >= 0.0);
            }
        }
    }

    #[test]
    fn vm_rows_of_numbers_never_panic(text in "[0-9,.\\-+eE \\r]{0,40}\\n?") {
        let _ = vm::parse(Path::new("/host/vm.csv"), text.as_bytes(), VmFormat::PowerJoular);
    }

    #[test]
    fn ring_buffer_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..(AREA_SIZE + 16)),
        start in any::<i64>(),
        now in any::<i64>(),
    ) {
        let mut window_start = start;
        if let Ok(power) = read_bytes(&bytes, Path::new("/dev/shm/powerjoular"), &mut window_start, now) {
            prop_assert!(power.is_finite() && power >= 0.0);
        }
    }

    #[test]
    fn sysfs_texts_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let text = String::from_utf8_lossy(&bytes);
        let file = Path::new("/sys/class/powercap/intel-rapl:0/energy_uj");
        if let Ok(uj) = rapl::parse_microjoules(file, &text) {
            prop_assert!(i64::try_from(uj).is_ok());
        }
        let _ = perf::parse_event_config(&text);
        let _ = cpu_list::parse(&text);
    }

    #[test]
    fn sysfs_numbers_and_lists_never_panic(text in "[0-9x,=\\-+ a-z]{0,40}\n?") {
        let _ = rapl::parse_microjoules(Path::new("/energy_uj"), &text);
        let _ = perf::parse_event_config(&text);
        if let Some(cpus) = cpu_list::parse(&text) {
            prop_assert!(cpus.len() <= 65536 * (text.len() / 2 + 1));
        }
    }

    #[test]
    fn energy_between_counts_a_wrap_and_never_more_than_half_the_range(
        before in any::<u64>(), after in any::<u64>(), max in any::<u64>(),
    ) {
        let energy = rapl::energy_between(before, after, max);
        if after >= before {
            prop_assert_eq!(energy, after - before);
        } else {
            prop_assert!(energy <= max / 2);
        }
    }

    #[test]
    fn proc_stat_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(stat) = procstat::parse(&String::from_utf8_lossy(&bytes)) {
            prop_assert!(stat.cpu.busy <= stat.cpu.total);
        }
    }

    #[test]
    fn proc_stat_of_numbers_never_panics(text in "cpu[0-9 ]{0,60}\\n(cpu[0-9]{0,3} [0-9 ]{0,20}\\n){0,4}") {
        if let Ok(stat) = procstat::parse(&text) {
            prop_assert!(stat.cpu.busy <= stat.cpu.total);
        }
    }
}

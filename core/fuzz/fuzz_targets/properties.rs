//! joularcodejava.properties: the parser, then the configuration's rules.
#![no_main]

use joularcode_core::config::{parse_properties, Config};
use joularcode_core::log::Recorded;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(text) = std::str::from_utf8(bytes) {
        if let Ok(properties) = parse_properties(text) {
            let config = Config::from_properties(&properties, &Recorded::default());
            assert!((1..=1000).contains(&config.sample_rate_ms));
        }
    }
});

//! The bytes of a PowerJoular ring buffer, with the head of the window's start and the clock
//! taken from the first 16 bytes.
#![no_main]

use std::path::Path;

use joularcode_core::power::ringbuffer::read_bytes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    if bytes.len() < 16 {
        return;
    }
    let mut window_start = i64::from_ne_bytes(bytes[..8].try_into().unwrap());
    let now = i64::from_ne_bytes(bytes[8..16].try_into().unwrap());
    if let Ok(power) = read_bytes(&bytes[16..], Path::new("/dev/shm/powerjoular"), &mut window_start, now) {
        assert!(power.is_finite() && power >= 0.0);
    }
});

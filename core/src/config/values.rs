//! The values of the settings that take a number or a word: each read with the rules of its key,
//! and a bad value said in one warning and replaced by the default, as Joular Code for Java does.

use super::{JvmThreads, DEFAULT_SAMPLE_RATE_MS};
use crate::carbon::{self, IntensitySetting};
use crate::log::{Level, Log};

/// Below this rate, sampling can slow the application down: said, and kept.
const LOW_SAMPLE_RATE_MS: u64 = 5;
/// A sample past a window's length would stretch the window.
const MAX_SAMPLE_RATE_MS: u64 = 1000;

/// `stack-monitoring-sample-rate`: a whole number of milliseconds from 1 to 1000.
pub(super) fn sample_rate(value: &str, log: &dyn Log) -> u64 {
    if value.is_empty() {
        return DEFAULT_SAMPLE_RATE_MS;
    }
    match value.parse::<i64>() {
        Ok(rate @ 1..=1000) => {
            let rate = rate.unsigned_abs();
            if rate < LOW_SAMPLE_RATE_MS {
                log.log(
                    Level::Warning,
                    &format!(
                        "stack-monitoring-sample-rate is {rate} ms. Below {LOW_SAMPLE_RATE_MS} ms, sampling can noticeably slow the application down."
                    ),
                );
            }
            rate
        }
        _ => {
            log.log(
                Level::Warning,
                &format!(
                    "stack-monitoring-sample-rate must be a number of milliseconds from 1 to {MAX_SAMPLE_RATE_MS}, not '{value}'. Using {DEFAULT_SAMPLE_RATE_MS} ms."
                ),
            );
            DEFAULT_SAMPLE_RATE_MS
        }
    }
}

/// `jvm-threads`: `own` or `spread`, case-insensitive.
pub(super) fn jvm_threads(value: &str, log: &dyn Log) -> JvmThreads {
    match value.to_lowercase().as_str() {
        "" | "own" => JvmThreads::Own,
        "spread" => JvmThreads::Spread,
        _ => {
            log.log(
                Level::Warning,
                &format!("jvm-threads must be own or spread, not '{value}'. Using own."),
            );
            JvmThreads::Own
        }
    }
}

/// `estimate-idle-watts-per-cpu` and `estimate-max-watts-per-cpu`: a finite number of watts >= 0.
pub(super) fn watts_per_cpu(key: &str, value: &str, default: f64, log: &dyn Log) -> f64 {
    if value.is_empty() {
        return default;
    }
    match value.parse::<f64>() {
        Ok(watts) if watts.is_finite() && watts >= 0.0 => watts,
        _ => {
            log.log(
                Level::Warning,
                &format!("{key} must be a number of watts of 0 or more, not '{value}'. Using {default} W."),
            );
            default
        }
    }
}

/// `carbon-intensity`: grams of CO2e per kWh, or the path of a file that holds them; none when
/// blank, or when the number is no intensity (said: there is no default to fall back on).
pub(super) fn carbon_intensity(value: &str, log: &dyn Log) -> Option<IntensitySetting> {
    if value.is_empty() {
        return None;
    }
    match carbon::setting(value) {
        Ok(setting) => Some(setting),
        Err(why) => {
            log.log(
                Level::Warning,
                &format!("carbon-intensity {why}. No grams of CO2e are counted."),
            );
            None
        }
    }
}

//! The warnings of each cycle, in Joular Code for Java's words, each said once per episode: once
//! when a problem starts, and again only after a cycle without it.

use std::fmt::Display;

use crate::log::{Level, Log};
use crate::output::java_float::java_double;
use crate::power::MAX_WATTS;

/// Joular's threshold: the sampler is overrunning when the samples missed reach a quarter of
/// those taken.
const OVERRUN_SHARE: f64 = 0.25;
/// Joular's threshold: below half of the CPU time sampled, the per-method power is a lower bound.
const LOW_COVERAGE: f64 = 0.5;

/// A share from 0 to 1 as a whole percentage, rounded as Java's Math.round.
fn percent(share: f64) -> f64 {
    (share * 100.0).round()
}

/// What a cycle knows of the CPU time that went to threads no sample caught, for
/// [`Warnings::coverage_of_samples`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Uncaught {
    /// Threads that used CPU in the cycle and were caught by no sample.
    pub threads: u64,
    /// Their CPU time together, in ns.
    pub cpu_ns: u64,
    /// `stack-monitoring-sample-rate`: the CPU time between two samples of a thread, in ms.
    pub rate_ms: u64,
    /// Samples the sampler lost in the cycle (its buffer was full).
    pub lost_samples: u64,
}

impl Uncaught {
    /// What happened, as the end of a sentence.
    fn causes(&self) -> String {
        let mut causes = Vec::new();
        if self.lost_samples > 0 {
            causes.push(format!(
                "{} samples were lost (the sampler's buffer was full)",
                self.lost_samples
            ));
        }
        if self.threads > 0 {
            let ms = self.cpu_ns as f64 / 1e6;
            let each = ms / self.threads as f64;
            let threads = match self.threads {
                1 => format!("1 thread used {ms:.0} ms of CPU"),
                n => {
                    format!("{n} threads used {ms:.0} ms of CPU together (about {each:.1} ms each)")
                }
            };
            // A thread is caught about once per rate of its CPU time: one that ran several
            // periods and was never caught had its samples lost or taken outside the cycle.
            let why = if each < 2.0 * self.rate_ms as f64 {
                format!(
                    "too little for a sample every {} ms of CPU to catch; a smaller \
                     stack-monitoring-sample-rate catches more",
                    self.rate_ms
                )
            } else {
                format!(
                    "without a sample, although one every {} ms of CPU should have caught it",
                    self.rate_ms
                )
            };
            causes.push(format!("{threads}, {why}"));
        }
        if causes.is_empty() {
            causes.push("no thread of it was caught by a sample".to_string());
        }
        causes.join("; ")
    }
}

/// Which problems are going on, so that each is said once per episode.
#[derive(Debug, Default)]
pub struct Warnings {
    overrunning: bool,
    low_coverage: bool,
    power_lost: bool,
}

impl Warnings {
    /// Warns when the stack sampler could not keep up in the last cycle, as Joular does: when a
    /// quarter or more of the `taken` samples were `missed`. `taken` counts every sample that was
    /// due in the cycle of `interval_s` seconds, and `missed` those among them that came late (a
    /// thread dump that took longer than the interval) or were lost (dropped by the BPF ring
    /// buffer). `rate_ms` is `stack-monitoring-sample-rate`.
    pub fn sampler(
        &mut self,
        log: &dyn Log,
        rate_ms: u64,
        interval_s: f64,
        taken: u64,
        missed: u64,
    ) {
        let overrunning = taken > 0 && missed as f64 / taken as f64 >= OVERRUN_SHARE;
        if overrunning && !self.overrunning {
            // Java's Math.round, for a positive number
            let every_ms = (interval_s * 1000.0 / taken as f64).round() as i64;
            log.log(
                Level::Warning,
                &format!(
                    "The stack sampler cannot keep up with stack-monitoring-sample-rate={rate_ms} ms: \
                     {taken} samples were taken in the last window, about one every {every_ms} ms. \
                     Sampling the stacks of this many threads costs more than the interval allows. \
                     Raise the sample rate, or accept coarser data."
                ),
            );
        }
        self.overrunning = overrunning;
    }

    /// Warns, in Joular's words, when less than half of the JVM's CPU time belonged to sampled
    /// threads (the JVMTI mode, which samples thread dumps).
    pub fn coverage(&mut self, log: &dyn Log, coverage: f64) {
        self.low_coverage(log, coverage, || {
            format!(
                "Only {}% of this JVM's CPU time belonged to threads that were sampled, so the \
                 power reported per method is a lower bound. Short-lived threads and virtual \
                 threads, which the JVM does not report here, are the usual causes; a sample \
                 rate too coarse for the number of threads is another.",
                percent(coverage)
            )
        });
    }

    /// Warns when less than half of the JVM's CPU time in a cycle went to threads that a sample
    /// caught, saying what happened to the rest (the eBPF mode, which sees every thread that ran:
    /// short-lived and virtual threads included).
    pub fn coverage_of_samples(&mut self, log: &dyn Log, coverage: f64, uncaught: &Uncaught) {
        self.low_coverage(log, coverage, || {
            format!(
                "Only {}% of this JVM's CPU time in the last cycle went to threads that a sample \
                 caught, so the power reported per method is a lower bound: {}.",
                percent(coverage),
                uncaught.causes()
            )
        });
    }

    fn low_coverage(&mut self, log: &dyn Log, coverage: f64, message: impl FnOnce() -> String) {
        let low = coverage > 0.0 && coverage < LOW_COVERAGE;
        if low && !self.low_coverage {
            log.log(Level::Warning, &message());
        }
        self.low_coverage = low;
    }

    /// The CPU power to attribute, in W, from a power source's reading: the reading when it is a
    /// number of watts from 0 to [`MAX_WATTS`], else 0, with a warning when the power is first
    /// lost and a note when it is back.
    pub fn power<E: Display>(&mut self, log: &dyn Log, reading: Result<f64, E>) -> f64 {
        let error = match reading {
            Ok(watts) if watts > MAX_WATTS && watts.is_finite() => format!(
                "The power source reported {} W, more than any machine's CPUs draw (at most {} W).",
                java_double(watts),
                java_double(MAX_WATTS)
            ),
            Ok(watts) if watts.is_finite() && watts >= 0.0 => {
                if self.power_lost {
                    log.log(
                        Level::Info,
                        "The CPU power can be read again, energy is attributed again.",
                    );
                    self.power_lost = false;
                }
                return watts;
            }
            Ok(watts) => format!("The power source reported {} W.", java_double(watts)),
            Err(error) => error.to_string(),
        };
        if !self.power_lost {
            log.log(
                Level::Warning,
                &format!(
                    "Could not read the CPU power: {error} No energy is attributed until it can be \
                     read again."
                ),
            );
            self.power_lost = true;
        }
        0.0
    }
}

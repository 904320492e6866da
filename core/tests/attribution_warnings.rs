//! The cycle's warnings: Joular Code for Java's words, each said once per episode.

use joularcode_core::log::{Level, Recorded};
use joularcode_core::warnings::{Uncaught, Warnings};

fn said(log: &Recorded) -> Vec<(Level, String)> {
    log.messages()
}

#[test]
fn overrun_is_said_once_per_episode_in_joulars_words() {
    let (log, mut warnings) = (Recorded::default(), Warnings::default());
    warnings.sampler(&log, 10, 1.0, 100, 24); // 24 %: fine
    assert!(said(&log).is_empty());
    warnings.sampler(&log, 10, 1.0, 80, 20); // 25 %: overrunning
    warnings.sampler(&log, 10, 1.0, 100, 90); // still the same episode
    assert_eq!(
        said(&log),
        [(
            Level::Warning,
            "The stack sampler cannot keep up with stack-monitoring-sample-rate=10 ms: 80 samples \
             were taken in the last window, about one every 13 ms. Sampling the stacks of this \
             many threads costs more than the interval allows. Raise the sample rate, or accept \
             coarser data."
                .to_string()
        )]
    );
    warnings.sampler(&log, 10, 1.0, 100, 0); // a fine cycle re-arms it
    warnings.sampler(&log, 5, 1.02, 40, 40); // every sample late or lost
    assert_eq!(said(&log).len(), 2);
    assert!(said(&log)[1].1.contains(
        "stack-monitoring-sample-rate=5 ms: 40 samples were taken in the last window, about one every 26 ms."
    ));
}

#[test]
fn no_sample_taken_is_not_an_overrun() {
    let (log, mut warnings) = (Recorded::default(), Warnings::default());
    warnings.sampler(&log, 10, 1.0, 0, 0);
    warnings.sampler(&log, 10, 1.0, 0, 5);
    assert!(said(&log).is_empty());
}

#[test]
fn low_coverage_is_said_once_per_episode() {
    let (log, mut warnings) = (Recorded::default(), Warnings::default());
    for coverage in [1.0, 0.5, 0.0] {
        warnings.coverage(&log, coverage);
    }
    assert!(said(&log).is_empty(), "0.5 is not low, 0 is no CPU at all");
    warnings.coverage(&log, 0.295);
    warnings.coverage(&log, 0.1);
    assert_eq!(
        said(&log),
        [(
            Level::Warning,
            "Only 30% of this JVM's CPU time belonged to threads that were sampled, so the power \
             reported per method is a lower bound. Short-lived threads and virtual threads, which \
             the JVM does not report here, are the usual causes; a sample rate too coarse for the \
             number of threads is another."
                .to_string()
        )]
    );
    warnings.coverage(&log, 0.9);
    warnings.coverage(&log, 0.2);
    assert_eq!(said(&log).len(), 2);
    assert!(said(&log)[1].1.starts_with("Only 20% "));
}

#[test]
fn low_coverage_of_samples_says_what_happened() {
    let (log, mut warnings) = (Recorded::default(), Warnings::default());
    let uncaught = Uncaught {
        threads: 40,
        cpu_ns: 180_000_000,
        rate_ms: 10,
        lost_samples: 0,
    };
    warnings.coverage_of_samples(&log, 0.45, &uncaught);
    warnings.coverage_of_samples(&log, 0.3, &uncaught);
    assert_eq!(
        said(&log),
        [(
            Level::Warning,
            "Only 45% of this JVM's CPU time in the last cycle went to threads that a sample \
             caught, so the power reported per method is a lower bound: 40 threads used 180 ms \
             of CPU together (about 4.5 ms each), too little for a sample every 10 ms of CPU to \
             catch; a smaller stack-monitoring-sample-rate catches more."
                .to_string()
        )]
    );
    warnings.coverage_of_samples(&log, 0.9, &uncaught);
    let lost = Uncaught {
        threads: 3,
        cpu_ns: 600_000_000,
        lost_samples: 57,
        ..uncaught
    };
    warnings.coverage_of_samples(&log, 0.07, &lost);
    assert_eq!(
        said(&log)[1].1,
        "Only 7% of this JVM's CPU time in the last cycle went to threads that a sample caught, \
         so the power reported per method is a lower bound: 57 samples were lost (the sampler's \
         buffer was full); 3 threads used 600 ms of CPU together (about 200.0 ms each), without \
         a sample, although one every 10 ms of CPU should have caught it."
    );
}

#[test]
fn power_lost_is_said_once_and_its_return_once() {
    let (log, mut warnings) = (Recorded::default(), Warnings::default());
    assert_eq!(warnings.power(&log, Ok::<_, String>(12.5)), 12.5);
    assert!(said(&log).is_empty());
    assert_eq!(
        warnings.power(
            &log,
            Err("No RAPL package zone found in /sys/class/powercap.")
        ),
        0.0
    );
    assert_eq!(warnings.power(&log, Err("again")), 0.0);
    assert_eq!(warnings.power(&log, Ok::<_, String>(f64::NAN)), 0.0);
    assert_eq!(warnings.power(&log, Ok::<_, String>(3.0)), 3.0);
    assert_eq!(warnings.power(&log, Ok::<_, String>(4.0)), 4.0);
    assert_eq!(
        said(&log),
        [
            (
                Level::Warning,
                "Could not read the CPU power: No RAPL package zone found in /sys/class/powercap. \
                 No energy is attributed until it can be read again."
                    .to_string()
            ),
            (
                Level::Info,
                "The CPU power can be read again, energy is attributed again.".to_string()
            ),
        ]
    );
}

#[test]
fn power_that_is_not_a_number_of_watts_is_lost_power() {
    for (watts, shown) in [
        (-1.0, "-1.0"),
        (f64::NAN, "NaN"),
        (f64::INFINITY, "Infinity"),
    ] {
        let (log, mut warnings) = (Recorded::default(), Warnings::default());
        assert_eq!(warnings.power(&log, Ok::<_, String>(watts)), 0.0);
        assert_eq!(
            said(&log),
            [(
                Level::Warning,
                format!(
                    "Could not read the CPU power: The power source reported {shown} W. No energy \
                     is attributed until it can be read again."
                )
            )]
        );
    }
    let (log, mut warnings) = (Recorded::default(), Warnings::default());
    assert_eq!(warnings.power(&log, Ok::<_, String>(1e308)), 0.0);
    assert_eq!(warnings.power(&log, Ok::<_, String>(f64::NAN)), 0.0);
    assert_eq!(warnings.power(&log, Ok::<_, String>(10_000.0)), 10_000.0);
    assert_eq!(
        said(&log),
        [
            (
                Level::Warning,
                "Could not read the CPU power: The power source reported 1.0E308 W, more than any \
                 machine's CPUs draw (at most 10000.0 W). No energy is attributed until it can be \
                 read again."
                    .to_string()
            ),
            (
                Level::Info,
                "The CPU power can be read again, energy is attributed again.".to_string()
            )
        ],
        "said once per episode"
    );
}

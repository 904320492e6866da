//! The per-CPU software cpu-clock perf events that drive the sampler.

use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

use joularcode_core::cpu_list;

use super::SamplerError;
use perf_event_open_sys::bindings::{
    perf_event_attr, PERF_COUNT_SW_CPU_CLOCK, PERF_FLAG_FD_CLOEXEC, PERF_TYPE_SOFTWARE, PERIOD,
};

/// Where the kernel lists the online CPUs.
pub const ONLINE_CPUS: &str = "/sys/devices/system/cpu/online";

/// The online CPUs, from [`ONLINE_CPUS`].
pub fn online_cpus() -> Result<Vec<u32>, SamplerError> {
    let text = fs::read_to_string(ONLINE_CPUS)
        .map_err(|e| SamplerError::Kernel(format!("cannot read {ONLINE_CPUS}: {e}")))?;
    cpu_list::parse(&text).ok_or_else(|| {
        SamplerError::Kernel(format!(
            "{ONLINE_CPUS} holds {:?}, not a CPU list like 0-3,8",
            text.trim()
        ))
    })
}

/// How far the sampling rate is dithered around the rate asked for: ±25%.
const DITHER: f64 = 0.25;
/// Periods, at least, between two draws of a CPU's period. A draw restarts the timer, so the
/// part of a period elapsed since the last sample is lost (half a period on average): drawing
/// every period would halve the rate at worst, every 20 periods costs 2.5%, which
/// [`Dither::centre_hz`] makes up for.
const PERIODS_PER_DRAW: f64 = 20.0;

/// Draws made at most in one pass of the consumer. A draw is an ioctl that interrupts the CPU the
/// event runs on: a host of many CPUs has its events drawn in turn, a few per pass, not all at
/// every pass.
const DRAWS_PER_PASS: f64 = 1.0;

/// The cpu-clock events of the sampler, whose period is drawn anew every few passes of the
/// consumer thread, at a random rate within ±25% of the one asked for.
///
/// A fixed period keeps one phase against the scheduler's tick for a whole run, and a program
/// paced by timers (a thread started every 20 ms) can then be sampled at the same moments of its
/// threads' lives every time, over-sampling their start or end. Drawing the period anew moves
/// the samples over every phase, and the mean rate stays the one asked for (docs/sampler.md).
pub struct Dither {
    clocks: Vec<OwnedFd>,
    centre_hz: f64,
    passes_per_draw: u64,
    passes: u64,
}

impl Dither {
    /// The dither of `rate_hz` on `cpus` events, for a consumer that passes every `pass`, with no
    /// event yet.
    pub fn new(rate_hz: u64, pass: Duration, cpus: usize) -> Dither {
        let rate = rate_hz.max(1) as f64;
        let passes_per_draw = (PERIODS_PER_DRAW / rate / pass.as_secs_f64())
            .max(cpus as f64 / DRAWS_PER_PASS)
            .ceil()
            .max(1.0);
        // Half a period lost per draw, out of the time between draws.
        let lost = 0.5 / (rate * passes_per_draw * pass.as_secs_f64());
        Dither {
            clocks: Vec::new(),
            centre_hz: rate / (1.0 - lost),
            passes_per_draw: passes_per_draw as u64,
            passes: 0,
        }
    }

    /// Whether the event `index` gets a new period at pass `pass`: each one every
    /// `passes_per_draw` passes, the events in turn.
    fn due(&self, index: usize, pass: u64) -> bool {
        (pass + index as u64) % self.passes_per_draw == 0
    }

    /// A period in ns drawn with `random` (uniform in [0, 1)): its rate is uniform within ±25% of
    /// the centre. At least 10 µs, the kernel's floor for cpu-clock.
    pub fn period_ns(&self, random: f64) -> u64 {
        let rate = self.centre_hz * (1.0 - DITHER + 2.0 * DITHER * random.clamp(0.0, 1.0));
        ((1e9 / rate) as u64).max(10_000)
    }

    /// Keeps `clock`, a duplicate of an event opened by [`open_cpu_clock`], to dither it.
    pub fn add(&mut self, clock: OwnedFd) {
        self.clocks.push(clock);
    }

    /// One pass of the consumer: a new period for the events whose turn it is.
    pub fn pass(&mut self) {
        self.passes += 1;
        for (index, clock) in self.clocks.iter().enumerate() {
            if self.due(index, self.passes) {
                // A failure leaves the event at its last period: still sampling, at a rate near
                // the one asked for.
                let _ = set_period(clock.as_fd(), self.period_ns(fastrand::f64()));
            }
        }
    }
}

/// Opens a disabled cpu-clock event on one CPU for every task, firing every `period_ns` of that
/// CPU's time. Attaching a BPF program enables it.
pub fn open_cpu_clock(cpu: u32, period_ns: u64) -> io::Result<OwnedFd> {
    let mut attr = perf_event_attr {
        type_: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config: PERF_COUNT_SW_CPU_CLOCK as u64,
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = period_ns;
    attr.set_disabled(1);
    // SAFETY: attr is a valid, fully initialised perf_event_attr that outlives the call.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(
            &mut attr,
            -1,
            cpu as i32,
            -1,
            PERF_FLAG_FD_CLOEXEC as _,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sets the period of a cpu-clock event opened by [`open_cpu_clock`]: the next sample comes
/// `period_ns` from now, and the following ones every `period_ns`.
fn set_period(event: BorrowedFd, period_ns: u64) -> io::Result<()> {
    // SAFETY: PERF_EVENT_IOC_PERIOD reads one u64 through the pointer, which outlives the call.
    let status = unsafe { libc::ioctl(event.as_raw_fd(), PERIOD as _, &period_ns as *const u64) };
    if status < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_spaced_by_twenty_periods_at_least() {
        let pass = Duration::from_millis(100);
        assert_eq!(Dither::new(100, pass, 1).passes_per_draw, 2);
        assert_eq!(Dither::new(500, pass, 1).passes_per_draw, 1);
        assert_eq!(Dither::new(1, pass, 1).passes_per_draw, 200);
        let dither = Dither::new(500, pass, 1);
        assert_eq!(dither.period_ns(0.5), (1e9 / dither.centre_hz) as u64);
        assert_eq!(Dither::new(1_000_000, pass, 1).period_ns(0.5), 10_000);
    }

    #[test]
    fn many_cpus_are_drawn_in_turn_one_per_pass() {
        let pass = Duration::from_millis(100);
        for (rate, cpus) in [(100, 2), (100, 64), (500, 3), (1, 4)] {
            let dither = Dither::new(rate, pass, cpus);
            assert!(
                dither.passes_per_draw >= cpus as u64,
                "{rate} Hz, {cpus} CPUs"
            );
            for at in 1..=1000 {
                let draws = (0..cpus).filter(|&cpu| dither.due(cpu, at)).count();
                assert!(draws <= 1, "{draws} draws at pass {at}");
            }
            for cpu in 0..cpus {
                let draws = (1..=1000).filter(|&at| dither.due(cpu, at)).count() as u64;
                let each = 1000 / dither.passes_per_draw;
                assert!(
                    (each..=each + 1).contains(&draws),
                    "CPU {cpu}: {draws} draws"
                );
            }
        }
    }

    /// The samples per second a dithered event takes over `seconds`, each draw restarting the
    /// timer (losing the part of the period elapsed), as the kernel does.
    fn simulated_rate(rate_hz: u64, seconds: f64) -> f64 {
        let pass = 0.1;
        let mut dither = Dither::new(rate_hz, Duration::from_secs_f64(pass), 1);
        let mut rng = fastrand::Rng::with_seed(7);
        let mut period = dither.period_ns(rng.f64()) as f64 / 1e9;
        let (mut now, mut next, mut samples) = (0.0, period, 0u64);
        while now < seconds {
            // Passes are not in step with the timer: the consumer also spends time consuming.
            now += pass * (1.0 + 0.01 * rng.f64());
            while next <= now {
                samples += 1;
                next += period;
            }
            dither.passes += 1;
            if dither.due(0, dither.passes) {
                period = dither.period_ns(rng.f64()) as f64 / 1e9;
                next = now + period;
            }
        }
        samples as f64 / now
    }

    #[test]
    fn dithered_events_keep_the_mean_rate() {
        for (rate, seconds) in [(1, 100_000.0), (10, 20_000.0), (100, 2_000.0), (500, 400.0)] {
            let seen = simulated_rate(rate, seconds);
            assert!(
                (seen / rate as f64 - 1.0).abs() < 0.01,
                "{seen} Hz for {rate} Hz"
            );
        }
    }

    #[test]
    fn lists_this_machines_cpus() {
        let cpus = online_cpus().expect("online CPUs");
        assert!(cpus.contains(&0));
    }
}

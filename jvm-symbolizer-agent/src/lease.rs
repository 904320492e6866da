//! The profilers' lease on the code map: the agent writes its map only while a profiler reads it.
//!
//! A profiler that reads the map sets the map's access time at least once a second (`futimens`
//! with an explicit time on the descriptor it reads, which works on `noatime` mounts too). The
//! agent looks at the access time of the file it writes, through its own descriptor, every
//! [`CHECK_EVERY`]: the lease is renewed whenever that time differs from the one seen before, and
//! it runs on the agent's CLOCK_MONOTONIC. So no clock jump (the host's wall clock, a container's)
//! makes it end early or last, the time a profiler writes does not matter, any number of
//! profilers renew it together, and a file put at the map's path by someone else renews nothing.
//! Once [`LEASE`] passes without a renewal (every reader ended, `kill -9` included), or the map
//! reaches [`MAX_MAP`] bytes, the agent stops writing (docs/code-map.md, "The lease").

use std::time::Duration;

/// How long the map is written without a renewal.
pub const LEASE: Duration = Duration::from_secs(5);
/// How often the agent looks at its map's access time.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);
/// The largest code map written: past it the agent stops, and the next attach starts a new map
/// with the live code only. It is well over the replay of the biggest code caches (tens of MB)
/// and a quarter of what a profiler opens (1 GiB).
pub const MAX_MAP: u64 = 256 << 20;

/// A file's access time: seconds and nanoseconds, as `fstat` gives them.
pub type Stamp = (i64, i64);

/// What a look at the map decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A profiler renewed the lease within [`LEASE`]: the agent goes on.
    Held,
    /// No profiler renewed it for [`LEASE`]: the agent stops.
    Expired,
    /// The map reached [`MAX_MAP`] bytes: the agent stops.
    Full,
}

/// The lease of one map, from its opening.
#[derive(Debug, Clone, Copy)]
pub struct Lease {
    stamp: Stamp,
    renewed_ns: u64,
    length_ns: u64,
    max_len: u64,
}

impl Lease {
    /// The lease of a map opened at `now_ns` (CLOCK_MONOTONIC) with access time `stamp`: the
    /// profiler that loaded or attached the agent has [`LEASE`] to read it a first time.
    pub fn granted(stamp: Stamp, now_ns: u64) -> Lease {
        Lease::with_bounds(stamp, now_ns, LEASE, MAX_MAP)
    }

    /// [`Lease::granted`] with another length and size bound.
    pub fn with_bounds(stamp: Stamp, now_ns: u64, length: Duration, max_len: u64) -> Lease {
        Lease {
            stamp,
            renewed_ns: now_ns,
            length_ns: u64::try_from(length.as_nanos()).unwrap_or(u64::MAX),
            max_len,
        }
    }

    /// Looks at the map at `now_ns`: its access time is `stamp`, its length `len` bytes.
    pub fn check(&mut self, stamp: Stamp, len: u64, now_ns: u64) -> Verdict {
        if stamp != self.stamp {
            self.stamp = stamp;
            self.renewed_ns = now_ns;
        }
        if len >= self.max_len {
            Verdict::Full
        } else if now_ns.saturating_sub(self.renewed_ns) >= self.length_ns {
            Verdict::Expired
        } else {
            Verdict::Held
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn a_new_access_time_renews_the_lease_and_none_ends_it() {
        let mut lease = Lease::granted((100, 0), 10 * S);
        assert_eq!(lease.check((100, 0), 10, 14 * S), Verdict::Held);
        assert_eq!(lease.check((100, 0), 10, 15 * S), Verdict::Expired);
        let mut lease = Lease::granted((100, 0), 10 * S);
        for second in 11..40 {
            let read = (100 + second as i64, 7);
            assert_eq!(lease.check(read, 10, second * S), Verdict::Held);
        }
        assert_eq!(lease.check((139, 7), 10, 43 * S), Verdict::Held);
        assert_eq!(lease.check((139, 7), 10, 44 * S), Verdict::Expired);
    }

    #[test]
    fn only_a_change_counts_whatever_the_time_written() {
        // A wall clock set back by an hour, or a profiler's time far in the future: any new
        // value renews, and no value lasts longer than one lease without a change.
        let mut lease = Lease::granted((5_000, 0), S);
        assert_eq!(lease.check((1_400, 3), 10, 4 * S), Verdict::Held);
        assert_eq!(lease.check((i64::MAX, 0), 10, 8 * S), Verdict::Held);
        assert_eq!(lease.check((i64::MAX, 0), 10, 13 * S), Verdict::Expired);
        // A change of the nanoseconds alone counts (two reads within a second).
        let mut lease = Lease::granted((5_000, 1), S);
        assert_eq!(lease.check((5_000, 2), 10, 5 * S), Verdict::Held);
        assert_eq!(lease.check((5_000, 2), 10, 10 * S), Verdict::Expired);
    }

    #[test]
    fn the_agents_own_clock_only_moves_forward() {
        // CLOCK_MONOTONIC never goes back; a time before the renewal (impossible) keeps it.
        let mut lease = Lease::granted((1, 0), 10 * S);
        assert_eq!(lease.check((1, 0), 10, 3 * S), Verdict::Held);
    }

    #[test]
    fn a_map_at_its_bound_is_full_even_while_it_is_read() {
        let mut lease = Lease::with_bounds((1, 0), 0, LEASE, 1000);
        assert_eq!(lease.check((2, 0), 999, S), Verdict::Held);
        assert_eq!(lease.check((3, 0), 1000, 2 * S), Verdict::Full);
        assert_eq!(
            Lease::granted((1, 0), 0).check((2, 0), MAX_MAP, S),
            Verdict::Full
        );
    }
}

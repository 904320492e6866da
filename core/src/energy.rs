//! Units of a cycle: its [`Interval`], a [`Power`] over it and the [`Energy`] that makes. Watts
//! become joules in one place, `Power * Interval`, so that every output (the CSV files, the cycle
//! log, the views, the daemon's counters) gives the same joules for the same cycle.

use std::iter::Sum;
use std::ops::{Add, AddAssign, Div, Mul};

/// `+`, `+=` and `sum()` for a unit `$unit` whose value is read with `$value`.
macro_rules! additive {
    ($unit:ident, $value:ident) => {
        impl Add for $unit {
            type Output = $unit;

            fn add(self, other: $unit) -> $unit {
                $unit(self.0 + other.0)
            }
        }

        impl AddAssign for $unit {
            fn add_assign(&mut self, other: $unit) {
                self.0 += other.0;
            }
        }

        impl Sum for $unit {
            fn sum<I: Iterator<Item = $unit>>(values: I) -> $unit {
                $unit(values.map($unit::$value).sum())
            }
        }
    };
}

/// The length of a cycle: kept in ns as measured, and in seconds as every formula takes it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Interval {
    ns: u64,
}

impl Interval {
    /// An interval of `ns` nanoseconds.
    pub const fn from_ns(ns: u64) -> Interval {
        Interval { ns }
    }

    /// Its length, in ns.
    pub const fn ns(self) -> u64 {
        self.ns
    }

    /// Its length, in seconds.
    pub fn seconds(self) -> f64 {
        self.ns as f64 / 1e9
    }

    /// Its length, in whole milliseconds (rounded).
    pub fn millis(self) -> i64 {
        (self.seconds() * 1000.0).round() as i64
    }
}

/// A power, in watts.
#[derive(Debug, Clone, Copy, Default, PartialEq, PartialOrd)]
pub struct Power(f64);

impl Power {
    /// No power.
    pub const ZERO: Power = Power(0.0);

    /// A power of `watts` W.
    pub const fn from_watts(watts: f64) -> Power {
        Power(watts)
    }

    /// In W.
    pub const fn watts(self) -> f64 {
        self.0
    }
}

/// The energy a power gives over an interval: the one place where watts become joules.
impl Mul<Interval> for Power {
    type Output = Energy;

    fn mul(self, interval: Interval) -> Energy {
        Energy(self.0 * interval.seconds())
    }
}

additive!(Power, watts);

/// An energy, in joules.
#[derive(Debug, Clone, Copy, Default, PartialEq, PartialOrd)]
pub struct Energy(f64);

impl Energy {
    /// No energy.
    pub const ZERO: Energy = Energy(0.0);

    /// An energy of `joules` J.
    pub const fn from_joules(joules: f64) -> Energy {
        Energy(joules)
    }

    /// In J.
    pub const fn joules(self) -> f64 {
        self.0
    }
}

/// The power an energy makes over an interval: the one place where joules become watts (the
/// energy counters' sources).
impl Div<Interval> for Energy {
    type Output = Power;

    fn div(self, interval: Interval) -> Power {
        Power(self.0 / interval.seconds())
    }
}

additive!(Energy, joules);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watts_over_an_interval_are_joules() {
        let interval = Interval::from_ns(1_500_000_000);
        assert_eq!(interval.seconds(), 1.5);
        assert_eq!(interval.millis(), 1500);
        assert_eq!((Power::from_watts(40.0) * interval).joules(), 60.0);
        assert_eq!((Power::ZERO * interval).joules(), 0.0);
        assert_eq!((Energy::from_joules(60.0) / interval).watts(), 40.0);
    }

    #[test]
    fn powers_and_energies_add_up() {
        let powers = [Power::from_watts(1.5), Power::from_watts(2.5)];
        assert_eq!(powers.iter().copied().sum::<Power>().watts(), 4.0);
        let mut energy = Energy::from_joules(1.0);
        energy += Energy::from_joules(2.0);
        assert_eq!(energy + Energy::ZERO, Energy::from_joules(3.0));
        assert_eq!([energy, energy].into_iter().sum::<Energy>().joules(), 6.0);
    }
}

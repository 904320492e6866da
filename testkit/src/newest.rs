//! The newest frame of two samplers' samples of one run compared: which method each sample was
//! running (the frame a method's own energy is given to), as a distribution over methods, the
//! total variation distance between the two distributions, and the distance that sampling noise
//! alone gives samples of those sizes ([`noise_floor`]).
//!
//! ```
//! use joularcode_testkit::newest::{newest_frames, noise_floor, total_variation};
//!
//! let ours = newest_frames([("main;a;b", 30), ("main;a", 10)]);
//! let jfr = newest_frames([("main;a;b", 25), ("main;c", 15)]);
//! let distance = total_variation(&ours, &jfr);
//! assert!((distance - 0.375).abs() < 1e-9);
//! assert!(noise_floor(&ours, &jfr) < distance);
//! ```

use std::collections::BTreeMap;

/// Samples by method: how many samples had each method as their newest frame.
pub type Newest = BTreeMap<String, u64>;

/// How many random splits [`noise_floor`] averages.
const SPLITS: usize = 400;

/// The seed of [`noise_floor`]'s splits: the same samples give the same floor every time.
const SEED: u64 = 0x5EED_0F21_7E57_F100;

/// The samples of `stacks` (branch, oldest frame first and joined by `;`, and its samples) by
/// their newest frame.
pub fn newest_frames<S: AsRef<str>>(stacks: impl IntoIterator<Item = (S, u64)>) -> Newest {
    let mut newest = Newest::new();
    for (branch, n) in stacks {
        let branch = branch.as_ref();
        let frame = branch.rsplit(';').next().unwrap_or(branch);
        *newest.entry(frame.to_string()).or_insert(0) += n;
    }
    newest
}

/// Each method's share of the samples of `newest`, from 0 to 1 (empty without samples).
pub fn shares(newest: &Newest) -> BTreeMap<&str, f64> {
    let total = newest.values().sum::<u64>();
    newest
        .iter()
        .filter(|_| total > 0)
        .map(|(method, &n)| (method.as_str(), n as f64 / total as f64))
        .collect()
}

/// The total variation distance between the distributions of `a` and `b`: half the sum over
/// methods of the difference of their shares, the part of the samples that would have to move to
/// another method for the two to agree. From 0 (the same shares) to 1 (no method in common); 1
/// when either has no sample.
pub fn total_variation(a: &Newest, b: &Newest) -> f64 {
    let (a, b) = (shares(a), shares(b));
    if a.is_empty() || b.is_empty() {
        return 1.0;
    }
    let share = |m: &BTreeMap<&str, f64>, method: &str| m.get(method).copied().unwrap_or(0.0);
    let methods: std::collections::BTreeSet<&str> = a.keys().chain(b.keys()).copied().collect();
    methods
        .into_iter()
        .map(|method| (share(&a, method) - share(&b, method)).abs())
        .sum::<f64>()
        / 2.0
}

/// The methods whose shares differ most between `a` and `b`, most first, at most `count`:
/// (method, share in `a`, share in `b`).
pub fn largest_differences(a: &Newest, b: &Newest, count: usize) -> Vec<(String, f64, f64)> {
    let (sa, sb) = (shares(a), shares(b));
    let share = |m: &BTreeMap<&str, f64>, method: &str| m.get(method).copied().unwrap_or(0.0);
    let mut methods: Vec<(String, f64, f64)> = a
        .keys()
        .chain(b.keys().filter(|method| !a.contains_key(*method)))
        .map(|method| (method.clone(), share(&sa, method), share(&sb, method)))
        .collect();
    methods.sort_by(|x, y| (y.1 - y.2).abs().total_cmp(&(x.1 - x.2).abs()));
    methods.truncate(count);
    methods
}

/// The total variation distance that sampling noise alone gives two samples the sizes of `a` and
/// `b` taken of one distribution: a permutation floor. Both samples are pooled (the pool stands
/// for the one distribution they would share), split at random into two parts the sizes of `a`
/// and `b`, and the distance of the parts is averaged over [`SPLITS`] splits, drawn from a fixed
/// seed ([`SEED`]) so that the same samples give the same floor.
///
/// Permutation rather than the analytic expectation from the multinomial counts: the expected
/// distance is a sum over methods of the expected absolute difference of two counts, which has
/// no closed form, and its normal approximation fails for the many methods of a real program seen
/// a few times only (they make most of the floor). The splits need no approximation. They treat
/// samples as independent draws, which overstates the noise of samplers that take them at regular
/// steps of time: the floor is what two samplers that agree may differ by, not less.
pub fn noise_floor(a: &Newest, b: &Newest) -> f64 {
    let (size_a, size_b) = (a.values().sum::<u64>(), b.values().sum::<u64>());
    if size_a == 0 || size_b == 0 {
        return 1.0;
    }
    let pool_counts: Vec<u64> = a
        .keys()
        .chain(b.keys().filter(|method| !a.contains_key(*method)))
        .map(|method| a.get(method).copied().unwrap_or(0) + b.get(method).copied().unwrap_or(0))
        .collect();
    let mut pool: Vec<u32> = pool_counts
        .iter()
        .enumerate()
        .flat_map(|(method, &n)| std::iter::repeat_n(method as u32, n as usize))
        .collect();
    let mut rng = SplitMix(SEED);
    let size_a = size_a as usize;
    let mut part_a = vec![0u64; pool_counts.len()];
    let mut sum = 0.0;
    for _ in 0..SPLITS {
        // The first size_a places of a partial Fisher-Yates shuffle: a uniform random part.
        for i in 0..size_a {
            let j = i + rng.below(pool.len() - i);
            pool.swap(i, j);
        }
        part_a.iter_mut().for_each(|n| *n = 0);
        for &method in &pool[..size_a] {
            part_a[method as usize] += 1;
        }
        sum += pool_counts
            .iter()
            .zip(&part_a)
            .map(|(&all, &in_a)| {
                (in_a as f64 / size_a as f64 - (all - in_a) as f64 / size_b as f64).abs()
            })
            .sum::<f64>()
            / 2.0;
    }
    sum / SPLITS as f64
}

/// SplitMix64: a small, seeded random number generator.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number from 0 to `bound` - 1 (`bound` > 0), as good as uniform for bounds far below
    /// 2^64.
    fn below(&mut self, bound: usize) -> usize {
        ((u128::from(self.next()) * bound as u128) >> 64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pairs: &[(&str, u64)]) -> Newest {
        pairs.iter().map(|&(m, n)| (m.to_string(), n)).collect()
    }

    #[test]
    fn the_newest_frame_is_the_last_of_the_branch() {
        let newest = newest_frames([("main;a;b", 3), ("main;c;b", 2), ("main", 1)]);
        assert_eq!(newest, counts(&[("b", 5), ("main", 1)]));
    }

    #[test]
    fn total_variation_is_the_part_of_the_samples_that_differs() {
        let a = counts(&[("x", 30), ("y", 10)]);
        assert_eq!(total_variation(&a, &counts(&[("x", 3), ("y", 1)])), 0.0);
        assert_eq!(total_variation(&a, &counts(&[("z", 7)])), 1.0);
        // x: 0.75 against 0.5, y: 0.25 against 0, z: 0 against 0.5
        let b = counts(&[("x", 5), ("z", 5)]);
        assert!((total_variation(&a, &b) - 0.5).abs() < 1e-12);
        assert_eq!(total_variation(&a, &Newest::new()), 1.0);
        let most = largest_differences(&a, &b, 2);
        assert_eq!(most[0].0, "z");
        assert_eq!(most.len(), 2);
    }

    /// Two methods: the distance is the difference of one method's shares, whose mean for two
    /// binomial samples of n from a share p is sqrt(2/pi) * sqrt(p(1-p) 2/n) for large n.
    #[test]
    fn the_floor_of_two_methods_is_the_binomial_expectation() {
        let a = counts(&[("x", 500), ("y", 500)]);
        let expected = (2.0 / std::f64::consts::PI).sqrt() * (0.25f64 * 2.0 / 1000.0).sqrt();
        let floor = noise_floor(&a, &a);
        assert!(
            (floor - expected).abs() < 0.1 * expected,
            "{floor} against {expected}"
        );
        assert_eq!(floor, noise_floor(&a, &a), "the same seed, the same floor");
    }

    /// The floor falls as the square root of the samples, and rises with the number of methods
    /// seen a few times each.
    #[test]
    fn the_floor_follows_the_counts() {
        let small = counts(&[("x", 300), ("y", 200), ("z", 100)]);
        let large = counts(&[("x", 1200), ("y", 800), ("z", 400)]);
        let ratio = noise_floor(&small, &small) / noise_floor(&large, &large);
        assert!((ratio - 2.0).abs() < 0.3, "{ratio}");
        let spread: Newest = (0..1000).map(|m| (format!("m{m}"), 1)).collect();
        assert!(noise_floor(&spread, &spread) > 0.5);
        assert!(noise_floor(&small, &small) < 0.1);
    }

    /// Samples drawn from one distribution are as far apart as the floor says, and samples of
    /// two distributions farther.
    #[test]
    fn samples_of_one_distribution_stay_near_the_floor() {
        let shares = [0.4, 0.2, 0.1, 0.1, 0.05, 0.05, 0.04, 0.03, 0.02, 0.01];
        let mut rng = SplitMix(7);
        let mut draw = |n: usize, shares: &[f64]| {
            let mut sample = Newest::new();
            for _ in 0..n {
                let mut u = rng.below(1_000_000) as f64 / 1e6;
                let method = shares
                    .iter()
                    .position(|&s| {
                        u -= s;
                        u < 0.0
                    })
                    .unwrap_or(shares.len() - 1);
                *sample.entry(format!("m{method}")).or_insert(0) += 1;
            }
            sample
        };
        let (mut distances, mut floors) = (0.0, 0.0);
        for _ in 0..20 {
            let (a, b) = (draw(2000, &shares), draw(1500, &shares));
            distances += total_variation(&a, &b) / 20.0;
            floors += noise_floor(&a, &b) / 20.0;
        }
        assert!(
            (distances - floors).abs() < 0.15 * floors,
            "{distances} {floors}"
        );
        let mut other = shares;
        other.swap(0, 1);
        let (a, b) = (draw(2000, &shares), draw(1500, &other));
        assert!(total_variation(&a, &b) > noise_floor(&a, &b) + 0.1);
    }
}

//! connbench's own random generator: one seeded, fast generator for the choices that
//! are connbench's rather than a script's (arrival gaps under -R, a relay's jitter, a
//! suite's order). A leaf, so the relay, load's threads and the suite planner share it
//! without importing one another.

/// A random generator for connbench's own choices (arrival gaps under -R, a relay's
/// jitter, a suite's order): rand's `SmallRng` (xoshiro). `range` draws with rand's
/// uniform integer sampling, which has no modulo bias. A script's random functions use
/// pgbench's own generator instead (`script::prng::Prng`), so they repeat pgbench's values.
#[derive(Debug, Clone)]
pub struct Rng(rand::rngs::SmallRng);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(rand::SeedableRng::seed_from_u64(seed))
    }

    /// Uniform in [lo, hi], inclusive; `lo` when the range is empty.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        rand::RngExt::random_range(&mut self.0, lo..=hi)
    }

    /// Uniform in (0, 1], so that its logarithm is finite.
    pub fn unit(&mut self) -> f64 {
        1.0 - rand::RngExt::random::<f64>(&mut self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_is_inclusive_and_an_empty_range_gives_its_low_end() {
        let mut rng = Rng::new(1);
        let draws: Vec<i64> = (0..1000).map(|_| rng.range(3, 5)).collect();
        assert!(draws.iter().all(|d| (3..=5).contains(d)));
        for v in 3..=5 {
            assert!(draws.contains(&v), "{v} never drawn in 1000 draws");
        }
        assert_eq!(rng.range(9, 9), 9);
        assert_eq!(rng.range(9, 2), 9);
    }

    #[test]
    fn unit_is_in_the_half_open_interval_above_zero() {
        let mut rng = Rng::new(2);
        for _ in 0..10_000 {
            let u = rng.unit();
            assert!(u > 0.0 && u <= 1.0, "{u}");
            assert!(u.ln().is_finite());
        }
    }

    #[test]
    fn one_seed_repeats_its_sequence() {
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        for _ in 0..100 {
            assert_eq!(a.range(0, 1 << 40), b.range(0, 1 << 40));
        }
    }
}

//! The script's random numbers, drawn exactly as pgbench 15 draws them: PostgreSQL's
//! `pg_prng` (xoroshiro128** seeded through splitmix64, src/common/pg_prng.c) and
//! pgbench's formulas on top of it (pgbench.c: `getrand`, `getExponentialRand`,
//! `getGaussianRand`, `getZipfianRand`, and `permute`, which seeds a generator of its
//! own from its argument).
//!
//! Seeding follows pgbench too: one base sequence from the run's seed
//! (`--random-seed`); client *i*'s generator is seeded with the base sequence's *i*-th
//! draw, and `:default_seed` (the seed of `hash()`) is the draw after the last client's.
//! So with the same seed and client count, `random()`, `hash()` and `permute()` give
//! pgbench's own values.

/// PostgreSQL's pg_prng: xoroshiro128** 1.0.
#[derive(Debug, Clone)]
pub struct Prng {
    s0: u64,
    s1: u64,
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut v = *state;
    v = (v ^ (v >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    v = (v ^ (v >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    v ^ (v >> 31)
}

impl Prng {
    /// `pg_prng_seed`: the state from a 64-bit seed, never all zeroes.
    pub fn new(seed: u64) -> Prng {
        let mut s = seed;
        let (s0, s1) = (splitmix64(&mut s), splitmix64(&mut s));
        if s0 == 0 && s1 == 0 {
            return Prng {
                s0: 0x5851_F42D_4C95_7F2D,
                s1: 0x1405_7B7E_F767_814F,
            };
        }
        Prng { s0, s1 }
    }

    /// The generator of client `client` in a run seeded with `run_seed`.
    pub fn for_client(run_seed: u64, client: usize) -> Prng {
        let mut base = Prng::new(run_seed);
        let mut seed = base.next_u64();
        for _ in 0..client {
            seed = base.next_u64();
        }
        Prng::new(seed)
    }

    /// pgbench's `:default_seed` for a run of `clients` clients seeded with `run_seed`.
    pub fn default_seed(run_seed: u64, clients: usize) -> i64 {
        let mut base = Prng::new(run_seed);
        for _ in 0..clients {
            base.next_u64();
        }
        base.next_u64() as i64
    }

    pub fn next_u64(&mut self) -> u64 {
        let s0 = self.s0;
        let sx = self.s1 ^ s0;
        let val = s0.wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        self.s0 = s0.rotate_left(24) ^ sx ^ (sx << 16);
        self.s1 = sx.rotate_left(37);
        val
    }

    /// Uniform in [lo, hi] by bitmask rejection (`pg_prng_uint64_range`).
    pub fn range_u64(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        let range = hi - lo;
        let shift = range.leading_zeros();
        loop {
            let v = self.next_u64() >> shift;
            if v <= range {
                return lo + v;
            }
        }
    }

    /// Uniform in [0, 1) from the top 52 bits (`pg_prng_double`).
    pub fn double(&mut self) -> f64 {
        (self.next_u64() >> 12) as f64 * (1.0 / (1u64 << 52) as f64)
    }

    /// sysbench 1.0's `sb_rand_gaussian`: the mean of `iter` uniform draws over the
    /// range (not pgbench's Box-Muller), truncated as sysbench's cast to uint32 does.
    pub fn sysbench_gaussian(&mut self, lo: i64, hi: i64, iter: u32) -> i64 {
        let t = (hi - lo + 1) as f64;
        let sum: f64 = (0..iter).map(|_| self.double() * t).sum();
        lo + (sum / f64::from(iter)) as i64
    }

    /// sysbench 1.0's `sb_rand_pareto`, shape `h` (its --rand-pareto-h, 0.2 by default).
    pub fn sysbench_pareto(&mut self, lo: i64, hi: i64, h: f64) -> i64 {
        let power = h.ln() / (1.0 - h).ln();
        lo + ((hi - lo + 1) as f64 * self.double().powf(power)) as i64
    }

    /// sysbench 1.0's `sb_rand_special` (its default distribution): `res` percent of the
    /// draws fall uniformly in the middle `pct` percent of the range, the rest follow
    /// the mean of `iter` uniform draws over the whole range. The arithmetic is
    /// sysbench's, step for step, so the two tools hit the same rows as often.
    pub fn sysbench_special(&mut self, lo: i64, hi: i64, iter: u32, pct: f64, res: f64) -> i64 {
        let t = (hi - lo) as f64;
        let rnd = self.double();
        if rnd * t * (100.0 / (100.0 - res)) < t {
            let sum: f64 = (0..iter).map(|_| self.double()).sum();
            return lo + (sum * t / f64::from(iter)) as i64;
        }
        let d = t * pct / 100.0;
        let r = rnd * (d + 1.0) + t / 2.0 - t * pct / 200.0;
        lo + r as i64
    }

    /// Fills `out` from sysbench's template (`sb_rand_str`): each `#` a random digit,
    /// each `@` a random lower-case letter, any other character as written.
    pub fn sysbench_string(&mut self, template: &str, out: &mut String) {
        out.clear();
        for c in template.chars() {
            match c {
                '#' => out.push(char::from(b'0' + self.range_u64(0, 9) as u8)),
                '@' => out.push(char::from(b'a' + self.range_u64(0, 25) as u8)),
                c => out.push(c),
            }
        }
    }

    /// `getrand`: uniform in [lo, hi]; the caller has checked the width fits.
    pub fn uniform(&mut self, lo: i64, hi: i64) -> i64 {
        lo.wrapping_add(self.range_u64(0, hi.wrapping_sub(lo) as u64) as i64)
    }

    /// `getExponentialRand`: falls off as e^(-p x) over the range; p > 0.
    pub fn exponential(&mut self, lo: i64, hi: i64, p: f64) -> i64 {
        let cut = (-p).exp();
        let uniform = 1.0 - self.double();
        let r = -(cut + (1.0 - cut) * uniform).ln() / p;
        lo.wrapping_add(((hi.wrapping_sub(lo).wrapping_add(1)) as f64 * r) as i64)
    }

    /// `getGaussianRand`: Box-Muller, redrawn until within ±p standard deviations; p >= 2.
    pub fn gaussian(&mut self, lo: i64, hi: i64, p: f64) -> i64 {
        let stdev = loop {
            let u1 = 1.0 - self.double();
            let u2 = 1.0 - self.double();
            let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).sin();
            if (-p..p).contains(&z) {
                break z;
            }
        };
        let r = (stdev + p) / (p * 2.0);
        lo.wrapping_add(((hi.wrapping_sub(lo).wrapping_add(1)) as f64 * r) as i64)
    }

    /// `getZipfianRand`: Devroye's rejection method ("Non-Uniform Random Variate
    /// Generation", p. 550), k with probability proportional to 1/k^s; s in [1.001, 1000].
    pub fn zipfian(&mut self, lo: i64, hi: i64, s: f64) -> i64 {
        let n = hi.wrapping_sub(lo).wrapping_add(1);
        let x = if n <= 1 {
            1
        } else {
            let b = 2f64.powf(s - 1.0);
            loop {
                let u = self.double();
                let v = self.double();
                let x = u.powf(-1.0 / (s - 1.0)).floor();
                let t = (1.0 + 1.0 / x).powf(s - 1.0);
                if v * x * (t - 1.0) / (b - 1.0) <= t / b && x <= n as f64 {
                    break x as i64;
                }
            }
        };
        lo.wrapping_sub(1).wrapping_add(x)
    }
}

/// pgbench's `permute(i, size, seed)`: a pseudorandom permutation of [0, size), the same
/// for the same seed. Six rounds of an odd multiply, an XOR and a rotation on the lower
/// and the upper (overlapping) halves, then a random offset; `size` is at least 1.
pub fn permute(val: i64, size: i64, seed: i64) -> i64 {
    if size < 2 {
        return 0;
    }
    let mut rng = Prng::new(seed as u64);
    let size = size as u64;
    let mut v = (val as u64) % size;
    // The largest power of 2 at most size, as a mask.
    let masklen = 63 - size.leading_zeros();
    let mask = (1u64 << masklen) - 1;
    for _ in 0..6 {
        let m = (rng.next_u64() & mask) | 1;
        let r = rng.next_u64() & mask;
        if v <= mask {
            v = (v.wrapping_mul(m) ^ r) & mask;
            v = ((v << 1) & mask) | (v >> (masklen - 1));
        }
        let m = (rng.next_u64() & mask) | 1;
        let r = rng.next_u64() & mask;
        let mut t = size - 1 - v;
        if t <= mask {
            t = (t.wrapping_mul(m) ^ r) & mask;
            t = ((t << 1) & mask) | (t >> (masklen - 1));
            v = size - 1 - t;
        }
        let r = rng.range_u64(0, size - 1);
        // v and r are below size <= 2^63, so the sum cannot wrap.
        v = (v + r) % size;
    }
    v as i64
}

/// pgbench's `hash_fnv1a(val, seed)`: FNV-1a over the value's 8 bytes, low byte first.
pub fn hash_fnv1a(val: i64, seed: i64) -> i64 {
    const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
    const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    let mut result = FNV_OFFSET_BASIS ^ seed as u64;
    let mut v = val;
    for _ in 0..8 {
        let octet = (v & 0xff) as u64;
        v >>= 8;
        result = (result ^ octet).wrapping_mul(FNV_PRIME);
    }
    result as i64
}

/// pgbench's `hash_murmur2(val, seed)` (and `hash`): MurmurHash64A of one 8-byte word
/// (after Austin Appleby's MurmurHash2).
pub fn hash_murmur2(val: i64, seed: i64) -> i64 {
    const MUL: u64 = 0xc6a4_a793_5bd1_e995;
    const MUL_TIMES_8: u64 = 0x3525_3c9a_de8f_4ca8;
    const ROT: u32 = 47;
    let mut result = seed as u64 ^ MUL_TIMES_8;
    let mut k = val as u64;
    k = k.wrapping_mul(MUL);
    k ^= k >> ROT;
    k = k.wrapping_mul(MUL);
    result ^= k;
    result = result.wrapping_mul(MUL);
    result ^= result >> ROT;
    result = result.wrapping_mul(MUL);
    result ^= result >> ROT;
    result as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    // Every expected number below came from pgbench 15.18, printed by debug() in a
    // script run with `pgbench -n -t 1 --random-seed=5` (and -c 1, 2 or 3).

    #[test]
    fn seeding_matches_pgbench() {
        assert_eq!(Prng::default_seed(5, 1), -1240385398947155067);
        assert_eq!(Prng::default_seed(5, 2), -1283242464419442966);
        assert_eq!(Prng::default_seed(5, 3), 8017708085652892619);
        // random(1, 1000000) as the first call of clients 0, 1 and 2.
        let first = |c| Prng::for_client(5, c).uniform(1, 1_000_000);
        assert_eq!([first(0), first(1), first(2)], [475806, 871628, 238043]);
    }

    #[test]
    fn hashes_match_pgbench() {
        assert_eq!(hash_murmur2(5, 42), 3392551525449559074);
        assert_eq!(hash_fnv1a(5, 42), 7229678446045915210);
        assert_eq!(hash_murmur2(-7, 0), -2376560325806870531);
    }

    #[test]
    fn permute_matches_pgbench_and_is_a_permutation() {
        assert_eq!(permute(3, 10, 42), 4);
        for size in [1i64, 2, 3, 7, 10, 64, 100] {
            let mut seen: Vec<i64> = (0..size).map(|i| permute(i, size, 12345)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..size).collect::<Vec<_>>(), "size {size}");
        }
        // Values outside [0, size) wrap as unsigned numbers do in pgbench.
        assert!((0..10).contains(&permute(-1, 10, 1)));
        assert!((0..i64::MAX).contains(&permute(i64::MIN, i64::MAX, -1)));
    }

    #[test]
    fn ranges_stay_in_bounds() {
        let mut r = Prng::new(1);
        for _ in 0..10_000 {
            assert!((1..=6).contains(&r.uniform(1, 6)));
            assert!((0..=99).contains(&r.exponential(0, 99, 2.0)));
            assert!((0..=99).contains(&r.gaussian(0, 99, 2.5)));
            assert!((1..=1000).contains(&r.zipfian(1, 1000, 1.5)));
        }
        assert_eq!(r.uniform(5, 5), 5);
        assert_eq!(r.zipfian(5, 5, 2.0), 5);
    }
}

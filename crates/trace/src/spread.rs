//! A distribution's few figures (count, mean, p50, p99, max), as the profile and its
//! transaction shapes both report them: one computation of the ranks for both; and a
//! distribution's percentile curve, for a picture of it.

/// A distribution's few figures, in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Spread {
    pub n: u64,
    pub mean: Option<f64>,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

impl Spread {
    pub(crate) fn of(mut v: Vec<f64>) -> Spread {
        if v.is_empty() {
            return Spread::default();
        }
        v.sort_by(f64::total_cmp);
        let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Spread {
            n: v.len() as u64,
            mean: Some(v.iter().sum::<f64>() / v.len() as f64),
            p50: Some(rank(0.5)),
            p99: Some(rank(0.99)),
            max: v.last().copied(),
        }
    }
}

/// Percentiles drawn per nine (50%, 90%, 99%, ...): ten, as the lab's report draws a
/// latency curve, so a shape's curve and a cell's read alike.
const POINTS_PER_NINE: u32 = 10;

/// The percentile curve of `v` (ms): `(quantile, ms)` pairs by nearest rank, the
/// minimum at 0, then ten points per nine (0.206, 0.369, ... 0.9, ... 0.99, ...) as far
/// into the tail as the count supports (90% from 1 to 99 values, 99% from 100, up to
/// 99.99%): at most 41 pairs, however many values. Empty for no values.
pub(crate) fn percentile_curve(v: &mut [f64]) -> Vec<(f64, f64)> {
    if v.is_empty() {
        return Vec::new();
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let rank = |q: f64| v[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
    let nines = (n as f64).log10().floor().clamp(1.0, 4.0) as u32;
    let mut points = vec![(0.0, v[0])];
    for k in 1..=nines * POINTS_PER_NINE {
        let q = 1.0 - 10f64.powf(-(k as f64) / POINTS_PER_NINE as f64);
        points.push((q, rank(q)));
    }
    points
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The curve's length follows the count, not the values: 11 points for a few, 41
    /// for a million; its values are the nearest ranks.
    #[test]
    fn a_percentile_curve_is_bounded_and_exact() {
        assert!(percentile_curve(&mut []).is_empty());
        let mut few = vec![3.0, 1.0, 2.0];
        let c = percentile_curve(&mut few);
        assert_eq!(c.len(), 11);
        assert_eq!(c[0], (0.0, 1.0));
        assert_eq!(c[10].1, 3.0);
        assert!((c[10].0 - 0.9).abs() < 1e-12);
        let mut many: Vec<f64> = (1..=1_000_000).map(f64::from).collect();
        let c = percentile_curve(&mut many);
        assert_eq!(c.len(), 41);
        assert_eq!(c[10].1, 900_000.0);
        assert_eq!(c[20].1, 990_000.0);
        assert_eq!(c[40].1, 999_900.0);
        assert!(c.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
    }
}

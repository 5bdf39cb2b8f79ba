//! A distribution's few figures (count, mean, p50, p99, max), as the profile and its
//! transaction shapes both report them: one computation of the ranks for both.

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

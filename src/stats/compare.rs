//! Statistics across repetitions: how sure we are of a cell's figure, and whether one
//! configuration really beats another.
//!
//! Methods (all on per-repetition values, e.g. one tps figure per repetition):
//! - **Confidence interval of a mean**: Student's t, `mean ± t(1-α/2, n-1) · s/√n`, with
//!   the sample standard deviation `s` (n - 1). Exact for normal data; repetitions of a
//!   benchmark are close enough to that for a handful of runs, and the interval widens
//!   honestly when n is small.
//! - **Outliers**: the modified z-score of Iglewicz and Hoaglin,
//!   `0.6745 · (x - median) / MAD`, flagged beyond 3.5. Flagged values are reported, not
//!   dropped: a slow repetition is a finding.
//! - **A vs B**: Welch's t-test (unequal variances, Welch–Satterthwaite degrees of
//!   freedom), two-sided p-value. The ratio of means gets a confidence interval by the
//!   delta method: the ratio's relative standard error is the root-sum-square of the two
//!   means' relative standard errors, with Welch–Satterthwaite degrees of freedom for the
//!   t quantile.
//! - **Verdict**: "faster"/"slower" needs both p < α and a ratio beyond the noise
//!   threshold; otherwise "no significant difference". When the ratio's interval is too
//!   wide to tell a change of the threshold's size from none, the verdict says so and
//!   names the fix (more repetitions, longer runs).

use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// A mean with its uncertainty.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Estimate {
    pub point: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub stderr: f64,
    pub n: usize,
    pub confidence: f64,
}

/// What repetitions of one cell say about one figure.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Described {
    pub mean: Estimate,
    pub stddev: f64,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Coefficient of variation: stddev / mean.
    pub cv: f64,
    /// Indices of values flagged as outliers.
    pub outliers: Vec<usize>,
}

/// The two-sided quantile of Student's t for `confidence` with `df` degrees of freedom.
/// Above 10,000 degrees of freedom the normal quantile is used: the two differ by less
/// than 1e-4 there, and statrs' inverse of Student's t loses precision far out.
pub fn t_quantile(confidence: f64, df: f64) -> f64 {
    let q = 1.0 - (1.0 - confidence) / 2.0;
    if df > 1e4 {
        return Normal::new(0.0, 1.0).expect("standard normal").inverse_cdf(q);
    }
    StudentsT::new(0.0, 1.0, df.max(1e-9))
        .expect("valid Student's t")
        .inverse_cdf(q)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn variance(v: &[f64], m: f64) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Describes repetitions `values` at `confidence` (e.g. 0.95). `None` when empty.
pub fn describe(values: &[f64], confidence: f64) -> Option<Described> {
    if values.is_empty() {
        return None;
    }
    let n = values.len();
    let m = mean(values);
    let s = variance(values, m).sqrt();
    let stderr = s / (n as f64).sqrt();
    let half = if n > 1 {
        t_quantile(confidence, (n - 1) as f64) * stderr
    } else {
        f64::INFINITY
    };
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let med = median(&sorted);
    let mut deviations: Vec<f64> = values.iter().map(|x| (x - med).abs()).collect();
    deviations.sort_by(f64::total_cmp);
    let mad = median(&deviations);
    let outliers = if mad > 0.0 {
        values
            .iter()
            .enumerate()
            .filter(|(_, &x)| (0.6745 * (x - med) / mad).abs() > 3.5)
            .map(|(i, _)| i)
            .collect()
    } else {
        Vec::new()
    };
    Some(Described {
        mean: Estimate {
            point: m,
            ci_low: m - half,
            ci_high: m + half,
            stderr,
            n,
            confidence,
        },
        stddev: s,
        median: med,
        min: sorted[0],
        max: sorted[n - 1],
        cv: if m != 0.0 { s / m.abs() } else { 0.0 },
        outliers,
    })
}

/// Welch's t-test of two samples.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Welch {
    pub t: f64,
    pub df: f64,
    /// Two-sided.
    pub p_value: f64,
}

/// Welch's t-test; `None` when either sample has fewer than 2 values.
///
/// When neither sample has any spread (counts bound by think time repeat exactly), the
/// difference is certain: p = 0 if the means differ (t infinite), p = 1 if they do not.
pub fn welch(a: &[f64], b: &[f64]) -> Option<Welch> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (ma, mb) = (mean(a), mean(b));
    let (va, vb) = (variance(a, ma) / a.len() as f64, variance(b, mb) / b.len() as f64);
    let se2 = va + vb;
    if se2 <= 0.0 {
        let df = (a.len() + b.len() - 2) as f64;
        return Some(if ma == mb {
            Welch {
                t: 0.0,
                df,
                p_value: 1.0,
            }
        } else {
            Welch {
                t: f64::INFINITY.copysign(ma - mb),
                df,
                p_value: 0.0,
            }
        });
    }
    let t = (ma - mb) / se2.sqrt();
    let df = se2.powi(2) / (va.powi(2) / (a.len() - 1) as f64 + vb.powi(2) / (b.len() - 1) as f64);
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    let p_value = 2.0 * (1.0 - dist.cdf(t.abs()));
    Some(Welch { t, df, p_value })
}

/// Which way is better for a figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Higher,
    Lower,
}

/// The answer to "is A different from B?".
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Faster,
    Slower,
    NoSignificantDifference,
    /// The spread is too wide to tell a change of the threshold's size from none.
    Inconclusive,
}

/// A compared to B (the baseline).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Comparison {
    /// mean(A) / mean(B), with its confidence interval.
    pub ratio: Estimate,
    pub welch: Option<Welch>,
    pub verdict: Verdict,
    /// "1.07 ± 0.02 times faster than B (p = 0.003)", and the like.
    pub sentence: String,
    /// The verdict without names, for tables: "1.07 ± 0.02 times faster",
    /// "inconclusive (ratio 0.97 ± 1.09)".
    pub phrase: String,
}

/// A p-value as reports print it: `p < 0.001`, `p = 0.034`, or why there is none.
pub fn format_p(w: Option<Welch>) -> String {
    match w {
        Some(w) if w.p_value < 0.001 => "p < 0.001".to_string(),
        Some(w) => format!("p = {:.3}", w.p_value),
        None => "too few repetitions for a test".to_string(),
    }
}

/// How a comparison decides.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Rule {
    /// The good direction of the figure (tps: higher; latency: lower).
    pub better: Better,
    /// Confidence level of intervals, e.g. 0.95.
    pub confidence: f64,
    /// Significance level of the test, e.g. 0.05.
    pub alpha: f64,
    /// Noise threshold as a fraction: smaller differences are no difference (0.02 = 2%).
    pub threshold: f64,
}

/// Compares repetitions `a` with the baseline's `b` under `rule`.
pub fn compare(a: &[f64], b: &[f64], rule: Rule, a_name: &str, b_name: &str) -> Option<Comparison> {
    let Rule {
        better,
        confidence,
        alpha,
        threshold,
    } = rule;
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let (ma, mb) = (mean(a), mean(b));
    if mb == 0.0 {
        return None;
    }
    let ratio = ma / mb;
    let rel_a = if a.len() > 1 {
        variance(a, ma) / a.len() as f64 / ma.powi(2)
    } else {
        0.0
    };
    let rel_b = if b.len() > 1 {
        variance(b, mb) / b.len() as f64 / mb.powi(2)
    } else {
        0.0
    };
    let rel_se = (rel_a + rel_b).sqrt();
    let stderr = ratio * rel_se;
    let df = if rel_a + rel_b > 0.0 {
        let da = if a.len() > 1 {
            rel_a.powi(2) / (a.len() - 1) as f64
        } else {
            0.0
        };
        let db = if b.len() > 1 {
            rel_b.powi(2) / (b.len() - 1) as f64
        } else {
            0.0
        };
        (rel_a + rel_b).powi(2) / (da + db).max(f64::MIN_POSITIVE)
    } else {
        f64::INFINITY
    };
    let half = if a.len() > 1 && b.len() > 1 {
        t_quantile(confidence, df) * stderr
    } else {
        f64::INFINITY
    };
    let w = welch(a, b);
    // How many times better A is: the ratio itself when higher is better, its inverse
    // when lower is better.
    let (times, times_half) = match better {
        Better::Higher => (ratio, half),
        Better::Lower => (1.0 / ratio, half / ratio.powi(2)),
    };
    let significant = w.is_some_and(|w| w.p_value < alpha);
    let beyond_noise = (times - 1.0).abs() > threshold;
    let verdict = if significant && beyond_noise {
        if times > 1.0 {
            Verdict::Faster
        } else {
            Verdict::Slower
        }
    } else if !half.is_finite() || times_half > threshold {
        Verdict::Inconclusive
    } else {
        Verdict::NoSignificantDifference
    };
    let p = format_p(w);
    let phrase = match verdict {
        Verdict::Faster => format!("{times:.2} ± {times_half:.2} times faster"),
        Verdict::Slower => format!(
            "{:.2} ± {:.2} times slower",
            1.0 / times,
            times_half / times.powi(2)
        ),
        Verdict::NoSignificantDifference => {
            format!("no significant difference (ratio {times:.2} ± {times_half:.2})")
        }
        Verdict::Inconclusive => format!("inconclusive (ratio {times:.2} ± {times_half:.2})"),
    };
    let sentence = match verdict {
        Verdict::Faster | Verdict::Slower => format!("{a_name} is {phrase} than {b_name} ({p})"),
        Verdict::NoSignificantDifference => format!(
            "no significant difference between {a_name} and {b_name} (ratio {times:.2} ± {times_half:.2}, {p})"
        ),
        Verdict::Inconclusive => format!(
            "{a_name} vs {b_name}: inconclusive (ratio {times:.2} ± {times_half:.2}, {p}); \
             the spread is too wide to see a {:.0}% change: add repetitions or lengthen the runs",
            threshold * 100.0
        ),
    };
    Some(Comparison {
        ratio: Estimate {
            point: ratio,
            ci_low: ratio - half,
            ci_high: ratio + half,
            stderr,
            n: a.len().min(b.len()),
            confidence,
        },
        welch: w,
        verdict,
        sentence,
        phrase,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::workload::Rng;

    #[test]
    fn samples_without_spread_are_decided_by_their_means() {
        let rule = Rule {
            better: Better::Higher,
            confidence: 0.95,
            alpha: 0.05,
            threshold: 0.02,
        };
        let c = compare(&[93.0, 93.0], &[46.5, 46.5], rule, "two", "one").unwrap();
        assert_eq!(c.verdict, Verdict::Faster, "{}", c.sentence);
        assert_eq!(c.welch.unwrap().p_value, 0.0);
        let same = compare(&[93.0, 93.0], &[93.0, 93.0], rule, "a", "b").unwrap();
        assert_eq!(same.verdict, Verdict::NoSignificantDifference);
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn student_t_quantiles_match_tables() {
        assert!(close(t_quantile(0.95, 9.0), 2.262157, 1e-5));
        assert!(close(t_quantile(0.95, 1.0), 12.706205, 1e-4));
        assert!(close(t_quantile(0.99, 20.0), 2.845340, 1e-5));
        assert!(close(t_quantile(0.95, 1e6), 1.959964, 1e-5));
        assert!(close(t_quantile(0.95, f64::INFINITY), 1.959964, 1e-5));
    }

    #[test]
    fn describe_gives_the_textbook_interval() {
        // 10 values, mean 10.0, s = 1.0 exactly: CI half-width t(0.975, 9) · 1/√10.
        let v = [9.0, 11.0, 9.0, 11.0, 9.0, 11.0, 9.0, 11.0, 10.0, 10.0];
        let d = describe(&v, 0.95).unwrap();
        let s = (8.0f64 / 9.0).sqrt();
        assert!(close(d.mean.point, 10.0, 1e-12));
        assert!(close(d.stddev, s, 1e-12));
        let half = 2.262157 * s / 10f64.sqrt();
        assert!(close(d.mean.ci_high - 10.0, half, 1e-5));
        assert_eq!((d.min, d.max, d.median), (9.0, 11.0, 10.0));
        assert!(d.outliers.is_empty());
        let d = describe(&[100.0, 101.0, 99.0, 100.5, 99.5, 140.0], 0.95).unwrap();
        assert_eq!(d.outliers, [5], "the 140 stands out by MAD");
        assert!(
            describe(&[5.0], 0.95).unwrap().mean.ci_high.is_infinite(),
            "one value tells no spread"
        );
    }

    #[test]
    fn welch_matches_the_textbook_example() {
        // Welch's t-test, worked example 1 on Wikipedia: t = -2.46, df = 24.99, p = 0.021.
        let a1 = [
            27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4,
        ];
        let a2 = [
            27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4,
        ];
        let w = welch(&a1, &a2).unwrap();
        assert!(close(w.t, -2.46, 0.005), "t = {}", w.t);
        assert!(close(w.df, 24.99, 0.01), "df = {}", w.df);
        assert!(close(w.p_value, 0.021, 0.0005), "p = {}", w.p_value);
    }

    fn normal(rng: &mut Rng, mean: f64, sd: f64) -> f64 {
        // Box–Muller.
        let (u1, u2) = (rng.unit(), rng.unit());
        mean + sd * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    #[test]
    fn confidence_intervals_cover_the_true_mean_95_percent_of_the_time() {
        let mut rng = Rng::new(7);
        let trials = 4000;
        let mut covered = 0;
        for _ in 0..trials {
            let v: Vec<f64> = (0..8).map(|_| normal(&mut rng, 100.0, 10.0)).collect();
            let d = describe(&v, 0.95).unwrap();
            if d.mean.ci_low <= 100.0 && 100.0 <= d.mean.ci_high {
                covered += 1;
            }
        }
        let rate = covered as f64 / trials as f64;
        // Binomial standard error at 4,000 trials is 0.34%: allow about 3 of them.
        assert!((0.94..=0.96).contains(&rate), "coverage {rate}");
    }

    #[test]
    fn verdicts_need_significance_and_size() {
        let mut rng = Rng::new(11);
        let b: Vec<f64> = (0..10).map(|_| normal(&mut rng, 1000.0, 5.0)).collect();
        let a: Vec<f64> = (0..10).map(|_| normal(&mut rng, 1070.0, 5.0)).collect();
        let rule = |better| Rule {
            better,
            confidence: 0.95,
            alpha: 0.05,
            threshold: 0.02,
        };
        let c = compare(&a, &b, rule(Better::Higher), "unix", "tcp").unwrap();
        assert_eq!(c.verdict, Verdict::Faster, "{}", c.sentence);
        assert!(c.sentence.starts_with("unix is 1.07 ± 0.0"), "{}", c.sentence);
        assert!(c.sentence.ends_with("(p < 0.001)"), "{}", c.sentence);
        // Lower-is-better: a higher latency is slower.
        let c = compare(&a, &b, rule(Better::Lower), "unix", "tcp").unwrap();
        assert_eq!(c.verdict, Verdict::Slower, "{}", c.sentence);
        // The same distribution: no significant difference.
        let same: Vec<f64> = (0..10).map(|_| normal(&mut rng, 1000.0, 5.0)).collect();
        let c = compare(&same, &b, rule(Better::Higher), "a", "b").unwrap();
        assert_eq!(c.verdict, Verdict::NoSignificantDifference, "{}", c.sentence);
        // Two noisy runs each: too wide to conclude, and the fix is named.
        let c = compare(&[900.0, 1100.0], &[950.0, 1060.0], rule(Better::Higher), "a", "b").unwrap();
        assert_eq!(c.verdict, Verdict::Inconclusive);
        assert!(
            c.sentence.contains("add repetitions or lengthen the runs"),
            "{}",
            c.sentence
        );
    }
}

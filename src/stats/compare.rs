//! Statistics across repetitions: how sure we are of a cell's figure, and whether one
//! configuration really beats another. `docs/statistics.md` says the same in plain words.
//!
//! - **A cell's figure**: the mean of its repetitions with Student's t interval,
//!   `mean ± t(1-α/2, n-1) · s/√n`, the median beside it, and outliers flagged by the
//!   modified z-score of Iglewicz and Hoaglin (`0.6745 · (x - median) / MAD` beyond 3.5;
//!   reported, not dropped: a slow repetition is a finding).
//! - **A against the baseline B, one computation**: figures are positive (tps, latency),
//!   so they are compared as the ratio A/B on the log scale. Rounds are interleaved, so
//!   the test is paired: per round, `d = ln A - ln B`, which cancels what the round's
//!   cells share (machine load, drift, a checkpoint); then Student's t on the d's, `n - 1`
//!   degrees of freedom. Where a round is incomplete (one of the two failed), it falls
//!   back to Welch's t on the logs, and says so. The interval is
//!   `exp(mean d ± t · se)` from the same t, se and degrees of freedom as the p-value, so
//!   "the interval excludes 1" holds exactly when p < α; it can never go negative, and
//!   inverting the ratio (lower-is-better figures) inverts the interval.
//! - **Many comparisons**: a suite compares k cells with one baseline. Holm's step-down
//!   adjustment controls the family-wise error; each interval is printed at the level
//!   its adjusted p-value implies (`1 - α · p_raw / p_adjusted`), so the interval shown
//!   is the one the verdict used.
//! - **Looking more than once**: an adaptive run looks after its minimum rounds and
//!   after each batch of added rounds. Look `j` may spend a share of α in proportion to
//!   1/j² over the looks its budget has room for (fixed after its first round), or
//!   `6/(π² j²)` with no cap; the shares sum to 1, so stopping when an answer looks
//!   decided does not inflate false verdicts.
//! - **Verdict** (criterion's rule): faster or slower only when the whole interval lies
//!   beyond the noise threshold; "the same within N%" (equivalence, said as such) only
//!   when it lies wholly inside; otherwise inconclusive, with an estimate of the rounds
//!   that would decide it.

use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// A mean with its uncertainty.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct Estimate {
    pub point: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub stderr: f64,
    pub n: usize,
    pub confidence: f64,
}

/// What repetitions of one cell say about one figure.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
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

/// Which way is better for a figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Higher,
    Lower,
}

/// The answer to "is A different from B?".
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Faster,
    Slower,
    /// The whole interval lies inside the noise threshold: the two are the same within
    /// it (equivalence, said as such).
    NoDifference,
    /// The interval reaches both inside and beyond the noise threshold.
    Inconclusive,
}

/// How the rounds of two cells were analysed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Pairing {
    /// Round by round: Student's t on the per-round log ratios.
    Paired,
    /// Welch's t on the two cells' logs (a round was incomplete, or the runs differ).
    Unpaired,
}

/// How a comparison decides.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Rule {
    /// The good direction of the figure (tps: higher; latency: lower).
    pub better: Better,
    /// Confidence level of a cell's own interval, e.g. 0.95.
    pub confidence: f64,
    /// Family-wise error rate of the comparisons, e.g. 0.05.
    pub alpha: f64,
    /// Noise threshold as a fraction: a ratio within 1 ± this is the same (0.02 = 2%).
    pub threshold: f64,
    /// Whether the run looked repeatedly (adaptive rounds), so each look spends a share
    /// of α.
    pub sequential: bool,
    /// The most looks the run could take, when fixed before its first
    /// ([`look_share`]); `None`: no cap.
    pub looks: Option<u32>,
}

/// One cell's test against the baseline on the log scale, before any adjustment.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LogTest {
    pub pairing: Pairing,
    /// Why the unpaired test was used, when it was.
    pub fallback: Option<String>,
    /// Pairs (paired), or the smaller of the two cells' repetitions (unpaired).
    pub rounds: usize,
    /// The estimate of ln(A/B).
    pub mean_log: f64,
    /// Its standard error.
    pub se_log: f64,
    pub df: f64,
    /// Two-sided, before any adjustment.
    pub p_raw: f64,
    /// The median of the per-round ratios (paired), or median(A) / median(B).
    pub median_ratio: f64,
}

fn two_sided_p(t: f64, df: f64) -> f64 {
    if t.is_infinite() {
        return 0.0;
    }
    // The survival function, not 1 - cdf: far out in the tail 1 - cdf rounds to 0,
    // and an exact 0 would lose the level its interval is printed at.
    match StudentsT::new(0.0, 1.0, df.max(1e-9)) {
        Ok(d) => (2.0 * d.sf(t.abs())).clamp(0.0, 1.0),
        Err(_) => 1.0,
    }
}

/// A t statistic's p-value from an estimate and its standard error; no spread at all
/// decides by the estimate alone (p = 0 when it is not zero, 1 when it is).
fn p_of(mean: f64, se: f64, df: f64) -> f64 {
    if se > 0.0 {
        two_sided_p(mean / se, df)
    } else if mean != 0.0 {
        0.0
    } else {
        1.0
    }
}

fn sorted_median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    median(&v)
}

/// Tests repetitions `a` against the baseline's `b`, each as (round, value or failure).
/// Paired over rounds when every round both ran is complete; else Welch's t on the logs.
pub fn log_test(a: &[(u32, Option<f64>)], b: &[(u32, Option<f64>)]) -> Result<LogTest, String> {
    let ok = |v: &[(u32, Option<f64>)]| {
        v.iter()
            .filter_map(|(r, x)| x.map(|x| (*r, x)))
            .collect::<Vec<_>>()
    };
    let (oa, ob) = (ok(a), ok(b));
    if oa.is_empty() || ob.is_empty() {
        return Err("no results to compare".into());
    }
    if oa.iter().chain(&ob).any(|(_, x)| !(*x > 0.0 && x.is_finite())) {
        return Err("a value is not a positive number, so no ratio is defined".into());
    }
    let b_round = |r: u32| b.iter().find(|(rb, _)| *rb == r).map(|(_, x)| *x);
    let mut pairs = Vec::new();
    let mut incomplete = 0;
    for (r, x) in a {
        match (x, b_round(*r)) {
            (Some(x), Some(Some(y))) => pairs.push(x.ln() - y.ln()),
            (None, Some(Some(_))) | (Some(_), Some(None)) => incomplete += 1,
            // The baseline did not run in this round (it always does in connbench's plans),
            // or both failed: no pair, and nothing is lost by it.
            _ => {}
        }
    }
    if incomplete == 0 && pairs.len() >= 2 {
        let n = pairs.len();
        let m = mean(&pairs);
        let se = (variance(&pairs, m) / n as f64).sqrt();
        let df = (n - 1) as f64;
        return Ok(LogTest {
            pairing: Pairing::Paired,
            fallback: None,
            rounds: n,
            mean_log: m,
            se_log: se,
            df,
            p_raw: p_of(m, se, df),
            median_ratio: sorted_median(pairs.iter().map(|d| d.exp()).collect()),
        });
    }
    let fallback = if incomplete > 0 {
        format!(
            "{incomplete} round{} had only one of the two cells, so the cells were compared unpaired",
            if incomplete == 1 { "" } else { "s" }
        )
    } else {
        "too few complete rounds to pair, so the cells were compared unpaired".to_string()
    };
    let la: Vec<f64> = oa.iter().map(|(_, x)| x.ln()).collect();
    let lb: Vec<f64> = ob.iter().map(|(_, x)| x.ln()).collect();
    let mut t = welch_logs(&la, &lb).ok_or("fewer than 2 repetitions in a cell: no spread to judge by")?;
    t.fallback = Some(fallback);
    t.median_ratio = sorted_median(oa.iter().map(|(_, x)| *x).collect())
        / sorted_median(ob.iter().map(|(_, x)| *x).collect());
    Ok(t)
}

/// Welch's t-test on two samples of logs (unequal variances, Welch–Satterthwaite
/// degrees of freedom). Used between two stored runs, and where rounds cannot be paired.
pub fn welch_logs(la: &[f64], lb: &[f64]) -> Option<LogTest> {
    if la.len() < 2 || lb.len() < 2 {
        return None;
    }
    let (ma, mb) = (mean(la), mean(lb));
    let (va, vb) = (
        variance(la, ma) / la.len() as f64,
        variance(lb, mb) / lb.len() as f64,
    );
    let se2 = va + vb;
    let df = if se2 > 0.0 {
        se2.powi(2) / (va.powi(2) / (la.len() - 1) as f64 + vb.powi(2) / (lb.len() - 1) as f64)
    } else {
        (la.len() + lb.len() - 2) as f64
    };
    let m = ma - mb;
    Some(LogTest {
        pairing: Pairing::Unpaired,
        fallback: None,
        rounds: la.len().min(lb.len()),
        mean_log: m,
        se_log: se2.sqrt(),
        df,
        p_raw: p_of(m, se2.sqrt(), df),
        median_ratio: (sorted_median(la.to_vec()) - sorted_median(lb.to_vec())).exp(),
    })
}

/// Holm's step-down adjustment (Holm 1979): sort the p-values, multiply the i-th
/// smallest by (m - i + 1), keep the running maximum, cap at 1. Rejecting where the
/// adjusted p < α controls the family-wise error at α. Returned in the input's order.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p[i].total_cmp(&p[j]));
    let mut adjusted = vec![0.0; m];
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((m - rank) as f64 * p[i]).min(1.0));
        adjusted[i] = running;
    }
    adjusted
}

/// The share of α that look `j` (1 for the first) may spend, in proportion to 1/j² over
/// the looks the run can take. With no cap, 6/(π² j²): the shares sum to 1 over any
/// number of looks (Σ 1/j² = π²/6). With a cap of `L` looks, fixed before the first
/// (from the run's budget), (1/j²) / Σ_{i≤L} 1/i²: a run with room for one look spends
/// all of α there, one with room for two 0.8 and 0.2, and no share is set aside for
/// looks the budget cannot reach. Either way the shares of the looks a run can take sum
/// to 1, so by the union bound the chance of a false verdict at any look stays within α.
/// The runner takes no look beyond its cap; a `j` beyond it is counted as the last.
pub fn look_share(j: u32, looks: Option<u32>) -> f64 {
    let weight = |i: u32| 1.0 / f64::from(i).powi(2);
    match looks {
        None => 6.0 / std::f64::consts::PI.powi(2) * weight(j.max(1)),
        Some(cap) => {
            let cap = cap.max(1);
            weight(j.clamp(1, cap)) / (1..=cap).map(weight).sum::<f64>()
        }
    }
}

/// A ratio A/B with its interval.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct RatioEstimate {
    /// exp(mean log ratio): the geometric mean of the per-round ratios when paired.
    pub point: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// The interval's confidence level, after the multiple-comparison and look adjustments.
    pub confidence: f64,
}

/// A compared to B (the baseline).
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct Comparison {
    /// A / B, with the interval the verdict used.
    pub ratio: RatioEstimate,
    /// The median of the per-round ratios (paired), or of A over the median of B.
    pub median_ratio: f64,
    /// The p-value the verdict used: after Holm's adjustment and the look's share.
    pub p_value: f64,
    /// Before any adjustment.
    pub p_raw: f64,
    /// In words, e.g. "paired log-ratio t, Holm over 3 comparisons".
    pub method: String,
    pub pairing: Pairing,
    /// Why the comparison was not paired, when it was not.
    pub fallback: Option<String>,
    /// Rounds (pairs) the comparison used.
    pub rounds: usize,
    /// Which look of an adaptive run decided it (1 for a fixed run).
    pub look: u32,
    pub verdict: Verdict,
    /// For an inconclusive verdict: about how many more rounds would decide it, when an
    /// estimate exists (none when the ratio sits on the noise threshold).
    pub more_rounds: Option<usize>,
    /// "1.07 times faster (1.05 to 1.09)", and the like: the verdict without names.
    pub phrase: String,
    /// The phrase with names and the p-value, for the answer.
    pub sentence: String,
    /// The cell it was compared with when not the suite's baseline (a cell's `versus`);
    /// null for the baseline.
    pub versus: Option<String>,
}

impl Comparison {
    /// The phrase, naming the cell compared with when it is not the baseline.
    pub fn phrase_versus(&self) -> String {
        match &self.versus {
            Some(v) => format!("{} than {v}", self.phrase),
            None => self.phrase.clone(),
        }
    }
}

/// A p-value as reports print it: `p < 0.001` or `p = 0.034`.
pub fn format_p(p: f64) -> String {
    if p < 0.001 {
        "p < 0.001".to_string()
    } else {
        format!("p = {p:.3}")
    }
}

/// One member of a family of comparisons, each against its own reference cell.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub name: String,
    /// The cell it is compared with, when not the family's baseline (a suite cell's
    /// `versus`).
    pub versus: Option<String>,
    pub test: LogTest,
    /// The look that decided it: 1 + the rounds it got beyond the minimum.
    pub look: u32,
}

/// Decides a family of comparisons with the baseline `base_name` (or each candidate's own
/// `versus`) under `rule`: Holm over
/// the family, each look's share of α, the interval at the level the adjusted p-value
/// implies, and the verdict by the noise rule. One computation: the interval excludes 1
/// exactly when `p_value < alpha`.
pub fn decide(family: &[Candidate], base_name: &str, rule: Rule) -> Vec<Comparison> {
    let m = family.len();
    let spent: Vec<f64> = family
        .iter()
        .map(|c| {
            if rule.sequential {
                (c.test.p_raw / look_share(c.look, rule.looks)).min(1.0)
            } else {
                c.test.p_raw
            }
        })
        .collect();
    let adjusted = holm(&spent);
    // Holm's multiplier of each member (m for the smallest p, m - 1 for the next, ...),
    // for a p-value so small it is 0 in floating point.
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| spent[i].total_cmp(&spent[j]));
    let mut multiplier = vec![1.0; m];
    for (rank, &i) in order.iter().enumerate() {
        multiplier[i] = (m - rank) as f64;
    }
    let band = (1.0 + rule.threshold).ln();
    family
        .iter()
        .zip(adjusted)
        .zip(multiplier)
        .map(|((c, p_value), multiplier)| {
            let t = &c.test;
            // The level at which this interval excludes 1 exactly when p_value < α: the
            // raw test at α · p_raw / p_value. When p_raw is 0 in floating point (the
            // interval excludes 1 at any level), the level Holm and the look give it.
            let share = if rule.sequential {
                look_share(c.look, rule.looks)
            } else {
                1.0
            };
            let gamma = if t.p_raw > 0.0 && p_value > 0.0 {
                rule.alpha * t.p_raw / p_value
            } else {
                rule.alpha * share / multiplier
            };
            let half = if t.se_log > 0.0 {
                t_quantile(1.0 - gamma, t.df) * t.se_log
            } else {
                0.0
            };
            let (lo, hi) = (t.mean_log - half, t.mean_log + half);
            let up = match rule.better {
                Better::Higher => true,
                Better::Lower => false,
            };
            let verdict = verdict_of(lo, hi, band, up);
            // Rounds that would decide it: the half-width must shrink to the distance
            // between the estimate and the nearest edge of the band. A half-width falls
            // with √rounds, and its t quantile towards the normal one as the degrees of
            // freedom grow, so the estimate takes both into account (at this level).
            let more_rounds = (verdict == Verdict::Inconclusive)
                .then(|| {
                    let room = (t.mean_log.abs() - band).abs();
                    (room > 1e-4 && half.is_finite()).then(|| {
                        let shrink = t_quantile(1.0 - gamma, f64::INFINITY) / t_quantile(1.0 - gamma, t.df);
                        let need = (t.rounds as f64 * (half * shrink / room).powi(2)).ceil() as usize;
                        need.saturating_sub(t.rounds).max(1)
                    })
                })
                .flatten();
            let method = method_words(c, m, rule);
            let (phrase, sentence) = words(c, base_name, verdict, (lo, hi), rule, p_value, more_rounds);
            Comparison {
                ratio: RatioEstimate {
                    point: t.mean_log.exp(),
                    ci_low: lo.exp(),
                    ci_high: hi.exp(),
                    confidence: 1.0 - gamma,
                },
                median_ratio: t.median_ratio,
                p_value,
                p_raw: t.p_raw,
                method,
                pairing: t.pairing,
                fallback: t.fallback.clone(),
                rounds: t.rounds,
                look: c.look,
                verdict,
                more_rounds,
                phrase,
                sentence,
                versus: c.versus.clone(),
            }
        })
        .collect()
}

/// The verdict of a log-ratio's interval `lo..hi` against the noise band ±`band`;
/// `up`: higher is better.
fn verdict_of(lo: f64, hi: f64, band: f64, up: bool) -> Verdict {
    if lo > band {
        if up {
            Verdict::Faster
        } else {
            Verdict::Slower
        }
    } else if hi < -band {
        if up {
            Verdict::Slower
        } else {
            Verdict::Faster
        }
    } else if lo >= -band && hi <= band {
        Verdict::NoDifference
    } else {
        Verdict::Inconclusive
    }
}

/// How a comparison was made, in words: the test, Holm's family of `m`, the look.
fn method_words(c: &Candidate, m: usize, rule: Rule) -> String {
    let t = &c.test;
    format!(
        "{}{}{}",
        match t.pairing {
            Pairing::Paired => "paired log-ratio t",
            Pairing::Unpaired => "unpaired log-ratio Welch t",
        },
        if m > 1 {
            format!(", Holm over {m} comparisons")
        } else {
            String::new()
        },
        match (rule.sequential, rule.looks) {
            (false, _) => String::new(),
            (true, None) => format!(", look {} of an adaptive run", c.look),
            (true, Some(cap)) => format!(", look {} of at most {cap} in an adaptive run", c.look),
        },
    )
}

/// A comparison's phrase ("1.234 times faster (1.1 to 1.3)") and its sentence, which
/// names both cells, the p-value and, when inconclusive, what would decide it.
fn words(
    c: &Candidate,
    base_name: &str,
    verdict: Verdict,
    (lo, hi): (f64, f64),
    rule: Rule,
    p_value: f64,
    more_rounds: Option<usize>,
) -> (String, String) {
    let t = &c.test;
    let up = matches!(rule.better, Better::Higher);
    // How many times better A is, and its interval, in the good direction.
    let (times, times_lo, times_hi) = if up {
        (t.mean_log.exp(), lo.exp(), hi.exp())
    } else {
        ((-t.mean_log).exp(), (-hi).exp(), (-lo).exp())
    };
    let band_pct = rule.threshold * 100.0;
    let phrase = match verdict {
        Verdict::Faster => format!("{times:.3} times faster ({times_lo:.3} to {times_hi:.3})"),
        Verdict::Slower => format!(
            "{:.3} times slower ({:.3} to {:.3})",
            1.0 / times,
            1.0 / times_hi,
            1.0 / times_lo
        ),
        // "x as fast" names the direction: for a lower-is-better figure the number
        // is the baseline's figure over the cell's, which a bare "ratio" hid.
        Verdict::NoDifference => {
            format!("the same within {band_pct:.0}% ({times:.3}x as fast, {times_lo:.3} to {times_hi:.3})")
        }
        Verdict::Inconclusive => {
            format!("inconclusive ({times:.3}x as fast, {times_lo:.3} to {times_hi:.3})")
        }
    };
    let p = format_p(p_value);
    let base_name = c.versus.as_deref().unwrap_or(base_name);
    let sentence = match verdict {
        Verdict::Faster | Verdict::Slower => format!("{} is {phrase} than {base_name} ({p})", c.name),
        Verdict::NoDifference => format!("{} and {base_name} are {phrase}, {p}", c.name),
        Verdict::Inconclusive => format!(
            "{} vs {base_name}: {phrase}, {p}; {}",
            c.name,
            match more_rounds {
                Some(k) => format!(
                    "about {k} more round{} (or runs {:.1}x longer) would decide it against the {band_pct:.0}% noise threshold",
                    if k == 1 { "" } else { "s" },
                    (t.rounds + k) as f64 / t.rounds as f64
                ),
                None => format!(
                    "the ratio sits on the {band_pct:.0}% noise threshold, where more rounds decide slowly"
                ),
            }
        ),
    };
    (phrase, sentence)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    fn rule(better: Better, threshold: f64, sequential: bool) -> Rule {
        Rule {
            better,
            confidence: 0.95,
            alpha: 0.05,
            threshold,
            sequential,
            looks: None,
        }
    }

    fn rounds(v: &[f64]) -> Vec<(u32, Option<f64>)> {
        v.iter()
            .enumerate()
            .map(|(i, x)| (i as u32 + 1, Some(*x)))
            .collect()
    }

    fn one(a: &[f64], b: &[f64], r: Rule) -> Comparison {
        let test = log_test(&rounds(a), &rounds(b)).unwrap();
        decide(
            &[Candidate {
                versus: None,
                name: "a".into(),
                test,
                look: 1,
            }],
            "b",
            r,
        )
        .remove(0)
    }

    fn normal(rng: &mut Rng, mean: f64, sd: f64) -> f64 {
        // Box–Muller.
        let (u1, u2) = (rng.unit(), rng.unit());
        mean + sd * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
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

    /// Student's sleep data (Cushny and Peebles, 1905), the textbook paired t-test: R's
    /// `t.test(extra ~ group, data = sleep, paired = TRUE)` gives t = -4.0621, df = 9,
    /// p = 0.002833, 95% interval of the mean difference -2.4598858 to -0.7001142. As
    /// logs of ratios, the same numbers must come out, the interval as exp(...).
    #[test]
    fn the_log_scale_interval_matches_the_textbook_paired_t_test() {
        let g1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0];
        let g2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4];
        let a: Vec<f64> = g1.iter().map(|x: &f64| x.exp()).collect();
        let b: Vec<f64> = g2.iter().map(|x: &f64| x.exp()).collect();
        let t = log_test(&rounds(&a), &rounds(&b)).unwrap();
        assert_eq!(t.pairing, Pairing::Paired);
        assert!(
            close(t.mean_log / t.se_log, -4.0621, 1e-4),
            "t = {}",
            t.mean_log / t.se_log
        );
        assert_eq!(t.df, 9.0);
        assert!(close(t.p_raw, 0.002833, 1e-6), "p = {}", t.p_raw);
        let c = one(&a, &b, rule(Better::Higher, 0.02, false));
        assert!(close(c.ratio.ci_low.ln(), -2.4598858, 1e-6), "{:?}", c.ratio);
        assert!(close(c.ratio.ci_high.ln(), -0.7001142, 1e-6), "{:?}", c.ratio);
        assert!(close(c.ratio.confidence, 0.95, 1e-12));
        assert_eq!(c.verdict, Verdict::Slower);
        // Lower-is-better inverts the ratio and its interval, and the verdict.
        let c = one(&a, &b, rule(Better::Lower, 0.02, false));
        assert_eq!(c.verdict, Verdict::Faster);
        assert!(
            c.phrase.starts_with("4.855 times faster (2.014 to 11.70"),
            "{}",
            c.phrase
        );
    }

    /// R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm") = 0.03 0.06 0.06 0.02.
    #[test]
    fn holm_matches_a_worked_example() {
        let adj = holm(&[0.01, 0.04, 0.03, 0.005]);
        for (x, want) in adj.iter().zip([0.03, 0.06, 0.06, 0.02]) {
            assert!(close(*x, want, 1e-12), "{adj:?}");
        }
        assert_eq!(holm(&[0.7, 0.9]), [1.0, 1.0], "capped at 1");
        assert_eq!(holm(&[]), Vec::<f64>::new());
    }

    /// Whatever the data, the interval is positive and agrees with the p-value and the
    /// verdict: excludes 1 exactly when p < α; faster/slower only beyond the band.
    #[test]
    fn interval_p_value_and_verdict_never_disagree() {
        let mut rng = Rng::new(3);
        for trial in 0..2000 {
            let k = 1 + trial % 4;
            let n = 2 + trial % 6;
            let family: Vec<Candidate> = (0..k)
                .map(|i| {
                    let effect = [1.0, 1.01, 1.05, 0.9][i % 4];
                    let b: Vec<f64> = (0..n).map(|_| normal(&mut rng, 1000.0, 30.0).max(1.0)).collect();
                    let a: Vec<f64> = b
                        .iter()
                        .map(|x| x * effect * normal(&mut rng, 1.0, 0.03).max(0.01))
                        .collect();
                    Candidate {
                        versus: None,
                        name: format!("c{i}"),
                        test: log_test(&rounds(&a), &rounds(&b)).unwrap(),
                        look: 1 + (trial % 3) as u32,
                    }
                })
                .collect();
            let r = rule(
                if trial % 2 == 0 {
                    Better::Higher
                } else {
                    Better::Lower
                },
                0.02,
                trial % 5 == 0,
            );
            for c in decide(&family, "base", r) {
                assert!(c.ratio.ci_low > 0.0 && c.ratio.ci_low <= c.ratio.ci_high, "{c:?}");
                let excludes_one = c.ratio.ci_low > 1.0 || c.ratio.ci_high < 1.0;
                assert_eq!(excludes_one, c.p_value < 0.05, "{c:?}");
                let band = (1.0 / 1.02, 1.02);
                match c.verdict {
                    Verdict::Faster | Verdict::Slower => {
                        assert!(c.ratio.ci_low > band.1 || c.ratio.ci_high < band.0, "{c:?}")
                    }
                    Verdict::NoDifference => {
                        assert!(c.ratio.ci_low >= band.0 && c.ratio.ci_high <= band.1, "{c:?}")
                    }
                    Verdict::Inconclusive => {
                        let beyond = c.ratio.ci_low > band.1 || c.ratio.ci_high < band.0;
                        let inside = c.ratio.ci_low >= band.0 && c.ratio.ci_high <= band.1;
                        assert!(!beyond && !inside, "{c:?}")
                    }
                }
            }
        }
    }

    /// Rounds that share a drift (machine load that moves both cells) and independent
    /// noise: pairing cancels the drift, so its interval is much narrower than the
    /// unpaired one, and it still covers the true ratio about 95% of the time.
    #[test]
    fn paired_rounds_are_narrower_under_drift_and_still_cover() {
        let mut rng = Rng::new(17);
        let (trials, n, truth) = (3000, 6, 1.05f64);
        let (mut covered, mut paired_width, mut unpaired_width) = (0, 0.0, 0.0);
        for _ in 0..trials {
            let mut drift = 1.0;
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for _ in 0..n {
                drift *= normal(&mut rng, 1.0, 0.15).max(0.3);
                b.push(1000.0 * drift * normal(&mut rng, 1.0, 0.01));
                a.push(1000.0 * truth * drift * normal(&mut rng, 1.0, 0.01));
            }
            let p = one(&a, &b, rule(Better::Higher, 0.02, false));
            assert_eq!(p.pairing, Pairing::Paired);
            if p.ratio.ci_low <= truth && truth <= p.ratio.ci_high {
                covered += 1;
            }
            paired_width += (p.ratio.ci_high / p.ratio.ci_low).ln();
            let la: Vec<f64> = a.iter().map(|x| x.ln()).collect();
            let lb: Vec<f64> = b.iter().map(|x| x.ln()).collect();
            let u = welch_logs(&la, &lb).unwrap();
            unpaired_width += 2.0 * t_quantile(0.95, u.df) * u.se_log;
        }
        let rate = covered as f64 / trials as f64;
        assert!((0.935..=0.965).contains(&rate), "paired coverage {rate}");
        assert!(
            paired_width * 5.0 < unpaired_width,
            "paired {paired_width:.1} vs unpaired {unpaired_width:.1} (summed log widths)"
        );
    }

    /// An incomplete round (one cell failed) falls back to the unpaired test and says so.
    #[test]
    fn an_incomplete_round_falls_back_to_unpaired() {
        let a = [(1, Some(100.0)), (2, None), (3, Some(104.0)), (4, Some(101.0))];
        let b = [
            (1, Some(99.0)),
            (2, Some(98.0)),
            (3, Some(100.0)),
            (4, Some(97.0)),
        ];
        let t = log_test(&a, &b).unwrap();
        assert_eq!(t.pairing, Pairing::Unpaired);
        assert!(t.fallback.unwrap().contains("1 round had only one"));
        assert!(
            log_test(&[(1, Some(0.0))], &[(1, Some(1.0))]).is_err(),
            "zero has no log"
        );
    }

    /// A/A: identical cells, an adaptive run that looks after 3 rounds and after every
    /// round added, up to 20 looks, and stops at the first significant look. With each
    /// look spending its share of α, false "different" verdicts stay at or below 5%; a
    /// naive rule (α at every look) would flag far more, which the test shows too.
    #[test]
    fn a_a_false_positives_stay_within_alpha_under_repeated_looks() {
        let mut rng = Rng::new(23);
        let trials = 2000;
        let (mut sequential_false, mut naive_false) = (0, 0);
        for _ in 0..trials {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let (mut seq_hit, mut naive_hit) = (false, false);
            for round in 1..=22u32 {
                let drift = normal(&mut rng, 1.0, 0.1).max(0.3);
                a.push(1000.0 * drift * normal(&mut rng, 1.0, 0.02));
                b.push(1000.0 * drift * normal(&mut rng, 1.0, 0.02));
                if round < 3 {
                    continue;
                }
                let look = round - 2;
                let test = log_test(&rounds(&a), &rounds(&b)).unwrap();
                let cand = [Candidate {
                    versus: None,
                    name: "a".into(),
                    test,
                    look,
                }];
                // Threshold 0: any significant difference counts as a false verdict, the
                // hardest case for the rule (a real noise band only makes it rarer).
                let s = decide(&cand, "b", rule(Better::Higher, 0.0, true)).remove(0);
                let n = decide(&cand, "b", rule(Better::Higher, 0.0, false)).remove(0);
                seq_hit |= matches!(s.verdict, Verdict::Faster | Verdict::Slower);
                naive_hit |= matches!(n.verdict, Verdict::Faster | Verdict::Slower);
            }
            sequential_false += usize::from(seq_hit);
            naive_false += usize::from(naive_hit);
        }
        let (seq, naive) = (
            sequential_false as f64 / trials as f64,
            naive_false as f64 / trials as f64,
        );
        assert!(seq <= 0.05, "sequential false-positive rate {seq}");
        assert!(naive > 0.10, "peeking without spending α should inflate: {naive}");
    }

    /// A cap of L looks spends α over those L only: all of it with one, 0.8 and 0.2
    /// with two; the shares sum to 1 for every cap, and the uncapped rule's over many.
    #[test]
    fn look_shares_sum_to_one_over_the_looks_a_run_can_take() {
        assert!(close(look_share(1, Some(1)), 1.0, 1e-12));
        assert!(close(look_share(1, Some(2)), 0.8, 1e-12));
        assert!(close(look_share(2, Some(2)), 0.2, 1e-12));
        for cap in 1..=6 {
            let sum: f64 = (1..=cap).map(|j| look_share(j, Some(cap))).sum();
            assert!(close(sum, 1.0, 1e-12), "cap {cap}: {sum}");
            // Each capped share is at least the uncapped one.
            assert!(look_share(1, Some(cap)) >= look_share(1, None));
        }
        let uncapped: f64 = (1..=100_000).map(|j| look_share(j, None)).sum();
        assert!(close(uncapped, 1.0, 1e-4), "{uncapped}");
        assert!(close(
            look_share(1, None),
            6.0 / std::f64::consts::PI.powi(2),
            1e-12
        ));
    }

    /// A/A with the looks a budget allows: at 8, 12 and 18 rounds (a cap of 3), stopping
    /// at the first significant look. False "different" verdicts stay at or below 5%.
    #[test]
    fn a_a_false_positives_stay_within_alpha_with_capped_looks() {
        let mut rng = Rng::new(41);
        let trials = 4000;
        let mut false_hits = 0;
        let capped = Rule {
            looks: Some(3),
            ..rule(Better::Higher, 0.0, true)
        };
        for _ in 0..trials {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let mut hit = false;
            for round in 1..=18u32 {
                let drift = normal(&mut rng, 1.0, 0.1).max(0.3);
                a.push(1000.0 * drift * normal(&mut rng, 1.0, 0.02));
                b.push(1000.0 * drift * normal(&mut rng, 1.0, 0.02));
                let look = match round {
                    8 => 1,
                    12 => 2,
                    18 => 3,
                    _ => continue,
                };
                let test = log_test(&rounds(&a), &rounds(&b)).unwrap();
                let cand = [Candidate {
                    versus: None,
                    name: "a".into(),
                    test,
                    look,
                }];
                let c = decide(&cand, "b", capped).remove(0);
                hit |= matches!(c.verdict, Verdict::Faster | Verdict::Slower);
                assert!(c
                    .method
                    .ends_with(&format!("look {look} of at most 3 in an adaptive run")));
            }
            false_hits += usize::from(hit);
        }
        let rate = false_hits as f64 / trials as f64;
        assert!(rate <= 0.05, "false-positive rate {rate}");
        // And not vacuously: the rule does flag about its share (union bound, so below α).
        assert!(rate >= 0.02, "false-positive rate {rate}");
    }

    /// However small a p-value gets, its interval is printed at the level the family's
    /// adjustment gives it, never at the unadjusted 95%.
    #[test]
    fn decisive_comparisons_keep_their_adjusted_level() {
        let b = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1002.0, 998.0, 1001.0];
        let family: Vec<Candidate> = [3.0, 30.0, 300.0]
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let a: Vec<f64> = b
                    .iter()
                    .enumerate()
                    .map(|(j, x)| x * k * (1.0 + 0.001 * j as f64))
                    .collect();
                Candidate {
                    versus: None,
                    name: format!("c{i}"),
                    test: log_test(&rounds(&a), &rounds(&b)).unwrap(),
                    look: 2,
                }
            })
            .collect();
        let decided = decide(&family, "b", rule(Better::Higher, 0.02, true));
        for c in &decided {
            // At least the look's share of α, and Holm's multiplier on top for the most
            // significant: 1 - α·share/3, then /2, then /1.
            assert!(
                c.ratio.confidence >= 1.0 - 0.05 * look_share(2, None) - 1e-12,
                "{c:?}"
            );
            assert_eq!(c.verdict, Verdict::Faster);
        }
        let top = decided.iter().map(|c| c.ratio.confidence).fold(0.0, f64::max);
        assert!(
            top >= 1.0 - 0.05 * look_share(2, None) / 3.0 - 1e-12,
            "{decided:?}"
        );
    }

    #[test]
    fn samples_without_spread_are_decided_by_their_means() {
        let c = one(&[93.0, 93.0], &[46.5, 46.5], rule(Better::Higher, 0.02, false));
        assert_eq!(c.verdict, Verdict::Faster, "{}", c.sentence);
        assert_eq!(c.p_value, 0.0);
        let same = one(&[93.0, 93.0], &[93.0, 93.0], rule(Better::Higher, 0.02, false));
        assert_eq!(same.verdict, Verdict::NoDifference);
    }

    #[test]
    fn an_interval_wholly_inside_the_threshold_reads_the_same_within_it() {
        // 0.5% apart, steadily: significant (p < 0.05), yet wholly inside 2%, so the
        // answer is equivalence, said as such, not "inconclusive".
        let a = [100.5, 201.1, 150.7, 120.6, 180.95];
        let b = [100.0, 200.0, 150.0, 120.0, 180.0];
        let c = one(&a, &b, rule(Better::Higher, 0.02, false));
        assert_eq!(c.verdict, Verdict::NoDifference, "{}", c.sentence);
        assert!(c.ratio.ci_low > 0.98 && c.ratio.ci_high < 1.02, "{c:?}");
        assert!(c.sentence.contains(" are the same within 2% ("), "{}", c.sentence);
        assert!(!c.sentence.contains("inconclusive"), "{}", c.sentence);
        // Reaching beyond the threshold on one side: inconclusive, with the rounds to decide.
        let wide = one(
            &[103.0, 99.0, 101.0],
            &[100.0, 100.0, 100.0],
            rule(Better::Higher, 0.02, false),
        );
        assert_eq!(wide.verdict, Verdict::Inconclusive, "{}", wide.sentence);
    }

    #[test]
    fn inconclusive_names_the_rounds_that_would_decide() {
        let c = one(
            &[900.0, 1100.0, 1000.0],
            &[950.0, 1060.0, 990.0],
            rule(Better::Higher, 0.02, false),
        );
        assert_eq!(c.verdict, Verdict::Inconclusive);
        assert!(c.more_rounds.is_some_and(|k| k > 0), "{c:?}");
        assert!(c.sentence.contains("more round"), "{}", c.sentence);
    }
}

//! Statistics: plain summaries computed from measured samples, for reports to read.
//!
//! Method. Every connect sample is kept, so percentiles are exact order statistics, not
//! histogram estimates: the p-th percentile is the nearest-rank value, the smallest
//! sample with at least p% of the samples at or below it (so p50 of 1..=4 is 2, and p99
//! and max coincide below 100 samples). The mean and the sample standard deviation
//! (n - 1 in the denominator) are computed in f64 from integer nanoseconds. Round trips
//! per phase are reported as the most frequent count (they only vary when something
//! unusual happened, such as a retransmission split over two reads). A phase's figures
//! cover only the samples that had the phase.

pub mod compare;
pub mod load;
pub mod app;
pub mod housekeeping;
pub mod model;
pub mod fault;
pub mod failures;

use crate::connect::{ConnectRun, FailureCount, TargetSamples};
use crate::net::transport::TlsInfo;
use crate::proto::{Phase, Timeline};

/// A distribution of durations, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Summary {
    pub n: usize,
    pub mean_ns: f64,
    pub stddev_ns: f64,
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

/// Summarises `values` (which it sorts). `None` when there are none.
pub fn summarize(values: &mut [u64]) -> Option<Summary> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    let n = values.len();
    let mean = values.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
    let var = if n > 1 {
        values.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / (n - 1) as f64
    } else {
        0.0
    };
    Some(Summary {
        n,
        mean_ns: mean,
        stddev_ns: var.sqrt(),
        min_ns: values[0],
        p50_ns: percentile_sorted(values, 50.0),
        p90_ns: percentile_sorted(values, 90.0),
        p99_ns: percentile_sorted(values, 99.0),
        max_ns: values[n - 1],
    })
}

/// Nearest-rank percentile of sorted values: the value at rank ceil(p/100 * n).
pub fn percentile_sorted(sorted: &[u64], p: f64) -> u64 {
    assert!(!sorted.is_empty());
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The most frequent value (the smallest among ties).
pub fn mode(values: &[u32]) -> Option<u32> {
    let mut counts = std::collections::BTreeMap::new();
    for &v in values {
        *counts.entry(v).or_insert(0usize) += 1;
    }
    counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|(v, _)| v)
}

/// One phase's figures at one target.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseSummary {
    pub phase: Phase,
    pub round_trips: u32,
    pub time: Summary,
}

/// A cold (warm-up) connection, reported apart.
#[derive(Debug, Clone, PartialEq)]
pub struct ColdConnect {
    pub total_ns: u64,
    pub phases: Vec<(Phase, u64)>,
}

/// Everything a report needs about one target.
#[derive(Debug, Clone, Default)]
pub struct TargetSummary {
    pub name: String,
    pub conninfo: String,
    pub transport: &'static str,
    pub description: Option<String>,
    pub server_version: Option<String>,
    pub tls: Option<TlsInfo>,
    pub samples: usize,
    pub failures: u64,
    pub failures_by_kind: Vec<(String, FailureCount)>,
    pub gave_up: Option<String>,
    pub phases: Vec<PhaseSummary>,
    pub total: Option<PhaseSummaryTotal>,
    pub warmup: Vec<ColdConnect>,
    pub bytes_sent_per_connect: f64,
    pub bytes_received_per_connect: f64,
    /// Mean total divided by the first target's mean total.
    pub relative_to_first: Option<f64>,
    /// The connect time at other round-trip times (`connect --predict-rtt`).
    pub predictions: Vec<model::Prediction>,
}

/// The total's figures: its distribution and the round trips of all phases together.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseSummaryTotal {
    pub round_trips: u32,
    pub time: Summary,
}

/// Summaries of a connect run, in target order.
pub fn summarize_connect(run: &ConnectRun) -> Vec<TargetSummary> {
    let mut out: Vec<TargetSummary> = run.targets.iter().map(summarize_target).collect();
    let first_mean = out.first().and_then(|t| t.total.as_ref()).map(|t| t.time.mean_ns);
    for t in &mut out {
        t.relative_to_first = match (first_mean, &t.total) {
            (Some(f), Some(total)) if f > 0.0 => Some(total.time.mean_ns / f),
            _ => None,
        };
    }
    out
}

fn summarize_target(t: &TargetSamples) -> TargetSummary {
    let samples = &t.samples;
    let phases = Phase::ALL
        .iter()
        .filter_map(|&p| {
            let spans: Vec<_> = samples.iter().filter_map(|s| s.phase(p)).collect();
            let mut ns: Vec<u64> = spans.iter().map(|s| s.ns).collect();
            let rts: Vec<u32> = spans.iter().map(|s| s.round_trips).collect();
            Some(PhaseSummary {
                phase: p,
                round_trips: mode(&rts)?,
                time: summarize(&mut ns)?,
            })
        })
        .collect();
    let mut totals: Vec<u64> = samples.iter().map(|s| s.total_ns).collect();
    let total_rts: Vec<u32> = samples
        .iter()
        .map(|s| s.phases.iter().flatten().map(|p| p.round_trips).sum())
        .collect();
    let total = summarize(&mut totals).map(|time| PhaseSummaryTotal {
        round_trips: mode(&total_rts).unwrap_or(0),
        time,
    });
    let n = samples.len().max(1) as f64;
    TargetSummary {
        name: t.name.clone(),
        conninfo: t.conninfo.clone(),
        transport: t.transport,
        description: t.description.clone(),
        server_version: t.server_version.clone(),
        tls: samples.iter().chain(&t.warmup).find_map(|s| s.tls.clone()),
        samples: samples.len(),
        failures: t.failure_total(),
        failures_by_kind: t.failures.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        gave_up: t.gave_up.clone(),
        phases,
        total,
        warmup: t.warmup.iter().map(cold).collect(),
        bytes_sent_per_connect: samples.iter().map(|s| s.counters.bytes_sent as f64).sum::<f64>() / n,
        bytes_received_per_connect: samples
            .iter()
            .map(|s| s.counters.bytes_received as f64)
            .sum::<f64>()
            / n,
        relative_to_first: None,
        predictions: Vec::new(),
    }
}

fn cold(t: &Timeline) -> ColdConnect {
    ColdConnect {
        total_ns: t.total_ns,
        phases: Phase::ALL
            .iter()
            .filter_map(|&p| t.phase(p).map(|s| (p, s.ns)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile_sorted(&v, 50.0), 50);
        assert_eq!(percentile_sorted(&v, 90.0), 90);
        assert_eq!(percentile_sorted(&v, 99.0), 99);
        assert_eq!(percentile_sorted(&v, 100.0), 100);
        assert_eq!(percentile_sorted(&[1, 2, 3, 4], 50.0), 2);
        assert_eq!(percentile_sorted(&[7], 99.0), 7);
        assert_eq!(percentile_sorted(&[1, 2, 3], 0.0), 1);
    }

    #[test]
    fn mean_and_sample_stddev() {
        // Textbook example: 2 4 4 4 5 5 7 9 has mean 5 and sample variance 32/7.
        let mut v = vec![2, 4, 4, 4, 5, 5, 7, 9];
        let s = summarize(&mut v).unwrap();
        assert_eq!(s.n, 8);
        assert!((s.mean_ns - 5.0).abs() < 1e-12);
        assert!((s.stddev_ns - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!((s.min_ns, s.p50_ns, s.max_ns), (2, 4, 9));
        assert!(summarize(&mut []).is_none());
        let one = summarize(&mut [5]).unwrap();
        assert_eq!(one.stddev_ns, 0.0);
    }

    #[test]
    fn mode_prefers_most_frequent_then_smallest() {
        assert_eq!(mode(&[3, 3, 2, 3, 4]), Some(3));
        assert_eq!(mode(&[2, 3]), Some(2));
        assert_eq!(mode(&[]), None);
    }
}

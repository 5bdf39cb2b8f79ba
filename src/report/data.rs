//! What a report of a stored run draws from: the run's statistics (rebuilt from the store
//! through the same `experiment::summary::summarize` a live run uses) and, per cell, what the charts
//! need beyond the figures: the latency histogram merged over counted repetitions, one
//! repetition's interval series, and how many repetitions succeeded, failed or are
//! missing.

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;

use crate::experiment::store::{self, Store, StoredRun};
use crate::experiment::suite::Suite;
use crate::experiment::summary::{self, Outcome, Outcomes, SuiteResult};
use serde::Serialize;

use crate::stats::load::IntervalSummary;

/// A stored run read back: its rows, its suite, and per cell its counted repetitions
/// (round, figures or error), as a live run holds them.
pub struct Loaded {
    pub stored: StoredRun,
    pub suite: Suite,
    pub outcomes: Outcomes,
}

/// Reads run `run` from the store.
pub fn load(store: &Store, run: i64) -> Result<Loaded> {
    let Some(stored) = store.load_run(run)? else {
        bail!("no run {run} in {}; see `connbench runs`", store.location());
    };
    let suite: Suite = serde_json::from_value(stored.suite.clone())
        .with_context(|| format!("run {run}: cannot read its suite"))?;
    let mut outcomes: Outcomes = vec![Vec::new(); suite.cells.len()];
    for rep in stored.repetitions.iter().filter(|r| !r.prewarm) {
        let Some(cell) = outcomes.get_mut(rep.cell) else {
            continue;
        };
        cell.push(Outcome {
            round: rep.repetition,
            result: match &rep.error {
                Some(e) => Err(e.clone()),
                None => Ok(rep
                    .summary
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter_map(|(k, v)| v.as_f64().map(|x| (k.clone(), x)))
                    .collect()),
            },
        });
    }
    Ok(Loaded {
        stored,
        suite,
        outcomes,
    })
}

impl Loaded {
    /// Cell `cell`'s values of `figure` over its successful repetitions.
    pub fn values(&self, cell: usize, figure: &str) -> Vec<f64> {
        self.outcomes[cell]
            .iter()
            .filter_map(|o| o.result.as_ref().ok().and_then(|f| f.get(figure).copied()))
            .collect()
    }

    /// The run's statistics, as a live run would have printed them.
    pub fn result(&self) -> SuiteResult {
        let env = serde_json::from_value(self.stored.environment.clone()).unwrap_or_default();
        summary::summarize(
            &self.suite,
            self.stored.run.id,
            self.outcomes.clone(),
            self.stored.run.status == "interrupted",
            env,
        )
    }
}

/// One repetition's interval series, for the over-time chart.
#[derive(Debug, Clone)]
pub struct Series {
    pub repetition: u32,
    pub intervals: Vec<IntervalSummary>,
    /// Reconnects are worth marking only when they are events, not every transaction.
    pub mark_connects: bool,
    /// The fault a faults cell struck, and when (seconds into the measurement).
    pub fault: Option<(String, f64)>,
}

/// What the charts of one cell draw from, beyond its figures.
#[derive(Debug, Clone)]
pub struct CellData {
    /// Latency (load) or connect time (connect) of every counted repetition, ns.
    pub histogram: Option<Histogram<u64>>,
    /// The series of the repetition whose figure is nearest the cell's median.
    pub series: Option<Series>,
    pub succeeded: usize,
    pub failed: usize,
    /// Planned repetitions that never ran (the run was interrupted or is still running).
    pub missing: usize,
}

/// A stored run with everything its report shows.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub result: SuiteResult,
    pub started_at: String,
    pub status: String,
    pub cells: Vec<CellData>,
}

impl RunReport {
    /// Reads run `run` and prepares its report.
    pub fn load(store: &Store, run: i64) -> Result<RunReport> {
        let loaded = load(store, run)?;
        Ok(RunReport::from_loaded(&loaded))
    }

    pub fn from_loaded(l: &Loaded) -> RunReport {
        let result = l.result();
        let figure = &l.suite.figure;
        let cells = (0..l.suite.cells.len())
            .map(|cell| {
                let reps: Vec<&store::Repetition> = l
                    .stored
                    .repetitions
                    .iter()
                    .filter(|r| r.cell == cell && !r.prewarm)
                    .collect();
                let ok: Vec<&&store::Repetition> = reps.iter().filter(|r| r.error.is_none()).collect();
                let mut histogram: Option<Histogram<u64>> = None;
                for r in &ok {
                    let Some(h) = r
                        .latency_histogram
                        .as_deref()
                        .and_then(|b| store::deserialize_histogram(b).ok())
                    else {
                        continue;
                    };
                    match &mut histogram {
                        None => histogram = Some(h),
                        Some(acc) => {
                            // Both come from `measurements::latency_histogram`, so the ranges match.
                            let _ = acc.add(&h);
                        }
                    }
                }
                CellData {
                    histogram,
                    series: median_series(&ok, figure),
                    succeeded: ok.len(),
                    failed: reps.len() - ok.len(),
                    missing: (l.suite.repetitions as usize).saturating_sub(reps.len()),
                }
            })
            .collect();
        RunReport {
            result,
            started_at: l.stored.run.started_at.clone(),
            status: l.stored.run.status.clone(),
            cells,
        }
    }
}

/// The series of the repetition whose `figure` is the median of the cell's repetitions,
/// so the chart shows a typical run, not the best or the worst.
fn median_series(ok: &[&&store::Repetition], figure: &str) -> Option<Series> {
    type Found = (f64, u32, Vec<IntervalSummary>, Option<(String, f64)>);
    let mut with: Vec<Found> = ok
        .iter()
        .filter_map(|r| {
            let v = r.summary.get(figure)?.as_f64()?;
            let detail = r.detail.as_ref()?;
            let intervals: Vec<IntervalSummary> =
                serde_json::from_value(detail.get("series")?.clone()).ok()?;
            let fault = detail
                .get("fault")
                .and_then(|f| Some((f.get("kind")?.as_str()?.to_string(), f.get("at_s")?.as_f64()?)));
            Some((v, r.repetition, intervals, fault))
        })
        .collect();
    if with.is_empty() {
        return None;
    }
    with.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (_, repetition, intervals, fault) = with.swap_remove((with.len() - 1) / 2);
    let connects: u64 = intervals.iter().map(|i| i.connects).sum();
    let transactions: u64 = intervals.iter().map(|i| i.transactions).sum();
    Some(Series {
        repetition,
        mark_connects: connects > 0 && connects * 2 <= transactions,
        intervals,
        fault,
    })
}

impl CellData {
    /// Points of the percentile curve: `(quantile, ms)` from the minimum up to the
    /// quantile the sample count supports (1/(1-q) <= n), at most 99.99%, ten per decade.
    pub fn percentile_points(&self) -> Vec<(f64, f64)> {
        self.histogram
            .as_ref()
            .map(percentile_points_of)
            .unwrap_or_default()
    }
}

/// A nanosecond histogram's percentile curve, `(quantile, ms)`, drawn as far into the tail
/// as its sample count supports (10 points per nine, up to 99.99%).
pub fn percentile_points_of(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let max_nines = (h.len() as f64).log10().floor().clamp(1.0, 4.0);
    let mut points = vec![(0.0, h.min() as f64 / 1e6)];
    for k in 1..=(max_nines * 10.0) as i32 {
        let q = 1.0 - 10f64.powf(-k as f64 / 10.0);
        points.push((q, h.value_at_quantile(q) as f64 / 1e6));
    }
    points
}

impl RunReport {
    /// The run as JSON (docs/schema/run.schema.json): the suite report a live run prints,
    /// plus what the store knows (start, status, repetition counts, a series, the
    /// merged percentile curve).
    pub fn json(&self) -> ReportRunJson<'_> {
        ReportRunJson {
            head: super::suite::RunHead::of(&self.result),
            started_at: &self.started_at,
            status: &self.status,
            cells: self
                .result
                .cells
                .iter()
                .zip(&self.cells)
                .zip(super::size::size_json(&self.result))
                .map(|((c, d), size)| ReportCellJson {
                    cell: super::suite::CellJson::of(c, size),
                    repetitions: RepetitionCounts {
                        succeeded: d.succeeded,
                        failed: d.failed,
                        missing: d.missing,
                    },
                    series: d.series.as_ref().map(|s| SeriesJson {
                        repetition: s.repetition,
                        mark_connects: s.mark_connects,
                        fault: s
                            .fault
                            .as_ref()
                            .map(|(kind, at_s)| FaultJson { kind, at_s: *at_s }),
                        intervals: &s.intervals,
                    }),
                    percentiles_ms: d
                        .percentile_points()
                        .into_iter()
                        .map(|(quantile, value)| Quantile { quantile, value })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// `report --json`: the runs, each with the store's knowledge.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ReportJson<'a> {
    pub connbench_version: &'static str,
    pub command: &'static str,
    pub runs: Vec<ReportRunJson<'a>>,
}

impl<'a> ReportJson<'a> {
    pub fn of(reports: &'a [RunReport]) -> ReportJson<'a> {
        ReportJson {
            connbench_version: env!("CARGO_PKG_VERSION"),
            command: "report",
            runs: reports.iter().map(RunReport::json).collect(),
        }
    }
}

/// One run of `report --json`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ReportRunJson<'a> {
    #[serde(flatten)]
    pub head: super::suite::RunHead<'a>,
    /// When the run began (UTC, RFC 3339).
    pub started_at: &'a str,
    /// done, interrupted, running (still running, or killed) or failed.
    pub status: &'a str,
    pub cells: Vec<ReportCellJson<'a>>,
}

/// One cell of a run of `report --json`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ReportCellJson<'a> {
    #[serde(flatten)]
    pub cell: super::suite::CellJson<'a>,
    pub repetitions: RepetitionCounts,
    /// The interval series of the repetition whose main figure is the cell's median.
    pub series: Option<SeriesJson<'a>>,
    /// The distribution of all counted repetitions merged, in ms.
    pub percentiles_ms: Vec<Quantile>,
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct RepetitionCounts {
    pub succeeded: usize,
    pub failed: usize,
    /// Planned repetitions that never ran.
    pub missing: usize,
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct SeriesJson<'a> {
    pub repetition: u32,
    /// Whether the report marks reconnects (false when most transactions connect).
    pub mark_connects: bool,
    /// The fault a faults cell struck in this repetition; null for other cells.
    pub fault: Option<FaultJson<'a>>,
    pub intervals: &'a [IntervalSummary],
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct FaultJson<'a> {
    /// pgbouncer-restart, postgres-restart or terminate-backends.
    pub kind: &'a str,
    /// When it struck, in seconds into the measurement.
    pub at_s: f64,
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct Quantile {
    pub quantile: f64,
    pub value: f64,
}

/// The schema of `run --json` and `report --json` (one of the two), generated from the
/// types (committed as docs/schema/run.schema.json; a test keeps them equal).
pub fn schema() -> serde_json::Value {
    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    #[serde(untagged)]
    enum RunOrReport<'a> {
        Run(super::suite::RunJson<'a>),
        Report(ReportJson<'a>),
    }
    crate::units::output_schema::<RunOrReport<'static>>()
}

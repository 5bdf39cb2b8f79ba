//! A many-machine load run, merged: the load report of all its workers as one run, with
//! the workers themselves (host, clock offset, start, count) and the start skew, in text
//! (`runs show`, Markdown) and JSON (`report --json`).

use anyhow::{Context, Result};
use serde::Serialize;

use crate::experiment::workers::Merged;
use crate::report::load::LoadSettings;
use crate::stats;

/// `report --json` of many-machine runs (docs/schema/workers.schema.json).
#[derive(Serialize, schemars::JsonSchema)]
pub struct WorkersReportJson {
    pub connbench_version: &'static str,
    pub command: &'static str,
    pub runs: Vec<MergedJson>,
}

impl WorkersReportJson {
    pub fn of(merged: &[Merged]) -> Result<WorkersReportJson> {
        Ok(WorkersReportJson {
            connbench_version: env!("CARGO_PKG_VERSION"),
            command: "report",
            runs: merged.iter().map(json).collect::<Result<_>>()?,
        })
    }
}

/// The schema of `report --json` for many-machine runs, generated from the types.
pub fn schema() -> serde_json::Value {
    crate::units::output_schema::<WorkersReportJson>()
}

/// What `report --json` says of a many-machine run.
#[derive(Serialize, schemars::JsonSchema)]
pub struct MergedJson {
    pub id: i64,
    pub name: String,
    /// done, interrupted, running (a worker has not ended) or failed.
    pub status: String,
    pub workers: usize,
    /// Measured transactions of every worker whose record is saved, added up.
    pub transactions: u64,
    pub failed_transactions: u64,
    /// Transactions over the span from the first worker's measured start to the last
    /// one's end, on the store's clock.
    pub tps: f64,
    /// Percentiles of the merged histogram (never averaged percentiles), in ms.
    pub latency_p50_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    /// The spread of the instants the workers passed the agreed start, in ms, each
    /// measured on its own clock corrected by its offset from the store's server; null
    /// until two workers have started.
    pub start_skew_ms: Option<f64>,
    pub per_worker: Vec<WorkerJson>,
    /// Workers whose record is not saved, and why: the merged figures leave them out.
    pub missing: Vec<MissingJson>,
    /// The merged run as `connbench load --json` reports one run (its schema).
    #[schemars(with = "serde_json::Value")]
    pub load: serde_json::Value,
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct WorkerJson {
    pub worker: i64,
    pub host: String,
    pub status: String,
    pub transactions: Option<u64>,
    /// The store's clock minus the worker's, and the round trip of the reading it came
    /// from (its error is at most half that), in ms.
    pub clock_offset_ms: Option<f64>,
    pub clock_rtt_ms: Option<f64>,
    /// When it passed the agreed start, after the first worker to do so, in ms.
    pub start_after_first_ms: Option<f64>,
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct MissingJson {
    pub worker: i64,
    pub why: String,
}

fn settings(m: &Merged) -> Result<LoadSettings> {
    serde_json::from_value(m.settings.clone())
        .with_context(|| format!("run {}: cannot read its load settings", m.name))
}

/// The whole run's settings and the merged run's summary.
fn summarized(m: &Merged) -> Result<(LoadSettings, stats::load::LoadSummary)> {
    let settings = settings(m)?;
    let summary = stats::load::summarize_load(&m.run, settings.clients, settings.interval_s);
    Ok((settings, summary))
}

pub fn json(m: &Merged) -> Result<MergedJson> {
    let (settings, summary) = summarized(m)?;
    json_of(m, &settings, &summary)
}

fn json_of(m: &Merged, settings: &LoadSettings, summary: &stats::load::LoadSummary) -> Result<MergedJson> {
    let load: serde_json::Value = serde_json::from_str(&crate::report::load::json(
        settings,
        summary,
        m.run.server_version.as_deref(),
        m.run.tls.as_ref(),
        m.run.interrupted,
    ))?;
    let first = m.rows.iter().filter_map(|r| r.started_at_us).min();
    Ok(MergedJson {
        id: m.id,
        name: m.name.clone(),
        status: m.status.clone(),
        workers: m.workers,
        transactions: summary.transactions,
        failed_transactions: summary.failed_transactions,
        tps: summary.tps,
        latency_p50_ms: summary.latency.as_ref().map(|l| l.p50_ns as f64 / 1e6),
        latency_p99_ms: summary.latency.as_ref().map(|l| l.p99_ns as f64 / 1e6),
        start_skew_ms: m.start_skew_ms,
        per_worker: m
            .rows
            .iter()
            .map(|r| WorkerJson {
                worker: r.worker,
                host: r.host.clone(),
                status: r.status.clone(),
                transactions: r
                    .result
                    .as_ref()
                    .and_then(|v| v.get("transactions"))
                    .and_then(|t| t.as_u64()),
                clock_offset_ms: r.clock_offset_us.map(|o| o as f64 / 1e3),
                clock_rtt_ms: r.clock_rtt_us.map(|o| o as f64 / 1e3),
                start_after_first_ms: r.started_at_us.zip(first).map(|(s, f)| (s - f) as f64 / 1e3),
            })
            .collect(),
        missing: m
            .missing
            .iter()
            .map(|(w, why)| MissingJson {
                worker: *w,
                why: why.clone(),
            })
            .collect(),
        load,
    })
}

/// The merged run in text: the workers, then the load report of them all.
pub fn text(m: &Merged) -> Result<String> {
    let (settings, summary) = summarized(m)?;
    let j = json_of(m, &settings, &summary)?;
    let mut o = format!(
        "run {} ({}): load from {} workers · status {} · start skew {}\n",
        m.name,
        m.id,
        m.workers,
        m.status,
        j.start_skew_ms
            .map(|s| format!("{s:.2} ms"))
            .unwrap_or_else(|| "not measured (fewer than two workers started)".into())
    );
    o.push_str(&format!(
        "{:>6}  {:<20}  {:<11}  {:>12}  {:>18}  {:>14}\n",
        "worker", "host", "status", "transactions", "clock offset (rtt)", "start after 1st"
    ));
    let ms = |v: Option<f64>, p: usize| v.map(|v| format!("{v:.p$} ms")).unwrap_or_else(|| "-".into());
    for w in &j.per_worker {
        o.push_str(&format!(
            "{:>6}  {:<20}  {:<11}  {:>12}  {:>18}  {:>14}\n",
            w.worker,
            w.host,
            w.status,
            w.transactions
                .map(|t| t.to_string())
                .unwrap_or_else(|| "-".into()),
            format!("{} ({})", ms(w.clock_offset_ms, 3), ms(w.clock_rtt_ms, 3)),
            ms(w.start_after_first_ms, 2),
        ));
    }
    for miss in &j.missing {
        o.push_str(&format!(
            "worker {} is left out of the merged figures: {}\n",
            miss.worker, miss.why
        ));
    }
    o.push_str(
        "merged: counts add up; latency percentiles come from the workers' HDR histograms added together \
         (exact, never averaged); tps is over the span from the first worker's measured start to the last \
         one's end; server, pooler and machine CPU are the first worker's reading.\n\n",
    );
    o.push_str(&crate::report::load::text(
        &settings,
        &summary,
        m.run.server_version.as_deref(),
        m.run.interrupted,
        true,
    ));
    Ok(o)
}

//! One repetition of a trace cell: the whole trace replayed through the cell's path at
//! the recorded pace, capped by the suite's duration (through replay's client-side pool
//! for a `connection = "pool"` cell), and its figures per request and per second, with
//! how faithfully it kept the schedule.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};

use super::check::{pool_settings, shape_figure, trace_of};
use super::prediction::predicted_figures;
use super::traces::{trace_for, Traces};
use crate::experiment::suite::Suite;
use crate::options;
use crate::options::cell::Settings;
use crate::proto::Endpoint;
use crate::replay::{self, Schedule, Speed};

/// One repetition's figures and its histogram of request times (ns).
pub type Replayed = (BTreeMap<String, f64>, hdrhistogram::Histogram<u64>);

/// One repetition of a trace cell: the whole trace replayed on `endpoint` at the
/// recorded pace, stopped at the suite's `duration` when it runs longer (or by Ctrl-C,
/// `stop`).
pub async fn measure(
    suite: &Suite,
    s: &Settings,
    endpoint: &Endpoint,
    traces: &Traces,
    netns: Option<std::sync::Arc<std::fs::File>>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Result<Replayed> {
    let file = trace_of(s).ok_or_else(|| anyhow!("the cell has no trace workload"))?;
    let trace = trace_for(traces, file)?;
    // The replay's threads (as `replay -j`): the cell's `threads`, else one per core.
    let threads = match s.get("threads") {
        Some(v) => options::parse_threads(v).map_err(|e| anyhow!("setting threads: {e}"))?,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let (cap_tx, cap_rx) = tokio::sync::watch::channel(false);
    let cap = suite.duration.unwrap_or(Duration::MAX);
    let mut outer = stop;
    let capper = tokio::spawn(async move {
        tokio::select! {
            _ = outer.wait_for(|s| *s) => {}
            _ = tokio::time::sleep(cap) => {}
        }
        let _ = cap_tx.send(true);
    });
    let mut schedule = Schedule {
        sessions: trace.sessions.clone(),
        ..Schedule::default()
    };
    let settings = replay::Settings {
        speed: Speed::Factor(1.0),
        progress: None,
        threads,
        log: None,
        live: None,
        pool: pool_settings(s)?,
        netns,
    };
    let run = replay::run(&mut schedule, endpoint, settings, cap_rx).await;
    capper.abort();
    let mut f = figures(&run)?;
    for (i, t) in &run.tally.shapes {
        if let (Some(id), true) = (trace.shape_ids().get(*i as usize), t.count > 0) {
            f.insert(shape_figure(id), t.sum_ns as f64 / t.count as f64 / 1e6);
        }
    }
    predicted_figures(&mut f, &trace, s)?;
    Ok((f, run.tally.response.clone()))
}

/// A replay's figures: per second, per request, and how faithfully it kept the schedule.
fn figures(run: &replay::Run) -> Result<BTreeMap<String, f64>> {
    let t = &run.tally;
    let Some(lat) = crate::stats::load::latency(&t.response, 1) else {
        bail!(
            "no request was answered{}",
            t.connect_errors
                .keys()
                .chain(t.lost.keys())
                .next()
                .map(|e| format!("; the first error: {e}"))
                .unwrap_or_default()
        );
    };
    let elapsed_s = run.elapsed.as_secs_f64();
    let ms = |ns: f64| ns / 1e6;
    let mut f = BTreeMap::new();
    f.insert("tps".into(), t.transactions as f64 / elapsed_s);
    f.insert("requests_per_s".into(), t.sent as f64 / elapsed_s);
    f.insert("latency_mean_ms".into(), ms(lat.mean_ns));
    f.insert("latency_p50_ms".into(), ms(lat.p50_ns as f64));
    f.insert("latency_p95_ms".into(), ms(lat.p95_ns as f64));
    f.insert("latency_p99_ms".into(), ms(lat.p99_ns as f64));
    f.insert("latency_max_ms".into(), ms(lat.max_ns as f64));
    f.insert("requests".into(), t.sent as f64);
    f.insert("transactions".into(), t.transactions as f64);
    f.insert("connects".into(), t.connects as f64);
    f.insert("failed_requests".into(), t.failures.values().sum::<u64>() as f64);
    f.insert("failed_now_not_then".into(), t.failed_now_not_then as f64);
    f.insert("requests_not_sent".into(), t.not_sent as f64);
    f.insert("sessions_not_connected".into(), (t.sessions - t.connected) as f64);
    f.insert("replay_s".into(), elapsed_s);
    // Cut by the suite's duration (Ctrl-C is not saved at all).
    f.insert("replay_capped".into(), f64::from(u8::from(run.interrupted)));
    if let Some(lag) = crate::stats::load::latency(&t.lag, 1) {
        f.insert("lag_p99_ms".into(), ms(lag.p99_ns as f64));
    }
    // Measured per request (not lag + latency: two histograms' percentiles do not add).
    if let Some(whole) = crate::stats::load::latency(&t.from_intended, 1) {
        f.insert("intended_to_answer_mean_ms".into(), ms(whole.mean_ns));
        f.insert("intended_to_answer_p50_ms".into(), ms(whole.p50_ns as f64));
        f.insert("intended_to_answer_p99_ms".into(), ms(whole.p99_ns as f64));
    }
    if t.sent > 0 {
        f.insert("on_time_share".into(), t.on_time as f64 / t.sent as f64);
    }
    Ok(f)
}

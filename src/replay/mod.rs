//! `connbench replay`: a trace from `connbench record` done again on a target,
//! each recorded session on its own connection at its recorded time, each request with
//! its recorded statements and values, and how faithfully the schedule was kept.
//!
//! - [`schedule`]: the trace read into sessions and what to send; what cannot be
//!   replayed as recorded is refused there, before anything connects. [`mysql`]: a
//!   MySQL request's command packet, its values encoded back into the binary protocol.
//! - [`preflight`]: the relations the trace uses that the target lacks, one line each.
//! - [`playback`]: the clock and the sessions (open loop, lag from the intended send time);
//!   [`conn`]: a session's connection and its per-request wire calls, either engine;
//!   [`pooled`]: `--pool`, the sessions' transactions through a client-side pool.
//! - [`tally`]: what is counted, per session, merged at the end; [`txlog`]: each
//!   session's transactions in `-l`'s log (pgbench's format, load's writer).
//! - [`cancel`]: a recorded CancelRequest sent again, at its time, to the replayed
//!   connection of the session it cancelled.
//! - [`summary`]: the counts beside the recording's, as the report prints them.
//! - [`without`]: `--without`, the schedule without housekeeping or named statements.

pub mod cancel;
pub mod conn;
pub mod kill;
pub mod playback;
pub mod mysql;
pub mod pooled;
pub mod preflight;
pub mod schedule;
pub mod shapes;
pub mod stop;
pub mod summary;
pub mod tally;
pub mod txlog;
pub mod without;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::sync::watch;

use crate::load::log::LogFiles;
use crate::load::measurements::Interval;
use crate::proto::{self, Endpoint, PhaseCursor};
use crate::targets::Engine;
pub use pooled::PoolSettings;
pub use schedule::Schedule;
pub use summary::Summary;

/// How the recorded times are kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Speed {
    /// Every offset divided by this (2 = twice as fast).
    Factor(f64),
    /// No schedule: every session at once, each request when the previous answer is in.
    Max,
}

impl Speed {
    /// `max`, or a positive factor (`1`, `2`, `0.5`).
    pub fn parse(s: &str) -> Result<Speed, String> {
        if s.eq_ignore_ascii_case("max") {
            return Ok(Speed::Max);
        }
        match s.parse::<f64>() {
            Ok(f) if f.is_finite() && f > 0.0 => Ok(Speed::Factor(f)),
            _ => Err(format!(
                "--speed {s:?}: give a factor above 0 (1 is the recorded pace, 2 twice as fast) or max"
            )),
        }
    }
}

/// A replay's result: its counts, how long it ran, whether Ctrl-C ended it.
#[derive(Debug)]
pub struct Run {
    pub tally: tally::Tally,
    /// The schedule's start (after a pool was filled) to the last session's end.
    pub elapsed: Duration,
    pub interrupted: bool,
    /// `--pool`, as it ran.
    pub pool: Option<PoolSettings>,
    /// The threads asked for (`-j`), which a pool's split reads.
    pub threads: usize,
    /// `--pool`: requests that set session state a pool does not keep, by kind.
    pub session_state: BTreeMap<&'static str, u64>,
    /// The recorded CancelRequests, replayed or not.
    pub cancels: cancel::Counts,
}

/// Refuses the replay when the target lacks relations the recording used (one line
/// each); connects once with the target's own credentials.
pub async fn check_relations(ep: &Endpoint, schedule: &Schedule) -> Result<()> {
    let cursor = PhaseCursor::default();
    let (session, _) = proto::connect(ep, &cursor)
        .await
        .context("pre-flight: connecting to the target")?;
    let (ran, creates) = (&schedule.ran_ok, &schedule.creates);
    let missing = match (session, schedule.engine()) {
        (proto::Session::Postgres(mut s), Engine::Postgres) => {
            let m = preflight::missing_relations(&mut s, ran, creates).await;
            s.close().await;
            m
        }
        (proto::Session::Mysql(mut s), Engine::Mysql) => {
            let m = preflight::missing_tables(&mut s, ran, creates).await;
            s.close().await;
            m
        }
        (session, engine) => {
            session.close().await;
            bail!("the target speaks another engine's protocol than the trace ({engine:?})");
        }
    }
    .context("pre-flight: parsing the recorded statements")?;
    if missing.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = missing
        .iter()
        .map(|m| {
            format!(
                "  relation {:?} does not exist (used by {} statement(s))",
                m.relation, m.statements
            )
        })
        .collect();
    bail!(
        "the target lacks {} relation(s) the recording used; nothing was replayed:\n{}\n\
         point --target at the application's database, or create them first (for pgbench's \
         tables: pgbench -i)",
        missing.len(),
        lines.join("\n")
    )
}

/// How a replay runs, besides its schedule and target.
#[derive(Clone)]
pub struct Settings {
    pub speed: Speed,
    /// Print a progress line to stderr this often.
    pub progress: Option<Duration>,
    pub threads: usize,
    /// `-l`: the log files, one per thread, created before anything connects.
    pub log: Option<LogFiles>,
    /// `--metrics-listen`: handed every period's figures (each `progress`, else each
    /// second), and the last, partial period's when the replay ends.
    pub live: Option<Live>,
    /// `--pool`: the sessions' transactions through a client-side pool of this size.
    pub pool: Option<PoolSettings>,
    /// A suite cell's `netpath = "bridge"`: the network namespace the replay's threads
    /// enter before they connect (`None`: the host's network).
    pub netns: Option<Arc<std::fs::File>>,
}

/// Where the live periods go: the metrics endpoint (above this stage).
pub type Live = Arc<dyn Fn(&Interval) + Send + Sync>;

/// Takes every thread's period, merged.
fn take_periods(periods: &[txlog::Period]) -> Interval {
    let mut sum = Interval::new();
    for p in periods {
        let p = std::mem::take(&mut *p.lock().unwrap_or_else(|e| e.into_inner()));
        sum.transactions += p.transactions;
        sum.failures += p.failures;
        sum.connects += p.connects;
        sum.connect_ns += p.connect_ns;
        for (k, n) in p.failure_kinds {
            *sum.failure_kinds.entry(k).or_default() += n;
        }
        let _ = sum.latency_us.add(&p.latency_us);
        sum.lag_max_us = sum.lag_max_us.max(p.lag_max_us);
    }
    sum
}

/// Replays `schedule`'s sessions on `ep` until done or `stop`.
pub async fn run(
    schedule: &mut Schedule,
    ep: &Endpoint,
    settings: Settings,
    stop: watch::Receiver<bool>,
) -> Run {
    let Settings {
        speed,
        progress,
        threads,
        log,
        live,
        pool,
        netns,
    } = settings;
    let periods: Option<Vec<txlog::Period>> = live
        .as_ref()
        .map(|_| (0..threads).map(|_| Default::default()).collect());
    let sessions = std::mem::take(&mut schedule.sessions);
    // Never more threads than sessions (nor, with a pool, than its connections: the
    // playback's split).
    let threads = threads.clamp(1, sessions.len().max(1));
    let session_state = match pool {
        Some(_) => pooled::session_state(&sessions),
        None => BTreeMap::new(),
    };
    let total: u64 = sessions.iter().map(|s| s.requests.len() as u64).sum();
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let every = progress.or(live.as_ref().map(|_| Duration::from_secs(1)));
    let ticker = every.map(|every| {
        let (done, live, periods) = (done.clone(), live.clone(), periods.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            loop {
                tick.tick().await;
                if progress.is_some() {
                    eprintln!(
                        "replay: {:.0} s, {} of {total} requests answered",
                        start.elapsed().as_secs_f64(),
                        done.load(Ordering::Relaxed)
                    );
                }
                if let (Some(live), Some(p)) = (&live, &periods) {
                    live(&take_periods(p));
                }
            }
        })
    });
    let out = playback::Outputs {
        log,
        periods: periods.clone(),
        netns,
    };
    let spread = playback::Threads { count: threads, pool };
    let plans = playback::Plans {
        sessions,
        cancels: std::mem::take(&mut schedule.cancels),
    };
    let (tally, started, cancels) = playback::run(plans, ep, speed, stop.clone(), done, spread, out).await;
    if let Some(t) = ticker {
        t.abort();
    }
    if let (Some(live), Some(p)) = (&live, &periods) {
        live(&take_periods(p));
    }
    Run {
        tally,
        elapsed: started.elapsed(),
        interrupted: *stop.borrow(),
        pool,
        threads,
        session_state,
        cancels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speed_is_a_positive_factor_or_max() {
        assert_eq!(Speed::parse("max"), Ok(Speed::Max));
        assert_eq!(Speed::parse("2"), Ok(Speed::Factor(2.0)));
        assert_eq!(Speed::parse("0.5"), Ok(Speed::Factor(0.5)));
        for bad in ["0", "-1", "fast", "inf", "NaN"] {
            assert!(Speed::parse(bad).is_err(), "{bad}");
        }
    }
}

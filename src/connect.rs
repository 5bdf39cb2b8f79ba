//! The connect measurement: open connections one after another to each target,
//! interleaved, and keep every phase timeline as plain data.
//!
//! Order: every round visits every target once, starting one target further along each
//! round (A B C, B C A, C A B, ...), so drift on the machine (other load, caches, the
//! server's own housekeeping) spreads evenly across targets and no target always follows
//! the same neighbour. The first `warmup` rounds are kept apart: the first connection
//! after a server starts is slower (PostgreSQL rebuilds its relation-cache init file),
//! and users want to see that cold cost, just not mixed into the warm figures.
//!
//! Closing each connection (Terminate) happens outside the timed region. A failure is
//! counted by kind with one example kept; a target that has not succeeded once in its
//! first [`GIVE_UP_AFTER`] attempts is dropped from the rest of the run, so a wrong
//! password or an unreachable host ends the run quickly with its reason; one whose first
//! attempt runs into the connect bound is dropped at once, so a silent peer costs a run
//! one bound, not one per attempt.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::proto::{self, Endpoint};
use crate::proto::{ConnectError, ErrorKind, PhaseCursor, Timeline};

/// Attempts without a single success after which a target is given up.
pub const GIVE_UP_AFTER: usize = 3;

/// What to measure.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct ConnectSettings {
    /// Measured connections per target.
    pub samples: usize,
    /// Connections per target before measuring (reported apart).
    pub warmup: usize,
    /// A query to run on each connection as its `query` phase.
    pub query: Option<String>,
    /// Pause between one connect and the next.
    #[serde(rename = "interval_ms", serialize_with = "crate::units::ser_duration_ms")]
    #[schemars(with = "f64")]
    pub interval: Duration,
}

/// One target to measure, with what the report should say about it.
#[derive(Debug, Clone)]
pub struct Subject {
    pub endpoint: Endpoint,
    pub description: Option<String>,
}

/// Failures of one kind at one target.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FailureCount {
    pub count: u64,
    /// The first such error, in full.
    pub example: String,
}

/// Everything measured at one target.
#[derive(Debug, Clone)]
pub struct TargetSamples {
    pub name: String,
    pub conninfo: String,
    pub transport: &'static str,
    pub description: Option<String>,
    pub server_version: Option<String>,
    /// Warm-up connections, in order (the first is the cold one).
    pub warmup: Vec<Timeline>,
    /// Measured connections.
    pub samples: Vec<Timeline>,
    /// Attempts that failed, by `phase:kind` key.
    pub failures: BTreeMap<String, FailureCount>,
    /// Why the target was dropped from the run, when it was.
    pub gave_up: Option<String>,
    attempts: usize,
}

impl TargetSamples {
    pub fn failure_total(&self) -> u64 {
        self.failures.values().map(|f| f.count).sum()
    }

    /// The first error seen, when every attempt failed.
    pub fn first_error(&self) -> Option<&str> {
        if !self.samples.is_empty() || !self.warmup.is_empty() {
            return None;
        }
        self.failures.values().next().map(|f| f.example.as_str())
    }
}

/// A whole connect run.
#[derive(Debug, Clone)]
pub struct ConnectRun {
    pub settings: ConnectSettings,
    pub targets: Vec<TargetSamples>,
    /// True when Ctrl-C ended the run early.
    pub interrupted: bool,
    pub wall: Duration,
}

/// Measures `subjects`, interleaved, until done or `stop` turns true.
pub async fn measure(
    subjects: &[Subject],
    settings: &ConnectSettings,
    mut stop: watch::Receiver<bool>,
    mut progress: impl FnMut(usize, usize),
) -> ConnectRun {
    let started = Instant::now();
    let mut targets: Vec<TargetSamples> = subjects
        .iter()
        .map(|s| TargetSamples {
            name: s.endpoint.target.name(),
            conninfo: s.endpoint.target.conninfo(),
            transport: s.endpoint.target.transport(),
            description: s.description.clone(),
            server_version: None,
            warmup: Vec::with_capacity(settings.warmup),
            samples: Vec::with_capacity(settings.samples),
            failures: BTreeMap::new(),
            gave_up: None,
            attempts: 0,
        })
        .collect();
    let rounds = settings.warmup + settings.samples;
    let total = rounds * subjects.len();
    let mut done = 0;
    let mut interrupted = false;
    'rounds: for round in 0..rounds {
        for k in 0..subjects.len() {
            let i = (round + k) % subjects.len();
            if targets[i].gave_up.is_some() {
                done += 1;
                continue;
            }
            if *stop.borrow() {
                interrupted = true;
                break 'rounds;
            }
            let outcome = tokio::select! {
                r = connect_once(&subjects[i].endpoint, settings.query.as_deref()) => r,
                _ = stop.changed() => { interrupted = true; break 'rounds; }
            };
            record(&mut targets[i], outcome, round < settings.warmup);
            done += 1;
            progress(done, total);
            if !settings.interval.is_zero() {
                tokio::select! {
                    _ = tokio::time::sleep(settings.interval) => {}
                    _ = stop.changed() => { interrupted = true; break 'rounds; }
                }
            }
        }
    }
    ConnectRun {
        settings: settings.clone(),
        targets,
        interrupted,
        wall: started.elapsed(),
    }
}

fn record(t: &mut TargetSamples, outcome: Result<(Timeline, Option<String>), ConnectError>, warm: bool) {
    t.attempts += 1;
    match outcome {
        Ok((timeline, version)) => {
            if t.server_version.is_none() {
                t.server_version = version;
            }
            if warm {
                t.warmup.push(timeline);
            } else {
                t.samples.push(timeline);
            }
        }
        Err(e) => {
            // A connect that ran into its time bound before any success would do so
            // again: one bound is what a whole run waits for a silent peer (a server of
            // another protocol, a proxy that never answers), not one per attempt.
            let timed_out = matches!(e.kind, ErrorKind::Timeout(_) | ErrorKind::Bound(_));
            let unproven = t.samples.is_empty() && t.warmup.is_empty();
            t.failures
                .entry(e.key())
                .and_modify(|f| f.count += 1)
                .or_insert_with(|| FailureCount {
                    count: 1,
                    example: e.to_string(),
                });
            if timed_out && unproven {
                t.gave_up = Some(format!(
                    "its first {} timed out, and no connection had succeeded; a peer that \
                     never answers would time out again",
                    if t.attempts == 1 {
                        "attempt".to_string()
                    } else {
                        format!("{} attempts", t.attempts)
                    }
                ));
            } else if t.attempts >= GIVE_UP_AFTER && unproven {
                t.gave_up = Some(format!(
                    "no connection succeeded in the first {} attempts",
                    t.attempts
                ));
            }
        }
    }
}

/// One timed connect (and query), then an untimed close. The connect timeout, when the
/// target has one, covers the whole set-up as libpq's does.
pub async fn connect_once(
    ep: &Endpoint,
    query: Option<&str>,
) -> Result<(Timeline, Option<String>), ConnectError> {
    let cursor = PhaseCursor::default();
    let attempt = async {
        match query {
            Some(sql) => proto::connect_and_query(ep, sql, &cursor).await,
            None => proto::connect(ep, &cursor).await,
        }
    };
    let (session, timeline) = attempt.await?;
    let version = session.server_version().map(str::to_string);
    session.close().await;
    Ok((timeline, version))
}

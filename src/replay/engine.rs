//! The replay's clock and sessions: each recorded session on a connection of its own,
//! opened at its recorded offset and closed when the application closed it, each request
//! sent at its recorded offset (divided by `--speed`) from the replay's start, which
//! stands for the first recorded session's open.
//!
//! Open loop, as load's `-R`: a request's intended send time comes from the schedule,
//! not from the previous response, so a session that fell behind (its previous answer
//! came late) sends at once, and its **lag** (actual send − intended send) is measured.
//! A session waits for each answer before its next request, so a request the application
//! pipelined (sent before the previous answer) goes after it, and shows as lag. Sleeps
//! are on [`PreciseTimer`] (tokio's timer wheel is 1 ms). With no schedule
//! (`--speed max`) every session starts at once and each request goes as soon as the
//! previous answer is in: lag is not measured then.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::conn::Conn;
use super::schedule::{ends_transaction, SessionPlan};
use super::tally::{Lag, Tally};
use super::txlog::{Period, Step, Transactions};
use super::Speed;
use crate::load::log::{Clock, Columns, LogFiles, TxLog};
use crate::net::timer::PreciseTimer;
use crate::proto::{self, Endpoint, PhaseCursor};
use crate::trace::event::TxStatus;

/// Runs every session of `sessions` against `ep` on `threads` threads of their own (each
/// a current-thread runtime, as load's workers: one thread cannot keep pace with a
/// recording made by a multi-threaded application on a busy server), the sessions dealt
/// round-robin in order of their opens; returns the merged counts.
pub async fn run(
    sessions: Vec<SessionPlan>,
    ep: &Endpoint,
    speed: Speed,
    stop: watch::Receiver<bool>,
    done: Arc<AtomicU64>,
    threads: usize,
    out: Outputs,
) -> Tally {
    let start = Instant::now();
    // The schedule starts at the first session's open, not at the recorder's start
    // (which may have waited for the application).
    let origin_ns = sessions.iter().map(|s| s.open_ns).min().unwrap_or(0);
    let threads = threads.clamp(1, sessions.len().max(1));
    let mut groups: Vec<Vec<(usize, SessionPlan)>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, plan) in sessions.into_iter().enumerate() {
        groups[i % threads].push((i, plan));
    }
    // One reading of both clocks for every thread's log.
    let clock = Clock::new(start);
    let workers: Vec<_> = groups
        .into_iter()
        .enumerate()
        .map(|(thread, group)| {
            let r = Replayer {
                speed,
                start,
                origin_ns,
                stop: stop.clone(),
                done: done.clone(),
            };
            let ep = ep.clone();
            let live = out.periods.as_ref().and_then(|p| p.get(thread).cloned());
            let log = out.log.as_ref().map(|files| {
                let columns = Columns {
                    lag: matches!(speed, Speed::Factor(_)),
                    ..Columns::default()
                };
                files.writer(thread, columns, clock, thread as u64 + 1)
            });
            std::thread::spawn(move || worker(group, r, ep, log.flatten(), live))
        })
        .collect();
    // Joined off this runtime, which keeps printing progress meanwhile.
    let joined =
        tokio::task::spawn_blocking(move || workers.into_iter().map(|w| w.join()).collect::<Vec<_>>()).await;
    let mut tally = Tally::default();
    match joined {
        Ok(results) => {
            for r in results {
                match r {
                    Ok(t) => tally.merge(t),
                    Err(_) => *tally.lost.entry("replay thread panicked".into()).or_default() += 1,
                }
            }
        }
        Err(e) => *tally.lost.entry(format!("replay threads: {e}")).or_default() += 1,
    }
    tally
}

/// One thread's sessions, each a task on the thread's own runtime, and its log's writer
/// (flushed when they end, Ctrl-C included; a write error is said, the figures reported).
fn worker(
    group: Vec<(usize, SessionPlan)>,
    r: Replayer,
    ep: Endpoint,
    log: Option<TxLog>,
    live: Option<Period>,
) -> Tally {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            let mut t = Tally::default();
            *t.lost.entry(format!("replay thread's runtime: {e}")).or_default() += group.len() as u64;
            return t;
        }
    };
    let log = log.map(|l| Rc::new(RefCell::new(l)));
    let local = tokio::task::LocalSet::new();
    let tally = local.block_on(&rt, async {
        let mut tasks = tokio::task::JoinSet::new();
        for (i, plan) in group {
            let (r, ep) = (r.clone(), ep.clone());
            let tx =
                (log.is_some() || live.is_some()).then(|| Transactions::new(i, log.clone(), live.clone()));
            tasks.spawn_local(async move { r.session(plan, &ep, tx).await });
        }
        let mut tally = Tally::default();
        while let Some(t) = tasks.join_next().await {
            match t {
                Ok(t) => tally.merge(t),
                Err(e) => {
                    *tally.lost.entry(format!("replay task: {e}")).or_default() += 1;
                }
            }
        }
        tally
    });
    drop(local);
    if let Some(log) = log.and_then(|l| Rc::try_unwrap(l).ok()) {
        if let Err(e) = log.into_inner().finish() {
            eprintln!("warning: {e:#}");
        }
    }
    tally
}

/// What the sessions write besides their counts: `-l`'s files, and one live period per
/// thread for `--metrics-listen`.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    pub log: Option<LogFiles>,
    pub periods: Option<Vec<Period>>,
}

/// One session's view of the schedule.
#[derive(Clone)]
struct Replayer {
    speed: Speed,
    start: Instant,
    /// The recording's offset that falls on `start`.
    origin_ns: u64,
    stop: watch::Receiver<bool>,
    /// Requests answered so far, for the progress line.
    done: Arc<AtomicU64>,
}

impl Replayer {
    /// The instant `offset_ns` of the recording falls on now.
    fn at(&self, offset_ns: u64) -> Option<Instant> {
        match self.speed {
            Speed::Max => None,
            Speed::Factor(f) => {
                let ns = offset_ns.saturating_sub(self.origin_ns) as f64 / f;
                Some(self.start + Duration::from_nanos(ns as u64))
            }
        }
    }

    /// The recorded think time at this pace (none with no schedule: as fast as the
    /// server allows).
    fn think(&self, think_ns: Option<u64>) -> Duration {
        match (self.speed, think_ns) {
            (Speed::Factor(f), Some(ns)) => Duration::from_nanos((ns as f64 / f) as u64),
            _ => Duration::ZERO,
        }
    }

    /// Sleeps until `at` (at once with no schedule); `false` when stopped first.
    async fn sleep(&mut self, timer: &mut Option<PreciseTimer>, at: Option<Instant>) -> bool {
        let Some(at) = at else { return !*self.stop.borrow() };
        let sleep = async {
            match timer {
                Some(t) => {
                    let _ = t.sleep_until(at).await;
                }
                None => tokio::time::sleep_until(at.into()).await,
            }
        };
        or_stop(&mut self.stop, sleep).await.is_some()
    }

    async fn session(mut self, plan: SessionPlan, ep: &Endpoint, mut tx: Option<Transactions>) -> Tally {
        let total = plan.requests.len() as u64;
        // A timer per session, as load's clients have; tokio's when the kernel refuses.
        let mut timer = PreciseTimer::new().ok();
        let opened = self.sleep(&mut timer, self.at(plan.open_ns)).await;
        // Made once the session opens: a session waiting for its time holds no
        // histograms, so a trace of many short sessions replays in the memory of the
        // sessions open at once.
        let mut tally = Tally {
            sessions: 1,
            ..Tally::default()
        };
        if !opened {
            tally.not_sent = total;
            return tally;
        }
        let cursor = PhaseCursor::default();
        let began = Instant::now();
        let mut s = match or_stop(&mut self.stop, proto::connect(ep, &cursor)).await {
            None => {
                tally.not_sent = total;
                return tally;
            }
            Some(Err(e)) => {
                let key = e.to_string();
                if let Some(tx) = tx.as_mut() {
                    tx.connected(0, Some(&key));
                }
                *tally.connect_errors.entry(key).or_default() += 1;
                tally.not_sent = total;
                return tally;
            }
            Some(Ok((s, _))) => Conn::new(s),
        };
        let connect_ns = began.elapsed().as_nanos() as u64;
        if let Some(tx) = tx.as_mut() {
            tx.connected(connect_ns, None);
        }
        tally.connected = 1;
        tally.connect_ns = connect_ns;
        // The open transaction's first send.
        let mut began_tx: Option<Instant> = None;
        let mut status = TxStatus::Idle;
        // The connect's end, then each answer's arrival: the session can send its next
        // request once the application's recorded think time after it has passed.
        let mut ready = Instant::now();
        for (k, r) in plan.requests.iter().enumerate() {
            let intended = self.at(plan.open_ns + r.at_ns);
            // A session behind its schedule still takes the application's own time
            // after each answer (its code between two requests: a password hash inside
            // a transaction, a template rendered): sending at once would replay a faster
            // application than the one recorded.
            let could = ready + self.think(r.think_ns);
            let due = intended.map(|i| i.max(could));
            if !self.sleep(&mut timer, due).await {
                tally.not_sent += total - k as u64;
                break;
            }
            let sent = Instant::now();
            let lag = intended.map(|i| Lag::of(i, could, sent));
            let answer = or_stop(&mut self.stop, s.exchange(&r.wire)).await;
            let a = match answer {
                None => {
                    tally.not_sent += total - k as u64;
                    break;
                }
                Some(Err(e)) => {
                    *tally.lost.entry(e.to_string()).or_default() += 1;
                    tally.not_sent += total - k as u64;
                    break;
                }
                Some(Ok(a)) => a,
            };
            ready = Instant::now();
            tally.sent(lag);
            let now = a.error.as_ref().map(|(c, m)| (c.as_str(), m.as_str()));
            let took = a.took.map(|t| t.as_nanos() as u64);
            tally.answered(r.statement, took, now, r.seen.error.as_deref());
            // As `connbench trace` counts one: from a request that executes sent while
            // idle to the answer that leaves the session idle again.
            if status == TxStatus::Idle && r.executes && began_tx.is_none() {
                began_tx = Some(sent);
            }
            let ended = a.status == TxStatus::Idle && ends_transaction(status, r.executes);
            if ended {
                let first = began_tx.take().unwrap_or(sent);
                tally.transaction(ready.saturating_duration_since(first).as_nanos() as u64);
            }
            if let Some(tx) = tx.as_mut() {
                tx.step(&Step {
                    intended,
                    sent,
                    lag_ns: lag.map_or(0, |l| l.waiting_ns + l.send_delay_ns),
                    error: now.map(|(code, _)| code),
                    answered: ready,
                    idle: a.status == TxStatus::Idle,
                    ended,
                });
            }
            status = a.status;
            self.done.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(close) = plan.close_ns {
            // The application's close, unless stopped: then at once.
            self.sleep(&mut timer, self.at(plan.open_ns + close)).await;
        }
        s.close().await;
        tally
    }
}

/// `f`, unless `stop` turns true first.
async fn or_stop<F: Future>(stop: &mut watch::Receiver<bool>, f: F) -> Option<F::Output> {
    if *stop.borrow() {
        return None;
    }
    tokio::select! {
        v = f => Some(v),
        // A sender gone can no longer stop the replay: wait for `f` then.
        true = async { stop.wait_for(|s| *s).await.is_ok() } => None,
    }
}

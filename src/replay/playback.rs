//! The replay's clock and sessions: each recorded session on a connection of its own,
//! opened at its recorded offset and closed when the application closed it, each request
//! sent at its recorded offset (divided by `--speed`) from the replay's start, which
//! stands for the first recorded session's open.
//!
//! Open loop, as load's `-R`: a request's intended send time comes from the schedule,
//! not from the previous response, so a session that fell behind (its previous answer
//! came late) sends at once, and its **lag** (actual send − intended send) is measured.
//! A session waits for each answer before its next request, except where the application
//! did not: a PostgreSQL group it pipelined (sent before the previous answer) goes at its
//! time before that answer is read, so a replay at distance pays the round trips the
//! application paid, no more. Sleeps
//! are on [`PreciseTimer`] (tokio's timer wheel is 1 ms). With no schedule
//! (`--speed max`) every session starts at once and each request goes as soon as the
//! previous answer is in: lag is not measured then.
//!
//! With `--pool` ([`super::pooled`]) a session opens no connection of its own: each of
//! its transactions borrows one of its thread's pool when its first request is due, and a
//! request's lag has a third part, the wait for the pool. The pools are filled before
//! the clock starts (every thread's, then one start for all).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use tokio::sync::watch;

use super::cancel::{self, CancelPlan, Keys};
use super::conn::{Answer, Conn};
use super::kill;
use super::pooled::{Borrower, Namer, PoolSettings, ThreadPool};
use super::schedule::{Planned, SessionPlan, Wire};
use super::stop::Stop;
use super::tally::{Lag, Tally};
use super::txlog::{Period, Step, Transactions};
use super::Speed;
use crate::host::{cpu_between, thread_usage};
use crate::load::log::{Clock, Columns, LogFiles, TxLog};
use crate::net::timer::PreciseTimer;
use crate::proto::postgres::Frontend;
use crate::proto::{self, ConnectError, Endpoint, PhaseCursor};
use connbench_trace::event::TxStatus;
use connbench_trace::executions;
use connbench_trace::transaction::Boundaries;

/// Runs every session of `sessions` against `ep` on `threads` threads of their own (each
/// a current-thread runtime, as load's workers: one thread cannot keep pace with a
/// recording made by a multi-threaded application on a busy server), the sessions dealt
/// round-robin in order of their opens; returns the merged counts and the instant the
/// schedule started (after the pools were filled).
pub async fn run(
    plans: Plans,
    ep: &Endpoint,
    speed: Speed,
    stop: watch::Receiver<bool>,
    done: Arc<AtomicU64>,
    threads: Threads,
    out: Outputs,
) -> (Tally, Instant, cancel::Counts) {
    let Plans { sessions, cancels } = plans;
    // MySQL's KILLs name their targets' connections as the cancels do (super::kill).
    let kills = sessions.iter().flat_map(|s| &s.requests).filter_map(|p| p.kill);
    let kills_recorded = kills.clone().count() as u64;
    let keys = Keys::for_plans(&cancels, kills.filter_map(|k| k.target.ok()).collect::<Vec<_>>());
    let start = Instant::now();
    // The schedule starts at the first session's open, not at the recorder's start
    // (which may have waited for the application).
    let origin_ns = sessions.iter().map(|s| s.open_ns).min().unwrap_or(0);
    let mut count = threads.count.clamp(1, sessions.len().max(1));
    // A pool's connections split over at most as many threads.
    let sizes = threads.pool.map(|p| p.split(count));
    if let Some(sizes) = &sizes {
        count = sizes.len();
    }
    let namer = Namer::for_sessions(&sessions);
    let mut groups: Vec<Vec<(usize, SessionPlan)>> = (0..count).map(|_| Vec::new()).collect();
    for (i, plan) in sessions.into_iter().enumerate() {
        groups[i % count].push((i, plan));
    }
    // Every thread fills its pool, then all take one start.
    let (started, started_rx) = watch::channel(None);
    let gate = Arc::new(Gate {
        stop,
        filled: Barrier::new(count),
        start: OnceLock::new(),
        started,
    });
    // The cancels wait on this runtime for their times, apart from the sessions' threads.
    let (ended, ended_rx) = watch::channel(false);
    let canceller = {
        let (ep, keys) = (ep.clone(), keys.clone());
        let at = move |start: Instant, offset_ns: u64| schedule_at(speed, start, origin_ns, offset_ns);
        tokio::spawn(async move { cancel::send_all(cancels, &ep, &keys, started_rx, at, ended_rx).await })
    };
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
                // The thread's own view of the stop, which its sessions read (super::stop).
                stop: Stop::default().watch(),
                done: done.clone(),
                keys: keys.clone(),
            };
            let live = out.periods.as_ref().and_then(|p| p.get(thread).cloned());
            let pool = threads.pool.zip(sizes.as_ref()).map(|(p, sizes)| {
                let (ep, namer, live, size) = (ep.clone(), namer.clone(), live.clone(), sizes[thread]);
                move || Rc::new(ThreadPool::new(size, &p, ep, namer, live))
            });
            let log = out.log.as_ref().map(|files| {
                let columns = Columns {
                    lag: matches!(speed, Speed::Factor(_)),
                    ..Columns::default()
                };
                files.writer(thread, columns, clock, thread as u64 + 1)
            });
            let (ep, gate, netns) = (ep.clone(), gate.clone(), out.netns.clone());
            std::thread::spawn(move || {
                // setns moves this thread alone: its connections, a pool's too, start
                // inside the namespace, as load's workers do.
                if let Some(ns) = &netns {
                    if let Err(e) = crate::net::netns::enter(ns) {
                        gate.filled.wait();
                        let mut t = Tally::default();
                        *t.lost
                            .entry(format!("cannot enter the client's network namespace: {e}"))
                            .or_default() += group.len() as u64;
                        return t;
                    }
                }
                worker(group, r, ep, log.flatten(), live, pool, gate)
            })
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
    ended.send_replace(true);
    let mut cancels = canceller.await.unwrap_or_else(|e| cancel::Counts {
        not_replayed: [(format!("the cancels' task: {e}"), 1)].into(),
        ..cancel::Counts::default()
    });
    cancels.merge(cancel::Counts {
        recorded: kills_recorded,
        ..std::mem::take(&mut tally.kills)
    });
    (tally, gate.start.get().copied().unwrap_or(start), cancels)
}

/// What the replay does: the sessions, and the recorded cancels of their queries.
#[derive(Debug, Default)]
pub struct Plans {
    pub sessions: Vec<SessionPlan>,
    pub cancels: Vec<CancelPlan>,
}

/// How many threads, and the pool they split (`--pool`).
#[derive(Debug, Clone, Copy)]
pub struct Threads {
    pub count: usize,
    pub pool: Option<PoolSettings>,
}

/// Where the threads meet once their pools are filled, and the start they take then.
struct Gate {
    /// The replay's stop, which each thread follows from its start (super::stop).
    stop: watch::Receiver<bool>,
    filled: Barrier,
    start: OnceLock<Instant>,
    /// The start, for the cancels' task (on the caller's runtime).
    started: watch::Sender<Option<Instant>>,
}

/// One thread's sessions, polled together on the thread's own runtime, and its log's writer
/// (flushed when they end, Ctrl-C included; a write error is said, the figures reported).
/// With a pool, the pool is made and filled first, and the schedule starts once every
/// thread's is.
fn worker(
    group: Vec<(usize, SessionPlan)>,
    mut r: Replayer,
    ep: Endpoint,
    log: Option<TxLog>,
    live: Option<Period>,
    pool: Option<impl FnOnce() -> Rc<ThreadPool>>,
    gate: Arc<Gate>,
) -> Tally {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let pool = pool.map(|make| make());
    if let (Ok(rt), Some(pool)) = (&rt, &pool) {
        rt.block_on(pool.fill());
    }
    // Waited for whatever happened above: a thread that does not come would hold the
    // others here.
    gate.filled.wait();
    r.start = *gate.start.get_or_init(Instant::now);
    gate.started.send_replace(Some(r.start));
    let before = thread_usage();
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => {
            let mut t = Tally::default();
            *t.lost.entry(format!("replay thread's runtime: {e}")).or_default() += group.len() as u64;
            return t;
        }
    };
    rt.spawn(r.stop.follow(gate.stop.clone()));
    let log = log.map(|l| Rc::new(RefCell::new(l)));
    // The sessions are one future, polled where the runtime blocks: no task per session
    // (a task's wake goes through the runtime's scheduler, a LocalSet's and a JoinSet's
    // on every answer; polled here, it wakes one future of the set).
    let mut tally = rt.block_on(async {
        let mut sessions: FuturesUnordered<_> = group
            .into_iter()
            .map(|(i, plan)| {
                let (r, ep, pool) = (r.clone(), ep.clone(), pool.clone());
                let tx = (log.is_some() || live.is_some())
                    .then(|| Transactions::new(i, log.clone(), live.clone()));
                AssertUnwindSafe(async move { r.session(plan, &ep, tx, pool).await }).catch_unwind()
            })
            .collect();
        let mut tally = Tally::default();
        while let Some(t) = sessions.next().await {
            match t {
                Ok(t) => tally.merge(t),
                Err(_) => *tally.lost.entry("replay session panicked".into()).or_default() += 1,
            }
        }
        if let Some(pool) = &pool {
            pool.close().await;
        }
        tally
    });
    let after = thread_usage();
    tally.cpu = cpu_between(before.cpu, after.cpu);
    if let Some(pool) = &pool {
        let c = pool.counts.borrow();
        tally.connects += c.connects;
        tally.connect_ns += c.connect_ns;
        tally.prepared_again += c.prepared_again;
        tally.rolled_back += c.rolled_back;
    }
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
    /// The network namespace every thread enters first (the bridge path).
    pub netns: Option<Arc<std::fs::File>>,
}

/// One session's view of the schedule.
#[derive(Clone)]
struct Replayer {
    speed: Speed,
    start: Instant,
    /// The recording's offset that falls on `start`.
    origin_ns: u64,
    stop: super::stop::Watch,
    /// Requests answered so far, for the progress line.
    done: Arc<AtomicU64>,
    /// Where a session a recorded cancel targets shows the key of its connection.
    keys: Keys,
}

/// The instant `offset_ns` of the recording falls on, the recording's `origin_ns` falling
/// on `start`; `None` with no schedule.
fn schedule_at(speed: Speed, start: Instant, origin_ns: u64, offset_ns: u64) -> Option<Instant> {
    match speed {
        Speed::Max => None,
        Speed::Factor(f) => {
            let ns = offset_ns.saturating_sub(origin_ns) as f64 / f;
            Some(start + Duration::from_nanos(ns as u64))
        }
    }
}

impl Replayer {
    /// The instant `offset_ns` of the recording falls on now.
    fn at(&self, offset_ns: u64) -> Option<Instant> {
        schedule_at(self.speed, self.start, self.origin_ns, offset_ns)
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
        let Some(at) = at else { return !self.stop.is_set() };
        let sleep = async {
            match timer {
                Some(t) => {
                    let _ = t.sleep_until(at).await;
                }
                None => tokio::time::sleep_until(at.into()).await,
            }
        };
        self.stop.or(sleep).await.is_some()
    }

    async fn session(
        mut self,
        plan: SessionPlan,
        ep: &Endpoint,
        mut tx: Option<Transactions>,
        pool: Option<Rc<ThreadPool>>,
    ) -> Tally {
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
        let slot = self.keys.slot(plan.session);
        let link = match pool {
            Some(pool) => Link::Pooled(Borrower::new(pool, slot.clone())),
            None => match self.connect(ep, &mut tally, tx.as_mut()).await {
                Some(c) => {
                    if let Some(slot) = &slot {
                        slot.hold(&c.session);
                    }
                    Link::Own(c)
                }
                None => {
                    tally.not_sent = total;
                    return tally;
                }
            },
        };
        tally.connected = 1;
        let (link, status) = self
            .requests(&plan, link, &mut timer, &mut tally, tx.as_mut())
            .await;
        match link {
            Link::Own(c) => {
                if let Some(close) = plan.close_ns {
                    // The application's close, unless stopped: then at once.
                    self.sleep(&mut timer, self.at(plan.open_ns + close)).await;
                }
                if let Some(slot) = &slot {
                    slot.release();
                }
                c.close().await;
            }
            Link::Pooled(b) => b.finish(status).await,
        }
        tally
    }

    /// The session's own connection, counted; `None` when stopped or refused.
    async fn connect(
        &mut self,
        ep: &Endpoint,
        tally: &mut Tally,
        tx: Option<&mut Transactions>,
    ) -> Option<Conn> {
        let cursor = PhaseCursor::default();
        let began = Instant::now();
        match self.stop.or(proto::connect(ep, &cursor)).await {
            None => None,
            Some(Err(e)) => {
                let key = e.to_string();
                if let Some(tx) = tx {
                    tx.connected(0, Some(&key));
                }
                *tally.connect_errors.entry(key).or_default() += 1;
                None
            }
            Some(Ok((s, _))) => {
                let connect_ns = began.elapsed().as_nanos() as u64;
                if let Some(tx) = tx {
                    tx.connected(connect_ns, None);
                }
                tally.connects = 1;
                tally.connect_ns = connect_ns;
                Some(Conn::new(s))
            }
        }
    }

    /// The session's requests, each at its time; returns the link and the status its
    /// last answer left. A request the application pipelined (sent before the previous
    /// answer, and with no wait inside it) goes before that answer is read, as recorded:
    /// the answers are read in order once the requests pipelined behind them are sent.
    async fn requests(
        &mut self,
        plan: &SessionPlan,
        mut link: Link,
        timer: &mut Option<PreciseTimer>,
        tally: &mut Tally,
        tx: Option<&mut Transactions>,
    ) -> (Link, TxStatus) {
        let total = plan.requests.len() as u64;
        let mut at = Answers {
            began_tx: None,
            boundaries: Boundaries::new(),
            tx,
        };
        // The session's open, then each answer's arrival: the session can send its next
        // request once the application's recorded think time after it has passed.
        let mut ready = Instant::now();
        let mut in_flight: VecDeque<InFlight> = VecDeque::new();
        for (k, r) in plan.requests.iter().enumerate() {
            let intended = self.at(plan.open_ns + r.at_ns);
            // A session behind its schedule still takes the application's own time
            // after each answer (its code between two requests: a password hash inside
            // a transaction, a template rendered): sending at once would replay a faster
            // application than the one recorded.
            let could = ready + self.think(r.think_ns);
            let due = intended.map(|i| i.max(could));
            if !self.sleep(timer, due).await {
                tally.not_sent += total - first_unanswered(&in_flight, k) as u64;
                break;
            }
            // A KILL names the connection its target holds now, or is not sent.
            let killing;
            let wire = match &r.kill {
                None => &r.wire,
                Some(kill) => match kill::wire(kill, &self.keys) {
                    Ok(c) => {
                        tally.kills.replayed += 1;
                        killing = Wire::Mysql(c);
                        &killing
                    }
                    Err(why) => {
                        tally.kills.not(why);
                        tally.not_sent += 1;
                        continue;
                    }
                },
            };
            let Some(waited) = self.borrow(&mut link, tally).await else {
                tally.not_sent += total - k as u64;
                break;
            };
            let sent = Instant::now();
            let lag = intended.map(|i| {
                let l = Lag::of(i, could, sent);
                waited.map_or(l, |w| l.with_pool(w))
            });
            let flight = InFlight {
                k,
                sent,
                written: sent,
                intended,
                lag,
            };
            // Kept in flight while the next request was pipelined behind it.
            let keep = pipelines(&r.wire) && plan.requests.get(k + 1).is_some_and(pipelines_behind);
            if !keep && in_flight.is_empty() {
                let a = match self.stop.or(link.exchange(wire)).await {
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
                let status = self.answered(r, flight, a, ready, tally, &mut at);
                link.give_back(status);
                continue;
            }
            // In a pipeline (`pipelines` holds for it, or it would not be behind one).
            let Wire::Postgres(msgs) = &r.wire else { continue };
            match self.stop.or(link.send(msgs)).await {
                Some(Ok(written)) => in_flight.push_back(InFlight { written, ..flight }),
                stopped_or_lost => {
                    if let Some(Err(e)) = stopped_or_lost {
                        *tally.lost.entry(e.to_string()).or_default() += 1;
                    }
                    tally.not_sent += total - first_unanswered(&in_flight, k) as u64;
                    break;
                }
            }
            if keep {
                continue;
            }
            self.drain(plan, &mut link, &mut in_flight, &mut ready, tally, &mut at)
                .await;
            if !in_flight.is_empty() {
                tally.not_sent += total - first_unanswered(&in_flight, k) as u64;
                break;
            }
        }
        (link, at.boundaries.status())
    }

    /// A connection for the next request: `Some` of the pool's wait (`None` on the
    /// session's own, there already: no wait, no select); `None` when stopped or the
    /// pool's connect failed (counted).
    async fn borrow(&mut self, link: &mut Link, tally: &mut Tally) -> Option<Option<Duration>> {
        if let Link::Own(_) = link {
            return Some(None);
        }
        match self.stop.or(link.borrow()).await? {
            Ok(waited) => Some(waited),
            Err(e) => {
                *tally.connect_errors.entry(e.to_string()).or_default() += 1;
                tally.connected = 0;
                None
            }
        }
    }

    /// A pipeline's answers, in order, each counted as it arrives (`ready` then); stops
    /// at a lost connection (counted) or a stop, leaving the unanswered in `in_flight`.
    /// The pooled connection goes back only after the last: later groups wait on it.
    async fn drain(
        &mut self,
        plan: &SessionPlan,
        link: &mut Link,
        in_flight: &mut VecDeque<InFlight>,
        ready: &mut Instant,
        tally: &mut Tally,
        at: &mut Answers<'_>,
    ) {
        while let Some(written) = in_flight.front().map(|f| f.written) {
            match self.stop.or(link.receive(written)).await {
                Some(Ok(a)) => {
                    let f = in_flight.pop_front().expect("the front is there");
                    *ready = Instant::now();
                    let status = self.answered(&plan.requests[f.k], f, a, *ready, tally, at);
                    if in_flight.is_empty() {
                        link.give_back(status);
                    }
                }
                stopped_or_lost => {
                    if let Some(Err(e)) = stopped_or_lost {
                        *tally.lost.entry(e.to_string()).or_default() += 1;
                    }
                    return;
                }
            }
        }
    }

    /// One request's answer, read at `ready`: counted, its transaction's boundaries
    /// moved, logged; returns the status it left.
    fn answered(
        &self,
        r: &Planned,
        f: InFlight,
        a: Answer,
        ready: Instant,
        tally: &mut Tally,
        at: &mut Answers<'_>,
    ) -> TxStatus {
        tally.sent(f.lag);
        if let Some(i) = f.intended {
            tally.answered_after_intended(ready.saturating_duration_since(i).as_nanos() as u64);
        }
        let now = a.error.as_ref().map(|(c, m)| (c.as_str(), m.as_str()));
        let took = a.took.map(|t| t.as_nanos() as u64);
        let ran = executions::ran(r.runs.len(), now.is_some(), a.commands);
        tally.answered(&r.runs, ran, took, now, r.seen.error.as_deref());
        let place = at.boundaries.request(r.work, a.took.is_some(), Some(a.status));
        if place.is_some_and(|p| p.first) {
            at.began_tx = Some((f.sent, r.shape));
        }
        if place.is_some_and(|p| p.last) {
            let (first, shape) = at.began_tx.take().unwrap_or((f.sent, r.shape));
            tally.transaction(ready.saturating_duration_since(first).as_nanos() as u64, shape);
        }
        if let (Some(tx), Some(place)) = (at.tx.as_mut(), place) {
            tx.step(&Step {
                intended: f.intended,
                sent: f.sent,
                lag_ns: f.lag.map_or(0, |l| l.total_ns()),
                error: now.map(|(code, _)| code),
                answered: ready,
                place,
            });
        }
        self.done.fetch_add(1, Ordering::Relaxed);
        a.status
    }
}

/// A request sent and not yet answered: which, when it went and its last byte was
/// written, when it was meant to go, its lag.
struct InFlight {
    k: usize,
    sent: Instant,
    written: Instant,
    intended: Option<Instant>,
    lag: Option<Lag>,
}

/// Where a session's answers leave its transactions: the open one's first send and
/// shape, the boundaries (`connbench_trace::transaction`, as `connbench trace` counts),
/// and `-l`'s log.
struct Answers<'a> {
    began_tx: Option<(Instant, Option<u32>)>,
    boundaries: Boundaries,
    tx: Option<&'a mut Transactions>,
}

/// The first request of the session not answered: the oldest in flight, or `next`.
fn first_unanswered(in_flight: &VecDeque<InFlight>, next: usize) -> usize {
    in_flight.front().map_or(next, |f| f.k)
}

/// A request whose answer can wait behind the next one's send: a PostgreSQL group the
/// client did not wait inside (a wait inside would read the answers before it).
fn pipelines(wire: &Wire) -> bool {
    matches!(wire, Wire::Postgres(m) if !m.contains(&Frontend::FlushThenWait))
}

/// `next` was sent before the answer to the request before it, and can go so again.
fn pipelines_behind(next: &Planned) -> bool {
    next.think_ns.is_none() && pipelines(&next.wire)
}

/// A session's way to the server: its own connection, or its thread's pool.
enum Link {
    Own(Conn),
    Pooled(Borrower),
}

impl Link {
    /// A connection for the next request: the pool's wait (`None` on its own).
    async fn borrow(&mut self) -> Result<Option<Duration>, ConnectError> {
        match self {
            Link::Own(_) => Ok(None),
            Link::Pooled(b) => b.borrow().await.map(Some),
        }
    }

    async fn exchange(&mut self, wire: &Wire) -> Result<Answer, ConnectError> {
        match self {
            Link::Own(c) => c.exchange(wire).await,
            Link::Pooled(b) => b.exchange(wire).await,
        }
    }

    /// Sends a PostgreSQL group whose answer is read later, behind the groups pipelined
    /// after it.
    async fn send(&mut self, msgs: &[Frontend]) -> Result<Instant, ConnectError> {
        match self {
            Link::Own(c) => c.send(msgs).await,
            Link::Pooled(b) => b.send(msgs).await,
        }
    }

    /// The oldest sent group's answer, `written` then.
    async fn receive(&mut self, written: Instant) -> Result<Answer, ConnectError> {
        match self {
            Link::Own(c) => c.receive(written).await,
            Link::Pooled(b) => b.receive(written).await,
        }
    }

    /// Gives a pooled connection back when `status` leaves it idle.
    fn give_back(&mut self, status: TxStatus) {
        if let Link::Pooled(b) = self {
            b.give_back(status);
        }
    }
}

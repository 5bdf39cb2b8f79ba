//! The load's threads: clients running a workload for a while, under a connection policy,
//! optionally paced, with every transaction recorded.
//!
//! Shape: `-j` worker threads, each with its own single-threaded runtime, each running
//! its share of the `-c` clients as one set of futures and owning one [`Measurements`] (no
//! atomics or locks while a transaction is timed). The run has three stretches on one shared clock:
//! connecting (persistent connections are opened before anything is timed, as pgbench
//! does, and so are a pool's), warm-up (transactions run but are not recorded), and the measurement. Workers
//! hand their measurements to the coordinator, which merges them.
//!
//! Timing: a transaction's latency runs from its start to its last ReadyForQuery, and
//! includes whatever the client had to wait for on the way: a pool slot, a (re)connect.
//! Under `-R` the start is the *intended* start from the Poisson schedule, not the moment
//! the client got round to it, so queueing delay is not hidden (coordinated omission);
//! the difference is reported as schedule lag.
//!
//! Failures: a failed transaction is counted by kind (SQLSTATE, or phase and I/O error);
//! a broken connection is dropped and reopened, after a short pause when connecting
//! fails, and the client goes on.

use std::cell::{Cell, RefCell};
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures_util::future::{AbortHandle, Abortable};
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use tokio::sync::{mpsc, watch};

use super::client::client;
use super::connecting::{ensure_open_files, ramp_deadline, ramp_open, slot};
use super::pool::Pool;
use super::shared::{RampRecord, Times, WorkerShared};
use crate::host::{cpu_between, thread_usage, Accounting, Cpu, MachineCpu, Source, Usage};
use crate::load::log::{Clock, Columns};
use crate::load::measurements::{Interval, Measurements};
use crate::net::transport::TlsInfo;
use crate::proto::Session;

use super::plan::{
    ConnectRamp, End, LoadPlan, LoadRun, Policy, Progress, RampProgress, StartGate, WeightedScript,
};

/// How long after the measured window a client may still wait on the server before the
/// run stops waiting for it.
const END_GRACE: Duration = Duration::from_secs(5);

/// Readings of the machine and the relays' threads at one end of the measurement.
#[derive(Debug, Clone)]
struct WindowEnd {
    machine: Option<MachineCpu>,
    server: Option<Cpu>,
    pooler: Option<Cpu>,
    relays: Option<Cpu>,
}

impl WindowEnd {
    fn read(a: &Accounting) -> WindowEnd {
        WindowEnd {
            machine: MachineCpu::read(),
            server: a.server.as_ref().and_then(Source::cpu),
            pooler: a.pooler.as_ref().and_then(Source::cpu),
            relays: if a.relays.is_empty() {
                None
            } else {
                crate::host::threads_cpu(&a.relays)
            },
        }
    }
}

#[derive(Debug, Clone)]
struct Window {
    start: WindowEnd,
    end: WindowEnd,
}

enum Msg {
    Progress { tick: u64, period: Interval },
}

/// What one worker hands back.
struct WorkerResult {
    measurements: Measurements,
    last_end: Option<Instant>,
    cpu: (Duration, Duration),
    context_switches: (u64, u64),
    /// Worker 0 alone reads the machine and the relays at the window's ends.
    window: Option<Window>,
    setup_connects: u64,
    setup_connect_ns: u64,
    first_error: Option<String>,
    aborted: Vec<String>,
    server_version: Option<String>,
    tls: Option<TlsInfo>,
    interrupted: bool,
    ramp: RampRecord,
}

impl WorkerResult {
    /// A worker's result when the start gate failed: nothing ran.
    fn cancelled() -> WorkerResult {
        WorkerResult {
            measurements: Measurements::new(),
            last_end: None,
            cpu: (Duration::ZERO, Duration::ZERO),
            context_switches: (0, 0),
            window: None,
            setup_connects: 0,
            setup_connect_ns: 0,
            first_error: None,
            aborted: Vec::new(),
            server_version: None,
            tls: None,
            interrupted: false,
            ramp: RampRecord::default(),
        }
    }
}

/// Runs the plan. `stop` turning true ends the run early (Ctrl-C); `on_progress` gets
/// one report per progress period.
pub async fn run(
    plan: LoadPlan,
    stop: watch::Receiver<bool>,
    mut on_progress: impl FnMut(Progress),
) -> Result<LoadRun> {
    let threads = plan.threads.clamp(1, plan.clients.max(1));
    ensure_open_files(&plan)?;
    let plan = Arc::new(plan);
    // The connect ramp's schedule counts from here, across the workers.
    let ramp_start = Instant::now() + Duration::from_millis(5);
    let times: Arc<OnceLock<Times>> = Arc::new(OnceLock::new());
    let connected = Arc::new(Barrier::new(threads + 1));
    let go = Arc::new(Barrier::new(threads + 1));
    let (tx, mut rx) = mpsc::unbounded_channel();
    // --exit-on-abort: the client that aborts turns this on, and every worker stops its
    // clients as on Ctrl-C (the run is not "interrupted", though: it ended on an error).
    let halt = Arc::new(watch::channel(false).0);
    // A client still waiting on the server well after the window closed (a stalled
    // server or path) would hold the run open for ever: END_GRACE after the end this
    // turns on and the workers stop waiting. The timer is the coordinator's, not the
    // workers': a pending timer on a worker's runtime makes every one of its waits for
    // the server an epoll_wait with a timeout, which the kernel arms and cancels each
    // time (0.2-0.3 µs of system time per transaction at one client per thread,
    // docs/benchmarks.md).
    let (overrun, overrun_rx) = watch::channel(false);
    let mut handles = Vec::new();
    for w in 0..threads {
        let ids: Vec<usize> = (0..plan.clients).filter(|c| c % threads == w).collect();
        let (plan, times, connected, go, stop, tx, halt, overrun) = (
            plan.clone(),
            times.clone(),
            connected.clone(),
            go.clone(),
            stop.clone(),
            tx.clone(),
            halt.clone(),
            overrun_rx.clone(),
        );
        let handle = std::thread::Builder::new()
            .name(format!("connbench-worker-{w}"))
            .spawn(move || {
                worker(
                    plan, w, ids, ramp_start, times, connected, go, stop, halt, overrun, tx,
                )
            })
            .context("cannot start a worker thread")?;
        handles.push(handle);
    }
    drop(tx);
    let wait = |b: Arc<Barrier>| async move {
        tokio::task::spawn_blocking(move || {
            b.wait();
        })
        .await
    };
    wait(connected).await?;
    // Every worker has its connections: start the clock a moment from now, so all
    // workers see the start before it arrives (or when the gate says).
    let (warm_start, gate_error) = start_at(&plan).await;
    let measure_start = warm_start + plan.warmup;
    let end = match plan.end {
        End::Duration(d) => Some(measure_start + d),
        End::TransactionsPerClient(_) => None,
    };
    let _ = times.set(Times {
        cancelled: gate_error.is_some(),
        warm_start,
        measure_start,
        end,
        clock: Clock::new(measure_start),
    });
    wait(go).await?;

    relay_progress(&mut rx, &overrun, end, plan.progress, threads, &mut on_progress).await;
    let mut results = Vec::new();
    for h in handles {
        results.push(
            h.join()
                .map_err(|_| anyhow::anyhow!("a worker thread panicked"))??,
        );
    }
    if let Some(e) = gate_error {
        return Err(e);
    }
    // Every worker has ended: --exit-on-abort's switch is as it will stay.
    let halted = *halt.borrow();
    let clock = times.get().map_or_else(|| Clock::new(measure_start), |t| t.clock);
    Ok(merge(&plan, &results, (measure_start, clock), end, halted))
}

/// When the clock starts: a moment from now, so all workers see the start before it
/// arrives, or when the plan's start gate says; the gate's error, if it failed.
async fn start_at(plan: &LoadPlan) -> (Instant, Option<anyhow::Error>) {
    match plan.start_gate.clone() {
        None => (Instant::now() + Duration::from_millis(5), None),
        Some(StartGate(gate)) => match tokio::task::spawn_blocking(move || gate()).await {
            Ok(Ok(at)) => (at, None),
            Ok(Err(e)) => (Instant::now(), Some(e)),
            Err(e) => (
                Instant::now(),
                Some(anyhow::anyhow!("the start gate panicked: {e}")),
            ),
        },
    }
}

/// Hands on the workers' progress (-P) until they end, each period once every worker
/// reported it, and turns the overrun switch on END_GRACE after the window's `end`.
async fn relay_progress(
    rx: &mut mpsc::UnboundedReceiver<Msg>,
    overrun: &watch::Sender<bool>,
    end: Option<Instant>,
    progress: Option<Duration>,
    threads: usize,
    on_progress: &mut impl FnMut(Progress),
) {
    // Progress: merge each period's reports from all workers, in order.
    let mut pending: std::collections::BTreeMap<u64, (usize, Interval)> = Default::default();
    let period = progress.unwrap_or(Duration::ZERO);
    // The workers hold the channel's senders until they end, so this loop is also the
    // wait for them, and the overrun timer runs beside it.
    let overrun_timer = async {
        match end {
            Some(end) => tokio::time::sleep_until((end + END_GRACE).into()).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(overrun_timer);
    loop {
        let msg = tokio::select! {
            msg = rx.recv() => msg,
            _ = &mut overrun_timer, if !*overrun.borrow() => {
                overrun.send_replace(true);
                continue;
            }
        };
        let Some(Msg::Progress { tick, period: iv, .. }) = msg else {
            break;
        };
        let entry = pending.entry(tick).or_insert_with(|| (0, Interval::new()));
        entry.0 += 1;
        entry.1 += &iv;
        while let Some(e) = pending.first_entry() {
            if e.get().0 < threads {
                break;
            }
            let (tick, (_, totals)) = e.remove_entry();
            on_progress(Progress {
                at_s: (tick + 1) as f64 * period.as_secs_f64(),
                period_s: period.as_secs_f64(),
                totals,
            });
        }
    }
}

/// The run: the workers' measurements and readings merged, and the measured window's
/// length (to the last transaction's end, or the planned end when the run was not cut
/// short); `clock` puts the ramp's instants in Unix time.
fn merge(
    plan: &LoadPlan,
    results: &[WorkerResult],
    (measure_start, clock): (Instant, Clock),
    end: Option<Instant>,
    halted: bool,
) -> LoadRun {
    let mut measurements = Measurements::new();
    let mut run = LoadRun {
        server_not_measured: plan.accounting.server_not_measured.clone(),
        command_texts: if plan.per_command {
            command_texts(&plan.scripts)
        } else {
            Vec::new()
        },
        ..LoadRun::empty()
    };
    let mut last_end = measure_start;
    let mut ramp = RampRecord::default();
    for r in results {
        measurements += &r.measurements;
        run.cpu_user += r.cpu.0;
        run.cpu_system += r.cpu.1;
        run.context_switches.0 += r.context_switches.0;
        run.context_switches.1 += r.context_switches.1;
        if let Some(w) = &r.window {
            if let (Some(a), Some(b)) = (w.start.machine, w.end.machine) {
                run.machine = b.since(&a);
            }
            let between = |a: Option<Cpu>, b: Option<Cpu>| a.zip(b).map(|(a, b)| cpu_between(a, b));
            run.server_cpu = between(w.start.server, w.end.server);
            run.pooler_cpu = between(w.start.pooler, w.end.pooler);
            run.relay_cpu = between(w.start.relays, w.end.relays);
            if run.server_cpu.is_none() && run.server_not_measured.is_none() {
                if let Some(source) = &plan.accounting.server {
                    run.server_not_measured =
                        Some(format!("{source:?} could not be read at both ends of the window"));
                }
            }
        }
        run.setup_connects += r.setup_connects;
        run.setup_connect_ns += r.setup_connect_ns;
        run.interrupted |= r.interrupted;
        if run.first_error.is_none() {
            run.first_error = r.first_error.clone();
        }
        run.aborted.extend(r.aborted.iter().cloned());
        run.server_version = run.server_version.take().or_else(|| r.server_version.clone());
        run.tls = run.tls.take().or_else(|| r.tls.clone());
        ramp.add(&r.ramp);
        if let Some(e) = r.last_end {
            last_end = last_end.max(e);
        }
    }
    let window_end = match end {
        Some(e) if !run.interrupted && !halted => last_end.max(e),
        _ => last_end,
    };
    run.measured = window_end.saturating_duration_since(measure_start);
    run.measurements = measurements;
    let unix_us = |i: Option<Instant>| i.map(|i| clock.unix_us(i) as i64);
    run.ramp = ConnectRamp {
        rate: plan.connect_rate,
        took: match (ramp.first_attempt, ramp.last_connected) {
            (Some(first), Some(last)) => last.saturating_duration_since(first),
            _ => Duration::ZERO,
        },
        first_attempt_unix_us: unix_us(ramp.first_attempt),
        last_connected_unix_us: unix_us(ramp.last_connected),
        ..ramp.ramp
    };
    run
}

/// Every script's commands as written, in script order; with several scripts, each
/// command says its script (`[2] SELECT ...`, numbered from 1 as pgbench's report does).
fn command_texts(scripts: &[WeightedScript]) -> Vec<String> {
    let mixed = scripts.len() > 1;
    scripts
        .iter()
        .enumerate()
        .flat_map(|(i, s)| {
            s.script.texts.iter().map(move |t| {
                if mixed {
                    format!("[{}] {t}", i + 1)
                } else {
                    t.clone()
                }
            })
        })
        .collect()
}

/// Waits until the switch is on (true) or its sender is gone (false).
async fn switched_on(rx: &mut watch::Receiver<bool>) -> bool {
    while !*rx.borrow_and_update() {
        if rx.changed().await.is_err() {
            return false;
        }
    }
    true
}

#[allow(clippy::too_many_arguments)]
fn worker(
    plan: Arc<LoadPlan>,
    index: usize,
    ids: Vec<usize>,
    ramp_start: Instant,
    times: Arc<OnceLock<Times>>,
    connected: Arc<Barrier>,
    go: Arc<Barrier>,
    stop: watch::Receiver<bool>,
    halt: Arc<watch::Sender<bool>>,
    overrun_rx: watch::Receiver<bool>,
    tx: mpsc::UnboundedSender<Msg>,
) -> Result<WorkerResult> {
    if let Some(ns) = &plan.netns {
        crate::net::netns::enter(ns).context("cannot enter the client's network namespace")?;
    }
    if let Some(turn) = &plan.turn {
        turn.register_worker();
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start a worker runtime")?;
    let local = tokio::task::LocalSet::new();
    let shared = worker_shared(&plan, index, halt);
    // Connect every persistent client first, on the ramp's schedule; nothing here is timed.
    let sessions = local.block_on(&rt, connect_clients(shared.clone(), &ids, ramp_start));
    // The worker thread itself waits at the start line (outside its runtime), so the
    // scheduler wakes this thread, not a helper that then wakes it.
    connected.wait();
    go.wait();
    let t = *times.get().expect("the coordinator sets the clock before go");
    if t.cancelled {
        local.block_on(&rt, async move {
            for s in sessions.into_iter().flatten() {
                s.close().await;
            }
        });
        return Ok(WorkerResult::cancelled());
    }
    *shared.times.borrow_mut() = Some(t);
    *shared.log.borrow_mut() = plan.log.as_ref().and_then(|files| {
        let columns = Columns {
            lag: plan.rate.is_some(),
            retries: plan.max_tries != 1,
            skipped: plan.latency_limit.is_some(),
        };
        // The sample is drawn per worker, as pgbench draws it per thread.
        let seed = plan.seed ^ (index as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03);
        files.writer(index, columns, t.clock, seed)
    });
    // This future's output is boxed: tokio moves it through every poll (Pending
    // included), and it wakes once per transaction, so unboxed it copied a worker's
    // measurements each time (memmove: 1.9% of the client's CPU in a select-only
    // profile, 0.9% boxed).
    let result = local.block_on(&rt, measure(shared, ids, sessions, t, stop, overrun_rx, tx));
    result.map(|r| *r)
}

/// What the clients of one worker share, before they connect.
fn worker_shared(plan: &Arc<LoadPlan>, index: usize, halt: Arc<watch::Sender<bool>>) -> Rc<WorkerShared> {
    let pool = match &plan.policy {
        Policy::Pool {
            size_per_thread,
            max_lifetime,
            idle_timeout,
        } => Some(Pool::new(*size_per_thread, *max_lifetime, *idle_timeout)),
        _ => None,
    };
    Rc::new(WorkerShared {
        plan: plan.clone(),
        measurements: RefCell::new({
            let r = Measurements::new().with_scripts(plan.scripts.len());
            if plan.per_command {
                r.with_commands(plan.scripts.iter().map(|s| s.script.commands.len()).sum())
            } else {
                r
            }
        }),
        progress: RefCell::new(Interval::new()),
        pool,
        first_error: RefCell::new(None),
        aborted: RefCell::new(Vec::new()),
        server_version: RefCell::new(None),
        tls: RefCell::new(None),
        last_end: RefCell::new(None),
        setup: RefCell::new((0, 0)),
        times: RefCell::new(None),
        log: RefCell::new(None),
        stopped: std::cell::Cell::new(false),
        halt,
        ramp: RefCell::new(RampRecord::default()),
        backoff_rng: RefCell::new(crate::rng::Rng::new(
            plan.seed ^ (index as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D),
        )),
    })
}

/// The sessions of this worker's clients (`ids`, numbered across the workers) opened
/// before the clock: a persistent client's own, and a pool's, each at its slot on the
/// ramp that starts at `start` ([`crate::load::connecting`]). Nothing here is timed.
async fn connect_clients(shared: Rc<WorkerShared>, ids: &[usize], start: Instant) -> Vec<Option<Session>> {
    let plan = shared.plan.clone();
    let threads = plan.threads.clamp(1, plan.clients.max(1));
    // A pool opens its connections before the clock too, as an application's pool does
    // when it starts: the measured window holds pooled queries and the lifetime's
    // reconnects, not the first connects (which a short run would otherwise spread over
    // few transactions). Its k-th connection takes the ramp's slot k * threads + worker.
    let (slots, wanted): (Vec<usize>, usize) = match (&plan.policy, &shared.pool) {
        (Policy::Persistent, _) => (ids.to_vec(), plan.clients),
        (_, Some(pool)) => {
            let worker = ids.first().copied().unwrap_or(0) % threads;
            let n = ids.len().min(pool.size);
            (
                (0..n).map(|k| k * threads + worker).collect(),
                pool.size * threads,
            )
        }
        _ => (Vec::new(), 0),
    };
    let deadline = ramp_deadline(&plan, start, wanted);
    shared.ramp.borrow_mut().ramp.wanted = slots.len() as u64;
    RampProgress::count(&plan.ramp_progress, |p| &p.wanted, slots.len() as u64);
    let opens: Vec<_> = slots
        .iter()
        .map(|&k| {
            let (shared, at) = (shared.clone(), slot(&plan, start, k));
            tokio::task::spawn_local(async move { ramp_open(&shared, at, deadline).await })
        })
        .collect();
    let mut opened = Vec::with_capacity(opens.len());
    for o in opens {
        opened.push(o.await.ok().flatten());
    }
    if let Some(pool) = &shared.pool {
        for s in opened.into_iter().flatten() {
            pool.add(s);
        }
        let mut sessions = Vec::with_capacity(ids.len());
        sessions.resize_with(ids.len(), || None);
        return sessions;
    }
    if opened.is_empty() {
        opened.resize_with(ids.len(), || None);
    }
    opened
}

/// The worker's measured stretch: its clients run from the shared start to the end,
/// beside a progress ticker and the Ctrl-C, --exit-on-abort and overrun waiters; then
/// its connections are closed and its figures handed back.
async fn measure(
    shared: Rc<WorkerShared>,
    ids: Vec<usize>,
    sessions: Vec<Option<Session>>,
    t: Times,
    stop: watch::Receiver<bool>,
    overrun_rx: watch::Receiver<bool>,
    tx: mpsc::UnboundedSender<Msg>,
) -> Result<Box<WorkerResult>> {
    let plan = shared.plan.clone();
    // CPU is read on this thread at the start and end of the measurement, and by the
    // first worker, the machine's and the relays'.
    let reads_window = ids.first() == Some(&0);
    let accounting = plan.accounting.clone();
    let cpu_start = tokio::task::spawn_local(async move {
        tokio::time::sleep_until(t.measure_start.into()).await;
        let window = reads_window.then(|| WindowEnd::read(&accounting));
        (thread_usage(), window)
    });
    let ticker = plan
        .progress
        .map(|period| spawn_ticker(shared.clone(), period, t, stop.clone(), tx.clone()));
    // The clients are one future, polled where the worker's runtime blocks: no task per
    // client, so an answer wakes one future of the set instead of going through the
    // runtime's scheduler and the LocalSet's (the replay engine's change of 2026-11-27,
    // docs/benchmarks.md). Ctrl-C, --exit-on-abort and the overrun switch end the wait
    // and drop the clients where they are (mid-transaction or asleep); clients never
    // touch the cross-thread channel themselves, so no shared lock sits in a timed
    // transaction.
    let mut clients: FuturesUnordered<_> = ids
        .iter()
        .zip(sessions)
        .map(|(&id, session)| AssertUnwindSafe(client(id, shared.clone(), session)).catch_unwind())
        .collect();
    let mut left = Vec::new();
    // The stop switches are tasks of their own, not branches polled beside the clients:
    // a branch is polled on every answer, and a watch's wait takes its lock when polled.
    let (abort, registration) = AbortHandle::new_pair();
    let stopper = spawn_stopper(&shared, stop.clone(), abort.clone());
    // A client still waiting on the server END_GRACE after the window closed: its wait
    // is ended, said once, and the results so far are reported (the switch is the
    // coordinator's, see [`run`]).
    let overran = Rc::new(Cell::new(false));
    let overrun = t.end.map(|_| spawn_overrun(overrun_rx, abort, overran.clone()));
    let drain = async {
        while let Some(session) = clients.next().await {
            // A client that panicked leaves no session to close.
            left.extend(session.ok().flatten());
        }
    };
    // Aborted: the clients still running are dropped where they are.
    let _ = Abortable::new(drain, registration).await;
    if overran.get() {
        say_overrun(clients.len());
    }
    drop(clients);
    stopper.abort();
    if let Some(o) = overrun {
        o.abort();
    }
    let interrupted = shared.stopped.get();
    let cpu_end = thread_usage();
    let window_end = reads_window.then(|| WindowEnd::read(&plan.accounting));
    let (cpu_start, window_start) = cpu_start.await.unwrap_or((cpu_end, None));
    let window = window_start
        .zip(window_end)
        .map(|(start, end)| Window { start, end });
    if let Some(t) = ticker {
        t.abort();
    }
    if let Some(pool) = &shared.pool {
        left.extend(pool.drain());
    }
    for s in left {
        s.close().await;
    }
    // The log is flushed however the clients ended (Ctrl-C too); a write error is
    // said, and the run's figures are reported all the same.
    if let Some(log) = shared.log.borrow_mut().take() {
        if let Err(e) = log.finish() {
            eprintln!("warning: {e:#}");
        }
    }
    Ok(Box::new(worker_result(
        &shared,
        (cpu_start, cpu_end),
        window,
        interrupted,
    )))
}

/// Sends this worker's progress period by period (-P), until the run stops.
fn spawn_ticker(
    shared: Rc<WorkerShared>,
    period: Duration,
    t: Times,
    mut stop: watch::Receiver<bool>,
    tx: mpsc::UnboundedSender<Msg>,
) -> tokio::task::JoinHandle<()> {
    tokio::task::spawn_local(async move {
        let mut tick = 0u64;
        loop {
            let due = t.measure_start + period * (tick as u32 + 1);
            tokio::select! {
                _ = tokio::time::sleep_until(due.into()) => {}
                _ = stop.changed() => break,
            }
            let period_iv = std::mem::take(&mut *shared.progress.borrow_mut());
            if tx
                .send(Msg::Progress {
                    tick,
                    period: period_iv,
                })
                .is_err()
            {
                break;
            }
            tick += 1;
        }
    })
}

/// Stops the clients where they are on Ctrl-C (`stop`, which also marks the run
/// interrupted) or --exit-on-abort (the shared `halt`).
fn spawn_stopper(
    shared: &Rc<WorkerShared>,
    mut stop: watch::Receiver<bool>,
    abort: AbortHandle,
) -> tokio::task::JoinHandle<()> {
    let shared = shared.clone();
    let mut halt = shared.halt.subscribe();
    tokio::task::spawn_local(async move {
        let on = tokio::select! {
            on = switched_on(&mut stop) => {
                shared.stopped.set(on);
                on
            }
            on = switched_on(&mut halt) => on,
        };
        if on {
            abort.abort();
        }
    })
}

/// Stops the clients still waiting on the server when the coordinator's overrun switch
/// turns on (END_GRACE after the window of a timed run), marking that it did.
fn spawn_overrun(
    mut overrun_rx: watch::Receiver<bool>,
    abort: AbortHandle,
    overran: Rc<Cell<bool>>,
) -> tokio::task::JoinHandle<()> {
    tokio::task::spawn_local(async move {
        if switched_on(&mut overrun_rx).await {
            overran.set(true);
            abort.abort();
        }
    })
}

/// Says how many clients were still waiting on the server when the overrun switch ended
/// their wait.
fn say_overrun(waiting: usize) {
    if waiting > 0 {
        eprintln!(
            "load: {waiting} client{} still waited on the server {} after the measured window closed; \
             stopped waiting (a stalled server or path?)",
            if waiting == 1 { "" } else { "s" },
            crate::units::format_duration(END_GRACE)
        );
    }
}

/// What the worker hands back once its clients are done and its connections closed.
fn worker_result(
    shared: &WorkerShared,
    (cpu_start, cpu_end): (Usage, Usage),
    window: Option<Window>,
    interrupted: bool,
) -> WorkerResult {
    let mut measurements = shared.measurements.replace(Measurements::new());
    measurements.finish();
    let (setup_connects, setup_connect_ns) = *shared.setup.borrow();
    WorkerResult {
        measurements,
        last_end: *shared.last_end.borrow(),
        cpu: cpu_between(cpu_start.cpu, cpu_end.cpu),
        context_switches: (
            cpu_end.switches.0.saturating_sub(cpu_start.switches.0),
            cpu_end.switches.1.saturating_sub(cpu_start.switches.1),
        ),
        window,
        setup_connects,
        setup_connect_ns,
        first_error: shared.first_error.borrow().clone(),
        aborted: shared.aborted.take(),
        server_version: shared.server_version.borrow().clone(),
        tls: shared.tls.borrow().clone(),
        interrupted,
        ramp: shared.ramp.take(),
    }
}

//! The load engine: clients running a workload for a while, under a connection policy,
//! optionally paced, with every transaction recorded.
//!
//! Shape: `-j` worker threads, each with its own single-threaded runtime, each running
//! its share of the `-c` clients as local tasks and owning one [`Recorder`] (no atomics or
//! locks while a transaction is timed). The run has three stretches on one shared clock:
//! connecting (persistent connections are opened before anything is timed, as pgbench
//! does, and so are a pool's), warm-up (transactions run but are not recorded), and the measurement. Workers
//! hand their recorders to the coordinator, which merges them.
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

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::sync::{mpsc, watch, Notify};

use crate::host::{cpu_between, Accounting, Cpu, MachineCpu, MachineUse, Source};
use crate::load::log::{Clock, Columns, Entry, Failure, LogFiles, Outcome, TxLog};
use crate::load::record::{Interval, Recorder};
use crate::net::transport::{Counters, TlsInfo};
use crate::proto::{self, Endpoint, Session};
use crate::proto::{ConnectError, ErrorKind, PhaseCursor, Timeline};
use crate::workload::{ClientSeat, Executor, QueryMode, Script};

/// How clients get their connections.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(tag = "policy", rename_all = "kebab-case")]
pub enum Policy {
    /// One connection per client for the whole run (pgbench's default).
    Persistent,
    /// A new connection for every transaction (pgbench -C).
    PerTransaction,
    /// A client-side pool per worker thread that clients borrow from per transaction.
    Pool {
        /// Connections per worker thread.
        size_per_thread: usize,
        #[serde(
            rename = "max_lifetime_s",
            serialize_with = "crate::units::ser_opt_duration_s",
            deserialize_with = "crate::units::de_opt_duration_s",
            default
        )]
        #[schemars(with = "Option<f64>")]
        max_lifetime: Option<Duration>,
        #[serde(
            rename = "idle_timeout_s",
            serialize_with = "crate::units::ser_opt_duration_s",
            deserialize_with = "crate::units::de_opt_duration_s",
            default
        )]
        #[schemars(with = "Option<f64>")]
        idle_timeout: Option<Duration>,
    },
}

/// When each client stops.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum End {
    /// After this long of measurement.
    #[serde(
        rename = "duration_s",
        serialize_with = "crate::units::ser_duration_s",
        deserialize_with = "crate::units::de_duration_s"
    )]
    #[schemars(with = "f64")]
    Duration(Duration),
    /// After this many measured transactions per client.
    TransactionsPerClient(u64),
}

/// One script of a run and its weight: each transaction, a client draws one script with
/// probability weight / total weight (pgbench's `-b NAME@W`, `-f FILE@W`).
#[derive(Debug, Clone)]
pub struct WeightedScript {
    pub script: Script,
    pub weight: u32,
}

/// A validated load run.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    pub endpoint: Endpoint,
    /// The scripts, numbered from 0 in this order (pgbench's script_no).
    pub scripts: Arc<Vec<WeightedScript>>,
    /// pgbench's --max-tries: tries in all of a transaction that fails with a
    /// serialization failure (40001) or a deadlock (40P01); 1 retries nothing, 0 retries
    /// until -T or -L ends it.
    pub max_tries: u32,
    /// pgbench's --verbose-errors: every failed try's error on stderr as it happens.
    pub verbose_errors: bool,
    /// pgbench's -d: a trace of every command each client runs, on stderr.
    pub debug: bool,
    /// pgbench's --exit-on-abort: the first client that aborts stops every client, and the
    /// run reports what ran until then.
    pub exit_on_abort: bool,
    /// pgbench 19's --continue-on-error: an SQL error fails its transaction and the client
    /// goes on; without it the error aborts the client ([`aborts_client`]).
    pub continue_on_error: bool,
    pub mode: QueryMode,
    pub clients: usize,
    pub threads: usize,
    pub end: End,
    pub warmup: Duration,
    /// Target rate for all clients together, transactions per second.
    pub rate: Option<f64>,
    pub think: Duration,
    /// Time every command of the script (`-r`): per-command latencies and failures.
    pub per_command: bool,
    /// pgbench's -L: a successful transaction slower than this is counted late; under
    /// -R, one already further behind schedule when due is skipped (never sent).
    pub latency_limit: Option<Duration>,
    pub policy: Policy,
    pub interval: Duration,
    pub progress: Option<Duration>,
    pub scale: i64,
    /// A network namespace the worker threads enter before they open any socket (the
    /// `bridge` net path); `None` for the host's.
    pub netns: Option<Arc<std::fs::File>>,
    /// The groups of processes beside the clients whose CPU the run reports apart:
    /// server, pooler, relays.
    pub accounting: Accounting,
    /// The id of this plan's first client: a worker of a many-machine run numbers its
    /// clients after the workers before it, so ids (and seeds) differ across workers.
    pub first_client: usize,
    /// The base of the clients' random generators: client i draws from a seed mixed
    /// from this and i, so the same seed repeats every client's random choices (the
    /// values of `random()`, and the arrival gaps under -R).
    pub seed: u64,
    /// Called once every client is connected, to say when the run starts (a worker of a
    /// many-machine run waits for the others); `None` starts at once.
    pub start_gate: Option<StartGate>,
    /// This run's arm in a group taking turns ([`crate::load::slices`]): a client
    /// starts a transaction only in its arm's turn, the turns (not the clock) say which
    /// transactions are measured, and the run ends when the turns do. Not with `-R` or a
    /// think time, whose clocks would run on through other arms' turns.
    pub turn: Option<crate::load::slices::Turn>,
    /// pgbench's -l: the transaction log files, one per worker thread, created before
    /// the run; `None` logs nothing.
    pub log: Option<LogFiles>,
}

/// Says when the run starts: a blocking call, made once all clients are connected; an
/// error cancels the run before anything is measured.
#[derive(Clone)]
pub struct StartGate(pub Arc<dyn Fn() -> Result<Instant> + Send + Sync>);

impl std::fmt::Debug for StartGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StartGate")
    }
}

/// A progress report: the transactions that ended in one progress period.
#[derive(Debug, Clone)]
pub struct Progress {
    /// Seconds since the measurement started, at the end of the period.
    pub at_s: f64,
    pub period_s: f64,
    pub totals: Interval,
}

/// Everything a load run produced.
#[derive(Debug, Clone)]
pub struct LoadRun {
    pub recorder: Recorder,
    /// With `-r`, the script's commands as written, in the order of
    /// `recorder.commands`; empty without.
    pub command_texts: Vec<String>,
    /// From the start of the measurement to the last measured transaction's end (or the
    /// end of the measurement window, whichever is later).
    pub measured: Duration,
    /// Client CPU (user + system) of the worker threads during the measurement.
    pub cpu_user: Duration,
    pub cpu_system: Duration,
    /// Voluntary and involuntary context switches of the worker threads.
    pub context_switches: (u64, u64),
    /// CPU (user, system) during the measurement of the server, the pooler and the
    /// route's relays; `None` where there is none or it could not be read.
    pub server_cpu: Option<Cpu>,
    pub pooler_cpu: Option<Cpu>,
    pub relay_cpu: Option<Cpu>,
    /// Why the server's CPU was not measured, when it was not.
    pub server_not_measured: Option<String>,
    /// How the whole machine's CPUs were spent during the measurement (steal above all);
    /// `None` where `/proc/stat` cannot be read.
    pub machine: Option<MachineUse>,
    /// Connections opened before the measurement (persistent clients, a pool's), and their time.
    pub setup_connects: u64,
    pub setup_connect_ns: u64,
    pub interrupted: bool,
    /// The first error of the run, measured or not.
    pub first_error: Option<String>,
    /// Clients the script stopped, as pgbench aborts a client (e.g. "client 3 aborted:
    /// end of script reached without completing the last transaction"), one line each.
    pub aborted: Vec<String>,
    pub server_version: Option<String>,
    pub tls: Option<TlsInfo>,
}

impl LoadRun {
    /// A run that measured nothing yet: the start of a merge.
    pub fn empty() -> LoadRun {
        LoadRun {
            recorder: Recorder::new(),
            command_texts: Vec::new(),
            measured: Duration::ZERO,
            cpu_user: Duration::ZERO,
            cpu_system: Duration::ZERO,
            context_switches: (0, 0),
            server_cpu: None,
            pooler_cpu: None,
            relay_cpu: None,
            server_not_measured: None,
            machine: None,
            setup_connects: 0,
            setup_connect_ns: 0,
            interrupted: false,
            first_error: None,
            aborted: Vec::new(),
            server_version: None,
            tls: None,
        }
    }
}

/// How long after the measured window a client may still wait on the server before the
/// run stops waiting for it.
const END_GRACE: Duration = Duration::from_secs(5);

/// The shared clock of a run.
#[derive(Debug, Clone, Copy)]
struct Times {
    /// Set when the start gate failed: the workers close their connections and return.
    cancelled: bool,
    warm_start: Instant,
    measure_start: Instant,
    end: Option<Instant>,
    /// The run's instants in Unix time (the transaction log's timestamps).
    clock: Clock,
}

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
    recorder: Recorder,
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
}

/// Runs the plan. `stop` turning true ends the run early (Ctrl-C); `on_progress` gets
/// one report per progress period.
pub async fn run(
    plan: LoadPlan,
    stop: watch::Receiver<bool>,
    mut on_progress: impl FnMut(Progress),
) -> Result<LoadRun> {
    let threads = plan.threads.clamp(1, plan.clients.max(1));
    let plan = Arc::new(plan);
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
            .spawn(move || worker(plan, w, ids, times, connected, go, stop, halt, overrun, tx))
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
    let (warm_start, gate_error) = match plan.start_gate.clone() {
        None => (Instant::now() + Duration::from_millis(5), None),
        Some(StartGate(gate)) => match tokio::task::spawn_blocking(move || gate()).await {
            Ok(Ok(at)) => (at, None),
            Ok(Err(e)) => (Instant::now(), Some(e)),
            Err(e) => (
                Instant::now(),
                Some(anyhow::anyhow!("the start gate panicked: {e}")),
            ),
        },
    };
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

    // Progress: merge each period's reports from all workers, in order.
    let mut pending: std::collections::BTreeMap<u64, (usize, Interval)> = Default::default();
    let period = plan.progress.unwrap_or(Duration::ZERO);
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
    let mut recorder = Recorder::new();
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
    for r in &results {
        recorder += &r.recorder;
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
        if let Some(e) = r.last_end {
            last_end = last_end.max(e);
        }
    }
    let window_end = match end {
        Some(e) if !run.interrupted && !*halt.borrow() => last_end.max(e),
        _ => last_end,
    };
    run.measured = window_end.saturating_duration_since(measure_start);
    run.recorder = recorder;
    Ok(run)
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

/// Where each script's commands start in the run's per-command records.
fn command_offsets(scripts: &[WeightedScript]) -> Vec<usize> {
    scripts
        .iter()
        .scan(0, |at, s| {
            let start = *at;
            *at += s.script.commands.len();
            Some(start)
        })
        .collect()
}

/// What the calling thread has used: CPU time (user, system) and context switches
/// (voluntary, involuntary).
#[derive(Debug, Clone, Copy)]
struct Usage {
    cpu: (Duration, Duration),
    switches: (u64, u64),
}

fn thread_usage() -> Usage {
    // SAFETY: getrusage fills the struct we pass; RUSAGE_THREAD is Linux's.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv =
        |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    Usage {
        cpu: (tv(ru.ru_utime), tv(ru.ru_stime)),
        switches: (ru.ru_nvcsw.max(0) as u64, ru.ru_nivcsw.max(0) as u64),
    }
}

/// State shared by the clients of one worker (one thread, so `Rc` and `RefCell`).
struct WorkerShared {
    plan: Arc<LoadPlan>,
    recorder: RefCell<Recorder>,
    progress: RefCell<Interval>,
    pool: Option<Pool>,
    first_error: RefCell<Option<String>>,
    aborted: RefCell<Vec<String>>,
    server_version: RefCell<Option<String>>,
    tls: RefCell<Option<TlsInfo>>,
    last_end: RefCell<Option<Instant>>,
    setup: RefCell<(u64, u64)>,
    times: RefCell<Option<Times>>,
    /// This worker's transaction log (-l), written by its clients after each measured
    /// transaction, flushed when the worker ends.
    log: RefCell<Option<TxLog>>,
    /// Set when Ctrl-C stopped this worker's clients.
    stopped: std::cell::Cell<bool>,
    /// --exit-on-abort's switch, shared by every worker (see [`run`]).
    halt: Arc<watch::Sender<bool>>,
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
    times: Arc<OnceLock<Times>>,
    connected: Arc<Barrier>,
    go: Arc<Barrier>,
    stop: watch::Receiver<bool>,
    halt: Arc<watch::Sender<bool>>,
    mut overrun_rx: watch::Receiver<bool>,
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
    let pool = match &plan.policy {
        Policy::Pool {
            size_per_thread,
            max_lifetime,
            idle_timeout,
        } => Some(Pool::new(*size_per_thread, *max_lifetime, *idle_timeout)),
        _ => None,
    };
    let shared = Rc::new(WorkerShared {
        plan: plan.clone(),
        recorder: RefCell::new({
            let r = Recorder::new().with_scripts(plan.scripts.len());
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
    });
    // Connect every persistent client first; nothing here is timed.
    let sessions: Vec<Option<Session>> = local.block_on(&rt, {
        let shared = shared.clone();
        let n = ids.len();
        async move {
            let mut sessions = Vec::with_capacity(n);
            if shared.plan.policy == Policy::Persistent {
                let opens: Vec<_> = (0..n)
                    .map(|_| {
                        let shared = shared.clone();
                        tokio::task::spawn_local(async move { open_setup(&shared).await })
                    })
                    .collect();
                for o in opens {
                    sessions.push(o.await.ok().flatten());
                }
            } else {
                sessions.resize_with(n, || None);
            }
            // A pool opens its connections before the clock too, as an application's
            // pool does when it starts: the measured window holds pooled queries and the
            // lifetime's reconnects, not the first connects (which a short run would
            // otherwise spread over few transactions).
            if let Some(pool) = &shared.pool {
                let opens: Vec<_> = (0..n.min(pool.size))
                    .map(|_| {
                        let shared = shared.clone();
                        tokio::task::spawn_local(async move { open_setup(&shared).await })
                    })
                    .collect();
                for o in opens {
                    if let Some(s) = o.await.ok().flatten() {
                        pool.add(s);
                    }
                }
            }
            sessions
        }
    });
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
        return Ok(WorkerResult {
            recorder: Recorder::new(),
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
        });
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
    // The outputs of this future and of the client tasks are boxed: tokio moves a task's
    // output type through every poll (Pending included), and these wake once per
    // transaction, so unboxed they copied a recorder's or a session's bytes each time
    // (memmove: 1.9% of the client's CPU in a select-only profile, 0.9% boxed).
    let result = local.block_on(&rt, async move {
        // CPU is read on this thread at the start and end of the measurement, and by the
        // first worker, the machine's and the relays'.
        let reads_window = ids.first() == Some(&0);
        let accounting = plan.accounting.clone();
        let cpu_start = tokio::task::spawn_local(async move {
            tokio::time::sleep_until(t.measure_start.into()).await;
            let window = reads_window.then(|| WindowEnd::read(&accounting));
            (thread_usage(), window)
        });
        let ticker = plan.progress.map(|period| {
            let shared = shared.clone();
            let tx = tx.clone();
            let mut stop = stop.clone();
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
        });
        let clients: Vec<_> = ids
            .iter()
            .zip(sessions)
            .map(|(&id, session)| {
                let shared = shared.clone();
                tokio::task::spawn_local(async move { client(id, shared, session).await.map(Box::new) })
            })
            .collect();
        // Ctrl-C: one waiter per worker aborts its clients where they are (mid-transaction
        // or asleep). Clients never touch the cross-thread channel themselves, so no
        // shared lock sits in a timed transaction.
        let aborts: Vec<_> = clients.iter().map(|c| c.abort_handle()).collect();
        let stopper = {
            let shared = shared.clone();
            let mut stop = stop.clone();
            let mut halt = shared.halt.subscribe();
            tokio::task::spawn_local(async move {
                tokio::select! {
                    on = switched_on(&mut stop) => {
                        if !on {
                            return;
                        }
                        shared.stopped.set(true);
                    }
                    on = switched_on(&mut halt) => {
                        if !on {
                            return;
                        }
                    }
                }
                for a in aborts {
                    a.abort();
                }
            })
        };
        // A client still waiting on the server END_GRACE after the window closed: its
        // wait is ended, said once, and the results so far are reported (the switch is
        // the coordinator's, see [`run`]).
        let overrun = t.end.map(|_| {
            let aborts: Vec<_> = clients.iter().map(|c| c.abort_handle()).collect();
            tokio::task::spawn_local(async move {
                if !switched_on(&mut overrun_rx).await {
                    return;
                }
                let waiting = aborts.iter().filter(|a| !a.is_finished()).count();
                if waiting > 0 {
                    eprintln!(
                        "load: {waiting} client{} still waited on the server {} after the measured window closed; \
                         stopped waiting (a stalled server or path?)",
                        if waiting == 1 { "" } else { "s" },
                        crate::units::format_duration(END_GRACE)
                    );
                }
                for a in aborts {
                    a.abort();
                }
            })
        });
        let mut left = Vec::new();
        for c in clients {
            if let Ok(session) = c.await {
                left.extend(session.map(|s| *s));
            }
        }
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
        let mut recorder = shared.recorder.replace(Recorder::new());
        recorder.finish();
        let (setup_connects, setup_connect_ns) = *shared.setup.borrow();
        Ok(Box::new(WorkerResult {
            recorder,
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
        }))
    });
    result.map(|r| *r)
}

/// A connection before the clock starts (a persistent client's or a pool's).
async fn open_setup(shared: &WorkerShared) -> Option<Session> {
    match open(shared).await {
        Ok((s, t)) => {
            let mut setup = shared.setup.borrow_mut();
            setup.0 += 1;
            setup.1 += t.total_ns;
            Some(s)
        }
        Err(e) => {
            note_first_error(shared, || e.to_string());
            None
        }
    }
}

async fn open(shared: &WorkerShared) -> Result<(Session, Timeline), ConnectError> {
    let ep: &Endpoint = &shared.plan.endpoint;
    let cursor = PhaseCursor::default();
    let attempt = proto::connect(ep, &cursor);
    let (session, timeline) = attempt.await?;
    if shared.server_version.borrow().is_none() {
        *shared.server_version.borrow_mut() = session.server_version().map(str::to_string);
        *shared.tls.borrow_mut() = timeline.tls.clone();
    }
    Ok((session, timeline))
}

/// Keeps the run's first error; later ones are only counted, never formatted.
fn note_first_error(shared: &WorkerShared, message: impl FnOnce() -> String) {
    let mut first = shared.first_error.borrow_mut();
    if first.is_none() {
        *first = Some(message());
    }
}

/// The failure's counting key: the SQLSTATE for server errors (so they group by
/// class), else the phase and kind.
fn failure_key(e: &ConnectError) -> String {
    match &e.kind {
        ErrorKind::Server { code, .. } => code.clone(),
        _ => e.key(),
    }
}

/// A Poisson schedule of intended starts for one client.
struct Schedule {
    next: Instant,
    mean_gap_s: f64,
}

impl Schedule {
    fn advance(&mut self, rng: &mut crate::workload::Rng) -> Instant {
        let at = self.next;
        // Exponential gaps give Poisson arrivals (pgbench -R does the same).
        let gap = -rng.unit().ln() * self.mean_gap_s;
        self.next += Duration::from_secs_f64(gap);
        at
    }
}

/// One client's loop. Returns its persistent session, for closing outside the timed
/// region. On Ctrl-C the worker aborts this task wherever it waits.
async fn client(id: usize, shared: Rc<WorkerShared>, mut session: Option<Session>) -> Option<Session> {
    let plan = shared.plan.clone();
    let t = shared.times.borrow().expect("set before clients run");
    let global_id = plan.first_client + id;
    // One executor per script (each has its own variables). The first is seeded as
    // pgbench seeds a client, so its values repeat pgbench's for the same --random-seed;
    // further scripts get streams of their own.
    let mut execs: Vec<Executor> = plan
        .scripts
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let seat = ClientSeat {
                scale: plan.scale,
                client_id: global_id,
                // A worker of a many-machine run knows the clients before its own and its own.
                clients: plan.first_client + plan.clients,
                run_seed: plan.seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            };
            let mut exec = Executor::new(&s.script, seat);
            exec.debug = plan.debug;
            if plan.per_command {
                exec.time_commands(&s.script);
            }
            exec
        })
        .collect();
    let offsets = command_offsets(&plan.scripts);
    // The script of each transaction, by weight, from the client's own generator (pgbench
    // draws from its thread's; per client, a seed repeats the choices whatever -j is).
    let total_weight: i64 = plan.scripts.iter().map(|s| i64::from(s.weight)).sum();
    let seed = (global_id as u64 + 1).wrapping_mul(0x5851_F42D_4C95_7F2D) ^ plan.seed;
    let mut chooser = crate::workload::Rng::new(seed ^ 0xC0FF_EE00_D15C_0DE5);
    let mut schedule = plan.rate.map(|r| Schedule {
        next: t.warm_start,
        mean_gap_s: plan.clients as f64 / r,
    });
    let mut measured_done: u64 = 0;
    let mut reconnect_pause = false;
    // The executor holding the client's variables and random state (every script's
    // starts alike, so any may be first).
    let mut current = 0;
    // Paced clients wait on a high-resolution timer: tokio's rounds up to the next
    // millisecond, which -R would charge to latency.
    let mut timer = match schedule {
        Some(_) => crate::net::timer::PreciseTimer::new().ok(),
        None => None,
    };
    loop {
        if shared.stopped.get() {
            return session;
        }
        // Taking turns: wait (untimed) for this arm's turn; the run is over when the
        // turns are.
        let in_turn = match &plan.turn {
            Some(turn) => match turn.enter().await {
                Some(t) => Some(t),
                None => return session,
            },
            None => None,
        };
        // When to start: now, or the next intended start under -R.
        let intended = match schedule.as_mut() {
            Some(s) => s.advance(&mut execs[0].rng),
            None => Instant::now().max(t.warm_start),
        };
        if let Some(end) = t.end {
            if intended >= end {
                return session;
            }
        }
        if reconnect_pause {
            reconnect_pause = false;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The script is drawn first, as pgbench draws it: a skipped transaction has one
        // too (the log says which).
        let chosen = choose(&plan.scripts, total_weight, &mut chooser);
        // Under -R with a latency limit, a transaction already further behind its
        // schedule than the limit cannot meet it: it is skipped, not sent (pgbench -L),
        // so a backlog does not snowball into the server.
        if let (Some(limit), Some(_)) = (plan.latency_limit, &schedule) {
            let now = Instant::now();
            if now.saturating_duration_since(intended) > limit {
                if intended >= t.measure_start {
                    shared.recorder.borrow_mut().record_skip();
                    measured_done += 1;
                    log_transaction(
                        &shared,
                        Entry {
                            client: global_id,
                            number: measured_done,
                            script: chosen,
                            outcome: Outcome::Skipped,
                            at: now,
                            retries: 0,
                        },
                    );
                    if let End::TransactionsPerClient(n) = plan.end {
                        if measured_done >= n {
                            return session;
                        }
                    }
                }
                continue;
            }
        }
        if intended > Instant::now() {
            let precise = match timer.as_mut() {
                Some(t) => t.sleep_until(intended).await.is_ok(),
                None => false,
            };
            if !precise {
                tokio::time::sleep_until(intended.into()).await;
            }
        }
        let started = Instant::now();
        let measured = match &in_turn {
            Some(turn) => turn.measured,
            None => intended >= t.measure_start,
        };
        if chosen != current {
            // A pgbench client's scripts share its variables and random state: they
            // move to the executor of the script it runs now (two swaps, no copy).
            let (low, high) = execs.split_at_mut(chosen.max(current));
            low[chosen.min(current)].hand_over(&mut high[0]);
            current = chosen;
        }
        let exec = &mut execs[chosen];
        let script = &plan.scripts[chosen].script;
        // pgbench 15's retries: a serialization failure or a deadlock runs the
        // transaction again with the same random values (the generator as it was before
        // the first try), while tries remain, the latency limit is not passed and the
        // measurement has not ended; its latency runs from the first try.
        // A retry draws the same random values, as pgbench's does: the script's random
        // state before the first try is put back before each retry.
        let before = (plan.max_tries != 1).then(|| exec.random_state());
        let mut retries: u32 = 0;
        let outcome = loop {
            let outcome = transaction(&shared, exec, script, &mut session).await;
            match (&outcome, &before) {
                (Err(e), Some(rng))
                    if retriable(&e.error) && may_retry(&plan, retries + 1, intended, t.end) =>
                {
                    if plan.verbose_errors {
                        eprintln!(
                            "client {global_id} script {chosen}: {} (try {}, will retry)",
                            e.error,
                            retries + 1
                        );
                    }
                    retries += 1;
                    exec.restore_random_state(rng.clone());
                }
                _ => break outcome,
            }
        };
        let ended = Instant::now();
        if let Some(turn) = in_turn {
            turn.end(ended);
        }
        // A transaction in flight at the window's end finishes just after it: it belongs
        // to the window's last interval, not to a new interval a few microseconds long
        // (whose tps would be absurd). One that started after the end (a paced client
        // working off its backlog) goes in the interval it ended in, so the series shows
        // the drain where it happened rather than piled into the last interval.
        let index = (ended.saturating_duration_since(t.measure_start).as_nanos()
            / plan.interval.as_nanos().max(1)) as usize;
        let index = match (plan.end, t.end) {
            (End::Duration(d), Some(end)) if started < end => {
                index.min((d.as_nanos().div_ceil(plan.interval.as_nanos().max(1)) as usize).saturating_sub(1))
            }
            _ => index,
        };
        match outcome {
            Ok((bytes, connect)) => {
                if measured {
                    let latency = ended.saturating_duration_since(intended).as_nanos() as u64;
                    let mut rec = shared.recorder.borrow_mut();
                    rec.record_transaction(index, latency, bytes);
                    rec.record_script(chosen, true);
                    rec.record_retries(retries);
                    if plan.latency_limit.is_some_and(|l| latency > l.as_nanos() as u64) {
                        rec.late += 1;
                    }
                    if schedule.is_some() {
                        rec.record_lag(started.saturating_duration_since(intended).as_nanos() as u64);
                    }
                    if let Some(tl) = &connect {
                        rec.record_connect(index, tl);
                    }
                    if let Some(times) = &exec.times {
                        rec.record_commands_at(offsets[chosen], times);
                    }
                    if plan.progress.is_some() {
                        let mut p = shared.progress.borrow_mut();
                        p.transactions += 1;
                        p.latency_us.saturating_record((latency / 1_000).max(1));
                        if let Some(tl) = &connect {
                            p.connects += 1;
                            p.connect_ns += tl.total_ns;
                        }
                        if schedule.is_some() {
                            let lag = started.saturating_duration_since(intended).as_micros() as u64;
                            p.lag_max_us = p.lag_max_us.max(Some(lag));
                        }
                    }
                    let mut last = shared.last_end.borrow_mut();
                    *last = Some(last.map_or(ended, |l| l.max(ended)));
                    log_transaction(
                        &shared,
                        Entry {
                            client: global_id,
                            number: measured_done + 1,
                            script: chosen,
                            outcome: Outcome::Committed {
                                latency_ns: latency,
                                lag_ns: started.saturating_duration_since(intended).as_nanos() as u64,
                            },
                            at: ended,
                            retries,
                        },
                    );
                }
            }
            Err(TxError {
                error,
                connecting,
                lost,
            }) => {
                let message = || error.to_string();
                note_first_error(&shared, message);
                if plan.verbose_errors {
                    eprintln!(
                        "client {global_id} script {chosen}: {error} (try {}, failed)",
                        retries + 1
                    );
                }
                if measured {
                    let key = failure_key(&error);
                    let mut rec = shared.recorder.borrow_mut();
                    rec.record_failure(index, &key, message, true);
                    rec.record_script(chosen, false);
                    rec.record_retries(retries);
                    // A transaction that failed while connecting never ran the script:
                    // the executor's times are still the previous transaction's.
                    if let (Some(times), false) = (&exec.times, connecting) {
                        rec.record_commands_at(offsets[chosen], times);
                    }
                    if plan.progress.is_some() {
                        let mut p = shared.progress.borrow_mut();
                        p.failures += 1;
                        *p.failure_kinds.entry(key).or_default() += 1;
                    }
                    log_transaction(
                        &shared,
                        Entry {
                            client: global_id,
                            number: measured_done + 1,
                            script: chosen,
                            outcome: Outcome::Failed(log_failure(&error)),
                            at: ended,
                            retries,
                        },
                    );
                }
                reconnect_pause = connecting;
                let lost = connecting || lost;
                if exec.aborted.is_none()
                    && aborts_client(&error, lost, plan.continue_on_error, script.goes_on_after)
                {
                    exec.aborted = Some(format!("client {global_id} aborted in script {chosen}: {error}"));
                }
            }
        }
        if let Some(why) = exec.aborted.take() {
            // pgbench stops a client on an error it does not go on from, or whose script
            // leaves a transaction open; so does connbench, and the run reports it.
            note_first_error(&shared, || why.clone());
            shared.aborted.borrow_mut().push(why);
            if plan.exit_on_abort {
                shared.halt.send_replace(true);
            }
            return session;
        }
        if measured {
            measured_done += 1;
            if let End::TransactionsPerClient(n) = plan.end {
                if measured_done >= n {
                    return session;
                }
            }
        }
        if !plan.think.is_zero() {
            tokio::time::sleep(plan.think).await;
        }
    }
}

/// Hands a measured transaction to the worker's log, when there is one (after the
/// transaction has ended: the log is never in the timed part).
fn log_transaction(shared: &WorkerShared, e: Entry) {
    if let Some(log) = shared.log.borrow_mut().as_mut() {
        log.record(&e);
    }
}

/// A failure's kind in pgbench's log words.
fn log_failure(e: &ConnectError) -> Failure {
    match &e.kind {
        ErrorKind::Server { code, .. } if code == "40001" => Failure::Serialization,
        ErrorKind::Server { code, .. } if code == "40P01" => Failure::Deadlock,
        _ => Failure::Other,
    }
}

/// Whether a transaction that failed (after its tries) stops its client, as pgbench
/// decides (pgbench.c: `canRetryError`, `canContinueOnError`): a serialization failure
/// or a deadlock never does, it is counted and the client goes on; any other SQL error
/// does, unless --continue-on-error or the workload goes on after it (sysbench's
/// ignorable errors); an error of the script itself (`\set`, `\gset`, `\shell`, a
/// pipeline out of turn) always does, as pgbench 19 aborts on a meta-command's error even
/// with --continue-on-error. Where connbench differs on purpose: a connection that fails
/// or is lost (the server's FATAL, a reset, a refused connect) is counted and the client
/// connects again (pgbench aborts it), so a restart or a fault can be measured.
fn aborts_client(e: &ConnectError, lost: bool, continue_on_error: bool, goes_on_after: &[&str]) -> bool {
    if lost {
        return false;
    }
    match &e.kind {
        ErrorKind::Server { code, .. } => {
            // MySQL's codes are "errno/SQLSTATE" (1213/40001 is InnoDB's deadlock).
            let (number, state) = code.split_once('/').unwrap_or((code, code));
            let goes_on = matches!(state, "40001" | "40P01")
                || continue_on_error
                || goes_on_after.iter().any(|c| *c == number || *c == state);
            !goes_on
        }
        ErrorKind::Script { .. } => true,
        // Sockets, timeouts, TLS and the protocol: the connection's, not the script's.
        _ => false,
    }
}

/// Whether a failed try may be retried, as pgbench 15 decides: a serialization failure
/// (40001) or a deadlock (40P01) only.
fn retriable(e: &ConnectError) -> bool {
    matches!(&e.kind, ErrorKind::Server { code, .. } if code == "40001" || code == "40P01")
}

/// Whether another try is allowed after `tries`: within --max-tries (0: no limit), within
/// the latency limit of the intended start, and before the measurement's end.
fn may_retry(plan: &LoadPlan, tries: u32, intended: Instant, end: Option<Instant>) -> bool {
    let now = Instant::now();
    (plan.max_tries == 0 || tries < plan.max_tries)
        && plan
            .latency_limit
            .is_none_or(|l| now.saturating_duration_since(intended) <= l)
        && end.is_none_or(|e| now < e)
}

/// The script of the next transaction: with one, that one; with several, a draw in
/// [0, total weight) walked down the weights, as pgbench's chooseScript does.
fn choose(scripts: &[WeightedScript], total_weight: i64, rng: &mut crate::workload::Rng) -> usize {
    if scripts.len() == 1 {
        return 0;
    }
    let mut w = rng.range(0, total_weight - 1);
    for (i, s) in scripts.iter().enumerate() {
        w -= i64::from(s.weight);
        if w < 0 {
            return i;
        }
    }
    scripts.len() - 1
}

/// A failed transaction, whether it failed while connecting, and whether its
/// connection was lost.
struct TxError {
    error: ConnectError,
    connecting: bool,
    lost: bool,
}

/// One transaction under the plan's policy: get a connection, run the script, give the
/// connection back. Returns the bytes it moved and the connect it made, if any.
async fn transaction(
    shared: &WorkerShared,
    exec: &mut Executor,
    script: &Script,
    persistent: &mut Option<Session>,
) -> Result<(Counters, Option<Timeline>), TxError> {
    let plan = &shared.plan;
    let connect_err = |error| TxError {
        error,
        connecting: true,
        lost: false,
    };
    match &plan.policy {
        Policy::Persistent => {
            let mut made = None;
            if persistent.is_none() {
                let (s, tl) = open(shared).await.map_err(connect_err)?;
                exec.prepared = false;
                *persistent = Some(s);
                made = Some(tl);
            }
            let s = persistent.as_mut().expect("connected above");
            let before = s.counters();
            let result = exec.run(script, plan.mode, s).await;
            let bytes = delta(before, s.counters(), made.is_some());
            let lost = s.is_broken();
            if lost {
                *persistent = None;
            }
            result.map(|_| (bytes, made)).map_err(|e| TxError {
                error: e.error,
                connecting: false,
                lost,
            })
        }
        Policy::PerTransaction => {
            let (mut s, tl) = open(shared).await.map_err(connect_err)?;
            exec.prepared = false;
            let result = exec.run(script, plan.mode, &mut s).await;
            let bytes = s.counters();
            let lost = s.is_broken();
            s.close().await;
            result.map(|_| (bytes, Some(tl))).map_err(|e| TxError {
                error: e.error,
                connecting: false,
                lost,
            })
        }
        Policy::Pool { .. } => {
            let pool = shared.pool.as_ref().expect("pool policy has a pool");
            let (mut conn, made) = pool.acquire(shared).await.map_err(connect_err)?;
            // Prepared statements live on one connection; a pooled client may get
            // another one each time, so it prepares again when the connection changed.
            if made.is_some() || exec.connection != conn.id {
                exec.prepared = false;
            }
            exec.connection = conn.id;
            let before = conn.session.counters();
            let result = exec.run(script, plan.mode, &mut conn.session).await;
            let bytes = delta(before, conn.session.counters(), made.is_some());
            let lost = conn.session.is_broken();
            pool.release(conn);
            result.map(|_| (bytes, made)).map_err(|e| TxError {
                error: e.error,
                connecting: false,
                lost,
            })
        }
    }
}

/// Bytes moved between two counter readings; with `from_zero` the whole connection's
/// (it was opened inside this transaction).
fn delta(before: Counters, after: Counters, from_zero: bool) -> Counters {
    if from_zero {
        return after;
    }
    Counters {
        bytes_sent: after.bytes_sent - before.bytes_sent,
        bytes_received: after.bytes_received - before.bytes_received,
        round_trips: after.round_trips - before.round_trips,
    }
}

/// A pooled connection.
struct Pooled {
    id: u64,
    session: Session,
    created: Instant,
    last_used: Instant,
}

/// A client-side connection pool for the clients of one worker thread: at most `size`
/// connections; a connection older than `max_lifetime` is retired when it comes back,
/// and one idle longer than `idle_timeout` is closed instead of handed out.
struct Pool {
    size: usize,
    max_lifetime: Option<Duration>,
    idle_timeout: Option<Duration>,
    state: RefCell<PoolState>,
    freed: Notify,
}

struct PoolState {
    idle: Vec<Pooled>,
    open: usize,
    next_id: u64,
}

impl Pool {
    fn new(size: usize, max_lifetime: Option<Duration>, idle_timeout: Option<Duration>) -> Pool {
        Pool {
            size: size.max(1),
            max_lifetime,
            idle_timeout,
            state: RefCell::new(PoolState {
                idle: Vec::new(),
                open: 0,
                next_id: 0,
            }),
            freed: Notify::new(),
        }
    }

    fn expired(&self, c: &Pooled, now: Instant) -> bool {
        self.max_lifetime.is_some_and(|l| now - c.created >= l)
            || self.idle_timeout.is_some_and(|t| now - c.last_used >= t)
    }

    /// A connection: an idle one, a new one when below `size`, or the next one freed.
    async fn acquire(&self, shared: &WorkerShared) -> Result<(Pooled, Option<Timeline>), ConnectError> {
        loop {
            let now = Instant::now();
            let mut retired = Vec::new();
            let ready = {
                let mut st = self.state.borrow_mut();
                let mut found = None;
                while let Some(c) = st.idle.pop() {
                    if self.expired(&c, now) {
                        st.open -= 1;
                        retired.push(c.session);
                    } else {
                        found = Some(c);
                        break;
                    }
                }
                match found {
                    Some(c) => Some(Ok(c)),
                    None if st.open < self.size => {
                        st.open += 1;
                        st.next_id += 1;
                        Some(Err(st.next_id))
                    }
                    None => None,
                }
            };
            for s in retired {
                tokio::task::spawn_local(s.close());
            }
            match ready {
                Some(Ok(c)) => return Ok((c, None)),
                Some(Err(id)) => match open(shared).await {
                    Ok((session, tl)) => {
                        let now = Instant::now();
                        return Ok((
                            Pooled {
                                id,
                                session,
                                created: now,
                                last_used: now,
                            },
                            Some(tl),
                        ));
                    }
                    Err(e) => {
                        self.state.borrow_mut().open -= 1;
                        self.freed.notify_one();
                        return Err(e);
                    }
                },
                None => self.freed.notified().await,
            }
        }
    }

    /// A connection opened before the clock (see `worker`), idle and young.
    fn add(&self, session: Session) {
        let now = Instant::now();
        let mut st = self.state.borrow_mut();
        st.open += 1;
        st.next_id += 1;
        let id = st.next_id;
        st.idle.push(Pooled {
            id,
            session,
            created: now,
            last_used: now,
        });
    }

    /// Gives a connection back; a broken or too-old one is closed instead.
    fn release(&self, mut c: Pooled) {
        let now = Instant::now();
        let retire = c.session.is_broken() || self.max_lifetime.is_some_and(|l| now - c.created >= l);
        {
            let mut st = self.state.borrow_mut();
            if retire {
                st.open -= 1;
            } else {
                c.last_used = now;
                st.idle.push(c);
                drop(st);
                self.freed.notify_one();
                return;
            }
        }
        tokio::task::spawn_local(c.session.close());
        self.freed.notify_one();
    }

    /// Every idle connection, for closing at the end.
    fn drain(&self) -> Vec<Session> {
        self.state
            .borrow_mut()
            .idle
            .drain(..)
            .map(|c| c.session)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Phase;

    fn server(code: &str) -> ConnectError {
        let message = "the server's words".to_string();
        ConnectError::new(
            Phase::Query,
            ErrorKind::Server {
                code: code.into(),
                message,
            },
        )
    }

    #[test]
    fn which_errors_abort_a_client() {
        let script = ConnectError::new(
            Phase::Query,
            ErrorKind::Script {
                key: "division-by-zero",
                message: "command 1 (\\set x 1/0): division by zero".into(),
            },
        );
        let reset = ConnectError::new(
            Phase::Query,
            ErrorKind::io(std::io::ErrorKind::ConnectionReset.into(), ""),
        );
        let sysbench = crate::workload::sysbench::IGNORABLE;
        // (error, connection lost, --continue-on-error, workload's list) -> aborts
        for (e, lost, go_on, list, aborts) in [
            // An SQL error aborts, as in pgbench, unless --continue-on-error.
            (server("22012"), false, false, &[][..], true),
            (server("22012"), false, true, &[][..], false),
            (server("1062/23000"), false, false, &[][..], true),
            // A serialization failure or deadlock never does (PostgreSQL's or MySQL's).
            (server("40001"), false, false, &[][..], false),
            (server("40P01"), false, false, &[][..], false),
            (server("1213/40001"), false, false, &[][..], false),
            // sysbench's ignorable errors, for its workloads: by SQLSTATE or errno.
            (server("23505"), false, false, sysbench, false),
            (server("1205/HY000"), false, false, sysbench, false),
            (server("22012"), false, false, sysbench, true),
            // The script's own error always does, as in pgbench 19.
            (script, false, true, sysbench, true),
            // A lost connection never does: the client connects again.
            (server("57P01"), true, false, &[][..], false),
            (reset, false, false, &[][..], false),
        ] {
            assert_eq!(
                aborts_client(&e, lost, go_on, list),
                aborts,
                "{e} lost={lost} go_on={go_on}"
            );
        }
    }
}

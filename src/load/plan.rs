//! The load plan and what a run returns: the types `options` builds from flags or a
//! suite cell ([`LoadPlan`], its [`Policy`] and [`End`]), and the plain data
//! `threads::run` hands back ([`LoadRun`], [`Progress`]) for `stats` to
//! read. Apart from `threads` so a reader of the plan need not read the machinery.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::host::{Accounting, Cpu, MachineUse};
use crate::load::log::LogFiles;
use crate::load::measurements::{Interval, Measurements};
use crate::net::transport::TlsInfo;
use crate::proto::Endpoint;
use crate::workload::{QueryMode, Script};

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
    /// `--connect-rate`: the connections opened before the clock (persistent clients', a
    /// pool's) start on an even schedule at this many a second; `None` starts them all
    /// at once ([`crate::load::connecting`]).
    pub connect_rate: Option<f64>,
    /// A live view's window on the connect ramp (`--metrics-listen`), counted into as it
    /// goes; `None` counts nothing beyond the run's own record.
    pub ramp_progress: Option<Arc<RampProgress>>,
}

/// The connect ramp as it goes, for a live view: the worker threads count into it the
/// connections they are to open, those they opened and the attempts that failed, at the
/// points where they count the ramp's own record, so its last reading is the ramp's
/// figures exactly. Atomics, which the threads share: the ramp is before the clock, so
/// nothing measured pays for them, and a scrape reads them while the ramp still runs.
#[derive(Debug, Default)]
pub struct RampProgress {
    pub wanted: AtomicU64,
    pub connected: AtomicU64,
    pub failed_attempts: AtomicU64,
}

impl RampProgress {
    /// `(wanted, connected, failed_attempts)` now.
    pub fn read(&self) -> (u64, u64, u64) {
        (
            self.wanted.load(Ordering::Relaxed),
            self.connected.load(Ordering::Relaxed),
            self.failed_attempts.load(Ordering::Relaxed),
        )
    }

    /// Counts `n` into `counter`, when there is a live view to count for.
    pub fn count(progress: &Option<Arc<RampProgress>>, counter: fn(&RampProgress) -> &AtomicU64, n: u64) {
        if let Some(p) = progress {
            counter(p).fetch_add(n, Ordering::Relaxed);
        }
    }
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
    pub measurements: Measurements,
    /// With `-r`, the script's commands as written, in the order of
    /// `measurements.commands`; empty without.
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
    /// How the connections opened before the clock came up.
    pub ramp: ConnectRamp,
}

/// The connect ramp: the connections opened before the clock (a persistent client's, a
/// pool's), from the first attempt to the last one connected.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConnectRamp {
    /// Connections the ramp was to open, and those it did.
    pub wanted: u64,
    pub connected: u64,
    /// The pace asked for (`--connect-rate`, or the default for many clients); `None`:
    /// all at once.
    pub rate: Option<f64>,
    /// From the first attempt to the last connection made; zero when none was.
    pub took: Duration,
    /// Attempts that failed during the ramp (each refused one counted once, then backed
    /// off and tried again), by kind, with the first of each kind in full.
    pub failed_attempts: u64,
    pub failures: std::collections::BTreeMap<String, crate::connect::FailureCount>,
    /// The first attempt and the last connection made, in Unix microseconds on this
    /// machine's clock: what places the ramps of a many-machine run's workers on one
    /// clock (the store's, by each worker's offset) to merge them ([`ConnectRamp::add`]).
    pub first_attempt_unix_us: Option<i64>,
    pub last_connected_unix_us: Option<i64>,
}

impl ConnectRamp {
    /// Connects a second over the ramp; `None` when it took no measurable time.
    pub fn achieved_rate(&self) -> Option<f64> {
        (self.connected > 1 && !self.took.is_zero())
            .then(|| (self.connected - 1) as f64 / self.took.as_secs_f64())
    }

    /// Adds another process's ramp, its instants already on this one's clock: counts
    /// and paces summed (each worker paces its share), and the ramp from the first
    /// attempt of either to the last connection of either, so it ends when the last
    /// client anywhere connected.
    pub fn add(&mut self, o: &ConnectRamp) {
        self.wanted += o.wanted;
        self.connected += o.connected;
        self.rate = match (self.rate, o.rate) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        self.failed_attempts += o.failed_attempts;
        crate::load::measurements::add_failures(&mut self.failures, &o.failures);
        self.first_attempt_unix_us = match (self.first_attempt_unix_us, o.first_attempt_unix_us) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_connected_unix_us = self.last_connected_unix_us.max(o.last_connected_unix_us);
        // Never shorter than either ramp alone (one saved without its instants, or an
        // offset's error of a few microseconds, could make the span so).
        let longer = self.took.max(o.took);
        self.took = match (self.first_attempt_unix_us, self.last_connected_unix_us) {
            (Some(first), Some(last)) => {
                Duration::from_micros(last.saturating_sub(first).max(0) as u64).max(longer)
            }
            _ => longer,
        };
    }
}

impl LoadRun {
    /// A run that measured nothing yet: the start of a merge.
    pub fn empty() -> LoadRun {
        LoadRun {
            measurements: Measurements::new(),
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
            ramp: ConnectRamp::default(),
        }
    }
}

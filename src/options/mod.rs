//! The options layer: the one place where what a user typed, on the command line or in a
//! suite file, becomes the plans the measurement loops run.
//!
//! As ripgrep goes from low-level to high-level arguments: each setting has one parser
//! here (`parse_rate`, `parse_length`, ...), which the CLI uses as its clap value parser
//! and a suite cell's settings go through by name, so both sources accept the same
//! values and refuse the rest with the same message. [`LoadOptions`] and
//! [`connect_settings`] gather the typed values; [`LoadOptions::check`] is the validation
//! across settings; [`LoadOptions::plan`] builds the `LoadPlan` the engine runs. Nothing
//! is silently corrected: a value out of range is an error naming the setting and the
//! value (exit 2), never a panic in a worker thread.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _, Result};

pub mod cell;

pub use cell::Settings;

use crate::connect::ConnectSettings;
use crate::host::{Accounting, Source};
use crate::load::engine::{End, LoadPlan, Policy, WeightedScript};
use crate::load::init::{TableChoice, Tables};
use crate::load::log::LogSettings;
use crate::load::sysbench::SysbenchOptions;
use crate::load::workload::{Builtin, QueryMode, Script};
use crate::net::route::{PathKind, RouteSpec};
use crate::proto::Endpoint;
use crate::sandbox::SandboxInfo;
use crate::target::{Host, SslMode, Target};
use crate::units::parse_duration;

/// How clients get connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    /// One connection per client for the whole run (pgbench's default).
    Persistent,
    /// A new connection for every transaction, timed phase by phase (pgbench -C).
    PerTransaction,
    /// A client-side pool (pool_size, pool_max_lifetime, pool_idle_timeout).
    Pool,
}

impl Connection {
    pub const NAMES: [&'static str; 3] = ["persistent", "per-transaction", "pool"];
}

impl FromStr for Connection {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "persistent" => Ok(Connection::Persistent),
            "per-transaction" => Ok(Connection::PerTransaction),
            "pool" => Ok(Connection::Pool),
            _ => Err(format!(
                "invalid connection {s:?}: use persistent, per-transaction or pool"
            )),
        }
    }
}

/// The tables a run uses, found on the target, and their scale (`:scale`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dataset {
    pub tables: Tables,
    pub scale: i64,
}

/// A built-in script's text on `tables`. Built-ins are written for connbench's schema
/// (`SCHEMA.accounts`); on pgbench's tables the qualified names become pgbench's
/// (`pgbench_accounts`), so the statements are pgbench's own.
pub fn builtin_text(b: Builtin, tables: &Tables) -> String {
    match tables {
        Tables::Connbench(schema) => b.script(schema),
        Tables::Pgbench => b.script("pgbench").replace("pgbench.", "pgbench_"),
        Tables::Sysbench { .. } => b.script(""),
    }
}

/// --tables: auto, connbench or pgbench.
pub fn parse_tables(v: &str) -> Result<TableChoice, String> {
    v.parse()
}

/// What a transaction runs: a built-in workload or a script file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Workload {
    Builtin(Builtin),
    File(PathBuf),
}

impl Workload {
    /// A built-in name (`tpcb-like`, ...) or else a file path.
    pub fn parse(v: &str) -> Workload {
        match Builtin::named(v) {
            Some(b) => Workload::Builtin(b),
            None => Workload::File(PathBuf::from(v)),
        }
    }

    pub fn name(&self) -> String {
        match self {
            Workload::Builtin(b) => b.as_str().to_string(),
            Workload::File(p) => p.display().to_string(),
        }
    }

    /// Whether it runs on connbench's tables (and so needs their scale).
    pub fn reads_dataset(&self) -> bool {
        match self {
            Workload::Builtin(b) => b.needs_tables(),
            Workload::File(_) => true,
        }
    }
}

/// One script of a run and its weight, pgbench's `NAME@W`: each transaction a client
/// runs one script, drawn with probability weight / total weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Weighted {
    pub workload: Workload,
    pub weight: u32,
}

impl Weighted {
    /// How a report names it: the name, with `@W` when scripts are mixed.
    pub fn name(&self, mixed: bool) -> String {
        if mixed {
            format!("{}@{}", self.workload.name(), self.weight)
        } else {
            self.workload.name()
        }
    }
}

/// A script weight after `@`: 0 to pgbench's limit (a 32-bit int).
fn parse_weight(flag: &str, v: &str, w: &str) -> Result<u32, String> {
    w.trim()
        .parse::<u32>()
        .ok()
        .filter(|&w| w <= i32::MAX as u32)
        .ok_or_else(|| {
            format!("invalid {flag} {v:?}: the weight after @ is a whole number from 0 to {} (e.g. {flag} NAME@2)", i32::MAX)
        })
}

/// The built-in script a name or a prefix of one names, as pgbench's -b takes them:
/// `se` is select-only, `t` tpcb-like; a prefix of several is refused, naming them.
pub fn find_builtin(name: &str) -> Result<Builtin, String> {
    let all = Builtin::ALL.map(Builtin::as_str).join(", ");
    if let Some(b) = Builtin::named(name) {
        return Ok(b);
    }
    let found: Vec<Builtin> = Builtin::ALL
        .into_iter()
        .filter(|b| !name.is_empty() && b.as_str().starts_with(name))
        .collect();
    match found[..] {
        [b] => Ok(b),
        [] => Err(format!(
            "no built-in script {name:?}: use one of {all} (or a prefix of one)"
        )),
        _ => Err(format!(
            "ambiguous built-in script {name:?}: it begins {}; give more of the name",
            found.iter().map(|b| b.as_str()).collect::<Vec<_>>().join(" and ")
        )),
    }
}

/// -b NAME[@W]: a built-in script (a prefix names it) and its weight (default 1).
pub fn parse_builtin_weighted(v: &str) -> Result<Weighted, String> {
    let (name, weight) = match v.rsplit_once('@') {
        Some((n, w)) => (n, parse_weight("-b", v, w)?),
        None => (v, 1),
    };
    let b = find_builtin(name).map_err(|e| format!("invalid -b {v:?}: {e}"))?;
    Ok(Weighted {
        workload: Workload::Builtin(b),
        weight,
    })
}

/// -f FILE[@W]: a script file and its weight (default 1); as in pgbench, the last `@`
/// starts the weight.
pub fn parse_file_weighted(v: &str) -> Result<Weighted, String> {
    let (path, weight) = match v.rsplit_once('@') {
        Some((p, w)) => (p, parse_weight("-f", v, w)?),
        None => (v, 1),
    };
    if path.is_empty() {
        return Err(format!(
            "invalid -f {v:?}: give a script file, e.g. -f bench.sql@2"
        ));
    }
    Ok(Weighted {
        workload: Workload::File(PathBuf::from(path)),
        weight,
    })
}

/// --sampling-rate: a fraction of transactions to log, above 0 and at most 1.
pub fn parse_sampling_rate(v: &str) -> Result<f64, String> {
    match v.trim().parse::<f64>() {
        Ok(r) if r > 0.0 && r <= 1.0 => Ok(r),
        _ => Err(format!(
            "invalid sampling rate {v:?}: give a fraction above 0 and at most 1, e.g. 0.01 for 1%"
        )),
    }
}

/// --aggregate-interval: whole seconds, as pgbench takes it.
pub fn parse_aggregate_interval(v: &str) -> Result<u64, String> {
    whole("aggregate interval", v, 1, 86_400, " seconds")
}

/// Why `--max-tries 0` is refused without an end to the retrying (as pgbench refuses it).
pub const UNLIMITED_TRIES: &str =
    "--max-tries 0 retries without limit, which needs an end to the retrying: give -T \
     (a duration) or -L (a latency limit), or a number of tries (e.g. --max-tries 10)";

/// --max-tries: tries of a transaction in all; 0 is no limit.
pub fn parse_max_tries(v: &str) -> Result<u32, String> {
    whole("max tries", v, 0, 1_000_000, " (0 is no limit, with -T or -L)")
}

fn whole<T>(what: &str, v: &str, min: T, max: T, hint: &str) -> Result<T, String>
where
    T: FromStr + PartialOrd + std::fmt::Display + Copy,
{
    match v.trim().parse::<T>() {
        Ok(n) if n >= min && n <= max => Ok(n),
        Ok(_) => Err(format!("invalid {what} {v:?}: give {min} to {max}{hint}")),
        Err(_) => Err(format!(
            "invalid {what} {v:?}: give a whole number from {min} to {max}"
        )),
    }
}

/// Clients: 1 to 100,000.
pub fn parse_clients(v: &str) -> Result<usize, String> {
    whole("clients", v, 1, 100_000, "")
}

/// A suite cell's `scale`: connbench's tables at this scale, 1 to 10,000.
pub fn parse_scale(v: &str) -> Result<u32, String> {
    whole("scale", v, 1, 10_000, " (each unit is 100,000 accounts)")
}

/// The schema of connbench's tables at `scale` for a suite cell that asks for one:
/// beside the run's `schema`, so the scale-1 tables other cells use stay as they are.
pub fn scaled_schema(schema: &str, scale: u32) -> String {
    format!("{schema}_scale{scale}")
}

/// A cell's `scale`, when it asks for one.
pub fn dataset_scale(s: &Settings) -> Result<Option<u32>> {
    get(s, "scale", parse_scale)
}

/// Worker threads: 1 to 1,024.
pub fn parse_threads(v: &str) -> Result<usize, String> {
    whole("threads", v, 1, 1024, "")
}

/// Pool size: at least one connection.
pub fn parse_pool_size(v: &str) -> Result<usize, String> {
    whole(
        "pool_size",
        v,
        1,
        100_000,
        " (a pool needs at least one connection)",
    )
}

/// Transactions per client (`-t`): at least one.
pub fn parse_transactions(v: &str) -> Result<u64, String> {
    whole("transactions", v, 1, u64::MAX, "")
}

/// Measured connections per target: at least one.
pub fn parse_samples(v: &str) -> Result<usize, String> {
    whole("samples", v, 1, 10_000_000, "")
}

/// A target rate in transactions per second: positive and finite.
pub fn parse_rate(v: &str) -> Result<f64, String> {
    match v.trim().parse::<f64>() {
        Ok(r) if r > 0.0 && r.is_finite() => Ok(r),
        _ => Err(format!(
            "invalid rate {v:?}: give a positive number of transactions per second, e.g. 500"
        )),
    }
}

/// How long to measure: seconds as a bare number (pgbench's `-T 30`) or a duration
/// (`30s`, `2m`); positive, and short enough for a clock to hold.
pub fn parse_length(v: &str) -> Result<Duration, String> {
    let t = v.trim();
    let d = if !t.is_empty()
        && t.bytes()
            .all(|b| b.is_ascii_digit() || b == b'.' || b == b'e' || b == b'E' || b == b'+')
    {
        t.parse::<f64>()
            .ok()
            .and_then(crate::units::positive_seconds)
            .ok_or_else(|| {
                format!("invalid duration {v:?}: give a positive length such as 30 (seconds), 30s or 2m")
            })?
    } else {
        parse_duration(t).map_err(|e| format!("invalid duration: {e}"))?
    };
    if d.is_zero() {
        return Err(format!(
            "invalid duration {v:?}: give a positive length such as 30s"
        ));
    }
    // A deadline is an Instant plus this; a century is past anything a run needs and
    // well inside what the clock can add.
    if d > Duration::from_secs(100 * 365 * 86_400) {
        return Err(format!("invalid duration {v:?}: too long (at most 100 years)"));
    }
    Ok(d)
}

/// A pause or a warm-up: zero or more.
pub fn parse_pause(v: &str) -> Result<Duration, String> {
    let d = parse_duration(v)?;
    if d > Duration::from_secs(365 * 86_400) {
        return Err(format!("{v:?} is too long (at most a year)"));
    }
    Ok(d)
}

/// A period (the per-interval series, progress): positive.
pub fn parse_period(v: &str) -> Result<Duration, String> {
    let d = parse_pause(v)?;
    if d.is_zero() {
        return Err(format!("{v:?} is no period: give a length such as 1s or 1m"));
    }
    Ok(d)
}

/// Progress every N seconds (`-P 5`) or a duration (`-P 500ms`).
pub fn parse_progress(v: &str) -> Result<Duration, String> {
    parse_length(v).map_err(|e| e.replace("duration", "progress period"))
}

/// A seed from the clock, for a run given none.
fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// --random-seed as given: a seed, or `None` for one from the clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeedArg(pub Option<u64>);

/// --random-seed: an unsigned integer, or pgbench's words: `time` for one from the clock,
/// `rand` for one from the kernel's random source (read now, so the report shows it).
pub fn parse_seed(v: &str) -> Result<SeedArg, String> {
    match v.trim() {
        "time" => Ok(SeedArg(None)),
        "rand" => {
            let mut b = [0u8; 8];
            std::fs::File::open("/dev/urandom")
                .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
                .map_err(|e| format!("--random-seed rand: cannot read /dev/urandom ({e}): give a number or \"time\""))?;
            Ok(SeedArg(Some(u64::from_le_bytes(b))))
        }
        s => s.parse::<u64>().map(|n| SeedArg(Some(n))).map_err(|_| {
            format!(
                "invalid random seed {v:?}: give an unsigned integer (0 to 18446744073709551615), \"time\" or \"rand\""
            )
        }),
    }
}

/// -D NAME=VALUE: a script variable's name and its value, as given (pgbench's values
/// are integers, doubles or strings; [`LoadOptions::script`] says which the script
/// engine takes).
pub fn parse_define(v: &str) -> Result<(String, String), String> {
    let (name, value) = v
        .split_once('=')
        .ok_or_else(|| format!("invalid -D {v:?}: write NAME=VALUE, e.g. -D scale=10"))?;
    let name = name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!(
            "invalid -D {v:?}: a variable name is letters, digits and '_'"
        ));
    }
    if name == "client_id" {
        return Err("invalid -D client_id: connbench numbers the clients itself".into());
    }
    Ok((name.to_string(), value.to_string()))
}

/// A latency limit (-L): milliseconds as a bare number, as pgbench takes it, or a
/// duration (50ms, 1s); positive.
pub fn parse_latency_limit(v: &str) -> Result<Duration, String> {
    let d = match v.trim().parse::<f64>() {
        Ok(ms) if ms.is_finite() && ms > 0.0 && ms <= 3.6e6 => Duration::from_secs_f64(ms / 1e3),
        Ok(_) => {
            return Err(format!(
                "invalid latency limit {v:?}: give milliseconds above 0 (at most an hour), e.g. 50"
            ))
        }
        Err(_) => parse_duration(v).map_err(|_| {
            format!("invalid latency limit {v:?}: give milliseconds (e.g. 50) or a duration (50ms, 1s)")
        })?,
    };
    if d.is_zero() {
        return Err(format!("invalid latency limit {v:?}: it must be above 0"));
    }
    Ok(d)
}

/// A relative precision: a fraction between 0 and 1 (0.05 is ±5%).
pub fn parse_precision(v: &str) -> Result<f64, String> {
    match v.trim().parse::<f64>() {
        Ok(p) if p > 0.0 && p < 1.0 => Ok(p),
        _ => Err(format!(
            "invalid precision {v:?}: give a fraction between 0 and 1, e.g. 0.05 for ±5%"
        )),
    }
}

pub fn parse_mode(v: &str) -> Result<QueryMode, String> {
    v.parse()
}

pub fn parse_connection(v: &str) -> Result<Connection, String> {
    v.parse()
}

pub fn parse_sslmode(v: &str) -> Result<SslMode, String> {
    SslMode::parse(v).map_err(|e| e.to_string())
}

/// A client-side pool's settings (`connection = pool`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolOptions {
    /// Connections in all, split evenly over the worker threads.
    pub size: usize,
    /// Retire a connection this old when it is returned.
    pub max_lifetime: Option<Duration>,
    /// Close a connection idle this long instead of handing it out.
    pub idle_timeout: Option<Duration>,
}

/// A load run's settings, from flags or a suite cell, each already parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadOptions {
    /// What each transaction runs, one script drawn by weight per transaction (one
    /// script: always that one), on tables in `schema`, sent as `mode` says.
    pub workloads: Vec<Weighted>,
    pub schema: String,
    /// Whose tables: connbench's in `schema`, pgbench's, or whichever is there.
    pub tables: TableChoice,
    pub mode: QueryMode,
    /// How clients get connections. None: the workload's default (per-transaction for
    /// connect-only, else persistent); the pool settings apply to `Some(Pool)`.
    pub connection: Option<Connection>,
    pub pool: PoolOptions,
    /// How many clients, on how many worker threads.
    pub clients: usize,
    pub threads: usize,
    /// How long: a warm-up that is not recorded, then the measurement, recorded in
    /// intervals of `interval`.
    pub warmup: Duration,
    pub end: End,
    pub interval: Duration,
    /// Pacing: a target rate for all clients together, and a pause after each transaction.
    pub rate: Option<f64>,
    pub think: Duration,
    /// Time every command of the script (`load -r`; suites do not report it).
    pub per_command: bool,
    /// pgbench's -L (`load` only).
    pub latency_limit: Option<Duration>,
    /// pgbench's --random-seed: `None` draws one from the clock.
    pub random_seed: Option<u64>,
    /// pgbench's -D NAME=VALUE: script variables set before each client starts.
    pub defines: Vec<(String, String)>,
    /// pgbench's --max-tries: tries of a transaction that failed with a serialization
    /// failure or a deadlock, in all (1: no retry; 0: no limit).
    pub max_tries: u32,
    /// pgbench's --verbose-errors: every failed try's error on stderr.
    pub verbose_errors: bool,
    /// pgbench's -d (`load` only): a trace of every command each client runs.
    pub debug: bool,
    /// pgbench's --exit-on-abort (`load` only): the first client that aborts ends the run.
    pub exit_on_abort: bool,
    /// pgbench 19's --continue-on-error: an SQL error fails its transaction and the client
    /// goes on, instead of aborting the client. Suite cells always go on: a client that
    /// stopped would change a cell's concurrency between repetitions unseen, while its
    /// failures are counted and reported.
    pub continue_on_error: bool,
    /// pgbench's -l and its options (`load` only): the transaction log.
    pub log: Option<LogSettings>,
    /// sysbench's options for the oltp-* workloads (`--sysbench NAME=VALUE`).
    pub sysbench: SysbenchOptions,
}

impl Default for LoadOptions {
    /// pgbench's defaults: tpcb-like, simple protocol, one client, 10 s.
    fn default() -> Self {
        LoadOptions {
            workloads: vec![Weighted {
                workload: Workload::Builtin(Builtin::TpcbLike),
                weight: 1,
            }],
            max_tries: 1,
            verbose_errors: false,
            debug: false,
            exit_on_abort: false,
            continue_on_error: false,
            log: None,
            mode: QueryMode::Simple,
            clients: 1,
            threads: 1,
            end: End::Duration(Duration::from_secs(10)),
            warmup: Duration::ZERO,
            rate: None,
            think: Duration::ZERO,
            per_command: false,
            latency_limit: None,
            random_seed: None,
            defines: Vec::new(),
            connection: None,
            pool: PoolOptions {
                size: 1,
                max_lifetime: None,
                idle_timeout: None,
            },
            interval: Duration::from_secs(1),
            schema: "connbench".into(),
            tables: TableChoice::Auto,
            sysbench: SysbenchOptions::default(),
        }
    }
}

/// One setting of a cell through its parser; the error names the setting.
fn get<T>(s: &Settings, key: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Option<T>> {
    s.get(key)
        .map(|v| parse(v).map_err(|e| anyhow!("setting {key}: {e}")))
        .transpose()
}

impl LoadOptions {
    /// A suite cell's settings, with the suite's length and warm-up.
    pub fn from_settings(
        s: &Settings,
        duration: Option<Duration>,
        warmup: Option<Duration>,
        schema: &str,
    ) -> Result<LoadOptions> {
        let d = LoadOptions::default();
        Ok(LoadOptions {
            workloads: s
                .get("workload")
                .map(|w| {
                    vec![Weighted {
                        workload: Workload::parse(w),
                        weight: 1,
                    }]
                })
                .unwrap_or(d.workloads),
            max_tries: d.max_tries,
            verbose_errors: d.verbose_errors,
            debug: d.debug,
            exit_on_abort: d.exit_on_abort,
            continue_on_error: true,
            log: d.log,
            mode: get(s, "mode", parse_mode)?.unwrap_or(d.mode),
            clients: get(s, "clients", parse_clients)?.unwrap_or(d.clients),
            threads: get(s, "threads", parse_threads)?.unwrap_or(d.threads),
            end: duration.map(End::Duration).unwrap_or(d.end),
            warmup: warmup.unwrap_or(d.warmup),
            rate: get(s, "rate", parse_rate)?,
            think: get(s, "think", parse_pause)?.unwrap_or(d.think),
            per_command: d.per_command,
            latency_limit: d.latency_limit,
            random_seed: d.random_seed,
            defines: d.defines,
            connection: get(s, "connection", parse_connection)?,
            pool: PoolOptions {
                size: get(s, "pool_size", parse_pool_size)?.unwrap_or(d.pool.size),
                max_lifetime: get(s, "pool_max_lifetime", parse_period)?,
                idle_timeout: get(s, "pool_idle_timeout", parse_period)?,
            },
            interval: get(s, "interval", parse_period)?.unwrap_or(d.interval),
            // A cell with a scale runs on connbench's tables of that scale, in their own
            // schema (the runner makes them once, `experiment::runner`).
            schema: match dataset_scale(s)? {
                Some(n) => scaled_schema(schema, n),
                None => schema.to_string(),
            },
            tables: match (dataset_scale(s)?, get(s, "tables", parse_tables)?) {
                (Some(_), None | Some(TableChoice::Connbench)) => TableChoice::Connbench,
                (Some(_), Some(_)) => bail!(
                    "setting scale: a scale asks for connbench's tables at that scale, not tables = {:?}; \
                     drop one of the two",
                    s.get("tables").map(String::as_str).unwrap_or_default()
                ),
                (None, t) => t.unwrap_or(d.tables),
            },
            sysbench: match get(s, "sysbench", crate::load::sysbench::parse_settings)? {
                Some(pairs) => {
                    SysbenchOptions::from_pairs(&pairs).map_err(|e| anyhow!("setting sysbench: {e}"))?
                }
                None => d.sysbench,
            },
        })
    }

    /// The connection policy, checked against the workload.
    pub fn policy(&self) -> Result<Policy> {
        let connect_only = self.connect_only();
        let connection = match (connect_only, self.connection) {
            (true, None | Some(Connection::PerTransaction)) => Connection::PerTransaction,
            (true, Some(other)) => bail!(
                "workload connect-only measures connection set-up, so it runs with connection \
                 per-transaction, not {other:?}"
            ),
            (false, c) => c.unwrap_or(Connection::Persistent),
        };
        Ok(match connection {
            Connection::Persistent => Policy::Persistent,
            Connection::PerTransaction => Policy::PerTransaction,
            Connection::Pool => Policy::Pool {
                size_per_thread: self.pool.size.div_ceil(self.threads()),
                max_lifetime: self.pool.max_lifetime,
                idle_timeout: self.pool.idle_timeout,
            },
        })
    }

    /// Threads never outnumber clients.
    pub fn threads(&self) -> usize {
        self.threads.min(self.clients).max(1)
    }

    /// The tables a check without a server assumes: pgbench's when asked for, else
    /// connbench's in `schema` (the built-in scripts parse the same either way).
    pub fn assumed_tables(&self) -> Tables {
        match self.tables {
            TableChoice::Pgbench => Tables::Pgbench,
            _ if self.on_sysbench_tables() => Tables::Sysbench {
                tables: self.sysbench.tables.unwrap_or(1),
                size: self.sysbench.table_size.unwrap_or(10_000),
            },
            _ => Tables::Connbench(self.schema.clone()),
        }
    }

    /// Whether the run is on sysbench's tables: asked for, or an oltp-* workload's.
    pub fn on_sysbench_tables(&self) -> bool {
        self.tables == TableChoice::Sysbench
            || self
                .workloads
                .iter()
                .any(|w| matches!(w.workload, Workload::Builtin(Builtin::Sysbench(_))))
    }

    /// Whether the run is connect-only (which then is its only script).
    pub fn connect_only(&self) -> bool {
        self.workloads
            .iter()
            .any(|w| w.workload == Workload::Builtin(Builtin::ConnectOnly))
    }

    /// Whether any script runs on the tables (and so needs their scale).
    pub fn reads_dataset(&self) -> bool {
        self.workloads.iter().any(|w| w.workload.reads_dataset())
    }

    /// A warning when tpcb-like runs with more `clients` (all of the run's) than the
    /// tables' `scale`: each of its transactions updates one of `scale` branches rows, so
    /// the clients queue on those rows' locks, and the run measures the queue rather than
    /// the server (pgbench's documentation asks for a scale at least the clients).
    pub fn scale_warning(&self, clients: usize, scale: i64) -> Option<String> {
        let tpcb = self
            .workloads
            .iter()
            .any(|w| w.workload == Workload::Builtin(Builtin::TpcbLike));
        (tpcb && clients as i64 > scale).then(|| {
            format!(
                "tpcb-like with {clients} clients on scale {scale}: every transaction updates one of {scale} \
                 branches row{}, so the clients queue on {} lock{} and the run measures that queue, not the \
                 server; make the scale at least the clients (connbench init TARGET -s {clients}), as pgbench's \
                 documentation asks",
                if scale == 1 { "" } else { "s" },
                if scale == 1 { "its" } else { "their" },
                if scale == 1 { "" } else { "s" },
            )
        })
    }

    /// How a report names the workload: the script's name, or each `NAME@W`, in order.
    pub fn workload_name(&self) -> String {
        let mixed = self.workloads.len() > 1;
        let names: Vec<String> = self.workloads.iter().map(|w| w.name(mixed)).collect();
        names.join(", ")
    }

    /// The scripts with their weights, parsed on `tables` (files are read here), checked
    /// as pgbench checks them: at most 128, a positive total weight, and connect-only
    /// alone.
    pub fn scripts(&self, tables: &Tables) -> Result<Vec<WeightedScript>> {
        if self.workloads.is_empty() {
            bail!("no script to run: give -b NAME or -f FILE");
        }
        if self.workloads.len() > 128 {
            bail!(
                "{} scripts given: pgbench takes at most 128, and so does connbench",
                self.workloads.len()
            );
        }
        if self.connect_only() && self.workloads.len() > 1 {
            bail!("connect-only opens and closes a connection per transaction and runs nothing, so it cannot be mixed with other scripts");
        }
        if self.workloads.iter().map(|w| u64::from(w.weight)).sum::<u64>() == 0 {
            bail!("every script has weight 0, so none would ever run: give one a weight above 0 (NAME@1)");
        }
        let texts = self
            .workloads
            .iter()
            .map(|w| {
                Ok(match (&w.workload, tables) {
                    (Workload::Builtin(Builtin::Sysbench(o)), &Tables::Sysbench { tables, size }) => (
                        o.as_str().to_string(),
                        crate::load::sysbench::script(*o, &self.sysbench, tables, size, self.mode),
                    ),
                    (Workload::Builtin(b @ Builtin::Sysbench(_)), other) => bail!(
                        "{} runs on sysbench's tables (sbtest1..N), not on {}; drop --tables or give \
                         --tables sysbench",
                        b.as_str(),
                        other.describe()
                    ),
                    (Workload::Builtin(b), Tables::Sysbench { .. }) if b.needs_tables() => bail!(
                        "{} runs on pgbench's or connbench's tables, not on sysbench's sbtest1..N; run it \
                         apart from the oltp-* workloads, with --tables connbench or pgbench",
                        b.as_str()
                    ),
                    (Workload::Builtin(b), _) => (b.as_str().to_string(), builtin_text(*b, tables)),
                    (Workload::File(path), _) => (
                        path.display().to_string(),
                        std::fs::read_to_string(path).with_context(|| {
                            format!(
                                "script {:?} is neither a built-in workload ({}) nor a readable file",
                                path.display().to_string(),
                                Builtin::ALL.map(Builtin::as_str).join(", ")
                            )
                        })?,
                    ),
                })
            })
            .collect::<Result<Vec<(String, String)>>>()?;
        // One set of variables for all of them, as a pgbench client's scripts share theirs.
        let named: Vec<(&str, &str)> = texts.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
        let scripts = Script::parse_many(&named, &self.defines)?;
        self.workloads
            .iter()
            .zip(scripts)
            .enumerate()
            .map(|(n, (w, mut script))| {
                let name = script.name.clone();
                script.number_statements(n);
                if let Workload::Builtin(Builtin::Sysbench(_)) = w.workload {
                    script.goes_on_after = crate::load::sysbench::IGNORABLE;
                }
                if self.mode != QueryMode::Simple {
                    // pgbench's MAX_ARGS: extended and prepared modes bind a parameter per
                    // `:name` written, and pgbench refuses more than 255 in a statement.
                    if let Some((at, q)) = script.commands.iter().enumerate().find_map(|(at, c)| match c {
                        crate::script::Command::Sql(q) if q.occurrences > 255 => Some((at, q)),
                        _ => None,
                    }) {
                        bail!(
                            "{name}: command {} (SQL): statement has too many arguments ({} variables, pgbench's \
                             maximum is 255 in -M {}); use fewer, or run with -M simple",
                            at + 1,
                            q.occurrences,
                            self.mode.as_str()
                        );
                    }
                }
                // A file with no command (empty, or only comments) is a mistake pgbench
                // refuses ("empty command list for script"); connect-only, the one
                // built-in without commands, runs nothing on purpose.
                if script.commands.is_empty() && matches!(w.workload, Workload::File(_)) {
                    bail!("{name}: empty command list for script: it has no SQL or \\ command to run");
                }
                if self.mode == QueryMode::Simple {
                    // pgbench aborts the client when it reaches \startpipeline in simple
                    // mode; so does connbench, saying so before the run.
                    if let Some(at) = script.commands.iter().position(|c| matches!(c, crate::script::Command::StartPipeline)) {
                        script.warnings.push(crate::script::ScriptError {
                            script: name.clone(),
                            line: script.lines[at],
                            why: "\\startpipeline: cannot use pipeline mode with the simple query protocol, so \
                                  the client aborts there (as pgbench's does); run with -M extended or -M prepared"
                                .into(),
                        });
                    }
                }
                Ok(WeightedScript {
                    script,
                    weight: w.weight,
                })
            })
            .collect()
    }

    /// Every check across settings, without connecting: what `--dry-run` runs. Returns
    /// the scripts' warnings: what will fail when it runs, as it does in pgbench.
    pub fn check(&self) -> Result<Vec<crate::script::ScriptError>> {
        crate::load::init::check_schema(&self.schema)?;
        self.policy()?;
        let warnings = self
            .scripts(&self.assumed_tables())?
            .into_iter()
            .flat_map(|w| w.script.warnings)
            .collect();
        if self.max_tries == 0 && self.latency_limit.is_none() && !matches!(self.end, End::Duration(_)) {
            bail!(UNLIMITED_TRIES);
        }
        if let (Some(s), End::Duration(d)) =
            (self.log.as_ref().and_then(|l| l.aggregate_interval_s), self.end)
        {
            check_aggregate_interval(s, d)?;
        }
        Ok(warnings)
    }

    /// The plan the engine runs, on `endpoint`, on the dataset found there.
    pub fn plan(
        &self,
        endpoint: Endpoint,
        dataset: &Dataset,
        netns: Option<Arc<std::fs::File>>,
        progress: Option<Duration>,
    ) -> Result<LoadPlan> {
        let policy = self.policy()?;
        let scale = dataset.scale;
        let scripts = self.scripts(&dataset.tables)?;
        Ok(LoadPlan {
            endpoint,
            scripts: Arc::new(scripts),
            max_tries: self.max_tries,
            verbose_errors: self.verbose_errors,
            debug: self.debug,
            exit_on_abort: self.exit_on_abort,
            continue_on_error: self.continue_on_error,
            mode: self.mode,
            clients: self.clients,
            threads: self.threads(),
            end: self.end,
            warmup: self.warmup,
            rate: self.rate,
            think: self.think,
            per_command: self.per_command,
            latency_limit: self.latency_limit,
            policy,
            interval: self.interval,
            progress,
            scale,
            netns,
            accounting: Default::default(),
            first_client: 0,
            seed: self.random_seed.unwrap_or_else(clock_seed),
            start_gate: None,
            turn: None,
            log: None,
        })
    }

    /// The tables the run uses and the scale `:scale` takes, read from the target (see
    /// [`crate::load::init::find_tables`]): a built-in workload must find them; a custom
    /// script falls back to `fallback` (pgbench's -s) when there are none, on the tables
    /// it would have used.
    pub async fn dataset(&self, direct: &Endpoint, fallback: i64) -> Result<Dataset> {
        if !self.reads_dataset() {
            return Ok(Dataset {
                tables: self.assumed_tables(),
                scale: fallback,
            });
        }
        if self.on_sysbench_tables() {
            let (tables, size) = crate::load::sysbench::find(direct, &self.sysbench).await?;
            return Ok(Dataset {
                tables: Tables::Sysbench { tables, size },
                scale: fallback,
            });
        }
        let found = crate::load::init::find_tables(direct, self.tables, &self.schema).await;
        let builtin_on_tables = self.workloads.iter().any(|w| match w.workload {
            Workload::Builtin(b) => b.needs_tables(),
            Workload::File(_) => false,
        });
        Ok(match found {
            Ok((tables, scale)) => Dataset {
                tables,
                scale: i64::from(scale),
            },
            Err(e) if builtin_on_tables => return Err(e),
            Err(_) => Dataset {
                tables: self.assumed_tables(),
                scale: fallback,
            },
        })
    }
}

/// pgbench's checks of --aggregate-interval against -T: no longer than the run, and the
/// run a whole number of intervals.
fn check_aggregate_interval(interval_s: u64, duration: Duration) -> Result<()> {
    let (interval_ms, duration_ms) = (u128::from(interval_s) * 1_000, duration.as_millis());
    if interval_ms > duration_ms {
        bail!(
            "--aggregate-interval {interval_s} is longer than the run (-T {}s): give an interval of at most \
             the run's length, as pgbench requires",
            duration.as_secs_f64()
        );
    }
    if duration_ms % interval_ms != 0 {
        bail!(
            "-T {}s is not a whole number of --aggregate-interval {interval_s} s intervals: give a -T that is \
             a multiple of {interval_s} s, as pgbench requires",
            duration.as_secs_f64()
        );
    }
    Ok(())
}

/// A connect cell's settings: samples and the query; one warm-up connection.
pub fn connect_settings(s: &Settings) -> Result<ConnectSettings> {
    Ok(ConnectSettings {
        samples: get(s, "samples", parse_samples)?.unwrap_or(100),
        warmup: 1,
        query: s.get("query").cloned(),
        interval: Duration::ZERO,
    })
}

/// Where a cell's client runs: the host's network, or a namespace behind a bridge and NAT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetPath {
    Host,
    Bridge,
}

pub fn netpath(s: &Settings) -> Result<NetPath> {
    get(s, "netpath", |v| match v {
        "host" => Ok(NetPath::Host),
        "bridge" => Ok(NetPath::Bridge),
        other => Err(format!("invalid netpath {other:?}: use host or bridge")),
    })
    .map(|n| n.unwrap_or(NetPath::Host))
}

/// A cell's route from its `path` and `distance` settings.
/// Whose CPU a run on `target` reads besides the client's: the sandbox's PostgreSQL (and
/// PgBouncer when the target is the pooler) or MariaDB when the target is the sandbox's; else the
/// server the user named (`--server-pid`, `--server-cgroup`); else none, with the reason
/// the output gives instead of a number.
pub fn accounting(
    target: &Target,
    sandbox: Option<&SandboxInfo>,
    user: Option<Source>,
) -> Result<Accounting> {
    if let Some(source) = user {
        source.check().map_err(|e| anyhow!("{e}"))?;
        return Ok(Accounting {
            server: Some(source),
            ..Default::default()
        });
    }
    if let Some(m) = sandbox
        .and_then(|sb| sb.mariadb.as_ref())
        .filter(|m| target.engine == crate::target::Engine::Mysql && m.port == target.port)
    {
        // mariadbd is one process with a thread per connection: its own times are all.
        return Ok(Accounting {
            server: Some(Source::Tree(m.pid)),
            ..Default::default()
        });
    }
    if let Some(sb) = sandbox.filter(|sb| [sb.postgres_port, sb.pgbouncer_port].contains(&target.port)) {
        if let Some(c) = &sb.cgroups {
            // Under a quota the servers are in cgroups of their own: their counters are
            // exact (every backend, forked and exited, in the kernel's own sum) and are
            // what the quota is measured against. A MariaDB beside PostgreSQL shares the
            // server group; idle, it adds next to nothing.
            return Ok(Accounting {
                server: Some(Source::Cgroup(c.server.cpu_dir.clone())),
                pooler: (target.port == sb.pgbouncer_port).then(|| Source::Cgroup(c.pooler.cpu_dir.clone())),
                ..Default::default()
            });
        }
        return Ok(Accounting {
            server: Some(Source::Tree(sb.postgres_pid)),
            pooler: (target.port == sb.pgbouncer_port).then_some(Source::Tree(sb.pgbouncer_pid)),
            ..Default::default()
        });
    }
    let local = match &target.host {
        Host::Unix(_) => true,
        Host::Tcp(h) => {
            h == "localhost"
                || target
                    .hostaddr
                    .or_else(|| h.parse().ok())
                    .is_some_and(|a: std::net::IpAddr| a.is_loopback())
        }
    };
    let main_process = match target.engine {
        crate::target::Engine::Postgres => "the postmaster's pid: `head -1 $PGDATA/postmaster.pid`",
        crate::target::Engine::Mysql => "the server's pid: `pidof mariadbd mysqld`",
    };
    Ok(Accounting {
        server_not_measured: Some(if local {
            format!(
                "not measured: a local server connbench did not start; give --server-pid ({main_process}) \
                 or --server-cgroup"
            )
        } else {
            "not measured (remote)".into()
        }),
        ..Default::default()
    })
}

pub fn route_spec(s: &Settings) -> Result<RouteSpec> {
    Ok(RouteSpec {
        path: get(s, "path", |v| PathKind::parse(v).map_err(|e| format!("{e:#}")))?
            .unwrap_or(PathKind::Direct),
        distance: get(s, "distance", parse_pause)?.unwrap_or(Duration::ZERO),
    })
}

/// A fault a load cell injects into the sandbox mid-measurement (`fault`, `fault_at`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// PgBouncer's immediate shutdown, then a start on the same port.
    PgbouncerRestart,
    /// PostgreSQL's fast shutdown, then a start on the same port.
    PostgresRestart,
    /// `pg_terminate_backend` on every client backend: dropped connections.
    TerminateBackends,
}

impl FaultKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::PgbouncerRestart => "pgbouncer-restart",
            FaultKind::PostgresRestart => "postgres-restart",
            FaultKind::TerminateBackends => "terminate-backends",
        }
    }
}

/// A cell's fault and when it strikes, after the measurement starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultSpec {
    pub kind: FaultKind,
    pub at: Duration,
}

/// A cell's `fault` (none by default, or `none`) and `fault_at` (default 3 s).
pub fn fault(s: &Settings) -> Result<Option<FaultSpec>> {
    let kind = get(s, "fault", |v| match v {
        "none" => Ok(None),
        "pgbouncer-restart" => Ok(Some(FaultKind::PgbouncerRestart)),
        "postgres-restart" => Ok(Some(FaultKind::PostgresRestart)),
        "terminate-backends" => Ok(Some(FaultKind::TerminateBackends)),
        other => Err(format!(
            "invalid fault {other:?}: use none, pgbouncer-restart, postgres-restart or terminate-backends"
        )),
    })?
    .flatten();
    let at = get(s, "fault_at", parse_period)?;
    match (kind, at) {
        (Some(kind), at) => Ok(Some(FaultSpec {
            kind,
            at: at.unwrap_or(Duration::from_secs(3)),
        })),
        (None, Some(_)) => bail!("setting fault_at: there is no fault to time; add fault = \"...\""),
        (None, None) => Ok(None),
    }
}

/// A cell's `server_cpus`: the CPU quota, in cores, of the sandbox's servers while the
/// cell runs (see `sandbox::cgroup`).
pub fn server_cpus(s: &Settings) -> Result<Option<f64>> {
    get(s, "server_cpus", crate::sandbox::cgroup::parse_cpus)
}

/// A cell's `sslmode` override, if it has one.
pub fn sslmode(s: &Settings) -> Result<Option<SslMode>> {
    get(s, "sslmode", parse_sslmode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_are_pgbench_s_words_or_numbers() {
        assert_eq!(parse_seed("time").unwrap(), SeedArg(None));
        assert_eq!(parse_seed("42").unwrap(), SeedArg(Some(42)));
        // rand draws from the kernel: two draws are a number each, and differ.
        let (a, b) = (
            parse_seed("rand").unwrap().0.unwrap(),
            parse_seed("rand").unwrap().0.unwrap(),
        );
        assert_ne!(a, b);
        assert!(parse_seed("-1").unwrap_err().contains("\"rand\""));
    }

    #[test]
    fn a_server_connbench_did_not_start_is_not_measured_and_says_why() {
        let remote = Target::parse("host=db.example.com dbname=x user=u").unwrap();
        let a = accounting(&remote, None, None).unwrap();
        assert_eq!(a.server, None);
        assert_eq!(a.server_not_measured.as_deref(), Some("not measured (remote)"));
        for local in [
            "host=/tmp dbname=x user=u",
            "host=127.0.0.1 dbname=x user=u",
            "host=localhost dbname=x user=u",
        ] {
            let a = accounting(&Target::parse(local).unwrap(), None, None).unwrap();
            assert!(a.server_not_measured.unwrap().contains("--server-pid"), "{local}");
        }
        // A source the user names must be readable now, or the run does not start.
        let me = Source::Tree(std::process::id());
        assert_eq!(
            accounting(&remote, None, Some(me.clone())).unwrap().server,
            Some(me)
        );
        assert!(accounting(&remote, None, Some(Source::Tree(u32::MAX))).is_err());
    }

    #[test]
    fn an_aggregate_interval_divides_the_run_as_pgbench_requires() {
        let s = Duration::from_secs;
        assert!(check_aggregate_interval(1, s(3)).is_ok());
        assert!(check_aggregate_interval(5, s(10)).is_ok());
        let e = check_aggregate_interval(2, s(3)).unwrap_err().to_string();
        assert!(e.contains("-T 3s") && e.contains("multiple of 2 s"), "{e}");
        let e = check_aggregate_interval(1, Duration::from_millis(2500))
            .unwrap_err()
            .to_string();
        assert!(e.contains("-T 2.5s"), "{e}");
        let e = check_aggregate_interval(10, s(5)).unwrap_err().to_string();
        assert!(e.contains("longer than the run"), "{e}");
    }

    #[test]
    fn every_bad_value_names_its_setting() {
        assert!(parse_rate("0").unwrap_err().contains("invalid rate \"0\""));
        assert!(parse_rate("nan").is_err());
        assert!(parse_pool_size("0").unwrap_err().contains("pool_size"));
        assert!(parse_clients("0").unwrap_err().contains("clients"));
        assert!(parse_length("100000000000000000000000s")
            .unwrap_err()
            .contains("duration"));
        assert!(parse_length("1e20").unwrap_err().contains("duration"));
        assert!(parse_length("0").is_err());
        assert_eq!(parse_length("2.5"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_length("3s"), Ok(Duration::from_secs(3)));
        assert!(parse_sslmode("sometimes").unwrap_err().contains("sslmode"));
        assert!(parse_period("0").is_err());
    }

    #[test]
    fn a_latency_limit_is_milliseconds_bare_as_in_pgbench_or_a_duration() {
        assert_eq!(parse_latency_limit("50"), Ok(Duration::from_millis(50)));
        assert_eq!(parse_latency_limit("0.5"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_latency_limit("2s"), Ok(Duration::from_secs(2)));
        for bad in ["0", "0ms", "-1", "nan", "inf", "soon"] {
            let e = parse_latency_limit(bad).unwrap_err();
            assert!(e.contains("latency limit") && e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn suite_settings_go_through_the_same_parsers() {
        let mut s = Settings::new();
        s.insert("rate".into(), "0".into());
        let e = LoadOptions::from_settings(&s, None, None, "connbench").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("setting rate: {}", parse_rate("0").unwrap_err())
        );
        let mut s = Settings::new();
        s.insert("pool_size".into(), "0".into());
        let e = LoadOptions::from_settings(&s, None, None, "connbench").unwrap_err();
        assert!(e.to_string().contains("pool_size"), "{e}");
    }

    #[test]
    fn a_cell_s_scale_names_its_own_tables_and_tpcb_like_above_the_scale_warns() {
        let mut s = Settings::new();
        s.insert("scale".into(), "8".into());
        let o = LoadOptions::from_settings(&s, None, None, "connbench").unwrap();
        assert_eq!(
            (o.schema.as_str(), o.tables),
            ("connbench_scale8", TableChoice::Connbench)
        );
        s.insert("tables".into(), "pgbench".into());
        let e = LoadOptions::from_settings(&s, None, None, "connbench").unwrap_err();
        assert!(e.to_string().contains("not tables = \"pgbench\""), "{e}");
        s.insert("scale".into(), "0".into());
        let e = LoadOptions::from_settings(&s, None, None, "connbench").unwrap_err();
        assert!(
            e.to_string().starts_with("setting scale: invalid scale \"0\""),
            "{e}"
        );
        // The warning: tpcb-like only, and only above the scale.
        let tpcb = LoadOptions::default();
        let w = tpcb.scale_warning(8, 1).unwrap();
        assert!(w.starts_with("tpcb-like with 8 clients on scale 1: "), "{w}");
        assert!(
            w.contains("connbench init TARGET -s 8") && !w.contains('\n'),
            "{w}"
        );
        assert_eq!(tpcb.scale_warning(8, 8), None);
        let select = LoadOptions {
            workloads: vec![Weighted {
                workload: Workload::Builtin(Builtin::SelectOnly),
                weight: 1,
            }],
            ..LoadOptions::default()
        };
        assert_eq!(select.scale_warning(8, 1), None);
    }

    #[test]
    fn builtins_on_pgbench_s_tables_name_pgbench_s_tables_only() {
        for b in Builtin::ALL {
            let text = builtin_text(b, &Tables::Pgbench);
            assert!(!text.contains("pgbench."), "{text}");
            for word in text.split(|c: char| !c.is_ascii_alphanumeric() && c != '_') {
                if ["accounts", "tellers", "branches", "history"]
                    .iter()
                    .any(|t| word.ends_with(t))
                {
                    assert!(word.starts_with("pgbench_"), "{b:?}: {word} in {text}");
                }
            }
        }
        let select = builtin_text(Builtin::SelectOnly, &Tables::Pgbench);
        assert!(
            select.contains("SELECT abalance FROM pgbench_accounts WHERE aid = :aid;"),
            "{select}"
        );
        assert!(builtin_text(Builtin::TpcbLike, &Tables::Connbench("s".into())).contains("s.tellers"));
    }

    #[test]
    fn builtin_prefixes_name_one_script_as_pgbench_s_do() {
        assert_eq!(find_builtin("se"), Ok(Builtin::SelectOnly));
        assert_eq!(find_builtin("si"), Ok(Builtin::SimpleUpdate));
        assert_eq!(find_builtin("t"), Ok(Builtin::TpcbLike));
        assert_eq!(find_builtin("tpcb-like"), Ok(Builtin::TpcbLike));
        assert!(find_builtin("s").unwrap_err().contains("ambiguous"));
        assert!(find_builtin("").is_err());
        assert!(find_builtin("x").unwrap_err().contains("no built-in script"));
        let w = parse_builtin_weighted("se@3").unwrap();
        assert_eq!(
            (w.workload, w.weight),
            (Workload::Builtin(Builtin::SelectOnly), 3)
        );
        let f = parse_file_weighted("a@b.sql@2").unwrap();
        assert_eq!((f.workload, f.weight), (Workload::File("a@b.sql".into()), 2));
        assert!(parse_file_weighted("x.sql@").is_err());
        assert!(parse_builtin_weighted("se@99999999999").is_err());
    }

    #[test]
    fn connect_only_refuses_other_policies() {
        let o = LoadOptions {
            workloads: vec![Weighted {
                workload: Workload::Builtin(Builtin::ConnectOnly),
                weight: 1,
            }],
            connection: Some(Connection::Pool),
            ..LoadOptions::default()
        };
        assert!(o.policy().unwrap_err().to_string().contains("per-transaction"));
        let o = LoadOptions {
            workloads: vec![Weighted {
                workload: Workload::Builtin(Builtin::ConnectOnly),
                weight: 1,
            }],
            ..LoadOptions::default()
        };
        assert_eq!(o.policy().unwrap(), Policy::PerTransaction);
    }

    #[test]
    fn pool_size_is_split_over_threads_rounding_up() {
        let o = LoadOptions {
            connection: Some(Connection::Pool),
            pool: PoolOptions {
                size: 5,
                ..LoadOptions::default().pool
            },
            clients: 8,
            threads: 2,
            ..LoadOptions::default()
        };
        assert!(matches!(
            o.policy().unwrap(),
            Policy::Pool {
                size_per_thread: 3,
                ..
            }
        ));
    }
}

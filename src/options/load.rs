//! [`LoadOptions`]: a load run's settings, from flags (built by `cli`) or from a suite
//! cell ([`LoadOptions::from_settings`]), each already parsed; the checks across
//! settings ([`LoadOptions::check`], what `--dry-run` runs), the scripts read and parsed
//! on the tables found, and the `LoadPlan` `load::threads` runs ([`LoadOptions::plan`]).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _, Result};

use super::cell::{dataset_scale, get, scaled_schema, Settings};
use super::parse::*;
use crate::dataset::pgbench::{TableChoice, Tables};
use crate::load::log::LogSettings;
use crate::load::plan::{End, LoadPlan, Policy, WeightedScript};
use crate::proto::Endpoint;
use crate::workload::sysbench::SysbenchOptions;
use crate::workload::{Builtin, QueryMode, Script};

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

/// A seed from the clock, for a run given none.
fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
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
    /// `--connect-rate` (a cell's `connect_rate`): connects a second for the connections
    /// opened before the clock; `None`: the default ([`LoadOptions::connect_rate`]).
    pub connect_rate: Option<f64>,
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
            connect_rate: None,
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
            connect_rate: get(s, "connect_rate", parse_connect_rate)?,
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
            sysbench: match get(s, "sysbench", crate::workload::sysbench::parse_settings)? {
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

    /// The connect ramp's pace: the rate given, else, from
    /// [`PACED_FROM`](crate::load::connecting::PACED_FROM) clients,
    /// [`DEFAULT_CONNECT_RATE`](crate::load::connecting::DEFAULT_CONNECT_RATE); fewer
    /// connect all at once, as they always have.
    pub fn connect_rate(&self) -> Option<f64> {
        use crate::load::connecting::{DEFAULT_CONNECT_RATE, PACED_FROM};
        self.connect_rate
            .or((self.clients >= PACED_FROM).then_some(DEFAULT_CONNECT_RATE))
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
                        crate::workload::sysbench::script(*o, &self.sysbench, tables, size, self.mode),
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
                    script.goes_on_after = crate::workload::sysbench::IGNORABLE;
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
        crate::dataset::pgbench::check_schema(&self.schema)?;
        self.policy()?;
        let warnings = self
            .scripts(&self.assumed_tables())?
            .into_iter()
            .flat_map(|w| w.script.warnings)
            .collect();
        if let (Some(s), End::Duration(d)) =
            (self.log.as_ref().and_then(|l| l.aggregate_interval_s), self.end)
        {
            check_aggregate_interval(s, d)?;
        }
        Ok(warnings)
    }

    /// The plan `load::threads` runs, on `endpoint`, on the dataset found there.
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
            connect_rate: self.connect_rate(),
            ramp_progress: None,
        })
    }

    /// The tables the run uses and the scale `:scale` takes, read from the target (see
    /// [`crate::dataset::pgbench::find_tables`]): a built-in workload must find them; a custom
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
            let (tables, size) = crate::dataset::sysbench::find(direct, &self.sysbench).await?;
            return Ok(Dataset {
                tables: Tables::Sysbench { tables, size },
                scale: fallback,
            });
        }
        let found = crate::dataset::pgbench::find_tables(direct, self.tables, &self.schema).await;
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

/// pgbench's refusal of `--max-tries 0` with nothing to end the retrying: a run length
/// (`-T`) or a latency limit (`-L`) the user gave. connbench's default end (a 10 s run)
/// is not the user's bound, so this is checked on the flags as given, where that shows;
/// a suite cell always tries once.
pub fn check_max_tries(max_tries: u32, length_given: bool, latency_limit: Option<Duration>) -> Result<()> {
    if max_tries == 0 && !length_given && latency_limit.is_none() {
        bail!(UNLIMITED_TRIES);
    }
    Ok(())
}

/// pgbench's checks of --aggregate-interval against -T: no longer than the run, and the
/// run a whole number of intervals.
pub(super) fn check_aggregate_interval(interval_s: u64, duration: Duration) -> Result<()> {
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

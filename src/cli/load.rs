//! The flags of `load` (pgbench's and connbench's own; pgbench's other spellings in
//! `pgbench`), of `init`, which makes the tables `load` runs on, and of a load's workers
//! on many machines; `LoadArgs::options` gathers them into the `LoadOptions` a suite cell
//! also becomes.

use std::time::Duration;

use clap::builder::{PossibleValuesParser, TypedValueParser as _};
use clap::Args;

use super::{parse_run_name, MetricsArgs, PgbenchArgs, ScriptArgs, ServerArgs, StoreArgs};
use anyhow::{anyhow, bail, Context as _, Result};

use crate::dataset::pgbench::{TableChoice, Tables};
use crate::experiment::workers::share;
use crate::host::Source;
use crate::load::plan::End;
use crate::options::{
    self, Connection, LoadCommand, LoadOptions, LoadOutput, LoadRequest, LoadTarget, MetricsOptions,
    PoolOptions, WorkerShare,
};
use crate::workload::{Builtin, QueryMode};

pub(super) const LOAD_EXAMPLES: &str = "\
Examples:
  connbench load --sandbox -c 8 -j 2 -T 30                 # tpcb-like on a throwaway sandbox
  connbench load --sandbox pgbouncer_tx_unix -S -M prepared -c 4 -j 2
  connbench init 'host=db dbname=app' -s 10 && connbench load 'host=db dbname=app' -c 50 -T 300
  connbench load TARGET -C                                 # a new connection per transaction
  connbench load TARGET --connection pool --pool-size 1 --pool-max-lifetime 5s --think 500ms -c 1
  connbench load TARGET -R 500 -P 5 --json > run.json      # Poisson arrivals at 500 tps

pgbench's command lines work with `pgbench` replaced by `connbench load` (the database
last or first), on pgbench -i's tables or connbench init's:
  connbench load --client=10 --jobs=2 --time=60 --builtin=select-only mydb
  connbench load -b tpcb-like@9 -b select-only@1 -f mine.sql@2 -T 30 -l --aggregate-interval 5 mydb
  connbench load -h db.internal -p 6432 -U bench -S -c 8 -T 60 mydb     # -h is the host, as in pgbench

pgbench's options that connbench refuses, by name, with the reason: -i and its options
(-I, -F, -q, --foreign-keys, --partitions, --partition-method, --tablespace,
--index-tablespace, --unlogged-tables: `connbench init` makes connbench's tables). See
docs/pgbench.md.

An SQL error aborts its client, as in pgbench; --continue-on-error (pgbench 19's) counts
it and the client goes on. A lost connection is counted and the client reconnects.

Exit codes: 0 success, 1 a client aborted or every transaction failed, 2 usage or set-up
error, 130 Ctrl-C.";

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Where to create the tables: a conninfo string or URI (default: PG* variables).
    pub target: Option<String>,
    /// Scale: 1 branch, 10 tellers and 100,000 accounts per unit.
    #[arg(short = 's', long, default_value_t = 1)]
    pub scale: u32,
    /// The schema that holds connbench's tables.
    #[arg(long, default_value = "connbench")]
    pub schema: String,
    /// Remove connbench's tables (only tables connbench created) instead.
    #[arg(long)]
    pub drop: bool,
    /// Which tables: connbench's TPC-B-like ones (in --schema), or sysbench's
    /// sbtest1..N as `sysbench prepare` makes them (in the search path, or the
    /// connection's database), sized by --sysbench tables=N,table-size=M.
    #[arg(long, value_name = "WHICH", default_value = "connbench", value_parser = ["connbench", "sysbench"])]
    pub tables: String,
    /// sysbench's options for --tables sysbench (tables, table-size, rand-type).
    #[arg(long = "sysbench", value_name = "NAME=VALUE,...", value_parser = parse_sysbench)]
    pub sysbench: Vec<SysbenchSettings>,
}

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The database: conninfo string or URI (default: PG* variables). With --sandbox: a
    /// sandbox target name (default: unix).
    pub target: Option<String>,

    /// Print help (-h is pgbench's host, so help is -? as in pgbench, or --help).
    #[arg(short = '?', long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,

    /// Start a throwaway sandbox, create the tables at scale -s, and load it.
    #[arg(long)]
    pub sandbox: bool,
    #[command(flatten)]
    pub server: ServerArgs,

    /// Concurrent clients (database sessions when connections are persistent).
    #[arg(short = 'c', long, visible_alias = "client", default_value = "1", value_parser = options::parse_clients)]
    pub clients: usize,

    /// Worker threads the clients are spread over (pgbench -j).
    #[arg(short = 'j', long = "jobs", default_value = "1", value_parser = options::parse_threads)]
    pub threads: usize,

    /// Measure for this long: seconds (30) or a duration (30s, 2m) [default: 10].
    #[arg(short = 'T', long = "time", value_name = "DURATION", conflicts_with = "transactions", value_parser = options::parse_length)]
    pub time: Option<Duration>,

    /// Measure this many transactions per client instead of a duration.
    #[arg(short = 't', long, value_parser = options::parse_transactions)]
    pub transactions: Option<u64>,

    /// Run this long before measuring (e.g. 5s); transactions in it are not counted, so
    /// caches and connection pools are warm when the clock starts.
    #[arg(long, default_value = "0", value_parser = options::parse_pause)]
    pub warmup: Duration,

    /// Query protocol: simple (one Query message), extended (Parse/Bind/Execute each
    /// time) or prepared (Parse once per connection).
    #[arg(short = 'M', long = "protocol", default_value = "simple",
          value_parser = PossibleValuesParser::new(QueryMode::ALL.map(QueryMode::as_str)).try_map(|s| s.parse::<QueryMode>()))]
    pub mode: QueryMode,

    #[command(flatten)]
    pub scripts: ScriptArgs,

    /// Target rate for all clients together, in transactions per second (Poisson
    /// arrivals). Latency is measured from each transaction's scheduled start, so
    /// queueing delay is not hidden; the schedule lag is reported.
    #[arg(short = 'R', long = "rate", value_parser = options::parse_rate)]
    pub rate: Option<f64>,

    /// Pace the connections opened before the clock (each client's, or a pool's) at this
    /// many a second (2000, or 2000/s), on an even schedule; a refused connect backs off
    /// and is counted apart. The ramp's time, rate and failed attempts are reported.
    /// [default: 2000/s from 1,000 clients; fewer connect all at once]
    #[arg(long = "connect-rate", value_name = "N/s", value_parser = options::parse_connect_rate)]
    pub connect_rate: Option<f64>,

    /// Pause between a client's transactions (e.g. 500ms), as an application thinking.
    #[arg(long, default_value = "0", value_parser = options::parse_pause)]
    pub think: Duration,

    /// Report each command of the script apart, as pgbench -r does: its latency (mean,
    /// p50, p99) and failures over the measured transactions. One machine only: the
    /// per-command figures are not carried through --workers' store.
    #[arg(short = 'r', long = "report-per-command", conflicts_with = "workers")]
    pub per_command: bool,

    /// Count transactions slower than this as late (milliseconds, or a duration such as
    /// 50ms), as pgbench -L does. With -R, a transaction already further behind its
    /// schedule than the limit when it is due is skipped, not sent, and counted.
    /// One machine only: not with --workers.
    #[arg(short = 'L', long = "latency-limit", value_name = "MS", conflicts_with = "workers",
          value_parser = options::parse_latency_limit)]
    pub latency_limit: Option<Duration>,

    /// The seed of the clients' random generators (an unsigned integer, `time`, or `rand`
    /// for one from the kernel's random source): the
    /// same seed repeats every client's `random()` values and -R arrival gaps. The seed
    /// used is in the report either way, so any run's choices can be repeated.
    #[arg(long = "random-seed", value_name = "SEED", default_value = "time", value_parser = options::parse_seed)]
    pub random_seed: options::SeedArg,

    /// Set a script variable before each client starts, as pgbench -D does (integers for
    /// now; repeat for several). `-D scale=N` overrides the scale read from the tables.
    #[arg(short = 'D', long = "define", value_name = "NAME=VALUE", value_parser = options::parse_define)]
    pub defines: Vec<(String, String)>,

    /// Print a progress line (tps, p50, p99) every N seconds (or a duration: 500ms).
    #[arg(short = 'P', long = "progress", value_name = "SECONDS", value_parser = options::parse_progress)]
    pub progress: Option<Duration>,

    /// Length of the per-interval series (tps, mean, p50, p95, p99 per interval), e.g.
    /// 1s or 1m.
    #[arg(long, default_value = "1s", value_parser = options::parse_period)]
    pub interval: Duration,

    /// Print the per-interval series as a table (it is always in --json).
    #[arg(long)]
    pub series: bool,

    #[command(flatten)]
    pub metrics: MetricsArgs,

    /// How clients get connections.
    #[arg(long = "connection",
          value_parser = PossibleValuesParser::new(Connection::NAMES).try_map(|s| s.parse::<Connection>()))]
    pub connection: Option<Connection>,

    /// Shorthand for --connection per-transaction (pgbench -C).
    #[arg(short = 'C', long = "connect", conflicts_with = "connection")]
    pub per_transaction: bool,

    /// Pool: connections in all (split evenly over the worker threads).
    #[arg(long, default_value = "1", value_parser = options::parse_pool_size)]
    pub pool_size: usize,

    /// Pool: retire a connection this old when it is returned (e.g. 5s, 5m).
    #[arg(long, value_parser = options::parse_period)]
    pub pool_max_lifetime: Option<Duration>,

    /// Pool: close a connection idle this long instead of handing it out.
    #[arg(long, value_parser = options::parse_period)]
    pub pool_idle_timeout: Option<Duration>,

    /// Scale of the tables --sandbox creates (1 unit = 100,000 accounts), and the
    /// `:scale` of a custom script when no tables are found (pgbench -s).
    #[arg(short = 's', long, default_value_t = 1)]
    pub scale: u32,

    /// The schema that holds connbench's tables [default: connbench]. Giving it means
    /// connbench's tables (--tables connbench).
    #[arg(long)]
    pub schema: Option<String>,

    /// Whose tables the built-in scripts run on: connbench's (`connbench init`, in
    /// --schema) or pgbench's (`pgbench -i`: pgbench_accounts, ... in the search path).
    /// auto: connbench's when schema connbench holds them, else pgbench's when found,
    /// else an error naming both. `:scale` is read from the tables chosen (pgbench's as
    /// pgbench reads it: select count(*) from pgbench_branches).
    #[arg(long, value_name = "WHOSE", default_value = "auto",
          value_parser = PossibleValuesParser::new(TableChoice::NAMES).try_map(|s| s.parse::<TableChoice>()))]
    pub tables: TableChoice,

    /// sysbench's options for the oltp-* workloads, by sysbench's own names (its
    /// --tables, --table-size, --range-size, --point-selects, ..., --skip-trx,
    /// --rand-type): `--sysbench table-size=100000,rand-type=uniform`; repeatable.
    /// One flag rather than sysbench's own, whose --tables means another thing here.
    #[arg(long = "sysbench", value_name = "NAME=VALUE,...", value_parser = parse_sysbench)]
    pub sysbench: Vec<SysbenchSettings>,

    /// Print JSON (stable keys; schema in docs/schema/load.schema.json).
    #[arg(long)]
    pub json: bool,
    /// Reach the target through a sidecar relay: direct, sidecar-unix or sidecar-tcp
    /// (with a TLS target, the sidecar speaks TLS to the server and plaintext to you).
    #[arg(long, value_name = "PATH", default_value = "direct")]
    pub path: String,
    /// Add this round trip between you and the target with connbench's relay (e.g.
    /// 50ms); the achieved round trip is measured and printed first.
    #[arg(long, value_name = "RTT", value_parser = options::parse_pause)]
    pub distance: Option<Duration>,
    /// Measure the CPU of a local server connbench did not start: its main process
    /// (PostgreSQL's postmaster: `head -1 $PGDATA/postmaster.pid`; MariaDB's or MySQL's
    /// server: `pidof mariadbd mysqld`); every descendant is counted, including backends
    /// that exit during the run. connbench's own sandboxes are measured anyway.
    #[arg(long, value_name = "PID", conflicts_with = "server_cgroup")]
    pub server_pid: Option<u32>,
    /// Measure the CPU of the processes in this cgroup as the server's (e.g. a
    /// container's: /sys/fs/cgroup/system.slice/docker-ID.scope); v2 or v1 cpuacct.
    #[arg(long, value_name = "PATH")]
    pub server_cgroup: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub workers: WorkerArgs,
    #[command(flatten)]
    pub pgbench: PgbenchArgs,
}

/// One worker of a load run spread over many processes or machines.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Many machines")]
pub struct WorkerArgs {
    /// Run one worker's share of a load spread over N workers (processes or machines):
    /// clients and -R split as evenly as possible, every worker starting at one agreed
    /// instant, each saving to --store (PostgreSQL, to gather many machines) under --run.
    /// `connbench report RUN` merges them.
    #[arg(long, value_name = "N", requires = "run", value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub workers: Option<u32>,
    /// Which worker this is, from 0 (Kubernetes' Indexed Jobs set JOB_COMPLETION_INDEX).
    #[arg(long, value_name = "I", env = "JOB_COMPLETION_INDEX", requires = "workers")]
    pub worker_index: Option<u32>,
    /// The run's name: every worker of the run gives the same one.
    #[arg(long, value_name = "NAME", requires = "workers", value_parser = parse_run_name)]
    pub run: Option<String>,
    /// How long a worker waits for the others to be ready before it fails the run.
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = options::parse_period)]
    pub worker_timeout: Duration,
    #[command(flatten)]
    pub store: StoreArgs,
}

impl LoadArgs {
    /// The schema of connbench's tables: --schema, or `connbench`.
    pub fn schema(&self) -> &str {
        self.schema.as_deref().unwrap_or("connbench")
    }

    /// The flags as the options a suite cell also becomes (see `crate::options`).
    pub fn options(&self) -> anyhow::Result<LoadOptions> {
        let tables = match (self.tables, &self.schema) {
            (TableChoice::Pgbench, Some(schema)) => anyhow::bail!(
                "--schema {schema} names connbench's tables, but --tables pgbench asks for pgbench's \
                 (pgbench_accounts, ...), which have no schema of their own: drop one of the two"
            ),
            (TableChoice::Auto, Some(_)) => TableChoice::Connbench,
            (choice, _) => choice,
        };
        if let Some((name, why)) = self.pgbench.refused() {
            anyhow::bail!("{name}: connbench refuses it: {name} {why}");
        }
        options::check_max_tries(self.pgbench.max_tries, self.time.is_some(), self.latency_limit)?;
        let workloads = if self.scripts.scripts.is_empty() {
            LoadOptions::default().workloads
        } else {
            self.scripts.scripts.clone()
        };
        Ok(LoadOptions {
            workloads,
            max_tries: self.pgbench.max_tries,
            verbose_errors: self.pgbench.verbose_errors,
            debug: self.pgbench.debug,
            exit_on_abort: self.pgbench.exit_on_abort,
            continue_on_error: self.pgbench.continue_on_error,
            log: self.pgbench.log(),
            mode: self.mode,
            clients: self.clients,
            threads: self.threads,
            end: match (self.time, self.transactions) {
                (_, Some(n)) => End::TransactionsPerClient(n),
                (Some(t), None) => End::Duration(t),
                (None, None) => LoadOptions::default().end,
            },
            warmup: self.warmup,
            rate: self.rate,
            connect_rate: self.connect_rate,
            think: self.think,
            per_command: self.per_command,
            latency_limit: self.latency_limit,
            random_seed: self.random_seed.0,
            defines: self.defines.clone(),
            connection: if self.per_transaction {
                Some(Connection::PerTransaction)
            } else {
                self.connection
            },
            pool: PoolOptions {
                size: self.pool_size,
                max_lifetime: self.pool_max_lifetime,
                idle_timeout: self.pool_idle_timeout,
            },
            interval: self.interval,
            schema: self.schema().to_string(),
            tables,
            sysbench: sysbench_options(&self.sysbench)?,
        })
    }
}

impl LoadArgs {
    /// The flags validated into what `connbench load` does (see `crate::options::command`):
    /// pgbench's -V, -b list and --show-script print and exit; else every check that needs
    /// no server runs here, before a sandbox starts or a client connects.
    pub fn command(&self) -> Result<LoadCommand> {
        if self.pgbench.version {
            return Ok(LoadCommand::Print(format!(
                "connbench load (connbench) {}\n",
                env!("CARGO_PKG_VERSION")
            )));
        }
        if self.scripts.list {
            let mut out = String::from("built-in scripts (-b NAME, or a prefix of one):\n");
            for b in Builtin::ALL {
                out += &format!("  {}\n", b.as_str());
            }
            return Ok(LoadCommand::Print(out));
        }
        let mut options = self.options()?;
        if let Some(name) = &self.pgbench.show_script {
            return show_script(name, &options).map(LoadCommand::Print);
        }
        let warnings = options.check()?;
        let workers = self.worker_share(&mut options)?;
        Ok(LoadCommand::Run(Box::new(LoadRequest {
            options,
            warnings,
            target: self.load_target()?,
            path: self.path.clone(),
            distance: self.distance,
            scale: self.scale,
            progress: self.progress,
            server: match (self.server_pid, &self.server_cgroup) {
                (Some(pid), _) => Some(Source::Tree(pid)),
                (None, Some(dir)) => Some(Source::Cgroup(dir.clone())),
                (None, None) => None,
            },
            workers,
            metrics: self.metrics.listen.as_ref().map(|listen| MetricsOptions {
                listen: listen.clone(),
                linger: self.metrics.linger,
                run: self.workers.run.clone().unwrap_or_else(|| "load".into()),
                worker: self.workers.worker_index.unwrap_or(0),
            }),
            output: LoadOutput {
                json: self.json,
                series: self.series,
                failures_detailed: self.pgbench.failures_detailed,
                progress_timestamp: self.pgbench.progress_timestamp,
            },
            vacuum_note: self.pgbench.vacuum_all,
        })))
    }

    /// --workers: this worker's share of the clients and the rate, taken from `options`.
    fn worker_share(&self, options: &mut LoadOptions) -> Result<Option<WorkerShare>> {
        let Some(n) = self.workers.workers else {
            return Ok(None);
        };
        if self.sandbox {
            bail!(
                "--workers with --sandbox would give each worker a server of its own: start one with \
                 `connbench sandbox start` (or use your database) and give every worker its target"
            );
        }
        let index = self.workers.worker_index.context(
            "--workers needs --worker-index (or JOB_COMPLETION_INDEX, which Kubernetes' Indexed Jobs set)",
        )?;
        let (total_clients, total_rate) = (options.clients, options.rate);
        let (first, count) = share(options.clients, n as usize, index as usize)?;
        options.clients = count;
        options.rate = options.rate.map(|r| r * count as f64 / total_clients as f64);
        options.connect_rate = options
            .connect_rate
            .map(|r| r * count as f64 / total_clients as f64);
        Ok(Some(WorkerShare {
            index: index as usize,
            workers: n as usize,
            first,
            run: self.workers.run.clone().context("--workers needs --run NAME")?,
            store: self.workers.store.store.clone(),
            timeout: self.workers.worker_timeout,
            total_clients,
            total_rate,
        }))
    }

    /// Where the load runs: a sandbox of its own, or the target given (-h/-p/-U over it).
    fn load_target(&self) -> Result<LoadTarget> {
        let keys = self.pgbench.target_keys();
        if !self.sandbox {
            return Ok(LoadTarget::Given {
                text: self.target.clone().unwrap_or_default(),
                keys,
            });
        }
        if !keys.is_empty() {
            bail!("-h, -p and -U say where your database is; with --sandbox the sandbox's target does: drop one or the other");
        }
        Ok(LoadTarget::OwnSandbox {
            name: self.target.clone().unwrap_or_else(|| "unix".into()),
            durable: self.server.durable,
            cpus: self.server.cpus.cpus(),
            mariadb: self
                .target
                .as_deref()
                .is_some_and(crate::sandbox::is_mariadb_target),
        })
    }
}

/// --show-script NAME: the built-in's text on connbench's tables when asked for, else on
/// pgbench's, as pgbench prints it.
fn show_script(name: &str, options: &LoadOptions) -> Result<String> {
    let b = options::find_builtin(name).map_err(|e| anyhow!("--show-script {name:?}: {e}"))?;
    let tables = match options.tables {
        TableChoice::Connbench => Tables::Connbench(options.schema.clone()),
        _ => Tables::Pgbench,
    };
    Ok(format!(
        "-- {}\n{}",
        b.as_str(),
        options::builtin_text(b, &tables)
    ))
}

/// `--sysbench NAME=VALUE,...`, checked as it is parsed.
#[derive(Debug, Clone)]
pub struct SysbenchSettings(pub Vec<(String, String)>);

pub(super) fn parse_sysbench(v: &str) -> Result<SysbenchSettings, String> {
    crate::workload::sysbench::parse_settings(v).map(SysbenchSettings)
}

/// Every `--sysbench` given, in order, over sysbench's defaults.
pub fn sysbench_options(
    all: &[SysbenchSettings],
) -> anyhow::Result<crate::workload::sysbench::SysbenchOptions> {
    let pairs: Vec<(String, String)> = all.iter().flat_map(|s| s.0.iter().cloned()).collect();
    crate::workload::sysbench::SysbenchOptions::from_pairs(&pairs).map_err(anyhow::Error::msg)
}

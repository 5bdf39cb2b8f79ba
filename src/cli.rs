//! Command-line flags, as the user types them. Each value goes through the same parser in
//! `crate::options` that a suite cell's setting goes through, and `LoadArgs::options`
//! gathers them into the `LoadOptions` a suite cell also becomes; raw flags go no
//! further than the command handlers in `crate::commands`.

use std::time::Duration;

use clap::builder::{PossibleValuesParser, TypedValueParser as _};
use clap::{Args, Parser, Subcommand};

use crate::load::engine::End;
use crate::load::init::TableChoice;
use crate::load::workload::QueryMode;
use crate::options::{self, Connection, LoadOptions, PoolOptions};

mod pgbench;
pub mod record;
use crate::units::parse_duration;
pub use pgbench::{PgbenchArgs, ScriptArgs};

const EXIT_CODES: &str = "\
Exit codes:
  0    success
  1    the run finished, but a target failed every attempt (connect), every
       transaction failed (load), or every repetition of a cell failed (run, lab)
  2    usage or set-up error (bad target, sandbox could not start)
  130  interrupted by Ctrl-C (the results so far are still printed)";

/// What does it cost your application to reach its database, and which path is fastest?
///
/// connbench measures connection set-up phase by phase (socket, TLS, backend start,
/// authentication, backend initialisation, first query), runs pgbench-class load with
/// measured latency percentiles under connection policies (persistent, per-transaction,
/// a pool with a lifetime), and answers experiment suites with confidence intervals and
/// verdicts, stored in SQLite. It works against your own PostgreSQL or a throwaway
/// sandbox it starts itself (PostgreSQL and PgBouncer over Unix socket, TCP and TLS).
///
/// Start with `connbench lab --quick`.
#[derive(Debug, Parser)]
#[command(name = "connbench", version = crate::VERSION, after_help = EXIT_CODES, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Time every phase of opening a connection, per target, interleaved.
    ///
    /// Opens connections one after another and reports, for each phase (resolve,
    /// connect, tls, startup, auth, ready, and query with -q) and the total: mean ±
    /// stddev, p50, p90, p99, max, and the network round trips the phase waited for.
    /// Several targets are measured interleaved (A B A B ...), so they are compared
    /// under the same conditions; the first connections are warm-up, reported apart.
    #[command(after_help = CONNECT_EXAMPLES)]
    Connect(ConnectArgs),
    /// Create (or drop) the TPC-B-like tables `load` runs against, in their own schema.
    ///
    /// branches, tellers, accounts and history with pgbench's row counts per scale
    /// (accounts: 100,000 per unit), loaded with COPY into schema `connbench` so your own
    /// tables are never touched. Re-init replaces only tables connbench created.
    Init(InitArgs),
    /// Run a pgbench-class load and measure latency percentiles, throughput and cost.
    ///
    /// Clients run a workload in a loop for -T seconds (or -t transactions each), after an
    /// optional warm-up that is not counted. Reports tps with and without connection time,
    /// latency mean ± stddev and p50/p90/p95/p99/p99.9/max (all measured), failures by
    /// SQLSTATE, connections opened and their cost, client CPU per transaction, bytes, and
    /// a per-interval series.
    ///
    /// As in pgbench, -h is the host (with -p and -U); help is --help or -?.
    #[command(after_help = LOAD_EXAMPLES, disable_help_flag = true)]
    Load(Box<LoadArgs>),
    /// Run an experiment suite: a matrix of cells, repeated and interleaved, with
    /// confidence intervals and verdicts, saved to the results store as it goes.
    ///
    /// SUITE is a built-in suite (see `connbench suites`) or a TOML file. Cells whose
    /// targets are sandbox names run on a throwaway sandbox, unless --target maps the name
    /// to your own database.
    Run(RunArgs),
    /// List the built-in suites and the questions they answer.
    Suites,
    /// List stored runs, newest first (`connbench runs`), or show one (`runs show N`).
    Runs(RunsArgs),
    /// Print stored runs again as they printed when they ran, or write them as HTML with
    /// charts, Markdown (for posts), CSV (for spreadsheets) or JSON.
    ///
    /// With no output option, prints each run's report as `connbench run` printed it;
    /// --markdown or --json without FILE print that format instead. Give several runs
    /// (e.g. a lab's five) for one document.
    Report(ReportArgs),
    /// Compare two stored runs cell by cell: is A different from B (the baseline)?
    ///
    /// Cells are matched by name; each gets the ratio of the suite's figure with its
    /// confidence interval, Welch's p-value and a verdict, e.g. to see whether a change
    /// of server settings between two runs of the same suite made a difference.
    Compare {
        /// The run to judge, by number or name.
        run_a: String,
        /// The run it is compared with, by number or name.
        run_b: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// The main job: start a sandbox, run every built-in suite, answer each question.
    ///
    /// --quick fits in about 4 minutes on 2 cores (short runs, few repetitions: the
    /// answers carry wide intervals); --full runs each suite's own lengths.
    Lab(LabArgs),
    /// Start, inspect or stop a throwaway PostgreSQL + PgBouncer to measure against.
    #[command(subcommand)]
    Sandbox(SandboxCommand),
    /// Print Kubernetes manifests that run connbench (a load's workers, as an Indexed Job).
    #[command(subcommand)]
    Kubernetes(KubernetesCommand),
    /// Forward connections through a user-space hop that adds network distance.
    ///
    /// Listens on ADDR (host:port, or a Unix socket path) and opens a connection to the
    /// upstream for every client, adding half of --rtt to each direction (so a round trip
    /// grows by --rtt), optional jitter and a bandwidth cap. With no delay it is a sidecar
    /// proxy hop. Byte order, half-close and resets are passed through; a refused upstream
    /// resets the client. Runs until Ctrl-C, then prints what it relayed.
    #[command(after_help = RELAY_EXAMPLES)]
    Relay(RelayArgs),
    /// Record an application's database traffic into a trace, as a hop in front of it.
    ///
    /// Listens on ADDR and relays every connection to the upstream with no delay,
    /// decoding both directions (PostgreSQL's or MySQL's protocol): per session its
    /// connect and its phases, each request (SQL, prepared statements and their values,
    /// the server's time, rows, errors, transaction status) and the client's think time
    /// between them. Passwords and authentication messages are never written. A client's
    /// TLS request is answered "no" (the recorder reads plaintext). Streams to the trace
    /// as it goes; Ctrl-C ends the recording and prints what it holds.
    #[command(after_help = record::RECORD_EXAMPLES)]
    Record(record::RecordArgs),
    /// What a recorded application does, measured, and what distance, a pool or TLS would
    /// change.
    ///
    /// Reads a trace from `connbench record`: connections per second and their lifetime,
    /// requests and round trips per transaction, prepared or not, the time split between
    /// the server and network and the client's think time, the statements that take the
    /// most time in all (normalised, as pg_stat_statements does), and the round-trip
    /// model's predictions at added round trips, with a client-side pool and over TLS.
    #[command(after_help = record::TRACE_EXAMPLES)]
    Trace(record::TraceArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish or powershell).
    ///
    /// e.g. `connbench completions bash > ~/.local/share/bash-completion/completions/connbench`
    /// (docs/install.md has each shell's place).
    Completions {
        /// The shell to complete in.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff) to standard output, or write one per command.
    ///
    /// e.g. `connbench man | man -l -`, or `connbench man --dir /usr/local/share/man/man1`
    /// for connbench.1, connbench-load.1 and the other commands' pages.
    Man {
        /// Write connbench.1 and a page per command (connbench-load.1, ...) into DIR
        /// (created if needed) instead of printing connbench.1.
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
}

const RELAY_EXAMPLES: &str = "\
Examples:
  connbench relay --listen 127.0.0.1:6543 --upstream 127.0.0.1:5432 --rtt 50ms
  connbench relay --listen /tmp/proxy/.s.PGSQL.5432 --upstream db.internal:5432   # a sidecar (mkdir -p /tmp/proxy first)
  connbench relay --listen 127.0.0.1:6543 --upstream tcp --upstream-tls   # a sidecar to the running sandbox's PostgreSQL
  connbench relay --listen 127.0.0.1:6543 --upstream /var/run/postgresql/.s.PGSQL.5432 --rtt 2ms --jitter 200us --bandwidth 100Mbit";

#[derive(Debug, Args)]
pub struct RelayArgs {
    /// Where clients connect: host:port (port 0 picks one) or a Unix socket path.
    #[arg(long, value_name = "ADDR")]
    pub listen: String,
    /// Where every connection goes: host:port, a Unix socket path, or a running
    /// sandbox's target name (tcp, unix, tcp@NAME): its server's address.
    #[arg(long, value_name = "ADDR")]
    pub upstream: String,
    /// Round trip to add: half in each direction (e.g. 50ms, 500us).
    #[arg(long, value_name = "DURATION", default_value = "0ms", value_parser = parse_duration)]
    pub rtt: Duration,
    /// Each chunk's one-way delay varies uniformly within ± this.
    #[arg(long, value_name = "DURATION", default_value = "0ms", value_parser = parse_duration)]
    pub jitter: Duration,
    /// A cap per direction: 100Mbit, 1Gbit (bits per second) or 10MB (bytes per second).
    #[arg(long, value_name = "RATE", value_parser = crate::net::relay::parse_bandwidth)]
    pub bandwidth: Option<f64>,
    /// The upstream is a PostgreSQL server: open TLS to it (SSLRequest, then the
    /// handshake; the certificate is not verified, as sslmode=require) and carry the
    /// app's plaintext inside, as a cloud SQL proxy does. Needs a host:port upstream.
    #[arg(long)]
    pub upstream_tls: bool,
    /// Fault: reset each connection (both sides) once this many bytes have crossed it,
    /// both directions counted (e.g. 20000).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..), help_heading = "Faults")]
    pub reset_after: Option<u64>,
    /// Fault: refuse this share of new connections with a reset (0 to 1, e.g. 0.2).
    #[arg(long, value_name = "SHARE", default_value = "0", value_parser = parse_share, help_heading = "Faults")]
    pub refuse: f64,
    /// Fault: accept connections but never answer or forward (a hung proxy).
    #[arg(long, help_heading = "Faults")]
    pub stall: bool,
    /// Fault: pass each side's EOF on this much later (a slow close).
    #[arg(long, value_name = "DURATION", default_value = "0ms", value_parser = parse_duration, help_heading = "Faults")]
    pub slow_close: Duration,
    /// Fault: this long after the relay starts, cap the bandwidth of every direction at
    /// RATE (e.g. 10s=1Mbit): a link that degrades under a running load.
    #[arg(long, value_name = "AFTER=RATE", value_parser = parse_cut, help_heading = "Faults")]
    pub cut_bandwidth: Option<(Duration, f64)>,
}

/// `AFTER=RATE`: a duration and a bandwidth.
fn parse_cut(s: &str) -> Result<(Duration, f64), String> {
    let (after, rate) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected AFTER=RATE, e.g. 10s=1Mbit"))?;
    let after = parse_duration(after).map_err(|e| format!("{s:?}: {e}"))?;
    Ok((after, crate::net::relay::parse_bandwidth(rate)?))
}

/// A share from 0 to 1.
fn parse_share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a share from 0 to 1 (e.g. 0.2)")),
    }
}

#[derive(Debug, Args, Clone)]
pub struct StoreArgs {
    /// The results store: a SQLite file, or a PostgreSQL URL or conninfo where many
    /// machines save to one place (its password, if not in the URL, from
    /// CONNBENCH_STORE_PASSWORD or PGPASSWORD). Default: a SQLite file,
    /// $XDG_DATA_HOME/connbench/results.sqlite or ~/.local/share/connbench/results.sqlite.
    #[arg(long, value_name = "FILE|URL")]
    pub store: Option<String>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// A built-in suite name or a suite file.
    pub suite: String,
    /// Use your own database for a target name the suite uses: NAME=CONNINFO (repeat
    /// for several). A bare CONNINFO replaces every target.
    #[arg(long = "target", value_name = "NAME=CONNINFO")]
    pub targets: Vec<String>,
    /// The suite's quick profile: short runs, few repetitions.
    #[arg(long)]
    pub quick: bool,
    /// Print the cells and the order of the steps, and run nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub adaptive: AdaptiveArgs,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: StoreArgs,
    /// The schema of connbench's tables (load suites).
    #[arg(long, default_value = "connbench")]
    pub schema: String,
    #[command(flatten)]
    pub server: ServerArgs,
    /// Name the run in the store, to read it back later by name (`connbench report
    /// NAME`), as a Kubernetes Job's run is; a name the store holds already is refused
    /// before anything runs.
    #[arg(long = "run", value_name = "NAME", value_parser = parse_run_name)]
    pub run_name: Option<String>,
    #[command(flatten)]
    pub metrics: MetricsArgs,
}

/// The live metrics endpoint of `load` and `run`.
#[derive(Debug, Args, Clone)]
pub struct MetricsArgs {
    /// Serve live metrics for Prometheus at http://ADDR/metrics while the run lasts
    /// (HOST:PORT, or :PORT for every interface): transactions, failures by kind,
    /// connections and their time, clients, schedule lag, and a latency histogram fine
    /// enough for p99 within 4.4%; labelled with the run, the cell and the worker index.
    #[arg(long = "metrics-listen", value_name = "ADDR")]
    pub listen: Option<String>,
    /// Keep serving the final figures this long after the run ends, for a last scrape
    /// [default: the endpoint closes with the run].
    #[arg(long = "metrics-linger", value_name = "DURATION", requires = "listen",
          value_parser = options::parse_length)]
    pub linger: Option<Duration>,
}

/// Adaptive rounds: after the suite's repetitions, more interleaved rounds for the
/// answers still undecided, within a wall-clock budget.
#[derive(Debug, Args)]
pub struct AdaptiveArgs {
    /// Wall-clock limit for the whole run (e.g. 4m; a lab shares it among its suites);
    /// rounds are added for undecided answers while it allows, and planned rounds beyond
    /// the fifth are not begun when it does not. Without one, a suite runs exactly its
    /// repetitions, unless its file sets a `budget` for `run` (the built-in transport
    /// suite: 25m) [default: 220s for lab --quick, else the suite's or none].
    #[arg(long, value_name = "DURATION", value_parser = options::parse_length)]
    pub budget: Option<Duration>,
    /// With a budget: also add rounds until every ratio's interval is within ± this
    /// fraction of it, not only until it is decided [default: 0.05 for lab, else none].
    #[arg(long, value_name = "FRACTION", value_parser = options::parse_precision)]
    pub precision: Option<f64>,
}

/// How a sandbox's PostgreSQL is set up.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Sandbox only: keep PostgreSQL's durable defaults (synchronous_commit=on,
    /// checkpoints and autovacuum as usual) instead of the quiet settings connbench uses
    /// for connection-path questions.
    #[arg(long)]
    pub durable: bool,
    #[command(flatten)]
    pub cpus: SandboxCpuArgs,
}

/// The sandbox's size: CPU quotas for its servers (cgroups; root or a delegated cgroup v2
/// subtree).
#[derive(Debug, Args, Clone, Copy, Default)]
pub struct SandboxCpuArgs {
    /// Sandbox only: run the database servers (PostgreSQL and every backend, MariaDB) under
    /// a CPU quota of N cores (e.g. 0.5, 1, 2), as if on a server that size. Needs root (or
    /// a delegated cgroup v2 subtree in CONNBENCH_CGROUP_PARENT).
    #[arg(long, value_name = "N", value_parser = crate::sandbox::cgroup::parse_cpus)]
    pub server_cpus: Option<f64>,
    /// Sandbox only: run PgBouncer under a CPU quota of N cores, apart from the servers.
    #[arg(long, value_name = "N", value_parser = crate::sandbox::cgroup::parse_cpus)]
    pub pooler_cpus: Option<f64>,
}

impl SandboxCpuArgs {
    pub fn cpus(&self) -> crate::sandbox::cgroup::Cpus {
        crate::sandbox::cgroup::Cpus {
            server: self.server_cpus,
            pooler: self.pooler_cpus,
        }
    }
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The runs to report, by number or name (see `connbench runs`).
    #[arg(required = true)]
    pub runs: Vec<String>,
    /// Write a self-contained HTML page with charts to FILE (no network needed to view it).
    #[arg(long, value_name = "FILE")]
    pub html: Option<std::path::PathBuf>,
    /// Print Markdown, or write it to FILE (`-` is standard output too). `report 3
    /// --markdown` prints it; in `report --markdown 3`, 3 is taken for FILE.
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub markdown: Option<std::path::PathBuf>,
    /// Write CSV tables into DIR (created if needed): cells.csv.
    #[arg(long, value_name = "DIR")]
    pub csv: Option<std::path::PathBuf>,
    /// Print JSON, or write it to FILE (`-` is standard output too).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `connbench runs`: with no subcommand, the list.
#[derive(Debug, Args)]
pub struct RunsArgs {
    #[command(subcommand)]
    pub command: Option<RunsCommand>,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// Every stored run, newest first (what `connbench runs` alone prints).
    List {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// One run's cells, figures and verdicts, from the store.
    Show {
        /// The run's number or name (see `connbench runs`).
        run: String,
        #[command(flatten)]
        store: StoreArgs,
    },
}

#[derive(Debug, Args)]
pub struct LabArgs {
    /// Short runs, few repetitions, and rounds added for undecided answers within a
    /// budget of 4 minutes in all (see --budget).
    #[arg(long, conflicts_with = "full")]
    pub quick: bool,
    /// Each suite's own lengths (tens of minutes).
    #[arg(long)]
    pub full: bool,
    /// Where to write the HTML report of the lab's runs [default: lab-<date>.html in a
    /// `reports` directory beside the store]
    #[arg(long, value_name = "FILE")]
    pub html: Option<std::path::PathBuf>,
    /// Write no HTML report.
    #[arg(long, conflicts_with = "html")]
    pub no_html: bool,
    /// Run only these built-in suites (comma-separated, e.g. connect,pooling).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub suites: Vec<String>,
    #[command(flatten)]
    pub adaptive: AdaptiveArgs,
    #[command(flatten)]
    pub server: ServerArgs,
    #[command(flatten)]
    pub store: StoreArgs,
}

const LOAD_EXAMPLES: &str = "\
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

#[derive(Debug, Subcommand)]
pub enum KubernetesCommand {
    /// Print an Indexed Job whose N pods are the workers of one load run.
    ///
    /// Every pod runs `connbench load TARGET [load flags] --workers N --run RUN --store
    /// STORE` with its index from Kubernetes (JOB_COMPLETION_INDEX); the workers meet in
    /// the PostgreSQL store, start at one agreed instant, and each saves its histograms
    /// there. Passwords come from Secrets (key `password`), never the manifest.
    #[command(after_help = KUBERNETES_EXAMPLES)]
    Job(KubernetesJobArgs),
    /// Print a Job that runs a suite in one pod beside your own sidecar container.
    ///
    /// The question of experiment 1, asked in your cluster: the pod runs `connbench run
    /// SUITE --target NAME=CONNINFO ... --store STORE --run RUN` beside your sidecar (its
    /// image and arguments yours: the Cloud SQL Auth Proxy, PgBouncer, envoy...), the
    /// two sharing an emptyDir at --socket-dir for the sidecar's Unix socket; the suite's
    /// cells reach the sidecar by that socket and by its TCP port on localhost,
    /// interleaved as locally. A suite file travels in a ConfigMap printed before the
    /// Job. Read the answer back with `connbench report RUN --store STORE`.
    #[command(after_help = KUBERNETES_SUITE_EXAMPLES)]
    Suite(KubernetesSuiteArgs),
}

const KUBERNETES_SUITE_EXAMPLES: &str = "\
Experiment 1 beside the Cloud SQL Auth Proxy (docs/guide/sidecar.md):
  connbench kubernetes suite docs/guide/sidecar.toml --image registry.example/connbench:0.1 \\
      --sidecar-image gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.14.0 \\
      --sidecar-arg='PROJECT:REGION:INSTANCE?port=5432' \\
      --sidecar-arg='PROJECT:REGION:INSTANCE?unix-socket=/cloudsql' \\
      --sidecar-port 5432 --socket-dir /cloudsql \\
      --target 'sidecar_unix=host=/cloudsql/PROJECT:REGION:INSTANCE dbname=app user=app' \\
      --target 'sidecar_tcp=host=127.0.0.1 port=5432 dbname=app user=app sslmode=disable' \\
      --target-secret app-db --store postgres://cb@results.prod/connbench --store-secret cb-store \\
      --run sidecar-1 > job.yaml
  kubectl apply -f job.yaml
  kubectl wait --for=condition=complete --timeout=1h job/connbench-sidecar-1
  connbench report sidecar-1 --store postgres://cb@results.prod/connbench";

#[derive(Debug, Args)]
pub struct KubernetesSuiteArgs {
    /// A built-in suite name or a suite file.
    pub suite: String,
    /// The container image with connbench as its entrypoint.
    #[arg(long)]
    pub image: String,
    /// Your sidecar's image.
    #[arg(long, value_name = "IMAGE")]
    pub sidecar_image: String,
    /// One argument of your sidecar's command line (repeat, in order; write
    /// `--sidecar-arg=--flag` for one that starts with a dash).
    #[arg(long = "sidecar-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub sidecar_args: Vec<String>,
    /// The sidecar's TCP port: connbench starts only once the sidecar accepts there (a
    /// startup probe), so the first cell does not race the sidecar's start.
    #[arg(long, value_name = "PORT")]
    pub sidecar_port: Option<u16>,
    /// Where both containers mount the shared emptyDir that holds the sidecar's socket.
    #[arg(long, value_name = "DIR", default_value = "/cloudsql")]
    pub socket_dir: String,
    /// A target name the suite uses, as the pod reaches it: NAME=CONNINFO (repeat), or a
    /// bare CONNINFO for every target; without its password.
    #[arg(long = "target", value_name = "NAME=CONNINFO", required = true)]
    pub targets: Vec<String>,
    #[command(flatten)]
    pub common: KubernetesCommon,
    /// More `connbench run` flags, after `--` (e.g. -- --quick, -- --budget 20m).
    #[arg(last = true, value_name = "RUN FLAGS")]
    pub run_flags: Vec<String>,
}

const KUBERNETES_EXAMPLES: &str = "\
The whole flow:
  kubectl create secret generic cb-store --from-literal=password=...
  kubectl create secret generic cb-db --from-literal=password=...
  connbench kubernetes job --workers 4 --image registry.example/connbench:0.1 \\
      --target 'host=db.prod port=5432 dbname=app user=bench' --target-secret cb-db \\
      --store postgres://cb@results.prod/connbench --store-secret cb-store \\
      --run exp2 -- -S -M prepared -c 256 -j 4 -T 300 --warmup 30s > job.yaml
  kubectl apply -f job.yaml
  kubectl wait --for=condition=complete --timeout=1h job/connbench-exp2
  connbench report exp2 --store postgres://cb@results.prod/connbench --json exp2.json";

/// What both Jobs take: where the pods save, under which name, the Secrets, the CPU.
#[derive(Debug, Args)]
pub struct KubernetesCommon {
    /// The PostgreSQL results store the pods save to, without its password.
    #[arg(long, value_name = "URL")]
    pub store: String,
    /// The run's name [default: load-DATE-TIME for a job, SUITE-DATE-TIME for a suite].
    #[arg(long, value_parser = parse_run_name)]
    pub run: Option<String>,
    /// The Secret holding the store's password (key `password`).
    #[arg(long, value_name = "NAME")]
    pub store_secret: Option<String>,
    /// The Secret holding the target's password (key `password`).
    #[arg(long, value_name = "NAME")]
    pub target_secret: Option<String>,
    /// CPU for connbench's container (request and limit, e.g. 2 or 1500m).
    #[arg(long)]
    pub cpu: Option<String>,
    /// yaml or json (a suite's Job: its ConfigMap and the Job as two YAML documents, or a
    /// List).
    #[arg(long, default_value = "yaml", value_parser = ["yaml", "json"])]
    pub output: String,
}

#[derive(Debug, Args)]
pub struct KubernetesJobArgs {
    /// The number of workers (pods): completions and parallelism of the Job.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub workers: u32,
    /// The container image with connbench as its entrypoint.
    #[arg(long)]
    pub image: String,
    /// What the workers load: a conninfo string or URI, without its password.
    #[arg(long)]
    pub target: String,
    #[command(flatten)]
    pub common: KubernetesCommon,
    /// Serve each worker's live metrics on this port (`--metrics-listen :PORT`, kept a
    /// minute after the run for a last scrape), with the pods annotated for Prometheus'
    /// annotation-based discovery (prometheus.io/scrape, port, path).
    #[arg(long, value_name = "PORT")]
    pub metrics_port: Option<u16>,
    /// The load flags, after `--` (e.g. -- -S -c 64 -T 300).
    #[arg(last = true, value_name = "LOAD FLAGS")]
    pub load: Vec<String>,
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

/// A run name: a letter or digit, then letters, digits, `-`, `_` and `.` (it becomes
/// part of a Kubernetes Job's name too), and not a bare number (numbers are run ids).
pub fn parse_run_name(s: &str) -> Result<String, String> {
    let ok = s.len() <= 63
        && s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.chars().last().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !ok {
        return Err(format!(
            "{s:?} is not a run name: up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        ));
    }
    if s.parse::<i64>().is_ok() {
        return Err(format!(
            "{s:?} is a number, which names runs by id: add a letter (e.g. run-{s})"
        ));
    }
    Ok(s.to_string())
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
        if self.pgbench.max_tries == 0 && self.time.is_none() && self.latency_limit.is_none() {
            // As pgbench: connbench's default end (a 10 s run) is not the user's bound.
            anyhow::bail!(crate::options::UNLIMITED_TRIES);
        }
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

/// `--sysbench NAME=VALUE,...`, checked as it is parsed.
#[derive(Debug, Clone)]
pub struct SysbenchSettings(pub Vec<(String, String)>);

fn parse_sysbench(v: &str) -> Result<SysbenchSettings, String> {
    crate::load::sysbench::parse_settings(v).map(SysbenchSettings)
}

/// Every `--sysbench` given, in order, over sysbench's defaults.
pub fn sysbench_options(all: &[SysbenchSettings]) -> anyhow::Result<crate::load::sysbench::SysbenchOptions> {
    let pairs: Vec<(String, String)> = all.iter().flat_map(|s| s.0.iter().cloned()).collect();
    crate::load::sysbench::SysbenchOptions::from_pairs(&pairs).map_err(anyhow::Error::msg)
}

const CONNECT_EXAMPLES: &str = "\
Targets are libpq conninfo strings or postgres:// URIs, optionally named:
  connbench connect 'host=/var/run/postgresql dbname=app'
  connbench connect direct=postgres://app@db:5432/app pooled=postgres://app@db:6432/app
  connbench connect                      # PG* environment variables and libpq defaults
  connbench connect --sandbox            # every target of a throwaway sandbox
  connbench connect --sandbox unix pgbouncer_unix -n 1000 --json

Exit codes: 0 success, 1 a target failed every attempt, 2 usage or set-up error,
130 interrupted by Ctrl-C (results so far are still printed).";

#[derive(Debug, Args)]
pub struct ConnectArgs {
    /// Targets to measure: conninfo strings, postgres:// URIs, or NAME=conninfo. With
    /// --sandbox: names of sandbox targets (default: all of them).
    pub targets: Vec<String>,

    /// Start a throwaway sandbox (PostgreSQL + PgBouncer) and measure its targets; it is
    /// removed when the run ends, also on Ctrl-C.
    #[arg(long)]
    pub sandbox: bool,

    /// Measured connections per target. More samples tighten the tail percentiles (p99
    /// needs a few hundred to mean much).
    #[arg(short = 'n', long, default_value = "200", value_parser = options::parse_samples)]
    pub samples: usize,

    /// Connections per target before measuring. The first connection after a server
    /// starts is slower (caches are cold); warm-ups are reported apart, never counted.
    #[arg(long, default_value_t = 1)]
    pub warmup: u64,

    /// Run this SQL on each new connection and time it as the `query` phase (one round
    /// trip, simple protocol), e.g. -q 'SELECT 1'.
    #[arg(short = 'q', long = "query", value_name = "SQL")]
    pub query: Option<String>,

    /// Pause between connections (e.g. 10ms, 1s), to measure an idle server rather
    /// than back-to-back connects.
    #[arg(long, default_value = "0", value_parser = options::parse_pause)]
    pub interval: Duration,
    /// Reach the target through a sidecar relay: direct, sidecar-unix or sidecar-tcp
    /// (with a TLS target, the sidecar speaks TLS to the server and plaintext to you).
    #[arg(long, value_name = "PATH", default_value = "direct")]
    pub path: String,
    /// Add this round trip between you and the target with connbench's relay (e.g.
    /// 50ms); the achieved round trip is measured and printed first.
    #[arg(long, value_name = "RTT", value_parser = options::parse_pause)]
    pub distance: Option<Duration>,
    /// Also predict each target's connect time at this round-trip time (repeatable), from
    /// the round trips counted and the local time: through connbench's relay, and on a
    /// network (one more round trip, for TCP's handshake).
    #[arg(long, value_name = "RTT", value_parser = options::parse_pause)]
    pub predict_rtt: Vec<Duration>,

    /// Print JSON (stable keys, see docs/json.md) instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Start a sandbox that keeps running after connbench exits, and print its targets:
    /// names connbench's commands take (`connbench load unix`), the conninfo strings and
    /// MariaDB URIs behind them, and a line each for psql, pgbench, mariadb and sysbench
    /// (the passwords stay in a passfile and option files). Ctrl-C or SIGTERM during the
    /// start stops what it started.
    Start {
        /// Print the sandbox description as JSON.
        #[arg(long)]
        json: bool,
        /// The database engines to start: postgres, mariadb, or both
        /// [default: postgres,mariadb when MariaDB is installed, else postgres].
        #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = ["postgres", "mariadb"])]
        engines: Vec<String>,
        #[command(flatten)]
        cpus: SandboxCpuArgs,
        /// Its name, to run several side by side; connbench's commands take its targets
        /// as `unix@NAME` (or `unix` with CONNBENCH_SANDBOX=NAME).
        #[arg(
            long,
            value_name = "NAME",
            env = "CONNBENCH_SANDBOX",
            default_value = "default"
        )]
        name: String,
    },
    /// Stop a sandbox and remove its directory: one started by `sandbox start`, or one
    /// left over (a start that died, a command's own sandbox whose command is gone).
    Stop {
        /// Which one [default: $CONNBENCH_SANDBOX, else default].
        #[arg(value_name = "NAME", conflicts_with = "all")]
        name: Option<String>,
        /// Every sandbox of this user, except those starting or in use by a running command.
        #[arg(long)]
        all: bool,
    },
    /// List this user's sandboxes (running, starting, left over), and check that the
    /// running ones accept connections; exits 1 when one is left over or refuses.
    Status {
        /// Only this one, with its targets.
        #[arg(value_name = "NAME")]
        name: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn each_select_only_flag_is_a_script_in_its_place() {
        let scripts = |args: &[&str]| -> Vec<String> {
            let cli = Cli::try_parse_from(["connbench", "load"].iter().chain(args)).unwrap();
            let Command::Load(a) = cli.command else {
                panic!("not load")
            };
            a.scripts
                .scripts
                .iter()
                .map(|w| format!("{}@{}", w.workload.name(), w.weight))
                .collect()
        };
        assert_eq!(
            scripts(&["-S", "-b", "tpcb@2", "-N", "-S"]),
            ["select-only@1", "tpcb-like@2", "simple-update@1", "select-only@1"]
        );
        // pgbench's TAP gives -S 129 times to see "at most 128 SQL scripts".
        let many = vec!["-S"; 129];
        assert_eq!(scripts(&many).len(), 129);
    }

    /// A suite cell and the equivalent command line become the same options, and so the
    /// same plan.
    #[test]
    fn a_suite_cell_and_its_flags_give_the_same_options() {
        let cli = Cli::try_parse_from([
            "connbench",
            "load",
            "-S",
            "-M",
            "prepared",
            "-c",
            "5",
            "-j",
            "2",
            "-T",
            "3s",
            "--warmup",
            "500ms",
            "-R",
            "200",
            "--think",
            "10ms",
            "--connection",
            "pool",
            "--pool-size",
            "3",
            "--pool-max-lifetime",
            "5s",
            // A suite's cells go on after an SQL error (options.rs says why).
            "--continue-on-error",
        ])
        .unwrap();
        let Command::Load(args) = cli.command else {
            panic!("not load")
        };
        let settings: crate::experiment::suite::Settings = [
            ("workload", "select-only"),
            ("mode", "prepared"),
            ("clients", "5"),
            ("threads", "2"),
            ("rate", "200"),
            ("think", "10ms"),
            ("connection", "pool"),
            ("pool_size", "3"),
            ("pool_max_lifetime", "5s"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let from_suite = LoadOptions::from_settings(
            &settings,
            Some(Duration::from_secs(3)),
            Some(Duration::from_millis(500)),
            "connbench",
        )
        .unwrap();
        assert_eq!(args.options().unwrap(), from_suite);
        assert_eq!(
            args.options().unwrap().policy().unwrap(),
            from_suite.policy().unwrap()
        );
        // And -T as bare seconds, as pgbench writes it.
        let cli = Cli::try_parse_from(["connbench", "load", "-T", "3"]).unwrap();
        let Command::Load(args) = cli.command else {
            panic!("not load")
        };
        assert_eq!(args.options().unwrap().end, End::Duration(Duration::from_secs(3)));
    }
}

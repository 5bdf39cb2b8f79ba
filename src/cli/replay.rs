//! The flags of `replay` (a recorded application done again on a target), each value
//! parsed and checked here so the handler reads only validated options.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::load::log::LogSettings;
use crate::replay::without::Without;
use crate::replay::{PoolSettings, Speed};

pub const REPLAY_EXAMPLES: &str = "\
Examples:
  connbench replay app.trace.gz --target \"host=db.internal dbname=shop user=app\"
  connbench replay app.trace.gz --target tcp --speed max          # a running sandbox's target, as fast as it answers
  connbench replay app.trace.gz --target tcp --rtt 50ms            # what if the application were 50 ms away
  connbench replay app.trace.gz --target tcp --rtt 50ms --html replay.html   # the shapes now, recorded, predicted: a page
  connbench replay app.trace.gz --target unix --path sidecar-tcp --json > replay.json
  connbench replay app.trace.gz --target tcp -l --log-prefix replay    # a line per transaction, as pgbench -l
  connbench replay app.trace.gz --target tcp --metrics-listen :9187   # live figures for Prometheus
  connbench replay app.trace.gz --target tcp --server-cpus 1          # on a 1-core server (a sandbox started with a quota)
  connbench replay app.trace.gz --target tcp --pool 4                 # what a client-side pool of 4 would change
  connbench replay app.trace.gz --target tcp --rtt 50ms --without housekeeping   # what the pool's pings and resets cost
The target's database must hold the application's tables (a pre-flight parses each recorded
statement once and refuses, one line per missing relation); the replay writes what the
application wrote. It connects with the target's own credentials: a trace holds none.";

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The trace `connbench record` wrote (PostgreSQL, or MySQL/MariaDB).
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// The database: a conninfo string or URI, or a running sandbox's target name (tcp,
    /// unix, pgbouncer_unix, ...). Its user and password are used, not the recorded user.
    #[arg(long, value_name = "TARGET")]
    pub target: String,
    /// Divide every recorded offset by this (2 = twice as fast), or `max`: every session
    /// at once, each request as soon as the previous answer is in (lag not measured).
    #[arg(long, default_value = "1", value_name = "FACTOR|max", value_parser = Speed::parse)]
    pub speed: Speed,
    /// Reach the target through a sidecar relay: direct, sidecar-unix or sidecar-tcp.
    #[arg(long, value_name = "PATH", default_value = "direct", value_parser = parse_path)]
    pub path: String,
    /// Add this round trip between the replay and the target with connbench's relay
    /// (e.g. 50ms); the achieved round trip is measured and printed first.
    #[arg(long, visible_alias = "distance", value_name = "RTT", value_parser = crate::options::parse_pause)]
    pub rtt: Option<Duration>,
    /// Replay through a client-side pool of N connections in all (split over the threads,
    /// -j: never more threads than connections, so at most N are open): the recorded
    /// connects and closes are not replayed; each transaction, and each request outside
    /// one, borrows a connection when its first request is due and gives it back at the
    /// answer that leaves it idle, as a transaction-pooling application pool does. The
    /// pool is filled before the clock starts. Named prepared statements are prepared on
    /// each connection once, under names of the pool's; session state a pool does not
    /// keep (SET, temporary tables, LISTEN, advisory locks) is replayed all the same and
    /// counted in the report. Lag gets a third part: waiting for the pool.
    #[arg(long, value_name = "N", value_parser = crate::options::parse_pool_size)]
    pub pool: Option<usize>,
    /// Pool: retire a connection this old when it is returned (e.g. 5s, 5m).
    #[arg(long, value_name = "DURATION", requires = "pool", value_parser = crate::options::parse_period)]
    pub pool_max_lifetime: Option<Duration>,
    /// Pool: close a connection idle this long instead of handing it out.
    #[arg(long, value_name = "DURATION", requires = "pool", value_parser = crate::options::parse_period)]
    pub pool_idle_timeout: Option<Duration>,
    /// Replay without these requests, so what they cost is measured: `housekeeping`
    /// (what the driver and pool sent that `connbench trace` lists as left out: pings,
    /// resets on release, type and catalogue look-ups, SHOW; a SET is kept, as it changes
    /// the session), or a statement's fingerprint (the 16 hex digits `trace` prints).
    /// Repeatable. The application's own time around a request left out stays; the
    /// rest of its session comes earlier by its recorded time. The report counts them.
    #[arg(long, value_name = "housekeeping|FINGERPRINT", value_parser = Without::parse)]
    pub without: Vec<Without>,
    /// Statements listed in the text report, by recorded calls.
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub top: usize,
    /// Print JSON (docs/json.md) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write the replay as one self-contained HTML page to FILE: each transaction
    /// shape's time now beside its recorded time and `trace`'s prediction (a table and
    /// bars), the top shapes' times now and recorded by percentile, and the text report.
    /// An existing FILE is never overwritten: it is refused before the replay starts.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Threads the sessions are dealt to (default: one per core); each runs its
    /// sessions on a runtime of its own, as `load -j`.
    #[arg(short = 'j', long, value_name = "N", default_value_t = default_threads(), value_parser = parse_threads)]
    pub threads: usize,
    /// Write each replayed transaction to a log file in pgbench 15's format, one file per
    /// thread (-j) in the current directory (pgbench_log.PID, pgbench_log.PID.1, ...):
    /// client_id transaction_no time script_no time_epoch time_us [schedule_lag].
    /// client_id is the session's place in the trace (by its open); time is µs from the
    /// transaction's first intended send to its last answer, or failed (serialization or
    /// deadlock with --failures-detailed); schedule_lag (not with --speed max) is its
    /// first request's lag. One line per transaction, as `trace` counts them.
    #[arg(short = 'l', long = "log")]
    pub log: bool,
    /// The log files' prefix, a path: PREFIX.PID, PREFIX.PID.1, ... [default: pgbench_log].
    #[arg(long, value_name = "PREFIX", requires = "log")]
    pub log_prefix: Option<String>,
    /// Log only this fraction of transactions (e.g. 0.01), drawn at random.
    #[arg(long, value_name = "FRACTION", requires = "log", conflicts_with = "aggregate_interval",
          value_parser = crate::options::parse_sampling_rate)]
    pub sampling_rate: Option<f64>,
    /// Log one line per this many seconds instead of one per transaction, pgbench 15's 15
    /// columns (µs; the lag columns 0 with --speed max).
    #[arg(long, value_name = "SECONDS", requires = "log", value_parser = crate::options::parse_aggregate_interval)]
    pub aggregate_interval: Option<u64>,
    /// Failed transactions say serialization or deadlock (and the aggregate counts them)
    /// rather than failed.
    #[arg(long, requires = "log")]
    pub failures_detailed: bool,
    #[command(flatten)]
    pub metrics: super::MetricsArgs,
    /// A running sandbox's target only: its database servers run under a CPU quota of N
    /// cores (e.g. 0.5, 1, 2) while the replay lasts, as if on a server that size; the
    /// sandbox's own quota is put back after. The sandbox must have been started with
    /// one (`connbench sandbox start --server-cpus M`).
    #[arg(long, value_name = "N", value_parser = crate::sandbox::cgroup::parse_cpus)]
    pub server_cpus: Option<f64>,
    /// Print a progress line to stderr this often (0 for none).
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = crate::units::parse_duration)]
    pub progress: Duration,
}

impl ReplayArgs {
    /// `--pool` and its retirement rules.
    pub fn pool(&self) -> Option<PoolSettings> {
        self.pool.map(|size| PoolSettings {
            size,
            max_lifetime: self.pool_max_lifetime,
            idle_timeout: self.pool_idle_timeout,
        })
    }

    /// The transaction log's settings, with -l (load's, `crate::load::log`).
    pub fn log(&self) -> Option<LogSettings> {
        self.log.then(|| LogSettings {
            prefix: self
                .log_prefix
                .clone()
                .unwrap_or_else(|| LogSettings::DEFAULT_PREFIX.to_string()),
            sampling_rate: self.sampling_rate,
            aggregate_interval_s: self.aggregate_interval,
            failures_detailed: self.failures_detailed,
        })
    }
}

fn parse_threads(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=256).contains(&n) => Ok(n),
        _ => Err(format!("-j {s:?}: give a number of threads from 1 to 256")),
    }
}

fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn parse_path(s: &str) -> Result<String, String> {
    crate::route::PathKind::parse(s)
        .map(|_| s.to_string())
        .map_err(|e| format!("{e:#}"))
}

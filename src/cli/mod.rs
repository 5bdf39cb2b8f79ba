//! Command-line flags, as the user types them. Each value goes through the same parser in
//! `crate::options` that a suite cell's setting goes through, and `LoadArgs::options`
//! gathers them into the `LoadOptions` a suite cell also becomes; raw flags go no
//! further than the command handlers in `crate::commands`.

//!
//! The flags are split by command: [`load`] holds `load`'s and `init`'s (with pgbench's
//! spellings in [`pgbench`]), [`suite`] those of `run`, `lab` and the stored runs
//! (`runs`, `report`), [`kubernetes`] the manifests'; what several commands share, and
//! the small commands' flags, stay here.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::options;
use crate::units::parse_duration;

mod kubernetes;
mod load;
mod pgbench;
pub mod record;
pub mod replay;
mod suite;

pub use kubernetes::{KubernetesCommand, KubernetesCommon, KubernetesJobArgs, KubernetesSuiteArgs};
use load::LOAD_EXAMPLES;
pub use load::{sysbench_options, InitArgs, LoadArgs, SysbenchSettings, WorkerArgs};
pub use pgbench::{PgbenchArgs, ScriptArgs};
pub use suite::{AdaptiveArgs, LabArgs, ReportArgs, RunArgs, RunsArgs, RunsCommand};

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
/// authentication, backend initialisation, first query), runs pgbench-class load
/// (pgbench's scripts, and sysbench's oltp-* workloads on sysbench's tables) with measured
/// latency percentiles under connection policies (persistent, per-transaction, a pool
/// with a lifetime), and answers experiment suites with confidence intervals and
/// verdicts, stored in SQLite. It works against your own PostgreSQL, MariaDB or MySQL,
/// or a throwaway sandbox it starts itself: PostgreSQL and PgBouncer over Unix socket,
/// TCP and TLS, and MariaDB, the servers optionally under a CPU quota (--server-cpus N)
/// to stand in for a server of N cores.
///
/// Start with `connbench lab --quick`.
#[derive(Debug, Parser)]
#[command(name = "connbench", version = crate::exit::VERSION, after_help = EXIT_CODES, max_term_width = 100)]
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
    /// Print Kubernetes manifests that run connbench: a load's workers as an Indexed Job,
    /// or a suite in one pod beside your sidecar.
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
    /// as it goes; Ctrl-C ends the recording and prints what it holds. With --from-pcap,
    /// reads a tcpdump capture of the database's traffic into the same trace instead.
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
    /// Do a recorded application again on a target, on its recorded schedule, and say how
    /// faithfully.
    ///
    /// Reads a trace from `connbench record`: each recorded session on its own
    /// connection, opened and closed when the application did, each request (simple
    /// queries, extended-protocol groups with their statement names and values; MySQL's
    /// COM_QUERY and prepared statements with their recorded parameters) sent at
    /// its recorded offset, open loop: a session behind its schedule sends at once and its
    /// lag is measured. Reports per statement fingerprint the calls and response times now
    /// beside the recorded ones, transactions, failures by SQLSTATE now and then, and the
    /// fidelity: requests on time, lag percentiles, statements that failed now but not when
    /// recorded, sessions that could not connect. A pre-flight refuses a target that lacks
    /// the recorded relations, one line each. Ctrl-C stops and still reports (exit 130).
    #[command(after_help = replay::REPLAY_EXAMPLES)]
    Replay(replay::ReplayArgs),
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
    /// the round trips counted and the local time, TCP's handshake included (paid on a
    /// network and through connbench's relay alike).
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
    use crate::load::plan::End;
    use crate::options::LoadOptions;
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
            "--connect-rate",
            "50/s",
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
        let settings: crate::options::cell::Settings = [
            ("workload", "select-only"),
            ("mode", "prepared"),
            ("clients", "5"),
            ("threads", "2"),
            ("rate", "200"),
            ("connect_rate", "50/s"),
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

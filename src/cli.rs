//! Command-line flags, as the user types them. `lib.rs` validates these into richer types
//! (targets, settings) before anything runs; raw flags go no further.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

const EXIT_CODES: &str = "\
Exit codes:
  0    success
  1    the run finished, but a target failed every attempt
  2    usage or set-up error (bad target, sandbox could not start)
  130  interrupted by Ctrl-C (the results so far are still printed)";

/// What does it cost your application to reach its database, and which path is fastest?
///
/// connbench measures connection set-up phase by phase (socket, TLS, backend start,
/// authentication, backend initialisation, first query) against your own PostgreSQL or a
/// throwaway sandbox it starts itself (PostgreSQL and PgBouncer over Unix socket, TCP and
/// TLS).
#[derive(Debug, Parser)]
#[command(name = "connbench", version, after_help = EXIT_CODES, max_term_width = 100)]
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
    /// Start, inspect or stop a throwaway PostgreSQL + PgBouncer to measure against.
    #[command(subcommand)]
    Sandbox(SandboxCommand),
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
    #[arg(short = 'n', long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub samples: u64,

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
    #[arg(long, default_value = "0", value_parser = parse_duration)]
    pub interval: Duration,

    /// Print JSON (stable keys, see docs/json.md) instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Start a sandbox that keeps running after connbench exits, and print its targets
    /// as conninfo strings that work unchanged with psql and pgbench.
    Start {
        /// Print the sandbox description as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop the sandbox started by `sandbox start` and remove its directory.
    Stop,
    /// Say whether a sandbox is running, and check that it accepts connections.
    Status {
        /// Print the sandbox description as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Parses `250ms`, `1.5s`, `20us`, `2m` or `0`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("{s:?} has no unit; write e.g. 10ms, 1s, 500us"))?;
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration; write e.g. 10ms, 1s, 500us"))?;
    let scale = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" | "min" => 60.0,
        other => return Err(format!("unknown unit {other:?} in {s:?}; use ns, us, ms, s or m")),
    };
    Ok(Duration::from_secs_f64(value * scale))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("20us"), Ok(Duration::from_micros(20)));
        assert!(parse_duration("10").unwrap_err().contains("no unit"));
        assert!(parse_duration("10 parsecs").unwrap_err().contains("unknown unit"));
    }

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }
}

//! The flags of `replay` (a recorded application done again on a target), each value
//! parsed and checked here so the handler reads only validated options.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::replay::Speed;

pub const REPLAY_EXAMPLES: &str = "\
Examples:
  connbench replay app.trace.gz --target \"host=db.internal dbname=shop user=app\"
  connbench replay app.trace.gz --target tcp --speed max          # a running sandbox's target, as fast as it answers
  connbench replay app.trace.gz --target tcp --rtt 50ms            # what if the application were 50 ms away
  connbench replay app.trace.gz --target unix --path sidecar-tcp --json > replay.json
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
    /// Statements listed in the text report, by recorded calls.
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub top: usize,
    /// Print JSON (docs/json.md) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Threads the sessions are dealt to (default: one per core); each runs its
    /// sessions on a runtime of its own, as `load -j`.
    #[arg(short = 'j', long, value_name = "N", default_value_t = default_threads(), value_parser = parse_threads)]
    pub threads: usize,
    /// Print a progress line to stderr this often (0 for none).
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = crate::units::parse_duration)]
    pub progress: Duration,
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

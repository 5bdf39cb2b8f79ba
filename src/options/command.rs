//! The validated options of a command: what a handler in `commands` reads instead of raw
//! flags, as ripgrep's high-level arguments stand between its flags and its searches.
//! `cli` builds them (it sees the flags; this layer must not import `cli`), checking
//! every rule that needs no server on the way; the handler only acts on them. Apart
//! from `load` because these are a command's concerns around a run (where the target
//! is, the workers, the live metrics, what the output shows), not the run's settings a
//! suite cell shares.

use std::time::Duration;

use super::load::LoadOptions;
use crate::host::Source;
use crate::sandbox::cgroup::Cpus;
use crate::script::ScriptError;

/// What `connbench load` does, once its flags are validated.
#[derive(Debug)]
pub enum LoadCommand {
    /// pgbench's -V, -b list and --show-script: print this and exit, as pgbench does.
    Print(String),
    /// A load run.
    Run(Box<LoadRequest>),
}

/// A validated load run: its options (a worker's share of them, with --workers) and
/// everything around the run.
#[derive(Debug)]
pub struct LoadRequest {
    pub options: LoadOptions,
    /// What [`LoadOptions::check`] found that will fail when it runs, as pgbench warns.
    pub warnings: Vec<ScriptError>,
    pub target: LoadTarget,
    /// The relay path (direct, sidecar-unix, sidecar-tcp) and added round trip.
    pub path: String,
    pub distance: Option<Duration>,
    /// The scale of the tables a sandbox gets, and a custom script's `:scale` when no
    /// tables are found (pgbench's -s).
    pub scale: u32,
    /// Print a progress line this often.
    pub progress: Option<Duration>,
    /// The CPU of a server connbench did not start (--server-pid, --server-cgroup).
    pub server: Option<Source>,
    pub workers: Option<WorkerShare>,
    pub metrics: Option<MetricsOptions>,
    pub output: LoadOutput,
    /// pgbench's -v was given: connbench says it does not vacuum.
    pub vacuum_note: bool,
}

/// Where a load runs.
#[derive(Debug, Clone, PartialEq)]
pub enum LoadTarget {
    /// --sandbox: a sandbox of the run's own, and which of its targets (default unix).
    OwnSandbox {
        name: String,
        durable: bool,
        cpus: Cpus,
        mariadb: bool,
    },
    /// A running sandbox's target name, or a conninfo or URI (pgbench's DBNAME among
    /// them), with pgbench's -h, -p and -U over it.
    Given {
        text: String,
        keys: Vec<(&'static str, String)>,
    },
}

/// One worker's part of a load spread over many processes or machines.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerShare {
    pub index: usize,
    pub workers: usize,
    /// The first of this worker's client ids.
    pub first: usize,
    /// The run's name and store, where the workers meet.
    pub run: String,
    pub store: Option<String>,
    pub timeout: Duration,
    /// The whole run's clients and rate, as given.
    pub total_clients: usize,
    pub total_rate: Option<f64>,
}

/// The live metrics endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricsOptions {
    pub listen: String,
    pub linger: Option<Duration>,
    /// The labels: the run's name (`load` without one) and the worker's index.
    pub run: String,
    pub worker: u32,
}

/// What the output shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadOutput {
    pub json: bool,
    /// The per-interval series as a table.
    pub series: bool,
    /// pgbench's --failures-detailed.
    pub failures_detailed: bool,
    /// pgbench's --progress-timestamp: progress lines carry the Unix time.
    pub progress_timestamp: bool,
}

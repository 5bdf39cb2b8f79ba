//! The flags of the suite commands: `run` (one suite), `lab` (every built-in suite on a
//! sandbox), the adaptive rounds both take, and those reading stored runs back (`runs`,
//! `report`). Apart from `load`'s because they name suites and runs, not a workload.

use std::time::Duration;

use clap::{Args, Subcommand};

use super::{parse_run_name, MetricsArgs, ServerArgs, StoreArgs};
use crate::options;

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
    /// Replace every cell's workload: a built-in script's name, or `trace:FILE` (a
    /// recording by `connbench record`, relative to the working directory), to ask the
    /// suite's question of your own application, replayed at its recorded pace. The
    /// trace replaces the cells' clients, think time and connections (the
    /// application's own: cells that differed only there become one); cells it cannot
    /// replay yet (a client-side pool, a fault) are left out, each named.
    #[arg(long, value_name = "NAME|trace:FILE")]
    pub workload: Option<String>,
    /// How the repetitions of a trace that writes start (every trace cell's `restore`):
    /// `template` from the same data, a copy of the database the trace replays into
    /// taken before the first repetition (PostgreSQL: CREATE DATABASE
    /// connbench_restore_... TEMPLATE it; MariaDB: its tables copied into a schema
    /// connbench_restore_...) and put back before each other one, outside the measured
    /// time; at the end the database is put back as the run found it and the copy
    /// dropped. On PostgreSQL putting back drops your database and creates it again from
    /// the copy (owner, grants and settings kept), so nothing else may be connected to
    /// it; on MariaDB it empties and refills its tables and drops those made since.
    /// `none`: each repetition on what the ones before left. On connbench's sandbox a
    /// trace that writes is restored by default; on your own target only when asked
    /// [default: template on connbench's sandbox, else none].
    #[arg(long, value_name = "template|none", value_parser = options::parse_restore)]
    pub restore: Option<options::Restore>,
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

//! connbench: what does it cost an application to reach its database?
//!
//! The modules follow the data, and each folder is a stage: `cli` (flags) and `options`
//! (flags or a suite cell's settings, validated into plans) -> `targets` (validated
//! targets) -> `sandbox` (throwaway servers, when asked) -> `net` (unix | tcp | tls
//! streams with counters, relays, namespaces) -> `proto` (the wire session, connected in
//! timed phases) -> `route` (a cell's relays) -> `connect`, and `workload` (scripts) with
//! `dataset` (tables) -> `load` (the measurement loops, producing plain timelines and
//! per-worker recorders) -> `stats` (summaries, comparisons, the round-trip model) ->
//! `experiment` (suites, their runner and the results store) -> `live` and `report`
//! (Prometheus; text, JSON, Markdown, CSV, HTML). An application's own traffic takes
//! `recorder` -> `trace` (its file and decoders) -> `stats::app` -> `report::trace`.
//! `units`, `scratch`, `host`, `rng` and `exit` (the exit codes and the version) are
//! leaves every stage may use. No module
//! imports one above its stage (docs/architecture.md lists the stages, and
//! tests/it/architecture.rs checks them); only `commands` (one file per command) and
//! `report` see the whole. [`run`] is the whole program, callable in-process by tests;
//! `main.rs` only parses arguments and prints errors.

pub mod units;
pub mod scratch;
pub mod host;
pub mod rng;
pub mod exit;
pub mod cli;
pub mod options;
pub mod targets;
pub mod sandbox;
pub mod net;
pub mod proto;
pub mod trace;
pub mod route;
pub mod recorder;
pub mod connect;
pub mod workload;
pub mod dataset;
pub mod load;
pub mod script;
pub mod experiment;
pub mod live;
pub mod stats;
pub mod replay;
pub mod report;
pub mod commands;

use anyhow::{Context, Result};

use cli::{Cli, Command};

pub use exit::{Exit, VERSION};

/// Runs one connbench command. Errors are usage or set-up errors (exit 2).
pub fn run(cli: Cli) -> Result<Exit> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async {
        use commands::*;
        match cli.command {
            Command::Connect(args) => connect::run_connect(args).await,
            Command::Init(args) => init::run_init(args).await,
            Command::Load(args) => load::run_load(*args).await,
            Command::Run(args) => suite::run_suite_command(args).await,
            Command::Suites => suite::list_suites(),
            Command::Runs(args) => runs::run_runs(args),
            Command::Compare { run_a, run_b, store } => runs::compare_runs(&run_a, &run_b, &store),
            Command::Report(args) => runs::report_runs(args),
            Command::Lab(args) => suite::run_lab(args).await,
            Command::Sandbox(cmd) => sandbox::run_sandbox(cmd).await,
            Command::Relay(args) => relay::run_relay(args).await,
            Command::Record(args) => record::run_record(args).await,
            Command::Trace(args) => trace::run_trace(args),
            Command::Replay(args) => replay::run_replay(args).await,
            Command::Kubernetes(cli::KubernetesCommand::Job(args)) => kubernetes::run_job(args),
            Command::Kubernetes(cli::KubernetesCommand::Suite(args)) => kubernetes::run_suite(args),
            Command::Completions { shell } => completions::print_completions(shell),
            Command::Man { dir } => man::run_man(dir.as_deref()),
        }
    })
}

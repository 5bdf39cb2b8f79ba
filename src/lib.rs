//! connbench: what does it cost an application to reach its database?
//!
//! A run is a pipeline, and data flows one way: measurement produces plain data,
//! statistics read it, and reports read the statistics. Each folder is a stage, and the
//! modules below are declared in stage order, low to high: a module imports only
//! modules at its own stage or below. The order is written once, in
//! docs/architecture.md (its `stages` block, with what each stage holds, beside a
//! drawing of how data flows through them); tests/it/architecture.rs reads it there,
//! checks every import against it and holds this list to it. `units`, `scratch`,
//! `host`, `rng` and `exit` (the exit codes and the version) are leaves every stage may
//! use; `setup` is what the handlers and the suite runner share to set a run up
//! (targets, routes, the server's size, Ctrl-C, stdout); only `commands` (one file per
//! command, none calling another) and `report` see the whole. [`run`] is
//! the whole program, callable in-process by tests; `main.rs` only parses arguments and
//! prints errors.

pub mod units;
pub mod scratch;
pub mod host;
pub mod rng;
pub mod exit;
pub mod targets;
pub mod script;
pub mod net;
pub mod proto;
pub mod route;
pub mod recorder;
pub mod capture;
pub mod sandbox;
pub mod connect;
pub mod workload;
pub mod dataset;
pub mod load;
pub mod stats;
pub mod replay;
pub mod options;
pub mod setup;
pub mod experiment;
pub mod live;
pub mod report;
pub mod cli;
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

//! connbench: what does it cost an application to reach its database?
//!
//! The modules follow the data: `cli` (flags) -> `target` (validated targets) ->
//! `sandbox` (throwaway servers, when asked) -> `transport` (unix | tcp | tls stream with
//! counters) -> `proto` (the wire session, connected in timed phases) -> `connect` (the
//! measurement loop, producing plain timelines) -> `stats` (summaries) -> `report` (text,
//! JSON). No module reaches back up the pipeline. [`run`] is the whole program, callable
//! in-process by tests; `main.rs` only parses arguments and prints errors.

pub mod cli;
pub mod connect;
pub mod proto;
pub mod report;
pub mod sandbox;
pub mod stats;
pub mod target;
pub mod transport;

use std::io::{IsTerminal, Write};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use tokio::sync::watch;

use cli::{Cli, Command, ConnectArgs, SandboxCommand};
use connect::{ConnectSettings, Subject};
use proto::postgres::Endpoint;
use sandbox::{Sandbox, SandboxOptions};
use target::Target;

/// How the program ended (see `connbench --help` for the numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Success = 0,
    /// The run finished, but a target failed every attempt.
    Failed = 1,
    /// Usage or set-up error.
    Usage = 2,
    /// Ctrl-C ended the run; what was measured was still reported.
    Interrupted = 130,
}

/// Runs one connbench command. Errors are usage or set-up errors (exit 2).
pub fn run(cli: Cli) -> Result<Exit> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async {
        match cli.command {
            Command::Connect(args) => run_connect(args).await,
            Command::Sandbox(cmd) => run_sandbox(cmd).await,
        }
    })
}

async fn run_connect(args: ConnectArgs) -> Result<Exit> {
    let settings = ConnectSettings {
        samples: args.samples as usize,
        warmup: args.warmup as usize,
        query: args.query.clone(),
        interval: args.interval,
    };
    // The sandbox lives until this function returns; its Drop stops and removes it.
    let mut sandbox = None;
    let subjects = if args.sandbox {
        let sb = Sandbox::start(&SandboxOptions::default()).await?;
        eprintln!(
            "sandbox: started in {} (postgres pid {}, pgbouncer pid {}; {}, {})",
            sb.info.dir.display(),
            sb.info.postgres_pid,
            sb.info.pgbouncer_pid,
            sb.info.postgres_version,
            sb.info.pgbouncer_version
        );
        let names: Vec<String> = if args.targets.is_empty() {
            sb.info.targets.iter().map(|t| t.name.clone()).collect()
        } else {
            args.targets.clone()
        };
        let mut subjects = Vec::new();
        for name in &names {
            let st = sb.info.target(name)?;
            subjects.push(Subject {
                endpoint: Endpoint::new(st.target()?).with_context(|| format!("target {name}"))?,
                description: Some(st.description.clone()),
            });
        }
        sandbox = Some(sb);
        subjects
    } else {
        let texts = if args.targets.is_empty() {
            vec![String::new()]
        } else {
            args.targets.clone()
        };
        let mut subjects = Vec::new();
        for text in &texts {
            let t = Target::parse(text).with_context(|| format!("target {:?}", target::redact(text)))?;
            let name = t.name();
            subjects.push(Subject {
                endpoint: Endpoint::new(t).with_context(|| format!("target {name}"))?,
                description: None,
            });
        }
        subjects
    };

    let stop = stop_on_signals();
    let show_progress = std::io::stderr().is_terminal();
    let mut last_draw = Instant::now();
    let run = connect::measure(&subjects, &settings, stop, |done, total| {
        if show_progress && (last_draw.elapsed().as_millis() >= 100 || done == total) {
            last_draw = Instant::now();
            eprint!("\rconnecting: {done}/{total}  ");
            if done == total {
                eprint!("\r{:30}\r", "");
            }
        }
    })
    .await;
    if show_progress {
        eprint!("\r{:30}\r", "");
    }
    let summaries = stats::summarize_connect(&run);
    let text = if args.json {
        let report =
            report::json::connect_report(&settings, &summaries, run.interrupted, run.wall.as_secs_f64());
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        report::text::connect_report(&settings, &summaries, run.interrupted)
    };
    emit(&text);
    if let Some(sb) = sandbox.take() {
        let dir = sb.info.dir.clone();
        sb.stop()?;
        eprintln!("sandbox: stopped and removed {}", dir.display());
    }
    let mut exit = Exit::Success;
    for t in &run.targets {
        if let Some(err) = t.first_error() {
            eprintln!("error: target {}: {err}", t.name);
            exit = Exit::Failed;
        }
    }
    if run.interrupted {
        exit = Exit::Interrupted;
    }
    Ok(exit)
}

async fn run_sandbox(cmd: SandboxCommand) -> Result<Exit> {
    match cmd {
        SandboxCommand::Start { json } => {
            if let Some(info) = sandbox::detached_info()? {
                bail!(
                    "a sandbox is already running in {}; stop it with `connbench sandbox stop`",
                    info.dir.display()
                );
            }
            let sb = Sandbox::start(&SandboxOptions { detached: true }).await?;
            if json {
                emit(&(serde_json::to_string_pretty(&sb.info)? + "\n"));
            } else {
                emit(&describe_sandbox(&sb.info));
                emit("stop it with: connbench sandbox stop\n");
            }
            Ok(Exit::Success)
        }
        SandboxCommand::Stop => {
            match sandbox::stop_detached()? {
                Some(dir) => eprintln!("sandbox: stopped and removed {}", dir.display()),
                None => eprintln!("no sandbox is running (nothing to stop)"),
            }
            Ok(Exit::Success)
        }
        SandboxCommand::Status { json } => {
            let Some(info) = sandbox::detached_info()? else {
                if json {
                    emit("{\"running\": false}\n");
                } else {
                    emit("no sandbox is running; start one with `connbench sandbox start`\n");
                }
                return Ok(Exit::Success);
            };
            let alive = sandbox::pid_alive_in(info.postgres_pid, &info.dir)
                && sandbox::pid_alive_in(info.pgbouncer_pid, &info.dir);
            let check = match info.target("unix").and_then(|t| t.target()) {
                Ok(t) => match Endpoint::new(t) {
                    Ok(ep) => connect::connect_once(&ep, Some("SELECT 1"))
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                },
                Err(e) => Err(e.to_string()),
            };
            let ok = alive && check.is_ok();
            if json {
                let v = serde_json::json!({
                    "running": alive,
                    "accepts_connections": check.is_ok(),
                    "sandbox": info,
                });
                emit(&(serde_json::to_string_pretty(&v)? + "\n"));
            } else {
                emit(&describe_sandbox(&info));
                match check {
                    Ok(()) => emit("status: running, accepts connections\n"),
                    Err(e) => emit(&format!(
                        "status: processes alive: {alive}; connection check failed: {e}\n"
                    )),
                }
            }
            Ok(if ok { Exit::Success } else { Exit::Failed })
        }
    }
}

fn describe_sandbox(info: &sandbox::SandboxInfo) -> String {
    let mut s = format!(
        "sandbox in {} (servers run as {})\n  {} on port {}, pid {}\n  {} on port {}, pid {}\n\
         targets (libpq conninfo strings; they work unchanged with psql and pgbench):\n",
        info.dir.display(),
        info.run_as,
        info.postgres_version,
        info.postgres_port,
        info.postgres_pid,
        info.pgbouncer_version,
        info.pgbouncer_port,
        info.pgbouncer_pid,
    );
    let width = info.targets.iter().map(|t| t.name.len()).max().unwrap_or(0);
    for t in &info.targets {
        s.push_str(&format!("  {:<width$}  {}\n", t.name, t.conninfo));
    }
    s
}

/// A channel that turns true on the first Ctrl-C (or SIGTERM), so a run can stop cleanly
/// and still report.
fn stop_on_signals() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let term_fut = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term_fut => {}
        }
        eprintln!("\nstopping: reporting what was measured so far");
        let _ = tx.send(true);
    });
    rx
}

/// Writes to stdout; a closed pipe (`connbench ... | head`) ends the program quietly.
fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
    }
}

//! `connbench connect`: targets from the command line or a sandbox, through their routes,
//! measured phase by phase; the report in text or JSON.

use std::io::IsTerminal;
use std::time::Instant;

use anyhow::{Context, Result};

use crate::cli::ConnectArgs;
use crate::connect::{ConnectSettings, Subject};
use crate::exit::Exit;
use crate::proto::Endpoint;
use crate::sandbox::{Sandbox, SandboxOptions};
use crate::setup::route::routed;
use crate::setup::targets::resolve_target;
use crate::setup::{emit, stop_on_signals};

pub async fn run_connect(args: ConnectArgs) -> Result<Exit> {
    let settings = ConnectSettings {
        samples: args.samples,
        warmup: args.warmup as usize,
        query: args.query.clone(),
        interval: args.interval,
    };
    // The sandbox lives until this function returns; its Drop stops and removes it.
    let (mut sandbox, subjects) = if args.sandbox {
        let (sb, subjects) = sandbox_subjects(&args.targets).await?;
        (Some(sb), subjects)
    } else {
        (None, given_subjects(&args.targets)?)
    };
    let (subjects, _routes) = routed(subjects, &args.path, args.distance).await?;
    let run = measure(&subjects, &settings).await;
    let mut summaries = crate::stats::summarize_connect(&run);
    for t in &mut summaries {
        let predictions = args
            .predict_rtt
            .iter()
            .filter_map(|&rtt| crate::stats::model::predict(t, rtt))
            .collect();
        t.predictions = predictions;
    }
    let text = if args.json {
        let report = crate::report::json::connect_report(
            &settings,
            &summaries,
            run.interrupted,
            run.wall.as_secs_f64(),
        );
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        crate::report::text::connect_report(&settings, &summaries, run.interrupted)
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

/// A sandbox started now and the targets of it named (all of them when none is).
async fn sandbox_subjects(names: &[String]) -> Result<(Sandbox, Vec<Subject>)> {
    // MariaDB starts only when a named target is one of its own, so PostgreSQL-only
    // runs keep their start-up time.
    let sb = Sandbox::start(&SandboxOptions {
        mariadb: names.iter().any(|t| crate::sandbox::is_mariadb_target(t)),
        ..SandboxOptions::default()
    })
    .await?;
    eprintln!(
        "sandbox: started in {} (postgres pid {}, pgbouncer pid {}; {}, {})",
        sb.info.dir.display(),
        sb.info.postgres_pid,
        sb.info.pgbouncer_pid,
        sb.info.postgres_version,
        sb.info.pgbouncer_version
    );
    let names: Vec<String> = if names.is_empty() {
        sb.info.targets.iter().map(|t| t.name.clone()).collect()
    } else {
        names.to_vec()
    };
    let mut subjects = Vec::new();
    for name in &names {
        let st = sb.info.target(name)?;
        subjects.push(Subject {
            endpoint: Endpoint::new(st.target()?).with_context(|| format!("target {name}"))?,
            description: Some(st.description.clone()),
        });
    }
    Ok((sb, subjects))
}

/// The targets given (PG* variables and libpq's defaults when none is).
fn given_subjects(texts: &[String]) -> Result<Vec<Subject>> {
    let texts = if texts.is_empty() {
        vec![String::new()]
    } else {
        texts.to_vec()
    };
    let mut subjects = Vec::new();
    for text in &texts {
        let t = resolve_target(text)?;
        let name = t.name();
        subjects.push(Subject {
            endpoint: Endpoint::new(t).with_context(|| format!("target {name}"))?,
            description: None,
        });
    }
    Ok(subjects)
}

/// The measurement, with a progress line on a terminal, until done or Ctrl-C.
async fn measure(subjects: &[Subject], settings: &ConnectSettings) -> crate::connect::ConnectRun {
    let stop = stop_on_signals();
    let show_progress = std::io::stderr().is_terminal();
    let mut last_draw = Instant::now();
    let run = crate::connect::measure(subjects, settings, stop, |done, total| {
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
    run
}

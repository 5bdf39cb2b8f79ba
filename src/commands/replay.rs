//! `connbench replay TRACE --target TARGET`: the trace read into a schedule (refused
//! before connecting when it cannot be replayed as recorded), the target resolved and
//! routed as `load`'s, the pre-flight for missing relations, the replay, the report.

use anyhow::{Context, Result};

use super::{emit, resolve_target, routed, stop_on_signals};
use crate::cli::replay::ReplayArgs;
use crate::connect::Subject;
use crate::proto::Endpoint;
use crate::replay::{self, summary::Recorded, Schedule, Summary};
use crate::Exit;

pub async fn run_replay(args: ReplayArgs) -> Result<Exit> {
    let path = args.trace.display().to_string();
    let mut schedule = Schedule::read(&args.trace).with_context(|| format!("trace {path}"))?;
    if let Some(cut) = &schedule.cut {
        eprintln!("warning: trace {path}: {cut}; replaying what came before");
    }
    // -l: the files are created now, so one that cannot be is refused before connecting.
    let log = args.log().map(|l| l.create(args.threads)).transpose()?;
    let direct = Endpoint::new(resolve_target(&args.target)?)?;
    let subject = Subject {
        endpoint: direct.clone(),
        description: None,
    };
    // The relays live until this function returns.
    let (mut subjects, _routes) = routed(vec![subject], &args.path, args.rtt).await?;
    let endpoint = subjects.remove(0).endpoint;
    replay::check_relations(&direct, &schedule)
        .await
        .with_context(|| format!("replay of {path} on {}", direct.target.name()))?;
    let recorded = Recorded::of(&schedule);
    eprintln!(
        "replay: {} session(s), {} request(s) from {path} on {}",
        recorded.sessions,
        recorded.requests,
        endpoint.target.name()
    );
    let settings = replay::Settings {
        speed: args.speed,
        progress: (!args.progress.is_zero()).then_some(args.progress),
        threads: args.threads,
        log,
    };
    let run = replay::run(&mut schedule, &endpoint, settings, stop_on_signals()).await;
    let summary = Summary::new(&recorded, &schedule, &run, args.speed);
    let target = endpoint.target.name();
    if args.json {
        let v = crate::report::replay::json(&summary, &path, &target);
        emit(&(serde_json::to_string_pretty(&v)? + "\n"));
    } else {
        emit(&crate::report::replay::text(&summary, &path, &target, args.top));
    }
    Ok(if run.interrupted {
        Exit::Interrupted
    } else if run.tally.connected == 0 && recorded.sessions > 0 {
        Exit::Failed
    } else {
        Exit::Success
    })
}

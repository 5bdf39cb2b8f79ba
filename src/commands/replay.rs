//! `connbench replay TRACE --target TARGET`: the trace read into a schedule (refused
//! before connecting when it cannot be replayed as recorded), the target resolved and
//! routed as `load`'s, the pre-flight for missing relations, the replay, the report
//! (text or JSON, and `--html`'s page).

use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};

use crate::cli::replay::ReplayArgs;
use crate::connect::Subject;
use crate::exit::Exit;
use crate::live::{Exporter, Labels};
use crate::load::measurements::{Interval, Measurements};
use crate::proto::Endpoint;
use crate::replay::tally::Tally;
use crate::replay::{self, summary::AsRecorded, Schedule, Summary};
use crate::setup::route::routed;
use crate::setup::targets::resolve_target;
use crate::setup::{emit, stop_on_signals, write_new};
use connbench_trace::profile::Profile;

/// The cell's name on the metrics endpoint.
const CELL: &str = "replay";

/// `--metrics-listen`'s endpoint, fed the replay's periods, and their sum so far: at the
/// end the endpoint gets the exact totals (every transaction is in one period).
struct Metrics {
    exporter: Exporter,
    total: Mutex<Interval>,
}

impl Metrics {
    fn add(&self, p: &Interval) {
        self.exporter.add_period(CELL, p);
        let mut t = self.total.lock().unwrap_or_else(|e| e.into_inner());
        t.transactions += p.transactions;
        t.connects += p.connects;
        t.connect_ns += p.connect_ns;
        for (k, n) in &p.failure_kinds {
            *t.failure_kinds.entry(k.clone()).or_default() += n;
        }
        let _ = t.latency_us.add(&p.latency_us);
    }

    /// The replay's totals in place of its periods, as load's last scrape has them.
    fn finish(&self) {
        let t = self.total.lock().unwrap_or_else(|e| e.into_inner());
        let mut rec = Measurements::new();
        rec.transactions = t.transactions;
        rec.connects = t.connects;
        rec.connect_ns = t.connect_ns;
        for (k, n) in &t.failure_kinds {
            let example = k.clone();
            rec.failures
                .insert(k.clone(), crate::connect::FailureCount { count: *n, example });
        }
        for v in t.latency_us.iter_recorded() {
            rec.latency
                .saturating_record_n(v.value_iterated_to() * 1_000, v.count_at_value());
        }
        self.exporter.finish(CELL, &rec);
    }
}

/// The metrics endpoint, when asked for: labelled run `replay`, its target and sessions.
fn serve_metrics(args: &ReplayArgs, ep: &Endpoint, sessions: u64) -> Result<Option<Arc<Metrics>>> {
    let labels = Labels {
        run: CELL.into(),
        worker: 0,
    };
    let target = ep.target.name();
    let exporter = crate::live::start(
        args.metrics.listen.as_deref(),
        labels,
        Some((CELL, &target, sessions)),
    )?;
    Ok(exporter.map(|exporter| {
        Arc::new(Metrics {
            exporter,
            total: Mutex::new(Interval::new()),
        })
    }))
}

/// The report: text or JSON on stdout, and `--html`'s page.
fn report(
    args: &ReplayArgs,
    summary: &Summary,
    profile: &Profile,
    schedule: &Schedule,
    tally: &Tally,
    target: &str,
) -> Result<()> {
    let path = args.trace.display().to_string();
    let text = crate::report::replay::text(summary, &path, target, args.top);
    if args.json {
        let v = crate::report::replay::json(summary, &path, target);
        emit(&(serde_json::to_string_pretty(&v)? + "\n"));
    } else {
        emit(&text);
    }
    if let Some(file) = &args.html {
        let page = crate::report::replay_html::html(&crate::report::replay_html::Page {
            summary,
            profile,
            shape_ids: &schedule.shapes,
            tally,
            trace: &path,
            target,
            text: &text,
            added_rtt_ms: args.rtt.map_or(0.0, |d| d.as_secs_f64() * 1e3),
            top: args.top,
        });
        write_new(file, &page).with_context(|| format!("--html {}", file.display()))?;
        eprintln!("replay: wrote {}", file.display());
    }
    Ok(())
}

pub async fn run_replay(args: ReplayArgs) -> Result<Exit> {
    let path = args.trace.display().to_string();
    if let Some(page) = args.html.as_ref().filter(|f| f.exists()) {
        anyhow::bail!(
            "--html {}: it exists (a page is never overwritten)",
            page.display()
        );
    }
    let (mut schedule, profile) =
        Schedule::read_profiled(&args.trace).with_context(|| format!("trace {path}"))?;
    if let Some(cut) = &schedule.cut {
        eprintln!("warning: trace {path}: {cut}; replaying what came before");
    }
    replay::without::check(&schedule, &args.without)
        .map_err(|e| anyhow::anyhow!(e))
        .with_context(|| format!("trace {path}"))?;
    let left_out = (!args.without.is_empty()).then(|| replay::without::apply(&mut schedule, &args.without));
    // -l: the files are created now, so one that cannot be is refused before connecting.
    let log = args.log().map(|l| l.create(args.threads)).transpose()?;
    let direct = Endpoint::new(resolve_target(&args.target)?)?;
    // Put back when this function returns, however it returns.
    let _quota = crate::setup::server::hold(args.server_cpus, &direct)?;
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
    let recorded = AsRecorded::of(&schedule);
    eprintln!(
        "replay: {} session(s), {} request(s) from {path} on {}",
        recorded.sessions,
        recorded.requests,
        endpoint.target.name()
    );
    let exporter = serve_metrics(&args, &endpoint, recorded.sessions)?;
    let settings = replay::Settings {
        speed: args.speed,
        progress: (!args.progress.is_zero()).then_some(args.progress),
        threads: args.threads,
        log,
        live: exporter
            .clone()
            .map(|e| -> replay::Live { Arc::new(move |p| e.add(p)) }),
        pool: args.pool(),
        netns: None,
    };
    let run = replay::run(&mut schedule, &endpoint, settings, stop_on_signals()).await;
    if let Some(e) = &exporter {
        e.finish();
    }
    let mut summary = Summary::new(&recorded, &schedule, &run, args.speed);
    let added_ms = args.rtt.map_or(0.0, |d| d.as_secs_f64() * 1e3);
    summary.shapes = replay::shapes::rows(&profile, &schedule.shapes, &run.tally, added_ms);
    summary.left_out = left_out;
    let target = endpoint.target.name();
    report(&args, &summary, &profile, &schedule, &run.tally, &target)?;
    if let (Some(e), Some(linger), false) = (&exporter, args.metrics.linger, run.interrupted) {
        crate::live::linger(&e.exporter, linger).await;
    }
    Ok(if run.interrupted {
        Exit::Interrupted
    } else if run.tally.connected == 0 && recorded.sessions > 0 {
        Exit::Failed
    } else {
        Exit::Success
    })
}

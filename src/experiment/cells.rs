//! Measuring one step of a suite: a load cell (with its fault, when it has one), load
//! cells taking turns of a slice, or connect cells interleaved sample by sample; each
//! turned into the figures a repetition saves. A cell's settings become the same plans
//! `connect` and `load` run, so a suite measures exactly what those commands measure.

use std::time::Duration;

use anyhow::{anyhow, bail, Context as _, Result};

use super::context::Context;
use super::summary::Figures;
use crate::connect::{self, Subject};
use crate::experiment::failure::NOT_MEASURED;
use crate::experiment::suite::{Kind, Step, Suite};
use crate::load::plan::{End, LoadPlan, LoadRun, Progress, StartGate};
use crate::load::threads;
use crate::options::cell::Settings;
use crate::options::{self, LoadOptions};
use crate::proto::Endpoint;

/// What one repetition measured: its figures, its latency histogram (ns), and detail for
/// charts (a load run's per-interval series).
pub(super) struct Measured {
    pub(super) figures: Figures,
    pub(super) histogram: Option<hdrhistogram::Histogram<u64>>,
    pub(super) detail: Option<serde_json::Value>,
}

/// Measures one step: a load cell, or a group of connect cells interleaved.
pub(super) async fn measure_group(
    suite: &Suite,
    group: &[Step],
    endpoints: &[Endpoint],
    ctx: &Context,
) -> Vec<Result<Measured>> {
    match suite.kind {
        Kind::Load if suite.slice.is_some() => {
            let cells: Vec<(&Settings, &Endpoint)> = group
                .iter()
                .map(|s| (&suite.cells[s.cell].settings, &endpoints[s.cell]))
                .collect();
            let names: Vec<&str> = group.iter().map(|s| suite.cells[s.cell].name.as_str()).collect();
            // Sliced cells share one clock: their live figures come per repetition.
            let live = ctx.metrics.as_deref().filter(|_| !group[0].is_prewarm());
            run_load_sliced(&cells, suite, ctx, live.map(|m| (m, names.as_slice()))).await
        }
        Kind::Load if super::replayed::trace_of(&suite.cells[group[0].cell].settings).is_some() => {
            let (cell, endpoint) = (&suite.cells[group[0].cell], &endpoints[group[0].cell]);
            let replayed = match ctx.client_namespace(&cell.settings) {
                Ok(netns) => {
                    super::replayed::measure(
                        suite,
                        &cell.settings,
                        endpoint,
                        &ctx.traces,
                        netns,
                        ctx.stop.clone(),
                    )
                    .await
                }
                Err(e) => Err(e),
            };
            vec![replayed.map(|(figures, histogram)| Measured {
                figures,
                histogram: Some(histogram),
                detail: None,
            })]
        }
        Kind::Load => {
            let step = group[0];
            let cell = &suite.cells[step.cell];
            let live = ctx
                .metrics
                .as_deref()
                .filter(|_| !step.is_prewarm())
                .map(|m| (m, cell.name.as_str()));
            vec![run_load(suite, &cell.settings, &endpoints[step.cell], ctx, live).await]
        }
        Kind::Connect => {
            let cells: Vec<(&Settings, &Endpoint)> = group
                .iter()
                .map(|s| (&suite.cells[s.cell].settings, &endpoints[s.cell]))
                .collect();
            run_connect(&cells, ctx).await
        }
    }
}

/// A load cell's plan, with its client count and series interval.
async fn load_plan(
    suite: &Suite,
    s: &Settings,
    endpoint: &Endpoint,
    ctx: &Context,
) -> Result<(LoadPlan, usize, f64)> {
    let options = LoadOptions::from_settings(s, suite.duration, suite.warmup, &ctx.schema)?;
    // sysbench's tables and connbench's can both be on one target, for different cells.
    let key = format!(
        "{:?} {} {}",
        options.tables,
        options.on_sysbench_tables(),
        endpoint.target.conninfo()
    );
    let known = ctx.scales.borrow().get(&key).cloned();
    let dataset = match known {
        Some(dataset) => dataset,
        None => {
            // Looked up from the host, on the target without route or namespace.
            let dataset = options.dataset(&ctx.direct_endpoint(s)?, 1).await?;
            ctx.scales.borrow_mut().insert(key, dataset.clone());
            dataset
        }
    };
    let clients = options.clients;
    let interval_s = options.interval.as_secs_f64();
    let mut plan = options.plan(endpoint.clone(), &dataset, ctx.client_namespace(s)?, None)?;
    plan.accounting = options::accounting(&ctx.direct_endpoint(s)?.target, ctx.sandbox.as_ref(), None)?;
    plan.accounting.relays = ctx.relay_threads(s)?;
    Ok((plan, clients, interval_s))
}

async fn run_load(
    suite: &Suite,
    s: &Settings,
    endpoint: &Endpoint,
    ctx: &Context,
    live: Option<(&dyn super::sink::Sink, &str)>,
) -> Result<Measured> {
    let (mut plan, clients, interval_s) = load_plan(suite, s, endpoint, ctx).await?;
    let fault = options::fault(s)?;
    if let Some((m, cell)) = live {
        m.begin(cell, &endpoint.target.name(), clients as u64);
        plan.ramp_progress = m.ramp(cell);
        if plan.progress.is_none() {
            plan.progress = Some(Duration::from_secs(1));
        }
    }
    let on_period = |p: Progress| {
        if let Some((m, cell)) = live {
            m.add_period(cell, &p.totals);
        }
    };
    let (run, struck) = match fault {
        None => (threads::run(plan, ctx.stop.clone(), on_period).await?, None),
        Some(f) => {
            // Repetitions must not inherit the last strike: wait until the cell's path
            // answers a query again (PgBouncer retries a failed server login only every
            // server_login_retry, 15 s by default).
            settle(endpoint).await?;
            // The gate hands the load's start to the fault, which strikes `at` into the
            // measurement, on the sandbox, while the clients run.
            let (tx, rx) = tokio::sync::oneshot::channel();
            let tx = std::sync::Mutex::new(Some(tx));
            plan.start_gate = Some(StartGate(std::sync::Arc::new(move || {
                let start = std::time::Instant::now() + std::time::Duration::from_millis(5);
                if let Some(tx) = tx.lock().ok().and_then(|mut t| t.take()) {
                    let _ = tx.send(start);
                }
                Ok(start)
            })));
            let warmup = plan.warmup;
            let strike = async {
                let Ok(start) = rx.await else {
                    return Ok(None);
                };
                tokio::time::sleep_until((start + warmup + f.at).into()).await;
                let struck = ctx.strike(f.kind).await?;
                Ok::<_, anyhow::Error>(Some((start + warmup, struck)))
            };
            let (run, struck) = tokio::join!(threads::run(plan, ctx.stop.clone(), on_period), strike);
            (run?, struck?)
        }
    };
    if let Some((m, cell)) = live {
        m.finish(cell, &run.measurements);
    }
    let summary = crate::stats::load::summarize_load(&run, clients, interval_s);
    let mut measured = load_figures(&run, &summary)?;
    let f = &mut measured.figures;
    cpu_figures(f, &summary, true);
    if let Some(cs) = summary.context_switches_per_transaction {
        f.insert("context_switches_per_transaction".into(), cs);
    }
    let mut detail = serde_json::json!({ "series": summary.series });
    if let (Some(fault), Some((measure_start, struck))) = (fault, struck) {
        let at_s = fault.at.as_secs_f64();
        let took = struck.took;
        // Seconds into the measurement.
        let secs = |t: std::time::Instant| t.saturating_duration_since(measure_start).as_secs_f64();
        detail["fault"] = serde_json::json!({
            "kind": fault.kind.as_str(),
            "at_s": at_s,
            "took_s": took.as_secs_f64(),
            "began_s": secs(struck.started),
            "landed_s": secs(struck.landed),
        });
        // A restart's downtime as it measured it: the old server's connections gone, the
        // server itself gone, the new one refusing logins until, ready at.
        if let Some(d) = struck.down {
            detail["fault"]["dropped_s"] = secs(d.dropped).into();
            detail["fault"]["stopped_s"] = secs(d.stopped).into();
            detail["fault"]["refused_until_s"] = secs(d.refused_until).into();
            detail["fault"]["ready_s"] = secs(d.ready).into();
        }
        if let Some(n) = struck.terminated {
            detail["fault"]["terminated"] = n.into();
        }
        f.insert("fault_took_s".into(), took.as_secs_f64());
        let landed_s = secs(struck.landed).max(at_s);
        if let Some(e) = crate::stats::fault::effect(&summary.series, interval_s, at_s, landed_s) {
            f.insert("longest_stall_s".into(), e.longest_stall_s);
            if let Some(r) = e.recovery_s {
                f.insert("recovery_s".into(), r);
            }
            f.insert("connects_per_s_before".into(), e.connects_per_s_before);
            f.insert("reconnects_per_s_peak".into(), e.connects_per_s_peak);
        }
    }
    measured.detail = Some(detail);
    Ok(measured)
}

/// Measures load cells together, taking turns of the suite's slice (a group of one runs
/// alone, in turns all the same); one result per cell. Each cell gets the suite's warm-up
/// and duration in turns, and its CPU (clients, server, pooler, relays) is what the
/// driver read around its counted turns, and so are the machine's context switches.
async fn run_load_sliced(
    cells: &[(&Settings, &Endpoint)],
    suite: &Suite,
    ctx: &Context,
    live: Option<(&dyn super::sink::Sink, &[&str])>,
) -> Vec<Result<Measured>> {
    let slice = suite.slice.expect("only called for a suite with slices");
    let duration = suite.duration.expect("a load suite has a duration");
    let slices = crate::load::slices::Slices::new(cells.len());
    let mut plans = Vec::new();
    for (i, (s, ep)) in cells.iter().enumerate() {
        let plan = match load_plan(suite, s, ep, ctx).await {
            Ok((mut plan, clients, _)) => {
                let turn = slices.turn(i);
                turn.clients(clients);
                plan.warmup = Duration::ZERO;
                // The turns end the run; this end is only a backstop.
                plan.end = End::Duration(duration * 4 * cells.len() as u32 + Duration::from_secs(30));
                // The driver reads the groups on the path around each of the cell's
                // turns; the load's own window would span every cell's.
                let accounting = std::mem::take(&mut plan.accounting);
                plan.accounting.server_not_measured = accounting.server_not_measured.clone();
                turn.account(accounting);
                plan.start_gate = Some(StartGate(std::sync::Arc::new({
                    let turn = turn.clone();
                    move || turn.arrive()
                })));
                plan.turn = Some(turn);
                Ok((plan, clients))
            }
            Err(e) => Err(e),
        };
        plans.push(plan);
    }
    // A cell that cannot even be planned fails the whole group before anything runs: the
    // others would wait for it at the start line. Each keeps its own error; a cell that
    // could start says which could not (its target), so no warning names another's.
    if let Some((j, e)) = plans
        .iter()
        .enumerate()
        .find_map(|(j, p)| p.as_ref().err().map(|e| (j, e)))
    {
        let first = format!("{e:#}");
        let other = cells[j].1.target.name();
        return plans
            .iter()
            .map(|p| match p {
                Err(e) => Err(anyhow!("{e:#}")),
                Ok(_) => Err(anyhow!(
                    "{NOT_MEASURED}the cell on target {other}, which takes turns with it, could not start: {first}"
                )),
            })
            .collect();
    }
    let turns_of = |d: Duration| (d.as_secs_f64() / slice.as_secs_f64()).ceil().max(1.0) as u32;
    let warm_turns = suite
        .warmup
        .map_or(0, |w| if w.is_zero() { 0 } else { turns_of(w) });
    let runs: Vec<_> = plans
        .into_iter()
        .map(|p| {
            let (plan, clients) = p.expect("checked above");
            let stop = ctx.stop.clone();
            tokio::spawn(async move { (threads::run(plan, stop, |_| {}).await, clients) })
        })
        .collect();
    let turns = slices
        .drive(slice, warm_turns, turns_of(duration), ctx.stop.clone())
        .await;
    let mut out = Vec::new();
    for (i, r) in runs.into_iter().enumerate() {
        let measured = match r.await {
            Ok((Ok(mut run), clients)) => {
                if let Some((m, names)) = live {
                    m.begin(names[i], &cells[i].1.target.name(), clients as u64);
                    m.finish(names[i], &run.measurements);
                }
                // The arm's own time and CPU: over its turns, not the group's clock.
                run.measured = turns.measured[i];
                let cpu = &turns.cpu[i];
                (run.cpu_user, run.cpu_system) = cpu.clients.unwrap_or_default();
                run.server_cpu = cpu.server;
                run.pooler_cpu = cpu.pooler;
                run.relay_cpu = cpu.relays;
                run.context_switches = cpu.switches.unwrap_or_default();
                run.machine = cpu.machine;
                let summary = crate::stats::load::summarize_load(&run, clients, duration.as_secs_f64());
                load_figures(&run, &summary).map(|mut m| {
                    cpu_figures(&mut m.figures, &summary, cpu.clients.is_some());
                    if let Some(cs) = summary.context_switches_per_transaction {
                        m.figures.insert("context_switches_per_transaction".into(), cs);
                    }
                    m.figures.insert("slice_turns".into(), f64::from(turns.turns));
                    m.figures.insert("slice_ms".into(), slice.as_secs_f64() * 1e3);
                    m
                })
            }
            Ok((Err(e), _)) => Err(e),
            Err(e) => Err(anyhow!("a load run panicked: {e}")),
        };
        out.push(measured);
    }
    out
}

/// CPU per transaction and cores busy: the clients' (when `clients` says they were
/// measured), and the relays', server's and pooler's where measured.
fn cpu_figures(f: &mut Figures, summary: &crate::stats::load::LoadSummary, clients: bool) {
    if clients {
        if let Some(cpu) = summary.cpu_per_transaction_us {
            f.insert("cpu_per_transaction_us".into(), cpu);
        }
        f.insert("client_cores".into(), summary.client_cores);
    }
    for (name, cpu) in [
        ("relay", &summary.relay_cpu),
        ("server", &summary.server_cpu),
        ("pooler", &summary.pooler_cpu),
    ] {
        if let Some(c) = cpu {
            if let Some(us) = c.per_transaction_us {
                f.insert(format!("{name}_cpu_per_transaction_us"), us);
            }
            f.insert(format!("{name}_cores"), c.cores);
        }
    }
}

/// The figures every load repetition has: throughput, latency, counts, round trips.
fn load_figures(run: &LoadRun, summary: &crate::stats::load::LoadSummary) -> Result<Measured> {
    let Some(lat) = &summary.latency else {
        bail!(
            "no transaction completed; the first error: {}",
            run.first_error.as_deref().unwrap_or("none recorded")
        );
    };
    let ms = |ns: f64| ns / 1e6;
    let mut f = Figures::new();
    f.insert("tps".into(), summary.tps);
    f.insert("latency_mean_ms".into(), ms(lat.mean_ns));
    f.insert("latency_p50_ms".into(), ms(lat.p50_ns as f64));
    f.insert("latency_p95_ms".into(), ms(lat.p95_ns as f64));
    f.insert("latency_p99_ms".into(), ms(lat.p99_ns as f64));
    f.insert("transactions".into(), summary.transactions as f64);
    f.insert("failed_transactions".into(), summary.failed_transactions as f64);
    f.insert("connects".into(), summary.connects as f64);
    if let Some(c) = &summary.connect {
        f.insert("connect_mean_ms".into(), ms(c.mean_ns));
    }
    if let Some(rt) = summary.round_trips_per_transaction {
        f.insert("round_trips_per_transaction".into(), rt);
    }
    f.insert("latency_max_ms".into(), ms(lat.max_ns as f64));
    failure_figures(&mut f, run);
    ramp_figures(&mut f, run);
    Ok(Measured {
        figures: f,
        histogram: Some(run.measurements.latency.clone()),
        detail: None,
    })
}

/// How the repetition's clients got connected: the connect ramp before the clock (its
/// time from the first attempt to the last connection, and its failed attempts), when it
/// opened any (a persistent client's, a pool's; `connect_rate` paces it), and the connect
/// attempts refused during the measurement: a slow ramp, or connects refused at a
/// server's limit, say how a cell's other figures came about.
fn ramp_figures(f: &mut Figures, run: &LoadRun) {
    let ramp = &run.ramp;
    if ramp.wanted > 0 {
        f.insert("connect_ramp_s".into(), ramp.took.as_secs_f64());
        f.insert("connect_ramp_failed_attempts".into(), ramp.failed_attempts as f64);
    }
    f.insert(
        "refused_connects".into(),
        run.measurements.refused_attempts as f64,
    );
}

/// What failed and stalled transactions cost the repetition (`stats::failures`): counts
/// by code, their time, and the time of every measured transaction beside them.
fn failure_figures(f: &mut Figures, run: &LoadRun) {
    use crate::stats::failures::{self, CODE_PREFIX, FAILED_TIME, STALLED, STALLED_TIME, TRANSACTION_TIME};
    let r = &run.measurements;
    for (code, c) in &r.failures {
        f.insert(format!("{CODE_PREFIX}{code}"), c.count as f64);
    }
    let (stalled, stalled_ns) = failures::stalled(&r.latency);
    f.insert(FAILED_TIME.into(), r.failed_ns as f64 / 1e6);
    f.insert(STALLED.into(), stalled as f64);
    f.insert(STALLED_TIME.into(), stalled_ns as f64 / 1e6);
    f.insert(
        TRANSACTION_TIME.into(),
        (r.latency_sum_ns + r.failed_ns) as f64 / 1e9,
    );
}

/// Waits until `endpoint` answers `SELECT 1` (at most 60 s), so a faults cell's
/// repetition starts on a healthy path; says so when it had to wait.
async fn settle(endpoint: &Endpoint) -> Result<()> {
    let started = std::time::Instant::now();
    let limit = std::time::Duration::from_secs(60);
    loop {
        let attempt = async {
            let (mut s, _) = crate::proto::connect(endpoint, &crate::proto::PhaseCursor::default()).await?;
            let r = s.query_column("SELECT 1").await;
            s.close().await;
            r
        };
        match attempt.await {
            Ok(_) => {
                if started.elapsed() > std::time::Duration::from_millis(500) {
                    eprintln!(
                        "faults: the path answered again {} after the last strike; the repetition starts now",
                        crate::units::format_duration(started.elapsed())
                    );
                }
                return Ok(());
            }
            Err(e) if started.elapsed() >= limit => {
                bail!(
                    "the path to {} did not answer within {} after the last strike: {e}",
                    endpoint.target.name(),
                    crate::units::format_duration(limit)
                )
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
        }
    }
}

/// Measures connect cells together, interleaved sample by sample, with the first cell's
/// settings (the caller groups cells whose connect settings are equal); one result per
/// cell. A single cell may run in its own network namespace.
async fn run_connect(cells: &[(&Settings, &Endpoint)], ctx: &Context) -> Vec<Result<Measured>> {
    match measure_connects(cells, ctx).await {
        Ok(run) => {
            let summaries = crate::stats::summarize_connect(&run);
            summaries
                .iter()
                .zip(&run.targets)
                .map(|(t, samples)| connect_figures(t, samples))
                .collect()
        }
        Err(e) => {
            let message = format!("{e:#}");
            cells.iter().map(|_| Err(anyhow!("{message}"))).collect()
        }
    }
}

async fn measure_connects(cells: &[(&Settings, &Endpoint)], ctx: &Context) -> Result<connect::ConnectRun> {
    let settings = options::connect_settings(cells[0].0)?;
    let subjects: Vec<Subject> = cells
        .iter()
        .map(|(_, ep)| Subject {
            endpoint: (*ep).clone(),
            description: None,
        })
        .collect();
    match ctx.client_namespace(cells[0].0)? {
        None => Ok(connect::measure(&subjects, &settings, ctx.stop.clone(), |_, _| {}).await),
        // The client in its namespace: a thread of its own enters it and runs the same
        // measurement on a runtime of its own; this task waits without blocking.
        Some(ns) => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let stop = ctx.stop.clone();
            std::thread::Builder::new()
                .name("connbench-netns".into())
                .spawn(move || {
                    let result = (|| -> Result<connect::ConnectRun> {
                        crate::net::netns::enter(&ns)
                            .context("cannot enter the client's network namespace")?;
                        let rt = tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()?;
                        Ok(rt.block_on(connect::measure(&subjects, &settings, stop, |_, _| {})))
                    })();
                    let _ = tx.send(result);
                })
                .context("cannot start the namespace thread")?;
            rx.await
                .map_err(|_| anyhow!("the namespace thread ended without a result"))?
        }
    }
}

/// One connect target's repetition figures: total and per-phase mean, p50, p99 (µs),
/// round trips, the cold first connection, and the histogram of totals.
fn connect_figures(t: &crate::stats::TargetSummary, samples: &connect::TargetSamples) -> Result<Measured> {
    let Some(total) = &t.total else {
        bail!(
            "no connection succeeded: {}",
            t.failures_by_kind
                .first()
                .map(|(_, f)| f.example.as_str())
                .unwrap_or("no attempt")
        );
    };
    let us = |ns: f64| ns / 1e3;
    let mut f = Figures::new();
    f.insert("total_mean_us".into(), us(total.time.mean_ns));
    f.insert("total_p50_us".into(), us(total.time.p50_ns as f64));
    f.insert("total_p99_us".into(), us(total.time.p99_ns as f64));
    f.insert("round_trips".into(), total.round_trips as f64);
    for p in &t.phases {
        f.insert(format!("{}_mean_us", p.phase), us(p.time.mean_ns));
        f.insert(format!("{}_p50_us", p.phase), us(p.time.p50_ns as f64));
        f.insert(format!("{}_p99_us", p.phase), us(p.time.p99_ns as f64));
    }
    if let Some(cold) = t.warmup.first() {
        f.insert("first_connection_us".into(), us(cold.total_ns as f64));
    }
    let mut h = crate::load::measurements::latency_histogram();
    for tl in &samples.samples {
        h.saturating_record(tl.total_ns.max(1));
    }
    Ok(Measured {
        figures: f,
        histogram: Some(h),
        detail: None,
    })
}

//! Running a suite: every step of the plan against its target, each repetition saved to
//! the store the moment it ends, then the statistics across repetitions.
//!
//! A cell's settings (text, from the suite file) are turned into the same plans `connect`
//! and `load` run, so a suite measures exactly what those commands measure. A repetition
//! that fails is saved with its error and left out of the statistics. The pre-warm pass
//! is saved (marked) and never counted.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{anyhow, bail, Context as _, Result};
use tokio::sync::watch;

use crate::connect::{self, Subject};
use crate::experiment::store::{self, Environment, Repetition, Status, Store};
use crate::experiment::suite::{Kind, Settings, Step, Suite};
use crate::load::engine;
use crate::net::route::{self, Route, RouteSpec, Verified};
use crate::options::{self, route_spec, LoadOptions, NetPath};
use crate::proto::Endpoint;
use crate::stats::compare::{self, Comparison, Described, Rule};
use crate::target::Target;

/// What a suite runs against and where results go.
pub struct Context {
    /// Names a suite may use for targets (sandbox targets, `--target NAME=conninfo`).
    pub targets: BTreeMap<String, String>,
    pub schema: String,
    pub store: Store,
    pub pgbouncer_version: Option<String>,
    pub stop: watch::Receiver<bool>,
    /// The dataset's scale per target conninfo, looked up once per run, not before every
    /// repetition.
    pub scales: std::cell::RefCell<BTreeMap<String, i64>>,
    /// Relays started for cells with a `path` or `distance`, per target and route; they
    /// live as long as the context, so every repetition of a cell takes the same route.
    pub routes: std::cell::RefCell<BTreeMap<(String, RouteSpec), std::rc::Rc<Route>>>,
    /// The namespace and bridge of `netpath = "bridge"` cells, created at the first.
    pub bridge: std::cell::RefCell<Option<crate::net::netns::Bridge>>,
}

/// One cell's outcome across repetitions.
#[derive(Debug, Clone)]
pub struct CellResult {
    pub name: String,
    pub baseline: bool,
    /// Per figure, the value of each successful counted repetition.
    pub figures: BTreeMap<String, Vec<f64>>,
    pub described: BTreeMap<String, Described>,
    /// Against the baseline, on the suite's figure.
    pub comparison: Option<Comparison>,
    /// For a load cell with a distance: the round-trip model's figure beside the measured.
    pub prediction: Option<crate::stats::model::DistancePrediction>,
    pub errors: Vec<String>,
}

/// A suite's outcome.
#[derive(Debug, Clone)]
pub struct SuiteResult {
    pub run_id: i64,
    pub suite: Suite,
    pub cells: Vec<CellResult>,
    pub interrupted: bool,
    pub environment: Environment,
}

/// The comparison rule every suite uses: 95% intervals, α = 0.05, a 2% noise threshold.
pub fn rule(suite: &Suite) -> Rule {
    Rule {
        better: suite.better,
        confidence: 0.95,
        alpha: 0.05,
        threshold: 0.02,
    }
}

impl Context {
    /// The endpoint a cell's `target` names (a known name, else a conninfo string),
    /// through the relays of its route when it has one.
    pub fn endpoint(&self, settings: &Settings) -> Result<Endpoint> {
        let routed = self.routed_endpoint(settings)?;
        match options::netpath(settings)? {
            NetPath::Host => Ok(routed),
            NetPath::Bridge => {
                let mut t = routed.target;
                match &t.host {
                    crate::target::Host::Tcp(h) if h == "127.0.0.1" || h == "localhost" => {}
                    _ => bail!(
                        "netpath = bridge needs a TCP target on this machine (127.0.0.1 or localhost), not {}; \
                         the client in its namespace reaches the host through the bridge",
                        t.name()
                    ),
                }
                let mut slot = self.bridge.borrow_mut();
                if slot.is_none() {
                    *slot = Some(crate::net::netns::Bridge::create()?);
                }
                let b = slot.as_mut().unwrap();
                b.expose(t.port)?;
                t.host = crate::target::Host::Tcp(b.gateway.to_string());
                t.hostaddr = None;
                Ok(Endpoint::new(t)?)
            }
        }
    }

    /// The endpoint through a cell's relays, reached from the host's network.
    pub fn routed_endpoint(&self, settings: &Settings) -> Result<Endpoint> {
        let direct = self.direct_endpoint(settings)?;
        let spec = route_spec(settings)?;
        if spec.is_direct() {
            return Ok(direct);
        }
        let routed = {
            let key = (direct.target.conninfo(), spec);
            let existing = self.routes.borrow().get(&key).cloned();
            let route = match existing {
                Some(r) => r,
                None => {
                    let r = std::rc::Rc::new(route::build(&direct.target, spec)?);
                    self.routes.borrow_mut().insert(key, r.clone());
                    r
                }
            };
            route.target.clone()
        };
        Ok(Endpoint::new(routed)?)
    }

    /// The network namespace a cell's client runs in: `None` for the host's.
    pub fn client_namespace(&self, settings: &Settings) -> Result<Option<std::sync::Arc<std::fs::File>>> {
        match options::netpath(settings)? {
            NetPath::Host => Ok(None),
            NetPath::Bridge => {
                let b = self.bridge.borrow();
                let b = b
                    .as_ref()
                    .ok_or_else(|| anyhow!("netpath bridge: the namespace was not created"))?;
                Ok(Some(std::sync::Arc::new(b.namespace_file()?)))
            }
        }
    }

    /// The endpoint of a cell's target without its route.
    pub fn direct_endpoint(&self, settings: &Settings) -> Result<Endpoint> {
        let name = settings
            .get("target")
            .ok_or_else(|| anyhow!("the cell has no target setting"))?;
        let mut t = match self.targets.get(name) {
            Some(conninfo) => {
                let mut t = Target::parse(conninfo)?;
                t.label = Some(name.to_string());
                t
            }
            None => Target::parse(name).with_context(|| {
                format!(
                    "target {:?} is neither a known name ({}) nor a valid conninfo",
                    crate::target::redact(name),
                    self.targets.keys().cloned().collect::<Vec<_>>().join(", ")
                )
            })?,
        };
        if let Some(mode) = options::sslmode(settings)? {
            t = t.with_sslmode(mode).context("setting sslmode")?;
        }
        Ok(Endpoint::new(t)?)
    }
}

/// Every check of a suite's cells that needs no server: each cell's settings through
/// the options layer, as a run would take them. `run --dry-run` stops after this.
pub fn check(suite: &Suite, schema: &str) -> Result<()> {
    for c in &suite.cells {
        let checked = (|| -> Result<()> {
            options::route_spec(&c.settings)?;
            options::netpath(&c.settings)?;
            options::sslmode(&c.settings)?;
            match suite.kind {
                Kind::Load => {
                    LoadOptions::from_settings(&c.settings, suite.duration, suite.warmup, schema)?.check()
                }
                Kind::Connect => options::connect_settings(&c.settings).map(|_| ()),
            }
        })();
        checked.with_context(|| format!("suite {}, cell {}", suite.name, c.name))?;
    }
    Ok(())
}

/// Runs the suite, saving after every repetition; `progress(done, total, cell)` is called
/// before each step.
pub async fn run(
    suite: &Suite,
    ctx: &Context,
    mut progress: impl FnMut(usize, usize, &str),
) -> Result<SuiteResult> {
    // Every cell must resolve before anything runs: a typo fails in a second, not after
    // an hour of measurements.
    check(suite, &ctx.schema)?;
    let endpoints: Vec<Endpoint> = suite
        .cells
        .iter()
        .map(|c| {
            ctx.endpoint(&c.settings)
                .with_context(|| format!("suite {}, cell {}", suite.name, c.name))
        })
        .collect::<Result<_>>()?;
    // Distances are measured before anything else: the results carry the round trip the
    // relays achieved beside the one requested.
    let mut verified: BTreeMap<(String, RouteSpec), Verified> = BTreeMap::new();
    let mut cell_rtt: Vec<Option<Verified>> = vec![None; suite.cells.len()];
    for (i, c) in suite.cells.iter().enumerate() {
        let spec = route_spec(&c.settings)?;
        if spec.distance.is_zero() {
            continue;
        }
        let direct = ctx.direct_endpoint(&c.settings)?;
        let key = (direct.target.conninfo(), spec);
        if !verified.contains_key(&key) {
            let v = route::verify(&direct, &ctx.routed_endpoint(&c.settings)?, spec.distance)
                .await
                .with_context(|| {
                    format!(
                        "suite {}, cell {}: checking the emulated distance",
                        suite.name, c.name
                    )
                })?;
            if !v.within_tolerance() {
                eprintln!(
                    "warning: cell {}: requested round trip {:.2} ms, achieved {:.2} ms (tolerance max(0.2 ms, 3%)); \
                     the machine may be overloaded",
                    c.name, v.requested_ms, v.achieved_ms
                );
            }
            verified.insert(key.clone(), v);
        }
        cell_rtt[i] = verified.get(&key).copied();
    }
    // The environment probe runs from the host, on the baseline's target without its
    // route or namespace (a bridge address answers only from inside the namespace).
    let probe_endpoint = ctx.direct_endpoint(&suite.cells[suite.baseline].settings)?;
    let probe = connect::connect_once(&probe_endpoint, None).await;
    let (server_version, tls) = match &probe {
        Ok((tl, v)) => (
            v.clone(),
            tl.tls.as_ref().map(|t| format!("{} {}", t.version, t.cipher)),
        ),
        Err(e) => bail!(
            "suite {}: cannot connect to the baseline's target {}: {e}",
            suite.name,
            endpoints[suite.baseline].target.name()
        ),
    };
    let environment = Environment::here(server_version, ctx.pgbouncer_version.clone(), tls);
    let run_id = ctx.store.begin_run(suite, &environment)?;
    let plan = suite.plan();
    let mut values: Vec<BTreeMap<String, Vec<f64>>> = vec![BTreeMap::new(); suite.cells.len()];
    let mut errors: Vec<Vec<String>> = vec![Vec::new(); suite.cells.len()];
    let mut interrupted = false;
    for (i, step) in plan.iter().enumerate() {
        if *ctx.stop.borrow() {
            interrupted = true;
            break;
        }
        let cell = &suite.cells[step.cell];
        progress(i, plan.len(), &cell.name);
        let started_at = store::now_utc();
        let t0 = Instant::now();
        let outcome = match suite.kind {
            Kind::Load => run_load(suite, &cell.settings, &endpoints[step.cell], ctx).await,
            Kind::Connect => run_connect(&cell.settings, &endpoints[step.cell], ctx).await,
        };
        // Ctrl-C during a step: the step was cut short, so it is not saved as a result.
        if *ctx.stop.borrow() {
            interrupted = true;
            break;
        }
        let (
            Measured {
                mut figures,
                histogram,
                detail,
            },
            error,
        ) = match outcome {
            Ok(m) => (m, None),
            Err(e) => (
                Measured {
                    figures: BTreeMap::new(),
                    histogram: None,
                    detail: None,
                },
                Some(format!("{e:#}")),
            ),
        };
        if let (Some(v), None) = (cell_rtt[step.cell], &error) {
            figures.insert("rtt_requested_ms".into(), v.requested_ms);
            figures.insert("rtt_achieved_ms".into(), v.achieved_ms);
        }
        ctx.store.save_repetition(
            run_id,
            &Repetition {
                cell: step.cell,
                repetition: step.repetition,
                prewarm: step.is_prewarm(),
                started_at,
                elapsed_s: t0.elapsed().as_secs_f64(),
                error: error.clone(),
                summary: serde_json::to_value(&figures)?,
                latency_histogram: histogram.as_ref().map(store::serialize_histogram).transpose()?,
                detail,
            },
        )?;
        count(
            step,
            figures,
            error,
            &mut values[step.cell],
            &mut errors[step.cell],
        );
    }
    ctx.store.finish_run(
        run_id,
        if interrupted {
            Status::Interrupted
        } else {
            Status::Done
        },
    )?;
    Ok(summarize(suite, run_id, values, errors, interrupted, environment))
}

fn count(
    step: &Step,
    figures: BTreeMap<String, f64>,
    error: Option<String>,
    values: &mut BTreeMap<String, Vec<f64>>,
    errors: &mut Vec<String>,
) {
    if step.is_prewarm() {
        return;
    }
    match error {
        Some(e) => errors.push(e),
        None => {
            for (k, v) in figures {
                values.entry(k).or_default().push(v);
            }
        }
    }
}

/// The statistics of a (possibly partial) run: per cell and figure, and each cell
/// against the baseline on the suite's figure.
pub fn summarize(
    suite: &Suite,
    run_id: i64,
    values: Vec<BTreeMap<String, Vec<f64>>>,
    errors: Vec<Vec<String>>,
    interrupted: bool,
    environment: Environment,
) -> SuiteResult {
    let r = rule(suite);
    let base_name = &suite.cells[suite.baseline].name;
    let base_values = values[suite.baseline]
        .get(&suite.figure)
        .cloned()
        .unwrap_or_default();
    let cells = suite
        .cells
        .iter()
        .zip(values)
        .zip(errors)
        .enumerate()
        .map(|(i, ((cell, figures), errors))| {
            let described = figures
                .iter()
                .filter_map(|(k, v)| compare::describe(v, r.confidence).map(|d| (k.clone(), d)))
                .collect();
            let comparison = if i == suite.baseline {
                None
            } else {
                let mine = figures.get(&suite.figure).cloned().unwrap_or_default();
                compare::compare(&mine, &base_values, r, &cell.name, base_name)
            };
            CellResult {
                name: cell.name.clone(),
                baseline: i == suite.baseline,
                figures,
                described,
                comparison,
                prediction: None,
                errors,
            }
        })
        .collect::<Vec<_>>();
    let mut cells = cells;
    if suite.kind == Kind::Load {
        for i in 0..cells.len() {
            cells[i].prediction = predict_from_local(suite, &cells, i);
        }
    }
    SuiteResult {
        run_id,
        suite: suite.clone(),
        cells,
        interrupted,
        environment,
    }
}

/// The round-trip model for cell `i` when it has a distance: the same cell without
/// distance (every other axis equal), its mean latency and round trips per transaction,
/// plus the distance times those round trips.
fn predict_from_local(
    suite: &Suite,
    cells: &[CellResult],
    i: usize,
) -> Option<crate::stats::model::DistancePrediction> {
    let zero = |v: &str| crate::units::parse_duration(v).is_ok_and(|d| d.is_zero());
    let axes = &suite.cells[i].axes;
    let (_, dist) = axes.iter().find(|(k, _)| k == "distance")?;
    let rtt = crate::units::parse_duration(dist).ok().filter(|d| !d.is_zero())?;
    let j = suite.cells.iter().position(|c| {
        c.axes.len() == axes.len()
            && c.axes
                .iter()
                .zip(axes)
                .all(|((k, v), (k2, v2))| k == k2 && if k == "distance" { zero(v) } else { v == v2 })
    })?;
    let mean = |c: &CellResult, f: &str| c.described.get(f).map(|d| d.mean.point);
    let local = mean(&cells[j], "latency_mean_ms")?;
    let rts = mean(&cells[j], "round_trips_per_transaction")?;
    let measured = mean(&cells[i], "latency_mean_ms")?;
    let rtt_ms = rtt.as_secs_f64() * 1e3;
    let predicted = crate::stats::model::at_distance(local, rtt_ms, rts);
    Some(crate::stats::model::DistancePrediction {
        from_cell: cells[j].name.clone(),
        rtt_requested_ms: rtt_ms,
        rtt_achieved_ms: mean(&cells[i], "rtt_achieved_ms"),
        round_trips_per_transaction: rts,
        local_ms: local,
        predicted_ms: predicted,
        measured_ms: measured,
        ratio: measured / predicted,
    })
}

type Figures = BTreeMap<String, f64>;

/// What one repetition measured: its figures, its latency histogram (ns), and detail for
/// charts (a load run's per-interval series).
struct Measured {
    figures: Figures,
    histogram: Option<hdrhistogram::Histogram<u64>>,
    detail: Option<serde_json::Value>,
}

async fn run_load(suite: &Suite, s: &Settings, endpoint: &Endpoint, ctx: &Context) -> Result<Measured> {
    let options = LoadOptions::from_settings(s, suite.duration, suite.warmup, &ctx.schema)?;
    let key = endpoint.target.conninfo();
    let known = ctx.scales.borrow().get(&key).copied();
    let scale = match known {
        Some(scale) => scale,
        None => {
            // Looked up from the host, on the target without route or namespace.
            let scale = options.dataset_scale(&ctx.direct_endpoint(s)?, 1).await?;
            ctx.scales.borrow_mut().insert(key, scale);
            scale
        }
    };
    let clients = options.clients;
    let plan = options.plan(endpoint.clone(), scale, ctx.client_namespace(s)?, None)?;
    let run = engine::run(plan, ctx.stop.clone(), |_| {}).await?;
    let summary = crate::stats::load::summarize_load(&run, clients, 1.0);
    let Some(lat) = summary.latency else {
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
    f.insert(
        "cpu_per_transaction_us".into(),
        summary.cpu_per_transaction_us.unwrap_or(0.0),
    );
    if let Some(rt) = summary.round_trips_per_transaction {
        f.insert("round_trips_per_transaction".into(), rt);
    }
    Ok(Measured {
        figures: f,
        histogram: Some(run.recorder.latency),
        detail: Some(serde_json::json!({ "series": summary.series })),
    })
}

async fn run_connect(s: &Settings, endpoint: &Endpoint, ctx: &Context) -> Result<Measured> {
    let settings = options::connect_settings(s)?;
    let subject = Subject {
        endpoint: endpoint.clone(),
        description: None,
    };
    let run = match ctx.client_namespace(s)? {
        None => {
            connect::measure(
                std::slice::from_ref(&subject),
                &settings,
                ctx.stop.clone(),
                |_, _| {},
            )
            .await
        }
        // The client in its namespace: a thread of its own enters it and runs the same
        // measurement on a runtime of its own; this task waits without blocking.
        Some(ns) => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let stop = ctx.stop.clone();
            let cfg = settings.clone();
            std::thread::Builder::new()
                .name("connbench-netns".into())
                .spawn(move || {
                    let result = (|| -> Result<connect::ConnectRun> {
                        crate::net::netns::enter(&ns)
                            .context("cannot enter the client's network namespace")?;
                        let rt = tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()?;
                        Ok(rt.block_on(connect::measure(
                            std::slice::from_ref(&subject),
                            &cfg,
                            stop,
                            |_, _| {},
                        )))
                    })();
                    let _ = tx.send(result);
                })
                .context("cannot start the namespace thread")?;
            rx.await
                .map_err(|_| anyhow!("the namespace thread ended without a result"))??
        }
    };
    let summary = crate::stats::summarize_connect(&run);
    let t = &summary[0];
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
    let mut h = crate::load::record::latency_histogram();
    for tl in &run.targets[0].samples {
        h.saturating_record(tl.total_ns.max(1));
    }
    Ok(Measured {
        figures: f,
        histogram: Some(h),
        detail: None,
    })
}

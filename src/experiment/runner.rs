//! Running a suite: every step of the plan against its target, each repetition saved to
//! the store the moment it ends, then the statistics across repetitions.
//!
//! A cell's settings (text, from the suite file) are turned into the same plans `connect`
//! and `load` run, so a suite measures exactly what those commands measure. A repetition
//! that fails is saved with its error and left out of the statistics. The pre-warm pass
//! is saved (marked) and never counted.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};
use tokio::sync::watch;

use crate::connect::{self, Subject};
pub use crate::experiment::failure::Failure;
use crate::experiment::failure::NOT_MEASURED;
use crate::experiment::store::{self, Environment, Repetition, Status, Store};
use crate::experiment::suite::{Kind, Settings, Step, Suite};
use crate::host::{MachineCpu, MachineUse};
use crate::load::engine;
use crate::net::route::{self, Route, RouteSpec, Verified};
use crate::options::{self, route_spec, LoadOptions, NetPath};
use crate::proto::Endpoint;
use crate::stats::compare::{self, Candidate, Comparison, Described, Rule, Verdict};
use crate::stats::load::STEAL_LIMIT_PERCENT;
use crate::target::Target;

/// What a suite runs against and where results go.
pub struct Context {
    /// Names a suite may use for targets (sandbox targets, `--target NAME=conninfo`).
    pub targets: BTreeMap<String, String>,
    pub schema: String,
    pub store: Store,
    pub pgbouncer_version: Option<String>,
    /// The sandbox the suite runs against, if any: its servers' CPU is measured.
    pub sandbox: Option<crate::sandbox::SandboxInfo>,
    pub stop: watch::Receiver<bool>,
    /// The dataset's scale per target conninfo, looked up once per run, not before every
    /// repetition.
    pub scales: std::cell::RefCell<BTreeMap<String, crate::options::Dataset>>,
    /// Relays started for cells with a `path` or `distance`, per target and route; they
    /// live as long as the context, so every repetition of a cell takes the same route.
    pub routes: std::cell::RefCell<BTreeMap<(String, RouteSpec), std::rc::Rc<Route>>>,
    /// The sandbox itself, for the faults a cell injects (restarts); weak, so the
    /// command that started it still decides when it stops.
    pub sandbox_control: Option<std::rc::Weak<tokio::sync::Mutex<crate::sandbox::Sandbox>>>,
    /// The namespace and bridge of `netpath = "bridge"` cells, created at the first.
    pub bridge: std::cell::RefCell<Option<crate::net::netns::Bridge>>,
    /// The name `run --run NAME` gives the run in the store (checked free beforehand).
    pub run_name: Option<String>,
    /// The live view (`run --metrics-listen`'s endpoint): each counted repetition of a
    /// load cell feeds it.
    pub metrics: Option<std::rc::Rc<dyn super::sink::Sink>>,
}

/// One cell's outcome across repetitions.
#[derive(Debug, Clone)]
pub struct CellResult {
    pub name: String,
    pub baseline: bool,
    /// Per figure, the value of each successful counted repetition.
    pub figures: BTreeMap<String, Vec<f64>>,
    pub described: BTreeMap<String, Described>,
    /// Counted repetitions (rounds) the cell ran, failed ones included.
    pub rounds: usize,
    /// Against the baseline, on the suite's figure.
    pub comparison: Option<Comparison>,
    /// Why a non-baseline cell has no comparison, when it has none.
    pub no_comparison: Option<String>,
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
    /// Why the run stopped adding rounds (or that its rounds were fixed).
    pub stopped: String,
    pub environment: Environment,
    /// A cell none of whose counted repetitions succeeded: the run has no answer for it,
    /// so it failed (exit 1, stored as failed).
    pub failed: Option<Failure>,
}

/// The comparison rule of a suite: 95% intervals for a cell's figures, a family-wise
/// α = 0.05 for its comparisons, the suite's noise threshold, and α spent over looks
/// when the run is adaptive.
pub fn rule(suite: &Suite) -> Rule {
    Rule {
        better: suite.better,
        confidence: 0.95,
        alpha: 0.05,
        threshold: suite.noise_threshold,
        sequential: suite.budget_s.is_some(),
        looks: suite.looks,
    }
}

impl Context {
    /// Injects `fault` into the sandbox; returns how long it took (a restart: until the
    /// server accepted connections again).
    pub async fn strike(&self, fault: options::FaultKind) -> Result<std::time::Duration> {
        let sb = self
            .sandbox_control
            .as_ref()
            .and_then(|w| w.upgrade())
            .with_context(|| {
                format!(
                    "fault {}: faults are injected into connbench's sandbox, and this suite runs without one",
                    fault.as_str()
                )
            })?;
        let started = std::time::Instant::now();
        // One strike at a time: a cell's repetitions run one after another.
        let mut sb = sb.lock().await;
        match fault {
            options::FaultKind::PgbouncerRestart => sb.restart_pgbouncer().await?,
            options::FaultKind::PostgresRestart => sb.restart_postgres().await?,
            options::FaultKind::TerminateBackends => {
                sb.terminate_backends().await?;
            }
        }
        Ok(started.elapsed())
    }

    /// Sets the sandbox servers' CPU quota to the cell's `server_cpus` (live: the quota is
    /// a cgroup's); returns the quota the cell runs under, the sandbox's own when the cell
    /// sets none.
    pub async fn size_server(&self, settings: &Settings) -> Result<Option<f64>> {
        let cell = options::server_cpus(settings)?;
        let Some(sb) = self.sandbox_control.as_ref().and_then(|w| w.upgrade()) else {
            if let Some(cpus) = cell {
                bail!(
                    "server_cpus {cpus}: the quota is set on connbench's sandbox, and this suite runs without \
                     one; on your own instances, give each size its own target"
                );
            }
            return Ok(None);
        };
        let mut sb = sb.lock().await;
        let Some(now) = sb.info.cgroups.as_ref().map(|c| c.server.cpus) else {
            // No cgroup: set_cpus says why a quota cannot be set.
            if cell.is_some() {
                sb.set_cpus(false, cell)?;
            }
            return Ok(None);
        };
        // A cell without its own size runs under the sandbox's starting quota, not under
        // whatever the previous cell left.
        let started = self
            .sandbox
            .as_ref()
            .and_then(|s| s.cgroups.as_ref())
            .and_then(|c| c.server.cpus);
        let want = cell.or(started);
        if now != want {
            sb.set_cpus(false, want)?;
        }
        Ok(want)
    }

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

    /// The threads of a cell's relays (none on a direct path), whose CPU is reported
    /// apart from the client's.
    pub fn relay_threads(&self, settings: &Settings) -> Result<Vec<i32>> {
        let direct = self.direct_endpoint(settings)?;
        let key = (direct.target.conninfo(), route_spec(settings)?);
        Ok(self
            .routes
            .borrow()
            .get(&key)
            .map(|r| r.relay_threads())
            .unwrap_or_default())
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
            options::server_cpus(&c.settings)?;
            let fault = options::fault(&c.settings)?;
            match suite.kind {
                Kind::Load => {
                    if let (Some(f), Some(d)) = (fault, suite.duration) {
                        if f.at >= d {
                            bail!(
                                "fault_at {} is not inside the measurement ({}): strike before its end",
                                crate::units::format_duration(f.at),
                                crate::units::format_duration(d)
                            );
                        }
                    }
                    let o = LoadOptions::from_settings(&c.settings, suite.duration, suite.warmup, schema)?;
                    if suite.slice.is_some() {
                        // Turns stop a cell's clients between its turns; a clock that
                        // runs on meanwhile (a think time, a rate's schedule, a pool's
                        // timers, a fault's moment) would not measure what it says.
                        let clock = if !o.think.is_zero() {
                            Some("think")
                        } else if o.rate.is_some() {
                            Some("rate")
                        } else if o.pool.max_lifetime.is_some() || o.pool.idle_timeout.is_some() {
                            Some("pool_lifetime or pool_idle_timeout")
                        } else if fault.is_some() {
                            Some("fault")
                        } else {
                            None
                        };
                        if let Some(setting) = clock {
                            bail!(
                                "slices: cells take turns, and {setting} keeps time through the other cells' turns; \
                                 remove `slices` from the suite, or {setting} from the cell"
                            );
                        }
                    }
                    o.check().map(|_| ())
                }
                Kind::Connect if fault.is_some() => {
                    bail!("faults strike during load suites, not connect suites")
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
    // A budget counts from here: the suite's set-up (distances, datasets, probes) spends
    // it too.
    let started = Instant::now();
    // Every cell must resolve before anything runs: a typo fails in a second, not after
    // an hour of measurements.
    check(suite, &ctx.schema)?;
    // An adaptive run fixes its looks after its first round (below).
    let mut suite = suite.clone();
    let suite = &mut suite;
    let endpoints: Vec<Endpoint> = suite
        .cells
        .iter()
        .map(|c| {
            ctx.endpoint(&c.settings)
                .with_context(|| format!("suite {}, cell {}", suite.name, c.name))
        })
        .collect::<Result<_>>()?;
    make_datasets(suite, ctx).await?;
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
    let mut environment = Environment::here(server_version, ctx.pgbouncer_version.clone(), tls);
    environment.server_settings = server_settings(&probe_endpoint).await;
    // A suite across engines (the engines suite) states the other engine's server too:
    // its version and settings, each prefixed with the engine.
    let mut other_engine_seen = false;
    for c in &suite.cells {
        let ep = ctx.direct_endpoint(&c.settings)?;
        if ep.engine() == probe_endpoint.engine() || other_engine_seen {
            continue;
        }
        other_engine_seen = true;
        if let Ok((_, Some(version))) = connect::connect_once(&ep, None).await {
            environment
                .server_settings
                .push(format!("mysql: version={version}"));
        }
        for setting in server_settings(&ep).await {
            environment.server_settings.push(format!("mysql: {setting}"));
        }
    }
    let run_id = ctx.store.begin_run(suite, &environment)?;
    // An error that ends the run half-way leaves it stored as failed, with that error,
    // not as running for ever.
    let failed = |e: anyhow::Error| {
        let _ = ctx
            .store
            .finish_run(run_id, Status::Failed, Some(&format!("{e:#}")));
        e
    };
    if let Some(name) = &ctx.run_name {
        ctx.store.name_run(run_id, name).map_err(failed)?;
    }
    let mut outcomes: Outcomes = vec![Vec::new(); suite.cells.len()];
    let mut interrupted = false;
    // Seconds each cell's counted steps took, to estimate what another round costs.
    let mut step_s: Vec<Vec<f64>> = vec![Vec::new(); suite.cells.len()];
    let mut todo: std::collections::VecDeque<Step> = suite.plan().into();
    let mut done = 0;
    let mut round = suite.repetitions;
    // The first round's steps (the pre-warm pass, or round 1): their time fixes how many
    // looks an adaptive run's budget has room for.
    let first_round = if suite.prewarm { 0 } else { 1 };
    let mut first_s: Vec<Option<f64>> = vec![None; suite.cells.len()];
    let mut begun = 0;
    loop {
        let Some(step) = todo.pop_front() else {
            // The planned rounds are done: an adaptive run adds a round for the answers
            // still undecided (with the baseline, so the round pairs), while the budget
            // allows one and the cap is not reached.
            let Some(budget) = suite.budget_s else { break };
            if round >= suite.max_rounds {
                break;
            }
            let current = summarize(suite, run_id, outcomes.clone(), false, environment.clone());
            let undecided: Vec<usize> = current
                .cells
                .iter()
                .enumerate()
                .filter(|(_, c)| {
                    c.comparison
                        .as_ref()
                        .is_some_and(|c| !settled(c, suite.precision))
                })
                .map(|(i, _)| i)
                .collect();
            if undecided.is_empty() {
                break;
            }
            // With the cells they are compared with, so the new rounds pair.
            let mut cells = undecided.clone();
            for &i in &undecided {
                cells.push(suite.cells[i].versus.unwrap_or(suite.baseline));
            }
            cells.sort_unstable();
            cells.dedup();
            // The next look comes after a batch of rounds; a batch that does not fit the
            // budget is not begun, so a run ends at a look.
            let batch = suite.next_batch(round).min(suite.max_rounds - round);
            if suite.looks.is_some_and(|cap| suite.look_at(round + batch) > cap) {
                break;
            }
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
            let estimate: f64 = batch as f64 * cells.iter().map(|&c| mean(&step_s[c])).sum::<f64>();
            if started.elapsed().as_secs_f64() + estimate > budget {
                break;
            }
            for _ in 0..batch {
                round += 1;
                todo.extend(suite.round(round, &cells));
            }
            continue;
        };
        if *ctx.stop.borrow() {
            interrupted = true;
            break;
        }
        // A budget bounds the planned rounds too, beyond the fewest an answer is read
        // from: a planned round that would not fit is not begun, nor any after it. Time
        // alone decides, never an answer, so the looks' shares of α stand.
        if let (Some(budget), true) = (suite.budget_s, step.repetition != begun) {
            begun = step.repetition;
            let planned = (MIN_PLANNED_ROUNDS + 1..=suite.repetitions).contains(&step.repetition);
            if planned && !round_fits(&step, &todo, &step_s, budget - started.elapsed().as_secs_f64()) {
                todo.clear();
                round = step.repetition - 1;
                continue;
            }
        }
        // A connect suite measures a round's cells in one run, their connections
        // interleaved sample by sample (A B C A B C ...), so every cell of the round sees
        // the same moment of the machine and the round's ratios cancel it.
        let mut group = vec![step];
        // A load suite with time slices measures a round's cells in one run too, the
        // cells taking turns every `slice` (crate::load::slices).
        // The server's quota is set between measurements, so a size is one measurement
        // (the plan puts a size's cells side by side).
        if suite.kind == Kind::Load && suite.slice.is_some() {
            while let Some(next) = todo.front().copied() {
                if next.repetition != step.repetition
                    || options::server_cpus(&suite.cells[next.cell].settings).ok()
                        != options::server_cpus(&suite.cells[step.cell].settings).ok()
                {
                    break;
                }
                group.push(next);
                todo.pop_front();
            }
        }
        if suite.kind == Kind::Connect && interleavable(suite, step) {
            while let Some(next) = todo.front().copied() {
                if next.repetition != step.repetition
                    || !interleavable(suite, next)
                    || options::connect_settings(&suite.cells[next.cell].settings).ok()
                        != options::connect_settings(&suite.cells[step.cell].settings).ok()
                    || options::server_cpus(&suite.cells[next.cell].settings).ok()
                        != options::server_cpus(&suite.cells[step.cell].settings).ok()
                {
                    break;
                }
                group.push(next);
                todo.pop_front();
            }
        }
        let names: Vec<&str> = group.iter().map(|s| suite.cells[s.cell].name.as_str()).collect();
        // The server's size for this step (the cells of a group share it).
        let quota = ctx
            .size_server(&suite.cells[step.cell].settings)
            .await
            .with_context(|| format!("suite {}, cell {}", suite.name, names.join(", ")))
            .map_err(failed)?;
        progress(done, done + todo.len() + group.len(), &names.join(", "));
        done += group.len();
        // A repetition the hypervisor disturbed (steal above the limit: another tenant ran
        // on our cores) is measured again in place, so the round still pairs; after
        // MAX_RETAKES the last attempt is kept and its steal stays in its figures.
        let mut retakes = 0u32;
        let (started_at, t0, results, machine) = loop {
            let started_at = store::now_utc();
            let t0 = Instant::now();
            let before = MachineCpu::read();
            let results = measure_group(suite, &group, &endpoints, ctx).await;
            let machine = before.zip(MachineCpu::read()).and_then(|(a, b)| b.since(&a));
            match machine {
                Some(m) if retake(&m, retakes, step.is_prewarm()) && !*ctx.stop.borrow() => {
                    retakes += 1;
                    eprintln!(
                        "note: {}: round {} retaken: the hypervisor took {:.0}% of the CPU (steal) while it ran",
                        names.join(", "),
                        step.repetition,
                        m.steal_percent
                    );
                }
                _ => break (started_at, t0, results, machine),
            }
        };
        // Ctrl-C during a step: the step was cut short, so it is not saved as a result.
        if *ctx.stop.borrow() {
            interrupted = true;
            break;
        }
        // An interleaved group's time is shared by its cells.
        let elapsed_s = t0.elapsed().as_secs_f64() / group.len() as f64;
        for (step, outcome) in group.iter().zip(results) {
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
            if error.is_none() {
                if let Some(m) = machine {
                    figures.insert("steal_percent".into(), m.steal_percent);
                    figures.insert("busy_cores".into(), m.busy_cores);
                }
                figures.insert("steal_retakes".into(), f64::from(retakes));
                if let Some(q) = quota {
                    figures.insert("server_quota_cores".into(), q);
                }
            }
            if let (Some(v), None) = (cell_rtt[step.cell], &error) {
                figures.insert("rtt_requested_ms".into(), v.requested_ms);
                figures.insert("rtt_achieved_ms".into(), v.achieved_ms);
            }
            ctx.store
                .save_repetition(
                    run_id,
                    &Repetition {
                        cell: step.cell,
                        repetition: step.repetition,
                        prewarm: step.is_prewarm(),
                        started_at: started_at.clone(),
                        elapsed_s,
                        error: error.clone(),
                        summary: serde_json::to_value(&figures)?,
                        latency_histogram: histogram.as_ref().map(store::serialize_histogram).transpose()?,
                        detail,
                    },
                )
                .map_err(failed)?;
            if step.repetition == first_round {
                first_s[step.cell] = Some(elapsed_s);
            }
            if !step.is_prewarm() {
                step_s[step.cell].push(elapsed_s);
                outcomes[step.cell].push(Outcome {
                    round: step.repetition,
                    result: match error {
                        Some(e) => Err(e),
                        None => Ok(figures),
                    },
                });
            }
        }
        if let (Some(budget), None) = (suite.budget_s, suite.looks) {
            if let Some(times) = first_s.iter().copied().collect::<Option<Vec<f64>>>() {
                let others = times
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| i != suite.baseline)
                    .map(|(_, &t)| t);
                // The cheapest continuation: the baseline and the quickest other cell.
                let cheapest = others.fold(f64::INFINITY, f64::min);
                let pair_s = times[suite.baseline] + if cheapest.is_finite() { cheapest } else { 0.0 };
                let rounds_left = suite.repetitions.saturating_sub(first_round);
                let left_s = budget - started.elapsed().as_secs_f64();
                suite.looks = Some(suite.planned_looks(left_s, rounds_left, times.iter().sum(), pair_s));
                ctx.store.update_suite(run_id, suite).map_err(failed)?;
            }
        }
    }
    let result = summarize(suite, run_id, outcomes, interrupted, environment);
    let (status, error) = match &result.failed {
        _ if interrupted => (Status::Interrupted, None),
        Some(f) => (Status::Failed, Some(f.sentence())),
        None => (Status::Done, None),
    };
    ctx.store.finish_run(run_id, status, error.as_deref())?;
    Ok(result)
}

/// Whether the round `step` begins (its other steps first in `todo`) fits in `left_s`
/// seconds, by the mean time of each of its cells' steps so far.
fn round_fits(
    step: &Step,
    todo: &std::collections::VecDeque<Step>,
    step_s: &[Vec<f64>],
    left_s: f64,
) -> bool {
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let estimate: f64 = std::iter::once(step)
        .chain(todo.iter())
        .filter(|s| s.repetition == step.repetition)
        .map(|s| mean(&step_s[s.cell]))
        .sum();
    estimate <= left_s
}

/// The planned rounds a budget never cuts: the fewest an answer is read from (the first
/// look of docs/statistics.md's adaptive runs at a minimum of 5).
const MIN_PLANNED_ROUNDS: u32 = 5;

/// How often a repetition disturbed by steal is measured again before it is kept as is.
const MAX_RETAKES: u32 = 2;

/// Whether an attempt is measured again: the hypervisor took more than the limit of the
/// machine's CPU while it ran, it counts (a pre-warm pass does not), and retakes are left.
fn retake(machine: &MachineUse, retakes: u32, prewarm: bool) -> bool {
    machine.steal_percent > STEAL_LIMIT_PERCENT && retakes < MAX_RETAKES && !prewarm
}

/// Measures one step: a load cell, or a group of connect cells interleaved.
async fn measure_group(
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

/// The settings that shape noise and durability, as the server reports them; empty when
/// they cannot be read (a pooler that refuses the query, say), never guessed.
async fn server_settings(ep: &Endpoint) -> Vec<String> {
    const PG: &str = "SELECT name || '=' || setting || coalesce(unit, '') FROM pg_settings \
        WHERE name IN ('synchronous_commit', 'fsync', 'checkpoint_timeout', 'max_wal_size', \
        'autovacuum', 'shared_buffers') ORDER BY name";
    const MYSQL: &str = "SELECT CONCAT(LOWER(variable_name), '=', variable_value) \
        FROM information_schema.global_variables WHERE variable_name IN \
        ('INNODB_FLUSH_LOG_AT_TRX_COMMIT', 'SYNC_BINLOG', 'LOG_BIN', 'INNODB_BUFFER_POOL_SIZE', \
        'INNODB_DOUBLEWRITE', 'THREAD_HANDLING') ORDER BY variable_name";
    let sql = match ep.engine() {
        crate::proto::Engine::Postgres => PG,
        crate::proto::Engine::Mysql => MYSQL,
    };
    let Ok((mut session, _)) = crate::proto::connect(ep, &Default::default()).await else {
        return Vec::new();
    };
    let settings = session.query_column(sql).await.unwrap_or_default();
    session.close().await;
    settings
}

/// One counted repetition of a cell (the pre-warm pass is never one): its round and
/// what it measured, or why it failed.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub round: u32,
    pub result: std::result::Result<Figures, String>,
}

/// Per cell, its counted repetitions in the order they ran.
pub type Outcomes = Vec<Vec<Outcome>>;

/// Whether an answer needs no more rounds: decided, and (with a precision) its ratio's
/// interval within ± that fraction of the ratio.
fn settled(c: &Comparison, precision: Option<f64>) -> bool {
    let half = (c.ratio.ci_high - c.ratio.ci_low) / (2.0 * c.ratio.point);
    c.verdict != Verdict::Inconclusive && precision.is_none_or(|p| half <= p)
}

/// Why an adaptive run stopped adding rounds, or that it had none to add.
fn stop_reason(
    suite: &Suite,
    cells: &[CellResult],
    interrupted: bool,
    last_round: u32,
    failed: Option<&Failure>,
) -> String {
    let undecided = cells
        .iter()
        .filter(|c| {
            c.comparison
                .as_ref()
                .is_some_and(|c| !settled(c, suite.precision))
        })
        .count();
    if interrupted {
        "interrupted (Ctrl-C)".into()
    } else if suite.budget_s.is_none() {
        format!("fixed: {} rounds, as the suite says", suite.repetitions)
    } else if last_round < suite.repetitions {
        format!(
            "the budget of {:.0} s ended the planned rounds at {last_round} of {}",
            suite.budget_s.unwrap_or_default(),
            suite.repetitions
        )
    } else if undecided == 0 {
        // No answer left undecided: say so only of answers there are.
        let compared = cells.iter().any(|c| c.comparison.is_some());
        match (failed, compared) {
            (Some(f), true) => format!(
                "every other answer decided; cell {} has none: it failed every repetition",
                f.cell
            ),
            (Some(f), false) => format!("no answer to decide: cell {} failed every repetition", f.cell),
            (None, false) => "no answer to decide: no cell has a comparison".into(),
            (None, true) => match suite.precision {
                Some(p) => format!("every answer decided, each interval within ±{:.0}%", p * 100.0),
                None => "every answer decided".into(),
            },
        }
    } else if last_round >= suite.max_rounds {
        format!("the cap of {} rounds was reached", suite.max_rounds)
    } else if let Some(cap) = suite
        .looks
        .filter(|&cap| cap > 1 && suite.look_at(last_round) >= cap)
    {
        format!("the {cap} looks its budget had room for were taken")
    } else {
        format!(
            "the budget of {:.0} s left no room for another round",
            suite.budget_s.unwrap_or_default()
        )
    }
}

/// The statistics of a (possibly partial) run: per cell and figure, and each cell
/// against the baseline on the suite's figure, decided together as one family.
pub fn summarize(
    suite: &Suite,
    run_id: i64,
    outcomes: Outcomes,
    interrupted: bool,
    environment: Environment,
) -> SuiteResult {
    let r = rule(suite);
    let base_name = &suite.cells[suite.baseline].name;
    let series = |o: &[Outcome]| -> Vec<(u32, Option<f64>)> {
        o.iter()
            .map(|x| {
                (
                    x.round,
                    x.result.as_ref().ok().and_then(|f| f.get(&suite.figure).copied()),
                )
            })
            .collect()
    };
    let base_series = series(&outcomes[suite.baseline]);
    let last_round = outcomes.iter().flatten().map(|o| o.round).max().unwrap_or(0);
    let mut family = Vec::new();
    let mut cells: Vec<CellResult> = suite
        .cells
        .iter()
        .zip(&outcomes)
        .enumerate()
        .map(|(i, (cell, outs))| {
            let mut figures: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            let mut errors = Vec::new();
            for o in outs {
                match &o.result {
                    Ok(f) => {
                        for (k, v) in f {
                            figures.entry(k.clone()).or_default().push(*v);
                        }
                    }
                    Err(e) => errors.push(e.clone()),
                }
            }
            let described = figures
                .iter()
                .filter_map(|(k, v)| compare::describe(v, r.confidence).map(|d| (k.clone(), d)))
                .collect();
            let mut no_comparison = None;
            // Each cell against its own reference: its `versus`, else the baseline.
            let versus = cell.versus.unwrap_or(suite.baseline);
            if i != versus {
                let reference = if versus == suite.baseline {
                    base_series.clone()
                } else {
                    series(&outcomes[versus])
                };
                match compare::log_test(&series(outs), &reference) {
                    Ok(test) => {
                        // The look that decided this answer: how far its rounds went.
                        let look = suite.look_at(outs.iter().map(|o| o.round).max().unwrap_or(0));
                        family.push((
                            i,
                            Candidate {
                                versus: (versus != suite.baseline).then(|| suite.cells[versus].name.clone()),
                                name: cell.name.clone(),
                                test,
                                look,
                            },
                        ));
                    }
                    Err(why) => no_comparison = Some(why),
                }
            }
            CellResult {
                name: cell.name.clone(),
                baseline: i == suite.baseline,
                rounds: outs.len(),
                figures,
                described,
                comparison: None,
                no_comparison,
                prediction: None,
                errors,
            }
        })
        .collect();
    let candidates: Vec<Candidate> = family.iter().map(|(_, c)| c.clone()).collect();
    for ((i, _), c) in family.iter().zip(compare::decide(&candidates, base_name, r)) {
        cells[*i].comparison = Some(c);
    }
    if suite.kind == Kind::Load {
        for i in 0..cells.len() {
            cells[i].prediction = predict_from_local(suite, &cells, i, environment.cpus);
        }
    }
    let failed = Failure::of_cells(
        cells
            .iter()
            .map(|c| (c.name.as_str(), c.rounds, c.errors.as_slice())),
    );
    let stopped = stop_reason(suite, &cells, interrupted, last_round, failed.as_ref());
    SuiteResult {
        run_id,
        suite: suite.clone(),
        cells,
        interrupted,
        stopped,
        environment,
        failed,
    }
}

/// The round-trip model for cell `i` when it has a distance: the same cell without
/// distance (every other axis equal), its mean latency (and connect time), plus the
/// distance times the round trips counted in cell `i` (see `stats::model::explain`).
fn predict_from_local(
    suite: &Suite,
    cells: &[CellResult],
    i: usize,
    cpus: usize,
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
    // Connects per transaction: all the counted repetitions' connects over their
    // transactions (the means share their n).
    let per_tx = |c: &CellResult| Some(mean(c, "connects")? / mean(c, "transactions")?);
    let inputs = crate::stats::model::DistanceInputs {
        rtt_ms: rtt.as_secs_f64() * 1e3,
        rtt_achieved_ms: mean(&cells[i], "rtt_achieved_ms"),
        local_ms: mean(&cells[j], "latency_mean_ms")?,
        round_trips_local: mean(&cells[j], "round_trips_per_transaction")?,
        connects_local: per_tx(&cells[j])?,
        connect_ms_local: mean(&cells[j], "connect_mean_ms"),
        round_trips: mean(&cells[i], "round_trips_per_transaction")?,
        connects: per_tx(&cells[i])?,
        measured_ms: mean(&cells[i], "latency_mean_ms")?,
        busy_cores: mean(&cells[i], "busy_cores"),
        cpus,
    };
    Some(crate::stats::model::explain(&cells[j].name, &inputs))
}

pub type Figures = BTreeMap<String, f64>;

/// What one repetition measured: its figures, its latency histogram (ns), and detail for
/// charts (a load run's per-interval series).
struct Measured {
    figures: Figures,
    histogram: Option<hdrhistogram::Histogram<u64>>,
    detail: Option<serde_json::Value>,
}

/// The datasets of the cells that ask for a `scale`: connbench's tables at that scale in
/// a schema of their own on each cell's target, made once, before anything is measured
/// (and before a cell sets a CPU quota), and found again by later runs.
async fn make_datasets(suite: &Suite, ctx: &Context) -> Result<()> {
    let mut done = std::collections::BTreeSet::new();
    for c in &suite.cells {
        let Some(scale) = options::dataset_scale(&c.settings)? else {
            continue;
        };
        let direct = ctx.direct_endpoint(&c.settings)?;
        let schema = options::scaled_schema(&ctx.schema, scale);
        if !done.insert((direct.target.conninfo(), scale)) {
            continue;
        }
        let made = crate::load::init::ensure(&direct, &schema, scale)
            .await
            .with_context(|| {
                format!(
                    "suite {}, cell {}: the tables at scale {scale}",
                    suite.name, c.name
                )
            })?;
        if let Some(r) = made {
            eprintln!(
                "{}: made connbench's tables at scale {scale} in schema {schema} on {} ({} rows, {:.1} s); \
                 a later run on this target reuses them (`connbench init TARGET --drop --schema {schema}` \
                 removes them)",
                suite.name,
                direct.target.name(),
                r.rows,
                r.elapsed.as_secs_f64()
            );
        }
    }
    Ok(())
}

/// A load cell's plan, with its client count and series interval.
async fn load_plan(
    suite: &Suite,
    s: &Settings,
    endpoint: &Endpoint,
    ctx: &Context,
) -> Result<(engine::LoadPlan, usize, f64)> {
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
        if plan.progress.is_none() {
            plan.progress = Some(Duration::from_secs(1));
        }
    }
    let on_period = |p: engine::Progress| {
        if let Some((m, cell)) = live {
            m.add_period(cell, &p.totals);
        }
    };
    let (run, struck) = match fault {
        None => (engine::run(plan, ctx.stop.clone(), on_period).await?, None),
        Some(f) => {
            // Repetitions must not inherit the last strike: wait until the cell's path
            // answers a query again (PgBouncer retries a failed server login only every
            // server_login_retry, 15 s by default).
            settle(endpoint).await?;
            // The gate hands the engine's start to the fault, which strikes `at` into the
            // measurement, on the sandbox, while the clients run.
            let (tx, rx) = tokio::sync::oneshot::channel();
            let tx = std::sync::Mutex::new(Some(tx));
            plan.start_gate = Some(engine::StartGate(std::sync::Arc::new(move || {
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
                let took = ctx.strike(f.kind).await?;
                Ok::<_, anyhow::Error>(Some(took))
            };
            let (run, struck) = tokio::join!(engine::run(plan, ctx.stop.clone(), on_period), strike);
            (run?, struck?)
        }
    };
    if let Some((m, cell)) = live {
        m.finish(cell, &run.recorder);
    }
    let summary = crate::stats::load::summarize_load(&run, clients, interval_s);
    let mut measured = load_figures(&run, &summary)?;
    let f = &mut measured.figures;
    cpu_figures(f, &summary, true);
    if let Some(cs) = summary.context_switches_per_transaction {
        f.insert("context_switches_per_transaction".into(), cs);
    }
    let mut detail = serde_json::json!({ "series": summary.series });
    if let (Some(fault), Some(took)) = (fault, struck) {
        let at_s = fault.at.as_secs_f64();
        detail["fault"] =
            serde_json::json!({ "kind": fault.kind.as_str(), "at_s": at_s, "took_s": took.as_secs_f64() });
        f.insert("fault_took_s".into(), took.as_secs_f64());
        if let Some(e) = crate::stats::fault::effect(&summary.series, interval_s, at_s) {
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
                plan.end = engine::End::Duration(duration * 4 * cells.len() as u32 + Duration::from_secs(30));
                // The driver reads the groups on the path around each of the cell's
                // turns; the engine's own window would span every cell's.
                let accounting = std::mem::take(&mut plan.accounting);
                plan.accounting.server_not_measured = accounting.server_not_measured.clone();
                turn.account(accounting);
                plan.start_gate = Some(engine::StartGate(std::sync::Arc::new({
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
            tokio::spawn(async move { (engine::run(plan, stop, |_| {}).await, clients) })
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
                    m.finish(names[i], &run.recorder);
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
fn load_figures(run: &engine::LoadRun, summary: &crate::stats::load::LoadSummary) -> Result<Measured> {
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
    Ok(Measured {
        figures: f,
        histogram: Some(run.recorder.latency.clone()),
        detail: None,
    })
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

/// Whether a connect cell can share an interleaved measurement: its client runs on the
/// host (a namespaced client runs on a thread of its own).
fn interleavable(suite: &Suite, step: Step) -> bool {
    matches!(
        options::netpath(&suite.cells[step.cell].settings),
        Ok(NetPath::Host)
    )
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
    let mut h = crate::load::record::latency_histogram();
    for tl in &samples.samples {
        h.saturating_record(tl.total_ns.max(1));
    }
    Ok(Measured {
        figures: f,
        histogram: Some(h),
        detail: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_that_failed_every_repetition_fails_the_run_and_is_named_with_its_own_error() {
        let text = r#"
name = "f"
question = "q"
kind = "load"
duration = "1s"
repetitions = 2
[defaults]
workload = "select-only"
[[cells]]
name = "a"
target = "unix"
[[cells]]
name = "b"
target = "tcp"
[[cells]]
name = "c"
target = "tls"
"#;
        let s = Suite::parse(text, "f.toml").unwrap();
        let ok = |round| Outcome {
            round,
            result: Ok(Figures::from([("tps".to_string(), 10.0 + f64::from(round))])),
        };
        let err = |round, e: &str| Outcome {
            round,
            result: Err(e.to_string()),
        };
        let summary = |outcomes| summarize(&s, 1, outcomes, false, Environment::default());
        // Cell b: one repetition of two failed; the run did not fail.
        let some = summary(vec![
            vec![ok(1), ok(2)],
            vec![err(1, "x"), ok(2)],
            vec![ok(1), ok(2)],
        ]);
        assert_eq!(some.failed, None);
        // Cell a waited for c, which could not start: c is named, with its own error.
        let waited = format!("{NOT_MEASURED}the cell on target tls could not start: no tables");
        let r = summary(vec![
            vec![err(1, &waited), err(2, &waited)],
            vec![ok(1), ok(2)],
            vec![err(1, "no tables at tls"), err(2, "no tables at tls")],
        ]);
        let f = r.failed.clone().unwrap();
        assert_eq!((f.cell.as_str(), f.error.as_str()), ("c", "no tables at tls"));
        assert_eq!(f.others, ["a"]);
        assert_eq!(
            f.sentence(),
            "every repetition of cell \"c\" failed (all 2) (and every one of cell \"a\"): no tables at tls"
        );
        assert_eq!(
            r.stopped, "fixed: 2 rounds, as the suite says",
            "a fixed run ran its rounds"
        );
        // An adaptive run had no answer left to decide (every cell was compared with a,
        // which failed), and says why, not that every answer was decided.
        let adaptive = s.clone().adaptive(Some(Duration::from_secs(60)), None);
        let r = summarize(
            &adaptive,
            1,
            vec![
                vec![err(1, "e"), err(2, "e")],
                vec![ok(1), ok(2)],
                vec![ok(1), ok(2)],
            ],
            false,
            Environment::default(),
        );
        assert_eq!(r.stopped, "no answer to decide: cell a failed every repetition");
        // Interrupted: the stop says so, the failure is still known.
        let cut = summarize(
            &s,
            1,
            vec![vec![ok(1)], vec![err(1, "e")], vec![ok(1)]],
            true,
            Environment::default(),
        );
        assert_eq!(cut.stopped, "interrupted (Ctrl-C)");
        assert_eq!(cut.failed.unwrap().cell, "b");
    }

    #[test]
    fn a_repetition_is_retaken_only_when_steal_is_above_the_limit_and_retakes_remain() {
        let at = |steal_percent| MachineUse {
            cores: 2,
            busy_cores: 1.5,
            steal_percent,
            context_switches: 0,
            packets_received: None,
            packets_sent: None,
        };
        assert!(!retake(&at(0.4), 0, false), "a quiet window is kept");
        assert!(
            !retake(&at(STEAL_LIMIT_PERCENT), 0, false),
            "the limit itself is kept"
        );
        assert!(retake(&at(23.0), 0, false));
        assert!(retake(&at(23.0), MAX_RETAKES - 1, false));
        assert!(
            !retake(&at(23.0), MAX_RETAKES, false),
            "the last attempt is kept as is"
        );
        assert!(
            !retake(&at(23.0), 0, true),
            "a pre-warm pass is never counted, so never retaken"
        );
    }

    #[test]
    fn a_server_cpus_axis_makes_cells_compared_with_the_smallest_size_and_one_measurement_per_size() {
        let text = r#"
name = "size"
question = "How does throughput grow with the server's cores?"
kind = "load"
duration = "5s"
baseline = "server_cpus=0.5 target=unix"

[defaults]
clients = 8
workload = "select-only"

[axes]
server_cpus = [0.5, 1, 2]
target = ["unix", "tcp"]
"#;
        let s = Suite::parse(text, "size.toml").unwrap();
        let sizes: Vec<Option<f64>> = s
            .cells
            .iter()
            .map(|c| options::server_cpus(&c.settings).unwrap())
            .collect();
        assert_eq!(
            sizes,
            [Some(0.5), Some(0.5), Some(1.0), Some(1.0), Some(2.0), Some(2.0)]
        );
        // Each larger size against the same target at 0.5 core; 0.5 core's tcp against
        // the baseline.
        let versus: Vec<Option<usize>> = s.cells.iter().map(|c| c.versus).collect();
        assert_eq!(versus, [None, None, Some(0), Some(1), Some(0), Some(1)]);
        check(&s, "connbench").unwrap();
        // With slices, a round's cells of one size sit side by side (one measurement each).
        let sliced = Suite::parse(
            &text.replace(
                "kind = \"load\"",
                "kind = \"load\"\nslices = \"1s\"\nrepetitions = 6",
            ),
            "s",
        )
        .unwrap();
        check(&sliced, "connbench").unwrap();
        let plan = sliced.plan();
        for round in plan.chunks(sliced.cells.len()) {
            let sizes: Vec<&String> = round
                .iter()
                .map(|st| &sliced.cells[st.cell].settings["server_cpus"])
                .collect();
            let changes = sizes.windows(2).filter(|w| w[0] != w[1]).count();
            assert_eq!(changes, 2, "a size split in a round: {sizes:?}");
        }
        let added = sliced.round(9, &[0, 1, 2, 3, 4, 5]);
        let sizes: Vec<&String> = added
            .iter()
            .map(|st| &sliced.cells[st.cell].settings["server_cpus"])
            .collect();
        assert_eq!(sizes.windows(2).filter(|w| w[0] != w[1]).count(), 2, "{sizes:?}");
        let bad = Suite::parse(
            &text
                .replace("0.5, 1, 2", "0, 1")
                .replace("server_cpus=0.5", "server_cpus=0"),
            "b",
        );
        let e = match bad {
            Ok(s) => format!("{:#}", check(&s, "connbench").unwrap_err()),
            Err(e) => format!("{e:#}"),
        };
        assert!(e.contains("server_cpus") && e.contains("number of cores"), "{e}");
    }
}

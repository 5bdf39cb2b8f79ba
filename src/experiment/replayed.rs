//! A recorded application as a suite's workload: `workload = "trace:FILE"` in a cell (or
//! `[defaults]`), or `connbench run SUITE --workload trace:FILE` over every cell. A
//! repetition of such a cell replays the whole trace (`crate::replay`) at the recorded
//! pace through the cell's path (target, sslmode, distance, sidecar, the server's quota),
//! capped by the suite's `duration`, and its figures are the replay's, per request.
//!
//! What the trace decides is not a cell's to set: the application's clients, think time,
//! pace, protocol and connections are what was recorded. A cell that sets one is refused
//! (`run --workload` removes them, and says so); a cell whose question replay cannot ask
//! yet (a fault) is refused by name, or left out by `run
//! --workload` with a note, never run as something else. The one connection a cell may
//! set is `connection = "pool"` (with `pool_size`, `pool_max_lifetime`,
//! `pool_idle_timeout`, read as a load cell reads them): the pooling question, asked of
//! the application as `replay --pool` asks it ([`crate::replay::PoolSettings`]).
//! A per-request response time leaves a connect out, so what a pool saves shows in
//! `intended_to_answer_*`: each request's intended send to its answer, lag included.
//!
//! The trace's own predictions (`stats::app`, what `connbench trace` prints) are kept in
//! each repetition's figures (`trace_*`), so a stored run reports them as a live one does;
//! `summary` sets them beside the measured figure.

use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _, Result};

use super::suite::{Cell, Kind, Suite};
use crate::options;
use crate::options::cell::Settings;
use crate::proto::Endpoint;
use crate::replay::schedule::SessionPlan;
use crate::replay::{self, Schedule, Speed};
use connbench_trace::profile::Profile;

/// The workload prefix of a trace.
pub const PREFIX: &str = "trace:";

/// The figures a trace cell can be compared on: per request (latency, its response
/// time; intended_to_answer, from its intended send time, so a late connect or a wait
/// for the pool is in it) or per second (transactions); the others have no meaning in a
/// replay.
pub const FIGURES: &[&str] = &[
    "tps",
    "latency_mean_ms",
    "latency_p50_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "latency_max_ms",
    "intended_to_answer_mean_ms",
    "intended_to_answer_p50_ms",
    "intended_to_answer_p99_ms",
];

/// The figures only a replay measures start so.
const FROM_INTENDED: &str = "intended_to_answer_";

/// Settings the recording decides: the application's own clients, think time, pace,
/// protocol, connections and tables (all but `connection = "pool"`, see [`decided`]).
const DECIDED: &[&str] = &[
    "clients",
    "think",
    "rate",
    "mode",
    "connection",
    "tables",
    "scale",
    "sysbench",
    "query",
    "samples",
    "interval",
];

/// A pool's own settings, which only `connection = "pool"` uses.
const POOL_KEYS: &[&str] = &["pool_size", "pool_max_lifetime", "pool_idle_timeout"];

/// The pool's size when a pooled trace cell sets none: load's (`load --pool-size`'s
/// default, a load cell's), one connection.
pub const DEFAULT_POOL_SIZE: usize = 1;

/// The trace file a cell replays, when its workload is one.
pub fn trace_of(settings: &Settings) -> Option<&str> {
    settings.get("workload")?.strip_prefix(PREFIX)
}

/// Whether a cell puts a client-side pool in front of the application.
fn pooled(s: &Settings) -> bool {
    s.get("connection").map(String::as_str) == Some("pool")
}

/// The first setting of a cell the recording decides: `connection = "pool"` is not one
/// (it asks what a pool would change), any other connection is.
fn decided(s: &Settings) -> Option<&'static str> {
    DECIDED
        .iter()
        .find(|k| s.contains_key(**k) && !(**k == "connection" && pooled(s)))
        .copied()
}

/// A trace cell's client-side pool, `None` without one: `connection = "pool"` with
/// `pool_size` (default [`DEFAULT_POOL_SIZE`]), `pool_max_lifetime`, `pool_idle_timeout`,
/// through the parsers a load cell's go through.
pub fn pool_settings(s: &Settings) -> Result<Option<replay::PoolSettings>> {
    if !pooled(s) {
        if let Some(key) = POOL_KEYS.iter().find(|k| s.contains_key(**k)) {
            bail!(
                "setting {key} = {:?}: a pool's setting; set connection = \"pool\" with it",
                s[*key]
            );
        }
        return Ok(None);
    }
    use options::cell::get;
    Ok(Some(replay::PoolSettings {
        size: get(s, "pool_size", options::parse_pool_size)?.unwrap_or(DEFAULT_POOL_SIZE),
        max_lifetime: get(s, "pool_max_lifetime", options::parse_period)?,
        idle_timeout: get(s, "pool_idle_timeout", options::parse_period)?,
    }))
}

/// Why replay cannot ask a cell's question yet, naming the setting; `None` when it can.
fn unaskable(s: &Settings) -> Option<String> {
    for key in ["fault", "fault_at"] {
        if let Some(v) = s.get(key) {
            return Some(format!(
                "{key} = {v:?}: faults strike during a load cell's clients, not yet during a replay"
            ));
        }
    }
    None
}

/// A trace cell's settings checked before anything runs: the file named, nothing the
/// recording decides set, nothing replay cannot honour asked, a figure replay measures.
pub fn check_cell(suite: &Suite, s: &Settings) -> Result<()> {
    let Some(file) = trace_of(s) else {
        if suite.figure.starts_with(FROM_INTENDED) {
            bail!(
                "figure {:?}: a replay's figure (a request's intended send time comes from a trace); \
                 this cell runs {}: give it workload = \"trace:FILE\", or compare on latency_*",
                suite.figure,
                s.get("workload").map_or("the default workload", String::as_str)
            );
        }
        return Ok(());
    };
    if file.is_empty() {
        bail!("workload \"trace:\": name the trace after the colon (trace:app.trace.gz)");
    }
    if suite.kind != Kind::Load {
        bail!(
            "workload {PREFIX}{file}: a trace is replayed in a load suite, not a {:?} suite",
            suite.kind
        );
    }
    if suite.slice.is_some() {
        bail!(
            "workload {PREFIX}{file}: slices: cells take turns, and a replay keeps the recording's clock \
             through the other cells' turns; remove `slices` from the suite"
        );
    }
    if !FIGURES.contains(&suite.figure.as_str()) {
        bail!(
            "workload {PREFIX}{file}: figure {:?} has no meaning in a replay; use one of {}",
            suite.figure,
            FIGURES.join(", ")
        );
    }
    if let Some(why) = unaskable(s) {
        bail!("workload {PREFIX}{file}: {why}");
    }
    if let Some(key) = decided(s) {
        let pool = if key == "connection" {
            " (connection = \"pool\" is the one a trace cell may set: what a client-side pool would change)"
        } else {
            ""
        };
        bail!(
            "workload {PREFIX}{file}: {key} = {:?}: the recording decides it (the application's own \
             clients, think time, pace, protocol and connections are replayed as recorded); remove {key} \
             from the cell{pool}",
            s[key]
        );
    }
    pool_settings(s).with_context(|| format!("workload {PREFIX}{file}"))?;
    Ok(())
}

/// Every trace the cells name is a readable file: checked before a sandbox starts or a
/// store opens (`--dry-run` checks the settings only).
pub fn check_files(suite: &Suite) -> Result<()> {
    for c in &suite.cells {
        if let Some(file) = trace_of(&c.settings) {
            std::fs::File::open(file).with_context(|| {
                format!(
                    "suite {}, cell {}: workload {PREFIX}{file}: cannot open the trace (record one with \
                     `connbench record`; a path in a suite file is relative to the file)",
                    suite.name, c.name
                )
            })?;
        }
    }
    Ok(())
}

/// Trace paths in a suite file are relative to the file's directory: a suite and its
/// trace travel together.
pub fn resolve_paths(suite: &mut Suite, dir: &Path) {
    for c in &mut suite.cells {
        if let Some(file) = trace_of(&c.settings) {
            if Path::new(file).is_relative() {
                let full = dir.join(file).display().to_string();
                c.settings.insert("workload".into(), format!("{PREFIX}{full}"));
            }
        }
    }
}

/// `run --workload W`: every cell's workload replaced by `workload`. With a trace, the
/// settings the recording decides are removed (and the axes of them: cells that differed
/// only there become one), and cells whose question replay cannot ask yet are left out;
/// each change is one line of the notes returned (printed before the run). A change that
/// would leave the suite without its baseline is refused.
pub fn replace_workload(suite: &mut Suite, workload: &str) -> Result<Vec<String>> {
    let name = suite.name.clone();
    if suite.kind != Kind::Load {
        bail!(
            "--workload {workload}: suite {name} is a {:?} suite, whose cells run no workload; give it to a \
             load suite (distance, transport, pooling, scaling, ...)",
            suite.kind
        );
    }
    let trace = workload.starts_with(PREFIX);
    let replaced: Vec<&str> = if trace { DECIDED.to_vec() } else { Vec::new() };
    let mut notes = Vec::new();
    let mut removed: BTreeMap<String, ()> = BTreeMap::new();
    // Cells left out, by reason, and cells made one: one note names them all.
    let mut left_out: Vec<(String, Vec<String>)> = Vec::new();
    let mut cells: Vec<Cell> = Vec::new();
    let mut merged: Vec<Vec<String>> = Vec::new();
    // Each old cell's index among the new ones (`None`: left out).
    let mut at: Vec<Option<usize>> = vec![None; suite.cells.len()];
    for (i, old) in suite.cells.iter().enumerate() {
        if trace {
            if let Some(why) = unaskable(&old.settings) {
                match left_out.iter_mut().find(|(w, _)| *w == why) {
                    Some((_, names)) => names.push(format!("{:?}", old.name)),
                    None => left_out.push((why, vec![format!("{:?}", old.name)])),
                }
                continue;
            }
        }
        let mut c = replaced_cell(old, workload, &replaced, trace, &mut removed);
        match cells.iter().position(|d| d.settings == c.settings) {
            Some(j) => {
                merged[j].push(format!("{:?}", old.name));
                at[i] = Some(j);
            }
            None => {
                at[i] = Some(cells.len());
                merged.push(vec![format!("{:?}", old.name)]);
                c.versus = old.versus;
                cells.push(c);
            }
        }
    }
    notes.extend(change_notes(left_out, &removed, &cells, &merged));
    let Some(baseline) = at[suite.baseline] else {
        bail!(
            "--workload {workload}: suite {name}'s baseline {:?} cannot be replayed: {}",
            suite.cells[suite.baseline].name,
            notes.join("; ")
        );
    };
    for (j, c) in cells.iter_mut().enumerate() {
        let Some(v) = c.versus else { continue };
        c.versus = at[v].filter(|&k| k != j);
        if at[v].is_none() {
            notes.push(format!(
                "cell {:?} is compared with the baseline: the cell it was compared with ({:?}) is left out",
                c.name, suite.cells[v].name
            ));
        }
    }
    suite.baseline = baseline;
    suite.cells = cells;
    if trace && suite.slice.take().is_some() {
        notes.push("the cells run one after another: a replay keeps the recording's clock, so cells cannot take turns".into());
    }
    if trace && !FIGURES.contains(&suite.figure.as_str()) {
        bail!(
            "--workload {workload}: suite {name} compares {}, which has no meaning in a replay",
            suite.figure
        );
    }
    notes.extend(trace.then(|| pool_figure_note(suite)).flatten());
    suite.question = format!("{} (workload: {workload})", suite.question);
    Ok(notes)
}

/// A note when pooled trace cells are compared on a request's response time, which
/// leaves a connect out: a pool's saving would not show in it.
fn pool_figure_note(suite: &Suite) -> Option<String> {
    let pools: Vec<String> = suite
        .cells
        .iter()
        .filter(|c| pooled(&c.settings))
        .map(|c| format!("{:?}", c.name))
        .collect();
    (!pools.is_empty() && suite.figure.starts_with("latency_")).then(|| {
        format!(
            "{} compared on {}, a request's response time, which leaves a connect out: what a pool \
             saves an application that connects per transaction shows in intended_to_answer_* (a suite \
             file's `figure`)",
            if pools.len() == 1 {
                format!("cell {} is", pools[0])
            } else {
                format!("{} cells with a pool are", pools.len())
            },
            suite.figure
        )
    })
}

/// `old` with `workload` and without the settings `replaced` (each one removed noted in
/// `removed`), renamed when an axis went; a trace keeps a client-side pool.
fn replaced_cell(
    old: &Cell,
    workload: &str,
    replaced: &[&str],
    trace: bool,
    removed: &mut BTreeMap<String, ()>,
) -> Cell {
    let mut c = old.clone();
    // A pool is the one connection the trace keeps (and its settings with it).
    let keep_pool = trace && pooled(&c.settings);
    for key in replaced {
        if (keep_pool && *key == "connection") || c.settings.remove(*key).is_none() {
            continue;
        }
        removed.insert(key.to_string(), ());
        if *key == "connection" {
            for k in POOL_KEYS {
                c.settings.remove(*k);
            }
        }
    }
    c.settings.insert("workload".into(), workload.to_string());
    let axes = c.axes.len();
    let pool_axis = |k: &str, v: &str| keep_pool && k == "connection" && v == "pool";
    c.axes
        .retain(|(k, v)| k != "workload" && (pool_axis(k, v) || !replaced.contains(&k.as_str())));
    if c.axes.len() != axes {
        c.name = cell_name(&c.axes);
    }
    c
}

/// The notes of `replace_workload`'s changes: cells left out (by reason), settings
/// removed, cells made one.
fn change_notes(
    left_out: Vec<(String, Vec<String>)>,
    removed: &BTreeMap<String, ()>,
    cells: &[Cell],
    merged: &[Vec<String>],
) -> Vec<String> {
    let mut notes = Vec::new();
    for (why, names) in left_out {
        let cells = if names.len() == 1 { "cell" } else { "cells" };
        notes.push(format!("{cells} {} left out: {why}", names.join(", ")));
    }
    if !removed.is_empty() {
        notes.push(format!(
            "the trace replaces the cells' {}: the application's own, as recorded",
            removed.keys().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    for (c, names) in cells.iter().zip(merged).filter(|(_, n)| n.len() > 1) {
        notes.push(format!(
            "cells {} differ only in what the workload replaces: one cell, {:?}",
            names.join(", "),
            c.name
        ));
    }
    notes
}

/// A cell's name from its axes, as a suite file's cells are named: its `[[cells]]` label,
/// then `axis=value` pairs ("all" with neither).
fn cell_name(axes: &[(String, String)]) -> String {
    let label = axes.first().filter(|(k, _)| k == "cell").map(|(_, l)| l.as_str());
    let rest: Vec<String> = axes
        .iter()
        .filter(|(k, _)| k != "cell")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    match (label, rest.is_empty()) {
        (Some(l), true) => l.to_string(),
        (Some(l), false) => format!("{l} {}", rest.join(" ")),
        (None, true) => "all".to_string(),
        (None, false) => rest.join(" "),
    }
}

/// A trace read once for the whole run: its sessions to replay, what the pre-flight
/// checks, its profile, and the figures the predictions start from.
pub struct Trace {
    pub path: String,
    /// The schedule's statements and engine, its sessions taken out (each repetition
    /// replays a copy of `sessions`).
    schedule: Schedule,
    sessions: Vec<SessionPlan>,
    pub profile: Profile,
    /// The recorder's mean response time of a request, ms.
    recorded_request_ms: Option<f64>,
    /// Round trips a request waits on (pipelined requests share one).
    round_trips_per_request: Option<f64>,
    /// Recorded statements that change the database, first words (a few).
    pub writes: Vec<String>,
}

impl Trace {
    pub fn read(path: &str) -> Result<Trace> {
        let (mut schedule, profile) =
            Schedule::read_profiled(Path::new(path)).with_context(|| format!("trace {path}"))?;
        if let Some(cut) = &schedule.cut {
            eprintln!("warning: trace {path}: {cut}; each repetition replays what came before");
        }
        if schedule.sessions.is_empty() {
            bail!("trace {path}: no session to replay (every recorded session was refused or cancelled)");
        }
        let sessions = std::mem::take(&mut schedule.sessions);
        let responses: Vec<f64> = sessions
            .iter()
            .flat_map(|s| &s.requests)
            .filter_map(|r| r.seen.response_ns)
            .map(|ns| ns as f64 / 1e6)
            .collect();
        let recorded_request_ms =
            (!responses.is_empty()).then(|| responses.iter().sum::<f64>() / responses.len() as f64);
        let r = &profile.requests;
        let round_trips_per_request = r
            .round_trips_per_transaction
            .zip(r.requests_per_transaction)
            .filter(|(_, n)| *n > 0.0)
            .map(|(k, n)| k / n);
        let writes = schedule
            .statements
            .iter()
            .filter(|f| writes(&f.text))
            .take(3)
            .map(|f| f.text.chars().take(60).collect())
            .collect();
        Ok(Trace {
            path: path.to_string(),
            schedule,
            sessions,
            profile,
            recorded_request_ms,
            round_trips_per_request,
            writes,
        })
    }
}

/// Whether a statement changes the database, by its first word (a function that writes
/// is not seen).
fn writes(sql: &str) -> bool {
    const VERBS: &[&str] = &[
        "INSERT", "UPDATE", "DELETE", "MERGE", "CREATE", "DROP", "ALTER", "TRUNCATE", "COPY", "REPLACE",
        "GRANT", "REVOKE", "CALL",
    ];
    let first = sql
        .trim_start()
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or("");
    VERBS.iter().any(|v| first.eq_ignore_ascii_case(v))
}

/// Reads every trace the suite's cells replay (once each) and runs the pre-flight on
/// each target they replay on: a missing relation is refused before anything runs.
/// Warns once per trace that writes: each repetition writes again what the application
/// wrote, on the state the previous repetitions left.
pub async fn prepare(
    suite: &Suite,
    traces: &Traces,
    direct_endpoint: impl Fn(&Settings) -> Result<Endpoint>,
) -> Result<()> {
    let mut checked = std::collections::BTreeSet::new();
    for c in &suite.cells {
        let Some(file) = trace_of(&c.settings) else {
            continue;
        };
        let trace = trace_for(traces, file)?;
        let direct = direct_endpoint(&c.settings)?;
        if checked.insert((file.to_string(), direct.target.conninfo())) {
            replay::check_relations(&direct, &trace.schedule)
                .await
                .with_context(|| format!("suite {}, cell {}: trace {file}", suite.name, c.name))?;
        }
    }
    if let Some(w) = suite
        .warmup
        .filter(|w| !w.is_zero() && !traces.borrow().is_empty())
    {
        eprintln!(
            "note: {}: the suite's warm-up ({}) is not used by the cells replaying a trace: a replay \
             starts at the trace's start, with the application's own connects (the pre-warm pass, when \
             the suite has one, warms the server)",
            suite.name,
            crate::units::format_duration(w)
        );
    }
    for t in traces.borrow().values() {
        if let Some(cap) = suite.duration.filter(|d| d.as_secs_f64() < t.profile.duration_s) {
            eprintln!(
                "note: trace {} lasts {:.1} s; the suite's duration caps each repetition at its first {} \
                 (the repetitions' replay_capped figure says so)",
                t.path,
                t.profile.duration_s,
                crate::units::format_duration(cap)
            );
        }
        if !t.writes.is_empty() {
            eprintln!(
                "warning: trace {} writes ({}, ...): each repetition writes it again, on what the \
                 repetitions before it left; nothing is restored between them, so run it on a copy",
                t.path,
                t.writes.join("; ")
            );
        }
    }
    Ok(())
}

/// The trace `file`, read at its first use.
fn trace_for(traces: &Traces, file: &str) -> Result<Rc<Trace>> {
    if let Some(t) = traces.borrow().get(file) {
        return Ok(t.clone());
    }
    let t = Rc::new(Trace::read(file)?);
    traces.borrow_mut().insert(file.to_string(), t.clone());
    Ok(t)
}

/// The traces a run's cells replay, by file, each read once.
pub type Traces = std::cell::RefCell<BTreeMap<String, Rc<Trace>>>;

/// One repetition's figures and its histogram of request times (ns).
pub type Replayed = (BTreeMap<String, f64>, hdrhistogram::Histogram<u64>);

/// One repetition of a trace cell: the whole trace replayed on `endpoint` at the
/// recorded pace, stopped at the suite's `duration` when it runs longer (or by Ctrl-C,
/// `stop`).
pub async fn measure(
    suite: &Suite,
    s: &Settings,
    endpoint: &Endpoint,
    traces: &Traces,
    netns: Option<std::sync::Arc<std::fs::File>>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Result<Replayed> {
    let file = trace_of(s).ok_or_else(|| anyhow!("the cell has no trace workload"))?;
    let trace = trace_for(traces, file)?;
    // The replay's threads (as `replay -j`): the cell's `threads`, else one per core.
    let threads = match s.get("threads") {
        Some(v) => options::parse_threads(v).map_err(|e| anyhow!("setting threads: {e}"))?,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let (cap_tx, cap_rx) = tokio::sync::watch::channel(false);
    let cap = suite.duration.unwrap_or(Duration::MAX);
    let mut outer = stop;
    let capper = tokio::spawn(async move {
        tokio::select! {
            _ = outer.wait_for(|s| *s) => {}
            _ = tokio::time::sleep(cap) => {}
        }
        let _ = cap_tx.send(true);
    });
    let mut schedule = Schedule {
        sessions: trace.sessions.clone(),
        ..Schedule::default()
    };
    let settings = replay::Settings {
        speed: Speed::Factor(1.0),
        progress: None,
        threads,
        log: None,
        live: None,
        pool: pool_settings(s)?,
        netns,
    };
    let run = replay::run(&mut schedule, endpoint, settings, cap_rx).await;
    capper.abort();
    let mut f = figures(&run)?;
    predicted_figures(&mut f, &trace, s)?;
    Ok((f, run.tally.response.clone()))
}

/// A replay's figures: per second, per request, and how faithfully it kept the schedule.
fn figures(run: &replay::Run) -> Result<BTreeMap<String, f64>> {
    let t = &run.tally;
    let Some(lat) = crate::stats::load::latency(&t.response, 1) else {
        bail!(
            "no request was answered{}",
            t.connect_errors
                .keys()
                .chain(t.lost.keys())
                .next()
                .map(|e| format!("; the first error: {e}"))
                .unwrap_or_default()
        );
    };
    let elapsed_s = run.elapsed.as_secs_f64();
    let ms = |ns: f64| ns / 1e6;
    let mut f = BTreeMap::new();
    f.insert("tps".into(), t.transactions as f64 / elapsed_s);
    f.insert("requests_per_s".into(), t.sent as f64 / elapsed_s);
    f.insert("latency_mean_ms".into(), ms(lat.mean_ns));
    f.insert("latency_p50_ms".into(), ms(lat.p50_ns as f64));
    f.insert("latency_p95_ms".into(), ms(lat.p95_ns as f64));
    f.insert("latency_p99_ms".into(), ms(lat.p99_ns as f64));
    f.insert("latency_max_ms".into(), ms(lat.max_ns as f64));
    f.insert("requests".into(), t.sent as f64);
    f.insert("transactions".into(), t.transactions as f64);
    f.insert("connects".into(), t.connects as f64);
    f.insert("failed_requests".into(), t.failures.values().sum::<u64>() as f64);
    f.insert("failed_now_not_then".into(), t.failed_now_not_then as f64);
    f.insert("requests_not_sent".into(), t.not_sent as f64);
    f.insert("sessions_not_connected".into(), (t.sessions - t.connected) as f64);
    f.insert("replay_s".into(), elapsed_s);
    // Cut by the suite's duration (Ctrl-C is not saved at all).
    f.insert("replay_capped".into(), f64::from(u8::from(run.interrupted)));
    if let Some(lag) = crate::stats::load::latency(&t.lag, 1) {
        f.insert("lag_p99_ms".into(), ms(lag.p99_ns as f64));
    }
    // Measured per request (not lag + latency: two histograms' percentiles do not add).
    if let Some(whole) = crate::stats::load::latency(&t.from_intended, 1) {
        f.insert("intended_to_answer_mean_ms".into(), ms(whole.mean_ns));
        f.insert("intended_to_answer_p50_ms".into(), ms(whole.p50_ns as f64));
        f.insert("intended_to_answer_p99_ms".into(), ms(whole.p99_ns as f64));
    }
    if t.sent > 0 {
        f.insert("on_time_share".into(), t.on_time as f64 / t.sent as f64);
    }
    Ok(f)
}

/// The trace's prediction for this cell's path, kept with each repetition (the same
/// every time: it is read from the recording).
fn predicted_figures(f: &mut BTreeMap<String, f64>, trace: &Trace, s: &Settings) -> Result<()> {
    if let Some(r) = trace.recorded_request_ms {
        f.insert("trace_recorded_request_ms".into(), r);
    }
    if let Some(k) = trace.round_trips_per_request {
        f.insert("trace_round_trips_per_request".into(), k);
    }
    let (scenario, rtt_ms) = scenario(s)?;
    let app = crate::stats::app::predict(&trace.profile, &[rtt_ms]);
    if let Some(p) = app.iter().find(|p| p.scenario == scenario) {
        if let Some(v) = p.transaction_ms {
            f.insert("trace_predicted_transaction_ms".into(), v);
        }
        if let Some(v) = p.connect_ms {
            f.insert("trace_predicted_connect_ms".into(), v);
        }
    }
    Ok(())
}

/// The scenario of `connbench trace`'s predictions a cell's path is ("+20 ms", "+20 ms,
/// over TLS", "+20 ms, PgBouncer near the database", "+20 ms, client-side pool", "as
/// recorded"), and its added RTT. A pool opens its connects before the work, so over TLS
/// too its prediction is the pool's.
pub fn scenario(s: &Settings) -> Result<(String, f64)> {
    let rtt_ms = options::route_spec(s)?.distance.as_secs_f64() * 1e3;
    let pgbouncer = s.get("target").is_some_and(|t| t.starts_with("pgbouncer"));
    let tls = matches!(
        s.get("sslmode").map(String::as_str),
        Some("require" | "verify-ca" | "verify-full")
    ) || s.get("target").is_some_and(|t| t == "tls");
    // Written as `stats::app` writes it, so the scenarios match.
    let n = rtt_ms;
    Ok((
        match (pgbouncer, tls) {
            (true, _) => format!("+{n} ms, PgBouncer near the database"),
            _ if pooled(s) => format!("+{n} ms, client-side pool"),
            (false, true) => format!("+{n} ms, over TLS"),
            (false, false) if rtt_ms == 0.0 => "as recorded".to_string(),
            (false, false) => format!("+{n} ms"),
        },
        rtt_ms,
    ))
}

/// A trace cell's measured figure beside the trace's own prediction for its path (the
/// round-trip model of `connbench trace`, from the recording alone).
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct TracePrediction {
    /// The prediction's scenario, as `connbench trace` names it: "as recorded", "+20 ms",
    /// "+20 ms, over TLS", "+20 ms, PgBouncer near the database".
    pub scenario: String,
    pub rtt_requested_ms: f64,
    /// As the route check measured it, when the cell has a distance.
    pub rtt_achieved_ms: Option<f64>,
    /// The recorder's mean response time of a request (its last byte to the answer's).
    pub recorded_request_ms: Option<f64>,
    /// Round trips a request waited on when recorded (pipelined requests share one).
    pub round_trips_per_request: Option<f64>,
    /// recorded_request_ms + rtt_requested_ms × round_trips_per_request; null when not
    /// predicted (`not_predicted` says why).
    pub predicted_request_ms: Option<f64>,
    /// The replay's mean response time of a request, the mean over the repetitions.
    pub measured_request_ms: f64,
    /// measured / predicted.
    pub ratio: Option<f64>,
    /// `connbench trace`'s prediction for this path: a transaction (first request to last
    /// response) and a new connection's set-up.
    pub predicted_transaction_ms: Option<f64>,
    pub predicted_connect_ms: Option<f64>,
    pub not_predicted: Option<String>,
}

/// The prediction beside a trace cell's measurement, from the means of its repetitions'
/// figures (`mean`); `None` for a cell that replays no trace or measured nothing.
pub fn prediction(s: &Settings, mean: impl Fn(&str) -> Option<f64>) -> Option<TracePrediction> {
    trace_of(s)?;
    let (scenario, rtt_ms) = scenario(s).ok()?;
    let measured = mean("latency_mean_ms")?;
    let recorded = mean("trace_recorded_request_ms");
    let k = mean("trace_round_trips_per_request");
    let pgbouncer = scenario.ends_with("PgBouncer near the database");
    let predicted = (!pgbouncer)
        .then(|| {
            recorded
                .zip(k)
                .map(|(r, k)| crate::stats::model::at_distance(r, rtt_ms, k))
        })
        .flatten();
    let not_predicted = if pgbouncer {
        Some(
            "PgBouncer's own connect and pooling costs are not in a trace of an application that did not \
             use one: the measurement is the answer"
                .to_string(),
        )
    } else if predicted.is_none() {
        Some("the trace holds no timed request to start from".to_string())
    } else {
        None
    };
    Some(TracePrediction {
        scenario,
        rtt_requested_ms: rtt_ms,
        rtt_achieved_ms: mean("rtt_achieved_ms"),
        recorded_request_ms: recorded,
        round_trips_per_request: k,
        predicted_request_ms: predicted,
        measured_request_ms: measured,
        ratio: predicted.filter(|p| *p > 0.0).map(|p| measured / p),
        predicted_transaction_ms: mean("trace_predicted_transaction_ms"),
        predicted_connect_ms: mean("trace_predicted_connect_ms"),
        not_predicted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DISTANCE: &str = r#"
name = "d"
question = "What does distance cost?"
kind = "load"
duration = "5s"
figure = "latency_mean_ms"
baseline = "no pool distance=0ms"
slices = "100ms"
[defaults]
workload = "select-only"
clients = 1
target = "tcp"
[[cells]]
name = "no pool"
connection = "per-transaction"
[[cells]]
name = "pool"
connection = "pool"
pool_max_lifetime = "5m"
versus = "no pool"
[[cells]]
name = "PgBouncer near"
target = "pgbouncer_tcp"
connection = "per-transaction"
versus = "pool"
[[cells]]
name = "restarted"
fault = "postgres-restart"
versus = "no pool"
[axes]
distance = ["0ms", "20ms"]
"#;

    #[test]
    fn run_workload_replaces_what_the_trace_decides_and_leaves_out_what_it_cannot_replay() {
        let mut s = Suite::parse(DISTANCE, "d.toml").unwrap();
        let notes = replace_workload(&mut s, "trace:app.trace.gz").unwrap();
        let names: Vec<&str> = s.cells.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "no pool distance=0ms",
                "no pool distance=20ms",
                "pool distance=0ms",
                "pool distance=20ms",
                "PgBouncer near distance=0ms",
                "PgBouncer near distance=20ms"
            ]
        );
        assert_eq!(s.baseline, 0);
        // The pool's cells are kept, so PgBouncer's are still compared with them; the
        // cells with a fault, compared with the baseline, are left out.
        assert_eq!((s.cells[2].versus, s.cells[4].versus), (Some(0), Some(2)));
        assert!(s.slice.is_none());
        for c in &s.cells {
            assert_eq!(c.settings["workload"], "trace:app.trace.gz");
            assert!(!c.settings.contains_key("clients"));
            check_cell(&s, &c.settings).unwrap();
        }
        // The pool is the one connection kept, its settings with it.
        let pool = &s.cells[2].settings;
        assert_eq!(
            (pool["connection"].as_str(), pool["pool_max_lifetime"].as_str()),
            ("pool", "5m")
        );
        assert!(!s.cells[4].settings.contains_key("connection"));
        let p = pool_settings(pool).unwrap().unwrap();
        assert_eq!(
            (p.size, p.max_lifetime),
            (DEFAULT_POOL_SIZE, Some(Duration::from_secs(300)))
        );
        let all = notes.join("\n");
        assert!(
            all.contains(
                "cells \"restarted distance=0ms\", \"restarted distance=20ms\" left out: fault = \"postgres-restart\""
            ),
            "{all}"
        );
        assert!(!all.contains("connection = \"pool\""), "{all}");
        assert!(
            all.contains("2 cells with a pool are compared on latency_mean_ms")
                && all.contains("intended_to_answer_*"),
            "{all}"
        );
        assert!(all.contains("replaces the cells' clients, connection"), "{all}");
        assert!(s.question.ends_with("(workload: trace:app.trace.gz)"));
    }

    #[test]
    fn cells_the_trace_makes_alike_become_one_and_a_suite_it_cannot_ask_is_refused() {
        // Cells that differ only in what the trace replaces become one, named without it.
        let pooling = super::super::suite::load_text("pooling").unwrap().1;
        let mut s = Suite::parse(&pooling, "pooling").unwrap();
        let notes = replace_workload(&mut s, "trace:a").unwrap().join("\n");
        let names: Vec<&str> = s.cells.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["target=unix", "target=pgbouncer_tx_unix"], "{notes}");
        assert_eq!((s.baseline, s.cells[1].versus), (0, None));
        assert!(
            notes.contains(
                "cells \"target=unix connection=per-transaction\", \"target=unix connection=persistent\" \
                 differ only in what the workload replaces: one cell, \"target=unix\""
            ),
            "{notes}"
        );
        let connect = super::super::suite::load_text("connect").unwrap().1;
        let mut s = Suite::parse(&connect, "connect").unwrap();
        let e = format!("{:#}", replace_workload(&mut s, "trace:a").unwrap_err());
        assert!(e.contains("Connect suite"), "{e}");
        // A baseline with a fault cannot be replayed.
        let mut s = Suite::parse(
            &DISTANCE.replace("no pool distance=0ms", "restarted distance=0ms"),
            "d",
        )
        .unwrap();
        let e = format!("{:#}", replace_workload(&mut s, "trace:a").unwrap_err());
        assert!(
            e.contains("baseline \"restarted distance=0ms\" cannot be replayed"),
            "{e}"
        );
    }

    #[test]
    fn a_trace_cell_that_sets_what_the_recording_decides_is_refused() {
        let text = DISTANCE
            .replace("select-only", "trace:app.trace.gz")
            .replace("slices = \"100ms\"\n", "");
        let s = Suite::parse(&text, "d").unwrap();
        let e = format!("{:#}", check_cell(&s, &s.cells[0].settings).unwrap_err());
        assert!(e.contains("clients = \"1\": the recording decides it"), "{e}");
        let cell = |i: usize| {
            let mut c = s.cells[i].settings.clone();
            c.remove("clients");
            c
        };
        // A pool is askable; a connection per transaction is the recording's to decide.
        check_cell(&s, &cell(2)).unwrap();
        let e = format!("{:#}", check_cell(&s, &cell(0)).unwrap_err());
        assert!(
            e.contains("connection = \"per-transaction\": the recording decides it")
                && e.contains("connection = \"pool\" is the one a trace cell may set"),
            "{e}"
        );
        let mut bad = cell(2);
        bad.insert("pool_size".into(), "0".into());
        let e = format!("{:#}", check_cell(&s, &bad).unwrap_err());
        assert!(e.contains("setting pool_size"), "{e}");
        bad.insert("pool_size".into(), "3".into());
        assert_eq!(pool_settings(&bad).unwrap().unwrap().size, 3);
        bad.remove("connection");
        let e = format!("{:#}", check_cell(&s, &bad).unwrap_err());
        assert!(
            e.contains("pool_size = \"3\": a pool's setting; set connection = \"pool\""),
            "{e}"
        );
        let mut tps = s.clone();
        tps.figure = "recovery_s".into();
        let e = format!("{:#}", check_cell(&tps, &s.cells[0].settings).unwrap_err());
        assert!(e.contains("no meaning in a replay"), "{e}");
    }

    #[test]
    fn a_cell_s_path_names_the_trace_s_scenario_and_the_prediction_adds_its_round_trips() {
        let cell = |pairs: &[(&str, &str)]| -> Settings {
            let mut s: Settings = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            s.insert("workload".into(), "trace:a".into());
            s
        };
        let scen = |pairs: &[(&str, &str)]| scenario(&cell(pairs)).unwrap().0;
        assert_eq!(scen(&[("target", "tcp")]), "as recorded");
        assert_eq!(scen(&[("target", "tcp"), ("distance", "20ms")]), "+20 ms");
        assert_eq!(scen(&[("target", "tls"), ("distance", "1ms")]), "+1 ms, over TLS");
        assert_eq!(
            scen(&[("target", "pgbouncer_tcp"), ("distance", "50ms")]),
            "+50 ms, PgBouncer near the database"
        );
        assert_eq!(
            scen(&[("target", "tcp"), ("distance", "10ms"), ("connection", "pool")]),
            "+10 ms, client-side pool"
        );
        let figures: BTreeMap<&str, f64> = [
            ("latency_mean_ms", 21.0),
            ("trace_recorded_request_ms", 0.4),
            ("trace_round_trips_per_request", 1.0),
        ]
        .into();
        let mean = |k: &str| figures.get(k).copied();
        let p = prediction(&cell(&[("target", "tcp"), ("distance", "20ms")]), mean).unwrap();
        assert_eq!(p.predicted_request_ms, Some(20.4));
        assert!((p.ratio.unwrap() - 21.0 / 20.4).abs() < 1e-9);
        let p = prediction(&cell(&[("target", "pgbouncer_tcp")]), mean).unwrap();
        assert_eq!((p.predicted_request_ms, p.ratio), (None, None));
        assert!(p.not_predicted.unwrap().contains("PgBouncer"));
        assert!(writes("  insert into t values (1)") && !writes("SELECT 1 FOR UPDATE"));
    }
}

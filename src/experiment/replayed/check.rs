//! A trace cell's settings, checked before anything runs, and a suite's cells rewritten
//! for a trace: the file named, what the recording decides refused in a cell (or removed
//! by `run --workload`, alike cells made one), what replay cannot ask yet refused or left
//! out by name, a figure replay measures, a client-side pool's settings read; trace paths
//! made relative to their suite file.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context as _, Result};

use crate::experiment::suite::{Cell, Kind, Suite};
use crate::options;
use crate::options::cell::Settings;
use crate::replay;

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

/// The figure of a transaction shape's mean time now, ms (`id` as `connbench trace`
/// names the shape): a suite compares cells on one endpoint of the application with
/// `figure = "shape_<id>_mean_ms"`.
pub fn shape_figure(id: &str) -> String {
    format!("{SHAPE_PREFIX}{id}{SHAPE_SUFFIX}")
}

const SHAPE_PREFIX: &str = "shape_";
const SHAPE_SUFFIX: &str = "_mean_ms";

/// Whether `name` is a shape's figure: `shape_`, 16 hex digits, `_mean_ms`.
pub fn is_shape_figure(name: &str) -> bool {
    name.strip_prefix(SHAPE_PREFIX)
        .and_then(|r| r.strip_suffix(SHAPE_SUFFIX))
        .is_some_and(|id| id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The figures only a replay measures start so.
const FROM_INTENDED: &str = "intended_to_answer_";

/// Settings the recording decides: the application's own clients, think time, pace,
/// protocol, connections and tables (all but `connection = "pool"`, see [`decided`]).
const DECIDED: &[&str] = &[
    "clients",
    "think",
    "rate",
    "connect_rate",
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
pub(super) fn pooled(s: &Settings) -> bool {
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
        if suite.figure.starts_with(FROM_INTENDED) || is_shape_figure(&suite.figure) {
            bail!(
                "figure {:?}: a replay's figure (intended send times and transaction shapes come from a trace); \
                 this cell runs {}: give it workload = \"trace:FILE\", or compare on latency_*",
                suite.figure,
                s.get("workload").map_or("the default workload", String::as_str)
            );
        }
        if let Some(v) = s.get("restore") {
            bail!(
                "restore = {v:?}: restores a trace's repetitions, and this cell runs {}: give it \
                 workload = \"trace:FILE\", or remove restore",
                s.get("workload").map_or("the default workload", String::as_str)
            );
        }
        return Ok(());
    };
    options::restore(s)?;
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
    if !FIGURES.contains(&suite.figure.as_str()) && !is_shape_figure(&suite.figure) {
        bail!(
            "workload {PREFIX}{file}: figure {:?} has no meaning in a replay; use one of {}, or a transaction shape's shape_<id>_mean_ms (its id from `connbench trace`)",
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
/// `run --restore`: every trace cell's `restore` set to `restore`, overriding the file's.
pub fn set_restore(suite: &mut Suite, restore: options::Restore) -> Result<()> {
    let mut any = false;
    for c in suite.cells.iter_mut().filter(|c| trace_of(&c.settings).is_some()) {
        c.settings.insert("restore".into(), restore.as_str().into());
        any = true;
    }
    if !any {
        bail!(
            "--restore {}: no cell of suite {} replays a trace, and restore is about a trace's \
             repetitions; add --workload trace:FILE, or leave --restore out",
            restore.as_str(),
            suite.name
        );
    }
    Ok(())
}

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
    if trace && !FIGURES.contains(&suite.figure.as_str()) && !is_shape_figure(&suite.figure) {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
        let pooling = crate::experiment::suite::load_text("pooling").unwrap().1;
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
        let connect = crate::experiment::suite::load_text("connect").unwrap().1;
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
}

//! The server's size as an axis: for a suite with a `server_cpus` axis, the cells that
//! differ only by size form a curve, and each size is read against the smallest one
//! with the comparison the run already made (the suite compares a size with the same
//! cell at the smallest size, `experiment::suite`), so the ratio's interval is the
//! answer's. "Linear" is the ratio the cores alone would give (2 cores against 0.5 is
//! 4x); efficiency is the measured ratio over it, its interval the ratio's over it.

use std::fmt::Write;

use serde::Serialize;

use super::style::{paint, Paint};
use crate::experiment::summary::{CellResult, SuiteResult};
use crate::stats::compare::Verdict;

/// What the quota does not emulate, said wherever a size curve is answered.
pub const LIMITS: &str = "the size is a CPU quota (cgroup) on this machine: it emulates CPU time only, \
     not the memory, disk and network that grow with a managed instance, nor hyperthreads, \
     and the client shares the machine's cores with the server";

/// Whether a run's sizes are the sandbox's CPU quota (then [`LIMITS`] applies), not
/// labels of the user's own instances.
pub fn by_quota(r: &SuiteResult) -> bool {
    r.suite
        .cells
        .iter()
        .any(|c| c.settings.contains_key("server_cpus"))
}

/// One size on a curve.
#[derive(Debug, Clone)]
pub struct SizePoint {
    /// Index of the cell.
    pub cell: usize,
    /// The server's cores (`server_cpus`, or the instance's `cpus`).
    pub cpus: f64,
    /// "0.5 core", or the instance's `size` label ("2 vCPU").
    pub label: String,
    /// Against the curve's smallest size; `None` for the smallest itself, and for a size
    /// without a comparison (then `why` says so).
    pub versus_smallest: Option<Scaling>,
    pub why: Option<String>,
}

/// A size against the smallest: the run's comparison of the suite's figure, and how
/// close to linear in the cores it was.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Scaling {
    /// The cores against the smallest size's (2 against 0.5 is 4).
    pub size_ratio: f64,
    /// The figure's ratio to the smallest size's, with the comparison's interval.
    pub ratio: f64,
    pub ratio_low: f64,
    pub ratio_high: f64,
    /// ratio / size_ratio, with the ratio's interval divided likewise: 1 is linear. Only
    /// for tps (a latency's ratio is not a share of linear).
    pub efficiency: Option<f64>,
    pub efficiency_low: Option<f64>,
    pub efficiency_high: Option<f64>,
}

/// The cells that differ only by size, smallest first; `name` is what they share.
#[derive(Debug, Clone)]
pub struct SizeCurve {
    pub name: String,
    pub points: Vec<SizePoint>,
}

/// A cell's size in cores, when the suite gives it one (`server_cpus`, or `cpus` on a
/// cell of the user's own instance).
pub fn cpus_of(r: &SuiteResult, cell: usize) -> Option<f64> {
    crate::experiment::suite::cell_cpus(&r.suite.cells[cell].settings)
}

/// A cell's size as shown: its `size` label, else its cores.
pub fn label_of(r: &SuiteResult, cell: usize) -> Option<String> {
    let settings = &r.suite.cells[cell].settings;
    match settings.get("size") {
        Some(l) => Some(l.clone()),
        None => cpus_of(r, cell).map(size_label),
    }
}

/// The configuration a cell's size curve stands for: its axes but the size's (and, for
/// the user's own instances labelled with `cpus`, but the target and the cell's label,
/// which name the instance).
pub fn curve_name(r: &SuiteResult, cell: usize) -> String {
    let c = &r.suite.cells[cell];
    let own = !c.settings.contains_key("server_cpus") && c.settings.contains_key("cpus");
    c.axes
        .iter()
        .filter(|(k, _)| k != "server_cpus" && !(own && (k == "target" || k == "cell")))
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// "0.5 core", "1 core", "2 cores".
pub fn size_label(cpus: f64) -> String {
    format!("{cpus} core{}", if cpus > 1.0 { "s" } else { "" })
}

/// The size curves of a run: for each combination of the other axes, its sizes (two or
/// more), each against the smallest.
pub fn size_curves(r: &SuiteResult) -> Vec<SizeCurve> {
    let mut curves: Vec<SizeCurve> = Vec::new();
    for i in 0..r.suite.cells.len() {
        let Some(cpus) = cpus_of(r, i) else { continue };
        let name = curve_name(r, i);
        let point = SizePoint {
            cell: i,
            cpus,
            label: label_of(r, i).unwrap_or_else(|| size_label(cpus)),
            versus_smallest: None,
            why: None,
        };
        match curves.iter_mut().find(|c| c.name == name) {
            Some(c) => c.points.push(point),
            None => curves.push(SizeCurve {
                name,
                points: vec![point],
            }),
        }
    }
    curves.retain(|c| c.points.len() > 1);
    for curve in &mut curves {
        curve.points.sort_by(|a, b| a.cpus.total_cmp(&b.cpus));
        let (smallest_cell, smallest) = (curve.points[0].cell, curve.points[0].cpus);
        for p in curve.points.iter_mut().skip(1) {
            let compared = r.suite.cells[p.cell].versus == Some(smallest_cell)
                || (r.suite.cells[p.cell].versus.is_none() && r.suite.baseline == smallest_cell);
            let c = &r.cells[p.cell];
            match (&c.comparison, compared) {
                (Some(cmp), true) => {
                    let size_ratio = p.cpus / smallest;
                    let linear = (r.suite.figure == "tps").then_some(size_ratio);
                    p.versus_smallest = Some(Scaling {
                        size_ratio,
                        ratio: cmp.ratio.point,
                        ratio_low: cmp.ratio.ci_low,
                        ratio_high: cmp.ratio.ci_high,
                        efficiency: linear.map(|l| cmp.ratio.point / l),
                        efficiency_low: linear.map(|l| cmp.ratio.ci_low / l),
                        efficiency_high: linear.map(|l| cmp.ratio.ci_high / l),
                    });
                }
                (_, false) => {
                    p.why = Some(format!(
                        "compared with {}, not with the smallest size",
                        r.suite.cells[r.suite.cells[p.cell].versus.unwrap_or(r.suite.baseline)].name
                    ))
                }
                (None, true) => {
                    p.why = Some(
                        c.no_comparison
                            .clone()
                            .unwrap_or_else(|| "no results".to_string()),
                    )
                }
            }
        }
    }
    curves
}

/// "2 cores: 3.55x the tps of 0.5 core (3.41 to 3.70), 89% of linear (85% to 93%)".
pub fn scaling_phrase(figure: &str, size: &str, smallest: &str, s: &Scaling) -> String {
    let mut o = format!(
        "{size}: {:.2}x the {figure} of {smallest} ({:.2} to {:.2})",
        s.ratio, s.ratio_low, s.ratio_high
    );
    if let (Some(e), Some(lo), Some(hi)) = (s.efficiency, s.efficiency_low, s.efficiency_high) {
        let _ = write!(
            o,
            ", {:.0}% of linear ({:.0}% to {:.0}%)",
            e * 100.0,
            lo * 100.0,
            hi * 100.0
        );
    }
    o
}

/// The answer's line of each larger size (by cell), in place of its comparison's
/// sentence: "clients=8, 2 cores: 3.55x the tps of 0.5 core (3.41 to 3.70), 89% of
/// linear (85% to 93%); faster, p < 0.001".
pub fn answer_lines(r: &SuiteResult) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for c in size_curves(r) {
        let smallest = c.points[0].label.clone();
        for p in &c.points[1..] {
            let (Some(s), Some(cmp)) = (&p.versus_smallest, &r.cells[p.cell].comparison) else {
                continue;
            };
            let prefix = if c.name.is_empty() {
                String::new()
            } else {
                format!("{}, ", c.name)
            };
            let verdict = match cmp.verdict {
                Verdict::Faster => "faster".to_string(),
                Verdict::Slower => "slower".to_string(),
                Verdict::NoDifference => format!("the same within {:.0}%", r.suite.noise_threshold * 100.0),
                Verdict::Inconclusive => "undecided".to_string(),
            };
            out.push((
                p.cell,
                format!(
                    "{prefix}{}; {verdict}, {}",
                    scaling_phrase(&r.suite.figure, &p.label, &smallest, s),
                    crate::stats::compare::format_p(cmp.p_value)
                ),
            ));
        }
    }
    out
}

/// Where more clients gave less throughput than fewer at the same size (every other
/// axis equal), one line each with the causes the run measured in the cell with more
/// clients: its server at its quota, or the machine's cores all busy (client, server
/// and every other process share them), and whether the two intervals overlap (then the
/// run cannot tell them apart). "No cause measured" where neither holds.
pub fn fewer_clients_faster(r: &SuiteResult) -> Vec<String> {
    let clients = |i: usize| -> Option<u64> {
        r.suite.cells[i]
            .axes
            .iter()
            .find(|(k, _)| k == "clients")
            .and_then(|(_, v)| v.parse().ok())
    };
    let others = |i: usize| -> Vec<&(String, String)> {
        r.suite.cells[i]
            .axes
            .iter()
            .filter(|(k, _)| k != "clients")
            .collect()
    };
    let tps = |i: usize| r.cells[i].described.get("tps").map(|d| &d.mean);
    let mean = |i: usize, k: &str| {
        let v = r.cells[i].figures.get(k).filter(|v| !v.is_empty())?;
        Some(v.iter().sum::<f64>() / v.len() as f64)
    };
    let mut out = Vec::new();
    for more in 0..r.cells.len() {
        for fewer in 0..r.cells.len() {
            let (Some(m), Some(f)) = (clients(more), clients(fewer)) else {
                continue;
            };
            let (Some(tm), Some(tf)) = (tps(more), tps(fewer)) else {
                continue;
            };
            if m <= f || others(more) != others(fewer) || tm.point >= tf.point {
                continue;
            }
            let mut causes = Vec::new();
            if let Some((used, quota, true)) = server_bound(&r.cells[more]) {
                causes.push(format!(
                    "its server used its quota ({used:.2} of {quota} cores), so more clients only queue for it"
                ));
            }
            let cpus = r.environment.cpus as f64;
            if let Some(busy) = mean(more, "busy_cores").filter(|&b| b >= 0.9 * cpus) {
                causes.push(format!(
                    "the machine's {cpus} cores were busy ({busy:.2}, every process counted): clients, server \
                     and other processes competed for them"
                ));
            }
            if causes.is_empty() {
                causes.push("no cause measured".into());
            }
            if tm.ci_high >= tf.ci_low {
                causes.push(format!(
                    "the intervals overlap ({:.1} to {:.1} against {:.1} to {:.1} tps), so this run cannot tell \
                     the two apart",
                    tm.ci_low, tm.ci_high, tf.ci_low, tf.ci_high
                ));
            }
            out.push(format!(
                "{} ran {:.2}x the tps of clients={f} ({:.1} against {:.1}): {}",
                r.cells[more].name,
                tm.point / tf.point,
                tm.point,
                tf.point,
                causes.join("; ")
            ));
        }
    }
    out
}

/// One size of a curve as display strings: the text, Markdown and HTML reports' row.
pub struct SizeRow {
    /// What the curve's cells share (the other axes).
    pub curve: String,
    pub size: String,
    /// Means over the counted repetitions, "-" where not measured.
    pub tps: String,
    pub p50_ms: String,
    pub p99_ms: String,
    /// "2.81x (1.84 to 4.31)", "(smallest)", or why there is no ratio.
    pub ratio: String,
    /// "35% (23% to 54%)", or empty.
    pub linear: String,
    pub server_bound: bool,
}

/// The rows of every size curve, smallest size first.
pub fn rows(r: &SuiteResult) -> Vec<SizeRow> {
    let mut out = Vec::new();
    for c in size_curves(r) {
        for p in &c.points {
            let cell = &r.cells[p.cell];
            let f = |fig: &str, prec: usize| {
                cell.described
                    .get(fig)
                    .map_or("-".to_string(), |d| format!("{:.prec$}", d.mean.point))
            };
            let (ratio, linear) = match (&p.versus_smallest, &p.why) {
                (Some(s), _) => (
                    format!("{:.2}x ({:.2} to {:.2})", s.ratio, s.ratio_low, s.ratio_high),
                    match (s.efficiency, s.efficiency_low, s.efficiency_high) {
                        (Some(e), Some(lo), Some(hi)) => {
                            format!("{:.0}% ({:.0}% to {:.0}%)", e * 100.0, lo * 100.0, hi * 100.0)
                        }
                        _ => String::new(),
                    },
                ),
                (None, Some(why)) => (why.clone(), String::new()),
                (None, None) => ("(smallest)".to_string(), String::new()),
            };
            out.push(SizeRow {
                curve: c.name.clone(),
                size: p.label.clone(),
                tps: f("tps", 1),
                p50_ms: f("latency_p50_ms", 2),
                p99_ms: f("latency_p99_ms", 2),
                ratio,
                linear,
                server_bound: matches!(server_bound(cell), Some((_, _, true))),
            });
        }
    }
    out
}

/// The text report's section: per curve, each size's tps, p50 and p99 (means of the
/// repetitions), its ratio to the smallest size with the interval, the share of linear,
/// and whether the server was bound by its quota.
pub fn text(r: &SuiteResult) -> String {
    let rows = rows(r);
    if rows.is_empty() {
        return String::new();
    }
    let mut o = String::from(
        "\n  the server's size (means of repetitions; ratio and linear against the smallest size):\n",
    );
    let mut curve = None;
    for row in &rows {
        if curve != Some(&row.curve) {
            curve = Some(&row.curve);
            if !row.curve.is_empty() {
                let _ = writeln!(o, "  {}", row.curve);
            }
            let _ = writeln!(
                o,
                "    {:<10} {:>10} {:>9} {:>9}  {:<24} of linear",
                "size", "tps", "p50 ms", "p99 ms", "ratio (95% CI)"
            );
        }
        let line = format!(
            "    {:<10} {:>10} {:>9} {:>9}  {:<24} {:<20}",
            row.size, row.tps, row.p50_ms, row.p99_ms, row.ratio, row.linear
        );
        let bound = if row.server_bound {
            format!("  {}", paint("server-bound", Paint::Bold))
        } else {
            String::new()
        };
        let _ = writeln!(o, "{}{bound}", line.trim_end());
    }
    for note in fewer_clients_faster(r) {
        o.push_str(&super::style::wrap(
            &note,
            "  more clients, less tps: ",
            "          ",
            80,
        ));
    }
    if by_quota(r) {
        o.push_str(&super::style::wrap(LIMITS, "  limits: ", "          ", 80));
    }
    o
}

/// The Markdown report's table of the size curves, with the limits under it.
pub fn markdown(r: &SuiteResult) -> String {
    let rows = rows(r);
    if rows.is_empty() {
        return String::new();
    }
    let mut o = String::from(
        "\n| configuration | size | tps (mean) | p50 ms | p99 ms | ratio to the smallest (95% CI) | of linear | |\n|---|---|---:|---:|---:|---|---|---|\n",
    );
    for row in &rows {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            row.curve.replace('|', "\\|"),
            row.size,
            row.tps,
            row.p50_ms,
            row.p99_ms,
            row.ratio,
            row.linear,
            if row.server_bound { "server-bound" } else { "" }
        );
    }
    for note in fewer_clients_faster(r) {
        let _ = writeln!(o, "\nMore clients, less tps: {note}.");
    }
    if by_quota(r) {
        let _ = writeln!(o, "\nLimits: {LIMITS}.");
    }
    o
}

/// A cell's server CPU against its quota, for JSON.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ServerBoundJson {
    /// The server's mean cores over the counted repetitions.
    pub server_cores: f64,
    /// The quota it ran under, in cores.
    pub quota_cores: f64,
    /// Whether it used 85% of the quota or more (`SERVER_BOUND_SHARE`).
    pub bound: bool,
}

/// The server-bound field of a cell, or why there is none.
pub fn server_bound_json(c: &CellResult) -> (Option<ServerBoundJson>, Option<String>) {
    match server_bound(c) {
        Some((server_cores, quota_cores, bound)) => (
            Some(ServerBoundJson {
                server_cores,
                quota_cores,
                bound,
            }),
            None,
        ),
        None => {
            let has = |k: &str| c.figures.get(k).is_some_and(|v| !v.is_empty());
            let why = if c.figures.values().all(|v| v.is_empty()) {
                "no results"
            } else if !has("server_quota_cores") {
                "the server ran without a CPU quota (no server_cpus, no --server-cpus)"
            } else {
                "the server's CPU was not measured (its processes were not readable)"
            };
            (None, Some(why.to_string()))
        }
    }
}

/// A cell's place on a size curve, for JSON.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SizeJson {
    /// The server's cores (`server_cpus`, or the instance's `cpus`).
    pub cpus: f64,
    /// "0.5 core", "2 cores", or the instance's `size` label.
    pub label: String,
    /// The cell of the curve's smallest size.
    pub smallest: String,
    /// Against the smallest size; null for the smallest itself or without a comparison.
    pub versus_smallest: Option<Scaling>,
}

/// Per cell (by index): its place on a size curve, when it has one.
pub fn size_json(r: &SuiteResult) -> Vec<Option<SizeJson>> {
    let mut out = vec![None; r.cells.len()];
    for c in size_curves(r) {
        let smallest = r.cells[c.points[0].cell].name.clone();
        for p in c.points {
            out[p.cell] = Some(SizeJson {
                cpus: p.cpus,
                label: p.label.clone(),
                smallest: smallest.clone(),
                versus_smallest: p.versus_smallest,
            });
        }
    }
    out
}

/// A server at or above this share of its CPU quota is bound by it. The quota is a
/// ceiling a saturated server does not quite reach: on this project's 2-core VM, select-
/// only at 8 clients kept a 0.5-core server at 0.45-0.48 cores (90-97%), the client
/// sharing the cores taking the rest of some periods; an unsaturated one sat far below.
pub const SERVER_BOUND_SHARE: f64 = 0.85;

/// A cell's server CPU against its quota (`server_cpus`, `--server-cpus`): the mean cores
/// used, the quota, and whether the server was bound by it. `None` without a quota or
/// without the server's CPU.
pub fn server_bound(c: &CellResult) -> Option<(f64, f64, bool)> {
    let mean = |k: &str| {
        let v = c.figures.get(k).filter(|v| !v.is_empty())?;
        Some(v.iter().sum::<f64>() / v.len() as f64)
    };
    let (used, quota) = (mean("server_cores")?, mean("server_quota_cores")?);
    Some((used, quota, used >= SERVER_BOUND_SHARE * quota))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::summary::Outcome;
    use std::collections::BTreeMap;

    /// 1 and 8 clients at one size, five rounds of the given tps and busy cores.
    fn run(one: [f64; 5], eight: [f64; 5], busy: f64) -> SuiteResult {
        let text = r#"
name = "scaling"
question = "Do more clients get more done?"
kind = "load"
duration = "1s"
repetitions = 5
baseline = "server_cpus=0.5 clients=1"
[axes]
server_cpus = [0.5]
clients = [1, 8]
"#;
        let suite = crate::experiment::suite::Suite::parse(text, "t").unwrap();
        let series = |tps: [f64; 5]| -> Vec<Outcome> {
            (0..5)
                .map(|i| Outcome {
                    round: i as u32 + 1,
                    result: Ok(BTreeMap::from([
                        ("tps".to_string(), tps[i]),
                        ("busy_cores".to_string(), busy),
                        ("server_cores".to_string(), 0.2),
                        ("server_quota_cores".to_string(), 0.5),
                    ])),
                })
                .collect()
        };
        let env = crate::experiment::store::Environment {
            connbench_version: "0.1.0".into(),
            server_version: None,
            pgbouncer_version: None,
            cpus: 2,
            kernel: "Linux".into(),
            tls: None,
            server_settings: vec![],
        };
        crate::experiment::summary::summarize(&suite, 1, vec![series(one), series(eight)], false, env)
    }

    #[test]
    fn more_clients_with_less_tps_is_said_with_its_measured_cause() {
        let fewer = [1000.0, 1010.0, 990.0, 1005.0, 995.0];
        // More clients, more tps: nothing to say.
        assert!(fewer_clients_faster(&run(fewer, fewer.map(|t| t * 2.0), 1.0)).is_empty());
        // Less, on a quiet machine with the server under its quota: no cause measured,
        // and the intervals apart.
        let notes = fewer_clients_faster(&run(fewer, fewer.map(|t| t * 0.5), 1.0));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with("server_cpus=0.5 clients=8 ran 0.50x the tps of clients=1 (500.0 against 1000.0): no cause measured"),
            "{}",
            notes[0]
        );
        assert!(!notes[0].contains("overlap"), "{}", notes[0]);
        // Less on a machine whose cores were all busy: that is the cause, said, and the
        // answer lines carry it.
        let busy = run(fewer, fewer.map(|t| t * 0.5), 1.98);
        let notes = fewer_clients_faster(&busy);
        assert!(
            notes[0].contains("the machine's 2 cores were busy (1.98"),
            "{}",
            notes[0]
        );
        assert!(
            crate::report::suite::answer(&busy)
                .iter()
                .any(|l| l.starts_with("more clients, less tps: server_cpus=0.5 clients=8")),
            "{:?}",
            crate::report::suite::answer(&busy)
        );
    }
}

//! The charts of the HTML report: which charts a suite's data calls for (bars of the
//! figure per cell, curves along a numeric axis, the connect phases' waterfall, CPU per
//! transaction, latency percentiles, a load run's series) and the report data each is
//! fed. Apart from the page's text (`html`), because choosing and feeding the charts is
//! a job of its own; drawing is `chart::*`'s.

use std::fmt::Write;

use crate::experiment::suite::Kind;
use crate::experiment::summary::SuiteResult;
use crate::proto::Phase;
use crate::report::chart::esc;
use crate::report::chart::{self, bars, lines, percentiles, series, waterfall};
use crate::report::data::RunReport;
use crate::report::markdown;
use crate::stats::compare::{Better, Verdict};

pub(super) fn charts(o: &mut String, r: &RunReport) {
    let res = &r.result;
    o.push_str(&bar_chart(r));
    if res.suite.kind == Kind::Load {
        let clients = |i: usize| -> Option<f64> {
            res.suite.cells[i]
                .axes
                .iter()
                .find(|(k, _)| k == "clients")
                .and_then(|(_, v)| v.parse().ok())
        };
        let others = |i: usize| -> String {
            res.suite.cells[i]
                .axes
                .iter()
                .filter(|(k, _)| k != "clients")
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let cpus = |i: usize| crate::report::size::cpus_of(res, i);
        let curve = |i: usize| crate::report::size::curve_name(res, i);
        let axes: [(XOf, ConfigOf, &str, &str); 2] = [
            (&clients, &others, "clients", "Against the number of clients"),
            (&cpus, &curve, "the server's cores", "Against the server's size"),
        ];
        for (x_of, config_of, noun, heading) in axes {
            if let Some(svgs) = axis_charts(res, x_of, config_of, noun) {
                let _ = writeln!(o, "<h3>{heading}</h3>");
                for svg in svgs {
                    o.push_str(&svg);
                }
                o.push_str(
                    r#"<p class="caption">One line per configuration; points are means over repetitions, bars their 95% confidence intervals.</p>"#,
                );
            }
        }
        if let Some(svg) = cpu_chart(res) {
            o.push_str("<h3>Where the CPU goes</h3>\n");
            o.push_str(&svg);
            o.push_str(
                r#"<p class="caption">CPU time (user + system) per transaction over each repetition's measured window: the client's worker threads, the pooler's process, the route's relay threads and the server's processes (the postmaster's tree, backends that exited included), each averaged over repetitions. A part that was not measured (a server connbench did not start) is absent, not zero.</p>"#,
            );
        }
    }
    if res.suite.kind == Kind::Connect {
        o.push_str("<h3>Where connection set-up time goes</h3>\n");
        o.push_str(&waterfall_chart(res));
        o.push_str(
            r#"<p class="caption">Each phase's p50 (upper bar) and p99 (lower bar) within a repetition, averaged over repetitions, stacked in the order the phases happen. Percentiles do not add up exactly: the stack of p99s is longer than any single connection's p99.</p>"#,
        );
    }
    o.push_str(&percentile_chart(r));
    if res.suite.kind == Kind::Load {
        let any = r.cells.iter().any(|c| c.series.is_some());
        if any {
            o.push_str("<h3>Over time, per configuration</h3>\n<p class=\"caption\">The intervals of the repetition whose main figure is the cell's median. Orange marks: intervals in which the client opened connections (pool lifetime expiry, reconnects); not drawn where every transaction connects. A red line marks the moment a faults cell struck.</p>\n");
            for (c, d) in res.cells.iter().zip(&r.cells) {
                match &d.series {
                    Some(s) => o.push_str(&series::render(
                        &format!("{} (repetition {})", c.name, s.repetition),
                        &s.intervals,
                        s.mark_connects,
                        s.fault.as_ref().map(|(k, at)| (k.as_str(), *at)),
                    )),
                    None => {
                        let _ = writeln!(
                            o,
                            r#"<p class="missing">{}: no interval series (no successful repetition)</p>"#,
                            esc(&c.name)
                        );
                    }
                }
            }
        }
    }
}

fn bar_chart(r: &RunReport) -> String {
    let res = &r.result;
    let fig = &res.suite.figure;
    let bars: Vec<bars::Bar> = res
        .cells
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let est = estimate(res, i, fig);
            let standing = match (c.baseline, c.comparison.as_ref().map(|c| c.verdict)) {
                (true, _) => bars::Standing::Baseline,
                (_, Some(Verdict::Faster)) => bars::Standing::Better,
                (_, Some(Verdict::Slower)) => bars::Standing::Worse,
                _ => bars::Standing::Undecided,
            };
            let note = if est.is_none() {
                let d = &r.cells[i];
                format!("no results: {} failed, {} never ran", d.failed, d.missing)
            } else if c.baseline {
                "(baseline)".to_string()
            } else {
                match &c.comparison {
                    Some(cmp) => cmp.phrase_versus(),
                    None => String::new(),
                }
            };
            bars::Bar {
                name: c.name.clone(),
                value: est.map(|e| e.0),
                ci: est.and_then(|e| e.1),
                standing,
                note,
            }
        })
        .collect();
    let better = match res.suite.better {
        Better::Higher => "higher is better",
        Better::Lower => "lower is better",
    };
    bars::render(
        &format!(
            "{} per configuration, mean and 95% CI ({better})",
            markdown::label(fig)
        ),
        &markdown::label(fig),
        &bars,
    )
}

/// Throughput and latency percentiles against clients, when the suite varies clients.
/// A cell's x on a chart, and the configuration (line) it belongs to.
type XOf<'a> = &'a dyn Fn(usize) -> Option<f64>;
type ConfigOf<'a> = &'a dyn Fn(usize) -> String;

/// tps and latency against a numeric x (`clients`, the server's cores), one line per
/// configuration (`config_of`: what the line's cells share); `None` when x has fewer than
/// two values.
fn axis_charts(r: &SuiteResult, x_of: XOf, config_of: ConfigOf, noun: &str) -> Option<Vec<String>> {
    let clients_of = x_of;
    let mut distinct: Vec<f64> = (0..r.cells.len()).filter_map(clients_of).collect();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    if distinct.len() < 2 {
        return None;
    }
    // A configuration is everything but x.
    let mut configs: Vec<(String, Vec<usize>)> = Vec::new();
    for i in 0..r.cells.len() {
        if clients_of(i).is_none() {
            continue;
        }
        let name = config_of(i);
        let name = if name.is_empty() { "all".to_string() } else { name };
        match configs.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push(i),
            None => configs.push((name, vec![i])),
        }
    }
    let line = |figure: &str| -> Vec<lines::Line> {
        configs
            .iter()
            .enumerate()
            .map(|(k, (name, cells))| {
                let mut points: Vec<lines::Point> = cells
                    .iter()
                    .filter_map(|&i| {
                        let (y, ci) = estimate(r, i, figure)?;
                        Some(lines::Point {
                            x: clients_of(i)?,
                            y,
                            ci,
                        })
                    })
                    .collect();
                points.sort_by(|a, b| a.x.total_cmp(&b.x));
                lines::Line {
                    name: name.clone(),
                    color: chart::color(k),
                    dash: chart::DASHES[(k / chart::PALETTE.len()) % chart::DASHES.len()],
                    points,
                }
            })
            .collect()
    };
    let switches = line("context_switches_per_transaction");
    let mut out = vec![lines::render(&lines::LineChart {
        title: &format!("Throughput against {noun} (mean ± 95% CI)"),
        x_label: noun,
        y_label: "transactions per second",
        lines: &line("tps"),
        log_y: false,
    })];
    for (fig, name) in [
        ("latency_p50_ms", "p50"),
        ("latency_p95_ms", "p95"),
        ("latency_p99_ms", "p99"),
    ] {
        let l = line(fig);
        let (lo, hi) = l
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.y))
            .fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
        out.push(lines::render(&lines::LineChart {
            title: &format!("Latency {name} against {noun} (mean of per-repetition {name} ± 95% CI)"),
            x_label: noun,
            y_label: &format!("latency {name}, ms"),
            lines: &l,
            log_y: lo > 0.0 && hi / lo > 30.0,
        }));
    }
    if switches.iter().any(|l| !l.points.is_empty()) {
        out.push(lines::render(&lines::LineChart {
            title: &format!("Context switches per transaction against {noun}, whole machine (mean ± 95% CI)"),
            x_label: noun,
            y_label: "context switches per transaction",
            lines: &switches,
            log_y: false,
        }));
    }
    Some(out)
}

fn waterfall_chart(r: &SuiteResult) -> String {
    let phases: Vec<&str> = Phase::ALL
        .iter()
        .map(|p| p.as_str())
        .filter(|p| {
            r.cells
                .iter()
                .any(|c| c.described.contains_key(&format!("{p}_p50_us")))
        })
        .collect();
    let rows: Vec<waterfall::Row> = r
        .cells
        .iter()
        .map(|c| {
            let seg = |q: &str| -> Vec<(String, f64)> {
                phases
                    .iter()
                    .filter_map(|p| {
                        let d = c.described.get(&format!("{p}_{q}_us"))?;
                        Some((p.to_string(), d.mean.point))
                    })
                    .collect()
            };
            let p50 = seg("p50");
            waterfall::Row {
                name: c.name.clone(),
                missing: p50.is_empty().then(|| {
                    if c.described.contains_key("total_mean_us") {
                        "no per-phase percentiles in this run (stored by an older connbench)".to_string()
                    } else {
                        "no results".to_string()
                    }
                }),
                bars: vec![("p50".into(), p50), ("p99".into(), seg("p99"))],
            }
        })
        .collect();
    waterfall::render(
        "Connection set-up phases per target, p50 and p99",
        "time since the first byte, µs (phases stacked)",
        &phases,
        &rows,
    )
}

/// CPU per transaction per cell, stacked by where it went (client, pooler, relays,
/// server), when the run measured more than the client's.
fn cpu_chart(r: &SuiteResult) -> Option<String> {
    const PARTS: [(&str, &str); 4] = [
        ("client", "cpu_per_transaction_us"),
        ("pooler", "pooler_cpu_per_transaction_us"),
        ("relays", "relay_cpu_per_transaction_us"),
        ("server", "server_cpu_per_transaction_us"),
    ];
    let measured_beyond_client = r
        .cells
        .iter()
        .any(|c| PARTS[1..].iter().any(|(_, k)| c.described.contains_key(*k)));
    if !measured_beyond_client {
        return None;
    }
    let rows: Vec<waterfall::Row> = r
        .cells
        .iter()
        .map(|c| {
            let parts: Vec<(String, f64)> = PARTS
                .iter()
                .filter_map(|(name, k)| Some((name.to_string(), c.described.get(*k)?.mean.point)))
                .collect();
            waterfall::Row {
                name: c.name.clone(),
                missing: parts.is_empty().then(|| "no results".to_string()),
                bars: vec![(String::new(), parts)],
            }
        })
        .collect();
    let names: Vec<&str> = PARTS.iter().map(|(n, _)| *n).collect();
    Some(waterfall::render(
        "CPU per transaction, by where it went (mean of repetitions)",
        "CPU per transaction, µs (stacked)",
        &names,
        &rows,
    ))
}

fn percentile_chart(r: &RunReport) -> String {
    let curves: Vec<percentiles::Curve> = r
        .result
        .cells
        .iter()
        .zip(&r.cells)
        .filter_map(|(c, d)| {
            let points = d.percentile_points();
            if points.is_empty() {
                return None;
            }
            Some(percentiles::Curve {
                name: c.name.clone(),
                points,
            })
        })
        .collect();
    if curves.is_empty() {
        return String::new();
    }
    let what = match r.result.suite.kind {
        Kind::Load => "Transaction latency",
        Kind::Connect => "Connect time",
    };
    format!(
        "<h3>{what} distribution</h3>\n{}<p class=\"caption\">All counted repetitions of a configuration merged (HdrHistogram, 3 significant digits). The tail is drawn as far as the sample count supports.</p>\n",
        percentiles::render(
            &format!("{what} by percentile, log scale"),
            &format!("{}, ms", what.to_lowercase()),
            &curves
        )
    )
}

/// The mean and 95% interval of a figure in a cell, when it has one.
fn estimate(r: &SuiteResult, cell: usize, figure: &str) -> Option<(f64, Option<(f64, f64)>)> {
    let d = r.cells[cell].described.get(figure)?;
    let ci =
        (d.mean.ci_low.is_finite() && d.mean.ci_high.is_finite()).then_some((d.mean.ci_low, d.mean.ci_high));
    Some((d.mean.point, ci))
}

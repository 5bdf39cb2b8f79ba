//! The suite report for the terminal, and as JSON: the question, the answer in one
//! sentence per cell with its verdict, a table of each cell's figure with its confidence
//! interval, and warnings (outliers, failed repetitions, spreads too wide to conclude).

use std::fmt::Write;

use crate::runner::SuiteResult;
use crate::stats::compare::Verdict;

fn fmt_value(figure: &str, v: f64) -> String {
    if figure == "tps" || v >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn unit(figure: &str) -> &'static str {
    if figure.ends_with("_ms") {
        "ms"
    } else if figure.ends_with("_us") {
        "µs"
    } else {
        ""
    }
}

/// The one-line answer: the comparisons, or why there is none.
pub fn answer(r: &SuiteResult) -> Vec<String> {
    let lines: Vec<String> = r
        .cells
        .iter()
        .filter_map(|c| c.comparison.as_ref().map(|cmp| cmp.sentence.clone()))
        .collect();
    if lines.is_empty() {
        vec!["no comparison: the suite has one cell, or no cell has results".to_string()]
    } else {
        lines
    }
}

/// The suite report as text (80 columns).
pub fn text(r: &SuiteResult, store_path: &str) -> String {
    let s = &r.suite;
    let mut o = String::new();
    let _ = writeln!(o, "{}: {}", s.name, s.question);
    let _ = writeln!(
        o,
        "  run {} · {} repetition{} per cell, {}{} · stored in {store_path}",
        r.run_id,
        s.repetitions,
        if s.repetitions == 1 { "" } else { "s" },
        match s.order {
            crate::suite::Order::Interleaved => "interleaved",
            crate::suite::Order::Sequential => "sequential",
        },
        if s.prewarm {
            ", pre-warm pass discarded"
        } else {
            ""
        },
    );
    if r.interrupted {
        let _ = writeln!(
            o,
            "  interrupted: the figures cover the repetitions finished before Ctrl-C"
        );
    }
    for line in answer(r) {
        let _ = writeln!(o, "  answer: {line}");
    }
    let fig = &s.figure;
    let width = name_width(r.cells.iter().map(|c| c.name.as_str()));
    let head = format!(
        "{fig} (mean ± 95% CI{})",
        match unit(fig) {
            "" => String::new(),
            u => format!(", {u}"),
        }
    );
    let vwidth = 30.max(head.chars().count());
    let _ = writeln!(
        o,
        "\n  {:<width$}  {:<vwidth$} {:>6}  {:>3}  vs baseline",
        "cell", head, "CV", "n"
    );
    for c in &r.cells {
        let (value, cv, n) = match c.described.get(fig) {
            Some(d) => {
                let half = d.mean.ci_high - d.mean.point;
                let v = if half.is_finite() {
                    format!("{} ± {}", fmt_value(fig, d.mean.point), fmt_value(fig, half))
                } else {
                    format!("{} (one value)", fmt_value(fig, d.mean.point))
                };
                (v, format!("{:.1}%", d.cv * 100.0), d.mean.n.to_string())
            }
            None => ("no results".to_string(), "-".to_string(), "0".to_string()),
        };
        let vs = if c.baseline {
            "baseline".to_string()
        } else {
            match &c.comparison {
                Some(cmp) => {
                    let word = match cmp.verdict {
                        Verdict::Faster => "faster",
                        Verdict::Slower => "slower",
                        Verdict::NoSignificantDifference => "no significant difference",
                        Verdict::Inconclusive => "inconclusive",
                    };
                    let p = cmp
                        .welch
                        .map(|w| format!(", {}", crate::stats::compare::format_p(Some(w))))
                        .unwrap_or_default();
                    format!("{:.2}x {word}{p}", cmp.ratio.point)
                }
                None => "-".to_string(),
            }
        };
        let _ = writeln!(
            o,
            "  {:<width$}  {:<vwidth$} {:>6}  {:>3}  {vs}",
            c.name, value, cv, n
        );
    }
    let mut warnings = Vec::new();
    for c in &r.cells {
        if let Some(d) = c.described.get(fig) {
            if !d.outliers.is_empty() {
                warnings.push(format!(
                    "{}: {} repetition{} far from the rest (MAD); kept, but look at the machine's load",
                    c.name,
                    d.outliers.len(),
                    if d.outliers.len() == 1 { "" } else { "s" }
                ));
            }
        }
        if !c.errors.is_empty() {
            warnings.push(format!(
                "{}: {} repetition(s) failed: {}",
                c.name,
                c.errors.len(),
                c.errors[0]
            ));
        }
    }
    for w in warnings {
        let _ = writeln!(o, "  warning: {w}");
    }
    o
}

/// The width of the cell-name column: the longest name, at least 4.
fn name_width<'a>(names: impl Iterator<Item = &'a str>) -> usize {
    names.map(|n| n.chars().count()).max().unwrap_or(4).max(4)
}

/// One row of `connbench compare`: a cell, its mean in each run, the verdict.
pub struct CompareRow {
    pub cell: String,
    pub mean_a: Option<f64>,
    pub mean_b: Option<f64>,
    pub verdict: String,
}

/// `connbench compare RUN_A RUN_B` as text.
pub fn compare_text(
    a: i64,
    b: i64,
    suite_a: &str,
    suite_b: &str,
    figure: &str,
    rows: &[CompareRow],
) -> String {
    let mut out = format!("run {a} ({suite_a}) vs run {b} ({suite_b}), on {figure}, cells matched by name\n");
    let width = name_width(rows.iter().map(|r| r.cell.as_str()));
    let _ = writeln!(
        out,
        "  {:<width$}  {:>14}  {:>14}  verdict",
        "cell",
        format!("run {a}"),
        format!("run {b}")
    );
    let mean = |v: Option<f64>| v.map(|x| fmt_value(figure, x)).unwrap_or_else(|| "-".to_string());
    for r in rows {
        let _ = writeln!(
            out,
            "  {:<width$}  {:>14}  {:>14}  {}",
            r.cell,
            mean(r.mean_a),
            mean(r.mean_b),
            r.verdict
        );
    }
    out
}

/// The suite report as JSON.
pub fn json(r: &SuiteResult) -> String {
    serde_json::to_string_pretty(&json_value(r)).expect("serialisable") + "\n"
}

/// The suite report as a JSON value.
pub fn json_value(r: &SuiteResult) -> serde_json::Value {
    let cells: Vec<serde_json::Value> = r
        .cells
        .iter()
        .map(|c| {
            serde_json::json!({
                "name": c.name,
                "baseline": c.baseline,
                "values": c.figures,
                "described": c.described,
                "comparison": c.comparison,
                "errors": c.errors,
            })
        })
        .collect();
    serde_json::json!({
        "connbench_version": env!("CARGO_PKG_VERSION"),
        "command": "run",
        "run_id": r.run_id,
        "suite": r.suite,
        "environment": r.environment,
        "interrupted": r.interrupted,
        "answer": answer(r),
        "cells": cells,
    })
}

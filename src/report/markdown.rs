//! Suite results as Markdown, ready to paste into a post: per suite, the question, the
//! answer, a table of configurations with confidence intervals and verdicts, and a line
//! saying how it was measured.

use std::fmt::Write;

use crate::experiment::summary::SuiteResult;
use crate::stats::compare::{format_p, Verdict};

/// A second column beside the suite's figure: a tail latency.
fn secondary(figure: &str, kind: crate::experiment::suite::Kind) -> &'static str {
    match kind {
        crate::experiment::suite::Kind::Connect => "total_p99_us",
        crate::experiment::suite::Kind::Load if figure == "latency_p95_ms" => "latency_p99_ms",
        crate::experiment::suite::Kind::Load => "latency_p95_ms",
    }
}

/// Human label of a figure key.
pub fn label(figure: &str) -> String {
    let (name, unit) = match figure.rsplit_once('_') {
        Some((n, u)) if u == "ms" || u == "us" => (n, if u == "us" { "µs" } else { "ms" }),
        _ => (figure, ""),
    };
    let name = name
        .replace("latency_", "latency ")
        .replace("total_", "connect ")
        .replace('_', " ");
    if unit.is_empty() {
        name
    } else {
        format!("{name}, {unit}")
    }
}

/// Decimals for a value of this size: 1 from 100 up, else 3.
fn decimals(v: f64) -> usize {
    if v.abs() >= 100.0 {
        1
    } else {
        3
    }
}

fn num(v: f64) -> String {
    format!("{v:.*}", decimals(v))
}

/// A mean and its interval's half-width, at the mean's precision.
fn pm(point: f64, half: f64) -> String {
    let d = decimals(point);
    format!("{point:.d$} ± {half:.d$}")
}

/// One configuration's row of the results table, as text.
pub struct Row {
    pub name: String,
    /// The suite's figure, mean ± CI half-width, or "no results".
    pub main: String,
    /// The tail latency beside it (mean over repetitions), or "-".
    pub tail: String,
    /// The ratio to the baseline with its verdict and p-value.
    pub vs: String,
    pub verdict: Option<Verdict>,
}

/// The labels of the table's two value columns: the suite's figure and a tail latency.
pub fn columns(r: &SuiteResult) -> (String, String) {
    (
        label(&r.suite.figure),
        label(secondary(&r.suite.figure, r.suite.kind)),
    )
}

/// The results table's rows, shared by Markdown and HTML.
pub fn rows(r: &SuiteResult) -> Vec<Row> {
    let fig = r.suite.figure.as_str();
    let second = secondary(fig, r.suite.kind);
    r.cells
        .iter()
        .map(|c| {
            let main = match c.described.get(fig) {
                Some(d) if (d.mean.ci_high - d.mean.point).is_finite() => {
                    pm(d.mean.point, d.mean.ci_high - d.mean.point)
                }
                Some(d) => num(d.mean.point),
                None => super::suite::no_value(c, fig),
            };
            let tail = c
                .described
                .get(second)
                .map(|d| num(d.mean.point))
                .unwrap_or_else(|| "-".into());
            let vs = match (&c.comparison, c.baseline) {
                (_, true) => "baseline".to_string(),
                (Some(cmp), _) => format!("{} ({})", cmp.phrase_versus(), format_p(cmp.p_value)),
                (None, _) => "-".to_string(),
            };
            Row {
                name: c.name.clone(),
                main,
                tail,
                vs,
                verdict: c.comparison.as_ref().map(|c| c.verdict),
            }
        })
        .collect()
}

/// A verdict in a word or three.
pub fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Faster => "faster",
        Verdict::Slower => "slower",
        Verdict::NoDifference => "the same within the noise threshold",
        Verdict::Inconclusive => "inconclusive",
    }
}

/// Markdown for one or more suite results.
pub fn markdown(results: &[SuiteResult]) -> String {
    let mut o = String::from("# connbench results\n");
    for r in results {
        let s = &r.suite;
        let (fig_label, second_label) = columns(r);
        let _ = writeln!(o, "\n## {}: {}\n", s.name, s.question);
        let answers = super::suite::answer(r);
        if answers.len() == 1 {
            let _ = writeln!(o, "**Answer.** {}\n", answers[0]);
        } else {
            let _ = writeln!(o, "**Answers.**\n");
            for a in &answers {
                let _ = writeln!(o, "- {a}");
            }
            o.push('\n');
        }
        // A failures column only when a cell had failed or stalled transactions.
        let failures = super::failures::column(r);
        let (fhead, fline) = match failures {
            Some(_) => (" failed · stalled |", "---|"),
            None => ("", ""),
        };
        let _ = writeln!(
            o,
            "| configuration | {} (mean ± 95% CI) | {} (mean) | vs baseline |{fhead}",
            fig_label, second_label
        );
        let _ = writeln!(o, "|---|---:|---:|---|{fline}");
        for (i, row) in rows(r).into_iter().enumerate() {
            let name = row.name.replace('|', "\\|");
            let f = failures
                .as_ref()
                .map_or(String::new(), |f| format!(" {} |", f[i]));
            let _ = writeln!(o, "| {name} | {} | {} | {} |{f}", row.main, row.tail, row.vs);
        }
        if failures.is_some() {
            let _ = writeln!(o, "\n_{}._", super::failures::LEGEND);
        }
        let predicted = super::suite::predicted(r);
        if !predicted.is_empty() {
            let _ = writeln!(
                o,
                "\n| configuration | RTT requested / achieved, ms | predicted, ms | measured, ms | measured / predicted |\n|---|---:|---:|---:|---:|"
            );
            for (c, p) in predicted {
                let [rtt, pred, meas, ratio] = super::suite::prediction_columns(p);
                let _ = writeln!(
                    o,
                    "| {} | {rtt} | {pred} | {meas} | {ratio} |",
                    c.name.replace('|', "\\|")
                );
            }
        }
        o.push_str(&super::size::markdown(r));
        let e = &r.environment;
        let _ = writeln!(
            o,
            "\n_Run {} · {} · {} · connbench {} · PostgreSQL {}{} · {} CPUs · {}_",
            r.run_id,
            super::suite::design(s),
            super::suite::method_line(r),
            e.connbench_version,
            e.server_version.as_deref().unwrap_or("unknown"),
            if e.server_settings.is_empty() {
                String::new()
            } else {
                format!(" ({})", e.server_settings.join(", "))
            },
            e.cpus,
            e.kernel
        );
        if r.interrupted {
            let _ = writeln!(
                o,
                "\n> Interrupted: the figures cover the repetitions finished before Ctrl-C."
            );
        }
        for c in r.cells.iter().filter(|c| !c.errors.is_empty()) {
            let _ = writeln!(
                o,
                "\n> {}: {} repetition(s) failed: {}",
                c.name,
                c.errors.len(),
                c.errors[0]
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A suite result from fixed values: what a run would have measured.
    pub(crate) fn fixture() -> SuiteResult {
        let text = r#"
name = "transport"
question = "Is a Unix socket faster than TCP?"
kind = "load"
duration = "10s"
repetitions = 5
baseline = "target=tcp"
[axes]
target = ["unix", "tcp", "pool, |odd| \"name\""]
"#;
        let suite = crate::experiment::suite::Suite::parse(text, "fixture").unwrap();
        use crate::experiment::summary::Outcome;
        let series = |tps: [f64; 5], p95: [f64; 5]| -> Vec<Outcome> {
            (0..5)
                .map(|i| Outcome {
                    round: i as u32 + 1,
                    result: Ok(BTreeMap::from([
                        ("tps".to_string(), tps[i]),
                        ("latency_p95_ms".to_string(), p95[i]),
                    ])),
                })
                .collect()
        };
        let outcomes = vec![
            series(
                [2650.0, 2641.5, 2670.2, 2655.9, 2660.3],
                [6.1, 6.2, 6.0, 6.3, 6.1],
            ),
            series(
                [2510.4, 2498.8, 2521.6, 2505.0, 2515.1],
                [6.6, 6.5, 6.7, 6.6, 6.8],
            ),
            (1..=5)
                .map(|round| Outcome {
                    round,
                    result: Err("load: no transaction completed".to_string()),
                })
                .collect(),
        ];
        let env = crate::experiment::store::Environment {
            connbench_version: "0.1.0".into(),
            server_version: Some("15.18".into()),
            pgbouncer_version: Some("PgBouncer 1.18.0".into()),
            cpus: 2,
            kernel: "Linux 6.1 x86_64".into(),
            tls: None,
            server_settings: vec!["synchronous_commit=off".into()],
        };
        crate::experiment::summary::summarize(&suite, 7, outcomes, false, env)
    }

    #[test]
    fn markdown_snapshot() {
        insta::assert_snapshot!(markdown(&[fixture()]));
    }

    #[test]
    fn csv_snapshot() {
        insta::assert_snapshot!(crate::report::csv::cells(&[fixture()]));
    }

    #[test]
    fn terminal_summary_snapshot() {
        insta::assert_snapshot!(crate::report::suite::text(&fixture(), "/data/results.sqlite"));
    }
}

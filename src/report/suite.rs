//! The suite report for the terminal, and as JSON: the question, the answer in one
//! sentence per cell with its verdict, a table of each cell's figure with its confidence
//! interval, and warnings (outliers, failed repetitions, spreads too wide to conclude).

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use super::style::{paint, visible_len, wrap, Paint};
use crate::experiment::store::Environment;
use crate::experiment::suite::Suite;
use crate::experiment::summary::{CellResult, SuiteResult};
use crate::stats::compare::{Comparison, Described, Verdict};
use crate::stats::model::DistancePrediction;

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
    // A size against the smallest says how it scaled; the limits of a quota close them.
    let sizes = super::size::answer_lines(r);
    let mut lines: Vec<String> = r
        .cells
        .iter()
        .enumerate()
        .filter_map(|(i, c)| match sizes.iter().find(|(cell, _)| *cell == i) {
            Some((_, line)) => Some(line.clone()),
            None => c.comparison.as_ref().map(|cmp| cmp.sentence.clone()),
        })
        .collect();
    // More clients with less throughput than fewer at a size: said with its causes.
    lines.extend(
        super::size::fewer_clients_faster(r)
            .into_iter()
            .map(|n| format!("more clients, less tps: {n}")),
    );
    if !sizes.is_empty() && super::size::by_quota(r) {
        lines.push(super::size::LIMITS.to_string());
    }
    if lines.is_empty() {
        lines.push("no comparison: the suite has one cell, or no cell has results".to_string());
    }
    // Failures can decide a comparison: each cell with some says what, beside it.
    lines.extend(super::failures::answer_lines(r));
    lines
}

/// How a suite repeats its cells: "3 repetitions per cell, interleaved, pre-warm pass
/// discarded", and for an adaptive run "at least 3 rounds, more for undecided answers
/// within 240 s (at most 30)".
pub fn design(s: &crate::experiment::suite::Suite) -> String {
    let rounds = match s.budget_s {
        None => format!(
            "{} repetition{} per cell",
            s.repetitions,
            if s.repetitions == 1 { "" } else { "s" }
        ),
        Some(b) => format!(
            "at least {} rounds, more for undecided answers within {b:.0} s (at most {})",
            s.repetitions, s.max_rounds
        ),
    };
    format!(
        "{rounds}, {}{}{}",
        match s.order {
            crate::experiment::suite::Order::Interleaved => "interleaved",
            crate::experiment::suite::Order::Sequential => "sequential",
        },
        match s.slice {
            Some(d) => format!(
                ", each round's cells in turns of {}",
                crate::units::format_duration(d)
            ),
            None => String::new(),
        },
        if s.prewarm {
            ", pre-warm pass discarded"
        } else {
            ""
        }
    )
}

/// The cells with a round-trip model prediction (load cells with a distance).
pub fn predicted(r: &SuiteResult) -> Vec<(&CellResult, &DistancePrediction)> {
    r.cells
        .iter()
        .filter_map(|c| c.prediction.as_ref().map(|p| (c, p)))
        .collect()
}

/// A prediction as table cells: RTT requested / achieved, predicted (with its terms),
/// measured, measured / predicted (with the term the model lacks, beyond 10%).
pub fn prediction_columns(p: &DistancePrediction) -> [String; 4] {
    [
        format!(
            "{} / {}",
            super::chart::fmt_num(p.rtt_requested_ms),
            p.rtt_achieved_ms
                .map(|a| format!("{a:.2}"))
                .unwrap_or_else(|| "-".into())
        ),
        format!("{:.2} ({})", p.predicted_ms, prediction_terms(p, "RTT")),
        format!("{:.2}", p.measured_ms),
        match &p.lacks {
            Some(l) => format!("{:.2}; lacks {l}", p.ratio),
            None => format!("{:.2}", p.ratio),
        },
    ]
}

/// "1.14 + 0.60 connecting + 1.75 × RTT": the prediction's terms, the RTT written as `rtt`.
fn prediction_terms(p: &DistancePrediction, rtt: &str) -> String {
    let connecting = match p.connect_local_ms {
        Some(c) if c != 0.0 => format!(" {} {:.2} connecting", if c < 0.0 { "−" } else { "+" }, c.abs()),
        _ => String::new(),
    };
    format!(
        "{:.2}{connecting} + {:.2} round trips × {rtt}",
        p.local_ms, p.round_trips_per_transaction
    )
}

/// A prediction as one sentence for the terminal: its terms, the measurement and, where
/// they differ, this cell's round trips against the cell without distance, and what the
/// model lacks.
pub fn prediction_line(name: &str, p: &DistancePrediction) -> String {
    let mut o = format!(
        "{name}: predicted {:.2} ms ({} ms), measured {:.2} ms ({:.2}× the prediction{})",
        p.predicted_ms,
        prediction_terms(p, &super::chart::fmt_num(p.rtt_requested_ms)),
        p.measured_ms,
        p.ratio,
        p.rtt_achieved_ms
            .map(|a| format!("; achieved RTT {a:.2} ms"))
            .unwrap_or_default()
    );
    if (p.round_trips_per_transaction - p.round_trips_per_transaction_local).abs() >= 0.005 {
        o.push_str(&format!(
            "; {:.2} round trips a transaction here against {:.2} without distance, as connects went \
             from {:.3} to {:.3} a transaction",
            p.round_trips_per_transaction,
            p.round_trips_per_transaction_local,
            p.connects_per_transaction_local,
            p.connects_per_transaction
        ));
    }
    if let Some(l) = &p.lacks {
        o.push_str(&format!("; the model lacks {l}"));
    }
    o
}

/// The width the terminal summaries are laid out for.
const COLUMNS: usize = 80;

/// How the comparisons were made, in one line: the method, the noise threshold, and why
/// the run stopped adding rounds.
pub fn method_line(r: &SuiteResult) -> String {
    let method = r
        .cells
        .iter()
        .find_map(|c| c.comparison.as_ref().map(|c| c.method.clone()))
        .unwrap_or_else(|| "no comparison".into());
    let fallbacks = r
        .cells
        .iter()
        .filter(|c| c.comparison.as_ref().is_some_and(|c| c.fallback.is_some()))
        .count();
    let retaken: f64 = r
        .cells
        .iter()
        .filter_map(|c| c.figures.get("steal_retakes"))
        .flatten()
        .sum();
    format!(
        "ratios A/B with intervals on the log scale ({method}{}); noise threshold {:.0}%; stopped: {}{}",
        if fallbacks > 0 {
            format!("; {fallbacks} unpaired for incomplete rounds")
        } else {
            String::new()
        },
        r.suite.noise_threshold * 100.0,
        r.stopped,
        if retaken > 0.0 {
            format!(
                "; {retaken:.0} repetition(s) retaken for hypervisor steal above {}%",
                crate::stats::load::STEAL_LIMIT_PERCENT
            )
        } else {
            String::new()
        }
    )
}

/// A comparison for the terminal: the verdict phrase, coloured by verdict, and its p.
fn vs_text(c: &CellResult) -> String {
    if c.baseline {
        return "baseline".to_string();
    }
    let Some(cmp) = &c.comparison else {
        return format!(
            "no comparison: {}",
            c.no_comparison.as_deref().unwrap_or("no results")
        );
    };
    let p = crate::stats::compare::format_p(cmp.p_value);
    let phrase = cmp.phrase_versus();
    let colored = match cmp.verdict {
        Verdict::Faster => paint(&phrase, Paint::Good),
        Verdict::Slower => paint(&phrase, Paint::Bad),
        Verdict::Inconclusive => paint(&phrase, Paint::Warn),
        Verdict::NoDifference => phrase,
    };
    format!("{colored}, {p}")
}

/// The suite report as text, laid out for 80 columns: a table row per cell, with the
/// comparison on the row when it fits and on a line of its own under it otherwise.
pub fn text(r: &SuiteResult, store_path: &str) -> String {
    let mut o = String::new();
    head(&mut o, r, store_path);
    figure_table(&mut o, r);
    other_tables(&mut o, r);
    warnings(&mut o, r);
    o
}

/// The suite's question, the run, the answer and the method.
fn head(o: &mut String, r: &SuiteResult, store_path: &str) {
    let s = &r.suite;
    o.push_str(&wrap(
        &format!("{}: {}", paint(&s.name, Paint::Bold), s.question),
        "",
        "  ",
        COLUMNS,
    ));
    o.push_str(&wrap(
        &format!("run {} · {} · stored in {store_path}", r.run_id, design(s)),
        "  ",
        "    ",
        COLUMNS,
    ));
    if r.interrupted {
        o.push_str(&wrap(
            &paint(
                "interrupted: the figures cover the repetitions finished before Ctrl-C",
                Paint::Warn,
            ),
            "  ",
            "    ",
            COLUMNS,
        ));
    }
    for line in answer(r) {
        o.push_str(&wrap(&line, "  answer: ", "          ", COLUMNS));
    }
    o.push_str(&wrap(&method_line(r), "  method: ", "          ", COLUMNS));
}

/// The suite's figure per cell, with its interval, spread and comparison.
fn figure_table(o: &mut String, r: &SuiteResult) {
    let fig = &r.suite.figure;
    let width = name_width(r.cells.iter().map(|c| c.name.as_str()));
    // The figure is named on a line of its own, so the value column stays narrow.
    let head = format!(
        "mean ± 95% CI{}",
        match unit(fig) {
            "" => String::new(),
            u => format!(", {u}"),
        }
    );
    let rows: Vec<(String, String, String, String)> = r
        .cells
        .iter()
        .map(|c| match c.described.get(fig) {
            Some(d) => {
                let half = d.mean.ci_high - d.mean.point;
                let v = if half.is_finite() {
                    format!(
                        "{} ± {} (median {})",
                        fmt_value(fig, d.mean.point),
                        fmt_value(fig, half),
                        fmt_value(fig, d.median)
                    )
                } else {
                    format!("{} (one value)", fmt_value(fig, d.mean.point))
                };
                (
                    v,
                    format!("{:.1}%", d.cv * 100.0),
                    c.rounds.to_string(),
                    vs_text(c),
                )
            }
            None => (
                no_value(c, fig),
                "-".to_string(),
                c.rounds.to_string(),
                vs_text(c),
            ),
        })
        .collect();
    let vwidth = rows
        .iter()
        .map(|r| r.0.chars().count())
        .max()
        .unwrap_or(0)
        .max(head.chars().count());
    // Comparisons share the row only if every row then fits; one layout per table.
    // One layout per table, the first that fits 80 columns: everything on the row; the
    // comparison under the row; or, for long cell names, the name on a line of its own.
    let row_width = 2 + width + 2 + vwidth + 1 + 6 + 2 + 3;
    let inline = rows.iter().all(|r| row_width + 2 + visible_len(&r.3) <= COLUMNS);
    let name_apart = row_width > COLUMNS;
    let name_col = if name_apart { 4 } else { width };
    let _ = writeln!(o, "\n  {fig} per cell, over the counted repetitions:");
    let _ = writeln!(
        o,
        "  {:<name_col$}  {:<vwidth$} {:>6}  {:>3}{}",
        "cell",
        head,
        "CV",
        "n",
        if inline { "  vs baseline" } else { "" }
    );
    for (c, (value, cv, n, vs)) in r.cells.iter().zip(&rows) {
        if inline {
            let _ = writeln!(
                o,
                "  {:<width$}  {:<vwidth$} {:>6}  {:>3}  {vs}",
                c.name, value, cv, n
            );
            failures_note(o, c);
            continue;
        }
        if name_apart {
            let _ = writeln!(o, "  {}", c.name);
            let _ = writeln!(o, "  {:<name_col$}  {:<vwidth$} {:>6}  {:>3}", "", value, cv, n);
        } else {
            let _ = writeln!(o, "  {:<width$}  {:<vwidth$} {:>6}  {:>3}", c.name, value, cv, n);
        }
        // A cell compared with its own reference (`versus`) names it in its phrase.
        let against = match c.comparison.as_ref().map(|cmp| cmp.versus.is_some()) {
            Some(true) => "      ",
            _ => "      vs baseline: ",
        };
        match vs.as_str() {
            "baseline" => o.push_str("      (the baseline)\n"),
            _ => o.push_str(&wrap(vs, against, "        ", COLUMNS)),
        }
        failures_note(o, c);
    }
}

/// Under a cell's row, its failed and stalled transactions, when it had some.
fn failures_note(o: &mut String, c: &CellResult) {
    if let Some(note) = super::failures::short(c) {
        o.push_str(&wrap(&paint(&note, Paint::Warn), "      ", "        ", COLUMNS));
    }
}

/// The faults', quotas' and sizes' tables, and the round-trip model's predictions.
fn other_tables(o: &mut String, r: &SuiteResult) {
    o.push_str(&fault_table(r));
    o.push_str(&quota_table(r));
    o.push_str(&super::size::text(r));
    let predicted = predicted(r);
    if !predicted.is_empty() {
        o.push('\n');
        o.push_str(&wrap(
            "round-trip model: local mean (+ local time of extra connects) + RTT × round trips \
             per transaction counted in the cell, one per connect for TCP's handshake included",
            "  ",
            "      ",
            COLUMNS,
        ));
        for (c, p) in predicted {
            o.push_str(&wrap(&prediction_line(&c.name, p), "  ", "      ", COLUMNS));
        }
    }
    trace_predictions(o, r);
}

/// For cells replaying a trace: the trace's own predictions (`connbench trace`'s) beside
/// what each cell measured.
fn trace_predictions(o: &mut String, r: &SuiteResult) {
    let rows: Vec<_> = r
        .cells
        .iter()
        .filter_map(|c| c.trace_prediction.as_ref().map(|p| (c, p)))
        .collect();
    if rows.is_empty() {
        return;
    }
    o.push('\n');
    o.push_str(&wrap(
        "the trace's predictions (connbench trace's round-trip model, from the recording alone): a \
         request's recorded mean response + the cell's added RTT × round trips a request, beside the \
         replay's measured mean response of a request",
        "  ",
        "      ",
        COLUMNS,
    ));
    for (c, p) in rows {
        o.push_str(&wrap(&trace_prediction_line(&c.name, p), "  ", "      ", COLUMNS));
    }
}

/// One trace cell's prediction as a sentence: the scenario, the request's prediction and
/// its terms, the measurement and their ratio, and the trace's transaction and connect.
pub fn trace_prediction_line(name: &str, p: &crate::experiment::replayed::TracePrediction) -> String {
    let ms = |v: Option<f64>| v.map_or("?".to_string(), |v| format!("{v:.2}"));
    let mut line = format!("{name} ({}): ", p.scenario);
    match (p.predicted_request_ms, &p.not_predicted) {
        (Some(pred), _) => line.push_str(&format!(
            "predicted {pred:.2} ms a request ({} + {} × {} round trips), measured {:.2} ms ({:.2}× the prediction)",
            ms(p.recorded_request_ms),
            super::chart::fmt_num(p.rtt_requested_ms),
            p.round_trips_per_request.map_or("?".to_string(), |k| format!("{k:.2}")),
            p.measured_request_ms,
            p.ratio.unwrap_or(f64::NAN)
        )),
        (None, why) => line.push_str(&format!(
            "measured {:.2} ms a request; not predicted: {}",
            p.measured_request_ms,
            why.as_deref().unwrap_or("no figure to start from")
        )),
    }
    if p.predicted_transaction_ms.is_some() || p.predicted_connect_ms.is_some() {
        // A pool's scenario has no connect a transaction: its connects come before the work.
        let connect = match p.predicted_connect_ms {
            None if p.scenario.ends_with("client-side pool") => {
                "no connect (the pool's are opened before the work)".to_string()
            }
            c => format!("a connect {} ms", ms(c)),
        };
        line.push_str(&format!(
            "; the trace predicts a transaction {} ms, {connect}",
            ms(p.predicted_transaction_ms)
        ));
    }
    line
}

/// Outliers and failed repetitions, each a warning.
fn warnings(o: &mut String, r: &SuiteResult) {
    let fig = &r.suite.figure;
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
        o.push_str(&wrap(
            &w,
            &format!("  {} ", paint("warning:", Paint::Warn)),
            "    ",
            COLUMNS,
        ));
    }
}

/// Per cell under a quota: the server's cores against it, and **server-bound** where it
/// sat at the quota (then the cell measures the server's size, not the path).
fn quota_table(r: &SuiteResult) -> String {
    let rows: Vec<(&CellResult, (f64, f64, bool))> = r
        .cells
        .iter()
        .filter_map(|c| Some((c, super::size::server_bound(c)?)))
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let width = name_width(rows.iter().map(|(c, _)| c.name.as_str()));
    let mut o = String::from("\n  the server's CPU against its quota (cores, mean of repetitions):\n");
    for (c, (used, quota, bound)) in rows {
        let _ = writeln!(
            o,
            "  {:<width$}  {used:.2} of {quota} ({:.0}%){}",
            c.name,
            used / quota * 100.0,
            if bound {
                format!("  {}", paint("server-bound", Paint::Bold))
            } else {
                String::new()
            }
        );
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
    serde_json::to_string_pretty(&RunJson::of(r)).expect("serialisable") + "\n"
}

/// What every run's JSON opens with (`run --json`, and each run of `report --json`).
#[derive(Serialize, schemars::JsonSchema)]
pub struct RunHead<'a> {
    pub connbench_version: &'static str,
    pub command: &'static str,
    pub run_id: i64,
    pub suite: &'a Suite,
    pub environment: &'a Environment,
    /// True when Ctrl-C ended the run; finished repetitions are in the store.
    pub interrupted: bool,
    /// Why the run stopped adding rounds, or that its rounds were fixed.
    pub stopped: &'a str,
    /// The comparison method in words.
    pub method: String,
    /// One sentence per compared cell.
    pub answer: Vec<String>,
}

/// One cell of a run's JSON.
#[derive(Serialize, schemars::JsonSchema)]
pub struct CellJson<'a> {
    pub name: &'a str,
    pub baseline: bool,
    /// Per figure, the value of each counted repetition.
    pub values: &'a BTreeMap<String, Vec<f64>>,
    pub described: &'a BTreeMap<String, Described>,
    /// Counted rounds the cell ran, failed ones included.
    pub rounds: usize,
    pub comparison: Option<&'a Comparison>,
    /// Why a non-baseline cell has no comparison.
    pub no_comparison: Option<&'a str>,
    pub prediction: Option<&'a DistancePrediction>,
    /// A cell replaying a trace (`workload = "trace:FILE"`): the trace's own prediction
    /// for the cell's path (`connbench trace`'s round-trip model) beside the measured
    /// mean response time of a request.
    pub trace_prediction: Option<&'a crate::experiment::replayed::TracePrediction>,
    /// Failed transactions (by code) and stalled ones over the successful repetitions,
    /// with their share of the cell's transaction time; null for a cell that is not a
    /// load cell or has no successful repetition.
    pub failures: Option<&'a crate::stats::failures::CellFailures>,
    /// Messages of failed repetitions (left out of the statistics).
    pub errors: &'a [String],
    /// The server's CPU against its quota (`server_cpus`, `--server-cpus`); null when
    /// there was no quota or the server's CPU was not measured (`server_bound_missing`
    /// says which).
    pub server_bound: Option<super::size::ServerBoundJson>,
    /// Why `server_bound` is null.
    pub server_bound_missing: Option<String>,
    /// The cell's place on a size curve (a `server_cpus` axis): its cores and, for a
    /// larger size, its ratio to the smallest with the interval and the share of linear.
    pub size: Option<super::size::SizeJson>,
}

/// `run --json`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct RunJson<'a> {
    #[serde(flatten)]
    pub head: RunHead<'a>,
    pub cells: Vec<CellJson<'a>>,
}

impl<'a> RunHead<'a> {
    pub fn of(r: &'a SuiteResult) -> RunHead<'a> {
        RunHead {
            connbench_version: env!("CARGO_PKG_VERSION"),
            command: "run",
            run_id: r.run_id,
            suite: &r.suite,
            environment: &r.environment,
            interrupted: r.interrupted,
            stopped: &r.stopped,
            method: method_line(r),
            answer: answer(r),
        }
    }
}

impl<'a> CellJson<'a> {
    /// Cell `c`, with its place on a size curve (`super::size::size_json`).
    pub fn of(c: &'a CellResult, size: Option<super::size::SizeJson>) -> CellJson<'a> {
        let (server_bound, server_bound_missing) = super::size::server_bound_json(c);
        CellJson {
            server_bound,
            server_bound_missing,
            size,
            name: &c.name,
            baseline: c.baseline,
            values: &c.figures,
            described: &c.described,
            rounds: c.rounds,
            comparison: c.comparison.as_ref(),
            no_comparison: c.no_comparison.as_deref(),
            prediction: c.prediction.as_ref(),
            trace_prediction: c.trace_prediction.as_ref(),
            failures: c.failures.as_ref(),
            errors: &c.errors,
        }
    }
}

impl<'a> RunJson<'a> {
    pub fn of(r: &'a SuiteResult) -> RunJson<'a> {
        RunJson {
            head: RunHead::of(r),
            cells: r
                .cells
                .iter()
                .zip(super::size::size_json(r))
                .map(|(c, size)| CellJson::of(c, size))
                .collect(),
        }
    }
}

/// What a cell without a value of `fig` says: no results at all, or results in which
/// that figure was not measured, and why where the figure says so.
pub fn no_value(c: &crate::experiment::summary::CellResult, fig: &str) -> String {
    if c.figures.values().all(|v| v.is_empty()) {
        return "no results".to_string();
    }
    match fig {
        "recovery_s" => "never recovered: throughput had not settled when the run ended".to_string(),
        _ => format!("{fig} not measured in any repetition"),
    }
}

/// For a faults suite: what each strike cost, per cell, as means over the counted
/// repetitions (every figure, not only the suite's).
fn fault_table(r: &SuiteResult) -> String {
    if !r.cells.iter().any(|c| c.figures.contains_key("longest_stall_s")) {
        return String::new();
    }
    let mean = |c: &crate::experiment::summary::CellResult, k: &str, p: usize| match c.figures.get(k) {
        Some(v) if !v.is_empty() => format!("{:.p$}", v.iter().sum::<f64>() / v.len() as f64),
        _ => "-".to_string(),
    };
    let mut o = String::from(
        "\n  what each strike cost (means over the counted repetitions; 100 ms resolution):\n  \
         failed    failed transactions\n  \
         stall     the longest time in which none completed\n  \
         recovery  until throughput was back within 10% of before (-: not before the\n  \
         \x20         run ended; k of n: only k repetitions did)\n  \
         storm     the most connections opened in one second after the strike\n  \
         worst     the slowest transaction\n",
    );
    let _ = writeln!(
        o,
        "  {:>8} {:>8} {:>12} {:>8} {:>9}  cell",
        "failed", "stall s", "recovery s", "storm/s", "worst ms"
    );
    for c in &r.cells {
        // Recovery is missing from a repetition that never recovered: say how many did.
        let (k, n) = (
            c.figures.get("recovery_s").map_or(0, Vec::len),
            c.figures.get("transactions").map_or(0, Vec::len),
        );
        let recovery = match (k, n) {
            (0, _) => "-".to_string(),
            (k, n) if k < n => format!("{} ({k} of {n})", mean(c, "recovery_s", 2)),
            _ => mean(c, "recovery_s", 2),
        };
        let _ = writeln!(
            o,
            "  {:>8} {:>8} {:>12} {:>8} {:>9}  {}",
            mean(c, "failed_transactions", 1),
            mean(c, "longest_stall_s", 2),
            recovery,
            mean(c, "reconnects_per_s_peak", 0),
            mean(c, "latency_max_ms", 1),
            c.name
        );
    }
    o
}

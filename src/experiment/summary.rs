//! Summaries across repetitions: each cell's figures described, each cell against its
//! reference decided together as one family (Holm), the round-trip model beside a
//! distance's measured figure, and why the run stopped adding rounds. A stored run is
//! summarized by the same code (`report::data`), so its report reads as the live one.

use std::collections::BTreeMap;

use crate::experiment::failure::Failure;
use crate::experiment::store::Environment;
use crate::experiment::suite::{Kind, Suite};
use crate::stats::compare::{self, Candidate, Comparison, Described, Rule, Verdict};

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
    /// For a cell replaying a trace: the trace's own prediction for its path beside the
    /// measured figure.
    pub trace_prediction: Option<super::replayed::TracePrediction>,
    /// A load cell's failed and stalled transactions over its successful repetitions.
    pub failures: Option<crate::stats::failures::CellFailures>,
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
pub(super) fn settled(c: &Comparison, precision: Option<f64>) -> bool {
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
            let trace_prediction = super::replayed::prediction(&cell.settings, |f| {
                let v = figures.get(f).filter(|v| !v.is_empty())?;
                Some(v.iter().sum::<f64>() / v.len() as f64)
            });
            CellResult {
                name: cell.name.clone(),
                baseline: i == suite.baseline,
                rounds: outs.len(),
                figures,
                described,
                comparison: None,
                no_comparison,
                prediction: None,
                trace_prediction,
                failures: crate::stats::failures::of_repetitions(
                    outs.iter().filter_map(|o| o.result.as_ref().ok()),
                ),
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

/// One repetition's figures, by name.
pub type Figures = BTreeMap<String, f64>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::failure::NOT_MEASURED;
    use std::time::Duration;

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
}

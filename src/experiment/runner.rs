//! Running a suite: the loop over the plan's steps, each repetition saved to the store
//! the moment it ends, retakes of a repetition the hypervisor disturbed, and the rules
//! that stop an adaptive run (budget, looks, cap); then the statistics across
//! repetitions (`summary`).
//!
//! Everything a step needs is resolved before the loop (`context`); measuring a step is
//! `cells`' job. A repetition that fails is saved with its error and left out of the
//! statistics. The pre-warm pass is saved (marked) and never counted.

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use anyhow::{Context as _, Result};

use super::cells::{measure_group, Measured};
pub use super::context::{check, Context};
use super::context::{resolve, Resolved};
use super::summary::settled;
pub use super::summary::{rule, summarize, CellResult, Figures, Outcome, Outcomes, SuiteResult};
pub use crate::experiment::failure::Failure;
use crate::experiment::store::{self, Environment, Repetition, Status};
use crate::experiment::suite::{Kind, Step, Suite};
use crate::host::{MachineCpu, MachineUse};
use crate::options::{self, NetPath};
use crate::route::Verified;
use crate::stats::load::STEAL_LIMIT_PERCENT;

/// Where a run stands: what its counted steps gave, what is left to measure, and the
/// times that tell a budget what another round costs.
struct Rounds {
    /// When the run began: a budget counts from here (set-up spends it too).
    started: Instant,
    outcomes: Outcomes,
    /// Seconds each cell's counted steps took, to estimate what another round costs.
    step_s: Vec<Vec<f64>>,
    todo: VecDeque<Step>,
    /// Steps measured so far, for the progress line.
    done: usize,
    /// The last round planned (or added).
    round: u32,
    /// The first round's steps (the pre-warm pass, or round 1): their time fixes how many
    /// looks an adaptive run's budget has room for.
    first_round: u32,
    first_s: Vec<Option<f64>>,
    /// The round whose budget check was made last.
    begun: u32,
    interrupted: bool,
}

impl Rounds {
    fn new(suite: &Suite, started: Instant) -> Rounds {
        Rounds {
            started,
            outcomes: vec![Vec::new(); suite.cells.len()],
            step_s: vec![Vec::new(); suite.cells.len()],
            todo: suite.plan().into(),
            done: 0,
            round: suite.repetitions,
            first_round: if suite.prewarm { 0 } else { 1 },
            first_s: vec![None; suite.cells.len()],
            begun: 0,
            interrupted: false,
        }
    }
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
    let mut resolved = resolve(suite, ctx).await?;
    let result = run_resolved(suite, ctx, &mut resolved, started, &mut progress).await;
    // Whatever ended the run (its end, Ctrl-C, an error): the databases its trace cells
    // restored are put back as it found them and connbench's copies dropped.
    resolved.restores.finish().await;
    result
}

/// The loop over the plan, once everything is resolved.
async fn run_resolved(
    suite: &Suite,
    ctx: &Context,
    resolved: &mut Resolved,
    started: Instant,
    progress: &mut impl FnMut(usize, usize, &str),
) -> Result<SuiteResult> {
    // An adaptive run fixes its looks after its first round (below).
    let mut suite = suite.clone();
    let suite = &mut suite;
    let environment = resolved.environment.clone();
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
    let mut st = Rounds::new(suite, started);
    loop {
        let Some(step) = st.todo.pop_front() else {
            if add_rounds(suite, &mut st, run_id, &environment) {
                continue;
            }
            break;
        };
        if *ctx.stop.borrow() {
            st.interrupted = true;
            break;
        }
        if cut_by_budget(suite, &mut st, &step) {
            continue;
        }
        let group = form_group(suite, step, &mut st.todo);
        let names: Vec<&str> = group.iter().map(|s| suite.cells[s.cell].name.as_str()).collect();
        // The server's size for this step (the cells of a group share it).
        let quota = ctx
            .size_server(&suite.cells[step.cell].settings)
            .await
            .with_context(|| format!("suite {}, cell {}", suite.name, names.join(", ")))
            .map_err(failed)?;
        progress(st.done, st.done + st.todo.len() + group.len(), &names.join(", "));
        st.done += group.len();
        let attempt = measure_with_retakes(suite, &group, resolved, ctx, &names)
            .await
            .with_context(|| format!("suite {}, cell {}", suite.name, names.join(", ")))
            .map_err(failed)?;
        // Ctrl-C during a step: the step was cut short, so it is not saved as a result.
        if *ctx.stop.borrow() {
            st.interrupted = true;
            break;
        }
        let taken = Taken {
            run_id,
            quota,
            cell_rtt: &resolved.cell_rtt,
        };
        save_group(ctx, &taken, &mut st, &group, attempt, &failed)?;
        fix_looks(suite, &st, run_id, ctx).map_err(failed)?;
    }
    let result = summarize(suite, run_id, st.outcomes, st.interrupted, environment);
    let (status, error) = match &result.failed {
        _ if st.interrupted => (Status::Interrupted, None),
        Some(f) => (Status::Failed, Some(f.sentence())),
        None => (Status::Done, None),
    };
    ctx.store.finish_run(run_id, status, error.as_deref())?;
    Ok(result)
}

/// The planned rounds are done: an adaptive run adds a round for the answers still
/// undecided (with the baseline, so the round pairs), while the budget allows one and the
/// cap is not reached. False when the run ends here.
fn add_rounds(suite: &Suite, st: &mut Rounds, run_id: i64, environment: &Environment) -> bool {
    let Some(budget) = suite.budget_s else {
        return false;
    };
    if st.round >= suite.max_rounds {
        return false;
    }
    let current = summarize(suite, run_id, st.outcomes.clone(), false, environment.clone());
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
        return false;
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
    let batch = suite.next_batch(st.round).min(suite.max_rounds - st.round);
    if suite
        .looks
        .is_some_and(|cap| suite.look_at(st.round + batch) > cap)
    {
        return false;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let estimate: f64 = batch as f64 * cells.iter().map(|&c| mean(&st.step_s[c])).sum::<f64>();
    if st.started.elapsed().as_secs_f64() + estimate > budget {
        return false;
    }
    for _ in 0..batch {
        st.round += 1;
        st.todo.extend(suite.round(st.round, &cells));
    }
    true
}

/// A budget bounds the planned rounds too, beyond the fewest an answer is read from: a
/// planned round that would not fit is not begun, nor any after it (true: the rest of
/// the plan is dropped). Time alone decides, never an answer, so the looks' shares of α
/// stand.
fn cut_by_budget(suite: &Suite, st: &mut Rounds, step: &Step) -> bool {
    if let (Some(budget), true) = (suite.budget_s, step.repetition != st.begun) {
        st.begun = step.repetition;
        let planned = (MIN_PLANNED_ROUNDS + 1..=suite.repetitions).contains(&step.repetition);
        let left_s = budget - st.started.elapsed().as_secs_f64();
        if planned && !round_fits(step, &st.todo, &st.step_s, left_s) {
            st.todo.clear();
            st.round = step.repetition - 1;
            return true;
        }
    }
    false
}

/// The steps measured together with `step`, taken from the front of `todo`.
fn form_group(suite: &Suite, step: Step, todo: &mut VecDeque<Step>) -> Vec<Step> {
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
    group
}

/// One measurement of a group, as kept: when it began, its results, what the machine did
/// meanwhile, and how often it was retaken.
struct Attempt {
    started_at: String,
    t0: Instant,
    results: Vec<Result<Measured>>,
    machine: Option<MachineUse>,
    retakes: u32,
}

/// Measures a group. A repetition the hypervisor disturbed (steal above the limit:
/// another tenant ran on our cores) is measured again in place, so the round still pairs;
/// after MAX_RETAKES the last attempt is kept and its steal stays in its figures. Each
/// attempt of a trace cell that restores starts from the copy of its database, put back
/// before its clock starts (an error here is the run's: no repetition starts from
/// something else).
async fn measure_with_retakes(
    suite: &Suite,
    group: &[Step],
    resolved: &mut Resolved,
    ctx: &Context,
    names: &[&str],
) -> Result<Attempt> {
    let mut retakes = 0u32;
    let endpoints = &resolved.endpoints;
    loop {
        resolved.restores.before(group.iter().map(|s| s.cell)).await?;
        let started_at = store::now_utc();
        let t0 = Instant::now();
        let before = MachineCpu::read();
        let results = measure_group(suite, group, endpoints, ctx).await;
        let machine = before.zip(MachineCpu::read()).and_then(|(a, b)| b.since(&a));
        match machine {
            Some(m) if retake(&m, retakes, group[0].is_prewarm()) && !*ctx.stop.borrow() => {
                retakes += 1;
                eprintln!(
                    "note: {}: round {} retaken: the hypervisor took {:.0}% of the CPU (steal) while it ran",
                    names.join(", "),
                    group[0].repetition,
                    m.steal_percent
                );
            }
            _ => {
                return Ok(Attempt {
                    started_at,
                    t0,
                    results,
                    machine,
                    retakes,
                })
            }
        }
    }
}

/// What every repetition of a step is saved with besides its own figures.
struct Taken<'a> {
    run_id: i64,
    /// The server's CPU quota the step ran under.
    quota: Option<f64>,
    cell_rtt: &'a [Option<Verified>],
}

/// Saves each repetition of a measured group the moment it ends, and keeps the counted
/// ones' figures and times.
fn save_group(
    ctx: &Context,
    taken: &Taken,
    st: &mut Rounds,
    group: &[Step],
    attempt: Attempt,
    failed: &impl Fn(anyhow::Error) -> anyhow::Error,
) -> Result<()> {
    let Attempt {
        started_at,
        t0,
        results,
        machine,
        retakes,
    } = attempt;
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
            if let Some(q) = taken.quota {
                figures.insert("server_quota_cores".into(), q);
            }
        }
        if let (Some(v), None) = (taken.cell_rtt[step.cell], &error) {
            figures.insert("rtt_requested_ms".into(), v.requested_ms);
            figures.insert("rtt_achieved_ms".into(), v.achieved_ms);
        }
        ctx.store
            .save_repetition(
                taken.run_id,
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
        if step.repetition == st.first_round {
            st.first_s[step.cell] = Some(elapsed_s);
        }
        if !step.is_prewarm() {
            st.step_s[step.cell].push(elapsed_s);
            st.outcomes[step.cell].push(Outcome {
                round: step.repetition,
                result: match error {
                    Some(e) => Err(e),
                    None => Ok(figures),
                },
            });
        }
    }
    Ok(())
}

/// An adaptive run without a cap on its looks fixes it once every cell's first step has
/// a time: the looks the rest of the budget has room for.
fn fix_looks(suite: &mut Suite, st: &Rounds, run_id: i64, ctx: &Context) -> Result<()> {
    let (Some(budget), None) = (suite.budget_s, suite.looks) else {
        return Ok(());
    };
    let Some(times) = st.first_s.iter().copied().collect::<Option<Vec<f64>>>() else {
        return Ok(());
    };
    let others = times
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != suite.baseline)
        .map(|(_, &t)| t);
    // The cheapest continuation: the baseline and the quickest other cell.
    let cheapest = others.fold(f64::INFINITY, f64::min);
    let pair_s = times[suite.baseline] + if cheapest.is_finite() { cheapest } else { 0.0 };
    let rounds_left = suite.repetitions.saturating_sub(st.first_round);
    let left_s = budget - st.started.elapsed().as_secs_f64();
    suite.looks = Some(suite.planned_looks(left_s, rounds_left, times.iter().sum(), pair_s));
    ctx.store.update_suite(run_id, suite)
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

/// Whether a connect cell can share an interleaved measurement: its client runs on the
/// host (a namespaced client runs on a thread of its own).
fn interleavable(suite: &Suite, step: Step) -> bool {
    matches!(
        options::netpath(&suite.cells[step.cell].settings),
        Ok(NetPath::Host)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

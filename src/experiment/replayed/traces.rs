//! The traces a run's cells replay, each read once (its sessions, statements and
//! profile, from one pass): the pre-flight on each target a trace is replayed on, before
//! anything runs, and the notes and warnings a trace gives (a repetition capped by the
//! suite's duration, a warm-up not used, a trace that writes).

use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

use anyhow::{bail, Context as _, Result};

use super::check::trace_of;
use crate::experiment::suite::Suite;
use crate::options::cell::Settings;
use crate::proto::Endpoint;
use crate::replay::schedule::SessionPlan;
use crate::replay::{self, Schedule};
use connbench_trace::profile::Profile;

/// A trace read once for the whole run: its sessions to replay, what the pre-flight
/// checks, its profile, and the figures the predictions start from.
pub struct Trace {
    pub path: String,
    /// The schedule's statements and engine, its sessions taken out (each repetition
    /// replays a copy of `sessions`).
    schedule: Schedule,
    pub(super) sessions: Vec<SessionPlan>,
    pub profile: Profile,
    /// The recorder's mean response time of a request, ms.
    pub(super) recorded_request_ms: Option<f64>,
    /// Round trips a request waits on (pipelined requests share one).
    pub(super) round_trips_per_request: Option<f64>,
    /// Recorded statements that change the database, first words (a few).
    pub writes: Vec<String>,
}

impl Trace {
    /// The recorded transactions' shape ids, as the replay's tally indexes them.
    pub(super) fn shape_ids(&self) -> &[String] {
        &self.schedule.shapes
    }

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
/// Says once per trace that writes how its repetitions start: each from a copy of the
/// database taken before the first (a cell for which `restored` names that database), or,
/// warned, on the state the previous repetitions left.
pub async fn prepare(
    suite: &Suite,
    traces: &Traces,
    direct_endpoint: impl Fn(&Settings) -> Result<Endpoint>,
    restored: impl Fn(usize) -> Option<String>,
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
            let (kept, not): (Vec<usize>, Vec<usize>) = (0..suite.cells.len())
                .filter(|&i| trace_of(&suite.cells[i].settings) == Some(t.path.as_str()))
                .partition(|&i| restored(i).is_some());
            let mut places: Vec<String> = kept.iter().filter_map(|&i| restored(i)).collect();
            places.dedup();
            if !places.is_empty() {
                eprintln!(
                    "note: trace {} writes ({}, ...): each repetition starts from a copy of {} taken before \
                     the first, put back before each repetition outside its measured time (restore = \
                     \"template\")",
                    t.path,
                    t.writes.join("; "),
                    places.join(", ")
                );
            }
            if !not.is_empty() {
                let cells: Vec<&str> = not.iter().map(|&i| suite.cells[i].name.as_str()).collect();
                eprintln!(
                    "warning: trace {} writes ({}, ...): each repetition writes it again, on what the \
                     repetitions before it left; nothing is restored between them{}, so run it on a copy, \
                     or set restore = \"template\" (run --restore template) to start each repetition \
                     from a copy of the database taken before the first",
                    t.path,
                    t.writes.join("; "),
                    match kept.is_empty() {
                        true => String::new(),
                        false => format!(" in cells {}", cells.join(", ")),
                    }
                );
            }
        }
    }
    Ok(())
}

/// The trace `file`, read at its first use.
pub(super) fn trace_for(traces: &Traces, file: &str) -> Result<Rc<Trace>> {
    if let Some(t) = traces.borrow().get(file) {
        return Ok(t.clone());
    }
    let t = Rc::new(Trace::read(file)?);
    traces.borrow_mut().insert(file.to_string(), t.clone());
    Ok(t)
}

/// The traces a run's cells replay, by file, each read once.
pub type Traces = std::cell::RefCell<BTreeMap<String, Rc<Trace>>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_writes_by_its_first_word() {
        assert!(writes("  insert into t values (1)") && !writes("SELECT 1 FOR UPDATE"));
    }
}

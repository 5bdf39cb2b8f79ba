//! The suite rows of the store: a run, its cells and its repetitions, written as each
//! repetition ends, named, finished, listed and read back for reports.

use anyhow::{bail, Context, Result};

use super::{now_utc, redact_targets, Environment, Status, Store};
use crate::experiment::db::Val;

/// A cell as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredCell {
    pub cell: usize,
    pub name: String,
    pub baseline: bool,
    pub settings: serde_json::Value,
}

/// A repetition as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Repetition {
    pub cell: usize,
    pub repetition: u32,
    pub prewarm: bool,
    pub started_at: String,
    pub elapsed_s: f64,
    pub error: Option<String>,
    pub summary: serde_json::Value,
    /// HdrHistogram V2 (deflate) serialisation of the latency histogram, in ns.
    pub latency_histogram: Option<Vec<u8>>,
    /// What else the repetition measured, for charts (`{"series": [...]}` for load).
    pub detail: Option<serde_json::Value>,
}

/// A run's row.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    pub id: i64,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub suite: String,
    pub question: String,
    pub kind: String,
    pub status: String,
    pub repetitions_saved: i64,
    /// Its name (a many-machine run's `--run`).
    pub name: Option<String>,
    /// The number of workers of a many-machine run.
    pub workers: Option<i64>,
    /// Why a failed run failed: its first error.
    pub error: Option<String>,
}

/// A run with everything saved for it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRun {
    pub run: RunRow,
    /// The suite as it ran (targets redacted).
    pub suite: serde_json::Value,
    pub environment: serde_json::Value,
    pub cells: Vec<StoredCell>,
    pub repetitions: Vec<Repetition>,
}

impl Store {
    /// Records a new run and its cells; returns the run's id.
    pub fn begin_run(&self, suite: &crate::experiment::suite::Suite, env: &Environment) -> Result<i64> {
        let suite_json = stored_suite(suite)?;
        self.transaction(|| {
            let run = self
                .db
                .query_one(
                    "INSERT INTO runs (started_at, suite, question, kind, status, suite_json, environment_json) \
                     VALUES ($1, $2, $3, $4, 'running', $5, $6) RETURNING id",
                    &[
                        now_utc().into(),
                        suite.name.as_str().into(),
                        suite.question.as_str().into(),
                        serde_json::to_value(suite.kind)?.as_str().unwrap_or("?").into(),
                        suite_json.into(),
                        serde_json::to_string(env)?.into(),
                    ],
                )?
                .and_then(|r| r[0].int())
                .context("the store returned no run id")?;
            for (i, cell) in suite.cells.iter().enumerate() {
                let mut settings = serde_json::to_value(&cell.settings)?;
                redact_targets(&mut settings);
                self.db.exec(
                    "INSERT INTO cells (run_id, cell, name, baseline, settings_json) VALUES ($1, $2, $3, $4, $5)",
                    &[
                        run.into(),
                        (i as i64).into(),
                        cell.name.as_str().into(),
                        (i == suite.baseline).into(),
                        settings.to_string().into(),
                    ],
                )?;
            }
            Ok(run)
        })
    }

    /// Gives a run its name (`run --run NAME`); the store's unique index refuses a name
    /// taken since the caller checked.
    pub fn name_run(&self, run: i64, name: &str) -> Result<()> {
        self.db
            .exec(
                "UPDATE runs SET name = $1 WHERE id = $2",
                &[name.into(), run.into()],
            )
            .with_context(|| format!("naming run {run} {name:?} in {}", self.location))?;
        Ok(())
    }

    /// Replaces a run's stored suite: an adaptive run fixes its looks after its first
    /// round, and reports recompute its answers from the stored suite.
    pub fn update_suite(&self, run: i64, suite: &crate::experiment::suite::Suite) -> Result<()> {
        self.db.exec(
            "UPDATE runs SET suite_json = $1 WHERE id = $2",
            &[stored_suite(suite)?.into(), run.into()],
        )?;
        Ok(())
    }

    /// Saves one repetition at once (its own transaction).
    pub fn save_repetition(&self, run: i64, r: &Repetition) -> Result<()> {
        self.db
            .exec(
                "INSERT INTO repetitions \
                 (run_id, cell, repetition, prewarm, started_at, elapsed_s, ok, error, summary_json, latency_histogram, detail_json) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
                 ON CONFLICT (run_id, cell, repetition) DO UPDATE SET prewarm = excluded.prewarm, \
                 started_at = excluded.started_at, elapsed_s = excluded.elapsed_s, ok = excluded.ok, \
                 error = excluded.error, summary_json = excluded.summary_json, \
                 latency_histogram = excluded.latency_histogram, detail_json = excluded.detail_json",
                &[
                    run.into(),
                    (r.cell as i64).into(),
                    i64::from(r.repetition).into(),
                    r.prewarm.into(),
                    r.started_at.as_str().into(),
                    r.elapsed_s.into(),
                    r.error.is_none().into(),
                    r.error.clone().into(),
                    r.summary.to_string().into(),
                    r.latency_histogram.clone().into(),
                    r.detail.as_ref().map(|d| d.to_string()).into(),
                ],
            )
            .with_context(|| {
                format!(
                    "cannot save repetition {} of cell {} to {}",
                    r.repetition, r.cell, self.location
                )
            })?;
        Ok(())
    }

    /// Ends a run with its status and, for a failed one, why (its first error).
    pub fn finish_run(&self, run: i64, status: Status, error: Option<&str>) -> Result<()> {
        self.db.exec(
            "UPDATE runs SET status = $1, finished_at = $2, error = $3 WHERE id = $4",
            &[
                status.as_str().into(),
                now_utc().into(),
                error.map(str::to_string).into(),
                run.into(),
            ],
        )?;
        Ok(())
    }

    /// Frees the name of a failed run for the run that repeats it: the failed run keeps
    /// its results under `NAME~failed-ID` (a name `--run` cannot give, so it takes none
    /// from the user). Returns the failed run's id and new name; `None` when no failed
    /// run holds `name`.
    pub fn free_failed_name(&self, name: &str) -> Result<Option<(i64, String)>> {
        let Some(id) = self
            .db
            .query_one(
                "SELECT id FROM runs WHERE name = $1 AND status = 'failed'",
                &[name.into()],
            )?
            .and_then(|r| r[0].int())
        else {
            return Ok(None);
        };
        let kept = format!("{name}~failed-{id}");
        self.db
            .exec(
                "UPDATE runs SET name = $1 WHERE id = $2 AND status = 'failed'",
                &[kept.as_str().into(), id.into()],
            )
            .with_context(|| format!("renaming failed run {id} to {kept:?} in {}", self.location))?;
        Ok(Some((id, kept)))
    }

    fn run_rows(&self, filter: &str, params: &[Val]) -> Result<Vec<RunRow>> {
        let rows = self.db.query(
            &format!(
                "SELECT r.id, r.started_at, r.finished_at, r.suite, r.question, r.kind, r.status, \
                        (SELECT count(*) FROM repetitions p WHERE p.run_id = r.id AND p.prewarm = 0), \
                        r.name, r.workers, r.error \
                 FROM runs r {filter} ORDER BY r.id DESC"
            ),
            params,
        )?;
        rows.into_iter()
            .map(|r| {
                Ok(RunRow {
                    id: r[0].int().context("run id")?,
                    started_at: r[1].text().unwrap_or_default(),
                    finished_at: r[2].text(),
                    suite: r[3].text().unwrap_or_default(),
                    question: r[4].text().unwrap_or_default(),
                    kind: r[5].text().unwrap_or_default(),
                    status: r[6].text().unwrap_or_default(),
                    repetitions_saved: r[7].int().unwrap_or(0),
                    name: r[8].text(),
                    workers: r[9].int(),
                    error: r[10].text(),
                })
            })
            .collect()
    }

    /// Every run, newest first.
    pub fn list_runs(&self) -> Result<Vec<RunRow>> {
        self.run_rows("", &[])
    }

    /// The id of the run `text` names: its number, or its name.
    pub fn resolve_run(&self, text: &str) -> Result<i64> {
        let by_name = self
            .db
            .query_one("SELECT id FROM runs WHERE name = $1", &[text.into()])?;
        if let Some(id) = by_name.and_then(|r| r[0].int()) {
            return Ok(id);
        }
        match text.parse::<i64>() {
            Ok(id) if !self.run_rows("WHERE r.id = $1", &[id.into()])?.is_empty() => Ok(id),
            _ => bail!(
                "no run {text} in {}; `connbench runs` lists them by number and name",
                self.location
            ),
        }
    }

    /// A run's row, cells and repetitions; `None` when there is no such run.
    pub fn load_run(&self, id: i64) -> Result<Option<StoredRun>> {
        let Some(row) = self.run_rows("WHERE r.id = $1", &[id.into()])?.into_iter().next() else {
            return Ok(None);
        };
        let json = |v: &Val| {
            v.text()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_default()
        };
        let cells = self
            .db
            .query(
                "SELECT cell, name, baseline, settings_json FROM cells WHERE run_id = $1 ORDER BY cell",
                &[id.into()],
            )?
            .into_iter()
            .map(|r| StoredCell {
                cell: r[0].int().unwrap_or(0) as usize,
                name: r[1].text().unwrap_or_default(),
                baseline: r[2].int() == Some(1),
                settings: json(&r[3]),
            })
            .collect();
        let repetitions = self
            .db
            .query(
                "SELECT cell, repetition, prewarm, started_at, elapsed_s, error, summary_json, latency_histogram, detail_json \
                 FROM repetitions WHERE run_id = $1 ORDER BY repetition, cell",
                &[id.into()],
            )?
            .into_iter()
            .map(|r| Repetition {
                cell: r[0].int().unwrap_or(0) as usize,
                repetition: r[1].int().unwrap_or(0) as u32,
                prewarm: r[2].int() == Some(1),
                started_at: r[3].text().unwrap_or_default(),
                elapsed_s: r[4].real().unwrap_or(0.0),
                error: r[5].text(),
                summary: json(&r[6]),
                latency_histogram: r[7].blob(),
                detail: r[8].text().and_then(|d| serde_json::from_str(&d).ok()),
            })
            .collect();
        let r = self
            .db
            .query_one(
                "SELECT suite_json, environment_json FROM runs WHERE id = $1",
                &[id.into()],
            )?
            .context("the run vanished while it was read")?;
        Ok(Some(StoredRun {
            run: row,
            suite: json(&r[0]),
            environment: json(&r[1]),
            cells,
            repetitions,
        }))
    }
}

/// A suite as the store keeps it: JSON, with the targets' secrets redacted.
fn stored_suite(suite: &crate::experiment::suite::Suite) -> Result<String> {
    let mut json = serde_json::to_value(suite)?;
    redact_targets(&mut json);
    Ok(json.to_string())
}

//! The many-machine rows of the store, apart from the suite rows: a Job's workers join a
//! named run, register, agree on a start, save their per-interval figures and their end;
//! the coordinator reads them back to merge.

use anyhow::{bail, Context, Result};

use super::{now_utc, redact_targets, Environment, Status, Store};
use crate::experiment::db::Row;

/// A worker of a many-machine run, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRow {
    pub worker: i64,
    pub host: String,
    pub ready: bool,
    pub clock_offset_us: Option<i64>,
    pub clock_rtt_us: Option<i64>,
    /// When it passed the agreed start, on the store's clock (µs since the epoch).
    pub started_at_us: Option<i64>,
    pub status: String,
    pub error: Option<String>,
    pub result: Option<serde_json::Value>,
    pub latency_histogram: Option<Vec<u8>>,
}

/// One worker's interval, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerInterval {
    pub worker: i64,
    pub interval: i64,
    pub transactions: i64,
    pub failures: i64,
    pub connects: i64,
    /// Connect attempts refused in the interval (0 in a store from before they were kept).
    pub refused: i64,
    pub latency_histogram: Option<Vec<u8>>,
}

/// How a worker ended, as saved.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerEnd {
    pub status: Status,
    pub error: Option<String>,
    /// When it passed the agreed start, on the store's clock (µs since the epoch).
    pub started_at_us: Option<i64>,
    /// Its record (everything but the latency histogram and the intervals).
    pub result: Option<serde_json::Value>,
    pub latency_histogram: Option<Vec<u8>>,
}

/// A many-machine run's own columns.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRun {
    pub id: i64,
    pub workers: i64,
    pub start_at_us: Option<i64>,
    pub status: String,
    pub settings: serde_json::Value,
}

impl Store {
    /// Creates the many-machine run `name` for `workers` workers, or joins it when another
    /// worker created it first; returns its row. A run of that name with another number
    /// of workers or other settings, or one already over, is refused.
    pub fn join_worker_run(
        &self,
        name: &str,
        workers: i64,
        settings: &serde_json::Value,
        env: &Environment,
    ) -> Result<WorkerRun> {
        let mut settings = settings.clone();
        redact_targets(&mut settings);
        self.db.exec(
            "INSERT INTO runs (started_at, suite, question, kind, status, suite_json, environment_json, name, workers) \
             VALUES ($1, 'load', $2, 'load', 'running', $3, $4, $5, $6) ON CONFLICT (name) DO NOTHING",
            &[
                now_utc().into(),
                format!("load from {workers} workers").into(),
                settings.to_string().into(),
                serde_json::to_string(env)?.into(),
                name.into(),
                workers.into(),
            ],
        )?;
        let run = self
            .worker_run(name)?
            .with_context(|| format!("run {name:?} was not created"))?;
        if run.workers != workers {
            bail!(
                "run {name:?} in {} is a run of {} workers, and this worker was started with --workers {workers}: \
                 give every worker the same --workers, or choose a new --run name",
                self.location,
                run.workers
            );
        }
        if run.status != "running" {
            bail!(
                "run {name:?} in {} is already over ({}): choose a new --run name",
                self.location,
                run.status
            );
        }
        if run.settings != settings {
            let keys = |v: &serde_json::Value| v.as_object().cloned().unwrap_or_default();
            let (stored, mine) = (keys(&run.settings), keys(&settings));
            let differ: Vec<String> = stored
                .keys()
                .chain(mine.keys())
                .filter(|k| stored.get(*k) != mine.get(*k))
                .map(|k| {
                    format!(
                        "{k} ({} there, {} here)",
                        stored.get(k).cloned().unwrap_or_default(),
                        mine.get(k).cloned().unwrap_or_default()
                    )
                })
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            bail!(
                "run {name:?} in {} was started with other load settings than this worker's: {}; every worker of a \
                 run needs the same flags but --worker-index, or choose a new --run name",
                self.location,
                differ.join(", ")
            );
        }
        Ok(run)
    }

    /// The many-machine run called `name`.
    pub fn worker_run(&self, name: &str) -> Result<Option<WorkerRun>> {
        let row = self.db.query_one(
            "SELECT id, workers, start_at_us, status, suite_json FROM runs WHERE name = $1",
            &[name.into()],
        )?;
        Ok(row.and_then(|r| {
            Some(WorkerRun {
                id: r[0].int()?,
                workers: r[1].int()?,
                start_at_us: r[2].int(),
                status: r[3].text().unwrap_or_default(),
                settings: r[4]
                    .text()
                    .and_then(|t| serde_json::from_str(&t).ok())
                    .unwrap_or_default(),
            })
        }))
    }

    /// Registers worker `index`; a second worker with the same index is refused.
    pub fn register_worker(&self, run: i64, index: i64, host: &str) -> Result<()> {
        let added = self.db.exec(
            "INSERT INTO workers (run_id, worker, host, registered_at, status) VALUES ($1, $2, $3, $4, 'running') \
             ON CONFLICT (run_id, worker) DO NOTHING",
            &[run.into(), index.into(), host.into(), now_utc().into()],
        )?;
        if added == 0 {
            bail!(
                "worker {index} of this run is already registered in {}: each worker needs its own --worker-index \
                 (or JOB_COMPLETION_INDEX); a retried worker needs a new --run name",
                self.location
            );
        }
        Ok(())
    }

    /// Marks worker `index` ready to start, with its clock's offset from the store's.
    pub fn worker_ready(&self, run: i64, index: i64, offset_us: i64, rtt_us: i64) -> Result<()> {
        self.db.exec(
            "UPDATE workers SET ready = 1, clock_offset_us = $3, clock_rtt_us = $4 WHERE run_id = $1 AND worker = $2",
            &[run.into(), index.into(), offset_us.into(), rtt_us.into()],
        )?;
        Ok(())
    }

    /// The indices of the workers ready to start.
    pub fn ready_workers(&self, run: i64) -> Result<Vec<i64>> {
        Ok(self
            .db
            .query(
                "SELECT worker FROM workers WHERE run_id = $1 AND ready = 1 ORDER BY worker",
                &[run.into()],
            )?
            .into_iter()
            .filter_map(|r| r[0].int())
            .collect())
    }

    /// Sets the run's start unless a worker set it first (one atomic update); returns
    /// the start every worker uses.
    pub fn agree_start(&self, run: i64, proposed_us: i64) -> Result<i64> {
        self.db.exec(
            "UPDATE runs SET start_at_us = $2 WHERE id = $1 AND start_at_us IS NULL",
            &[run.into(), proposed_us.into()],
        )?;
        self.db
            .query_one("SELECT start_at_us FROM runs WHERE id = $1", &[run.into()])?
            .and_then(|r| r[0].int())
            .context("the run's start was not set")
    }

    /// Saves finished intervals of a worker (again, where saved before), in one
    /// transaction: a worker's end saves its whole series at once.
    pub fn save_worker_intervals(&self, run: i64, intervals: &[WorkerInterval]) -> Result<()> {
        self.transaction(|| {
            for i in intervals {
                self.db.exec(
                    "INSERT INTO worker_intervals (run_id, worker, interval, transactions, failures, connects, refused, \
                     latency_histogram) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (run_id, worker, interval) \
                     DO UPDATE SET transactions = excluded.transactions, failures = excluded.failures, \
                     connects = excluded.connects, refused = excluded.refused, latency_histogram = excluded.latency_histogram",
                    &[
                        run.into(),
                        i.worker.into(),
                        i.interval.into(),
                        i.transactions.into(),
                        i.failures.into(),
                        i.connects.into(),
                        i.refused.into(),
                        i.latency_histogram.clone().into(),
                    ],
                )?;
            }
            Ok(())
        })
    }

    /// Saves worker `index`'s end; the last worker to end closes the run, as failed if
    /// any worker failed, interrupted if any was, else done.
    pub fn finish_worker(&self, run: i64, index: i64, end: &WorkerEnd) -> Result<()> {
        let status = end.status;
        self.db.exec(
            "UPDATE workers SET status = $3, error = $4, started_at_us = $5, result_json = $6, \
             latency_histogram = $7, finished_at = $8 WHERE run_id = $1 AND worker = $2",
            &[
                run.into(),
                index.into(),
                status.as_str().into(),
                end.error.clone().into(),
                end.started_at_us.into(),
                end.result.as_ref().map(|r| r.to_string()).into(),
                end.latency_histogram.clone().into(),
                now_utc().into(),
            ],
        )?;
        let statuses: Vec<String> = self
            .db
            .query("SELECT status FROM workers WHERE run_id = $1", &[run.into()])?
            .into_iter()
            .filter_map(|r| r[0].text())
            .collect();
        let workers = self
            .db
            .query_one("SELECT workers FROM runs WHERE id = $1", &[run.into()])?
            .and_then(|r| r[0].int())
            .unwrap_or(0);
        let any = |s: &str| statuses.iter().any(|x| x == s);
        let overall = if status == Status::Failed || any("failed") {
            // A failed worker fails the run at once: the others' start can never come.
            Some(Status::Failed)
        } else if statuses.len() as i64 == workers && !any("running") {
            Some(if any("interrupted") {
                Status::Interrupted
            } else {
                Status::Done
            })
        } else {
            None
        };
        if let Some(s) = overall {
            // A failed run keeps its first error: this worker's, when it is the one that failed.
            let error = (s == Status::Failed)
                .then(|| end.error.as_ref().map(|e| format!("worker {index}: {e}")))
                .flatten();
            self.db.exec(
                "UPDATE runs SET status = $2, finished_at = $3, error = $4 WHERE id = $1 AND status = 'running'",
                &[run.into(), s.as_str().into(), now_utc().into(), error.into()],
            )?;
        }
        Ok(())
    }

    /// A many-machine run's workers and their intervals.
    pub fn load_workers(&self, run: i64) -> Result<(Vec<WorkerRow>, Vec<WorkerInterval>)> {
        let workers = self
            .db
            .query(
                "SELECT worker, host, ready, clock_offset_us, clock_rtt_us, started_at_us, status, error, result_json, \
                 latency_histogram FROM workers WHERE run_id = $1 ORDER BY worker",
                &[run.into()],
            )?
            .into_iter()
            .map(|r: Row| WorkerRow {
                worker: r[0].int().unwrap_or(0),
                host: r[1].text().unwrap_or_default(),
                ready: r[2].int() == Some(1),
                clock_offset_us: r[3].int(),
                clock_rtt_us: r[4].int(),
                started_at_us: r[5].int(),
                status: r[6].text().unwrap_or_default(),
                error: r[7].text(),
                result: r[8].text().and_then(|t| serde_json::from_str(&t).ok()),
                latency_histogram: r[9].blob(),
            })
            .collect();
        let intervals = self
            .db
            .query(
                "SELECT worker, interval, transactions, failures, connects, refused, latency_histogram \
                 FROM worker_intervals WHERE run_id = $1 ORDER BY interval, worker",
                &[run.into()],
            )?
            .into_iter()
            .map(|r| WorkerInterval {
                worker: r[0].int().unwrap_or(0),
                interval: r[1].int().unwrap_or(0),
                transactions: r[2].int().unwrap_or(0),
                failures: r[3].int().unwrap_or(0),
                connects: r[4].int().unwrap_or(0),
                refused: r[5].int().unwrap_or(0),
                latency_histogram: r[6].blob(),
            })
            .collect();
        Ok((workers, intervals))
    }
}

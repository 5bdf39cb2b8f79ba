//! The results store: one row per run, cell and repetition, written as each repetition
//! finishes, so a crash or Ctrl-C loses at most the repetition in flight. It lives in a
//! SQLite file (the default, for one machine) or a PostgreSQL database (`--store
//! postgres://...`, where many machines' workers save one run); [`crate::experiment::db`]
//! runs the same statements and the same migrations on both.
//!
//! The schema is versioned in `meta.schema_version`; opening an older store migrates it
//! (under a lock, so workers opening a new PostgreSQL store at once do not race), opening
//! a newer one is refused with a message. Settings, the environment and summaries are
//! stored as JSON next to the columns that queries need; HDR histograms are stored in
//! their standard V2 compressed serialisation, so any HdrHistogram implementation can
//! read them. Conninfo strings are redacted before they are stored, and the store's own
//! location is redacted wherever it is printed: a password never reaches the store or a
//! message.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::db::{Db, Row, Val};

/// The schema this build writes.
pub const SCHEMA_VERSION: i64 = 4;

/// Each step takes the schema one version up; a new store runs them all after
/// [`SCHEMA_V1`]. Type words in braces are rendered per database ([`Db::ddl`]).
const MIGRATIONS: &[(i64, &str)] = &[
    // Version 2 adds `repetitions.detail_json`: what a repetition measured beyond its
    // figures (a load run's per-interval series), for charts.
    (2, "ALTER TABLE repetitions ADD COLUMN detail_json TEXT;"),
    // Version 3: runs have names, and a load run may be many workers' (on many
    // machines), each with its own row and per-interval histograms.
    (
        3,
        "ALTER TABLE runs ADD COLUMN name TEXT;
         ALTER TABLE runs ADD COLUMN workers {INT};
         ALTER TABLE runs ADD COLUMN start_at_us {INT};
         CREATE UNIQUE INDEX runs_name ON runs (name);
         CREATE TABLE workers (
             run_id {INT} NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
             worker {INT} NOT NULL,
             host TEXT NOT NULL,
             registered_at TEXT NOT NULL,
             ready {INT} NOT NULL DEFAULT 0,
             clock_offset_us {INT},
             clock_rtt_us {INT},
             started_at_us {INT},
             finished_at TEXT,
             status TEXT NOT NULL CHECK (status IN ('running', 'done', 'interrupted', 'failed')),
             error TEXT,
             result_json TEXT,
             latency_histogram {BLOB},
             PRIMARY KEY (run_id, worker)
         );
         CREATE TABLE worker_intervals (
             run_id {INT} NOT NULL,
             worker {INT} NOT NULL,
             interval {INT} NOT NULL,
             transactions {INT} NOT NULL,
             failures {INT} NOT NULL,
             connects {INT} NOT NULL,
             latency_histogram {BLOB},
             PRIMARY KEY (run_id, worker, interval),
             FOREIGN KEY (run_id, worker) REFERENCES workers(run_id, worker) ON DELETE CASCADE
         );",
    ),
    // Version 4: a failed run keeps why (its first error), beside its status.
    (4, "ALTER TABLE runs ADD COLUMN error TEXT;"),
];

const SCHEMA_V1: &str = "
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    id {ID},
    started_at TEXT NOT NULL,
    finished_at TEXT,
    suite TEXT NOT NULL,
    question TEXT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'done', 'interrupted', 'failed')),
    suite_json TEXT NOT NULL,
    environment_json TEXT NOT NULL
);
CREATE TABLE cells (
    run_id {INT} NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    cell {INT} NOT NULL,
    name TEXT NOT NULL,
    baseline {INT} NOT NULL,
    settings_json TEXT NOT NULL,
    PRIMARY KEY (run_id, cell)
);
CREATE TABLE repetitions (
    run_id {INT} NOT NULL,
    cell {INT} NOT NULL,
    repetition {INT} NOT NULL,
    prewarm {INT} NOT NULL,
    started_at TEXT NOT NULL,
    elapsed_s {REAL} NOT NULL,
    ok {INT} NOT NULL,
    error TEXT,
    summary_json TEXT NOT NULL,
    latency_histogram {BLOB},
    PRIMARY KEY (run_id, cell, repetition),
    FOREIGN KEY (run_id, cell) REFERENCES cells(run_id, cell) ON DELETE CASCADE
);
INSERT INTO meta (key, value) VALUES ('schema_version', '1');
";

/// Where a run was measured.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Environment {
    pub connbench_version: String,
    pub server_version: Option<String>,
    pub pgbouncer_version: Option<String>,
    pub cpus: usize,
    pub kernel: String,
    pub tls: Option<String>,
    /// The server settings that shape noise and durability, as the server reported them
    /// (`pg_settings`): e.g. `synchronous_commit=off`.
    #[serde(default)]
    pub server_settings: Vec<String>,
}

impl Environment {
    /// This machine, with what the caller learnt of the servers.
    pub fn here(
        server_version: Option<String>,
        pgbouncer_version: Option<String>,
        tls: Option<String>,
    ) -> Self {
        Environment {
            connbench_version: env!("CARGO_PKG_VERSION").to_string(),
            server_version,
            pgbouncer_version,
            cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            kernel: kernel(),
            tls,
            server_settings: Vec::new(),
        }
    }
}

fn kernel() -> String {
    // SAFETY: uname fills the struct we own; its fields are NUL-terminated.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown".into();
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!(
        "{} {} {}",
        field(&u.sysname),
        field(&u.release),
        field(&u.machine)
    )
}

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

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Done,
    Interrupted,
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Done => "done",
            Status::Interrupted => "interrupted",
            Status::Failed => "failed",
        }
    }
}

/// An open results store.
pub struct Store {
    db: Db,
    /// Where it is, as messages print it (a password redacted).
    location: String,
}

/// The default location: `$XDG_DATA_HOME/connbench/results.sqlite`, else
/// `~/.local/share/connbench/results.sqlite`.
pub fn default_path() -> Result<PathBuf> {
    let base = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".local/share")))
        .context("cannot find a data directory: set HOME or XDG_DATA_HOME, or pass --store FILE")?;
    Ok(base.join("connbench").join("results.sqlite"))
}

/// Whether `--store`'s value names a PostgreSQL database rather than a SQLite file.
pub fn is_postgres_location(s: &str) -> bool {
    s.starts_with("postgres://")
        || s.starts_with("postgresql://")
        || (s.contains('=') && s.split_whitespace().all(|w| w.contains('=')))
}

pub use crate::units::now_utc;

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
    /// Opens (creating or migrating) the store at `location`: a SQLite file path, or a
    /// PostgreSQL URL or conninfo.
    pub fn open_location(location: &str) -> Result<Store> {
        if is_postgres_location(location) {
            let shown = crate::target::redact(location);
            let db = Db::postgres(location).with_context(|| {
                format!(
                    "cannot connect to the results store {shown}: check the URL, that the database exists, \
                     and the password (in the URL, CONNBENCH_STORE_PASSWORD or PGPASSWORD)"
                )
            })?;
            Store::migrate(db, shown)
        } else {
            Store::open(Path::new(location))
        }
    }

    /// Opens (creating or migrating) the SQLite store at `path`.
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let db = Db::sqlite(path).with_context(|| format!("cannot open results store {}", path.display()))?;
        Store::migrate(db, path.display().to_string())
    }

    /// Creates the schema or brings it to [`SCHEMA_VERSION`], in one transaction under a
    /// lock: two processes opening one new store create it once.
    fn migrate(db: Db, location: String) -> Result<Store> {
        if db.is_postgres() {
            db.batch("BEGIN; SELECT pg_advisory_xact_lock(7310268374512);")?;
        } else {
            db.batch("BEGIN IMMEDIATE;")?;
        }
        let migrated = (|| -> Result<()> {
            let has_meta = if db.is_postgres() {
                db.query_one("SELECT to_regclass('meta') IS NOT NULL", &[])?
            } else {
                db.query_one(
                    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
                    &[],
                )?
            }
            .and_then(|r| r[0].int())
            .unwrap_or(0)
                > 0;
            if !has_meta {
                db.batch(SCHEMA_V1)?;
            }
            let version: i64 = db
                .query_one("SELECT value FROM meta WHERE key = 'schema_version'", &[])?
                .and_then(|r| r[0].text())
                .context("the store has no schema_version")?
                .parse()
                .context("schema_version is not a number")?;
            if version > SCHEMA_VERSION {
                bail!(
                    "results store {location} has schema version {version}, newer than this connbench understands \
                     ({SCHEMA_VERSION}); upgrade connbench or pass --store with another store"
                );
            }
            for (to, step) in MIGRATIONS.iter().filter(|(to, _)| *to > version) {
                db.batch(step).with_context(|| {
                    format!("cannot migrate results store {location} to schema version {to}")
                })?;
                db.exec(
                    "UPDATE meta SET value = $1 WHERE key = 'schema_version'",
                    &[to.to_string().into()],
                )?;
            }
            Ok(())
        })();
        match migrated {
            Ok(()) => db.batch("COMMIT;")?,
            Err(e) => {
                let _ = db.batch("ROLLBACK;");
                return Err(e);
            }
        }
        Ok(Store { db, location })
    }

    /// Where the store is, for messages (a password redacted).
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The store's database, for the coordination of workers.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Runs `f` in one transaction.
    fn transaction<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.db.batch("BEGIN;")?;
        match f() {
            Ok(v) => {
                self.db.batch("COMMIT;")?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.db.batch("ROLLBACK;");
                Err(e)
            }
        }
    }

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
                    "INSERT INTO worker_intervals (run_id, worker, interval, transactions, failures, connects, latency_histogram) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (run_id, worker, interval) DO UPDATE SET \
                     transactions = excluded.transactions, failures = excluded.failures, connects = excluded.connects, \
                     latency_histogram = excluded.latency_histogram",
                    &[
                        run.into(),
                        i.worker.into(),
                        i.interval.into(),
                        i.transactions.into(),
                        i.failures.into(),
                        i.connects.into(),
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
                "SELECT worker, interval, transactions, failures, connects, latency_histogram FROM worker_intervals \
                 WHERE run_id = $1 ORDER BY interval, worker",
                &[run.into()],
            )?
            .into_iter()
            .map(|r| WorkerInterval {
                worker: r[0].int().unwrap_or(0),
                interval: r[1].int().unwrap_or(0),
                transactions: r[2].int().unwrap_or(0),
                failures: r[3].int().unwrap_or(0),
                connects: r[4].int().unwrap_or(0),
                latency_histogram: r[5].blob(),
            })
            .collect();
        Ok((workers, intervals))
    }
}

/// Redacts any password in `target` values (settings hold conninfo strings as given).
fn redact_targets(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, val) in map.iter_mut() {
                if k == "target" || k == "conninfo" {
                    if let serde_json::Value::String(s) = val {
                        *s = crate::target::redact(s);
                    }
                } else {
                    redact_targets(val);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact_targets),
        _ => {}
    }
}

/// The HdrHistogram V2 + deflate serialisation of `h`.
/// A suite as the store keeps it: JSON, with the targets' secrets redacted.
fn stored_suite(suite: &crate::experiment::suite::Suite) -> Result<String> {
    let mut json = serde_json::to_value(suite)?;
    redact_targets(&mut json);
    Ok(json.to_string())
}

pub fn serialize_histogram(h: &hdrhistogram::Histogram<u64>) -> Result<Vec<u8>> {
    use hdrhistogram::serialization::Serializer;
    let mut out = Vec::new();
    hdrhistogram::serialization::V2DeflateSerializer::new()
        .serialize(h, &mut out)
        .map_err(|e| anyhow::anyhow!("cannot serialise a histogram: {e:?}"))?;
    Ok(out)
}

/// Reads a histogram written by [`serialize_histogram`].
pub fn deserialize_histogram(bytes: &[u8]) -> Result<hdrhistogram::Histogram<u64>> {
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(bytes))
        .map_err(|e| anyhow::anyhow!("cannot read a stored histogram: {e:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::suite::Suite;

    fn temp_store(name: &str) -> (PathBuf, Store) {
        let dir = std::env::temp_dir().join(format!("cbt-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("nested").join("results.sqlite");
        let store = Store::open(&path).unwrap();
        (dir, store)
    }

    const SUITE: &str = r#"
name = "transport"
question = "Unix or TCP?"
kind = "load"
duration = "5s"
repetitions = 2
[axes]
target = ["unix", "postgres://app:hunter2@db/app"]
"#;

    #[test]
    fn a_failed_run_keeps_its_error_and_gives_its_name_up_to_the_run_that_repeats_it() {
        let (dir, store) = temp_store("failed-name");
        let suite = Suite::parse(SUITE, "t").unwrap();
        let env = Environment::default();
        let done = store.begin_run(&suite, &env).unwrap();
        store.name_run(done, "kept").unwrap();
        store.finish_run(done, Status::Done, None).unwrap();
        let failed = store.begin_run(&suite, &env).unwrap();
        store.name_run(failed, "again").unwrap();
        store
            .finish_run(
                failed,
                Status::Failed,
                Some("every repetition of cell \"a\" failed"),
            )
            .unwrap();
        // A done run keeps its name; a failed one gives it up and keeps its results.
        assert_eq!(store.free_failed_name("kept").unwrap(), None);
        assert_eq!(store.free_failed_name("nobody").unwrap(), None);
        let kept = format!("again~failed-{failed}");
        assert_eq!(
            store.free_failed_name("again").unwrap(),
            Some((failed, kept.clone()))
        );
        assert!(store.resolve_run("again").is_err(), "the name is free");
        assert_eq!(store.resolve_run(&kept).unwrap(), failed);
        let row = &store.list_runs().unwrap()[0];
        assert_eq!((row.id, row.status.as_str()), (failed, "failed"));
        assert_eq!(
            row.error.as_deref(),
            Some("every repetition of cell \"a\" failed")
        );
        assert_eq!(store.list_runs().unwrap()[1].error, None);
        let next = store.begin_run(&suite, &env).unwrap();
        store.name_run(next, "again").unwrap();
        assert_eq!(store.resolve_run("again").unwrap(), next);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn repetitions_are_saved_one_by_one_and_read_back() {
        let (dir, store) = temp_store("rw");
        let suite = Suite::parse(SUITE, "t").unwrap();
        let env = Environment::here(Some("15.18".into()), None, None);
        let run = store.begin_run(&suite, &env).unwrap();
        let mut h = crate::load::record::latency_histogram();
        for v in [1_000u64, 2_000, 3_000, 1_000_000] {
            h.record(v).unwrap();
        }
        for step in suite.plan() {
            store
                .save_repetition(
                    run,
                    &Repetition {
                        cell: step.cell,
                        repetition: step.repetition,
                        prewarm: step.is_prewarm(),
                        started_at: now_utc(),
                        elapsed_s: 5.0,
                        error: None,
                        summary: serde_json::json!({"tps": 1000.0 + step.cell as f64}),
                        latency_histogram: Some(serialize_histogram(&h).unwrap()),
                        detail: Some(serde_json::json!({"series": [{"tps": 10.0}]})),
                    },
                )
                .unwrap();
        }
        // Another connection sees every repetition before the run is finished: nothing
        // waits for the end of the run to reach the file.
        let reader = Store::open(Path::new(store.location())).unwrap();
        let runs = reader.list_runs().unwrap();
        assert_eq!(runs[0].status, "running");
        assert_eq!(
            runs[0].repetitions_saved, 4,
            "2 cells x 2 repetitions, pre-warm apart"
        );
        store.finish_run(run, Status::Done, None).unwrap();
        let StoredRun {
            run: row,
            cells,
            repetitions: reps,
            ..
        } = reader.load_run(run).unwrap().unwrap();
        assert_eq!(row.status, "done");
        assert!(row.finished_at.is_some());
        assert_eq!(cells.len(), 2);
        assert!(cells[0].baseline);
        assert_eq!(reps.len(), 6);
        let back = deserialize_histogram(reps[0].latency_histogram.as_ref().unwrap()).unwrap();
        assert_eq!(back, h, "histograms survive the round trip");
        assert_eq!(
            reps[0].detail,
            Some(serde_json::json!({"series": [{"tps": 10.0}]}))
        );
        assert!(reader.load_run(run + 99).unwrap().is_none());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn passwords_never_reach_the_file() {
        let (dir, store) = temp_store("pw");
        let suite = Suite::parse(SUITE, "t").unwrap();
        store
            .begin_run(&suite, &Environment::here(None, None, None))
            .unwrap();
        drop(store);
        let bytes = std::fs::read(dir.join("nested/results.sqlite")).unwrap();
        let wal = std::fs::read(dir.join("nested/results.sqlite-wal")).unwrap_or_default();
        let hay = [bytes, wal].concat();
        assert!(
            !hay.windows(7).any(|w| w == b"hunter2"),
            "the password was stored"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_newer_schema_is_refused_with_a_message() {
        let (dir, store) = temp_store("ver");
        store
            .db
            .batch("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
            .unwrap();
        let path = PathBuf::from(store.location());
        drop(store);
        let e = Store::open(&path).err().unwrap().to_string();
        assert!(
            e.contains("schema version 99, newer than this connbench understands"),
            "{e}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_version_1_store_is_migrated_and_keeps_its_runs() {
        let dir = std::env::temp_dir().join(format!("cbt-store-v1-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("results.sqlite");
        // What version 1 wrote: its schema and a run with one cell.
        let db = Db::sqlite(&path).unwrap();
        db.batch(SCHEMA_V1).unwrap();
        db.batch(
            "INSERT INTO runs (id, started_at, suite, question, kind, status, suite_json, environment_json) \
             VALUES (1, '2026-01-01T00:00:00Z', 'transport', 'Unix or TCP?', 'load', 'done', '{}', '{}'); \
             INSERT INTO cells VALUES (1, 0, 'unix', 1, '{}');",
        )
        .unwrap();
        drop(db);
        let store = Store::open(&path).unwrap();
        let version = store
            .db
            .query_one("SELECT value FROM meta WHERE key = 'schema_version'", &[])
            .unwrap()
            .unwrap();
        assert_eq!(version[0].text().as_deref(), Some("4"));
        let rep = Repetition {
            cell: 0,
            repetition: 1,
            prewarm: false,
            started_at: now_utc(),
            elapsed_s: 1.0,
            error: None,
            summary: serde_json::json!({"tps": 5.0}),
            latency_histogram: None,
            detail: Some(serde_json::json!({"series": []})),
        };
        store.save_repetition(1, &rep).unwrap();
        let back = store.load_run(1).unwrap().unwrap();
        assert_eq!(back.run.question, "Unix or TCP?");
        assert_eq!(back.repetitions, vec![rep]);
        // Opening it again (a second process) changes nothing.
        drop(store);
        Store::open(&path).unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }
}

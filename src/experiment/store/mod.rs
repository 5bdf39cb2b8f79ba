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
//!
//! This file owns the schema, its migrations and opening a store; `runs` writes and reads
//! the suite rows (runs, cells, repetitions), `workers` the coordination of a
//! many-machine run's workers.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

mod runs;
mod workers;

pub use runs::{Repetition, RunRow, StoredCell, StoredRun};
pub use workers::{WorkerEnd, WorkerInterval, WorkerRow, WorkerRun};

use super::db::Db;

/// The schema this build writes.
pub const SCHEMA_VERSION: i64 = 5;

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
    // Version 5: a worker's intervals keep the connect attempts refused in them, so a
    // merged run's series says when a server's limit turned clients away.
    (
        5,
        "ALTER TABLE worker_intervals ADD COLUMN refused {INT} NOT NULL DEFAULT 0;",
    ),
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

impl Store {
    /// The store at `location` (a SQLite file, or a PostgreSQL URL or conninfo), or the
    /// default SQLite file (`--store`, absent or given).
    pub fn open_at(location: Option<&str>) -> Result<Store> {
        match location {
            Some(location) => Store::open_location(location),
            None => Store::open(&default_path()?),
        }
    }

    /// Opens (creating or migrating) the store at `location`: a SQLite file path, or a
    /// PostgreSQL URL or conninfo.
    pub fn open_location(location: &str) -> Result<Store> {
        if is_postgres_location(location) {
            let shown = crate::targets::redact(location);
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
}

/// Redacts any password in `target` values (settings hold conninfo strings as given).
fn redact_targets(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, val) in map.iter_mut() {
                if k == "target" || k == "conninfo" {
                    if let serde_json::Value::String(s) = val {
                        *s = crate::targets::redact(s);
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
        let mut h = crate::load::measurements::latency_histogram();
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
        assert_eq!(version[0].text().as_deref(), Some("5"));
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

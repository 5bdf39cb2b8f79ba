//! The results store: SQLite, one row per run, cell and repetition, written as each
//! repetition finishes, so a crash or Ctrl-C loses at most the repetition in flight.
//!
//! The schema is versioned in `meta.schema_version`; opening an older store migrates it,
//! opening a newer one is refused with a message. Settings, the environment and
//! summaries are stored as JSON next to the columns that queries need; HDR histograms
//! are stored in their standard V2 compressed serialisation, so any HdrHistogram
//! implementation can read them. Conninfo strings are redacted before they are stored:
//! a password never reaches the file.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use rusqlite::{params, Connection};

/// The schema this build writes.
pub const SCHEMA_VERSION: i64 = 2;

/// Version 2 adds `repetitions.detail_json`: what a repetition measured beyond its
/// figures (a load run's per-interval series), for charts.
const MIGRATE_V1_TO_V2: &str = "ALTER TABLE repetitions ADD COLUMN detail_json TEXT;";

const SCHEMA_V2: &str = "
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
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
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    cell INTEGER NOT NULL,
    name TEXT NOT NULL,
    baseline INTEGER NOT NULL,
    settings_json TEXT NOT NULL,
    PRIMARY KEY (run_id, cell)
);
CREATE TABLE repetitions (
    run_id INTEGER NOT NULL,
    cell INTEGER NOT NULL,
    repetition INTEGER NOT NULL,
    prewarm INTEGER NOT NULL,
    started_at TEXT NOT NULL,
    elapsed_s REAL NOT NULL,
    ok INTEGER NOT NULL,
    error TEXT,
    summary_json TEXT NOT NULL,
    latency_histogram BLOB,
    detail_json TEXT,
    PRIMARY KEY (run_id, cell, repetition),
    FOREIGN KEY (run_id, cell) REFERENCES cells(run_id, cell) ON DELETE CASCADE
);
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
    fn as_str(self) -> &'static str {
        match self {
            Status::Done => "done",
            Status::Interrupted => "interrupted",
            Status::Failed => "failed",
        }
    }
}

/// An open results store.
pub struct Store {
    conn: Connection,
    path: PathBuf,
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

pub use crate::units::now_utc;

impl Store {
    /// Opens (creating or migrating) the store at `path`.
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let conn = Connection::open(path)
            .with_context(|| format!("cannot open results store {}", path.display()))?;
        conn.execute_batch(
            "PRAGMA foreign_keys = ON; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;",
        )?;
        let has_meta: bool = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n > 0)?;
        if !has_meta {
            conn.execute_batch(SCHEMA_V2)?;
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?1)",
                [SCHEMA_VERSION.to_string()],
            )?;
        }
        let version: i64 = conn
            .query_row("SELECT value FROM meta WHERE key = 'schema_version'", [], |r| {
                r.get::<_, String>(0)
            })?
            .parse()
            .context("results store: schema_version is not a number")?;
        if version == 1 {
            conn.execute_batch(&format!(
                "BEGIN; {MIGRATE_V1_TO_V2} UPDATE meta SET value = '2' WHERE key = 'schema_version'; COMMIT;"
            ))
            .with_context(|| {
                format!(
                    "cannot migrate results store {} to schema version 2",
                    path.display()
                )
            })?;
        }
        if version > SCHEMA_VERSION {
            bail!(
                "results store {} has schema version {version}, newer than this connbench understands ({SCHEMA_VERSION}); \
                 upgrade connbench or pass --store with another file",
                path.display()
            );
        }
        Ok(Store {
            conn,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records a new run and its cells; returns the run's id.
    pub fn begin_run(&self, suite: &crate::experiment::suite::Suite, env: &Environment) -> Result<i64> {
        let tx = self.conn.unchecked_transaction()?;
        let mut suite_json = serde_json::to_value(suite)?;
        redact_targets(&mut suite_json);
        tx.execute(
            "INSERT INTO runs (started_at, suite, question, kind, status, suite_json, environment_json) \
             VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6)",
            params![
                now_utc(),
                suite.name,
                suite.question,
                serde_json::to_value(suite.kind)?.as_str().unwrap_or("?"),
                suite_json.to_string(),
                serde_json::to_string(env)?,
            ],
        )?;
        let run = tx.last_insert_rowid();
        for (i, cell) in suite.cells.iter().enumerate() {
            let mut settings = serde_json::to_value(&cell.settings)?;
            redact_targets(&mut settings);
            tx.execute(
                "INSERT INTO cells (run_id, cell, name, baseline, settings_json) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    run,
                    i as i64,
                    cell.name,
                    i == suite.baseline,
                    settings.to_string()
                ],
            )?;
        }
        tx.commit()?;
        Ok(run)
    }

    /// Saves one repetition at once (its own transaction).
    pub fn save_repetition(&self, run: i64, r: &Repetition) -> Result<()> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO repetitions \
                 (run_id, cell, repetition, prewarm, started_at, elapsed_s, ok, error, summary_json, latency_histogram, detail_json) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![
                    run,
                    r.cell as i64,
                    r.repetition,
                    r.prewarm,
                    r.started_at,
                    r.elapsed_s,
                    r.error.is_none(),
                    r.error,
                    r.summary.to_string(),
                    r.latency_histogram,
                    r.detail.as_ref().map(|d| d.to_string()),
                ],
            )
            .with_context(|| format!("cannot save repetition {} of cell {} to {}", r.repetition, r.cell, self.path.display()))?;
        Ok(())
    }

    pub fn finish_run(&self, run: i64, status: Status) -> Result<()> {
        self.conn.execute(
            "UPDATE runs SET status = ?1, finished_at = ?2 WHERE id = ?3",
            params![status.as_str(), now_utc(), run],
        )?;
        Ok(())
    }

    /// Every run, newest first.
    pub fn list_runs(&self) -> Result<Vec<RunRow>> {
        let mut q = self.conn.prepare(
            "SELECT r.id, r.started_at, r.finished_at, r.suite, r.question, r.kind, r.status, \
                    (SELECT count(*) FROM repetitions p WHERE p.run_id = r.id AND p.prewarm = 0) \
             FROM runs r ORDER BY r.id DESC",
        )?;
        let rows = q.query_map([], |r| {
            Ok(RunRow {
                id: r.get(0)?,
                started_at: r.get(1)?,
                finished_at: r.get(2)?,
                suite: r.get(3)?,
                question: r.get(4)?,
                kind: r.get(5)?,
                status: r.get(6)?,
                repetitions_saved: r.get(7)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// A run's row, cells and repetitions; `None` when there is no such run.
    pub fn load_run(&self, id: i64) -> Result<Option<StoredRun>> {
        let Some(row) = self.list_runs()?.into_iter().find(|r| r.id == id) else {
            return Ok(None);
        };
        let mut q = self.conn.prepare(
            "SELECT cell, name, baseline, settings_json FROM cells WHERE run_id = ?1 ORDER BY cell",
        )?;
        let cells = q
            .query_map([id], |r| {
                Ok(StoredCell {
                    cell: r.get::<_, i64>(0)? as usize,
                    name: r.get(1)?,
                    baseline: r.get(2)?,
                    settings: serde_json::from_str(&r.get::<_, String>(3)?).unwrap_or_default(),
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let mut q = self.conn.prepare(
            "SELECT cell, repetition, prewarm, started_at, elapsed_s, error, summary_json, latency_histogram, detail_json \
             FROM repetitions WHERE run_id = ?1 ORDER BY repetition, cell",
        )?;
        let reps = q
            .query_map([id], |r| {
                Ok(Repetition {
                    cell: r.get::<_, i64>(0)? as usize,
                    repetition: r.get(1)?,
                    prewarm: r.get(2)?,
                    started_at: r.get(3)?,
                    elapsed_s: r.get(4)?,
                    error: r.get(5)?,
                    summary: serde_json::from_str(&r.get::<_, String>(6)?).unwrap_or_default(),
                    latency_histogram: r.get(7)?,
                    detail: r
                        .get::<_, Option<String>>(8)?
                        .and_then(|d| serde_json::from_str(&d).ok()),
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let (suite, environment): (String, String) = self.conn.query_row(
            "SELECT suite_json, environment_json FROM runs WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok(Some(StoredRun {
            run: row,
            suite: serde_json::from_str(&suite).unwrap_or_default(),
            environment: serde_json::from_str(&environment).unwrap_or_default(),
            cells,
            repetitions: reps,
        }))
    }
}

/// Redacts any password in `target` values (settings hold conninfo strings as given).
fn redact_targets(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, val) in map.iter_mut() {
                if k == "target" {
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
        let reader = Store::open(store.path()).unwrap();
        let runs = reader.list_runs().unwrap();
        assert_eq!(runs[0].status, "running");
        assert_eq!(
            runs[0].repetitions_saved, 4,
            "2 cells x 2 repetitions, pre-warm apart"
        );
        store.finish_run(run, Status::Done).unwrap();
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
            .conn
            .execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'", [])
            .unwrap();
        let path = store.path().to_path_buf();
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
        let (dir, store) = temp_store("v1");
        let suite = Suite::parse(SUITE, "t").unwrap();
        let run = store
            .begin_run(&suite, &Environment::here(None, None, None))
            .unwrap();
        // Turn it into what version 1 wrote.
        store
            .conn
            .execute_batch(
                "ALTER TABLE repetitions DROP COLUMN detail_json; \
                 UPDATE meta SET value = '1' WHERE key = 'schema_version';",
            )
            .unwrap();
        let path = store.path().to_path_buf();
        drop(store);
        let store = Store::open(&path).unwrap();
        let version: String = store
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'schema_version'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(version, "2");
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
        store.save_repetition(run, &rep).unwrap();
        let back = store.load_run(run).unwrap().unwrap();
        assert_eq!(back.repetitions, vec![rep]);
        std::fs::remove_dir_all(dir).unwrap();
    }
}

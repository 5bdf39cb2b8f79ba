//! The TPC-B-like tables: create, fill, recognise and drop them, never touching a table
//! connbench did not create.
//!
//! The tables (branches, tellers, accounts, history, with pgbench's columns and row
//! counts per scale: 1, 10 and 100,000 rows per unit of scale) live in their own schema,
//! `connbench` by default, so the user's tables are never in the way. Each table carries
//! a marker in its comment (`connbench dataset; scale=N`). Re-init drops only marked tables
//! and refuses, naming the table, when an unmarked one is in the way. Rows are loaded with
//! COPY inside the transaction that creates the tables; primary keys are added after the
//! load and the tables are vacuumed and analysed, as pgbench does.
//!
//! A run may also use pgbench's own tables (`pgbench -i`: `pgbench_accounts` and the
//! others, in the search path), read but never created or dropped here: [`find_tables`]
//! chooses between the two sets and reads the scale as pgbench does (`select count(*)
//! from pgbench_branches`).
//!
//! On MySQL and MariaDB the schema is a database of the same name (`connbench`), the
//! tables are InnoDB with their primary keys declared up front (InnoDB clusters rows by
//! them, so loading in key order is the fast way), the marker is the table's COMMENT,
//! rows go in as multi-row INSERTs, and ANALYZE TABLE replaces VACUUM ANALYZE.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::open;
use crate::proto::{self, Endpoint, Engine, Session};

pub const TABLES: [&str; 4] = ["branches", "tellers", "accounts", "history"];
const MARKER: &str = "connbench dataset";
/// pgbench's tables as `pgbench -i` makes them, found through the search path.
pub const PGBENCH_TABLES: [&str; 4] = [
    "pgbench_branches",
    "pgbench_tellers",
    "pgbench_accounts",
    "pgbench_history",
];

/// Which tables a run's built-in scripts (and `:scale`) use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tables {
    /// connbench's, in this schema (`connbench init`).
    Connbench(String),
    /// pgbench's (`pgbench -i`): `pgbench_accounts` and the others, in the search path.
    Pgbench,
    /// sysbench's (`sysbench ... prepare` or `connbench init --tables sysbench`):
    /// `sbtest1..tables`, ids drawn from 1..=size.
    Sysbench { tables: u32, size: u32 },
}

impl Tables {
    /// How a report names them: `connbench.*` or `pgbench_*`.
    pub fn describe(&self) -> String {
        match self {
            Tables::Connbench(schema) => format!("{schema}.*"),
            Tables::Pgbench => "pgbench_*".into(),
            Tables::Sysbench { tables, size } => format!("sbtest1..{tables} ({size} rows each)"),
        }
    }
}

/// Which tables the user asked for: `--tables`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TableChoice {
    /// connbench's in the schema when they are there, else pgbench's when they are.
    #[default]
    Auto,
    Connbench,
    Pgbench,
    /// sysbench's sbtest1..N, which the oltp-* workloads run on (and find by themselves).
    Sysbench,
}

impl TableChoice {
    pub const NAMES: [&'static str; 4] = ["auto", "connbench", "pgbench", "sysbench"];
}

impl std::str::FromStr for TableChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(TableChoice::Auto),
            "connbench" => Ok(TableChoice::Connbench),
            "pgbench" => Ok(TableChoice::Pgbench),
            "sysbench" => Ok(TableChoice::Sysbench),
            _ => Err(format!(
                "invalid tables {s:?}: use auto, connbench (connbench init's, in --schema), pgbench (pgbench -i's) \
                 or sysbench (sysbench prepare's sbtest1..N, for the oltp-* workloads)"
            )),
        }
    }
}

/// What `init` did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct InitReport {
    pub schema: String,
    pub scale: u32,
    pub rows: u64,
    /// Marked tables replaced (re-init).
    pub replaced: Vec<String>,
    #[serde(rename = "elapsed_s", serialize_with = "crate::units::ser_duration_s")]
    pub elapsed: Duration,
}

/// Checks a schema name: plain lower-case identifiers only, so it never needs quoting.
pub fn check_schema(schema: &str) -> Result<()> {
    let ok = schema
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && schema
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && schema.len() <= 63;
    if !ok {
        bail!("invalid --schema {schema:?}: use a lower-case identifier (letters, digits, _)");
    }
    Ok(())
}

/// The tables of `schema` that exist, each with whether connbench made it and its scale.
async fn existing(s: &mut Session, engine: Engine, schema: &str) -> Result<Vec<(String, Option<u32>)>> {
    let sql = match engine {
        Engine::Postgres => format!(
            "SELECT c.relname || '|' || coalesce(obj_description(c.oid, 'pg_class'), '') \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = '{schema}' AND c.relname IN ('branches', 'tellers', 'accounts', 'history') \
             ORDER BY c.relname"
        ),
        Engine::Mysql => format!(
            "SELECT CONCAT(table_name, '|', table_comment) FROM information_schema.tables \
             WHERE table_schema = '{schema}' AND table_name IN ('branches', 'tellers', 'accounts', 'history') \
             ORDER BY table_name"
        ),
    };
    let rows = s.query_column(&sql).await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let (name, comment) = row.split_once('|').unwrap_or((&row, ""));
            let scale = comment
                .strip_prefix(MARKER)
                .and_then(|r| r.trim_start_matches(';').trim().strip_prefix("scale="))
                .and_then(|n| n.parse().ok());
            (name.to_string(), scale)
        })
        .collect())
}

/// Refuses when a table of the same name that connbench did not create is in the way.
fn refuse_foreign(tables: &[(String, Option<u32>)], schema: &str) -> Result<()> {
    if let Some((name, _)) = tables.iter().find(|(_, scale)| scale.is_none()) {
        bail!(
            "{schema}.{name} exists and was not created by connbench (its comment has no \"{MARKER}\" marker); \
             connbench never drops or alters a table it did not create; choose another --schema"
        );
    }
    Ok(())
}

/// connbench's tables at `scale` in `schema`: `None` when all four are there, marked at
/// that scale (made by an earlier run, kept); else made now, as [`init`] makes them
/// (replacing marked tables, refusing a table connbench did not create).
pub async fn ensure(ep: &Endpoint, schema: &str, scale: u32) -> Result<Option<InitReport>> {
    check_schema(schema)?;
    let mut s = open(ep).await?;
    let tables = existing(&mut s, ep.engine(), schema).await?;
    s.close().await;
    if tables.len() == TABLES.len() && tables.iter().all(|(_, s)| *s == Some(scale)) {
        return Ok(None);
    }
    init(ep, schema, scale).await.map(Some)
}

/// Creates and fills the tables at `scale` in `schema`, replacing marked ones.
pub async fn init(ep: &Endpoint, schema: &str, scale: u32) -> Result<InitReport> {
    check_schema(schema)?;
    if scale == 0 {
        bail!("invalid scale 0: use 1 or more (each unit is 100,000 accounts)");
    }
    let started = Instant::now();
    let mut session = open(ep).await?;
    let before = existing(&mut session, ep.engine(), schema).await?;
    refuse_foreign(&before, schema)?;
    let replaced: Vec<String> = before.iter().map(|(n, _)| format!("{schema}.{n}")).collect();
    let mut s = match session {
        Session::Postgres(s) => s,
        Session::Mysql(mut m) => {
            let rows = init_mysql(&mut m, schema, scale, &before).await?;
            m.close().await;
            return Ok(InitReport {
                schema: schema.to_string(),
                scale,
                rows,
                replaced,
                elapsed: started.elapsed(),
            });
        }
    };
    let mut sql = vec![
        "BEGIN".to_string(),
        format!("CREATE SCHEMA IF NOT EXISTS {schema}"),
    ];
    for (name, _) in &before {
        sql.push(format!("DROP TABLE {schema}.{name}"));
    }
    sql.extend([
        format!("CREATE TABLE {schema}.branches (bid int NOT NULL, bbalance int, filler char(88))"),
        format!("CREATE TABLE {schema}.tellers (tid int NOT NULL, bid int, tbalance int, filler char(84))"),
        format!("CREATE TABLE {schema}.accounts (aid int NOT NULL, bid int, abalance int, filler char(84))"),
        format!("CREATE TABLE {schema}.history (tid int, bid int, aid int, delta int, mtime timestamp, filler char(22))"),
    ]);
    for t in TABLES {
        sql.push(format!(
            "COMMENT ON TABLE {schema}.{t} IS '{MARKER}; scale={scale}'"
        ));
    }
    for q in &sql {
        s.simple_query(q).await.with_context(|| format!("init: {q}"))?;
    }
    let scale64 = scale as u64;
    let mut rows = 0;
    let copy = |table: &str| format!("COPY {schema}.{table} FROM STDIN");
    rows += s
        .copy_in(
            &copy("branches"),
            &mut (1..=scale64).map(|b| format!("{b}\t0\t\n")),
        )
        .await
        .context("init: COPY branches")?;
    rows += s
        .copy_in(
            &copy("tellers"),
            &mut (1..=10 * scale64).map(|t| format!("{t}\t{}\t0\t\n", (t - 1) / 10 + 1)),
        )
        .await
        .context("init: COPY tellers")?;
    rows += s
        .copy_in(
            &copy("accounts"),
            &mut (1..=100_000 * scale64).map(|a| format!("{a}\t{}\t0\t\n", (a - 1) / 100_000 + 1)),
        )
        .await
        .context("init: COPY accounts")?;
    s.simple_query("COMMIT").await.context("init: COMMIT")?;
    for t in ["branches", "tellers", "accounts"] {
        let pk = &t[..1];
        let q = format!("ALTER TABLE {schema}.{t} ADD PRIMARY KEY ({pk}id)");
        s.simple_query(&q).await.with_context(|| format!("init: {q}"))?;
    }
    let q =
        format!("VACUUM ANALYZE {schema}.branches, {schema}.tellers, {schema}.accounts, {schema}.history");
    s.simple_query(&q).await.with_context(|| format!("init: {q}"))?;
    s.close().await;
    Ok(InitReport {
        schema: schema.to_string(),
        scale,
        rows,
        replaced,
        elapsed: started.elapsed(),
    })
}

/// The MySQL dialect of `init`: the database, marked InnoDB tables with their keys, and
/// rows in multi-row INSERTs of a few thousand each (one statement per round trip).
async fn init_mysql(
    s: &mut proto::mysql::Session,
    schema: &str,
    scale: u32,
    before: &[(String, Option<u32>)],
) -> Result<u64> {
    let marker = format!("COMMENT='{MARKER}; scale={scale}'");
    let mut sql = vec![format!("CREATE DATABASE IF NOT EXISTS {schema}")];
    for (name, _) in before {
        sql.push(format!("DROP TABLE {schema}.{name}"));
    }
    sql.extend([
        format!("CREATE TABLE {schema}.branches (bid int NOT NULL PRIMARY KEY, bbalance int, filler char(88)) ENGINE=InnoDB {marker}"),
        format!("CREATE TABLE {schema}.tellers (tid int NOT NULL PRIMARY KEY, bid int, tbalance int, filler char(84)) ENGINE=InnoDB {marker}"),
        format!("CREATE TABLE {schema}.accounts (aid int NOT NULL PRIMARY KEY, bid int, abalance int, filler char(84)) ENGINE=InnoDB {marker}"),
        format!("CREATE TABLE {schema}.history (tid int, bid int, aid int, delta int, mtime timestamp NULL, filler char(22)) ENGINE=InnoDB {marker}"),
    ]);
    for q in &sql {
        s.simple_query(q).await.with_context(|| format!("init: {q}"))?;
    }
    let scale = scale as u64;
    let mut rows = 0;
    for (table, count, per_branch) in [
        ("branches", scale, 1),
        ("tellers", 10 * scale, 10),
        ("accounts", 100_000 * scale, 100_000),
    ] {
        s.simple_query("BEGIN").await.context("init: BEGIN")?;
        let mut next = 1;
        while next <= count {
            let last = (next + 4_999).min(count);
            let mut q = format!("INSERT INTO {schema}.{table} VALUES ");
            for id in next..=last {
                if id > next {
                    q.push(',');
                }
                match table {
                    "branches" => q += &format!("({id},0,'')"),
                    _ => q += &format!("({id},{},0,'')", (id - 1) / per_branch + 1),
                }
            }
            s.execute(proto::Statement::Simple(&q), &[])
                .await
                .with_context(|| format!("init: INSERT INTO {schema}.{table}"))?;
            rows += last - next + 1;
            next = last + 1;
        }
        s.simple_query("COMMIT").await.context("init: COMMIT")?;
    }
    let q = format!("ANALYZE TABLE {schema}.branches, {schema}.tellers, {schema}.accounts, {schema}.history");
    s.simple_query(&q).await.with_context(|| format!("init: {q}"))?;
    Ok(rows)
}

/// Drops connbench's tables from `schema` (and the schema when it is then empty);
/// refuses when a table there was not created by connbench.
pub async fn drop(ep: &Endpoint, schema: &str) -> Result<Vec<String>> {
    check_schema(schema)?;
    let mut s = open(ep).await?;
    let tables = existing(&mut s, ep.engine(), schema).await?;
    refuse_foreign(&tables, schema)?;
    let mut dropped = Vec::new();
    for (name, _) in &tables {
        s.simple_query(&format!("DROP TABLE {schema}.{name}")).await?;
        dropped.push(format!("{schema}.{name}"));
    }
    // A MySQL database is the user's (the sandbox's `connbench` holds other things),
    // so only PostgreSQL's schema, which connbench created, is dropped when empty.
    if ep.engine() == Engine::Postgres {
        let left = s
            .query_column(&format!(
                "SELECT count(*)::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = '{schema}'"
            ))
            .await?;
        if left.first().map(String::as_str) == Some("0") && !tables.is_empty() {
            // Only a schema that held our tables and nothing else; RESTRICT keeps anything
            // else (functions, types) safe.
            let _ = s.simple_query(&format!("DROP SCHEMA {schema} RESTRICT")).await;
        }
    }
    s.close().await;
    Ok(dropped)
}

/// The scale of connbench's tables in `schema`, or a message saying how to create them.
pub async fn scale_of(ep: &Endpoint, schema: &str) -> Result<u32> {
    check_schema(schema)?;
    let mut s = open(ep).await?;
    let tables = existing(&mut s, ep.engine(), schema).await?;
    s.close().await;
    refuse_foreign(&tables, schema)?;
    if tables.len() != TABLES.len() {
        bail!(
            "connbench's tables are not in schema {schema} at {}; create them with `connbench init '{}' -s 1`",
            ep.target.name(),
            ep.target.conninfo()
        );
    }
    Ok(tables.iter().filter_map(|(_, s)| *s).min().unwrap_or(1))
}

/// The scale of pgbench's tables as pgbench reads it (`select count(*) from
/// pgbench_branches`), or `None` when the four are not all in the search path. MySQL has
/// no `pgbench -i`, so there it is always `None`.
pub async fn pgbench_scale(ep: &Endpoint) -> Result<Option<u32>> {
    if ep.engine() != Engine::Postgres {
        return Ok(None);
    }
    let mut s = open(ep).await?;
    let found = PGBENCH_TABLES
        .map(|t| format!("to_regclass('{t}') IS NOT NULL"))
        .join(" AND ");
    let present = s
        .query_column(&format!("SELECT ({found})::text"))
        .await
        .context("cannot look for pgbench's tables")?;
    if present.first().map(String::as_str) != Some("true") {
        s.close().await;
        return Ok(None);
    }
    let count = s
        .query_column("select count(*)::text from pgbench_branches")
        .await
        .context("cannot read pgbench's scale (select count(*) from pgbench_branches)");
    s.close().await;
    let count: u64 = count?
        .first()
        .and_then(|c| c.parse().ok())
        .context("select count(*) from pgbench_branches gave no number")?;
    if count == 0 {
        bail!(
            "pgbench_branches at {} is empty, so it gives no scale; fill the tables again with `pgbench -i -s N`",
            ep.target.name()
        );
    }
    Ok(Some(u32::try_from(count).unwrap_or(u32::MAX)))
}

/// The tables a run uses and their scale, by `choice` (see `TableChoice`): with `Auto`,
/// connbench's in `schema` when all four are there, else pgbench's when they are, else
/// an error naming both and how to create either.
pub async fn find_tables(ep: &Endpoint, choice: TableChoice, schema: &str) -> Result<(Tables, u32)> {
    let connbench = Tables::Connbench(schema.to_string());
    match choice {
        TableChoice::Connbench => Ok((connbench, scale_of(ep, schema).await?)),
        TableChoice::Sysbench => bail!(
            "--tables sysbench: sysbench's tables (sbtest1..N) carry the oltp-* workloads only (-b oltp-read-write, \
             ...); for tpcb-like, simple-update and select-only use --tables connbench or pgbench"
        ),
        TableChoice::Pgbench => match pgbench_scale(ep).await? {
            Some(scale) => Ok((Tables::Pgbench, scale)),
            None => bail!(
                "pgbench's tables ({}) are not in the search path at {}; create them with `pgbench -i -s 1` \
                 on that database, or use connbench's (`connbench init '{}' -s 1`, then --tables connbench)",
                PGBENCH_TABLES.join(", "),
                ep.target.name(),
                ep.target.conninfo()
            ),
        },
        TableChoice::Auto => {
            check_schema(schema)?;
            let mut s = open(ep).await?;
            let tables = existing(&mut s, ep.engine(), schema).await?;
            s.close().await;
            if tables.len() == TABLES.len() {
                refuse_foreign(&tables, schema)?;
                let scale = tables.iter().filter_map(|(_, s)| *s).min().unwrap_or(1);
                return Ok((connbench, scale));
            }
            if let Some(scale) = pgbench_scale(ep).await? {
                return Ok((Tables::Pgbench, scale));
            }
            let pgbench = if ep.engine() == Engine::Postgres {
                format!(
                    " nor pgbench's ({} in the search path)",
                    PGBENCH_TABLES.join(", ")
                )
            } else {
                String::new()
            };
            bail!(
                "neither connbench's tables (schema {schema}){pgbench} are at {}; create connbench's with \
                 `connbench init '{}' -s 1`{}",
                ep.target.name(),
                ep.target.conninfo(),
                if pgbench.is_empty() {
                    ""
                } else {
                    " or pgbench's with `pgbench -i -s 1` on that database"
                }
            )
        }
    }
}

/// Lets `role` use connbench's tables in `schema` (the sandbox's trust role, say).
pub async fn grant(ep: &Endpoint, schema: &str, role: &str) -> Result<()> {
    check_schema(schema)?;
    if ep.engine() == Engine::Mysql {
        bail!("grant is for PostgreSQL roles; the sandbox's MariaDB roles are granted the database when it starts");
    }
    let mut s = open(ep).await?;
    for q in [
        format!("GRANT USAGE ON SCHEMA {schema} TO {role}"),
        format!("GRANT ALL ON ALL TABLES IN SCHEMA {schema} TO {role}"),
    ] {
        s.simple_query(&q).await.with_context(|| q.clone())?;
    }
    s.close().await;
    Ok(())
}

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
//! On MySQL and MariaDB the schema is a database of the same name (`connbench`), the
//! tables are InnoDB with their primary keys declared up front (InnoDB clusters rows by
//! them, so loading in key order is the fast way), the marker is the table's COMMENT,
//! rows go in as multi-row INSERTs, and ANALYZE TABLE replaces VACUUM ANALYZE.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::proto::{self, Endpoint, Engine, PhaseCursor, Session};

pub const TABLES: [&str; 4] = ["branches", "tellers", "accounts", "history"];
const MARKER: &str = "connbench dataset";

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

async fn open(ep: &Endpoint) -> Result<Session> {
    let (s, _) = proto::connect(ep, &PhaseCursor::default())
        .await
        .with_context(|| format!("cannot connect to {}", ep.target.name()))?;
    Ok(s)
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

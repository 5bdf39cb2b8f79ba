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

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::proto::postgres::{self, Endpoint, Session};
use crate::proto::PhaseCursor;

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
    let (s, _) = postgres::connect(ep, &PhaseCursor::default())
        .await
        .with_context(|| format!("cannot connect to {}", ep.target.name()))?;
    Ok(s)
}

/// The tables of `schema` that exist, each with whether connbench made it and its scale.
async fn existing(s: &mut Session, schema: &str) -> Result<Vec<(String, Option<u32>)>> {
    let sql = format!(
        "SELECT c.relname || '|' || coalesce(obj_description(c.oid, 'pg_class'), '') \
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = '{schema}' AND c.relname IN ('branches', 'tellers', 'accounts', 'history') \
         ORDER BY c.relname"
    );
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
    let mut s = open(ep).await?;
    let before = existing(&mut s, schema).await?;
    refuse_foreign(&before, schema)?;
    let replaced: Vec<String> = before.iter().map(|(n, _)| format!("{schema}.{n}")).collect();
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

/// Drops connbench's tables from `schema` (and the schema when it is then empty);
/// refuses when a table there was not created by connbench.
pub async fn drop(ep: &Endpoint, schema: &str) -> Result<Vec<String>> {
    check_schema(schema)?;
    let mut s = open(ep).await?;
    let tables = existing(&mut s, schema).await?;
    refuse_foreign(&tables, schema)?;
    let mut dropped = Vec::new();
    for (name, _) in &tables {
        s.simple_query(&format!("DROP TABLE {schema}.{name}")).await?;
        dropped.push(format!("{schema}.{name}"));
    }
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
    s.close().await;
    Ok(dropped)
}

/// The scale of connbench's tables in `schema`, or a message saying how to create them.
pub async fn scale_of(ep: &Endpoint, schema: &str) -> Result<u32> {
    check_schema(schema)?;
    let mut s = open(ep).await?;
    let tables = existing(&mut s, schema).await?;
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

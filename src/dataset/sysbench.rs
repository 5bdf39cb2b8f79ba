//! sysbench's tables (`sbtest1..N`): find them, create and fill them with sysbench's
//! DDL and data shape, drop and grant them, never touching a table connbench did not
//! create.
//!
//! The tables are found on the target as pgbench's are (`--tables auto`): made by
//! `sysbench ... prepare` (unmarked: read, never created, altered or dropped) or by
//! `connbench init --tables sysbench` (sysbench's DDL, marked in the table's comment).
//! The workloads that read them are [`crate::workload::sysbench`]'s.

use std::fmt::Write as _;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::open;
use crate::proto::{self, Endpoint, Engine, Session};
use crate::workload::sysbench::{draw, SysbenchOptions, C_TEMPLATE, PAD_TEMPLATE};

/// The marker in the comment of a table `connbench init --tables sysbench` made.
pub const MARKER: &str = "connbench dataset; sysbench";

/// The `sbtestN` tables visible at the target (PostgreSQL: in the search path; MySQL:
/// in the connection's database), each with its number and its comment.
async fn existing(s: &mut Session, engine: Engine) -> Result<Vec<(u32, String)>> {
    let sql = match engine {
        Engine::Postgres => "SELECT c.relname || '|' || coalesce(obj_description(c.oid, 'pg_class'), '') \
                             FROM pg_class c WHERE c.relkind IN ('r', 'p') AND c.relname ~ '^sbtest[0-9]+$' \
                             AND pg_table_is_visible(c.oid)"
            .to_string(),
        Engine::Mysql => "SELECT CONCAT(table_name, '|', table_comment) FROM information_schema.tables \
                          WHERE table_schema = DATABASE() AND table_name LIKE 'sbtest%'"
            .to_string(),
    };
    let rows = s
        .query_column(&sql)
        .await
        .context("cannot look for sysbench's tables (sbtest1, ...)")?;
    let mut out: Vec<(u32, String)> = rows
        .into_iter()
        .filter_map(|row| {
            let (name, comment) = row.split_once('|').unwrap_or((&row, ""));
            let n = name.strip_prefix("sbtest")?.parse().ok()?;
            Some((n, comment.to_string()))
        })
        .collect();
    out.sort();
    Ok(out)
}

/// The table size a marker records (`connbench dataset; sysbench table_size=N`).
fn marked_size(comment: &str) -> Option<u32> {
    comment
        .strip_prefix(MARKER)?
        .trim()
        .strip_prefix("table_size=")?
        .parse()
        .ok()
}

/// How many of `sbtest1..` are there in a row.
fn consecutive(found: &[(u32, String)]) -> u32 {
    let mut n = 0;
    while found.iter().any(|(t, _)| *t == n + 1) {
        n += 1;
    }
    n
}

/// sysbench's tables at the target and the size the workloads draw ids from: the
/// options' when given, else every table `sbtest1..N` found, and the size connbench's
/// marker records or else `max(id)` of sbtest1 (what `sysbench prepare` made it).
pub async fn find(ep: &Endpoint, o: &SysbenchOptions) -> Result<(u32, u32)> {
    let mut s = open(ep).await?;
    let found = existing(&mut s, ep.engine()).await?;
    let there = consecutive(&found);
    let create = format!(
        "create them with `connbench init '{}' --tables sysbench` or `sysbench oltp_read_write ... prepare`",
        ep.target.conninfo()
    );
    if there == 0 {
        s.close().await;
        bail!(
            "sysbench's tables (sbtest1, ...) are not at {}{}; {create}",
            ep.target.name(),
            if ep.engine() == Engine::Postgres {
                " (in the search path)"
            } else {
                " (in the connection's database)"
            }
        );
    }
    let tables = match o.tables {
        Some(n) if n > there => {
            s.close().await;
            bail!(
                "--sysbench tables={n} asks for sbtest1..sbtest{n}, but {} has sbtest1..sbtest{there} only; \
                 give tables={there} or fewer, or {create} with tables={n}",
                ep.target.name()
            );
        }
        Some(n) => n,
        None => there,
    };
    let size = match (
        o.table_size,
        found
            .iter()
            .find(|(t, _)| *t == 1)
            .and_then(|(_, c)| marked_size(c)),
    ) {
        (Some(n), _) | (None, Some(n)) => n,
        (None, None) => {
            let max = s
                .query_column("SELECT coalesce(max(id), 0) FROM sbtest1")
                .await
                .context("cannot read sysbench's table size (SELECT max(id) FROM sbtest1)")?;
            let n: u32 = max.first().and_then(|m| m.parse().ok()).unwrap_or(0);
            if n == 0 {
                s.close().await;
                bail!(
                    "sbtest1 at {} is empty, so it gives no table size; give --sysbench table-size=N \
                     (what sysbench was prepared with)",
                    ep.target.name()
                );
            }
            n
        }
    };
    s.close().await;
    Ok((tables, size))
}

/// What `init --tables sysbench` did.
#[derive(Debug, Clone)]
pub struct InitReport {
    pub tables: u32,
    pub table_size: u32,
    pub rows: u64,
    pub replaced: Vec<String>,
    pub elapsed: std::time::Duration,
}

/// Creates `sbtest1..N` with sysbench's DDL and data shape (ids 1..size from the
/// table's SERIAL or AUTO_INCREMENT, `k` from the id distribution, random `c` and
/// `pad`, the secondary index `k_N` made after the load), marked as connbench's.
/// Replaces only marked tables; refuses, naming it, an unmarked one in the way.
pub async fn init(ep: &Endpoint, o: &SysbenchOptions) -> Result<InitReport> {
    let tables = o.tables.unwrap_or(1);
    let size = o.table_size.unwrap_or(10_000);
    let started = Instant::now();
    let mut s = open(ep).await?;
    let engine = ep.engine();
    let found = existing(&mut s, engine).await?;
    if let Some((n, _)) = found.iter().find(|(_, c)| !c.starts_with(MARKER)) {
        s.close().await;
        bail!(
            "sbtest{n} exists at {} and was not created by connbench (its comment has no \"{MARKER}\" marker); \
             connbench never drops or alters a table it did not create; drop it with `sysbench ... cleanup` \
             or use another database",
            ep.target.name()
        );
    }
    let mut replaced = Vec::new();
    for (n, _) in &found {
        let q = format!("DROP TABLE sbtest{n}");
        s.simple_query(&q).await.with_context(|| format!("init: {q}"))?;
        replaced.push(format!("sbtest{n}"));
    }
    // The data comes from the interpreter's own generator, so `k` follows the same
    // distribution as in sysbench (`sb_rand` is its default distribution).
    let mut rng = crate::script::Prng::new(0x005b_7e57);
    let mut rows = 0u64;
    for t in 1..=tables {
        let marker = format!("{MARKER} table_size={size}");
        let create = match engine {
            Engine::Postgres => format!(
                "CREATE TABLE sbtest{t}(id SERIAL, k INTEGER DEFAULT '0' NOT NULL, c CHAR(120) DEFAULT '' NOT NULL, \
                 pad CHAR(60) DEFAULT '' NOT NULL, PRIMARY KEY (id))"
            ),
            Engine::Mysql => format!(
                "CREATE TABLE sbtest{t}(id INTEGER NOT NULL AUTO_INCREMENT, k INTEGER DEFAULT '0' NOT NULL, \
                 c CHAR(120) DEFAULT '' NOT NULL, pad CHAR(60) DEFAULT '' NOT NULL, PRIMARY KEY (id)) \
                 ENGINE = InnoDB COMMENT='{marker}'"
            ),
        };
        s.simple_query(&create)
            .await
            .with_context(|| format!("init: {create}"))?;
        let mut c = String::new();
        let mut pad = String::new();
        let mut row = |rng: &mut crate::script::Prng| {
            rng.sysbench_string(C_TEMPLATE, &mut c);
            rng.sysbench_string(PAD_TEMPLATE, &mut pad);
            let k = draw(rng, o, size);
            (k, c.clone(), pad.clone())
        };
        match &mut s {
            Session::Postgres(p) => {
                let q = format!("COMMENT ON TABLE sbtest{t} IS '{marker}'");
                p.simple_query(&q).await.with_context(|| format!("init: {q}"))?;
                rows += p
                    .copy_in(
                        &format!("COPY sbtest{t} (k, c, pad) FROM STDIN"),
                        &mut (0..size).map(|_| {
                            let (k, c, pad) = row(&mut rng);
                            format!("{k}\t{c}\t{pad}\n")
                        }),
                    )
                    .await
                    .with_context(|| format!("init: COPY sbtest{t}"))?;
            }
            Session::Mysql(m) => {
                m.simple_query("BEGIN").await.context("init: BEGIN")?;
                let mut done = 0u32;
                while done < size {
                    let n = (size - done).min(2_000);
                    let mut q = format!("INSERT INTO sbtest{t}(k, c, pad) VALUES ");
                    for i in 0..n {
                        let (k, c, pad) = row(&mut rng);
                        let _ = write!(q, "{}({k},'{c}','{pad}')", if i > 0 { "," } else { "" });
                    }
                    m.execute(proto::Statement::Simple(&q), &[])
                        .await
                        .with_context(|| format!("init: INSERT INTO sbtest{t}"))?;
                    done += n;
                    rows += u64::from(n);
                }
                m.simple_query("COMMIT").await.context("init: COMMIT")?;
            }
        }
        let index = format!("CREATE INDEX k_{t} ON sbtest{t}(k)");
        s.simple_query(&index)
            .await
            .with_context(|| format!("init: {index}"))?;
        let analyze = match engine {
            Engine::Postgres => format!("VACUUM ANALYZE sbtest{t}"),
            Engine::Mysql => format!("ANALYZE TABLE sbtest{t}"),
        };
        s.simple_query(&analyze)
            .await
            .with_context(|| format!("init: {analyze}"))?;
    }
    s.close().await;
    Ok(InitReport {
        tables,
        table_size: size,
        rows,
        replaced,
        elapsed: started.elapsed(),
    })
}

/// Drops the `sbtestN` tables connbench made; refuses when one there is not marked.
pub async fn drop(ep: &Endpoint) -> Result<Vec<String>> {
    let mut s = open(ep).await?;
    let found = existing(&mut s, ep.engine()).await?;
    if let Some((n, _)) = found.iter().find(|(_, c)| !c.starts_with(MARKER)) {
        s.close().await;
        bail!(
            "sbtest{n} at {} was not created by connbench (no \"{MARKER}\" marker), so connbench drops none \
             of sbtest1..: remove sysbench's with `sysbench ... cleanup`",
            ep.target.name()
        );
    }
    let mut dropped = Vec::new();
    for (n, _) in &found {
        s.simple_query(&format!("DROP TABLE sbtest{n}")).await?;
        dropped.push(format!("sbtest{n}"));
    }
    s.close().await;
    Ok(dropped)
}

/// Lets `role` use the `sbtestN` tables connbench made on PostgreSQL, and their id
/// sequences (oltp-insert takes ids from them).
pub async fn grant(ep: &Endpoint, role: &str) -> Result<()> {
    if ep.engine() != Engine::Postgres {
        return Ok(());
    }
    let mut s = open(ep).await?;
    let found = existing(&mut s, Engine::Postgres).await?;
    for (n, comment) in &found {
        if !comment.starts_with(MARKER) {
            continue;
        }
        for q in [
            format!("GRANT ALL ON sbtest{n} TO {role}"),
            format!("GRANT USAGE ON SEQUENCE sbtest{n}_id_seq TO {role}"),
        ] {
            s.simple_query(&q).await.with_context(|| q.clone())?;
        }
    }
    s.close().await;
    Ok(())
}

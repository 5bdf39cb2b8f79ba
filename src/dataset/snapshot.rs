//! A database's data kept before the first repetition of a trace that writes, and put
//! back before each of the others, so every repetition starts from the same rows (issue
//! 55). PostgreSQL: a template database (`CREATE DATABASE connbench_restore_… TEMPLATE
//! db`) taken once; a restore drops the working database and creates it again from that
//! copy, with its owner, grants, settings, connection limit and comment as they were.
//! MariaDB has no template databases: a snapshot schema (`connbench_restore_…`) holds a
//! copy of each of the database's tables (`CREATE TABLE … LIKE`, `INSERT … SELECT`); a
//! restore empties each table and fills it from its copy (foreign key checks off for the
//! session, AUTO_INCREMENT put back), and drops the tables made since the copy.
//!
//! What this module makes is named `connbench_restore_<pid>_<n>` and is the only thing it
//! ever drops besides the working database itself, which only `restore` touches: the
//! caller decides where that is allowed (connbench's sandbox, or a target whose user
//! asked). A working database dropped and not made again is said so, and its copy is then
//! never dropped (`Snapshot::lost`).

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::open;
use crate::proto::{Endpoint, Engine, Session};

/// What a copy's name starts with.
pub const PREFIX: &str = "connbench_restore_";

/// A PgBouncer in front of the database: its admin console and the names it serves the
/// database under.
pub struct Pooler {
    pub admin: Endpoint,
    pub databases: Vec<String>,
}

/// A database's copy, taken once: what restores the database from it.
pub struct Snapshot {
    /// A connection to the server outside the working database (PostgreSQL: `postgres`;
    /// MariaDB: the working target, whose statements name their schema).
    admin: Endpoint,
    pub database: String,
    pub copy: String,
    pooler: Option<Pooler>,
    kept: Kept,
    /// The working database was dropped and not made again: the copy holds its data and
    /// is kept.
    pub lost: bool,
}

/// What a restore puts back besides the rows.
enum Kept {
    /// The owner, and the statements that give the database back its grants, settings,
    /// connection limit and comment (a database made from a template has none of them).
    Postgres { owner: String, after: Vec<String> },
    /// The tables copied, each with its AUTO_INCREMENT counter.
    Mysql { tables: Vec<(String, Option<u64>)> },
}

fn pg_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

fn pg_literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn my_ident(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

fn my_literal(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// The name of the `n`th copy this process makes.
pub fn copy_name(n: usize) -> String {
    format!("{PREFIX}{}_{n}", std::process::id())
}

/// The PostgreSQL grants, settings, connection limit and comment of database `db`, as
/// the statements that give them to a database of that name again (the owner's own
/// privileges are the owner's by default).
const PG_KEPT: &str = "SELECT stmt FROM (\
  SELECT 1 AS k, format('REVOKE ALL ON DATABASE %I FROM PUBLIC', datname) AS stmt \
    FROM pg_database WHERE datname = $DB AND datacl IS NOT NULL \
  UNION ALL SELECT 2, format('GRANT %s ON DATABASE %I TO %s%s', a.privilege_type, d.datname, \
    CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END, \
    CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END) \
    FROM pg_database d, aclexplode(d.datacl) a WHERE d.datname = $DB AND a.grantee <> d.datdba \
  UNION ALL SELECT 3, format('ALTER %sDATABASE %I SET %s = %L', \
    CASE WHEN s.setrole = 0 THEN '' ELSE format('ROLE %I IN ', pg_get_userbyid(s.setrole)) END, \
    d.datname, split_part(c, '=', 1), substr(c, strpos(c, '=') + 1)) \
    FROM pg_database d JOIN pg_db_role_setting s ON s.setdatabase = d.oid, unnest(s.setconfig) c \
    WHERE d.datname = $DB \
  UNION ALL SELECT 4, format('ALTER DATABASE %I CONNECTION LIMIT %s', datname, datconnlimit) \
    FROM pg_database WHERE datname = $DB AND datconnlimit <> -1 \
  UNION ALL SELECT 5, format('COMMENT ON DATABASE %I IS %L', datname, shobj_description(oid, 'pg_database')) \
    FROM pg_database WHERE datname = $DB AND shobj_description(oid, 'pg_database') IS NOT NULL \
) x ORDER BY k";

impl Snapshot {
    /// Copies database `database` (on `admin`'s server) into `copy`, PgBouncer's
    /// connections to it closed meanwhile (`pooler`).
    pub async fn take(
        admin: Endpoint,
        database: &str,
        copy: String,
        pooler: Option<Pooler>,
    ) -> Result<Snapshot> {
        let mut s = open(&admin).await?;
        let kept = match admin.engine() {
            Engine::Postgres => take_postgres(&mut s, pooler.as_ref(), database, &copy).await,
            Engine::Mysql => take_mysql(&mut s, database, &copy).await,
        };
        s.close().await;
        let kept = kept.with_context(|| {
            format!(
                "copying database {database} into {copy} on {} before the first repetition",
                admin.target.name()
            )
        })?;
        Ok(Snapshot {
            admin,
            database: database.to_string(),
            copy,
            pooler,
            kept,
            lost: false,
        })
    }

    /// Puts the working database back as the copy holds it; returns how long it took.
    pub async fn restore(&mut self) -> Result<Duration> {
        let started = Instant::now();
        let mut s = open(&self.admin).await?;
        let done = match &self.kept {
            Kept::Postgres { owner, after } => {
                let (db, copy) = (&self.database, &self.copy);
                let made = paused(self.pooler.as_ref(), restore_postgres(&mut s, db, copy, owner)).await;
                if let Err(e) = &made {
                    self.lost = !exists(&mut s, db).await.unwrap_or(true);
                    if self.lost {
                        s.close().await;
                        bail!(
                            "restoring database {db} from {copy}: {e:#}; {db} was dropped and is not made \
                             again: its data is in {copy}, which connbench keeps (make it again with \
                             CREATE DATABASE {} TEMPLATE {})",
                            pg_ident(db),
                            pg_ident(copy)
                        );
                    }
                }
                match made {
                    Ok(()) => run_all(&mut s, after).await,
                    Err(e) => Err(e),
                }
            }
            Kept::Mysql { tables } => restore_mysql(&mut s, &self.database, &self.copy, tables).await,
        };
        s.close().await;
        done.with_context(|| {
            format!(
                "restoring database {} from {} on {} before a repetition",
                self.database,
                self.copy,
                self.admin.target.name()
            )
        })?;
        Ok(started.elapsed())
    }

    /// Drops the copy (never a copy whose working database was lost).
    pub async fn drop_copy(&self) -> Result<()> {
        if self.lost {
            bail!(
                "{} is kept: it holds database {}'s data, which a failed restore dropped",
                self.copy,
                self.database
            );
        }
        let mut s = open(&self.admin).await?;
        let sql = match self.admin.engine() {
            Engine::Postgres => format!("DROP DATABASE IF EXISTS {}", pg_ident(&self.copy)),
            Engine::Mysql => format!("DROP DATABASE IF EXISTS {}", my_ident(&self.copy)),
        };
        let dropped = s.simple_query(&sql).await;
        s.close().await;
        dropped.map_err(|e| anyhow!("dropping {} on {}: {e}", self.copy, self.admin.target.name()))?;
        Ok(())
    }
}

/// Runs `work` with PgBouncer paused on each of the pooler's names for the database:
/// PAUSE waits for its clients' queries, then closes its server connections to the
/// database, which a database being copied or dropped must not have; clients that come
/// meanwhile wait, not fail. RESUME follows whatever `work` gave. (KILL would drop
/// clients too; terminating the backends from the server would leave PgBouncer to find
/// its connections dead at their next use.)
async fn paused<T>(pooler: Option<&Pooler>, work: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    let Some(p) = pooler else {
        return work.await;
    };
    let mut console = open(&p.admin)
        .await
        .context("PgBouncer's admin console, to pause it for the copy")?;
    let mut paused = Vec::new();
    let mut result = Ok(());
    for db in &p.databases {
        let pause = tokio::time::timeout(PAUSE_LIMIT, console.simple_query(&format!("PAUSE {db}"))).await;
        match pause {
            Ok(Ok(_)) => paused.push(db),
            Ok(Err(e)) => result = Err(anyhow!("PgBouncer's PAUSE {db}: {e}")),
            Err(_) => {
                result = Err(anyhow!(
                    "PgBouncer's PAUSE {db} did not end within {PAUSE_LIMIT:?}: a client of its holds a \
                     query or a session open; close it"
                ))
            }
        }
        if result.is_err() {
            break;
        }
    }
    let out = match result {
        Ok(()) => work.await,
        Err(e) => Err(e),
    };
    // A console that timed out mid-PAUSE is in an unknown state: a new one resumes.
    let mut console = match open(&p.admin).await {
        Ok(c) => c,
        Err(_) => console,
    };
    for db in &p.databases {
        if let Err(e) = console.simple_query(&format!("RESUME {db}")).await {
            // A name that was never paused refuses RESUME: only the paused ones matter.
            if paused.contains(&db) {
                console.close().await;
                return Err(anyhow!(
                    "PgBouncer's RESUME {db}: {e}; run RESUME {db} on its admin console"
                ));
            }
        }
    }
    console.close().await;
    out
}

/// How long PgBouncer's PAUSE may wait for its clients.
const PAUSE_LIMIT: Duration = Duration::from_secs(10);

async fn run_all(s: &mut Session, statements: &[String]) -> Result<()> {
    for sql in statements {
        s.simple_query(sql).await.map_err(|e| anyhow!("{sql}: {e}"))?;
    }
    Ok(())
}

async fn exists(s: &mut Session, db: &str) -> Result<bool> {
    let sql = format!("SELECT 1 FROM pg_database WHERE datname = {}", pg_literal(db));
    Ok(!s.query_column(&sql).await?.is_empty())
}

async fn take_postgres(s: &mut Session, pooler: Option<&Pooler>, db: &str, copy: &str) -> Result<Kept> {
    let owner = s
        .query_column(&format!(
            "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = {}",
            pg_literal(db)
        ))
        .await?
        .pop()
        .ok_or_else(|| anyhow!("database {db} does not exist"))?;
    let after = s.query_column(&PG_KEPT.replace("$DB", &pg_literal(db))).await?;
    let copied = format!("CREATE DATABASE {} TEMPLATE {}", pg_ident(copy), pg_ident(db));
    paused(pooler, async {
        s.simple_query(&copied)
            .await
            .map_err(|e| anyhow!("{copied}: {e}{}", busy_hint(&e.to_string())))
    })
    .await?;
    let mark = format!(
        "COMMENT ON DATABASE {} IS {}",
        pg_ident(copy),
        pg_literal(&format!(
            "connbench: a copy of {db} each repetition starts from; dropped at the run's end"
        ))
    );
    s.simple_query(&mark).await.map_err(|e| anyhow!("{mark}: {e}"))?;
    Ok(Kept::Postgres { owner, after })
}

/// What to do about "being accessed by other users".
fn busy_hint(e: &str) -> &'static str {
    if e.contains("being accessed by other users") {
        " (the database must have no other connection while it is copied or dropped: close them; \
         a pooler of your own in front of it holds server connections, so restore through a cell \
         whose target is the server itself, or with restore = \"none\")"
    } else {
        ""
    }
}

async fn restore_postgres(s: &mut Session, db: &str, copy: &str, owner: &str) -> Result<()> {
    // The server waits up to 5 s for the backends of connections just closed to exit.
    let drop = format!("DROP DATABASE {}", pg_ident(db));
    s.simple_query(&drop)
        .await
        .map_err(|e| anyhow!("{drop}: {e}{}", busy_hint(&e.to_string())))?;
    let make = format!(
        "CREATE DATABASE {} TEMPLATE {} OWNER {}",
        pg_ident(db),
        pg_ident(copy),
        pg_ident(owner)
    );
    s.simple_query(&make).await.map_err(|e| anyhow!("{make}: {e}"))?;
    Ok(())
}

/// The database's base tables, each with its AUTO_INCREMENT counter.
async fn mysql_tables(s: &mut Session, db: &str) -> Result<Vec<(String, Option<u64>)>> {
    let rows = s
        .query_column(&format!(
            "SELECT CONCAT(table_name, '|', IFNULL(auto_increment, '')) FROM information_schema.tables \
             WHERE table_schema = {} AND table_type = 'BASE TABLE' ORDER BY table_name",
            my_literal(db)
        ))
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let (t, n) = r.rsplit_once('|').unwrap_or((&r, ""));
            (t.to_string(), n.parse().ok())
        })
        .collect())
}

async fn take_mysql(s: &mut Session, db: &str, copy: &str) -> Result<Kept> {
    let tables = mysql_tables(s, db).await?;
    let mut sql = vec![format!("CREATE DATABASE {}", my_ident(copy))];
    for (t, _) in &tables {
        let (from, to) = (
            format!("{}.{}", my_ident(db), my_ident(t)),
            format!("{}.{}", my_ident(copy), my_ident(t)),
        );
        sql.push(format!("CREATE TABLE {to} LIKE {from}"));
        sql.push(format!("INSERT INTO {to} SELECT * FROM {from}"));
    }
    run_all(s, &sql).await.map_err(|e| {
        let denied = e.to_string().contains("denied");
        anyhow!(
            "{e:#}{}",
            if denied {
                format!(
                    " (the role needs to make and drop the schemas connbench's restores use: \
                     GRANT ALL ON `{}%`.* TO it)",
                    PREFIX.replace('_', "\\_")
                )
            } else {
                String::new()
            }
        )
    })?;
    Ok(Kept::Mysql { tables })
}

async fn restore_mysql(
    s: &mut Session,
    db: &str,
    copy: &str,
    tables: &[(String, Option<u64>)],
) -> Result<()> {
    // Tables emptied and filled in any order: a foreign key between them is checked by
    // neither (for this session only).
    let mut sql = vec!["SET FOREIGN_KEY_CHECKS = 0".to_string()];
    for (t, _) in mysql_tables(s, db).await? {
        if !tables.iter().any(|(k, _)| *k == t) {
            sql.push(format!("DROP TABLE {}.{}", my_ident(db), my_ident(&t)));
        }
    }
    for (t, counter) in tables {
        let (to, from) = (
            format!("{}.{}", my_ident(db), my_ident(t)),
            format!("{}.{}", my_ident(copy), my_ident(t)),
        );
        sql.push(format!("TRUNCATE TABLE {to}"));
        sql.push(format!("INSERT INTO {to} SELECT * FROM {from}"));
        if let Some(n) = counter {
            sql.push(format!("ALTER TABLE {to} AUTO_INCREMENT = {n}"));
        }
    }
    sql.push("SET FOREIGN_KEY_CHECKS = 1".to_string());
    run_all(s, &sql).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_quoted_for_each_engine() {
        assert_eq!(pg_ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(my_ident("a`b"), "`a``b`");
        assert_eq!(my_literal("it's \\"), "'it''s \\\\'");
        assert!(copy_name(2).starts_with(PREFIX) && copy_name(2).ends_with("_2"));
    }
}

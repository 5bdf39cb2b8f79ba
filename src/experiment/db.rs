//! The two databases a results store can live in, behind one small interface: SQLite (a
//! file, the default for one machine) and PostgreSQL (one place many machines write to).
//!
//! The store writes each statement once, in the SQL both understand: `$1` placeholders
//! (rewritten to SQLite's `?1`), upserts with `ON CONFLICT`, `RETURNING`, and column types
//! written as `{ID}`, `{INT}`, `{REAL}` and `{BLOB}`, which [`Db::ddl`] renders for each
//! (a SQLite rowid key is `INTEGER PRIMARY KEY`, PostgreSQL needs `BIGINT` to hold
//! nanoseconds). Values cross as [`Val`], which converts to and from both drivers' types
//! itself, so a NULL needs no declared type.
//!
//! rust-postgres' blocking client runs its own runtime, which may not be entered from
//! inside ours (every command runs inside one); so the PostgreSQL connection lives on a
//! thread of its own and statements are sent to it, each caller waiting for its answer.

use std::sync::mpsc;

use anyhow::{anyhow, Context, Result};

/// rust-postgres' TLS hook, filled with the rustls set-up targets use
/// ([`crate::net::transport::TlsSetup`]): the store then means by sslmode, sslrootcert
/// and the host name exactly what a target does. (tokio-postgres-rustls would bring its
/// own verification, not libpq's sslmode meanings, and one more dependency.)
struct StoreTls(crate::net::transport::TlsSetup);

impl postgres::tls::MakeTlsConnect<postgres::Socket> for StoreTls {
    type Stream = StoreTlsStream;
    type TlsConnect = StoreTlsConnect;
    type Error = std::io::Error;

    fn make_tls_connect(&mut self, _domain: &str) -> std::io::Result<StoreTlsConnect> {
        // The server name was fixed from the target's host by TlsSetup.
        Ok(StoreTlsConnect(self.0.config.clone(), self.0.server_name.clone()))
    }
}

struct StoreTlsConnect(
    std::sync::Arc<rustls::ClientConfig>,
    rustls_pki_types::ServerName<'static>,
);

impl postgres::tls::TlsConnect<postgres::Socket> for StoreTlsConnect {
    type Stream = StoreTlsStream;
    type Error = std::io::Error;
    type Future =
        std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<StoreTlsStream>> + Send>>;

    fn connect(self, stream: postgres::Socket) -> Self::Future {
        Box::pin(async move {
            let s = tokio_rustls::TlsConnector::from(self.0)
                .connect(self.1, stream)
                .await?;
            Ok(StoreTlsStream(s))
        })
    }
}

struct StoreTlsStream(tokio_rustls::client::TlsStream<postgres::Socket>);

impl postgres::tls::TlsStream for StoreTlsStream {
    fn channel_binding(&self) -> postgres::tls::ChannelBinding {
        // SCRAM's channel binding is optional (`prefer`); none is offered.
        postgres::tls::ChannelBinding::none()
    }
}

impl tokio::io::AsyncRead for StoreTlsStream {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for StoreTlsStream {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// A value crossing to or from either database.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl Val {
    pub fn int(&self) -> Option<i64> {
        match self {
            Val::Int(i) => Some(*i),
            Val::Real(r) => Some(*r as i64),
            _ => None,
        }
    }
    pub fn real(&self) -> Option<f64> {
        match self {
            Val::Real(r) => Some(*r),
            Val::Int(i) => Some(*i as f64),
            _ => None,
        }
    }
    pub fn text(&self) -> Option<String> {
        match self {
            Val::Text(s) => Some(s.clone()),
            _ => None,
        }
    }
    pub fn blob(&self) -> Option<Vec<u8>> {
        match self {
            Val::Blob(b) => Some(b.clone()),
            _ => None,
        }
    }
}

impl From<i64> for Val {
    fn from(v: i64) -> Val {
        Val::Int(v)
    }
}
impl From<bool> for Val {
    fn from(v: bool) -> Val {
        Val::Int(v as i64)
    }
}
impl From<f64> for Val {
    fn from(v: f64) -> Val {
        Val::Real(v)
    }
}
impl From<&str> for Val {
    fn from(v: &str) -> Val {
        Val::Text(v.to_string())
    }
}
impl From<String> for Val {
    fn from(v: String) -> Val {
        Val::Text(v)
    }
}
impl<T: Into<Val>> From<Option<T>> for Val {
    fn from(v: Option<T>) -> Val {
        v.map(Into::into).unwrap_or(Val::Null)
    }
}
impl From<Vec<u8>> for Val {
    fn from(v: Vec<u8>) -> Val {
        Val::Blob(v)
    }
}

/// A row as read: one value per selected column.
pub type Row = Vec<Val>;

type Job = Box<dyn FnOnce(&mut postgres::Client) + Send>;

/// An open database.
pub enum Db {
    Sqlite(rusqlite::Connection),
    Postgres(mpsc::Sender<Job>),
}

impl Db {
    pub fn sqlite(path: &std::path::Path) -> Result<Db> {
        let conn = rusqlite::Connection::open(path)?;
        conn.execute_batch(
            "PRAGMA foreign_keys = ON; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
             PRAGMA busy_timeout = 10000;",
        )?;
        Ok(Db::Sqlite(conn))
    }

    /// Connects to PostgreSQL. `conninfo` is read as libpq reads it (the same parser as
    /// targets: PG* variables, passfile); a password still missing comes from
    /// `CONNBENCH_STORE_PASSWORD` (a Kubernetes Secret sets it).
    pub fn postgres(conninfo: &str) -> Result<Db> {
        let t = crate::targets::Target::parse(conninfo)?;
        if t.engine != crate::targets::Engine::Postgres {
            anyhow::bail!("a results store is a SQLite file or a PostgreSQL database");
        }
        // TLS as a target gets it (libpq's sslmode, sslrootcert for verify-ca/-full).
        let tls = crate::net::transport::TlsSetup::for_target(&t)
            .map_err(|e| anyhow!("the results store's TLS (sslmode={}): {e}", t.sslmode.as_str()))?;
        let mut config = postgres::Config::new();
        config.ssl_mode(match t.sslmode {
            crate::targets::SslMode::Disable => postgres::config::SslMode::Disable,
            crate::targets::SslMode::Prefer => postgres::config::SslMode::Prefer,
            _ => postgres::config::SslMode::Require,
        });
        match &t.host {
            crate::targets::Host::Tcp(h) => config.host(h),
            crate::targets::Host::Unix(dir) => config.host_path(dir),
        };
        config.port(t.port).user(&t.user).dbname(&t.dbname);
        if let Some(pw) = t
            .password()
            .map(str::to_string)
            .or_else(|| std::env::var("CONNBENCH_STORE_PASSWORD").ok())
        {
            config.password(pw);
        }
        config.connect_timeout(t.connect_timeout.unwrap_or(std::time::Duration::from_secs(10)));
        config.application_name("connbench-store");
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready, connected) = mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("connbench-store".into())
            .spawn(move || {
                let connected = match tls {
                    Some(tls) => config.connect(StoreTls(tls)),
                    None => config.connect(postgres::NoTls),
                };
                match connected {
                    Ok(mut client) => {
                        let _ = ready.send(Ok(()));
                        // Ends when the Db (the only sender) is dropped.
                        for job in queue {
                            job(&mut client);
                        }
                    }
                    Err(e) => {
                        // rust-postgres' own text hides the cause ("error performing TLS
                        // handshake"): say each error of the chain.
                        let mut said = e.to_string();
                        let mut cause = std::error::Error::source(&e);
                        while let Some(c) = cause {
                            said = format!("{said}: {c}");
                            cause = c.source();
                        }
                        let _ = ready.send(Err(anyhow!("{said}")));
                    }
                }
            })
            .context("cannot start the results store's thread")?;
        connected
            .recv()
            .map_err(|_| anyhow!("the results store's thread ended"))??;
        Ok(Db::Postgres(jobs))
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self, Db::Postgres(_))
    }

    /// Runs `f` on the PostgreSQL connection's thread and waits for its answer.
    fn on_pg<R: Send + 'static>(
        jobs: &mpsc::Sender<Job>,
        f: impl FnOnce(&mut postgres::Client) -> R + Send + 'static,
    ) -> Result<R> {
        let (tx, rx) = mpsc::sync_channel(1);
        jobs.send(Box::new(move |c| {
            let _ = tx.send(f(c));
        }))
        .map_err(|_| anyhow!("the results store's connection is closed"))?;
        rx.recv()
            .map_err(|_| anyhow!("the results store's connection is closed"))
    }

    /// `text` with the store's type words rendered for this database.
    pub fn ddl(&self, text: &str) -> String {
        let (id, int, real, blob) = match self {
            Db::Sqlite(_) => ("INTEGER PRIMARY KEY", "INTEGER", "REAL", "BLOB"),
            Db::Postgres(_) => (
                "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
                "BIGINT",
                "DOUBLE PRECISION",
                "BYTEA",
            ),
        };
        text.replace("{ID}", id)
            .replace("{INT}", int)
            .replace("{REAL}", real)
            .replace("{BLOB}", blob)
    }

    /// Runs statements without parameters or results (schema changes, BEGIN, COMMIT).
    pub fn batch(&self, sql: &str) -> Result<()> {
        match self {
            Db::Sqlite(c) => c.execute_batch(&self.ddl(sql)).map_err(sqlite_error),
            Db::Postgres(jobs) => {
                let sql = self.ddl(sql);
                Db::on_pg(jobs, move |c| c.batch_execute(&sql))?.map_err(pg_error)
            }
        }
    }

    /// Runs one statement; returns the rows it changed.
    pub fn exec(&self, sql: &str, params: &[Val]) -> Result<u64> {
        match self {
            Db::Sqlite(c) => c
                .execute(&sqlite_placeholders(sql), rusqlite::params_from_iter(params))
                .map(|n| n as u64)
                .map_err(sqlite_error),
            Db::Postgres(jobs) => {
                let (sql, params) = (sql.to_string(), params.to_vec());
                Db::on_pg(jobs, move |c| {
                    let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                        params.iter().map(|p| p as _).collect();
                    c.execute(&sql, &refs)
                })?
                .map_err(pg_error)
            }
        }
    }

    /// Runs one query; returns its rows.
    pub fn query(&self, sql: &str, params: &[Val]) -> Result<Vec<Row>> {
        match self {
            Db::Sqlite(c) => {
                let mut q = c.prepare(&sqlite_placeholders(sql))?;
                let n = q.column_count();
                let rows = q.query_map(rusqlite::params_from_iter(params), |r| {
                    (0..n).map(|i| r.get::<_, Val>(i)).collect::<Result<Row, _>>()
                })?;
                Ok(rows.collect::<Result<_, _>>()?)
            }
            Db::Postgres(jobs) => {
                let (sql, params) = (sql.to_string(), params.to_vec());
                Db::on_pg(jobs, move |c| {
                    let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                        params.iter().map(|p| p as _).collect();
                    c.query(&sql, &refs).and_then(|rows| {
                        rows.iter()
                            .map(|r| (0..r.len()).map(|i| r.try_get::<_, Val>(i)).collect())
                            .collect::<Result<Vec<Row>, _>>()
                    })
                })?
                .map_err(pg_error)
            }
        }
    }

    /// The first row of a query, if any.
    pub fn query_one(&self, sql: &str, params: &[Val]) -> Result<Option<Row>> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// The database server's clock in microseconds since the epoch; `None` for SQLite,
    /// whose clock is this machine's.
    pub fn server_clock_us(&self) -> Result<Option<i64>> {
        if !self.is_postgres() {
            return Ok(None);
        }
        let row = self.query_one(
            "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint",
            &[],
        )?;
        Ok(row.and_then(|r| r[0].int()))
    }
}

/// SQLite's error, with what to do when the disk is full (what was saved stays).
fn sqlite_error(e: rusqlite::Error) -> anyhow::Error {
    let full = e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull)
        || e.to_string().contains("database or disk is full");
    if full {
        anyhow!(
            "the disk holding the results store is full ({e}); everything saved before this is kept: \
             free some space, or pass --store on another disk, and run again"
        )
    } else {
        e.into()
    }
}

/// PostgreSQL's own message: the SQLSTATE's text and detail, not the driver's wrapper.
fn pg_error(e: postgres::Error) -> anyhow::Error {
    match e.as_db_error() {
        Some(db) => anyhow!(
            "{} ({}){}",
            db.message(),
            db.code().code(),
            db.detail().map(|d| format!(": {d}")).unwrap_or_default()
        ),
        None => anyhow!("{e}"),
    }
}

/// `$1` -> `?1`: SQLite binds `?NNN` by number, as PostgreSQL binds `$NNN`.
fn sqlite_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(|d| d.is_ascii_digit()) {
            out.push('?');
        } else {
            out.push(c);
        }
    }
    out
}

impl rusqlite::ToSql for Val {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match self {
            Val::Null => ValueRef::Null,
            Val::Int(i) => ValueRef::Integer(*i),
            Val::Real(r) => ValueRef::Real(*r),
            Val::Text(s) => ValueRef::Text(s.as_bytes()),
            Val::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

impl rusqlite::types::FromSql for Val {
    fn column_result(v: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Val> {
        use rusqlite::types::ValueRef;
        Ok(match v {
            ValueRef::Null => Val::Null,
            ValueRef::Integer(i) => Val::Int(i),
            ValueRef::Real(r) => Val::Real(r),
            ValueRef::Text(t) => Val::Text(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Blob(b) => Val::Blob(b.to_vec()),
        })
    }
}

impl postgres::types::ToSql for Val {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        use postgres::types::{IsNull, Type};
        match self {
            Val::Null => Ok(IsNull::Yes),
            // A parameter's type is the column's: convert to it.
            Val::Int(i) if *ty == Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
            Val::Int(i) if *ty == Type::FLOAT8 => (*i as f64).to_sql(ty, out),
            Val::Int(i) if *ty == Type::BOOL => (*i != 0).to_sql(ty, out),
            Val::Int(i) => i.to_sql(ty, out),
            Val::Real(r) => r.to_sql(ty, out),
            Val::Text(s) => s.to_sql(ty, out),
            Val::Blob(b) => b.to_sql(ty, out),
        }
    }

    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

impl<'a> postgres::types::FromSql<'a> for Val {
    fn from_sql(
        ty: &postgres::types::Type,
        raw: &'a [u8],
    ) -> Result<Val, Box<dyn std::error::Error + Sync + Send>> {
        use postgres::types::Type;
        Ok(match *ty {
            Type::INT8 => Val::Int(i64::from_sql(ty, raw)?),
            Type::INT4 => Val::Int(i32::from_sql(ty, raw)?.into()),
            Type::INT2 => Val::Int(i16::from_sql(ty, raw)?.into()),
            Type::BOOL => Val::Int(bool::from_sql(ty, raw)? as i64),
            Type::FLOAT8 => Val::Real(f64::from_sql(ty, raw)?),
            Type::FLOAT4 => Val::Real(f32::from_sql(ty, raw)?.into()),
            Type::BYTEA => Val::Blob(Vec::<u8>::from_sql(ty, raw)?),
            _ => Val::Text(String::from_sql(ty, raw)?),
        })
    }

    fn from_sql_null(_: &postgres::types::Type) -> Result<Val, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Val::Null)
    }

    fn accepts(ty: &postgres::types::Type) -> bool {
        use postgres::types::Type;
        matches!(
            *ty,
            Type::INT8
                | Type::INT4
                | Type::INT2
                | Type::BOOL
                | Type::FLOAT8
                | Type::FLOAT4
                | Type::BYTEA
                | Type::TEXT
                | Type::VARCHAR
                | Type::BPCHAR
                | Type::NAME
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_renumbered_for_sqlite() {
        assert_eq!(
            sqlite_placeholders("UPDATE t SET a = $2 WHERE id = $1 AND b = '$x'"),
            "UPDATE t SET a = ?2 WHERE id = ?1 AND b = '$x'"
        );
    }
}

//! Wire sessions: connect in timed phases, then run queries.
//!
//! This module owns the engine-neutral vocabulary of a connection set-up: the
//! [`Phase`]s, the [`Timeline`] one connect produces (time and round trips per phase, as
//! plain data for `stats` and `report`), and [`ConnectError`], which always names the
//! phase that failed. Each database engine implements its session in a submodule
//! (`postgres`, and `mysql` for MySQL and MariaDB) and fills the same `Timeline`, so
//! everything downstream works for every engine unchanged.
//!
//! The engine seam: an [`Endpoint`] says which [`Engine`] it speaks; [`connect`] opens a
//! [`Session`] of that engine, and a `Session` is an enum over the engines' sessions, so
//! the measurement loops and the workload executor call one API and never branch on the
//! engine themselves. A second engine adds a variant and a submodule; an enum rather than
//! a trait object keeps the per-statement call on the hot path a static dispatch.
//!
//! The timed connect itself is written once ([`connect_as`], generic over [`Wire`], what
//! each engine's session supplies); `socket` holds the phases both engines share
//! (`resolve`, the socket `connect`).

pub mod mysql;
pub mod postgres;
mod socket;

use std::fmt;
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use crate::net::transport::{Counters, Stream, TlsInfo, TlsSetup};
pub use crate::targets::Engine;
use crate::targets::Target;

/// The phases of a connection set-up, in wire order, plus the optional first query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Host name to addresses (TCP only; an IP literal takes no lookup).
    Resolve,
    /// The socket connect: TCP's handshake, or a Unix socket's connect.
    Connect,
    /// SSLRequest and its one-byte answer, then the TLS handshake.
    Tls,
    /// StartupMessage to the server's first authentication message: the backend start.
    Startup,
    /// Every exchange up to AuthenticationOk.
    Auth,
    /// AuthenticationOk to ReadyForQuery: backend initialisation, as far as the server
    /// lets the wire show it (see docs/statistics.md on what PostgreSQL flushes when).
    Ready,
    /// One simple query to its ReadyForQuery (`connect -q`).
    Query,
}

impl Phase {
    pub const ALL: [Phase; 7] = [
        Phase::Resolve,
        Phase::Connect,
        Phase::Tls,
        Phase::Startup,
        Phase::Auth,
        Phase::Ready,
        Phase::Query,
    ];
    pub const COUNT: usize = Phase::ALL.len();

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Resolve => "resolve",
            Phase::Connect => "connect",
            Phase::Tls => "tls",
            Phase::Startup => "startup",
            Phase::Auth => "auth",
            Phase::Ready => "ready",
            Phase::Query => "query",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    fn from_index(i: u8) -> Phase {
        Phase::ALL[i as usize % Phase::COUNT]
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One phase of one connect: how long it took and how many round trips it waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Span {
    pub ns: u64,
    pub round_trips: u32,
}

/// Everything measured about one successful connect.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Timeline {
    /// Indexed by [`Phase::index`]; `None` for phases this connect did not have.
    pub phases: [Option<Span>; Phase::COUNT],
    /// From the start of the first phase to the end of the last; the phases add up to it.
    pub total_ns: u64,
    pub counters: Counters,
    pub tls: Option<TlsInfo>,
}

impl Timeline {
    pub fn phase(&self, p: Phase) -> Option<Span> {
        self.phases[p.index()]
    }
}

/// Marks phase boundaries on one clock. Each phase ends where the next begins, so the
/// phases add up to the total exactly (the only gap is the timer's resolution).
#[derive(Debug)]
pub struct Stopwatch {
    start: Instant,
    last: Instant,
    last_round_trips: u32,
    timeline: Timeline,
}

impl Stopwatch {
    pub fn start() -> Self {
        let now = Instant::now();
        Stopwatch {
            start: now,
            last: now,
            last_round_trips: 0,
            timeline: Timeline::default(),
        }
    }

    /// Ends `phase` now; `round_trips` is the stream's running count.
    pub fn mark(&mut self, phase: Phase, round_trips: u32) {
        let now = Instant::now();
        self.timeline.phases[phase.index()] = Some(Span {
            ns: (now - self.last).as_nanos() as u64,
            round_trips: round_trips - self.last_round_trips,
        });
        self.last = now;
        self.last_round_trips = round_trips;
    }

    /// Ends `phase` now, for a phase whose round trips the kernel makes out of the
    /// stream counter's sight: TCP's handshake (SYN, SYN-ACK) is one round trip before
    /// `connect` returns.
    pub fn mark_network(&mut self, phase: Phase, round_trips: u32) {
        self.mark(phase, self.last_round_trips);
        if let Some(span) = self.timeline.phases[phase.index()].as_mut() {
            span.round_trips = round_trips;
        }
    }

    pub fn finish(mut self, counters: Counters, tls: Option<TlsInfo>) -> Timeline {
        self.timeline.total_ns = (self.last - self.start).as_nanos() as u64;
        self.timeline.counters = counters;
        self.timeline.tls = tls;
        self.timeline
    }
}

/// The phase a connect is in, readable from outside the connect future so a timeout
/// (which drops that future) can still say where it struck.
#[derive(Debug, Default)]
pub struct PhaseCursor(AtomicU8);

impl PhaseCursor {
    pub fn set(&self, p: Phase) {
        self.0.store(p as u8, Ordering::Relaxed);
    }
    pub fn get(&self) -> Phase {
        Phase::from_index(self.0.load(Ordering::Relaxed))
    }
}

/// A failed connect or query: the phase, and why.
#[derive(Debug, thiserror::Error)]
#[error("{phase}: {kind}")]
pub struct ConnectError {
    pub phase: Phase,
    pub kind: ErrorKind,
}

impl ConnectError {
    pub fn new(phase: Phase, kind: ErrorKind) -> Self {
        ConnectError { phase, kind }
    }

    /// A short stable key for counting failures of this kind (`28P01`, `io:refused`,
    /// `timeout`, ...), so the hot loop counts rather than formats.
    pub fn key(&self) -> String {
        format!("{}:{}", self.phase, self.kind.key())
    }
}

/// Why a phase failed.
#[derive(Debug, thiserror::Error)]
pub enum ErrorKind {
    /// A socket error, with what we were doing ("on 127.0.0.1:1").
    #[error("{}{}", describe_io(.source), .context)]
    Io { source: io::Error, context: String },
    /// An ErrorResponse from the server.
    #[error("{message} ({code})")]
    Server { code: String, message: String },
    #[error("timed out after {} (connect_timeout)", crate::units::format_duration(*.0))]
    Timeout(Duration),
    /// The bound connbench puts on a connect whose target sets no `connect_timeout`.
    #[error(
        "timed out after {} (connbench's bound on a connect when the target sets no connect_timeout)",
        crate::units::format_duration(*.0)
    )]
    Bound(Duration),
    #[error("{0}")]
    Tls(String),
    /// The server said something this client does not expect or support.
    #[error("{0}")]
    Protocol(String),
    /// The target asks for something this connect cannot do (e.g. a password is needed).
    #[error("{0}")]
    Config(String),
    /// The script failed between statements (an expression, `\gset`, `\shell`, ...):
    /// `key` counts it, `message` says what and which command.
    #[error("{message}")]
    Script { key: &'static str, message: String },
}

impl ErrorKind {
    pub fn io(source: io::Error, context: impl Into<String>) -> Self {
        ErrorKind::Io {
            source,
            context: context.into(),
        }
    }

    fn key(&self) -> String {
        match self {
            ErrorKind::Io { source, .. } => format!("io-{:?}", source.kind()).to_lowercase(),
            ErrorKind::Server { code, .. } => code.clone(),
            ErrorKind::Timeout(_) | ErrorKind::Bound(_) => "timeout".into(),
            ErrorKind::Tls(_) => "tls".into(),
            ErrorKind::Protocol(_) => "protocol".into(),
            ErrorKind::Config(_) => "config".into(),
            ErrorKind::Script { key, .. } => format!("script-{key}"),
        }
    }
}

/// An io::Error in words a user reads, without Rust's "(os error N)" suffix.
fn describe_io(e: &io::Error) -> String {
    use io::ErrorKind as K;
    match e.kind() {
        K::ConnectionRefused => "connection refused".into(),
        K::ConnectionReset => "connection reset by the server".into(),
        K::UnexpectedEof => "the server closed the connection".into(),
        K::NotFound => "no such file or directory".into(),
        K::PermissionDenied => "permission denied".into(),
        K::TimedOut => "timed out".into(),
        _ => {
            let s = e.to_string();
            match s.find(" (os error") {
                Some(i) => s[..i].to_string(),
                None => s,
            }
        }
    }
}

/// A target prepared for many connects: validated, with its TLS context built once.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub target: Target,
    pub tls: Option<TlsSetup>,
}

impl Endpoint {
    pub fn new(target: Target) -> Result<Endpoint, ConnectError> {
        let tls =
            TlsSetup::for_target(&target).map_err(|e| ConnectError::new(Phase::Tls, ErrorKind::Config(e)))?;
        Ok(Endpoint { target, tls })
    }

    /// The wire protocol this endpoint speaks.
    pub fn engine(&self) -> Engine {
        self.target.engine
    }
}

/// How long a connect may take when the target sets no `connect_timeout`. libpq and the
/// MySQL clients wait forever by default; connbench bounds every wait on a peer, so a
/// server or proxy that accepts and never answers ends the connect with a timeout error
/// instead of hanging the run.
pub const DEFAULT_CONNECT_LIMIT: Duration = Duration::from_secs(15);

impl Endpoint {
    /// The bound on one connect: the target's `connect_timeout`, else
    /// [`DEFAULT_CONNECT_LIMIT`].
    pub fn connect_limit(&self) -> Duration {
        self.target.connect_timeout.unwrap_or(DEFAULT_CONNECT_LIMIT)
    }
}

/// A statement to run, in one of the three query modes.
#[derive(Debug, Clone, Copy)]
pub enum Statement<'a> {
    /// SQL with its parameter values already in the text.
    Simple(&'a str),
    /// SQL with placeholders, parsed each time.
    Extended(&'a str),
    /// The name of a statement prepared on this connection.
    Prepared(&'a str),
}

/// What a simple query returned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryOutcome {
    pub rows: u64,
    /// The first column of the first row, as text, when there was one.
    pub first_value: Option<String>,
}

/// One result of a statement (a compound has one per statement), as `\gset` and
/// `\aset` read it: the column names, how many rows, and the last row's values (`None`
/// for NULL). A command that returns no rows has no columns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResultSet {
    pub columns: Vec<String>,
    pub rows: u64,
    pub last_row: Vec<Option<String>>,
    /// Whether the statement returns rows (a SELECT), even none of them.
    pub returns_rows: bool,
}

/// Where a session is between transactions, as the server last said (PostgreSQL's
/// ReadyForQuery status; MySQL's SERVER_STATUS_IN_TRANS flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionStatus {
    Idle,
    /// Inside a transaction block that is still good.
    InBlock,
    /// Inside a transaction block that failed and must be rolled back.
    Failed,
}

/// An open, authenticated session of one engine, ready for queries.
#[derive(Debug)]
pub enum Session {
    Postgres(postgres::Session),
    Mysql(mysql::Session),
}

/// Opens a session of the endpoint's engine, timing every phase, within the endpoint's
/// [`Endpoint::connect_limit`]. `cursor` tracks the phase in progress, so that a timeout
/// says where it struck.
pub async fn connect(ep: &Endpoint, cursor: &PhaseCursor) -> Result<(Session, Timeline), ConnectError> {
    bounded(ep, cursor, async {
        match ep.engine() {
            Engine::Postgres => {
                let (s, t) = connect_as::<postgres::Session>(ep, cursor).await?;
                Ok((Session::Postgres(s), t))
            }
            Engine::Mysql => {
                let (s, t) = connect_as::<mysql::Session>(ep, cursor).await?;
                Ok((Session::Mysql(s), t))
            }
        }
    })
    .await
}

/// Connects and then runs one query as the `query` phase of the same timeline, within
/// the endpoint's connect limit.
pub async fn connect_and_query(
    ep: &Endpoint,
    sql: &str,
    cursor: &PhaseCursor,
) -> Result<(Session, Timeline), ConnectError> {
    bounded(ep, cursor, async {
        match ep.engine() {
            Engine::Postgres => {
                let (s, t) = connect_and_query_as::<postgres::Session>(ep, sql, cursor).await?;
                Ok((Session::Postgres(s), t))
            }
            Engine::Mysql => {
                let (s, t) = connect_and_query_as::<mysql::Session>(ep, sql, cursor).await?;
                Ok((Session::Mysql(s), t))
            }
        }
    })
    .await
}

/// What a timed connect needs of one engine's session: its phases up to ready, a first
/// query, and its socket. [`connect_as`] and [`connect_and_query_as`] are written once on
/// it; a generic rather than a trait object, so each engine's connect is compiled as its
/// own, with no dynamic call.
pub trait Wire: Sized {
    /// The phases after the socket's up to ready for queries, each marked on `sw`.
    fn open(
        ep: &Endpoint,
        cursor: &PhaseCursor,
        sw: &mut Stopwatch,
    ) -> impl Future<Output = Result<Self, ConnectError>> + Send;
    /// The engine's simple query.
    fn first_query(&mut self, sql: &str) -> impl Future<Output = Result<QueryOutcome, ConnectError>> + Send;
    /// The socket, for its counters and TLS details.
    fn stream(&self) -> &Stream;
}

/// Opens a session of engine `S`, timing every phase. `cursor` tracks the phase in
/// progress, so that a caller's timeout can say where it struck. No time limit of its own
/// ([`connect`] adds the endpoint's).
pub async fn connect_as<S: Wire>(ep: &Endpoint, cursor: &PhaseCursor) -> Result<(S, Timeline), ConnectError> {
    let mut sw = Stopwatch::start();
    let session = S::open(ep, cursor, &mut sw).await?;
    let timeline = sw.finish(session.stream().counters(), session.stream().tls_info());
    Ok((session, timeline))
}

/// Connects and then runs one query as the `query` phase of the same timeline, on the
/// same clock, so the phases still add up to the total.
pub async fn connect_and_query_as<S: Wire>(
    ep: &Endpoint,
    sql: &str,
    cursor: &PhaseCursor,
) -> Result<(S, Timeline), ConnectError> {
    let mut sw = Stopwatch::start();
    let mut session = S::open(ep, cursor, &mut sw).await?;
    cursor.set(Phase::Query);
    session.first_query(sql).await?;
    sw.mark(Phase::Query, session.stream().counters().round_trips);
    let timeline = sw.finish(session.stream().counters(), session.stream().tls_info());
    Ok((session, timeline))
}

fn no_pipelines() -> ConnectError {
    ConnectError::new(
        Phase::Query,
        ErrorKind::Config(
            "MySQL and MariaDB have no pipeline mode in their protocol; remove \\startpipeline ... \\endpipeline \
             from the script"
                .into(),
        ),
    )
}

async fn bounded<T>(
    ep: &Endpoint,
    cursor: &PhaseCursor,
    attempt: impl std::future::Future<Output = Result<T, ConnectError>>,
) -> Result<T, ConnectError> {
    let limit = ep.connect_limit();
    match tokio::time::timeout(limit, attempt).await {
        Ok(r) => r,
        Err(_) if ep.target.connect_timeout.is_some() => {
            Err(ConnectError::new(cursor.get(), ErrorKind::Timeout(limit)))
        }
        Err(_) => Err(ConnectError::new(cursor.get(), ErrorKind::Bound(limit))),
    }
}

impl Session {
    /// The server's version as it reported it at start-up.
    pub fn server_version(&self) -> Option<&str> {
        match self {
            Session::Postgres(s) => s.server_version.as_deref(),
            Session::Mysql(s) => s.server_version.as_deref(),
        }
    }

    /// Whether a socket error made this session unusable.
    pub fn is_broken(&self) -> bool {
        match self {
            Session::Postgres(s) => s.is_broken(),
            Session::Mysql(s) => s.is_broken(),
        }
    }

    /// Whether the session is inside a transaction that failed and must be rolled back.
    pub fn in_failed_transaction(&self) -> bool {
        match self {
            Session::Postgres(s) => s.transaction_status() == b'E',
            // MySQL keeps a transaction open after an error in it: roll it back.
            Session::Mysql(s) => s.in_transaction(),
        }
    }

    /// The transaction status after the last statement.
    pub fn transaction_status(&self) -> TransactionStatus {
        match self {
            Session::Postgres(s) => match s.transaction_status() {
                b'T' => TransactionStatus::InBlock,
                b'E' => TransactionStatus::Failed,
                _ => TransactionStatus::Idle,
            },
            // MySQL keeps a transaction open after an error in it: it is still a block.
            Session::Mysql(s) if s.in_transaction() => TransactionStatus::InBlock,
            Session::Mysql(_) => TransactionStatus::Idle,
        }
    }

    /// The engine's cheapest round trip, for timing the path rather than the server:
    /// PostgreSQL's empty query, MySQL's COM_PING. Neither parses nor runs a statement.
    pub async fn ping(&mut self) -> Result<(), ConnectError> {
        match self {
            Session::Postgres(s) => s.ping().await,
            Session::Mysql(s) => s.ping().await,
        }
    }

    pub async fn simple_query(&mut self, sql: &str) -> Result<QueryOutcome, ConnectError> {
        match self {
            Session::Postgres(s) => s.simple_query(sql).await,
            Session::Mysql(s) => s.simple_query(sql).await,
        }
    }

    /// The first column of every row a query returns, as text.
    pub async fn query_column(&mut self, sql: &str) -> Result<Vec<String>, ConnectError> {
        match self {
            Session::Postgres(s) => s.query_column(sql).await,
            Session::Mysql(s) => s.query_column(sql).await,
        }
    }

    pub async fn prepare(&mut self, name: &str, sql: &str) -> Result<(), ConnectError> {
        match self {
            Session::Postgres(s) => s.prepare(name, sql).await,
            Session::Mysql(s) => s.prepare(name, sql).await,
        }
    }

    /// Runs one statement; returns the rows it affected or returned.
    pub async fn execute(&mut self, stmt: Statement<'_>, params: &[&str]) -> Result<u64, ConnectError> {
        match self {
            Session::Postgres(s) => s.execute(stmt, params).await,
            Session::Mysql(s) => s.execute(stmt, params).await,
        }
    }

    /// Runs one statement and keeps its results' column names and last rows in `out`
    /// (for `\gset` and `\aset`); returns the rows it affected or returned.
    pub async fn execute_results(
        &mut self,
        stmt: Statement<'_>,
        params: &[&str],
        out: &mut Vec<ResultSet>,
    ) -> Result<u64, ConnectError> {
        match self {
            Session::Postgres(s) => s.execute_results(stmt, params, out).await,
            Session::Mysql(s) => s.execute_results(stmt, params, out).await,
        }
    }

    /// Adds a statement to an open pipeline, to be sent by [`Session::pipeline_end`].
    /// MySQL's protocol has no pipelines: an error saying so.
    pub fn pipeline_send(&mut self, stmt: Statement<'_>, params: &[&str]) -> Result<(), ConnectError> {
        match self {
            Session::Postgres(s) => s.pipeline_send(stmt, params),
            Session::Mysql(_) => Err(no_pipelines()),
        }
    }

    /// A synchronisation point inside the pipeline.
    pub fn pipeline_sync(&mut self) -> Result<(), ConnectError> {
        match self {
            Session::Postgres(s) => {
                s.pipeline_sync();
                Ok(())
            }
            Session::Mysql(_) => Err(no_pipelines()),
        }
    }

    /// Sends the pipeline and reads every answer; the first error, if any.
    pub async fn pipeline_end(&mut self) -> Result<u64, ConnectError> {
        match self {
            Session::Postgres(s) => s.pipeline_end().await,
            Session::Mysql(_) => Err(no_pipelines()),
        }
    }

    /// Forgets a pipeline the script will not end (it failed inside it).
    pub fn pipeline_abandon(&mut self) {
        if let Session::Postgres(s) = self {
            s.pipeline_abandon();
        }
    }

    /// Bytes and round trips on the socket so far.
    pub fn counters(&self) -> Counters {
        match self {
            Session::Postgres(s) => s.counters(),
            Session::Mysql(s) => s.counters(),
        }
    }

    /// Says goodbye (Terminate) and closes the socket.
    pub async fn close(self) {
        match self {
            Session::Postgres(s) => s.close().await,
            Session::Mysql(s) => s.close().await,
        }
    }
}

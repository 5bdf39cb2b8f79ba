//! Wire sessions: connect in timed phases, then run queries.
//!
//! This module owns the engine-neutral vocabulary of a connection set-up: the
//! [`Phase`]s, the [`Timeline`] one connect produces (time and round trips per phase, as
//! plain data for `stats` and `report`), and [`ConnectError`], which always names the
//! phase that failed. Each database engine implements its session in a submodule
//! (`postgres` today; MySQL/MariaDB next) and fills the same `Timeline`, so everything
//! downstream works for every engine unchanged.

pub mod postgres;

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use crate::transport::{Counters, TlsInfo};

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
    #[error("timed out after {} (connect_timeout)", crate::report::format_duration(*.0))]
    Timeout(Duration),
    #[error("{0}")]
    Tls(String),
    /// The server said something this client does not expect or support.
    #[error("{0}")]
    Protocol(String),
    /// The target asks for something this connect cannot do (e.g. a password is needed).
    #[error("{0}")]
    Config(String),
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
            ErrorKind::Timeout(_) => "timeout".into(),
            ErrorKind::Tls(_) => "tls".into(),
            ErrorKind::Protocol(_) => "protocol".into(),
            ErrorKind::Config(_) => "config".into(),
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

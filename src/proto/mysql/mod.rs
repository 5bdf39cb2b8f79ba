//! The MySQL/MariaDB wire session: a phased connect, text queries and binary prepared
//! statements, on the `mysql_common` crate's packets and authentication plugins (it does
//! no I/O, so connbench owns the socket and the clock, as for PostgreSQL).
//!
//! MySQL's handshake is server-first, so its phases differ from PostgreSQL's in order
//! and meaning: `connect` (the socket), `startup` (waiting for the server's greeting:
//! the server accepts the connection and starts its thread), `tls` (SSLRequest and the
//! handshake, when the target asks for TLS), then `auth`: the handshake response, any
//! auth-switch request and plugin exchanges (`caching_sha2_password`'s fast path, its
//! full path with the server's RSA key, `client_ed25519`), up to the OK packet. The OK
//! packet is the server's only "ready" signal, so it ends `auth` and there is no
//! separate `ready` phase; docs/statistics.md says so.
//!
//! Packets are length-prefixed (3 bytes, then a sequence number). Every length is checked
//! against [`MAX_PAYLOAD`] before anything is reserved, and every packet is parsed with
//! bounds checks: a hostile or broken peer gets a protocol error naming the phase, never
//! a panic.
//!
//! This file holds the session's packets and queries; `handshake` holds the greeting,
//! TLS and authentication; `response` the reading of a command's response, the hot
//! path; `codec` the pure encodings of values and packet fields, and the command bytes.

pub mod codec;
mod handshake;
mod raw;
mod response;

use std::collections::HashMap;

use bytes::{Buf, BytesMut};
use mysql_common::constants::{CapabilityFlags, StatusFlags};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::socket::closed;
pub use super::Endpoint;
use super::{ConnectError, ErrorKind, Phase, QueryOutcome, ResultSet, Statement};
use crate::net::transport::{Counters, Stream};
use codec::{
    column_name, encode_execute, eof_status, frame_split, header, lenenc_int, lenenc_str, ok_packet,
    payload_len, placeholders, prepare_ok, server_error, COM_PING, COM_QUERY, COM_QUIT, COM_STMT_CLOSE,
    COM_STMT_EXECUTE, COM_STMT_PREPARE, SPLIT,
};
pub use raw::CommandOutcome;

/// The largest payload connbench accepts (a result row of connbench's workloads is a few
/// bytes; a server that announces more is broken or hostile).
const MAX_PAYLOAD: usize = 64 << 20;

/// The room `Session::wbuf` keeps for a packet's header (3 bytes of length, the sequence
/// number): a payload under 16 MiB, every one on the hot path, is framed where it was
/// written and goes out with no copy.
const HEADER: usize = 4;

/// An open, authenticated session, ready for queries.
#[derive(Debug)]
pub struct Session {
    stream: Stream,
    rbuf: BytesMut,
    /// The packet being written: [`HEADER`] bytes of room for its header, then its
    /// payload.
    wbuf: Vec<u8>,
    /// A payload of 16 MiB or more with its several headers, reused from send to send.
    frame: Vec<u8>,
    seq: u8,
    caps: CapabilityFlags,
    /// MariaDB's metadata cache is on (`MARIADB_CLIENT_CACHE_METADATA`, 10.6+): a result
    /// set's column count is followed by a byte saying whether column definitions follow,
    /// and a prepared statement's are sent only when they change. Without it, the server
    /// builds and sends every column's definition on every execution, work a pgbench-class
    /// loop would then measure on the server's side and not the path's (libmariadb asks
    /// for it, so sysbench's point select gets it).
    cache_metadata: bool,
    /// The server's thread id for this connection.
    pub connection_id: u32,
    /// The version the server sent in its greeting.
    pub server_version: Option<String>,
    status: StatusFlags,
    /// Looked up on every execution: with std's SipHash the lookup was about 400
    /// instructions a statement, with foldhash about 100 (callgrind, issue 56); the names
    /// are connbench's own, so a flooding-resistant hash buys nothing here.
    statements: HashMap<String, Prepared, foldhash::fast::RandomState>,
    /// Set by any socket or framing error: the session cannot be used again.
    broken: bool,
}

/// A statement prepared on this connection: its id, and which of the caller's
/// parameters each `?` takes (connbench's scripts number them `$1`, `$2`, ...).
#[derive(Debug, Clone)]
struct Prepared {
    id: u32,
    order: Vec<usize>,
    /// The parameter types the server last received for this statement; while they do
    /// not change, an execution says "no new types" and sends values only.
    types: Vec<u8>,
}

impl Session {
    /// A session on an open socket, before the server's greeting.
    fn on(stream: Stream) -> Session {
        let mut wbuf = Vec::with_capacity(1024);
        wbuf.resize(HEADER, 0);
        Session {
            stream,
            rbuf: BytesMut::with_capacity(8 * 1024),
            wbuf,
            frame: Vec::new(),
            seq: 0,
            caps: CapabilityFlags::empty(),
            cache_metadata: false,
            connection_id: 0,
            server_version: None,
            status: StatusFlags::empty(),
            statements: HashMap::default(),
            broken: false,
        }
    }

    fn round_trips(&self) -> u32 {
        self.stream.counters().round_trips
    }

    /// Bytes and round trips on the socket so far.
    pub fn counters(&self) -> Counters {
        self.stream.counters()
    }

    /// Whether a socket or framing error made this session unusable.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Whether the server says a transaction is open (after an error inside one, the
    /// caller rolls it back).
    pub fn in_transaction(&self) -> bool {
        self.status.contains(StatusFlags::SERVER_STATUS_IN_TRANS)
    }

    /// Sends the payload in `wbuf` as one packet (split at 16 MiB as the protocol
    /// requires), and leaves `wbuf` empty for the next.
    async fn send(&mut self, phase: Phase) -> Result<(), ConnectError> {
        let n = self.wbuf.len() - HEADER;
        let written = if n < SPLIT {
            self.wbuf[..HEADER].copy_from_slice(&header(n, self.seq));
            self.seq = self.seq.wrapping_add(1);
            write(&mut self.stream, &self.wbuf).await
        } else {
            self.frame.clear();
            frame_split(&self.wbuf[HEADER..], &mut self.seq, &mut self.frame);
            write(&mut self.stream, &self.frame).await
        };
        self.wbuf.truncate(HEADER);
        match written {
            Ok(()) => Ok(()),
            Err(e) => {
                self.broken = true;
                Err(self.said_before_closing(phase, e).await)
            }
        }
    }

    /// After a failed write: the error packet the server sent before it closed, if it
    /// sent one (a shutdown's 1053, MySQL 8's 4031 on `wait_timeout`); else "the server
    /// closed the connection" when it closed without a word, as MariaDB 10.11 does on a
    /// `KILL` of an idle session; else the write's own error. Like the PostgreSQL
    /// session, so a closed connection is counted as the same kind whichever side of the
    /// race the client was on (writing first gets EPIPE, reading first an EOF).
    async fn said_before_closing(&mut self, phase: Phase, write: std::io::Error) -> ConnectError {
        const WAIT: std::time::Duration = std::time::Duration::from_millis(500);
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if self.rbuf.len() >= 4 {
                let len = payload_len(&self.rbuf);
                if self.rbuf.len() >= 4 + len {
                    let pkt = self.rbuf.split_to(4 + len);
                    if pkt.get(4) == Some(&0xff) {
                        return server_error(phase, &pkt[4..]);
                    }
                    continue;
                }
            }
            match tokio::time::timeout_at(deadline, self.stream.read_buf(&mut self.rbuf)).await {
                Ok(Ok(n)) if n > 0 => {}
                // It closed without a word: the same failure a client that read first
                // sees, so the kind does not depend on which side of the race it was.
                // (A write that was reset already consumed the reset: then EOF follows.)
                Ok(Ok(_)) if write.kind() != std::io::ErrorKind::ConnectionReset => return closed(phase),
                // A reset is a reset, as a client that read first would count it.
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    return ConnectError::new(phase, ErrorKind::io(e, ""))
                }
                _ => return ConnectError::new(phase, ErrorKind::io(write, "")),
            }
        }
    }

    /// Starts a command: a new sequence, the command byte first.
    fn command(&mut self, cmd: u8) {
        self.seq = 0;
        self.wbuf.truncate(HEADER);
        self.wbuf.push(cmd);
    }

    async fn fill(&mut self, phase: Phase) -> Result<(), ConnectError> {
        match self.stream.read_buf(&mut self.rbuf).await {
            Ok(0) => {
                self.broken = true;
                Err(ConnectError::new(
                    phase,
                    ErrorKind::io(std::io::ErrorKind::UnexpectedEof.into(), ""),
                ))
            }
            Ok(_) => Ok(()),
            Err(e) => {
                self.broken = true;
                Err(ConnectError::new(phase, ErrorKind::io(e, "")))
            }
        }
    }

    /// Reads one whole packet's payload (joining a payload split at 16 MiB). The common
    /// case, one packet already in the read buffer, is split off without a copy.
    async fn packet(&mut self, phase: Phase) -> Result<BytesMut, ConnectError> {
        let mut joined: Option<BytesMut> = None;
        loop {
            while self.rbuf.len() < 4 {
                self.fill(phase).await?;
            }
            let len = payload_len(&self.rbuf);
            if joined.as_ref().map_or(0, |j| j.len()) + len > MAX_PAYLOAD {
                self.broken = true;
                return Err(protocol(
                    phase,
                    format!(
                        "the server announced a packet of more than {} MiB",
                        MAX_PAYLOAD >> 20
                    ),
                ));
            }
            self.seq = self.rbuf[3].wrapping_add(1);
            if self.rbuf.len() < 4 + len {
                self.rbuf.reserve(4 + len - self.rbuf.len());
            }
            while self.rbuf.len() < 4 + len {
                self.fill(phase).await?;
            }
            self.rbuf.advance(4);
            let part = self.rbuf.split_to(len);
            match (&mut joined, len < SPLIT) {
                (None, true) => return Ok(part),
                (Some(j), true) => {
                    j.extend_from_slice(&part);
                    return Ok(joined.take().expect("joined"));
                }
                (None, false) => joined = Some(part),
                (Some(j), false) => j.extend_from_slice(&part),
            }
        }
    }

    /// Buffers the next packet whole, header and payload, and returns the payload's
    /// length: the payload is `rbuf[4..4 + len]` until the caller advances past it.
    /// `None`, with nothing consumed, for a payload split at 16 MiB: [`Session::packet`]
    /// joins those.
    async fn buffered_packet(&mut self, phase: Phase) -> Result<Option<usize>, ConnectError> {
        while self.rbuf.len() < 4 {
            self.fill(phase).await?;
        }
        let len = payload_len(&self.rbuf);
        if len >= SPLIT {
            return Ok(None);
        }
        self.seq = self.rbuf[3].wrapping_add(1);
        if self.rbuf.len() < 4 + len {
            self.rbuf.reserve(4 + len - self.rbuf.len());
        }
        while self.rbuf.len() < 4 + len {
            self.fill(phase).await?;
        }
        Ok(Some(len))
    }

    /// Reads past one packet whose contents are not needed (a column definition).
    async fn skip_packet(&mut self, phase: Phase) -> Result<(), ConnectError> {
        match self.buffered_packet(phase).await? {
            Some(len) => self.rbuf.advance(4 + len),
            None => drop(self.packet(phase).await?),
        }
        Ok(())
    }

    /// The EOF packet that ends column definitions (we never ask for CLIENT_DEPRECATE_EOF).
    async fn eof(&mut self, phase: Phase) -> Result<(), ConnectError> {
        if let Some(len) = self.buffered_packet(phase).await? {
            if (1..9).contains(&len) && self.rbuf[4] == 0xfe {
                self.rbuf.advance(4 + len);
                return Ok(());
            }
        }
        self.broken = true;
        Err(protocol(
            phase,
            "expected an EOF packet after the column definitions".into(),
        ))
    }

    /// COM_PING: the protocol's cheapest round trip, answered OK without parsing or
    /// running anything (an empty COM_QUERY is error 1065, "Query was empty").
    pub async fn ping(&mut self) -> Result<(), ConnectError> {
        self.command(COM_PING);
        self.send(Phase::Query).await?;
        self.response(Phase::Query, |_| {}).await.map(|_| ())
    }

    /// Runs one text query.
    pub async fn simple_query(&mut self, sql: &str) -> Result<QueryOutcome, ConnectError> {
        let rows = self.query_column(sql).await?;
        Ok(QueryOutcome {
            rows: rows.len() as u64,
            first_value: rows.into_iter().next(),
        })
    }

    /// Runs one text query and returns the first column of every row, as text (NULL as
    /// an empty string).
    pub async fn query_column(&mut self, sql: &str) -> Result<Vec<String>, ConnectError> {
        self.command(COM_QUERY);
        self.wbuf.extend_from_slice(sql.as_bytes());
        self.send(Phase::Query).await?;
        let mut out = Vec::new();
        self.response(Phase::Query, |row| {
            out.push(
                lenenc_str(row)
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .unwrap_or_default(),
            )
        })
        .await?;
        Ok(out)
    }

    /// Prepares `sql` (with `$n` placeholders, as connbench's scripts write them) under
    /// `name`.
    pub async fn prepare(&mut self, name: &str, sql: &str) -> Result<(), ConnectError> {
        let (text, order) = placeholders(sql);
        let id = self.prepare_statement(&text).await?;
        self.statements.insert(
            name.to_string(),
            Prepared {
                id,
                order,
                types: Vec::new(),
            },
        );
        Ok(())
    }

    async fn prepare_statement(&mut self, sql: &str) -> Result<u32, ConnectError> {
        let p = Phase::Query;
        self.command(COM_STMT_PREPARE);
        self.wbuf.extend_from_slice(sql.as_bytes());
        self.send(p).await?;
        self.read_prepare_ok(p).await
    }

    /// COM_STMT_PREPARE's answer: COM_STMT_PREPARE_OK's statement id, its parameters' and
    /// columns' definitions read past, or the server's error.
    async fn read_prepare_ok(&mut self, p: Phase) -> Result<u32, ConnectError> {
        let pkt = self.packet(p).await?;
        let ok = match (pkt.first(), prepare_ok(&pkt)) {
            (Some(0xff), _) => return Err(server_error(p, &pkt)),
            (_, Some(ok)) => ok,
            _ => {
                self.broken = true;
                return Err(protocol(p, "malformed COM_STMT_PREPARE response".into()));
            }
        };
        for n in [ok.params, ok.columns] {
            if n > 0 {
                for _ in 0..n {
                    self.skip_packet(p).await?;
                }
                self.eof(p).await?;
            }
        }
        Ok(ok.statement_id)
    }

    /// Runs one statement; returns the rows it affected or returned.
    pub async fn execute(&mut self, stmt: Statement<'_>, params: &[&str]) -> Result<u64, ConnectError> {
        match stmt {
            Statement::Simple(sql) => {
                self.command(COM_QUERY);
                self.wbuf.extend_from_slice(sql.as_bytes());
                self.send(Phase::Query).await?;
                self.response(Phase::Query, |_| {}).await
            }
            Statement::Prepared(name) => {
                // Fields apart, so the statement is borrowed, not cloned, on the hot path.
                let Some(st) = self.statements.get_mut(name) else {
                    return Err(ConnectError::new(
                        Phase::Query,
                        ErrorKind::Config(format!("statement {name:?} was not prepared on this connection")),
                    ));
                };
                self.seq = 0;
                self.wbuf.truncate(HEADER);
                self.wbuf.push(COM_STMT_EXECUTE);
                encode_execute(&mut self.wbuf, st, params);
                self.send(Phase::Query).await?;
                self.response(Phase::Query, |_| {}).await
            }
            Statement::Extended(sql) => {
                // MySQL has no unnamed statement: prepare, execute and close each time,
                // which is what "parse every time" costs on this protocol.
                let (text, order) = placeholders(sql);
                let id = self.prepare_statement(&text).await?;
                let mut st = Prepared {
                    id,
                    order,
                    types: Vec::new(),
                };
                let result = self.execute_prepared(&mut st, params).await;
                self.command(COM_STMT_CLOSE);
                self.wbuf.extend_from_slice(&id.to_le_bytes());
                self.send(Phase::Query).await?;
                result
            }
        }
    }

    /// Runs one text query and keeps, per result, the column names and the last row
    /// (for `\gset` and `\aset`). Binary rows (prepared statements) carry typed values
    /// this session does not decode, so those modes say so instead.
    pub async fn execute_results(
        &mut self,
        stmt: Statement<'_>,
        params: &[&str],
        out: &mut Vec<ResultSet>,
    ) -> Result<u64, ConnectError> {
        let p = Phase::Query;
        out.clear();
        let Statement::Simple(sql) = stmt else {
            let _ = params;
            return Err(ConnectError::new(
                p,
                ErrorKind::Config(
                    "\\gset and \\aset on MySQL/MariaDB read text rows: run the script with -M simple".into(),
                ),
            ));
        };
        self.command(COM_QUERY);
        self.wbuf.extend_from_slice(sql.as_bytes());
        self.send(p).await?;
        let mut total = 0;
        loop {
            let pkt = self.packet(p).await?;
            let more = match pkt.first() {
                Some(0x00) => {
                    let (affected, status) = ok_packet(&pkt);
                    self.status = status;
                    total += affected;
                    out.push(ResultSet::default());
                    status.contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS)
                }
                Some(0xff) => return Err(server_error(p, &pkt)),
                Some(0xfb) => {
                    self.broken = true;
                    return Err(protocol(
                        p,
                        "the server asked for a LOCAL INFILE, which connbench never sends".into(),
                    ));
                }
                _ => {
                    let (columns, _) = lenenc_int(&pkt).ok_or_else(|| {
                        self.broken = true;
                        protocol(p, "malformed result set header".into())
                    })?;
                    let mut set = ResultSet {
                        returns_rows: true,
                        ..ResultSet::default()
                    };
                    for _ in 0..columns {
                        let def = self.packet(p).await?;
                        set.columns.push(column_name(&def).unwrap_or_default());
                    }
                    self.eof(p).await?;
                    loop {
                        let pkt = self.packet(p).await?;
                        match pkt.first() {
                            Some(0xfe) if pkt.len() < 9 => {
                                self.status = eof_status(&pkt);
                                break;
                            }
                            Some(0xff) => return Err(server_error(p, &pkt)),
                            _ => {
                                total += 1;
                                set.rows += 1;
                                set.last_row.clear();
                                let mut rest = &pkt[..];
                                for _ in 0..set.columns.len() {
                                    if rest.first() == Some(&0xfb) {
                                        set.last_row.push(None);
                                        rest = &rest[1..];
                                        continue;
                                    }
                                    let (n, used) = lenenc_int(rest).unwrap_or((0, rest.len()));
                                    let end = used.saturating_add(n as usize).min(rest.len());
                                    set.last_row.push(Some(
                                        String::from_utf8_lossy(&rest[used.min(end)..end]).into_owned(),
                                    ));
                                    rest = &rest[end..];
                                }
                            }
                        }
                    }
                    out.push(set);
                    self.status.contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS)
                }
            };
            if !more {
                return Ok(total);
            }
        }
    }

    /// COM_STMT_EXECUTE, then its response.
    async fn execute_prepared(&mut self, st: &mut Prepared, params: &[&str]) -> Result<u64, ConnectError> {
        self.command(COM_STMT_EXECUTE);
        encode_execute(&mut self.wbuf, st, params);
        self.send(Phase::Query).await?;
        self.response(Phase::Query, |_| {}).await
    }

    /// Says goodbye (COM_QUIT) and closes the socket.
    pub async fn close(mut self) {
        if !self.broken {
            self.command(COM_QUIT);
            let _ = self.send(Phase::Query).await;
        }
        let _ = self.stream.shutdown().await;
    }
}

/// Writes a whole packet (or packets) and flushes.
async fn write(stream: &mut Stream, bytes: &[u8]) -> std::io::Result<()> {
    stream.write_all(bytes).await?;
    stream.flush().await
}

fn protocol(phase: Phase, why: String) -> ConnectError {
    ConnectError::new(phase, ErrorKind::Protocol(why))
}

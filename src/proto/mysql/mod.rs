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
//! TLS and authentication.

mod handshake;

use std::collections::HashMap;

use bytes::{Buf, BytesMut};
use mysql_common::constants::{CapabilityFlags, StatusFlags};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::socket::closed;
pub use super::Endpoint;
use super::{ConnectError, ErrorKind, Phase, QueryOutcome, ResultSet, Statement};
use crate::net::transport::{Counters, Stream};

/// The largest payload connbench accepts (a result row of connbench's workloads is a few
/// bytes; a server that announces more is broken or hostile).
const MAX_PAYLOAD: usize = 64 << 20;

const COM_QUIT: u8 = 0x01;
const COM_QUERY: u8 = 0x03;
const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;
const COM_STMT_CLOSE: u8 = 0x19;
const MYSQL_TYPE_VAR_STRING: u8 = 0xfd;
const MYSQL_TYPE_LONGLONG: u8 = 0x08;

/// An open, authenticated session, ready for queries.
#[derive(Debug)]
pub struct Session {
    stream: Stream,
    rbuf: BytesMut,
    wbuf: Vec<u8>,
    /// `wbuf` with its packet headers, reused from send to send.
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
    statements: HashMap<String, Prepared>,
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

    /// Sends `payload` as one packet (split at 16 MiB as the protocol requires).
    async fn send(&mut self, phase: Phase) -> Result<(), ConnectError> {
        let mut framed = std::mem::take(&mut self.frame);
        framed.clear();
        let mut chunks = self.wbuf.chunks(0xff_ffff).peekable();
        if chunks.peek().is_none() {
            framed.extend_from_slice(&[0, 0, 0, self.seq]);
            self.seq = self.seq.wrapping_add(1);
        }
        while let Some(chunk) = chunks.next() {
            let n = chunk.len() as u32;
            framed.extend_from_slice(&[n as u8, (n >> 8) as u8, (n >> 16) as u8, self.seq]);
            framed.extend_from_slice(chunk);
            self.seq = self.seq.wrapping_add(1);
            if n == 0xff_ffff && chunks.peek().is_none() {
                framed.extend_from_slice(&[0, 0, 0, self.seq]);
                self.seq = self.seq.wrapping_add(1);
            }
        }
        self.wbuf.clear();
        let written = async {
            self.stream.write_all(&framed).await?;
            self.stream.flush().await
        }
        .await;
        self.frame = framed;
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
                let len =
                    self.rbuf[0] as usize | (self.rbuf[1] as usize) << 8 | (self.rbuf[2] as usize) << 16;
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
        self.wbuf.clear();
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
            let len = self.rbuf[0] as usize | (self.rbuf[1] as usize) << 8 | (self.rbuf[2] as usize) << 16;
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
            match (&mut joined, len < 0xff_ffff) {
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
        let len = self.rbuf[0] as usize | (self.rbuf[1] as usize) << 8 | (self.rbuf[2] as usize) << 16;
        if len >= 0xff_ffff {
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

    /// Reads a command's response: OK, an error, or result sets (text or binary rows),
    /// calling `row` with each row's payload. Returns the rows returned, or the rows
    /// affected when there were none. A server error leaves the session usable.
    async fn response(&mut self, phase: Phase, mut row: impl FnMut(&[u8])) -> Result<u64, ConnectError> {
        let mut total = 0;
        loop {
            let pkt = self.packet(phase).await?;
            let more = match pkt.first() {
                Some(0x00) => {
                    let (affected, status) = ok_packet(&pkt);
                    self.status = status;
                    total += affected;
                    status.contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS)
                }
                Some(0xff) => return Err(server_error(phase, &pkt)),
                Some(0xfb) => {
                    self.broken = true;
                    return Err(protocol(
                        phase,
                        "the server asked for a LOCAL INFILE, which connbench never sends".into(),
                    ));
                }
                _ => {
                    let (columns, len) = lenenc_int(&pkt).ok_or_else(|| {
                        self.broken = true;
                        protocol(phase, "malformed result set header".into())
                    })?;
                    // With the metadata cache, a byte says whether definitions follow.
                    let definitions = !self.cache_metadata || pkt.get(len).is_none_or(|&b| b != 0);
                    if definitions {
                        for _ in 0..columns {
                            self.skip_packet(phase).await?;
                        }
                    }
                    self.eof(phase).await?;
                    loop {
                        // Rows are read in the buffer and skipped, as the PostgreSQL
                        // session reads its DataRows: splitting each off would make the
                        // buffer shared (an allocation and atomic counts per row, and a
                        // read-only transaction reads some 400 rows).
                        let Some(len) = self.buffered_packet(phase).await? else {
                            // A row of 16 MiB or more, in several packets: joined.
                            let pkt = self.packet(phase).await?;
                            total += 1;
                            row(&pkt);
                            continue;
                        };
                        let pkt = &self.rbuf[4..4 + len];
                        match pkt.first() {
                            Some(0xfe) if len < 9 => {
                                self.status = eof_status(pkt);
                                self.rbuf.advance(4 + len);
                                break;
                            }
                            Some(0xff) => {
                                let e = server_error(phase, pkt);
                                self.rbuf.advance(4 + len);
                                return Err(e);
                            }
                            _ => {
                                total += 1;
                                row(pkt);
                                self.rbuf.advance(4 + len);
                            }
                        }
                    }
                    self.status.contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS)
                }
            };
            if !more {
                return Ok(total);
            }
        }
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
        let pkt = self.packet(p).await?;
        match pkt.first() {
            Some(0xff) => return Err(server_error(p, &pkt)),
            Some(0x00) if pkt.len() >= 12 => {}
            _ => {
                self.broken = true;
                return Err(protocol(p, "malformed COM_STMT_PREPARE response".into()));
            }
        }
        let id = u32::from_le_bytes([pkt[1], pkt[2], pkt[3], pkt[4]]);
        let columns = u16::from_le_bytes([pkt[5], pkt[6]]);
        let params = u16::from_le_bytes([pkt[7], pkt[8]]);
        for n in [params, columns] {
            if n > 0 {
                for _ in 0..n {
                    self.packet(p).await?;
                }
                self.eof(p).await?;
            }
        }
        Ok(id)
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
                self.wbuf.clear();
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

/// The body of COM_STMT_EXECUTE after its command byte. A value written as a plain
/// integer (pgbench's `\set` variables, the built-in workloads' ids) is bound as a
/// BIGINT, as a program binds its integers (sysbench does); anything else as a string,
/// which the server converts to the column's type as for a text query. Types go with
/// the first execution and again only when they change.
fn encode_execute(out: &mut Vec<u8>, st: &mut Prepared, params: &[&str]) {
    out.extend_from_slice(&st.id.to_le_bytes());
    out.push(0); // CURSOR_TYPE_NO_CURSOR
    out.extend_from_slice(&1u32.to_le_bytes());
    let n = st.order.len();
    if n == 0 {
        return;
    }
    out.extend(std::iter::repeat_n(0u8, n.div_ceil(8)));
    let value = |i: usize| params.get(i).copied().unwrap_or_default();
    let same_types = st.types.len() == n
        && st
            .order
            .iter()
            .zip(&st.types)
            .all(|(&i, &t)| param_type(value(i)) == t);
    if same_types {
        out.push(0); // no new types: the server keeps the last ones
    } else {
        out.push(1); // new parameters bound: types follow
        st.types.clear();
        for &i in &st.order {
            let t = param_type(value(i));
            st.types.push(t);
            out.extend_from_slice(&[t, 0]);
        }
    }
    for &i in &st.order {
        let v = value(i);
        match plain_integer(v) {
            Some(n) => out.extend_from_slice(&n.to_le_bytes()),
            None => put_lenenc_str(out, v.as_bytes()),
        }
    }
}

fn param_type(v: &str) -> u8 {
    if plain_integer(v).is_some() {
        MYSQL_TYPE_LONGLONG
    } else {
        MYSQL_TYPE_VAR_STRING
    }
}

/// `v` as an i64 when it is written as one plainly: no sign but a leading `-`, no leading
/// zeros ("007" stays a string: a string column's '007' must not compare as 7).
fn plain_integer(v: &str) -> Option<i64> {
    let digits = v.strip_prefix('-').unwrap_or(v);
    let plain = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && v != "-0";
    if plain {
        v.parse().ok()
    } else {
        None
    }
}

fn protocol(phase: Phase, why: String) -> ConnectError {
    ConnectError::new(phase, ErrorKind::Protocol(why))
}

/// An ERR packet: `0xff`, the error code, `#` and a five-character SQLSTATE (protocol
/// 4.1), then the message. The key is `ER<code>/<SQLSTATE>`, e.g. `1045/28000`.
fn server_error(phase: Phase, pkt: &[u8]) -> ConnectError {
    let code = pkt
        .get(1..3)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .unwrap_or(0);
    let rest = pkt.get(3..).unwrap_or_default();
    let (state, message) = match rest.split_first() {
        Some((b'#', r)) if r.len() >= 5 => (String::from_utf8_lossy(&r[..5]).into_owned(), &r[5..]),
        _ => ("HY000".to_string(), rest),
    };
    ConnectError::new(
        phase,
        ErrorKind::Server {
            code: format!("{code}/{state}"),
            message: String::from_utf8_lossy(message).into_owned(),
        },
    )
}

/// A length-encoded integer at the start of `b`, and the bytes it took.
fn lenenc_int(b: &[u8]) -> Option<(u64, usize)> {
    let le = |n: usize| -> Option<u64> {
        let bytes = b.get(1..1 + n)?;
        Some(bytes.iter().rev().fold(0u64, |acc, &x| acc << 8 | x as u64))
    };
    match *b.first()? {
        x @ 0..=0xfa => Some((x as u64, 1)),
        0xfc => Some((le(2)?, 3)),
        0xfd => Some((le(3)?, 4)),
        0xfe => Some((le(8)?, 9)),
        _ => None,
    }
}

/// The column name of a ColumnDefinition41 packet: its fifth length-encoded string,
/// after catalog, schema, table and org_table.
fn column_name(def: &[u8]) -> Option<String> {
    let mut rest = def;
    for _ in 0..4 {
        let (n, used) = lenenc_int(rest)?;
        rest = rest.get(used.checked_add(usize::try_from(n).ok()?)?..)?;
    }
    lenenc_str(rest).map(|b| String::from_utf8_lossy(b).into_owned())
}

/// A length-encoded string at the start of `b` (None for NULL or a short packet).
fn lenenc_str(b: &[u8]) -> Option<&[u8]> {
    let (n, used) = lenenc_int(b)?;
    let end = used.checked_add(usize::try_from(n).ok()?)?;
    b.get(used..end)
}

fn put_lenenc_str(out: &mut Vec<u8>, s: &[u8]) {
    let n = s.len() as u64;
    match n {
        0..=0xfa => out.push(n as u8),
        0xfb..=0xffff => {
            out.push(0xfc);
            out.extend_from_slice(&(n as u16).to_le_bytes());
        }
        0x1_0000..=0xff_ffff => {
            out.push(0xfd);
            out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xfe);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
    out.extend_from_slice(s);
}

/// An OK packet's affected rows and status flags.
fn ok_packet(pkt: &[u8]) -> (u64, StatusFlags) {
    let parse = || {
        let (affected, a) = lenenc_int(pkt.get(1..)?)?;
        let (_, b) = lenenc_int(pkt.get(1 + a..)?)?;
        let s = pkt.get(1 + a + b..3 + a + b)?;
        Some((
            affected,
            StatusFlags::from_bits_truncate(u16::from_le_bytes([s[0], s[1]])),
        ))
    };
    parse().unwrap_or((0, StatusFlags::empty()))
}

/// An EOF packet's status flags (after the warning count).
fn eof_status(pkt: &[u8]) -> StatusFlags {
    pkt.get(3..5)
        .map(|s| StatusFlags::from_bits_truncate(u16::from_le_bytes([s[0], s[1]])))
        .unwrap_or(StatusFlags::empty())
}

/// `$n` placeholders to MySQL's `?`, with the parameter each `?` takes. Quoted text and
/// identifiers are left alone.
fn placeholders(sql: &str) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(sql.len());
    let mut order = Vec::new();
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '\'' | '"' | '`') => quote = Some(c),
            (None, '$') if chars.peek().is_some_and(|d| d.is_ascii_digit()) => {
                let mut n = 0usize;
                while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                    n = n.saturating_mul(10).saturating_add(d as usize);
                    chars.next();
                }
                order.push(n.saturating_sub(1));
                out.push('?');
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    (out, order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_question_marks_in_order() {
        let (sql, order) = placeholders("UPDATE t SET a = a + $1 WHERE id = $2 AND s = '$3'");
        assert_eq!(sql, "UPDATE t SET a = a + ? WHERE id = ? AND s = '$3'");
        assert_eq!(order, vec![0, 1]);
        let (sql, order) = placeholders("SELECT $2, $1, $2");
        assert_eq!((sql.as_str(), order), ("SELECT ?, ?, ?", vec![1, 0, 1]));
    }

    #[test]
    fn plain_integers_bind_as_bigint_and_types_go_only_when_they_change() {
        for (v, want) in [
            ("0", Some(0)),
            ("42", Some(42)),
            ("-7", Some(-7)),
            ("007", None),
            ("+7", None),
            ("-0", None),
            ("", None),
            ("-", None),
            ("1.5", None),
            ("99999999999999999999", None),
        ] {
            assert_eq!(plain_integer(v), want, "{v:?}");
        }
        let mut st = Prepared {
            id: 7,
            order: vec![1, 0],
            types: Vec::new(),
        };
        let head = |out: &[u8]| (out[..4].to_vec(), out[4], out[9]);
        let mut out = Vec::new();
        encode_execute(&mut out, &mut st, &["x", "5"]);
        // id, no cursor, iteration count 1, a null bitmap byte, then "new types: 1".
        assert_eq!(head(&out), (7u32.to_le_bytes().to_vec(), 0, 0));
        assert_eq!(out[10], 1);
        assert_eq!(&out[11..15], &[MYSQL_TYPE_LONGLONG, 0, MYSQL_TYPE_VAR_STRING, 0]);
        assert_eq!(&out[15..23], &5i64.to_le_bytes());
        assert_eq!(&out[23..], &[1, b'x']);
        out.clear();
        encode_execute(&mut out, &mut st, &["y", "6"]);
        assert_eq!(out[10], 0, "the same types are not sent again");
        assert_eq!(&out[11..19], &6i64.to_le_bytes());
        assert_eq!(&out[19..], &[1, b'y']);
        out.clear();
        encode_execute(&mut out, &mut st, &["8", "007"]);
        assert_eq!(out[10], 1, "changed types are sent");
        assert_eq!(&out[11..15], &[MYSQL_TYPE_VAR_STRING, 0, MYSQL_TYPE_LONGLONG, 0]);
    }

    #[test]
    fn short_or_hostile_packets_never_panic() {
        for pkt in [
            &[][..],
            &[0xff],
            &[0xff, 1],
            &[0x00],
            &[0x00, 0xfc],
            &[0xfe, 0xff],
            &[0xfd, 1, 2],
        ] {
            let _ = server_error(Phase::Query, pkt);
            let _ = ok_packet(pkt);
            let _ = eof_status(pkt);
            let _ = lenenc_int(pkt);
            let _ = lenenc_str(pkt);
        }
        assert_eq!(
            lenenc_str(&[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            None
        );
        let e = server_error(Phase::Auth, b"\xff\x15\x04#28000Access denied");
        assert_eq!(e.key(), "auth:1045/28000");
        assert!(e.to_string().contains("Access denied"), "{e}");
    }

    #[test]
    fn lenenc_round_trips() {
        for n in [0usize, 250, 251, 65535, 65536, 70000] {
            let s = vec![b'x'; n];
            let mut out = Vec::new();
            put_lenenc_str(&mut out, &s);
            assert_eq!(lenenc_str(&out), Some(&s[..]), "{n}");
        }
    }
}

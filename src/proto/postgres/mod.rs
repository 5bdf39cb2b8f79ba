//! The PostgreSQL wire session: a phased connect and simple queries, on the
//! `postgres-protocol` crate's message codec and SCRAM implementation.
//!
//! Stock drivers do not expose where the time of a connect goes, so connbench owns this
//! small state machine (protocol 3.0, chapter 55 "Frontend/Backend Protocol" of the
//! PostgreSQL manual): one async function per phase, each ending with a
//! [`Stopwatch::mark`], each failure carrying its [`Phase`]. Messages are written into one
//! reused buffer and parsed out of another.
//!
//! A note on what the wire can show: PostgreSQL queues AuthenticationOk (and SASLFinal)
//! without flushing and sends it together with ReadyForQuery once the backend has
//! initialised, so the backend's initialisation lands in the last `auth` round trip
//! (or in `startup` for trust), and `ready` is usually near zero. We report what the wire
//! shows rather than split it by assumption.

mod bind;
mod cancel;
mod raw;
mod results;

use std::future::Future;

use bytes::{Buf, BytesMut};
use postgres_protocol::authentication::sasl::{self, ChannelBinding, ScramSha256};
use postgres_protocol::message::{backend::Message, frontend};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::socket::{closed, open_socket, tls_cause};
pub use super::Endpoint;
use super::{ConnectError, ErrorKind, Phase, PhaseCursor, QueryOutcome, ResultSet, Statement, Stopwatch};
use crate::net::transport::{self, Stream, TlsSetup};
use crate::targets::{self, Host, SslMode, Target};
pub use cancel::{send_cancel, CancelKey};
pub use raw::{Frontend, RawOutcome};
use results::Collect;

/// An open, authenticated session, ready for queries.
#[derive(Debug)]
pub struct Session {
    stream: Stream,
    rbuf: BytesMut,
    wbuf: BytesMut,
    pub backend_pid: i32,
    /// BackendKeyData's pid and secret key, for a CancelRequest (never written out).
    pub cancel_key: Option<CancelKey>,
    /// `server_version` as the server reported it at start-up.
    pub server_version: Option<String>,
    transaction_status: u8,
    /// Set by any socket error: the session cannot be used again.
    broken: bool,
    /// Syncs written in the pipeline now open (see [`Session::pipeline_send`]); zero
    /// outside a pipeline.
    pipeline_syncs: usize,
}

impl super::Wire for Session {
    /// The phases up to ReadyForQuery, each marked on `sw`.
    async fn open(ep: &Endpoint, cursor: &PhaseCursor, sw: &mut Stopwatch) -> Result<Session, ConnectError> {
        let t = &ep.target;
        let stream = open_socket(t, cursor, sw).await?;
        let stream = match &ep.tls {
            Some(tls) => {
                cursor.set(Phase::Tls);
                let s = negotiate_tls(t, stream, tls).await?;
                sw.mark(Phase::Tls, s.counters().round_trips);
                s
            }
            None => stream,
        };
        let mut session = Session {
            stream,
            // Small to start (a select's answer fits), grown by doubling when an answer
            // needs more and kept: 10,000 idle sessions then hold 20 MiB less.
            rbuf: BytesMut::with_capacity(1024),
            wbuf: BytesMut::with_capacity(1024),
            backend_pid: 0,
            cancel_key: None,
            server_version: None,
            transaction_status: b'I',
            broken: false,
            pipeline_syncs: 0,
        };
        cursor.set(Phase::Startup);
        let first = session.startup(t).await?;
        sw.mark(Phase::Startup, session.round_trips());
        cursor.set(Phase::Auth);
        session.authenticate(t, first).await?;
        sw.mark(Phase::Auth, session.round_trips());
        cursor.set(Phase::Ready);
        session.await_ready().await?;
        sw.mark(Phase::Ready, session.round_trips());
        Ok(session)
    }

    fn first_query(&mut self, sql: &str) -> impl Future<Output = Result<QueryOutcome, ConnectError>> + Send {
        self.simple_query(sql)
    }

    fn stream(&self) -> &Stream {
        &self.stream
    }
}

/// SSLRequest, the server's one-byte answer, then the handshake (protocol §55.2.10).
async fn negotiate_tls(t: &Target, mut stream: Stream, tls: &TlsSetup) -> Result<Stream, ConnectError> {
    let err = |k| ConnectError::new(Phase::Tls, k);
    let mut buf = BytesMut::with_capacity(8);
    frontend::ssl_request(&mut buf);
    stream
        .write_all(&buf)
        .await
        .map_err(|e| err(ErrorKind::io(e, " sending SSLRequest")))?;
    // Exactly one byte: anything after 'S' belongs to TLS, and reading it here would let
    // a man in the middle inject plaintext (CVE-2021-23222).
    let mut answer = [0u8; 1];
    stream
        .read_exact(&mut answer)
        .await
        .map_err(|e| err(ErrorKind::io(e, " waiting for the SSLRequest answer")))?;
    match answer[0] {
        b'S' => transport::handshake_tls(stream, tls)
            .await
            .map_err(|e| err(ErrorKind::Tls(format!("handshake failed: {}", tls_cause(&e))))),
        b'N' if t.sslmode.requires_tls() => Err(err(ErrorKind::Tls(format!(
            "server does not support SSL, but sslmode={}",
            t.sslmode.as_str()
        )))),
        b'N' => Ok(stream),
        other => Err(err(ErrorKind::Protocol(format!(
            "unexpected answer {:?} to SSLRequest",
            other as char
        )))),
    }
}

impl Session {
    fn round_trips(&self) -> u32 {
        self.stream.counters().round_trips
    }

    /// Sends what is in the write buffer and clears it.
    async fn send(&mut self, phase: Phase) -> Result<(), ConnectError> {
        let written = async {
            self.stream.write_all(&self.wbuf).await?;
            self.stream.flush().await
        }
        .await;
        self.wbuf.clear();
        match written {
            Ok(()) => Ok(()),
            Err(e) => {
                self.broken = true;
                Err(self.said_before_closing(phase, e).await)
            }
        }
    }

    /// After a failed write: the error the server sent before it closed, if it sent one;
    /// else "the server closed the connection" when it closed without a word (as a client
    /// that read first would count it); else the write's own error. A server that ends a session (`pg_terminate_backend`, a shutdown, an idle timeout)
    /// sends `FATAL` and closes; a client that writes its next query before reading gets
    /// EPIPE or ECONNRESET, and the server's reason waits unread in the socket. libpq
    /// reads it before it reports a failed send (`pqSendSome` calls `pqReadData`), and so
    /// do we: a terminated backend is counted as 57P01 whichever side of the race the
    /// client was on. The peer has closed, so the read ends at once; the bound only
    /// guards against a peer that half-closed and went silent.
    async fn said_before_closing(&mut self, phase: Phase, write: std::io::Error) -> ConnectError {
        const WAIT: std::time::Duration = std::time::Duration::from_millis(500);
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            match self.buffered_message(phase) {
                Ok(Some((b'E', _))) => {
                    if let Ok(Some(Message::ErrorResponse(body))) = Message::parse(&mut self.rbuf) {
                        return ConnectError::new(phase, server_error(&body));
                    }
                    return ConnectError::new(phase, ErrorKind::io(write, ""));
                }
                // Rows or notices of an earlier answer: not the reason.
                Ok(Some((_, len))) => {
                    self.rbuf.advance(len);
                    continue;
                }
                Ok(None) => {}
                Err(_) => return ConnectError::new(phase, ErrorKind::io(write, "")),
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

    /// Whether a socket error made this session unusable.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Reads one whole backend message. Notices are skipped; an ErrorResponse becomes an
    /// error of `phase`.
    async fn recv(&mut self, phase: Phase) -> Result<Message, ConnectError> {
        loop {
            // The length is checked first: the parser would reserve whatever a header
            // claims, up to 4 GiB.
            if let Err(e) = self.buffered_message(phase) {
                self.broken = true;
                return Err(e);
            }
            match Message::parse(&mut self.rbuf) {
                Ok(Some(Message::NoticeResponse(_))) => continue,
                Ok(Some(Message::ErrorResponse(body))) => {
                    return Err(ConnectError::new(phase, server_error(&body)));
                }
                Ok(Some(m)) => return Ok(m),
                Ok(None) => {}
                Err(e) => {
                    return Err(ConnectError::new(
                        phase,
                        ErrorKind::Protocol(format!("malformed message from the server: {e}")),
                    ))
                }
            }
            self.fill(phase).await?;
        }
    }

    /// StartupMessage, then the server's first authentication message.
    async fn startup(&mut self, t: &Target) -> Result<Message, ConnectError> {
        let mut params: Vec<(&str, &str)> = vec![("user", &t.user), ("database", &t.dbname)];
        if let Some(a) = &t.application_name {
            params.push(("application_name", a));
        }
        if let Some(o) = &t.options {
            params.push(("options", o));
        }
        params.push(("client_encoding", "UTF8"));
        frontend::startup_message(params.iter().copied(), &mut self.wbuf)
            .map_err(|e| ConnectError::new(Phase::Startup, ErrorKind::Protocol(e.to_string())))?;
        self.send(Phase::Startup).await?;
        self.recv(Phase::Startup).await
    }

    /// Every exchange up to AuthenticationOk (protocol §55.2.1 and §55.3 for SASL).
    async fn authenticate(&mut self, t: &Target, first: Message) -> Result<(), ConnectError> {
        let p = Phase::Auth;
        let need_password = |method: &str| {
            t.password().map(str::as_bytes).ok_or_else(|| {
                ConnectError::new(
                    p,
                    ErrorKind::Config(format!(
                        "the server asks for a password ({method}) for user {:?} but none was given; \
                         add password=, PGPASSWORD or a passfile",
                        t.user
                    )),
                )
            })
        };
        match first {
            Message::AuthenticationOk => Ok(()),
            Message::AuthenticationCleartextPassword => {
                let pw = need_password("cleartext")?;
                frontend::password_message(pw, &mut self.wbuf).map_err(|e| protocol(p, e))?;
                self.send(p).await?;
                self.expect_auth_ok().await
            }
            Message::AuthenticationMd5Password(body) => {
                let pw = need_password("md5")?;
                let hash = postgres_protocol::authentication::md5_hash(t.user.as_bytes(), pw, body.salt());
                frontend::password_message(hash.as_bytes(), &mut self.wbuf).map_err(|e| protocol(p, e))?;
                self.send(p).await?;
                self.expect_auth_ok().await
            }
            Message::AuthenticationSasl(body) => {
                let pw = need_password("SCRAM-SHA-256")?;
                let mut plain = false;
                let mut plus = false;
                let mut mechs = body.mechanisms();
                while let Ok(Some(m)) = fallible_iterator::FallibleIterator::next(&mut mechs) {
                    plain |= m == sasl::SCRAM_SHA_256;
                    plus |= m == sasl::SCRAM_SHA_256_PLUS;
                }
                self.scram(t, pw, plain, plus).await
            }
            Message::AuthenticationKerberosV5
            | Message::AuthenticationScmCredential
            | Message::AuthenticationGss
            | Message::AuthenticationSspi
            | Message::AuthenticationGssContinue(_) => Err(ConnectError::new(
                p,
                ErrorKind::Protocol("the server asks for Kerberos/GSSAPI/SSPI authentication, which connbench does not support".into()),
            )),
            _ => Err(ConnectError::new(
                p,
                ErrorKind::Protocol("unexpected message instead of an authentication request".into()),
            )),
        }
    }

    async fn scram(&mut self, t: &Target, pw: &[u8], plain: bool, plus: bool) -> Result<(), ConnectError> {
        let p = Phase::Auth;
        let cert = self
            .stream
            .peer_certificate()
            .map(transport::server_end_point_hash);
        use targets::ChannelBinding as Cb;
        let (mechanism, binding) = match (t.channel_binding, cert, plus) {
            (Cb::Prefer | Cb::Require, Some(hash), true) => {
                (sasl::SCRAM_SHA_256_PLUS, ChannelBinding::tls_server_end_point(hash))
            }
            (Cb::Require, _, _) => {
                return Err(ConnectError::new(
                    p,
                    ErrorKind::Config("channel_binding=require, but the connection offers no channel binding (TLS and SCRAM-SHA-256-PLUS are needed)".into()),
                ))
            }
            (_, Some(_), _) if plain => (sasl::SCRAM_SHA_256, ChannelBinding::unrequested()),
            _ if plain => (sasl::SCRAM_SHA_256, ChannelBinding::unsupported()),
            _ => {
                return Err(ConnectError::new(
                    p,
                    ErrorKind::Protocol("the server offers no SASL mechanism connbench supports".into()),
                ))
            }
        };
        let mut scram = ScramSha256::new(pw, binding);
        frontend::sasl_initial_response(mechanism, scram.message(), &mut self.wbuf)
            .map_err(|e| protocol(p, e))?;
        self.send(p).await?;
        match self.recv(p).await? {
            Message::AuthenticationSaslContinue(body) => {
                scram.update(body.data()).map_err(|e| protocol(p, e))?
            }
            _ => return Err(unexpected(p, "AuthenticationSASLContinue")),
        }
        frontend::sasl_response(scram.message(), &mut self.wbuf).map_err(|e| protocol(p, e))?;
        self.send(p).await?;
        match self.recv(p).await? {
            Message::AuthenticationSaslFinal(body) => {
                scram.finish(body.data()).map_err(|e| protocol(p, e))?
            }
            _ => return Err(unexpected(p, "AuthenticationSASLFinal")),
        }
        self.expect_auth_ok().await
    }

    async fn expect_auth_ok(&mut self) -> Result<(), ConnectError> {
        match self.recv(Phase::Auth).await? {
            Message::AuthenticationOk => Ok(()),
            _ => Err(unexpected(Phase::Auth, "AuthenticationOk")),
        }
    }

    /// ParameterStatus and BackendKeyData up to ReadyForQuery.
    async fn await_ready(&mut self) -> Result<(), ConnectError> {
        let p = Phase::Ready;
        loop {
            match self.recv(p).await? {
                Message::ReadyForQuery(_) => return Ok(()),
                Message::BackendKeyData(k) => {
                    self.backend_pid = k.process_id();
                    self.cancel_key = Some(CancelKey::new(k.process_id(), k.secret_key()));
                }
                Message::ParameterStatus(s) => {
                    if s.name().ok() == Some("server_version") {
                        self.server_version = s.value().ok().map(str::to_string);
                    }
                }
                _ => return Err(unexpected(p, "ParameterStatus, BackendKeyData or ReadyForQuery")),
            }
        }
    }

    /// The protocol's cheapest round trip: an empty query, answered EmptyQueryResponse
    /// and ReadyForQuery without planning or running anything (the protocol's Simple Query flow).
    pub async fn ping(&mut self) -> Result<(), ConnectError> {
        self.simple_query("").await.map(|_| ())
    }

    /// Runs one simple-protocol query and waits for ReadyForQuery. A server error ends
    /// the query (and is returned) but leaves the session usable.
    pub async fn simple_query(&mut self, sql: &str) -> Result<QueryOutcome, ConnectError> {
        let rows = self.query_column(sql).await?;
        Ok(QueryOutcome {
            rows: rows.len() as u64,
            first_value: rows.into_iter().next(),
        })
    }

    /// Runs one simple query and returns the first column of every row, as text.
    pub async fn query_column(&mut self, sql: &str) -> Result<Vec<String>, ConnectError> {
        frontend::query(sql, &mut self.wbuf).map_err(|e| protocol(Phase::Query, e))?;
        self.send(Phase::Query).await?;
        let mut out = Vec::new();
        self.finish_statement(Collect::FirstColumn(&mut out)).await?;
        Ok(out)
    }

    /// Prepares a named statement (Parse + Sync): one round trip, once per connection.
    pub async fn prepare(&mut self, name: &str, sql: &str) -> Result<(), ConnectError> {
        let p = Phase::Query;
        frontend::parse(name, sql, std::iter::empty(), &mut self.wbuf).map_err(|e| protocol(p, e))?;
        frontend::sync(&mut self.wbuf);
        self.send(p).await?;
        self.finish_statement(Collect::Nothing).await.map(|_| ())
    }

    /// Runs one statement and waits for ReadyForQuery, with text parameters. The
    /// message sequence is libpq's for each mode, so the server does the same work as
    /// for pgbench: simple is `Query` (parameters already in the text); extended is
    /// Parse, Bind, Describe, Execute, Sync (PQexecParams); prepared is Bind, Describe,
    /// Execute, Sync on a statement made by [`Session::prepare`] (PQexecPrepared).
    pub async fn execute(&mut self, stmt: Statement<'_>, params: &[&str]) -> Result<u64, ConnectError> {
        self.write_statement(stmt, params, true)?;
        self.send(Phase::Query).await?;
        self.finish_statement(Collect::Nothing).await
    }

    /// As [`Session::execute`], and keeps each result's column names and last row in
    /// `out` (one entry per statement of a compound), for `\gset` and `\aset`.
    pub async fn execute_results(
        &mut self,
        stmt: Statement<'_>,
        params: &[&str],
        out: &mut Vec<ResultSet>,
    ) -> Result<u64, ConnectError> {
        out.clear();
        self.write_statement(stmt, params, true)?;
        self.send(Phase::Query).await?;
        self.finish_statement(Collect::Results(out)).await
    }

    /// Writes a statement's messages; with `sync`, the Sync that ends it.
    fn write_statement(
        &mut self,
        stmt: Statement<'_>,
        params: &[&str],
        sync: bool,
    ) -> Result<(), ConnectError> {
        let p = Phase::Query;
        match stmt {
            Statement::Simple(sql) => {
                frontend::query(sql, &mut self.wbuf).map_err(|e| protocol(p, e))?;
            }
            Statement::Extended(sql) => {
                frontend::parse("", sql, std::iter::empty(), &mut self.wbuf).map_err(|e| protocol(p, e))?;
                self.write_bind_execute("", params, sync)?;
            }
            Statement::Prepared(name) => self.write_bind_execute(name, params, sync)?,
        }
        Ok(())
    }

    /// Adds a statement to the pipeline (protocol §55.2.4, "Pipelining"): its Parse,
    /// Bind, Describe and Execute are written without a Sync and sent with the next
    /// [`Session::pipeline_end`], as libpq sends in pipeline mode; the server answers
    /// them in order. Only extended and prepared statements can be pipelined.
    pub fn pipeline_send(&mut self, stmt: Statement<'_>, params: &[&str]) -> Result<(), ConnectError> {
        if let Statement::Simple(_) = stmt {
            return Err(ConnectError::new(
                Phase::Query,
                ErrorKind::Config(
                    "a pipeline cannot use the simple query protocol; use -M extended or prepared".into(),
                ),
            ));
        }
        self.write_statement(stmt, params, false)
    }

    /// A Sync inside the pipeline (`\syncpipeline`): ends an implicit transaction,
    /// and an error before it no longer skips the statements after it.
    pub fn pipeline_sync(&mut self) {
        frontend::sync(&mut self.wbuf);
        self.pipeline_syncs += 1;
    }

    /// Ends the pipeline: the last Sync, everything sent, then every answer read up to
    /// the ReadyForQuery of each Sync. Returns the rows, or the first server error (the
    /// server skips the rest of that sync's statements, and the session stays usable).
    pub async fn pipeline_end(&mut self) -> Result<u64, ConnectError> {
        self.pipeline_sync();
        let syncs = std::mem::take(&mut self.pipeline_syncs);
        self.send(Phase::Query).await?;
        let mut rows = 0;
        let mut failure = None;
        for _ in 0..syncs {
            match self.finish_statement(Collect::Nothing).await {
                Ok(n) => rows += n,
                Err(e) if self.broken => return Err(failure.unwrap_or(e)),
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(rows),
        }
    }

    /// Drops a pipeline that will not be ended (the script failed inside it): nothing
    /// of it was sent, so the server never saw it.
    pub fn pipeline_abandon(&mut self) {
        self.wbuf.clear();
        self.pipeline_syncs = 0;
    }

    fn write_bind_execute(
        &mut self,
        statement: &str,
        params: &[&str],
        sync: bool,
    ) -> Result<(), ConnectError> {
        bind::bind_execute(&mut self.wbuf, statement, params, sync).map_err(|e| {
            ConnectError::new(
                Phase::Query,
                ErrorKind::Protocol(format!("cannot encode Bind: {e}")),
            )
        })
    }

    /// The tag and total length of the next message when all of it is buffered. A
    /// length shorter than its own field, or longer than PostgreSQL ever sends (1 GiB), is
    /// a protocol violation: waiting for it to fill would stall the reader for good.
    fn buffered_message(&self, phase: Phase) -> Result<Option<(u8, usize)>, ConnectError> {
        const MAX_MESSAGE: usize = 1 << 30;
        let b = &self.rbuf;
        if b.len() < 5 {
            return Ok(None);
        }
        let field = u32::from_be_bytes([b[1], b[2], b[3], b[4]]) as usize;
        if !(4..=MAX_MESSAGE).contains(&field) {
            return Err(ConnectError::new(
                phase,
                ErrorKind::Protocol(format!(
                    "the server sent a {:?} message whose length field is {field} (it must be 4 to {MAX_MESSAGE})",
                    char::from(b[0])
                )),
            ));
        }
        let len = 1 + field;
        Ok((b.len() >= len).then_some((b[0], len)))
    }

    /// Reads more bytes from the socket into the buffer.
    async fn fill(&mut self, phase: Phase) -> Result<(), ConnectError> {
        let n = self.stream.read_buf(&mut self.rbuf).await.map_err(|e| {
            self.broken = true;
            ConnectError::new(phase, ErrorKind::io(e, ""))
        })?;
        if n == 0 {
            self.broken = true;
            return Err(ConnectError::new(
                phase,
                ErrorKind::io(std::io::ErrorKind::UnexpectedEof.into(), ""),
            ));
        }
        Ok(())
    }

    /// The transaction status of the last ReadyForQuery: `I` idle, `T` in a
    /// transaction block, `E` in a failed one (which needs a ROLLBACK).
    pub fn transaction_status(&self) -> u8 {
        self.transaction_status
    }

    /// COPY ... FROM STDIN with the given rows of data (protocol §55.2.6), sent in
    /// CopyData messages of about 64 KiB.
    pub async fn copy_in(
        &mut self,
        sql: &str,
        data: &mut dyn Iterator<Item = String>,
    ) -> Result<u64, ConnectError> {
        let p = Phase::Query;
        frontend::query(sql, &mut self.wbuf).map_err(|e| protocol(p, e))?;
        self.send(p).await?;
        match self.recv(p).await? {
            Message::CopyInResponse(_) => {}
            _ => return Err(unexpected(p, "CopyInResponse")),
        }
        let mut chunk = BytesMut::with_capacity(64 * 1024);
        for row in data {
            chunk.extend_from_slice(row.as_bytes());
            if chunk.len() >= 64 * 1024 {
                let data = frontend::CopyData::new(chunk.split().freeze()).map_err(|e| protocol(p, e))?;
                data.write(&mut self.wbuf);
                self.send(p).await?;
            }
        }
        if !chunk.is_empty() {
            frontend::CopyData::new(chunk.freeze())
                .map_err(|e| protocol(p, e))?
                .write(&mut self.wbuf);
        }
        frontend::copy_done(&mut self.wbuf);
        self.send(p).await?;
        self.finish_statement(Collect::Nothing).await
    }

    /// Says goodbye (Terminate) and closes; errors here change nothing measured.
    pub async fn close(mut self) {
        frontend::terminate(&mut self.wbuf);
        let _ = self.stream.write_all(&self.wbuf).await;
        let _ = self.stream.shutdown().await;
    }

    pub fn counters(&self) -> transport::Counters {
        self.stream.counters()
    }
}

fn server_error(body: &postgres_protocol::message::backend::ErrorResponseBody) -> ErrorKind {
    let mut code = String::new();
    let mut message = String::new();
    let mut fields = body.fields();
    while let Ok(Some(f)) = fallible_iterator::FallibleIterator::next(&mut fields) {
        match f.type_() {
            b'C' => code = String::from_utf8_lossy(f.value_bytes()).into_owned(),
            b'M' => message = String::from_utf8_lossy(f.value_bytes()).into_owned(),
            _ => {}
        }
    }
    ErrorKind::Server { code, message }
}

fn protocol(p: Phase, e: std::io::Error) -> ConnectError {
    ConnectError::new(p, ErrorKind::Protocol(e.to_string()))
}

fn unexpected(p: Phase, wanted: &str) -> ConnectError {
    ConnectError::new(
        p,
        ErrorKind::Protocol(format!("unexpected message from the server; wanted {wanted}")),
    )
}

/// Whether a target will try TLS (for labels); Unix sockets never do.
pub fn uses_tls(t: &Target) -> bool {
    matches!(t.host, Host::Tcp(_)) && t.sslmode != SslMode::Disable
}

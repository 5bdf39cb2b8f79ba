//! PostgreSQL's wire protocol (version 3, the "Frontend/Backend Protocol" chapter of the
//! PostgreSQL manual), read from the side as a state machine: fed each direction's bytes
//! as they pass, it follows the connection from its first request to its end and gives
//! the trace's events.
//!
//! The start: SSLRequest and GSSENCRequest (the client asked for encryption; an `S` or
//! `G` answer means what follows is encrypted and is passed through undecoded), a
//! CancelRequest (its pid kept, never its key), a StartupMessage (user, database and
//! parameters, minus anything named like a secret). Authentication: the method the
//! server asked for (trust, cleartext, md5, SCRAM-SHA-256 and its mechanism from the
//! client's SASLInitialResponse, GSS, SSPI), the client's messages counted as round
//! trips and timed but never read: a PasswordMessage's or SASL message's bytes are not
//! kept. Then ParameterStatus, BackendKeyData (the pid, never the secret key) and the
//! first ReadyForQuery, which writes `session_open`.
//!
//! Requests: a simple Query; an extended-protocol group (Parse, Bind, Describe, Execute,
//! Close, Flush) up to its Sync; a FunctionCall. COPY data from the client belongs to
//! the request being answered. Responses are matched in order: RowDescription and
//! DataRow (rows), CommandComplete (tags), ErrorResponse, NoticeResponse,
//! ParameterDescription (the statement's types, used for later Binds), CopyOutResponse
//! and its data (counted), down to the ReadyForQuery that ends the response and gives
//! the transaction status.

use std::collections::HashMap;

use super::connection::Connection;
use super::event::{ClosedBy, Event, Format, Op, Param, ServerError, Step, TxStatus};
use super::frame::{hex, text, Cursor, Frame, Framing, Keep};
use super::session::Exchange;
use super::{
    error_message, is_secret_name, sql_text, DecodeOptions, Dialect, Direction, SessionMeta, TLS_ADVICE,
};

const SSL_REQUEST: u32 = 80_877_103;
const GSSENC_REQUEST: u32 = 80_877_104;
const CANCEL_REQUEST: u32 = 80_877_102;
/// Steps kept per extended-protocol group, statement types remembered per session,
/// parameters and tags kept per message: bounds on what a client can make the recorder
/// hold, far above what applications use.
const MAX_STEPS: usize = 1024;
const MAX_STATEMENTS: usize = 4096;
/// Statement names longer than this, and types beyond this many in all, are not
/// remembered (their Binds' values then go without types).
const MAX_NAME: usize = 256;
const MAX_TYPES: usize = 1 << 18;
const MAX_PARAMETERS: usize = 64;
const MAX_TAGS: usize = 64;
/// The most a group's kept steps may hold; later steps are counted only.
const MAX_GROUP_BYTES: u64 = 16 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the StartupMessage.
    Startup,
    /// After SSLRequest or GSSENCRequest, awaiting the one-byte answer.
    EncryptionAnswer,
    /// StartupMessage sent: authentication, then parameters, up to ReadyForQuery.
    Auth,
    Ready,
    /// Nothing more is decoded (encrypted, malformed, or a cancel request).
    Passthrough,
}

/// One PostgreSQL connection's decoder.
#[derive(Debug)]
pub struct Decoder {
    /// What every connection keeps, whatever its protocol.
    c: Connection,
    state: State,
    /// An extended-protocol group not yet ended by its Sync.
    group: Option<Exchange>,
    /// The group's response bytes when its last message passed: more by its next
    /// message means the client waited for an answer in between (after a Flush).
    group_answered: u64,
    /// Parameter types by statement name, from Parse and ParameterDescription.
    statements: Types,
    encryption_request_ns: u64,
    startup_sent_ns: Option<u64>,
    auth_first_ns: Option<u64>,
    auth_ok_ns: Option<u64>,
    /// The server asked for SASL: the client's next message names the mechanism.
    sasl_pending: bool,
}

impl Decoder {
    pub fn new(meta: SessionMeta, options: DecodeOptions) -> Decoder {
        Decoder {
            c: Connection::new(meta, options),
            state: State::Startup,
            group: None,
            group_answered: 0,
            statements: Types::default(),
            encryption_request_ns: 0,
            startup_sent_ns: None,
            auth_first_ns: None,
            auth_ok_ns: None,
            sasl_pending: false,
        }
    }

    /// See [`crate::Decoder::joined`]: ready at once, its open written to `out`.
    pub fn joined(meta: SessionMeta, options: DecodeOptions, out: &mut Vec<Event>) -> Decoder {
        let mut d = Decoder::new(meta, options);
        d.state = State::Ready;
        d.c.open.ready = true;
        d.c.open.joined = true;
        // No `ready` time: the first request's think time is unknown (null), not the
        // time since the capture first saw the connection.
        d.c.write_open(out);
        d
    }

    /// See [`crate::Decoder::interrupt`].
    pub fn interrupt(&mut self, reason: String, out: &mut Vec<Event>) {
        if self.state != State::Passthrough {
            self.fail(reason, out);
        }
    }

    pub fn tls_requested(&self) -> bool {
        self.c.open.tls_requested
    }

    /// The recorder's handshake with the client after its `S`: the plaintext inside
    /// follows (a StartupMessage), or decoding stops with why it failed.
    pub fn tls_accepted(&mut self, tls: Result<super::TlsAccepted, String>, out: &mut Vec<Event>) {
        if let Err(e) = self.c.tls_accepted(tls) {
            self.fail(e, out);
        }
    }

    pub fn buffered(&self) -> usize {
        self.c.buffered() + self.group.as_ref().map_or(0, |g| g.req.request_bytes as usize)
    }

    pub fn feed(&mut self, dir: Direction, at_ns: u64, bytes: &[u8], out: &mut Vec<Event>) {
        let Some(mut framer) = self.c.chunk(dir, bytes.len()) else {
            return;
        };
        let mut input = bytes;
        while !input.is_empty() && self.state != State::Passthrough {
            if dir == Direction::ToClient && self.state == State::EncryptionAnswer {
                self.encryption_answer(input[0], at_ns, out);
                input = &input[1..];
                continue;
            }
            if dir == Direction::ToServer
                && self.state == State::Startup
                && !framer.mid_message()
                && input[0] == 0x16
            {
                // A TLS ClientHello with no SSLRequest before it (PostgreSQL 17's
                // sslnegotiation=direct).
                self.c.open.tls_requested = true;
                self.c.open.encrypted = true;
                self.fail(TLS_ADVICE.to_string(), out);
                break;
            }
            let framing = match (dir, self.state) {
                (Direction::ToServer, State::Startup) => Framing::PgUntyped,
                _ => Framing::PgTyped,
            };
            let (state, sasl) = (self.state, self.sasl_pending);
            let keep = move |kind: u8, _: usize, _: Option<u8>| keep(dir, state, sasl, kind);
            match framer.next(framing, &mut input, at_ns, keep) {
                Ok(Some(f)) => {
                    if let Err(e) = self.on_frame(dir, &f, out) {
                        self.fail(e, out);
                    }
                }
                Ok(None) => break,
                Err(e) => self.fail(e, out),
            }
        }
        self.c.done(dir, framer, input.len());
    }

    pub fn close(&mut self, at_ns: u64, by: ClosedBy, out: &mut Vec<Event>) {
        if self.c.closing(out) {
            self.abandon(out);
            self.c.close(at_ns, by, out);
        }
    }

    /// Stops decoding: the rest passes through, and why is said once, at the close.
    fn fail(&mut self, reason: String, out: &mut Vec<Event>) {
        self.state = State::Passthrough;
        self.c.stop(reason);
        self.abandon(out);
    }

    fn abandon(&mut self, out: &mut Vec<Event>) {
        if let Some(g) = self.group.take() {
            // A full queue keeps the group to write it unanswered with the rest.
            let _ = self.c.x.push(g);
        }
        self.c.x.abandon(out);
    }

    fn encryption_answer(&mut self, answer: u8, at_ns: u64, out: &mut Vec<Event>) {
        self.c.open.phases.tls_ns = Some(at_ns.saturating_sub(self.encryption_request_ns));
        match answer {
            b'N' => self.state = State::Startup,
            // The recorder terminates the client's TLS and feeds what is inside: the
            // StartupMessage comes next, in plaintext.
            b'S' if self.c.meta.tls_terminated && self.c.open.tls_requested => self.state = State::Startup,
            b'S' | b'G' => {
                self.c.open.encrypted = true;
                self.fail(TLS_ADVICE.to_string(), out);
            }
            other => self.fail(
                format!(
                    "the answer to an encryption request was {:?}, not S, G or N",
                    other as char
                ),
                out,
            ),
        }
    }

    fn on_frame(&mut self, dir: Direction, f: &Frame<'_>, out: &mut Vec<Event>) -> Result<(), String> {
        match (dir, self.state) {
            (Direction::ToServer, State::Startup) => self.startup(f),
            (Direction::ToServer, State::Auth) => self.client_auth(f),
            (Direction::ToServer, State::Ready) => self.request(f),
            (Direction::ToClient, State::Auth) => self.server_auth(f, out),
            (Direction::ToClient, State::Ready) => self.response(f, out),
            (Direction::ToClient, State::Startup) if f.kind == b'E' => {
                // Refused before the startup (too many connections, shutting down).
                self.c.open.error = Some(self.error_fields(f.body));
                Ok(())
            }
            (dir, state) => Err(format!(
                "{} message {:?} where none was expected ({state:?})",
                if dir == Direction::ToServer {
                    "client"
                } else {
                    "server"
                },
                f.kind as char
            )),
        }
    }

    /// The client's untyped first messages.
    fn startup(&mut self, f: &Frame<'_>) -> Result<(), String> {
        let mut c = Cursor::new(f.body);
        let code = c.u32_be().ok_or("a startup packet without its code")?;
        match code {
            SSL_REQUEST | GSSENC_REQUEST => {
                if code == SSL_REQUEST {
                    self.c.open.tls_requested = true;
                } else {
                    self.c.open.gss_requested = true;
                }
                self.encryption_request_ns = f.first_ns;
                self.state = State::EncryptionAnswer;
            }
            CANCEL_REQUEST => {
                self.c.open.cancel_request = true;
                // The pid only: the secret key after it is never read.
                self.c.open.backend_pid = c.u32_be();
                self.state = State::Passthrough;
            }
            c3 if c3 >> 16 == 3 => {
                self.c.open.protocol = Some(format!("{}.{}", c3 >> 16, c3 & 0xffff));
                while let Some(name) = c.cstr() {
                    if name.is_empty() {
                        break;
                    }
                    let value = c.cstr().ok_or("a startup parameter without its value")?;
                    let name = text(name);
                    match name.as_str() {
                        "user" => self.c.open.user = Some(text(value)),
                        "database" => self.c.open.database = Some(text(value)),
                        n if is_secret_name(n) => self.c.open.parameters_withheld.push(name),
                        _ if self.c.open.parameters.len() < MAX_PARAMETERS => {
                            self.c.open.parameters.insert(name, text(value));
                        }
                        _ => {}
                    }
                }
                self.startup_sent_ns = Some(f.last_ns);
                self.state = State::Auth;
            }
            other => return Err(format!("startup packet with unknown code {other}")),
        }
        Ok(())
    }

    /// The client during authentication: its messages are counted, never kept.
    fn client_auth(&mut self, f: &Frame<'_>) -> Result<(), String> {
        match f.kind {
            b'p' => {
                let rt = self.c.open.phases.auth_round_trips.get_or_insert(0);
                *rt += 1;
                if std::mem::take(&mut self.sasl_pending) {
                    // SASLInitialResponse: the mechanism's name, then the client's
                    // first message, which is not read.
                    if let Some(m) = Cursor::new(f.body).cstr() {
                        self.c.open.auth_method = Some(text(m));
                    }
                }
                Ok(())
            }
            b'X' => {
                self.c.terminated_at = Some(f.first_ns);
                Ok(())
            }
            k => Err(format!("client message {:?} during authentication", k as char)),
        }
    }

    fn server_auth(&mut self, f: &Frame<'_>, out: &mut Vec<Event>) -> Result<(), String> {
        if self.auth_first_ns.is_none() && matches!(f.kind, b'R' | b'E') {
            self.auth_first_ns = Some(f.first_ns);
            self.c.open.phases.startup_ns = self.startup_sent_ns.map(|s| f.first_ns.saturating_sub(s));
        }
        let mut c = Cursor::new(f.body);
        match f.kind {
            b'R' => {
                let code = c.u32_be().ok_or("an authentication message without its code")?;
                let method = match code {
                    0 => {
                        self.auth_ok_ns = Some(f.last_ns);
                        self.c.open.phases.auth_ns = self.auth_first_ns.map(|a| f.last_ns.saturating_sub(a));
                        self.c.open.phases.auth_round_trips.get_or_insert(0);
                        if self.c.open.auth_method.is_none() {
                            self.c.open.auth_method = Some("trust".into());
                        }
                        None
                    }
                    2 => Some("kerberos5"),
                    3 => Some("cleartext"),
                    5 => Some("md5"),
                    7 => Some("gss"),
                    9 => Some("sspi"),
                    10 => {
                        self.sasl_pending = true;
                        Some("sasl")
                    }
                    8 | 11 | 12 => None,
                    other => return Err(format!("authentication request with unknown code {other}")),
                };
                if let Some(m) = method {
                    self.c.open.auth_method = Some(m.into());
                }
            }
            b'E' => self.c.open.error = Some(self.error_fields(f.body)),
            b'S' => {
                if let (Some(n), Some(v)) = (c.cstr(), c.cstr()) {
                    if self.c.open.server.len() < MAX_PARAMETERS {
                        self.c.open.server.insert(text(n), text(v));
                    }
                }
            }
            // The pid; the secret key after it is never read.
            b'K' => self.c.open.backend_pid = c.u32_be(),
            b'N' | b'v' => {}
            b'Z' => {
                self.c.open.phases.ready_ns = self.auth_ok_ns.map(|a| f.last_ns.saturating_sub(a));
                self.c.open.ready = true;
                self.c.x.ready(f.last_ns);
                self.c.write_open(out);
                self.state = State::Ready;
            }
            k => return Err(format!("server message {:?} during authentication", k as char)),
        }
        Ok(())
    }

    /// A client message once the session is ready.
    fn request(&mut self, f: &Frame<'_>) -> Result<(), String> {
        let redact = self.c.options.redact_values;
        let body = f.complete.then_some(f.body);
        match f.kind {
            b'Q' => {
                let sql = sql_text(
                    body.and_then(|b| Cursor::new(b).cstr()),
                    redact,
                    Dialect::Postgres,
                );
                let mut ex = self.c.x.start(f.first_ns, f.wire_len, Op::Query(sql));
                ex.sent_ns = f.last_ns;
                self.c.x.push(ex)?;
            }
            b'F' => {
                let mut c = Cursor::new(f.body);
                let function_oid = c.u32_be().unwrap_or(0);
                let formats = c.u16_be().unwrap_or(0) as usize;
                let args = c.bytes(formats * 2).and_then(|_| c.u16_be()).unwrap_or(0) as u32;
                let mut ex = self
                    .c
                    .x
                    .start(f.first_ns, f.wire_len, Op::FunctionCall { function_oid, args });
                ex.sent_ns = f.last_ns;
                self.c.x.push(ex)?;
            }
            b'P' | b'B' | b'D' | b'E' | b'C' | b'H' | b'S' => {
                let step = if f.kind == b'S' { None } else { Some(self.step(f)?) };
                if let Some(g) = &mut self.group {
                    if g.req.response_bytes > self.group_answered {
                        waited_after_flush(&mut g.req.op);
                    }
                    if f.kind != b'H' && asks_nothing(&g.req.op) {
                        self.c.x.restart(g, f.first_ns);
                    }
                    g.extend(f.last_ns, f.wire_len);
                } else {
                    let mut g = self
                        .c
                        .x
                        .start(f.first_ns, f.wire_len, Op::Extended { steps: Vec::new() });
                    g.sent_ns = f.last_ns;
                    self.group = Some(g);
                }
                if let (Some(step), Some(g)) = (step, &mut self.group) {
                    if let Op::Extended { steps } = &mut g.req.op {
                        if steps.len() < MAX_STEPS && g.held < MAX_GROUP_BYTES {
                            if !steps.is_empty() {
                                g.held += f.wire_len;
                            }
                            steps.push(step);
                        } else if let Some(Step::Dropped { count }) = steps.last_mut() {
                            *count += 1;
                        } else {
                            steps.push(Step::Dropped { count: 1 });
                        }
                    }
                }
                self.group_answered = self.group.as_ref().map_or(0, |g| g.req.response_bytes);
                if f.kind == b'S' {
                    if let Some(g) = self.group.take() {
                        self.c.x.push(g)?;
                    }
                }
            }
            b'd' | b'c' | b'f' => {
                // COPY FROM STDIN's data: part of the request being answered.
                if let Some(ex) = self.c.x.front_mut().or(self.group.as_mut()) {
                    ex.extend(f.last_ns, f.wire_len);
                    if f.kind == b'd' {
                        ex.req.copy_in_bytes += f.len as u64;
                    }
                }
            }
            b'X' => self.c.terminated_at = Some(f.first_ns),
            k => return Err(format!("unknown client message {:?}", k as char)),
        }
        Ok(())
    }

    /// One message of an extended-protocol group.
    fn step(&mut self, f: &Frame<'_>) -> Result<Step, String> {
        let mut c = Cursor::new(f.body);
        let malformed = || format!("malformed {:?} message", f.kind as char);
        let name = |c: &mut Cursor<'_>| c.cstr().map(text).ok_or_else(malformed);
        Ok(match f.kind {
            b'P' => {
                let statement = name(&mut c)?;
                let (sql, param_types) = if f.complete {
                    let sql = c.cstr().ok_or_else(malformed)?;
                    let n = c.u16_be().ok_or_else(malformed)? as usize;
                    let types: Option<Vec<u32>> = (0..n).map(|_| c.u32_be()).collect();
                    (Some(sql), types.ok_or_else(malformed)?)
                } else {
                    (None, Vec::new())
                };
                self.statements.remember(&statement, &param_types);
                Step::Parse {
                    statement,
                    sql: sql_text(sql, self.c.options.redact_values, Dialect::Postgres),
                    param_types,
                }
            }
            b'B' => {
                let portal = name(&mut c)?;
                let statement = name(&mut c)?;
                let params = if f.complete {
                    Some(self.bind_params(&mut c, &statement).ok_or_else(malformed)?)
                } else {
                    None
                };
                let nr = c.u16_be().unwrap_or(0) as usize;
                let result_formats = (0..nr).map_while(|_| c.u16_be()).collect();
                Step::Bind {
                    portal,
                    statement,
                    params,
                    result_formats,
                }
            }
            b'D' | b'C' => {
                let what = match c.u8() {
                    Some(b'S') => "statement",
                    Some(b'P') => "portal",
                    _ => return Err(malformed()),
                }
                .to_string();
                let name = name(&mut c)?;
                if f.kind == b'D' {
                    Step::Describe { what, name }
                } else {
                    if what == "statement" {
                        self.statements.forget(&name);
                    }
                    Step::Close { what, name }
                }
            }
            b'E' => Step::Execute {
                portal: name(&mut c)?,
                max_rows: c.u32_be().ok_or_else(malformed)?,
            },
            _ => Step::Flush { waited: false },
        })
    }

    /// Bind's formats and values, with each value's type where the statement's is known.
    fn bind_params(&self, c: &mut Cursor<'_>, statement: &str) -> Option<Vec<Param>> {
        let nf = c.u16_be()? as usize;
        let formats: Vec<u16> = (0..nf).map(|_| c.u16_be()).collect::<Option<_>>()?;
        let np = c.u16_be()? as usize;
        let types = self.statements.map.get(statement);
        let mut params = Vec::with_capacity(np.min(c.len() / 4 + 1));
        for i in 0..np {
            let format = match formats.len() {
                0 => 0,
                1 => formats[0],
                _ => *formats.get(i)?,
            };
            let len = c.i32_be()?;
            let type_id = types.and_then(|t| t.get(i)).copied().filter(|&o| o != 0);
            let mut p = Param {
                type_id,
                format: Some(if format == 1 { Format::Binary } else { Format::Text }),
                ..Param::default()
            };
            if len < 0 {
                p.null = true;
            } else {
                let v = c.bytes(len as usize)?;
                p.len = v.len() as u64;
                if !self.c.options.redact_values {
                    match std::str::from_utf8(v) {
                        Ok(s) if format == 0 => p.text = Some(s.to_string()),
                        _ => p.hex = Some(hex(v)),
                    }
                }
            }
            params.push(p);
        }
        Some(params)
    }

    /// A server message once the session is ready.
    fn response(&mut self, f: &Frame<'_>, out: &mut Vec<Event>) -> Result<(), String> {
        if f.kind == b'Z' {
            let tx = match f.body.first() {
                Some(b'I') => TxStatus::Idle,
                Some(b'T') => TxStatus::Transaction,
                Some(b'E') => TxStatus::Failed,
                _ => return Err("ReadyForQuery without a status".into()),
            };
            if let Some(ex) = self.c.x.front_mut() {
                ex.respond(f.first_ns, f.wire_len);
            }
            self.c.x.finish_front(f.last_ns, Some(tx), out);
            return Ok(());
        }
        let error = (f.kind == b'E').then(|| self.error_fields(f.body));
        let target = match self.c.x.front_mut() {
            Some(ex) => Some(ex),
            None => self.group.as_mut(),
        };
        let Some(ex) = target else {
            // Outside any request: notices, notifications, parameter changes, or a
            // FATAL error before the server closes.
            if let Some(e) = error.filter(|e| matches!(e.severity.as_deref(), Some("FATAL" | "PANIC"))) {
                self.c.fatal = Some(e);
            }
            return match f.kind {
                b'E' | b'N' | b'A' | b'S' => Ok(()),
                k => Err(format!(
                    "server message {:?} with no request to answer",
                    k as char
                )),
            };
        };
        ex.respond(f.first_ns, f.wire_len);
        let r = &mut ex.req;
        match f.kind {
            b'D' => r.rows += 1,
            b'C' => {
                let tag = Cursor::new(f.body).cstr().map(text).unwrap_or_default();
                if let Some(n) = affected(&tag) {
                    *r.affected_rows.get_or_insert(0) += n;
                }
                if r.tags.len() < MAX_TAGS {
                    r.tags.push(tag);
                }
            }
            b'E' => {
                if r.error.is_none() {
                    r.error = error;
                }
            }
            b'N' => r.notices += 1,
            b'd' => r.copy_out_bytes += f.len as u64,
            b't' => {
                let mut c = Cursor::new(f.body);
                let n = c.u16_be().unwrap_or(0) as usize;
                let types: Vec<u32> = (0..n).map_while(|_| c.u32_be()).collect();
                let described = match &r.op {
                    Op::Extended { steps } => steps.iter().rev().find_map(|s| match s {
                        Step::Describe { what, name } if what == "statement" => Some(name.clone()),
                        _ => None,
                    }),
                    _ => None,
                };
                if let Some(name) = described {
                    self.statements.remember(&name, &types);
                }
            }
            b'T' | b'I' | b'n' | b's' | b'1' | b'2' | b'3' | b'G' | b'H' | b'W' | b'c' | b'V' | b'A'
            | b'S' => {}
            k => return Err(format!("unknown server message {:?}", k as char)),
        }
        Ok(())
    }

    /// ErrorResponse's or NoticeResponse's fields: severity, SQLSTATE, message.
    fn error_fields(&self, body: &[u8]) -> ServerError {
        let mut c = Cursor::new(body);
        let mut e = ServerError::default();
        let mut localized = None;
        while let Some(code) = c.u8() {
            if code == 0 {
                break;
            }
            let Some(v) = c.cstr() else { break };
            match code {
                b'V' => e.severity = Some(text(v)),
                b'S' => localized = Some(text(v)),
                b'C' => e.sqlstate = Some(text(v)),
                b'M' => e.message = error_message(v, self.c.options.redact_values),
                _ => {}
            }
        }
        e.severity = e.severity.or(localized);
        e
    }
}

/// Parameter types by statement name, within a budget.
#[derive(Debug, Default)]
struct Types {
    map: HashMap<String, Vec<u32>>,
    /// Types held, all statements together.
    total: usize,
}

impl Types {
    fn remember(&mut self, name: &str, types: &[u32]) {
        self.forget(name);
        if name.len() <= MAX_NAME && self.map.len() < MAX_STATEMENTS && self.total + types.len() <= MAX_TYPES
        {
            self.total += types.len();
            self.map.insert(name.to_string(), types.to_vec());
        }
    }

    fn forget(&mut self, name: &str) {
        if let Some(t) = self.map.remove(name) {
            self.total -= t.len();
        }
    }
}

/// Rows a command tag reports as changed (`INSERT 0 5`, `UPDATE 3`, `DELETE 2`,
/// `MERGE 1`, `COPY 10`); `None` for tags that count no changed rows.
fn affected(tag: &str) -> Option<u64> {
    let mut words = tag.split(' ');
    let verb = words.next()?;
    if !matches!(verb, "INSERT" | "UPDATE" | "DELETE" | "MERGE" | "COPY") {
        return None;
    }
    words.next_back()?.parse().ok()
}

/// How much of each message body the decoder needs: rows and COPY data are counted only;
/// authentication messages are never kept, except the SASL mechanism's name at the head
/// of a SASLInitialResponse; the server's authentication requests only their code and
/// mechanism list; BackendKeyData only its pid.
fn keep(dir: Direction, state: State, sasl_pending: bool, kind: u8) -> Keep {
    match (dir, kind) {
        (Direction::ToServer, b'p') if state != State::Startup => {
            if sasl_pending {
                Keep::Prefix
            } else {
                Keep::Nothing
            }
        }
        (Direction::ToServer, b'd') if state == State::Ready => Keep::Nothing,
        (Direction::ToClient, b'D' | b'd' | b'T' | b'A') => Keep::Nothing,
        (Direction::ToClient, b'R' | b'K') => Keep::Prefix,
        _ => Keep::All,
    }
}

/// A group of Flushes only, so far: nothing the server answers.
fn asks_nothing(op: &Op) -> bool {
    matches!(op, Op::Extended { steps } if steps.iter().all(|s| matches!(s, Step::Flush { .. })))
}

/// The client sent more of a group after the server answered part of it: it waited
/// after the group's last Flush (a group answered early without one is a server
/// answering an error at once; nothing then marks a wait).
fn waited_after_flush(op: &mut Op) {
    if let Op::Extended { steps } = op {
        if let Some(Step::Flush { waited }) = steps.iter_mut().rev().find(|s| matches!(s, Step::Flush { .. }))
        {
            *waited = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::event::Outcome;
    use super::super::testing::*;
    use super::*;
    use crate::Engine;

    fn r(code: u32, rest: &[u8]) -> Vec<u8> {
        let mut b = code.to_be_bytes().to_vec();
        b.extend_from_slice(rest);
        pg(b'R', &b)
    }

    fn z(status: u8) -> Vec<u8> {
        pg(b'Z', &[status])
    }

    fn startup(params: &[&str]) -> Vec<u8> {
        let mut b = 196_608u32.to_be_bytes().to_vec();
        b.extend(cstrs(params));
        b.push(0);
        pg_untyped(&b)
    }

    fn bind(statement: &str, values: &[Option<&[u8]>]) -> Vec<u8> {
        let mut b = cstrs(&["", statement]);
        b.extend_from_slice(&0u16.to_be_bytes());
        b.extend_from_slice(&(values.len() as u16).to_be_bytes());
        for v in values {
            match v {
                Some(v) => {
                    b.extend_from_slice(&(v.len() as i32).to_be_bytes());
                    b.extend_from_slice(v);
                }
                None => b.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        b.extend_from_slice(&0u16.to_be_bytes());
        pg(b'B', &b)
    }

    fn error(sqlstate: &str, message: &str) -> Vec<u8> {
        let mut b = Vec::new();
        for (k, v) in [
            (b'S', "ERROR"),
            (b'V', "ERROR"),
            (b'C', sqlstate),
            (b'M', message),
        ] {
            b.push(k);
            b.extend(cstrs(&[v]));
        }
        b.push(0);
        pg(b'E', &b)
    }

    /// SSLRequest refused, SCRAM, a simple query, an extended group with a value, a
    /// failing query in a transaction, Terminate.
    fn scram_session() -> Vec<(Direction, Vec<u8>)> {
        vec![
            (Up, pg_untyped(&SSL_REQUEST.to_be_bytes())),
            (Down, b"N".to_vec()),
            (
                Up,
                startup(&[
                    "user",
                    "app",
                    "database",
                    "shop",
                    "application_name",
                    "web",
                    "password",
                    "hunter2",
                ]),
            ),
            (Down, r(10, b"SCRAM-SHA-256\0\0")),
            (
                Up,
                pg(b'p', b"SCRAM-SHA-256\0\0\0\0\x20n,,n=,r=CLIENTNONCESECRET"),
            ),
            (Down, r(11, b"r=CLIENTNONCESECRETserver,s=c2FsdA==,i=4096")),
            (Up, pg(b'p', b"c=biws,r=CLIENTNONCESECRETserver,p=PROOFSECRET")),
            (Down, [r(12, b"v=VERIFIERSECRET"), r(0, b"")].concat()),
            (
                Down,
                [
                    pg(b'S', &cstrs(&["server_version", "15.4"])),
                    pg(b'K', &[0, 0, 0x10, 0x92, 0xde, 0xad, 0xbe, 0xef]),
                    z(b'I'),
                ]
                .concat(),
            ),
            (Up, pg(b'Q', &cstrs(&["SELECT 1"]))),
            (
                Down,
                [
                    pg(b'T', b"\0\x01x\0"),
                    pg(b'D', b"\0\x01\0\0\0\x011"),
                    pg(b'C', &cstrs(&["SELECT 1"])),
                    z(b'I'),
                ]
                .concat(),
            ),
            (
                Up,
                [
                    pg(
                        b'P',
                        &[cstrs(&["s1", "SELECT $1::int"]), vec![0, 1, 0, 0, 0, 23]].concat(),
                    ),
                    bind("s1", &[Some(b"42")]),
                    pg(b'D', b"P\0"),
                    pg(b'E', b"\0\0\0\0\0"),
                    pg(b'S', b""),
                ]
                .concat(),
            ),
            (
                Down,
                [
                    pg(b'1', b""),
                    pg(b'2', b""),
                    pg(b'T', b"\0\x01x\0"),
                    pg(b'D', b"\0\x01\0\0\0\x0242"),
                    pg(b'C', &cstrs(&["SELECT 1"])),
                    z(b'I'),
                ]
                .concat(),
            ),
            (Up, pg(b'Q', &cstrs(&["BEGIN; SELEC"]))),
            (
                Down,
                [
                    pg(b'C', &cstrs(&["BEGIN"])),
                    error("42601", "syntax error at or near \"SELEC\""),
                    z(b'E'),
                ]
                .concat(),
            ),
            (Up, pg(b'X', b"")),
        ]
    }

    #[test]
    fn a_scram_session_gives_its_connect_requests_and_close_and_no_secret() {
        let (events, _) = run(
            Engine::Postgres,
            DecodeOptions::default(),
            &scram_session(),
            |_, _| vec![],
        );
        let o = open_of(&events);
        assert!(o.tls_requested && o.ready && !o.encrypted);
        assert_eq!(o.auth_method.as_deref(), Some("SCRAM-SHA-256"));
        assert_eq!(
            (o.user.as_deref(), o.database.as_deref()),
            (Some("app"), Some("shop"))
        );
        assert_eq!(
            o.parameters.get("application_name").map(String::as_str),
            Some("web")
        );
        assert_eq!(o.parameters_withheld, ["password"]);
        assert_eq!(o.backend_pid, Some(0x1092));
        assert_eq!(o.server.get("server_version").map(String::as_str), Some("15.4"));
        // Message i passes at 2_000 + 1_000 i: SSLRequest 2000, N 3000, startup 4000,
        // SASL 5000, ..., AuthenticationOk 9000, ReadyForQuery 10000.
        let p = &o.phases;
        assert_eq!(
            (p.connect_ns, p.tls_ns, p.startup_ns),
            (Some(100), Some(1_000), Some(1_000))
        );
        assert_eq!(
            (p.auth_ns, p.auth_round_trips, p.ready_ns),
            (Some(4_000), Some(2), Some(1_000))
        );
        let rs = requests(&events);
        assert_eq!(rs.len(), 3);
        assert_eq!(
            rs[0].op,
            Op::Query(sql_text(Some(b"SELECT 1"), false, Dialect::Postgres))
        );
        assert_eq!(
            (rs[0].at_ns, rs[0].think_ns, rs[0].response_ns),
            (10_000, Some(1_000), Some(1_000))
        );
        assert_eq!(
            (rs[0].rows, &rs[0].tags[..], rs[0].tx),
            (1, &["SELECT 1".to_string()][..], Some(TxStatus::Idle))
        );
        let Op::Extended { steps } = &rs[1].op else {
            panic!("{:?}", rs[1].op)
        };
        assert_eq!(steps.len(), 4, "{steps:?}");
        let Step::Bind { params: Some(ps), .. } = &steps[1] else {
            panic!("{steps:?}")
        };
        assert_eq!(
            (ps[0].type_id, ps[0].text.as_deref(), ps[0].len),
            (Some(23), Some("42"), 2)
        );
        assert_eq!(rs[2].outcome, Outcome::Error);
        assert_eq!(
            rs[2].error.as_ref().and_then(|e| e.sqlstate.as_deref()),
            Some("42601")
        );
        assert_eq!(
            (rs[2].tx, &rs[2].tags[..]),
            (Some(TxStatus::Failed), &["BEGIN".to_string()][..])
        );
        let c = close_of(&events);
        assert_eq!(
            (c.by, c.requests, c.decode_error.as_deref()),
            (ClosedBy::Client, 3, None)
        );
        let all = json(&events);
        for secret in ["hunter2", "SECRET", "biws", "3735928559", "deadbeef"] {
            assert!(!all.contains(secret), "{secret:?} in the trace: {all}");
        }
    }

    #[test]
    fn any_cut_of_the_bytes_gives_the_same_events() {
        let script = scram_session();
        let (whole, _) = run(Engine::Postgres, DecodeOptions::default(), &script, |_, _| vec![]);
        let (bytewise, _) = run(Engine::Postgres, DecodeOptions::default(), &script, |_, n| {
            (1..n).collect()
        });
        assert_eq!(timeless(&bytewise), timeless(&whole));
        for k in 1..7 {
            let (cut, _) = run(Engine::Postgres, DecodeOptions::default(), &script, |i, n| {
                vec![(i * 7 + k) % n.max(1)]
            });
            assert_eq!(
                cut, whole,
                "cut {k}: a cut inside a chunk keeps the chunk's times"
            );
        }
    }

    #[test]
    fn a_cleartext_password_and_redacted_values_never_reach_the_trace() {
        let options = DecodeOptions {
            redact_values: true,
            ..DecodeOptions::default()
        };
        let script = vec![
            (Up, startup(&["user", "app", "database", "shop"])),
            (Down, r(3, b"")),
            (Up, pg(b'p', b"hunter2secret\0")),
            (Down, [r(0, b""), z(b'I')].concat()),
            (
                Up,
                pg(
                    b'Q',
                    &cstrs(&["UPDATE t SET note = 'private words' WHERE id = 98765"]),
                ),
            ),
            (
                Down,
                [
                    error("22P02", "invalid input syntax for type integer: \"private\""),
                    z(b'I'),
                ]
                .concat(),
            ),
            (
                Up,
                [
                    pg(b'P', &[cstrs(&["", "SELECT $1, $2"]), vec![0, 0]].concat()),
                    bind("", &[Some(b"card-4111"), None]),
                    pg(b'E', b"\0\0\0\0\0"),
                    pg(b'S', b""),
                ]
                .concat(),
            ),
            (
                Down,
                [
                    pg(b'1', b""),
                    pg(b'2', b""),
                    pg(b'C', &cstrs(&["SELECT 1"])),
                    z(b'I'),
                ]
                .concat(),
            ),
        ];
        let (events, _) = run(Engine::Postgres, options, &script, |_, _| vec![]);
        assert_eq!(open_of(&events).auth_method.as_deref(), Some("cleartext"));
        assert_eq!(open_of(&events).phases.auth_round_trips, Some(1));
        let all = json(&events);
        for value in ["hunter2secret", "private", "98765", "card-4111"] {
            assert!(!all.contains(value), "{value:?} in the trace: {all}");
        }
        let rs = requests(&events);
        assert_eq!(
            rs[0].op,
            Op::Query(sql_text(
                Some(b"UPDATE t SET note = $1 WHERE id = $2"),
                false,
                Dialect::Postgres
            ))
            .redacted_literals(&[("string", 15), ("number", 5)])
        );
        assert_eq!(
            rs[0]
                .error
                .as_ref()
                .map(|e| (e.sqlstate.as_deref(), e.message.as_deref())),
            Some((Some("22P02"), None))
        );
        let Op::Extended { steps } = &rs[1].op else {
            panic!()
        };
        let Step::Bind { params: Some(ps), .. } = &steps[1] else {
            panic!()
        };
        assert_eq!(
            (ps[0].len, ps[0].text.as_ref(), ps[0].hex.as_ref()),
            (9, None, None)
        );
        assert!(ps[1].null);
    }

    trait Redacted {
        fn redacted_literals(self, l: &[(&str, u64)]) -> Op;
    }

    impl Redacted for Op {
        fn redacted_literals(self, l: &[(&str, u64)]) -> Op {
            let Op::Query(mut s) = self else { return self };
            s.literals = Some(
                l.iter()
                    .map(|(k, n)| super::super::event::Literal {
                        kind: k.to_string(),
                        len: *n,
                    })
                    .collect(),
            );
            Op::Query(s)
        }
    }

    /// asyncpg's prepare: Parse, Describe and Flush, the server's answer, then Bind,
    /// Execute and Sync: one request, two round trips (its Flush marked waited); a
    /// group whose Flush the client did not wait after is one.
    #[test]
    fn a_group_the_client_waited_inside_is_two_round_trips() {
        let parse = pg(b'P', &[cstrs(&["s1", "SELECT 1"]), vec![0, 0]].concat());
        let describe = pg(b'D', &[b"S".to_vec(), cstrs(&["s1"])].concat());
        let rest = [bind("s1", &[]), pg(b'E', b"\0\0\0\0\0"), pg(b'S', b"")].concat();
        let flush = pg(b'H', b"");
        let described = [pg(b'1', b""), pg(b't', b"\0\0"), pg(b'n', b"")].concat();
        let done = [pg(b'2', b""), pg(b'C', &cstrs(&["SELECT 1"])), z(b'I')].concat();
        let script = vec![
            (Up, startup(&["user", "app"])),
            (Down, [r(0, b""), z(b'I')].concat()),
            (Up, [parse.clone(), describe.clone(), flush.clone()].concat()),
            (Down, described.clone()),
            (Up, rest.clone()),
            (Down, done.clone()),
            (Up, [parse, describe, flush, rest].concat()),
            (Down, [described, done].concat()),
        ];
        let (events, _) = run(Engine::Postgres, DecodeOptions::default(), &script, |_, _| vec![]);
        let rs = requests(&events);
        assert_eq!(rs.len(), 2);
        let flushes = |r: &crate::event::Request| match &r.op {
            Op::Extended { steps } => steps
                .iter()
                .filter_map(|s| match s {
                    Step::Flush { waited } => Some(*waited),
                    _ => None,
                })
                .collect::<Vec<_>>(),
            _ => vec![],
        };
        assert_eq!((flushes(rs[0]), rs[0].round_trips()), (vec![true], 2));
        assert_eq!((flushes(rs[1]), rs[1].round_trips()), (vec![false], 1));
    }

    #[test]
    fn pipelined_groups_copy_and_a_lone_sync_are_matched_in_order() {
        let group = |sql: &str| {
            [
                pg(b'P', &[cstrs(&["", sql]), vec![0, 0]].concat()),
                bind("", &[]),
                pg(b'E', b"\0\0\0\0\0"),
                pg(b'S', b""),
            ]
            .concat()
        };
        let answer = |tag: &str| [pg(b'1', b""), pg(b'2', b""), pg(b'C', &cstrs(&[tag])), z(b'I')].concat();
        let script = vec![
            (Up, startup(&["user", "app"])),
            (Down, [r(0, b""), z(b'I')].concat()),
            (
                Up,
                [group("INSERT INTO t VALUES (1)"), group("UPDATE t SET a = 2")].concat(),
            ),
            (Down, answer("INSERT 0 1")),
            (Down, answer("UPDATE 4")),
            (Up, pg(b'Q', &cstrs(&["COPY t FROM STDIN"]))),
            (Down, pg(b'G', b"\0\0\x01\0\0")),
            (Up, [pg(b'd', b"1\n2\n"), pg(b'c', b"")].concat()),
            (Down, [pg(b'C', &cstrs(&["COPY 2"])), z(b'I')].concat()),
            (Up, pg(b'S', b"")),
            (Down, z(b'I')),
        ];
        let (events, _) = run(Engine::Postgres, DecodeOptions::default(), &script, |_, _| vec![]);
        let rs = requests(&events);
        assert_eq!(
            rs.iter().map(|r| r.affected_rows).collect::<Vec<_>>(),
            [Some(1), Some(4), Some(2), None]
        );
        assert_eq!(
            (rs[0].think_ns, rs[1].think_ns),
            (Some(1_000), None),
            "the second was pipelined"
        );
        assert_eq!((rs[2].copy_in_bytes, rs[2].response_ns), (4, Some(1_000)));
        assert_eq!(rs[3].op, Op::Extended { steps: vec![] });
        assert_eq!(open_of(&events).auth_method.as_deref(), Some("trust"));
    }

    /// psycopg 3's pipeline mode ends each group with a Sync and a Flush, then waits for
    /// the answers: the Flush begins the next group's bytes, but the group is sent after
    /// the answer, a round trip of its own (before, it counted as pipelined and its
    /// round trip went unpriced). A group sent before the answer is still pipelined.
    #[test]
    fn a_flush_after_the_sync_then_a_wait_is_no_pipeline() {
        let group = |sql: &str| {
            [
                pg(b'P', &[cstrs(&["", sql]), vec![0, 0]].concat()),
                bind("", &[]),
                pg(b'E', b"\0\0\0\0\0"),
                pg(b'S', b""),
                pg(b'H', b""),
            ]
            .concat()
        };
        let answer = |tag: &str| [pg(b'1', b""), pg(b'2', b""), pg(b'C', &cstrs(&[tag])), z(b'I')].concat();
        let script = vec![
            (Up, startup(&["user", "app"])),
            (Down, [r(0, b""), z(b'I')].concat()),
            (Up, group("BEGIN")),
            (Down, answer("BEGIN")),
            (Up, group("COMMIT")),
            (Up, group("SELECT 1")),
            (Down, answer("COMMIT")),
            (Down, answer("SELECT 1")),
        ];
        let (events, _) = run(Engine::Postgres, DecodeOptions::default(), &script, |_, _| vec![]);
        let rs = requests(&events);
        // The last Flush, never followed, is a request left unanswered at the end.
        let think: Vec<Option<u64>> = rs[..3].iter().map(|r| r.think_ns).collect();
        assert_eq!(think, [Some(1_000), Some(1_000), None], "{rs:#?}");
        assert_eq!(rs.iter().map(|r| r.round_trips()).sum::<u64>(), 2);
        // The second starts at its Parse, after the answer, not at the Flush before it.
        assert_eq!(rs[1].at_ns, rs[0].at_ns + 2_000);
    }

    /// `record --listen-tls`: the recorder answers the SSLRequest `S`, terminates the
    /// client's TLS and feeds what is inside, so the session decodes as plaintext, with
    /// its handshake in `session_open`; a failed handshake stops decoding with why.
    #[test]
    fn tls_the_recorder_terminates_is_decoded_inside() {
        let tls_meta = SessionMeta {
            tls_terminated: true,
            ..meta()
        };
        let mut script = scram_session();
        let inside = script.split_off(2);
        script[1] = (Down, b"S".to_vec());
        let (mut d, mut events) = (Decoder::new(tls_meta, DecodeOptions::default()), Vec::new());
        for (i, (dir, bytes)) in script.iter().enumerate() {
            d.feed(*dir, 2_000 + 1_000 * i as u64, bytes, &mut events);
        }
        let accepted = super::super::TlsAccepted {
            version: Some("TLSv1.3".into()),
            handshake_ns: 700_000,
            round_trips: 1,
        };
        d.tls_accepted(Ok(accepted), &mut events);
        for (i, (dir, bytes)) in inside.iter().enumerate() {
            d.feed(*dir, 10_000 + 1_000 * i as u64, bytes, &mut events);
        }
        d.close(50_000, ClosedBy::Client, &mut events);
        let o = open_of(&events);
        assert!(o.tls && o.tls_requested && o.ready && !o.encrypted, "{o:?}");
        assert_eq!(o.tls_version.as_deref(), Some("TLSv1.3"));
        assert_eq!(
            (o.phases.tls_handshake_ns, o.phases.tls_handshake_round_trips),
            (Some(700_000), Some(1))
        );
        assert_eq!(o.auth_method.as_deref(), Some("SCRAM-SHA-256"));
        assert_eq!(requests(&events).len(), 3);
        assert!(close_of(&events).decode_error.is_none());
        // Without the recorder's termination an `S` is still encryption it cannot read.
        let (events, _) = run(Engine::Postgres, DecodeOptions::default(), &script, |_, _| vec![]);
        assert!(open_of(&events).encrypted);
        let mut d = Decoder::new(tls_meta, DecodeOptions::default());
        let mut events = Vec::new();
        for (dir, bytes) in &script {
            d.feed(*dir, 2_000, bytes, &mut events);
        }
        d.tls_accepted(Err("no shared cipher".into()), &mut events);
        d.close(9_000, ClosedBy::Client, &mut events);
        let c = close_of(&events);
        assert!(
            c.decode_error
                .as_deref()
                .unwrap()
                .contains("TLS handshake with the application failed: no shared cipher"),
            "{c:?}"
        );
        assert!(!open_of(&events).tls);
    }

    /// Inside the TLS the recorder terminates a client may send its password in clear
    /// (the `password` method): the PasswordMessage is counted, never kept.
    #[test]
    fn a_cleartext_password_inside_terminated_tls_is_not_kept() {
        let tls_meta = SessionMeta {
            tls_terminated: true,
            ..meta()
        };
        let mut d = Decoder::new(tls_meta, DecodeOptions::default());
        let mut events = Vec::new();
        d.feed(Up, 2_000, &pg_untyped(&SSL_REQUEST.to_be_bytes()), &mut events);
        d.feed(Down, 2_100, b"S", &mut events);
        let accepted = super::super::TlsAccepted {
            version: Some("TLSv1.2".into()),
            handshake_ns: 1_000,
            round_trips: 2,
        };
        d.tls_accepted(Ok(accepted), &mut events);
        let script = [
            (Up, startup(&["user", "app", "database", "shop"])),
            (Down, r(3, b"")),
            (Up, pg(b'p', b"CLEARTEXTSECRET\0")),
            (Down, [r(0, b""), z(b'I')].concat()),
            (Up, pg(b'Q', b"SELECT 1\0")),
            (Down, z(b'I')),
        ];
        for (i, (dir, bytes)) in script.iter().enumerate() {
            d.feed(*dir, 3_000 + 1_000 * i as u64, bytes, &mut events);
        }
        d.close(20_000, ClosedBy::Client, &mut events);
        let o = open_of(&events);
        assert!(o.tls && o.ready, "{o:?}");
        assert_eq!(o.auth_method.as_deref(), Some("cleartext"));
        assert_eq!(o.phases.tls_handshake_round_trips, Some(2));
        assert_eq!(requests(&events).len(), 1);
        let text = format!("{events:?}");
        assert!(!text.contains("CLEARTEXTSECRET"), "{text}");
    }

    #[test]
    fn encryption_or_garbage_stops_decoding_with_a_reason_and_keeps_what_came_before() {
        let script = vec![
            (Up, pg_untyped(&SSL_REQUEST.to_be_bytes())),
            (Down, b"S\x16\x03\x01".to_vec()),
            (Up, b"\x16\x03\x01\x02\x00 client hello".to_vec()),
        ];
        let (events, _) = run(Engine::Postgres, DecodeOptions::default(), &script, |_, _| vec![]);
        let o = open_of(&events);
        assert!(o.tls_requested && o.encrypted && !o.ready);
        let c = close_of(&events);
        assert!(
            c.decode_error.as_deref().unwrap().contains("sslmode=disable"),
            "{c:?}"
        );
        assert_eq!(c.undecoded_bytes, 3 + 18);
        let mut script = scram_session();
        script.truncate(11);
        script.push((Up, b"Q\xff\xff\xff\xffSELECT".to_vec()));
        let (events, _) = run(Engine::Postgres, DecodeOptions::default(), &script, |_, _| vec![]);
        assert_eq!(requests(&events).len(), 1, "the query before the garbage is kept");
        let c = close_of(&events);
        assert!(
            c.decode_error.as_deref().unwrap().contains("length 4294967295"),
            "{c:?}"
        );
        assert_eq!(c.undecoded_bytes, 6);
    }

    #[test]
    fn a_message_over_the_cap_is_counted_with_its_names_and_without_its_text() {
        let options = DecodeOptions {
            max_message_bytes: 64,
            ..DecodeOptions::default()
        };
        let long = format!("SELECT '{}'", "x".repeat(500));
        let script = vec![
            (Up, startup(&["user", "app"])),
            (Down, [r(0, b""), z(b'I')].concat()),
            (
                Up,
                [
                    pg(b'P', &[cstrs(&["big", &long]), vec![0, 0]].concat()),
                    pg(b'S', b""),
                ]
                .concat(),
            ),
            (Down, [pg(b'1', b""), z(b'I')].concat()),
        ];
        let (events, d) = run(Engine::Postgres, options, &script, |_, n| {
            (1..n).step_by(7).collect()
        });
        let rs = requests(&events);
        let Op::Extended { steps } = &rs[0].op else {
            panic!()
        };
        assert!(
            matches!(&steps[0], Step::Parse { statement, sql, .. } if statement == "big" && sql.sql.is_none()),
            "{steps:?}"
        );
        assert!(rs[0].request_bytes > 500);
        assert!(d.buffered() <= 2 * super::super::frame::PREFIX);
    }

    #[test]
    fn a_client_that_never_reads_is_cut_off_at_the_queue_cap_not_the_memory() {
        let mut script = vec![
            (Up, startup(&["user", "app"])),
            (Down, [r(0, b""), z(b'I')].concat()),
        ];
        let query = pg(b'Q', &cstrs(&["SELECT 1"]));
        script.push((Up, query.repeat(super::super::session::MAX_PENDING + 10)));
        let (events, _, held) =
            run_watching(Engine::Postgres, DecodeOptions::default(), &script, |_, _| vec![]);
        assert_eq!(requests(&events).len(), super::super::session::MAX_PENDING + 1);
        assert_eq!(
            close_of(&events).requests,
            super::super::session::MAX_PENDING as u64 + 1
        );
        assert!(requests(&events).iter().all(|r| r.outcome == Outcome::Unanswered));
        let c = close_of(&events);
        assert!(
            c.decode_error.as_deref().unwrap().contains("awaiting answers"),
            "{c:?}"
        );
        assert_eq!(
            c.undecoded_bytes,
            9 * query.len() as u64,
            "the rest passed through"
        );
        assert!(held <= (super::super::session::MAX_PENDING + 1) * query.len());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

        /// Random bytes both ways, or a real session cut short and followed by random
        /// bytes, in random chunks: never a panic, and never more held than the caps.
        #[test]
        fn hostile_bytes_never_panic_or_grow_memory(
            garbage in proptest::collection::vec((any::<bool>(), proptest::collection::vec(any::<u8>(), 0..300)), 0..12),
            keep in 0usize..17,
            cuts in proptest::collection::vec(1usize..64, 0..8),
        ) {
            let options = DecodeOptions { max_message_bytes: 256, ..DecodeOptions::default() };
            let mut script = scram_session();
            script.truncate(keep);
            script.extend(garbage.into_iter().map(|(up, b)| (if up { Up } else { Down }, b)));
            let (events, _, held) = run_watching(Engine::Postgres, options, &script, |i, _| cuts.iter().map(|c| c * (i + 1)).collect());
            // Two directions' messages in progress, and requests awaiting answers
            // (no more than the bytes sent to the server).
            let sent: usize = script.iter().filter(|(d, _)| *d == Up).map(|(_, b)| b.len()).sum();
            prop_assert!(held <= 2 * 256 + sent, "held {held} of {sent} sent");
            prop_assert!(matches!(events.last(), Some(Event::SessionClose(_))));
            let text = json(&events);
            prop_assert!(!text.contains("PROOFSECRET") && !text.contains("hunter2"));
        }
    }
}

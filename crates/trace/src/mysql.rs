//! MySQL's and MariaDB's client/server protocol, read from the side as a state machine:
//! fed each direction's bytes as they pass, it follows a connection from the server's
//! greeting to its end and gives the trace's events.
//!
//! The handshake is server-first: the greeting (version, thread id, capabilities, the
//! default auth plugin), then the client's handshake response (user, database, auth
//! plugin, capabilities and connection attributes, minus secret-looking ones; its auth
//! response is stepped over and never copied) or an SSLRequest (the client asked for
//! TLS: what follows is encrypted and passes undecoded). Authentication runs to the OK
//! or ERR packet through any auth switch (the final plugin is the method) and extra
//! exchanges (caching_sha2_password's fast or full path), whose client packets are
//! counted as round trips and never kept.
//!
//! Commands start with sequence number 0; a client packet with another number continues
//! the command before it (LOCAL INFILE data, COM_CHANGE_USER's auth, a packet over
//! 16 MiB) and is only counted. Responses are parsed by what the command was:
//! COM_QUERY's and COM_STMT_EXECUTE's OK, ERR or result sets (column count, MariaDB's
//! metadata-follows byte when both sides cache metadata, column definitions, EOF unless
//! CLIENT_DEPRECATE_EOF, rows, the EOF or OK that ends them, more result sets while the
//! status says so); COM_STMT_PREPARE_OK with its parameter and column definitions;
//! single-packet answers. Every OK and EOF packet's status flags give the transaction
//! status (SERVER_STATUS_IN_TRANS) and autocommit after the response.

use std::collections::HashMap;

use super::connection::Connection;
use super::event::{ClosedBy, Event, Op, Prepared, Request, Sql, TxStatus};
use super::frame::{text, Cursor, Frame, Framing, Keep};
use super::mysql_packet::{self as packet, *};
use super::{is_secret_name, sql_text, DecodeOptions, Dialect, Direction, SessionMeta, TLS_ADVICE};

/// Prepared statements remembered per session: MySQL's own default cap
/// (max_prepared_stmt_count is 16,382).
const MAX_STATEMENTS: usize = 16_384;
/// Parameter types remembered, all statements together; beyond, an execution that
/// leaves its types out is not decoded.
const MAX_TYPES: usize = 1 << 20;
/// A packet of this length continues in the next one.
const CONTINUED: usize = 0xff_ffff;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Greeting,
    Handshake,
    Auth,
    Ready,
    Passthrough,
}

/// What comes after a run of definitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    Rows,
    PrepareColumns(u64),
    Done,
}

/// Where the oldest command's response is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resp {
    /// A result's first packet: OK, ERR, LOCAL INFILE, EOF, or a column count.
    Start,
    /// COM_STMT_PREPARE's first packet.
    PrepareOk,
    Defs {
        left: u64,
        eof: bool,
        after: After,
    },
    Eof {
        after: After,
    },
    Rows,
    /// Any one packet (COM_STATISTICS).
    OnePacket,
    /// COM_CHANGE_USER: auth exchanges up to OK or ERR.
    AuthLike,
}

#[derive(Debug, Default)]
struct Statement {
    params: u16,
    /// The types last sent for it.
    types: Vec<u16>,
}

/// One MySQL/MariaDB connection's decoder.
#[derive(Debug)]
pub struct Decoder {
    /// What every connection keeps, whatever its protocol.
    c: Connection,
    state: State,
    server_caps: u32,
    server_ext: u32,
    deprecate_eof: bool,
    cache_metadata: bool,
    query_attributes: bool,
    statements: HashMap<u32, Statement>,
    /// The types `statements` hold.
    types_held: usize,
    /// The last statement prepared (MariaDB's id 0xffffffff means it).
    last_prepared: Option<u32>,
    resp: Option<Resp>,
    /// The server's status flags as last reported.
    status: u16,
    /// The previous packet each way was 16 MiB - 1 long: this one continues it.
    up_continues: bool,
    down_continues: bool,
    auth_first_ns: Option<u64>,
}

impl Decoder {
    pub fn new(meta: SessionMeta, options: DecodeOptions) -> Decoder {
        Decoder {
            c: Connection::new(meta, options),
            state: State::Greeting,
            server_caps: 0,
            server_ext: 0,
            deprecate_eof: false,
            cache_metadata: false,
            query_attributes: false,
            statements: HashMap::new(),
            types_held: 0,
            last_prepared: None,
            resp: None,
            status: 0,
            up_continues: false,
            down_continues: false,
            auth_first_ns: None,
        }
    }

    pub fn tls_requested(&self) -> bool {
        self.c.open.tls_requested
    }

    /// The recorder's handshake with the client after its SSLRequest: the handshake
    /// response follows inside, or decoding stops with why it failed.
    pub fn tls_accepted(&mut self, tls: Result<super::TlsAccepted, String>, out: &mut Vec<Event>) {
        if let Err(e) = self.c.tls_accepted(tls) {
            self.fail(e, out);
        }
    }

    pub fn buffered(&self) -> usize {
        self.c.buffered()
    }

    pub fn feed(&mut self, dir: Direction, at_ns: u64, bytes: &[u8], out: &mut Vec<Event>) {
        let Some(mut framer) = self.c.chunk(dir, bytes.len()) else {
            return;
        };
        let mut input = bytes;
        while !input.is_empty() && self.state != State::Passthrough {
            let (state, resp) = (self.state, self.resp);
            let continues = match dir {
                Direction::ToServer => self.up_continues,
                Direction::ToClient => self.down_continues,
            };
            let keep =
                move |seq: u8, _: usize, first: Option<u8>| keep(dir, state, resp, continues, seq, first);
            match framer.next(Framing::Mysql, &mut input, at_ns, keep) {
                Ok(Some(f)) => {
                    let next_continues = f.len == CONTINUED;
                    let r = if continues {
                        self.continuation(dir, &f);
                        Ok(())
                    } else {
                        self.on_packet(dir, &f, out)
                    };
                    match dir {
                        Direction::ToServer => self.up_continues = next_continues,
                        Direction::ToClient => self.down_continues = next_continues,
                    }
                    if let Err(e) = r {
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
            self.c.x.abandon(out);
            self.c.close(at_ns, by, out);
        }
    }

    /// See [`crate::Decoder::interrupt`].
    pub fn interrupt(&mut self, reason: String, out: &mut Vec<Event>) {
        if self.state != State::Passthrough {
            self.fail(reason, out);
        }
    }

    /// Stops decoding: the rest passes through, and why is said once, at the close.
    fn fail(&mut self, reason: String, out: &mut Vec<Event>) {
        self.state = State::Passthrough;
        self.c.stop(reason);
        self.c.x.abandon(out);
    }

    /// The rest of a packet over 16 MiB: counted with what it continues.
    fn continuation(&mut self, dir: Direction, f: &Frame<'_>) {
        let ex = match dir {
            Direction::ToServer => self.c.x.back_mut(),
            Direction::ToClient => self.c.x.front_mut(),
        };
        if let Some(ex) = ex {
            match dir {
                Direction::ToServer => ex.extend(f.last_ns, f.wire_len),
                Direction::ToClient => ex.respond(f.first_ns, f.wire_len),
            }
        }
    }

    fn on_packet(&mut self, dir: Direction, f: &Frame<'_>, out: &mut Vec<Event>) -> Result<(), String> {
        match (dir, self.state) {
            (Direction::ToClient, State::Greeting) => self.greeting(f),
            (Direction::ToServer, State::Handshake) => self.handshake(f, out),
            (Direction::ToServer, State::Auth) => {
                // An auth exchange's client packet: counted, never read.
                *self.c.open.phases.auth_round_trips.get_or_insert(0) += 1;
                Ok(())
            }
            (Direction::ToClient, State::Auth) => self.server_auth(f, out),
            (Direction::ToServer, State::Ready) => self.command(f, out),
            (Direction::ToClient, State::Ready) => self.response(f, out),
            (dir, state) => Err(format!(
                "{} packet where none was expected ({state:?})",
                if dir == Direction::ToServer {
                    "a client"
                } else {
                    "a server"
                }
            )),
        }
    }

    fn greeting(&mut self, f: &Frame<'_>) -> Result<(), String> {
        let since = self.c.meta.open_ns + self.c.meta.connect_ns.unwrap_or(0);
        self.c.open.phases.startup_ns = Some(f.first_ns.saturating_sub(since));
        if f.body.first() == Some(&0xff) {
            // Refused before the handshake (too many connections, host blocked).
            self.c.open.error = Some(packet::err(f.body, self.c.options.redact_values));
            self.state = State::Passthrough;
            return Ok(());
        }
        let g = packet::greeting(f.body).ok_or("not a MySQL protocol 10 greeting")?;
        self.c.open.protocol = Some("10".into());
        self.c.open.server.insert("version".into(), g.version);
        self.c.open.backend_pid = Some(g.connection_id);
        self.c.open.auth_method = g.plugin;
        self.server_caps = g.caps;
        self.server_ext = g.ext_caps;
        self.state = State::Handshake;
        Ok(())
    }

    fn handshake(&mut self, f: &Frame<'_>, out: &mut Vec<Event>) -> Result<(), String> {
        let r = packet::handshake_response(f.body).ok_or("a handshake response this decoder cannot read")?;
        self.auth_first_ns = Some(f.first_ns);
        self.c.open.client_capabilities = Some(u64::from(r.caps) | (u64::from(r.ext_caps) << 32));
        if r.ssl_request {
            self.c.open.tls_requested = true;
            if self.c.meta.tls_terminated {
                // The recorder terminates the client's TLS: the handshake response (its
                // sequence number 2) comes next, in plaintext.
                return Ok(());
            }
            self.c.open.encrypted = true;
            self.fail(TLS_ADVICE.to_string(), out);
            return Ok(());
        }
        let both = r.caps & self.server_caps;
        self.deprecate_eof = both & CLIENT_DEPRECATE_EOF != 0;
        self.query_attributes = both & CLIENT_QUERY_ATTRIBUTES != 0;
        self.cache_metadata = r.ext_caps & self.server_ext & MARIADB_CLIENT_CACHE_METADATA != 0;
        self.c.open.user = r.user;
        self.c.open.database = r.database;
        if r.plugin.is_some() {
            self.c.open.auth_method = r.plugin;
        }
        for (k, v) in r.attributes {
            if is_secret_name(&k) {
                self.c.open.parameters_withheld.push(k);
            } else {
                self.c.open.parameters.insert(k, v);
            }
        }
        self.c.open.phases.auth_round_trips = Some(1);
        self.state = State::Auth;
        Ok(())
    }

    fn server_auth(&mut self, f: &Frame<'_>, out: &mut Vec<Event>) -> Result<(), String> {
        match f.body.first() {
            Some(0x00) => {
                self.status = packet::ok(f.body).map_or(0, |s| s.flags);
                self.c.open.phases.auth_ns = self.auth_first_ns.map(|a| f.last_ns.saturating_sub(a));
                self.c.open.ready = true;
                self.c.x.ready(f.last_ns);
                self.c.write_open(out);
                self.state = State::Ready;
            }
            Some(0xff) => {
                self.c.open.error = Some(packet::err(f.body, self.c.options.redact_values));
                self.c.open.phases.auth_ns = self.auth_first_ns.map(|a| f.last_ns.saturating_sub(a));
            }
            Some(0xfe) => {
                // Auth switch: the plugin's name, then its data (not read).
                if let Some(name) = Cursor::new(&f.body[1..]).cstr() {
                    self.c.open.auth_method = Some(text(name));
                }
            }
            Some(0x01) => {}
            _ => return Err("an unexpected packet during authentication".into()),
        }
        Ok(())
    }

    /// A client packet once the session is ready: a command, or the rest of one.
    fn command(&mut self, f: &Frame<'_>, out: &mut Vec<Event>) -> Result<(), String> {
        if f.kind != 0 {
            // LOCAL INFILE data or COM_CHANGE_USER's auth: part of the command before.
            if let Some(ex) = self.c.x.back_mut() {
                ex.extend(f.last_ns, f.wire_len);
            }
            return Ok(());
        }
        let Some(&code) = f.body.first() else {
            return Err("an empty command packet".into());
        };
        let redact = self.c.options.redact_values;
        let mut c = Cursor::new(&f.body[1..]);
        let sql = |c: &mut Cursor<'_>| -> Sql {
            if f.complete {
                sql_text(Some(c.rest()), redact, Dialect::Mysql)
            } else {
                Sql::default()
            }
        };
        let op = match code {
            0x01 => Op::ComQuit,
            0x02 => Op::ComInitDb {
                schema: text(c.rest()),
            },
            0x03 => {
                if self.query_attributes && f.complete {
                    packet::skip_query_attributes(&mut c)
                        .ok_or("a COM_QUERY with malformed query attributes")?;
                }
                Op::ComQuery(sql(&mut c))
            }
            0x0e => Op::ComPing,
            0x16 => Op::ComStmtPrepare(sql(&mut c)),
            0x17 => {
                let mut id = c.u32_le().ok_or("a COM_STMT_EXECUTE without its statement id")?;
                let flags = c.u8().unwrap_or(0);
                c.u32_le();
                if id == u32::MAX {
                    id = self.last_prepared.unwrap_or(id);
                }
                let qa = self.query_attributes;
                let params = match self.statements.get_mut(&id) {
                    Some(st) if f.complete => {
                        let before = st.types.len();
                        let p = packet::execute_params(
                            &mut c,
                            flags,
                            st.params as usize,
                            &mut st.types,
                            qa,
                            redact,
                        );
                        self.types_held = self.types_held + st.types.len() - before;
                        if self.types_held > MAX_TYPES {
                            self.types_held -= st.types.len();
                            st.types = Vec::new();
                        }
                        p
                    }
                    _ => None,
                };
                Op::ComStmtExecute {
                    statement_id: id,
                    flags,
                    params,
                }
            }
            0x19 | 0x1a => {
                let statement_id = c.u32_le().ok_or("a statement command without its id")?;
                if code == 0x19 {
                    if let Some(st) = self.statements.remove(&statement_id) {
                        self.types_held -= st.types.len();
                    }
                    Op::ComStmtClose { statement_id }
                } else {
                    Op::ComStmtReset { statement_id }
                }
            }
            other => Op::ComOther {
                command: other,
                name: command_name(other).into(),
            },
        };
        let mut ex = self.c.x.start(f.first_ns, f.wire_len, op);
        ex.sent_ns = f.last_ns;
        match code {
            // No answer comes to these.
            0x01 | 0x18 | 0x19 => {
                if code == 0x01 {
                    self.c.terminated_at = Some(f.first_ns);
                }
                self.c.x.no_response(ex, out)
            }
            _ => self.c.x.push(ex),
        }
    }

    /// A server packet once the session is ready: part of the oldest command's response.
    fn response(&mut self, f: &Frame<'_>, out: &mut Vec<Event>) -> Result<(), String> {
        let b = f.body;
        let Some(ex) = self.c.x.front_mut() else {
            if b.first() == Some(&0xff) {
                // The server ends the connection (killed, timed out, shutting down).
                self.c.fatal = Some(packet::err(b, self.c.options.redact_values));
                return Ok(());
            }
            return Err("a server packet with no command to answer".into());
        };
        ex.respond(f.first_ns, f.wire_len);
        let resp = self.resp.unwrap_or_else(|| first_resp(&ex.req.op));
        let next = match resp {
            Resp::Start => self.result(b)?,
            Resp::PrepareOk => self.prepare_ok(b)?,
            Resp::Defs { left, eof, after } if left > 1 => Some(Resp::Defs {
                left: left - 1,
                eof,
                after,
            }),
            Resp::Defs { eof: true, after, .. } => Some(Resp::Eof { after }),
            Resp::Defs { after, .. } => self.then(after),
            Resp::Eof { after } => {
                if b.first() != Some(&0xfe) || b.len() >= 9 {
                    return Err("expected an EOF packet after column definitions".into());
                }
                self.status = packet::eof(b).flags;
                self.then(after)
            }
            Resp::Rows => self.row(b, f.len),
            Resp::OnePacket => {
                if b.first() == Some(&0xff) {
                    self.error(b);
                }
                None
            }
            Resp::AuthLike => match b.first() {
                Some(0x00) => {
                    self.status = packet::ok(b).map_or(self.status, |s| s.flags);
                    None
                }
                Some(0xff) => {
                    self.error(b);
                    None
                }
                _ => Some(Resp::AuthLike),
            },
        };
        self.resp = next;
        if next.is_none() {
            self.finish(f.last_ns, out);
        }
        Ok(())
    }

    /// The request being answered.
    fn answering(&mut self) -> Option<&mut Request> {
        self.c.x.front_mut().map(|ex| &mut ex.req)
    }

    /// An ERR packet in the response (the first one is kept).
    fn error(&mut self, body: &[u8]) {
        let e = packet::err(body, self.c.options.redact_values);
        if let Some(r) = self.answering() {
            r.error.get_or_insert(e);
        }
    }

    /// An OK or EOF that ends a result: another result follows while the status says so.
    fn ended(&mut self, s: packet::Status) -> Option<Resp> {
        self.status = s.flags;
        if let (Some(n), Some(r)) = (s.affected, self.answering()) {
            *r.affected_rows.get_or_insert(0) += n;
        }
        (s.flags & SERVER_MORE_RESULTS_EXISTS != 0).then_some(Resp::Start)
    }

    /// A result's first packet: OK, ERR, LOCAL INFILE, EOF, or a result set's header.
    fn result(&mut self, b: &[u8]) -> Result<Option<Resp>, String> {
        Ok(match b.first() {
            Some(0x00) => {
                let s = packet::ok(b).ok_or("a malformed OK packet")?;
                self.ended(s)
            }
            Some(0xff) => {
                self.error(b);
                None
            }
            // LOCAL INFILE: the client sends the file, then the server answers again.
            Some(0xfb) => Some(Resp::Start),
            // COM_SET_OPTION's and COM_DEBUG's answer.
            Some(0xfe) if b.len() < 9 => {
                self.status = packet::eof(b).flags;
                None
            }
            _ => {
                let mut c = Cursor::new(b);
                let columns = c.lenenc().ok_or("a malformed result set header")?;
                // With MariaDB's metadata cache, a byte says whether definitions follow.
                let definitions = !self.cache_metadata || c.u8() != Some(0);
                if definitions {
                    self.defs(columns, After::Rows)
                } else if !self.deprecate_eof {
                    Some(Resp::Eof { after: After::Rows })
                } else {
                    Some(Resp::Rows)
                }
            }
        })
    }

    /// COM_STMT_PREPARE_OK, then its parameters' and columns' definitions.
    fn prepare_ok(&mut self, b: &[u8]) -> Result<Option<Resp>, String> {
        match b.first() {
            Some(0x00) => {
                let mut c = Cursor::new(&b[1..]);
                let id = c.u32_le().ok_or("a short COM_STMT_PREPARE_OK")?;
                let (columns, params) = (c.u16_le().unwrap_or(0), c.u16_le().unwrap_or(0));
                if let Some(r) = self.answering() {
                    r.prepared = Some(Prepared {
                        statement_id: id,
                        params,
                        columns,
                    });
                }
                self.last_prepared = Some(id);
                if self.statements.len() < MAX_STATEMENTS || self.statements.contains_key(&id) {
                    let st = Statement {
                        params,
                        types: Vec::new(),
                    };
                    if let Some(old) = self.statements.insert(id, st) {
                        self.types_held -= old.types.len();
                    }
                }
                Ok(self.defs(params as u64, After::PrepareColumns(columns as u64)))
            }
            Some(0xff) => {
                self.error(b);
                Ok(None)
            }
            _ => Err("an unexpected answer to COM_STMT_PREPARE".into()),
        }
    }

    /// A row, or what ends the rows: EOF, or OK with 0xFE under CLIENT_DEPRECATE_EOF (a
    /// row can start with 0xFE only when its first value is 16 MiB or more).
    fn row(&mut self, b: &[u8], len: usize) -> Option<Resp> {
        match b.first() {
            Some(0xfe) if b.len() < 9 || (self.deprecate_eof && len < CONTINUED) => {
                let s = if b.len() < 9 {
                    packet::eof(b)
                } else {
                    packet::ok(b).unwrap_or_default()
                };
                self.ended(s)
            }
            Some(0xff) => {
                self.error(b);
                None
            }
            _ => {
                if let Some(r) = self.answering() {
                    r.rows += 1;
                }
                Some(Resp::Rows)
            }
        }
    }

    /// `n` definitions (counted, not read), then an EOF unless CLIENT_DEPRECATE_EOF, then
    /// `after`; with none, straight to `after`.
    fn defs(&self, n: u64, after: After) -> Option<Resp> {
        if n == 0 {
            return self.then(after);
        }
        Some(Resp::Defs {
            left: n,
            eof: !self.deprecate_eof,
            after,
        })
    }

    /// Where a response goes once a run of definitions has passed; `None` when it ended.
    fn then(&self, after: After) -> Option<Resp> {
        match after {
            After::Rows => Some(Resp::Rows),
            After::PrepareColumns(n) => self.defs(n, After::Done),
            After::Done => None,
        }
    }

    /// The response ended at `end_ns`: the status decides the transaction's.
    fn finish(&mut self, end_ns: u64, out: &mut Vec<Event>) {
        let tx = if self.status & SERVER_STATUS_IN_TRANS != 0 {
            TxStatus::Transaction
        } else {
            TxStatus::Idle
        };
        let autocommit = self.status & SERVER_STATUS_AUTOCOMMIT != 0;
        if let Some(r) = self.answering() {
            r.autocommit = Some(autocommit);
        }
        self.c.x.finish_front(end_ns, Some(tx), out);
    }
}

/// Clears CLIENT_SSL in the server's greeting, so that a client that takes TLS whenever
/// it is offered (MariaDB's own clients do) goes on in plaintext and can be recorded: for
/// the recorder to apply to the server's first packet (header included) before passing
/// it on, as it answers PostgreSQL's SSLRequest with `N`. Returns `false`, leaving the
/// bytes as they are, when `packet` is not one whole protocol-10 greeting.
pub fn withdraw_tls_offer(packet: &mut [u8]) -> bool {
    let Some(at) = greeting_caps_at(packet) else {
        return false;
    };
    let caps = u16::from_le_bytes([packet[at], packet[at + 1]]) & !(CLIENT_SSL as u16);
    packet[at..at + 2].copy_from_slice(&caps.to_le_bytes());
    true
}

/// Whether the server's greeting (one whole packet, header included) offers TLS
/// (CLIENT_SSL): `record --listen-tls` keeps the offer and carries TLS on to the server.
pub fn offers_tls(packet: &[u8]) -> bool {
    greeting_caps_at(packet)
        .is_some_and(|at| u16::from_le_bytes([packet[at], packet[at + 1]]) & CLIENT_SSL as u16 != 0)
}

/// Whether the client's first packet (header included) is an SSLRequest: the 32 bytes of
/// a handshake response's fixed part with CLIENT_SSL set, and nothing after, sequence 1.
pub fn is_ssl_request(packet: &[u8]) -> bool {
    packet.len() == 4 + 32
        && packet[..4] == [32, 0, 0, 1]
        && u32::from_le_bytes([packet[4], packet[5], packet[6], packet[7]]) & CLIENT_SSL != 0
}

/// Where a whole protocol-10 greeting's capabilities' lower half is.
fn greeting_caps_at(packet: &[u8]) -> Option<usize> {
    let len = u32::from_le_bytes([
        packet.first().copied().unwrap_or(0),
        *packet.get(1).unwrap_or(&0),
        *packet.get(2).unwrap_or(&0),
        0,
    ]);
    if packet.len() < 5 || len as usize != packet.len() - 4 || packet[4] != 10 {
        return None;
    }
    let nul = packet[5..].iter().position(|&b| b == 0)?;
    // After the version: its NUL, the thread id (4), the scramble's first part (8) and a
    // filler (1), then the capabilities' lower half.
    let at = 5 + nul + 1 + 4 + 8 + 1;
    (packet.len() >= at + 2).then_some(at)
}

/// How the response to a command starts.
fn first_resp(op: &Op) -> Resp {
    match op {
        Op::ComStmtPrepare(_) => Resp::PrepareOk,
        Op::ComOther { command: 0x09, .. } => Resp::OnePacket,
        Op::ComOther {
            command: 0x04 | 0x1c, ..
        } => Resp::Rows,
        Op::ComOther { command: 0x11, .. } => Resp::AuthLike,
        _ => Resp::Start,
    }
}

/// How much of a packet the decoder needs: rows and column definitions are counted only,
/// authentication packets from the client are never kept, and the server's during
/// authentication only their head (an ERR whole, for its message).
fn keep(
    dir: Direction,
    state: State,
    resp: Option<Resp>,
    continues: bool,
    seq: u8,
    first: Option<u8>,
) -> Keep {
    if continues {
        return Keep::Nothing;
    }
    match (dir, state) {
        (Direction::ToServer, State::Auth) => Keep::Nothing,
        (Direction::ToServer, State::Ready) if seq != 0 => Keep::Nothing,
        (Direction::ToServer, State::Ready) if first == Some(0x11) => Keep::Prefix,
        (Direction::ToClient, State::Auth) if first != Some(0xff) => Keep::Prefix,
        (Direction::ToClient, State::Ready) => match resp {
            Some(Resp::Defs { .. }) => Keep::Nothing,
            Some(Resp::Rows) if !matches!(first, Some(0xfe | 0xff)) => Keep::Nothing,
            Some(Resp::AuthLike) if first != Some(0xff) => Keep::Prefix,
            _ => Keep::All,
        },
        _ => Keep::All,
    }
}

/// A command's name (MySQL's `COM_*`), for commands the trace keeps no payload of.
fn command_name(code: u8) -> &'static str {
    match code {
        0x00 => "COM_SLEEP",
        0x04 => "COM_FIELD_LIST",
        0x05 => "COM_CREATE_DB",
        0x06 => "COM_DROP_DB",
        0x07 => "COM_REFRESH",
        0x08 => "COM_SHUTDOWN",
        0x09 => "COM_STATISTICS",
        0x0a => "COM_PROCESS_INFO",
        0x0c => "COM_PROCESS_KILL",
        0x0d => "COM_DEBUG",
        0x11 => "COM_CHANGE_USER",
        0x12 => "COM_BINLOG_DUMP",
        0x18 => "COM_STMT_SEND_LONG_DATA",
        0x1b => "COM_SET_OPTION",
        0x1c => "COM_STMT_FETCH",
        0x1f => "COM_RESET_CONNECTION",
        0xfa => "COM_STMT_BULK_EXECUTE",
        _ => "COM_UNKNOWN",
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::event::{Outcome, Param};
    use super::super::testing::*;
    use super::*;
    use crate::Engine;

    const BASE_CAPS: u32 = CLIENT_CONNECT_WITH_DB
        | CLIENT_PROTOCOL_41
        | CLIENT_SECURE_CONNECTION
        | CLIENT_PLUGIN_AUTH
        | CLIENT_CONNECT_ATTRS
        | CLIENT_PLUGIN_AUTH_LENENC;

    /// A MariaDB 10.11 greeting (no CLIENT_MYSQL: extended capabilities follow).
    fn greeting(caps: u32, ext: u32) -> Vec<u8> {
        let mut g = vec![10];
        g.extend(cstrs(&["10.11.6-MariaDB"]));
        g.extend_from_slice(&77u32.to_le_bytes());
        g.extend_from_slice(b"12345678\0");
        g.extend_from_slice(&(caps as u16).to_le_bytes());
        g.extend_from_slice(&[45, 2, 0]);
        g.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
        g.push(21);
        g.extend_from_slice(&[0; 6]);
        g.extend_from_slice(&ext.to_le_bytes());
        g.extend_from_slice(b"abcdefghijkl\0");
        g.extend(cstrs(&["mysql_native_password"]));
        my(0, &g)
    }

    fn lenenc_str(s: &[u8]) -> Vec<u8> {
        [vec![s.len() as u8], s.to_vec()].concat()
    }

    fn handshake_response(caps: u32, ext: u32) -> Vec<u8> {
        let mut r = caps.to_le_bytes().to_vec();
        r.extend_from_slice(&(16u32 << 20).to_le_bytes());
        r.push(45);
        r.extend_from_slice(&[0; 19]);
        r.extend_from_slice(&ext.to_le_bytes());
        r.extend(cstrs(&["app"]));
        r.extend(lenenc_str(b"AUTHSECRETAUTHSECRET"));
        r.extend(cstrs(&["shop", "mysql_native_password"]));
        let attrs = [
            lenenc_str(b"_client_name"),
            lenenc_str(b"libmariadb"),
            lenenc_str(b"password"),
            lenenc_str(b"hunter2"),
        ]
        .concat();
        r.extend(lenenc_str(&attrs));
        my(1, &r)
    }

    fn ok(seq: u8, affected: u8, status: u16) -> Vec<u8> {
        let mut b = vec![0, affected, 0];
        b.extend_from_slice(&status.to_le_bytes());
        b.extend_from_slice(&[0, 0]);
        my(seq, &b)
    }

    fn eof(seq: u8, status: u16) -> Vec<u8> {
        let mut b = vec![0xfe, 0, 0];
        b.extend_from_slice(&status.to_le_bytes());
        my(seq, &b)
    }

    /// What ends rows: EOF, or OK with 0xFE under CLIENT_DEPRECATE_EOF.
    fn end(seq: u8, status: u16, dep: bool) -> Vec<u8> {
        if dep {
            // With an info string, as a server may send: longer than any EOF packet.
            let mut b = vec![0xfe, 0, 0];
            b.extend_from_slice(&status.to_le_bytes());
            b.extend_from_slice(&[0, 0]);
            b.extend_from_slice(b"Rows matched: 2");
            my(seq, &b)
        } else {
            eof(seq, status)
        }
    }

    fn column(seq: u8) -> Vec<u8> {
        my(
            seq,
            b"\x03def\x04shop\x01t\x01t\x01c\x01c\x0c\x2d\x00\x78\x00\x00\x00\xfe\x00\x00\x00\x00\x00",
        )
    }

    /// A session: handshake, a text query with two rows, prepare and execute with a
    /// value, BEGIN, a close, a ping, an error, quit.
    fn session(dep: bool) -> Vec<(Direction, Vec<u8>)> {
        let caps = BASE_CAPS | if dep { CLIENT_DEPRECATE_EOF } else { 0 };
        let defs_end = |seq| if dep { vec![] } else { eof(seq, 2) };
        let mut execute = vec![0x17];
        execute.extend_from_slice(&1u32.to_le_bytes());
        execute.push(0);
        execute.extend_from_slice(&1u32.to_le_bytes());
        execute.extend_from_slice(&[0, 1, 0x08, 0x00]);
        execute.extend_from_slice(&123456789i64.to_le_bytes());
        let prepare_ok = [vec![0], 1u32.to_le_bytes().to_vec(), vec![1, 0, 1, 0, 0, 0, 0]].concat();
        let q = |sql: &str| my(0, &[&[0x03][..], sql.as_bytes()].concat());
        vec![
            (Down, greeting(caps | CLIENT_SSL, 0)),
            (Up, handshake_response(caps, 0)),
            (Down, ok(2, 0, 2)),
            (Up, q("SELECT c FROM t WHERE id = 5")),
            (
                Down,
                [
                    my(1, b"\x01"),
                    column(2),
                    defs_end(3),
                    my(4, b"\x03abc"),
                    my(5, b"\x03def"),
                    end(6, 2, dep),
                ]
                .concat(),
            ),
            (Up, my(0, b"\x16SELECT c FROM t WHERE id = ?")),
            (
                Down,
                [my(1, &prepare_ok), column(2), defs_end(3), column(4), defs_end(5)].concat(),
            ),
            (Up, my(0, &execute)),
            (
                Down,
                [
                    my(1, b"\x01"),
                    column(2),
                    defs_end(3),
                    my(4, b"\x00\x00\x03abc"),
                    end(5, 2, dep),
                ]
                .concat(),
            ),
            (Up, q("BEGIN")),
            (Down, ok(1, 0, 3)),
            (Up, my(0, &[0x19, 1, 0, 0, 0])),
            (Up, my(0, &[0x0e])),
            (Down, ok(1, 0, 3)),
            (Up, q("SELEC")),
            (
                Down,
                my(1, b"\xff\x28\x04#42000You have an error in your SQL syntax"),
            ),
            (Up, my(0, &[0x01])),
        ]
    }

    #[test]
    fn a_session_with_and_without_eof_packets_gives_every_command_and_no_secret() {
        for dep in [false, true] {
            let (events, _) = run(
                Engine::Mysql,
                DecodeOptions::default(),
                &session(dep),
                |_, _| vec![],
            );
            let o = open_of(&events);
            assert!(o.ready && !o.tls_requested, "{o:?}");
            assert_eq!(
                (o.user.as_deref(), o.database.as_deref()),
                (Some("app"), Some("shop"))
            );
            assert_eq!(
                (o.auth_method.as_deref(), o.backend_pid),
                (Some("mysql_native_password"), Some(77))
            );
            assert_eq!(
                o.parameters.get("_client_name").map(String::as_str),
                Some("libmariadb")
            );
            assert_eq!(o.parameters_withheld, ["password"]);
            // Greeting at 2000 (the relay's connect took 100 of the 1000 since open).
            assert_eq!(
                (o.phases.startup_ns, o.phases.auth_ns, o.phases.auth_round_trips),
                (Some(900), Some(1_000), Some(1))
            );
            let rs = requests(&events);
            let ops: Vec<&str> = rs
                .iter()
                .map(|r| match &r.op {
                    Op::ComQuery(_) => "query",
                    Op::ComStmtPrepare(_) => "prepare",
                    Op::ComStmtExecute { .. } => "execute",
                    Op::ComStmtClose { .. } => "close",
                    Op::ComPing => "ping",
                    Op::ComQuit => "quit",
                    _ => "other",
                })
                .collect();
            assert_eq!(
                ops,
                ["query", "prepare", "execute", "query", "close", "ping", "query", "quit"],
                "dep {dep}"
            );
            assert_eq!(
                (rs[0].rows, rs[0].tx, rs[0].autocommit),
                (2, Some(TxStatus::Idle), Some(true))
            );
            assert_eq!(
                rs[1]
                    .prepared
                    .as_ref()
                    .map(|p| (p.statement_id, p.params, p.columns)),
                Some((1, 1, 1))
            );
            let Op::ComStmtExecute { params: Some(ps), .. } = &rs[2].op else {
                panic!("{:?}", rs[2].op)
            };
            assert_eq!(
                ps[..],
                [Param {
                    type_id: Some(8),
                    len: 8,
                    text: Some("123456789".into()),
                    ..Param::default()
                }]
            );
            assert_eq!((rs[2].rows, rs[3].tx), (1, Some(TxStatus::Transaction)));
            assert_eq!((rs[4].outcome, rs[5].outcome), (Outcome::NoResponse, Outcome::Ok));
            let e = rs[6].error.as_ref().unwrap();
            assert_eq!((e.code, e.sqlstate.as_deref()), (Some(1064), Some("42000")));
            assert_eq!(
                (rs[7].outcome, close_of(&events).by),
                (Outcome::NoResponse, ClosedBy::Client)
            );
            let all = json(&events);
            for secret in ["AUTHSECRET", "hunter2"] {
                assert!(!all.contains(secret), "{secret:?} in the trace: {all}");
            }
            let (bytewise, _) = run(Engine::Mysql, DecodeOptions::default(), &session(dep), |_, n| {
                (1..n).collect()
            });
            assert_eq!(timeless(&bytewise), timeless(&events));
        }
    }

    /// `record --listen-tls`: the client's SSLRequest (sequence 1) then, inside the TLS
    /// the recorder terminates, its handshake response (sequence 2): decoded as the
    /// plaintext session it is, the handshake in `session_open`.
    #[test]
    fn tls_the_recorder_terminates_is_decoded_inside() {
        let caps = BASE_CAPS | CLIENT_SSL;
        let mut ssl = caps.to_le_bytes().to_vec();
        ssl.extend_from_slice(&[0; 28]);
        // MariaDB's metadata cache: the result set below carries no column definitions.
        let ext = MARIADB_CLIENT_CACHE_METADATA;
        let mut response = handshake_response(caps, ext);
        response[3] = 2;
        let tls_meta = SessionMeta {
            tls_terminated: true,
            ..meta()
        };
        let mut d = Decoder::new(tls_meta, DecodeOptions::default());
        let mut events = Vec::new();
        d.feed(Down, 2_000, &greeting(caps, ext), &mut events);
        d.feed(Up, 3_000, &my(1, &ssl), &mut events);
        let accepted = super::super::TlsAccepted {
            version: Some("TLSv1.3".into()),
            handshake_ns: 900_000,
            round_trips: 1,
        };
        d.tls_accepted(Ok(accepted), &mut events);
        d.feed(Up, 903_000, &response, &mut events);
        d.feed(Down, 904_000, &ok(3, 0, 2), &mut events);
        d.feed(Up, 905_000, &my(0, b"\x03SELECT 1"), &mut events);
        d.feed(
            Down,
            906_000,
            &[my(1, b"\x01\x00"), eof(2, 2), my(3, b"\x011"), eof(4, 2)].concat(),
            &mut events,
        );
        d.close(907_000, ClosedBy::Client, &mut events);
        let o = open_of(&events);
        assert!(o.tls && o.tls_requested && o.ready && !o.encrypted, "{o:?}");
        assert_eq!(o.user.as_deref(), Some("app"));
        assert_eq!(o.phases.tls_handshake_ns, Some(900_000));
        assert_eq!(requests(&events)[0].rows, 1);
        assert!(close_of(&events).decode_error.is_none());
        let text = format!("{events:?}");
        assert!(!text.contains("AUTHSECRET"), "{text}");
    }

    #[test]
    fn tls_auth_switches_and_mariadb_metadata_caching_are_followed() {
        let caps = BASE_CAPS | CLIENT_SSL;
        let mut ssl = caps.to_le_bytes().to_vec();
        ssl.extend_from_slice(&[0; 28]);
        let script = vec![
            (Down, greeting(caps, 0)),
            (Up, my(1, &ssl)),
            (Up, b"\x16\x03\x01hello".to_vec()),
        ];
        let (events, _) = run(Engine::Mysql, DecodeOptions::default(), &script, |_, _| vec![]);
        assert!(open_of(&events).tls_requested && open_of(&events).encrypted);
        let c = close_of(&events);
        assert!(c.decode_error.as_deref().unwrap().contains("ssl-mode=DISABLED"));
        assert_eq!(c.undecoded_bytes, 8);
        // caching_sha2_password through an auth switch and its fast path; a result set
        // whose column definitions the metadata cache left out.
        let ext = MARIADB_CLIENT_CACHE_METADATA;
        let mut switch = vec![0xfe];
        switch.extend(cstrs(&["caching_sha2_password", "NONCENONCENONCENONCE"]));
        let script = vec![
            (Down, greeting(BASE_CAPS, ext)),
            (Up, handshake_response(BASE_CAPS, ext)),
            (Down, my(2, &switch)),
            (Up, my(3, b"SCRAMBLEDSECRETSCRAMBLEDSECRET00")),
            (Down, [my(4, b"\x01\x03"), ok(5, 0, 2)].concat()),
            (Up, my(0, b"\x03SELECT 1")),
            (
                Down,
                [my(1, b"\x01\x00"), eof(2, 2), my(3, b"\x011"), eof(4, 2)].concat(),
            ),
        ];
        let (events, _) = run(Engine::Mysql, DecodeOptions::default(), &script, |_, _| vec![]);
        let o = open_of(&events);
        assert_eq!(
            (o.auth_method.as_deref(), o.phases.auth_round_trips),
            (Some("caching_sha2_password"), Some(2))
        );
        assert_eq!(requests(&events)[0].rows, 1);
        assert!(!json(&events).contains("SECRET"));
    }

    #[test]
    fn the_tls_offer_is_withdrawn_from_a_whole_greeting_only() {
        let mut g = greeting(BASE_CAPS | CLIENT_SSL, 0);
        assert!(offers_tls(&g) && !offers_tls(&greeting(BASE_CAPS, 0)));
        let mut ssl = (BASE_CAPS | CLIENT_SSL).to_le_bytes().to_vec();
        ssl.extend_from_slice(&[0; 28]);
        assert!(
            is_ssl_request(&my(1, &ssl)) && !is_ssl_request(&handshake_response(BASE_CAPS | CLIENT_SSL, 0))
        );
        assert!(withdraw_tls_offer(&mut g));
        let parsed = packet::greeting(&g[4..]).unwrap();
        assert_eq!(parsed.caps, BASE_CAPS);
        let mut cut = g[..20].to_vec();
        assert!(!withdraw_tls_offer(&mut cut));
        assert!(!withdraw_tls_offer(&mut []));
    }

    #[test]
    fn redaction_and_refusals() {
        let options = DecodeOptions {
            redact_values: true,
            ..DecodeOptions::default()
        };
        let (events, _) = run(Engine::Mysql, options, &session(true), |_, _| vec![]);
        let all = json(&events);
        for value in ["123456789", "id = 5", "You have an error"] {
            assert!(!all.contains(value), "{value:?} in {all}");
        }
        assert!(all.contains("WHERE id = ?"), "{all}");
        let script = vec![(Down, my(0, b"\xff\x10\x04Too many connections"))];
        let (events, _) = run(Engine::Mysql, DecodeOptions::default(), &script, |_, _| vec![]);
        let o = open_of(&events);
        assert_eq!(
            (o.ready, o.error.as_ref().and_then(|e| e.code)),
            (false, Some(1040))
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

        /// Random bytes, or a real session cut short and followed by random bytes, in
        /// random chunks: never a panic, never more held than the caps.
        #[test]
        fn hostile_bytes_never_panic_or_grow_memory(
            garbage in proptest::collection::vec((any::<bool>(), proptest::collection::vec(any::<u8>(), 0..300)), 0..12),
            keep in 0usize..18,
            dep in any::<bool>(),
            cuts in proptest::collection::vec(1usize..64, 0..8),
        ) {
            let options = DecodeOptions { max_message_bytes: 256, ..DecodeOptions::default() };
            let mut script = session(dep);
            script.truncate(keep);
            script.extend(garbage.into_iter().map(|(up, b)| (if up { Up } else { Down }, b)));
            let (events, _, held) = run_watching(Engine::Mysql, options, &script, |i, _| cuts.iter().map(|c| c * (i + 1)).collect());
            // Two directions' messages in progress, and requests awaiting answers
            // (no more than the bytes sent to the server).
            let sent: usize = script.iter().filter(|(d, _)| *d == Up).map(|(_, b)| b.len()).sum();
            prop_assert!(held <= 2 * 256 + sent, "held {held} of {sent} sent");
            prop_assert!(matches!(events.last(), Some(Event::SessionClose(_))));
            prop_assert!(!json(&events).contains("AUTHSECRET"));
        }
    }
}

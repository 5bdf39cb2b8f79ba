//! What an application does, read from its trace: how often it connects and for how
//! long, how many requests and round trips a transaction takes, whether it prepares its
//! statements, where a transaction's time goes (the server and the network, the client's
//! own think time), and the statements that take the most time in all. Pure: events in,
//! a [`Profile`] out, in one pass and bounded memory (per open session a little state,
//! per distinct statement one row up to [`MAX_STATEMENTS`], per transaction shape one
//! row up to [`crate::shapes::MAX_SHAPES`]), so a long trace streams. The transactions'
//! grouping by shape is [`crate::shapes`]'.
//!
//! Why the recorder's view splits the time as it does: the recorder stands beside the
//! application (as a sidecar does), so the time from a request's last byte to its
//! response's last byte is the network to the server and back plus the server's work;
//! the time from a response to the next request is the client's. The network's share is
//! estimated from the recorder's own TCP connects to the server (one round trip each),
//! and said to be an estimate.

use std::collections::HashMap;

use super::event::{Event, Header, Outcome, Request, SessionOpen};
use super::executions::{note_prepared, Executions};
use super::fingerprint::{fingerprint, Dialect, Fingerprint};
use super::reader::{ReadError, TraceReader};
use super::shapes::{ShapeProfile, Shapes, TxShape, UNKNOWN_STATEMENT};
pub use super::spread::Spread;
use super::timeline::{Sampler, Timeline};
use super::transaction::{self, Boundaries};
use crate::Engine;

/// Distinct statements kept apart; the rest are counted as one row, "(other statements)".
pub const MAX_STATEMENTS: usize = 10_000;

/// One normalised statement's share of the application's time.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StatementProfile {
    /// 16 hex digits, as `load`'s per-statement figures carry it.
    pub fingerprint: String,
    pub text: String,
    /// Executions.
    pub calls: u64,
    /// Server and network time of its requests (its preparation's too), summed.
    pub total_ms: f64,
    pub mean_ms: f64,
    pub rows: u64,
    pub errors: u64,
}

/// The application's connections.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Connections {
    pub sessions: u64,
    pub per_s: Option<f64>,
    /// Open to close, ms.
    pub lifetime_ms: Spread,
    /// The recorder's TCP connect to the server: one round trip and the accept.
    pub upstream_connect_ms: Spread,
    /// The client's first byte to the server's "ready": startup, authentication.
    pub setup_ms: Spread,
    /// Round trips of the setup beyond the TCP connect (startup and authentication).
    pub setup_round_trips: Option<f64>,
    pub tls_requested: u64,
    /// Connections whose TLS the recorder terminated (`record --listen-tls`), and their
    /// handshakes as measured there: time, and the round trips the client waited for.
    pub tls: u64,
    pub tls_handshake_ms: Spread,
    pub tls_handshake_round_trips: Option<f64>,
    /// Authentication methods by name, and how many sessions used each.
    pub auth_methods: Vec<(String, u64)>,
}

/// The application's requests and transactions.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Requests {
    pub requests: u64,
    pub per_s: Option<f64>,
    pub per_session: Option<f64>,
    pub transactions: u64,
    pub requests_per_transaction: Option<f64>,
    /// Request/response exchanges a transaction waits on (pipelined requests share one).
    pub round_trips_per_transaction: Option<f64>,
    /// Transactions per connection opened: a client-side pool's saving per transaction
    /// is one connect divided by this.
    pub transactions_per_session: Option<f64>,
    /// Requests that ran a prepared statement (a named statement bound again, or
    /// COM_STMT_EXECUTE), as a share of all.
    pub prepared_share: Option<f64>,
    pub pipelined: u64,
    pub errors: u64,
    /// Errors by SQLSTATE (MySQL: by error number when it has no SQLSTATE).
    pub errors_by_code: Vec<(String, u64)>,
    /// A transaction's time, first request to last response, ms.
    pub transaction_ms: Spread,
}

/// Where a transaction's time went, per transaction, ms.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct TimeSplit {
    /// Request sent to response received, less the network's estimate.
    pub server_ms: Option<f64>,
    /// Round trips × the recorder's round trip to the server (its TCP connects' p50).
    pub network_ms: Option<f64>,
    /// The client's think time between a response and its next request.
    pub client_ms: Option<f64>,
}

/// The application, measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Profile {
    pub engine: Engine,
    pub recorded_at: String,
    pub redacted: bool,
    /// First session's open to the last event, s.
    pub duration_s: f64,
    pub connections: Connections,
    pub requests: Requests,
    pub split: TimeSplit,
    /// By total time, most first.
    pub statements: Vec<StatementProfile>,
    /// The transactions grouped by shape, by share of time, most first.
    pub shapes: Vec<ShapeProfile>,
    /// Sessions the decoder stopped following, and the first reason.
    pub undecoded: u64,
    pub undecoded_reason: Option<String>,
    /// A bounded sample of the sessions and their requests in time, for a picture;
    /// not a figure, so not in the JSON ([`crate::timeline`]).
    #[serde(skip)]
    pub timeline: Timeline,
}

/// A session being read.
#[derive(Default)]
struct Open {
    open_ns: u64,
    /// PostgreSQL's statement names and MySQL's statement ids → their SQL.
    statements: HashMap<String, String>,
    tx: Option<Tx>,
    boundaries: Boundaries,
    requests: u64,
}

/// A transaction being read: its first request's start, its time so far.
struct Tx {
    start_ns: u64,
    end_ns: u64,
    requests: u64,
    round_trips: u64,
    wait_ns: u64,
    think_ns: u64,
    shape: TxShape,
}

/// Reads the trace at `path` whole into a profile. A trace cut short (a recording killed
/// mid-write) gives the profile of what came before the cut, and the cut to say so.
pub fn read(path: &std::path::Path) -> Result<(Profile, Option<ReadError>), ReadError> {
    let reader = TraceReader::open(path)?;
    let mut p = Profiler::new(reader.header());
    for e in reader {
        match e {
            Ok(e) => p.add(&e),
            Err(e) if e.is_truncation() => return Ok((p.finish(), Some(e))),
            Err(e) => return Err(e),
        }
    }
    Ok((p.finish(), None))
}

/// Reads events into a [`Profile`], one at a time.
pub struct Profiler {
    header: Header,
    dialect: Dialect,
    open: HashMap<u64, Open>,
    first_ns: Option<u64>,
    last_ns: u64,
    lifetimes: Vec<f64>,
    upstream: Vec<f64>,
    setup: Vec<f64>,
    setup_rts: (f64, u64),
    tls_requested: u64,
    /// Handshakes the recorder terminated: their times (ms), and their round trips.
    tls_handshakes: Vec<f64>,
    tls_round_trips: u64,
    auth: HashMap<String, u64>,
    sessions: u64,
    requests: u64,
    prepared: u64,
    pipelined: u64,
    errors: u64,
    error_codes: HashMap<String, u64>,
    transactions: Vec<f64>,
    tx_round_trips: u64,
    tx_requests: u64,
    wait_ns: u64,
    think_ns: u64,
    statements: HashMap<u64, StatementProfile>,
    shapes: Shapes,
    timeline: Sampler,
    undecoded: u64,
    undecoded_reason: Option<String>,
}

impl Profiler {
    pub fn new(header: &Header) -> Profiler {
        Profiler {
            header: header.clone(),
            dialect: match header.engine {
                Engine::Postgres => Dialect::Postgres,
                Engine::Mysql => Dialect::Mysql,
            },
            open: HashMap::new(),
            first_ns: None,
            last_ns: 0,
            lifetimes: Vec::new(),
            upstream: Vec::new(),
            setup: Vec::new(),
            setup_rts: (0.0, 0),
            tls_requested: 0,
            tls_handshakes: Vec::new(),
            tls_round_trips: 0,
            auth: HashMap::new(),
            sessions: 0,
            requests: 0,
            prepared: 0,
            pipelined: 0,
            errors: 0,
            error_codes: HashMap::new(),
            transactions: Vec::new(),
            tx_round_trips: 0,
            tx_requests: 0,
            wait_ns: 0,
            think_ns: 0,
            statements: HashMap::new(),
            shapes: Shapes::default(),
            timeline: Sampler::default(),
            undecoded: 0,
            undecoded_reason: None,
        }
    }

    pub fn add(&mut self, e: &Event) {
        match e {
            Event::Header(_) => {}
            Event::SessionOpen(o) => self.opened(o),
            Event::Request(r) => self.request(r),
            Event::SessionClose(c) => {
                let Some(mut s) = self.open.remove(&c.session) else {
                    return;
                };
                self.last_ns = self.last_ns.max(s.open_ns + c.at_ns);
                self.lifetimes.push(c.at_ns as f64 / 1e6);
                if let Some(tx) = s.tx.take().filter(|_| s.boundaries.close()) {
                    self.end_transaction(tx, c.session, s.open_ns);
                }
                self.timeline.close(c.session, s.open_ns + c.at_ns);
                if let Some(why) = &c.decode_error {
                    self.undecoded += 1;
                    self.undecoded_reason.get_or_insert_with(|| why.clone());
                }
            }
        }
    }

    fn opened(&mut self, o: &SessionOpen) {
        self.sessions += 1;
        self.first_ns = Some(self.first_ns.map_or(o.open_ns, |f| f.min(o.open_ns)));
        self.last_ns = self.last_ns.max(o.open_ns);
        let p = &o.phases;
        if let Some(c) = p.connect_ns {
            self.upstream.push(c as f64 / 1e6);
        }
        let setup: Option<u64> = [p.tls_ns, p.startup_ns, p.auth_ns, p.ready_ns]
            .iter()
            .flatten()
            .copied()
            .reduce(|a, b| a + b);
        if let Some(s) = setup.filter(|_| o.ready) {
            self.setup.push(s as f64 / 1e6);
        }
        if let Some(rt) = p.auth_round_trips.filter(|_| o.ready) {
            // The startup message's own exchange, then the authentication's.
            self.setup_rts.0 += 1.0 + rt as f64;
            self.setup_rts.1 += 1;
        }
        if o.tls_requested {
            self.tls_requested += 1;
        }
        if let (true, Some(ns)) = (o.tls, p.tls_handshake_ns) {
            self.tls_handshakes.push(ns as f64 / 1e6);
            self.tls_round_trips += u64::from(p.tls_handshake_round_trips.unwrap_or(0));
        }
        if let Some(m) = &o.auth_method {
            *self.auth.entry(m.clone()).or_default() += 1;
        }
        self.timeline.open(o.session, o.open_ns);
        self.open.insert(
            o.session,
            Open {
                open_ns: o.open_ns,
                ..Open::default()
            },
        );
    }

    fn request(&mut self, r: &Request) {
        let Some(s) = self.open.get_mut(&r.session) else {
            return;
        };
        let end_ns = r.at_ns + r.response_ns.unwrap_or(0);
        let open_ns = s.open_ns;
        s.requests += 1;
        self.timeline.request(
            r.session,
            open_ns + r.at_ns,
            r.response_ns,
            r.outcome == Outcome::Error,
        );
        let e = Executions::of(&r.op, &mut s.statements);
        note_prepared(r, &mut s.statements);
        let dialect = self.dialect;
        let ran: Vec<Option<Fingerprint>> = e.sqls[..e.ran(r)]
            .iter()
            .map(|sql| sql.as_deref().map(|sql| fingerprint(sql, dialect)))
            .collect();
        let parsed = e.parsed.as_deref().map(|sql| fingerprint(sql, dialect));
        // Where the request stands in its transactions is `transaction`'s to say, as
        // for replay's count.
        let Some(place) = s.boundaries.recorded(r) else {
            self.count(r, open_ns, end_ns, e.prepared);
            self.statements_of(r, ran, parsed);
            return;
        };
        let round_trips = transaction::round_trips(r, place);
        let tx = s.tx.get_or_insert(Tx {
            start_ns: r.at_ns,
            end_ns,
            requests: 0,
            round_trips: 0,
            wait_ns: 0,
            think_ns: 0,
            shape: TxShape::default(),
        });
        if !place.first {
            tx.think_ns += r.think_ns.unwrap_or(0);
        }
        tx.requests += 1;
        tx.round_trips += round_trips;
        tx.wait_ns += r.response_ns.unwrap_or(0);
        tx.end_ns = tx.end_ns.max(end_ns);
        // A shape lists what the transaction ran, as the statements' calls count it:
        // each execution of a pipelined group.
        let runs: Vec<u64> = ran
            .iter()
            .map(|f| f.as_ref().map_or(UNKNOWN_STATEMENT, |f| f.id))
            .collect();
        tx.shape.request(r.at_ns, end_ns, round_trips, &runs);
        let finished = if place.last { s.tx.take() } else { None };
        self.count(r, open_ns, end_ns, e.prepared);
        self.statements_of(r, ran, parsed);
        if let Some(tx) = finished {
            self.end_transaction(tx, r.session, open_ns);
        }
    }

    /// A request's share of the totals.
    fn count(&mut self, r: &Request, open_ns: u64, end_ns: u64, prepared: bool) {
        self.last_ns = self.last_ns.max(open_ns + end_ns);
        self.requests += 1;
        self.prepared += u64::from(prepared);
        self.pipelined += u64::from(r.think_ns.is_none());
        if r.outcome == Outcome::Error {
            self.errors += 1;
            let code = r
                .error
                .as_ref()
                .and_then(|e| e.sqlstate.clone().or_else(|| e.code.map(|c| c.to_string())));
            *self
                .error_codes
                .entry(code.unwrap_or_else(|| "?".into()))
                .or_default() += 1;
        }
    }

    /// A request's share of its statements' rows: a call for each execution that ran,
    /// and the request's time shared among them equally (one answer times the whole
    /// group: the recorder keeps no time per statement inside it). A request that ran
    /// nothing gives its time to the statement it prepared.
    fn statements_of(&mut self, r: &Request, ran: Vec<Option<Fingerprint>>, parsed: Option<Fingerprint>) {
        let ms = r.response_ns.unwrap_or(0) as f64 / 1e6;
        if ran.is_empty() {
            if let Some(f) = parsed {
                self.statement(f, 0, ms, 0, false);
            }
            return;
        }
        let n = ran.len();
        let rows = rows_by_execution(r, n);
        let failed = r.outcome == Outcome::Error;
        for (i, f) in ran.into_iter().enumerate() {
            if let Some(f) = f {
                self.statement(f, 1, ms / n as f64, rows[i], failed && i + 1 == n);
            }
        }
    }

    /// A transaction of `session` (opened at `open_ns`) that ended.
    fn end_transaction(&mut self, tx: Tx, session: u64, open_ns: u64) {
        let ms = tx.end_ns.saturating_sub(tx.start_ns) as f64 / 1e6;
        let shape = &tx.shape;
        self.timeline
            .transaction(session, open_ns + tx.start_ns, open_ns + tx.end_ns, || shape.id());
        self.transactions.push(ms);
        let statements = &self.statements;
        self.shapes.add(tx.shape, ms, tx.requests, tx.round_trips, |id| {
            match statements.get(&id) {
                _ if id == UNKNOWN_STATEMENT => "(a statement without SQL in the trace)".into(),
                Some(s) => s.text.clone(),
                // Beyond the statements table's cap, whose row has no text of its own.
                None => "(a statement not kept)".into(),
            }
        });
        self.tx_requests += tx.requests;
        self.tx_round_trips += tx.round_trips;
        self.wait_ns += tx.wait_ns;
        self.think_ns += tx.think_ns;
    }

    fn statement(&mut self, f: Fingerprint, calls: u64, ms: f64, rows: u64, failed: bool) {
        let key = if self.statements.len() >= MAX_STATEMENTS && !self.statements.contains_key(&f.id) {
            0
        } else {
            f.id
        };
        let row = self.statements.entry(key).or_insert_with(|| StatementProfile {
            fingerprint: if key == 0 { "-".into() } else { f.id_hex() },
            text: if key == 0 {
                "(other statements)".into()
            } else {
                f.text
            },
            calls: 0,
            total_ms: 0.0,
            mean_ms: 0.0,
            rows: 0,
            errors: 0,
        });
        // Calls are executions (as pg_stat_statements counts them); the time is every
        // request of the statement's, its preparation's round trip too.
        row.calls += calls;
        row.total_ms += ms;
        row.rows += rows;
        row.errors += u64::from(failed);
    }

    /// The profile of what was read (sessions still open count as far as they went).
    pub fn finish(mut self) -> Profile {
        for (session, mut s) in std::mem::take(&mut self.open) {
            if let Some(tx) = s.tx.take().filter(|_| s.boundaries.close()) {
                self.end_transaction(tx, session, s.open_ns);
            }
        }
        let duration_s = self
            .first_ns
            .map_or(0.0, |f| self.last_ns.saturating_sub(f) as f64 / 1e9);
        let rate = |n: u64| (duration_s > 0.0).then(|| n as f64 / duration_s);
        let ratio = |a: u64, b: u64| (b > 0).then(|| a as f64 / b as f64);
        let tx_n = self.transactions.len() as u64;
        let upstream = Spread::of(std::mem::take(&mut self.upstream));
        let rts = ratio(self.tx_round_trips, tx_n);
        let network_ms = match (rts, upstream.p50) {
            (Some(r), Some(rtt)) => Some(r * rtt),
            _ => None,
        };
        let wait_ms = ratio(self.wait_ns, tx_n).map(|w| w / 1e6);
        let mut statements: Vec<StatementProfile> = self
            .statements
            .into_values()
            .map(|mut s| {
                s.mean_ms = s.total_ms / s.calls.max(1) as f64;
                s
            })
            .collect();
        statements.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms).then(a.text.cmp(&b.text)));
        let shapes = std::mem::take(&mut self.shapes).finish(self.transactions.iter().sum());
        let timeline = std::mem::take(&mut self.timeline).finish(self.first_ns.unwrap_or(0), self.last_ns);
        Profile {
            engine: self.header.engine,
            recorded_at: self.header.start_time.clone(),
            redacted: self.header.options.redact_values,
            duration_s,
            connections: Connections {
                sessions: self.sessions,
                per_s: rate(self.sessions),
                lifetime_ms: Spread::of(self.lifetimes),
                upstream_connect_ms: upstream,
                setup_ms: Spread::of(self.setup),
                setup_round_trips: (self.setup_rts.1 > 0).then(|| self.setup_rts.0 / self.setup_rts.1 as f64),
                tls_requested: self.tls_requested,
                tls: self.tls_handshakes.len() as u64,
                tls_handshake_round_trips: ratio(self.tls_round_trips, self.tls_handshakes.len() as u64),
                tls_handshake_ms: Spread::of(std::mem::take(&mut self.tls_handshakes)),
                auth_methods: sorted(self.auth),
            },
            requests: Requests {
                requests: self.requests,
                per_s: rate(self.requests),
                per_session: ratio(self.requests, self.sessions),
                transactions: tx_n,
                requests_per_transaction: ratio(self.tx_requests, tx_n),
                round_trips_per_transaction: rts,
                transactions_per_session: ratio(tx_n, self.sessions),
                prepared_share: ratio(self.prepared, self.requests),
                pipelined: self.pipelined,
                errors: self.errors,
                errors_by_code: sorted(self.error_codes),
                transaction_ms: Spread::of(self.transactions),
            },
            split: TimeSplit {
                server_ms: wait_ms.map(|w| (w - network_ms.unwrap_or(0.0)).max(0.0)),
                network_ms,
                client_ms: ratio(self.think_ns, tx_n).map(|t| t / 1e6),
            },
            statements,
            shapes,
            undecoded: self.undecoded,
            undecoded_reason: self.undecoded_reason,
            timeline,
        }
    }
}

/// Most first, then by name.
fn sorted(m: HashMap<String, u64>) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = m.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

/// The rows each of a request's `n` executions returned: a lone one has the request's;
/// in a group, each its command tag's count where the tags say it (`SELECT n`, `FETCH n`)
/// and they add up to the rows the request returned, else the first has them all
/// (an `INSERT ... RETURNING`'s tag counts rows written, not returned).
fn rows_by_execution(r: &Request, n: usize) -> Vec<u64> {
    let mut rows = vec![0; n];
    if n == 1 || r.rows == 0 {
        rows[0] = r.rows;
        return rows;
    }
    let returned = |tag: &String| {
        let mut words = tag.split_whitespace();
        match words.next() {
            Some("SELECT" | "FETCH") => words.last().and_then(|c| c.parse::<u64>().ok()),
            _ => Some(0),
        }
    };
    let by_tag: Option<Vec<u64>> = r.tags.iter().take(n).map(returned).collect();
    match by_tag {
        Some(t) if t.iter().sum::<u64>() == r.rows => {
            rows[..t.len()].copy_from_slice(&t);
        }
        _ => rows[0] = r.rows,
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::RecordOptions;

    fn events(lines: &[&str]) -> Vec<Event> {
        lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    fn q(seq: u64, at_ms: u64, think_ms: Option<u64>, sql: &str, tx: &str) -> String {
        let think = think_ms.map_or("null".to_string(), |t| (t * 1_000_000).to_string());
        format!(
            r#"{{"type":"request","session":1,"seq":{seq},"at_ns":{},"think_ns":{think},"request_bytes":10,"op":"query","sql":"{sql}","outcome":"ok","first_byte_ns":1000000,"response_ns":1000000,"response_bytes":10,"rows":0,"tx":"{tx}"}}"#,
            at_ms * 1_000_000
        )
    }

    fn profile_of(lines: &[String]) -> Profile {
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let mut p = Profiler::new(&Header::new(
            Engine::Postgres,
            "connbench test".into(),
            RecordOptions::default(),
        ));
        for e in events(&lines) {
            p.add(&e);
        }
        p.finish()
    }

    const OPEN: &str = r#"{"type":"session_open","session":1,"open_ns":0,"transport":"tcp","tls_requested":false,"auth_method":null,"user":null,"database":null,"backend_pid":null,"protocol":null,"error":null,"phases":{"connect_ns":200000,"startup_ns":null,"auth_ns":null,"auth_round_trips":null,"ready_ns":null,"tls_ns":null},"ready":true}"#;

    /// Two transfers and a look-up (two shapes of explicit transaction) and autocommit
    /// `SELECT 1`s: each shape its own count, round trips and times, the values apart.
    #[test]
    fn transactions_grouped_by_shape() {
        let transfer = |seq: u64, at: u64, id: u64| {
            vec![
                q(seq, at, Some(1), "BEGIN", "transaction"),
                q(
                    seq + 1,
                    at + 2,
                    Some(1),
                    &format!("UPDATE t SET v = v + 1 WHERE id = {id}"),
                    "transaction",
                ),
                q(seq + 2, at + 4, Some(1), "COMMIT", "idle"),
            ]
        };
        let mut lines = vec![OPEN.to_string()];
        lines.extend(transfer(0, 10, 7)); // 10 → 15 ms
        lines.push(q(3, 20, Some(4), "SELECT 1", "idle")); // 20 → 21
        lines.extend(transfer(4, 30, 8)); // 30 → 35
        lines.extend([
            q(7, 40, Some(4), "BEGIN", "transaction"),
            q(8, 42, Some(1), "SELECT v FROM t WHERE id = 1", "transaction"),
            // Pipelined: a request of the shape, not a round trip.
            q(9, 43, None, "SELECT v FROM t WHERE id = 2", "transaction"),
            q(10, 50, Some(6), "COMMIT", "idle"), // 40 → 51
        ]);
        lines.push(q(11, 60, Some(9), "SELECT 2", "idle")); // 60 → 61
        let p = profile_of(&lines);
        assert_eq!(p.requests.transactions, 5);
        assert_eq!(p.shapes.len(), 3, "{:#?}", p.shapes);
        let total = 5.0 + 1.0 + 5.0 + 11.0 + 1.0;

        let look_up = &p.shapes[0];
        assert_eq!(
            look_up.statements,
            [
                "BEGIN",
                "SELECT v FROM t WHERE id = $1",
                "SELECT v FROM t WHERE id = $1",
                "COMMIT"
            ]
        );
        assert_eq!(
            (look_up.count, look_up.requests, look_up.round_trips),
            (1, 4.0, 3.0)
        );
        assert_eq!(look_up.time_ms.mean, Some(11.0));
        assert_eq!(look_up.share, Some(11.0 / total));

        let transfer = &p.shapes[1];
        assert_eq!(
            transfer.statements,
            ["BEGIN", "UPDATE t SET v = v + $1 WHERE id = $2", "COMMIT"]
        );
        assert_eq!(
            (transfer.count, transfer.requests, transfer.round_trips),
            (2, 3.0, 3.0)
        );
        assert_eq!(
            (transfer.time_ms.p50, transfer.time_ms.mean, transfer.time_ms.p99),
            (Some(5.0), Some(5.0), Some(5.0))
        );
        assert_eq!(transfer.share, Some(10.0 / total));
        assert!(!transfer.truncated);
        let update = p
            .statements
            .iter()
            .find(|s| s.text.starts_with("UPDATE"))
            .unwrap();
        assert_eq!(transfer.fingerprints[1], update.fingerprint);
        assert_eq!(transfer.id.len(), 16);

        let lone = &p.shapes[2];
        assert_eq!(lone.statements, ["SELECT $1"]);
        assert_eq!((lone.count, lone.round_trips), (2, 1.0));
        assert_eq!(lone.time_ms.mean, Some(1.0));
        assert_eq!(
            p.shapes.iter().map(|s| s.count).sum::<u64>(),
            p.requests.transactions
        );
        // The shape's distribution, and the session in time: one lane, every request
        // and transaction at its time, each transaction named by its shape.
        assert_eq!(transfer.percentiles_ms.len(), 11);
        assert_eq!(transfer.percentiles_ms[0], (0.0, 5.0));
        let t = &p.timeline;
        assert_eq!((t.sessions, t.lanes.len(), t.requests), (1, 1, 12));
        let lane = &t.lanes[0];
        assert_eq!((lane.requests.len(), lane.transactions.len()), (12, 5));
        assert_eq!(lane.transactions[0].from_ms, 10.0);
        assert_eq!(lane.transactions[0].to_ms, 15.0);
        assert_eq!(lane.transactions[0].shape, transfer.id);
        assert_eq!(lane.requests[1].at_ms, 12.0);
        assert!(!t.cut);
    }

    /// A session of one explicit transaction and one autocommit statement: the
    /// transactions, their round trips and requests, think time, lifetime and the
    /// statements by time, each as the events say.
    #[test]
    fn a_transaction_and_an_autocommit_statement() {
        let open = r#"{"type":"session_open","session":1,"open_ns":5000000000,"transport":"tcp","tls_requested":false,"auth_method":"SCRAM-SHA-256","user":null,"database":null,"backend_pid":null,"protocol":null,"error":null,"phases":{"connect_ns":200000,"startup_ns":1000000,"auth_ns":2000000,"auth_round_trips":2,"ready_ns":100000,"tls_ns":null},"ready":true}"#;
        let lines = [
            open.to_string(),
            q(0, 10, Some(10), "BEGIN", "transaction"),
            q(1, 12, Some(1), "UPDATE t SET v = 1 WHERE id = 7", "transaction"),
            q(2, 15, Some(2), "COMMIT", "idle"),
            q(3, 30, Some(14), "SELECT 1", "idle"),
            r#"{"type":"session_close","session":1,"at_ns":40000000,"by":"client","requests":4,"bytes_to_server":40,"bytes_to_client":40}"#.to_string(),
        ];
        let p = profile_of(&lines);
        assert_eq!(p.connections.sessions, 1);
        assert_eq!(p.connections.lifetime_ms.p50, Some(40.0));
        assert_eq!(p.connections.setup_round_trips, Some(3.0));
        assert_eq!(p.connections.upstream_connect_ms.p50, Some(0.2));
        let r = &p.requests;
        assert_eq!((r.requests, r.transactions), (4, 2));
        assert_eq!(r.requests_per_transaction, Some(2.0));
        assert_eq!(r.round_trips_per_transaction, Some(2.0));
        // 10 → 16 ms (BEGIN at 10, COMMIT's answer at 16), and 30 → 31 ms.
        assert_eq!(r.transaction_ms.max, Some(6.0));
        assert_eq!(r.transaction_ms.mean, Some(3.5));
        // Think inside transactions only: 1 + 2 ms over two transactions.
        assert_eq!(p.split.client_ms, Some(1.5));
        // Four 1 ms requests over two transactions, less 2 round trips × 0.2 ms.
        assert!((p.split.server_ms.unwrap() - 1.6).abs() < 1e-9, "{:?}", p.split);
        assert_eq!(p.statements.len(), 4);
        assert!(p
            .statements
            .iter()
            .any(|s| s.text == "UPDATE t SET v = $1 WHERE id = $2" && s.calls == 1));
    }
}

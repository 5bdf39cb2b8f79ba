//! A trace read into what the replay will do: per recorded session its open and close
//! offsets and its requests, each already turned into what to send (PostgreSQL: a
//! simple Query, or an extended group's Parse/Bind/Describe/Execute/Close/Flush with the
//! recorded names and parameter bytes, then a Sync; MySQL: the command packet, see
//! [`super::mysql`]), its statement's fingerprint, and what the recording saw (its time,
//! its error, whether it ended a transaction).
//!
//! Everything that makes a trace impossible to replay as recorded is found here, before
//! anything connects: values left out by `--redact-values`, SQL or parameters over the
//! recorder's cap (`null`), steps the decoder dropped, FunctionCall (its arguments are
//! not kept), MySQL commands whose payload is not kept. Each is refused with its cause
//! and count.
//!
//! The whole schedule is held in memory (a request's messages are a few hundred bytes),
//! so a replay's memory grows with its trace, unlike `trace`'s one pass.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::{bail, Result};

use super::cancel::{self, CancelPlan};
use super::kill::{self, Kill};
use super::mysql::{self, Command};
use crate::proto::postgres::Frontend;
use crate::targets::Engine;
use connbench_trace::event::{Event, Format, Header, Op, Outcome, Param, Request, SessionOpen, Step};
use connbench_trace::executions;
use connbench_trace::profile::{Profile, Profiler};
use connbench_trace::shapes::{TxShape, UNKNOWN_STATEMENT};
use connbench_trace::transaction::{Boundaries, Place, Work};
use connbench_trace::{fingerprint, Dialect, Fingerprint, TraceReader};

/// What the recording saw of one request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seen {
    pub response_ns: Option<u64>,
    /// The SQLSTATE of its error (`?????` when it had none).
    pub error: Option<String>,
    /// Its place in its transaction as recorded (`connbench_trace::transaction`);
    /// `None` outside one.
    pub place: Option<Place>,
    /// Of its executions, how many ran (all, or up to the one that failed:
    /// `connbench_trace::executions`).
    pub ran: usize,
}

/// What to send for one request, by protocol.
#[derive(Debug, Clone, PartialEq)]
pub enum Wire {
    Postgres(Vec<Frontend>),
    Mysql(Command),
}

/// One request to send.
#[derive(Debug, Clone)]
pub struct Planned {
    /// Since the session's open, as recorded.
    pub at_ns: u64,
    pub wire: Wire,
    /// Index into [`Schedule::statements`] of the statement it executes (its first, in
    /// a pipelined group) or prepares.
    pub statement: Option<usize>,
    /// The statement each of its executions runs, in order (a Query's one, a pipelined
    /// group's one per Execute; `None` where the trace lacks its SQL); empty when it
    /// runs nothing (a preparation, a close).
    pub runs: Vec<Option<usize>>,
    /// What it does as far as transactions go, as recorded.
    pub work: Work,
    /// The shape of the recorded transaction it is part of: an index into
    /// [`Schedule::shapes`].
    pub shape: Option<u32>,
    /// MySQL's `KILL [QUERY] <id>`: the session it targets, whose connection id now it
    /// names when sent ([`super::kill`]).
    pub kill: Option<Kill>,
    /// The application's own time before it, as recorded: from the previous answer's
    /// end (or the connect's) to this request; `None` when it was pipelined.
    pub think_ns: Option<u64>,
    pub seen: Seen,
}

/// The statement each of a request's executions runs ([`Planned::runs`]).
type Runs = Vec<Option<usize>>;

/// One recorded session.
#[derive(Debug, Clone, Default)]
pub struct SessionPlan {
    pub session: u64,
    /// Since the trace's start.
    pub open_ns: u64,
    /// Since the session's open; `None` when the trace ends first.
    pub close_ns: Option<u64>,
    pub user: Option<String>,
    pub database: Option<String>,
    /// The recorded server's pid for this session (BackendKeyData), which a recorded
    /// CancelRequest names.
    pub backend_pid: Option<u32>,
    pub requests: Vec<Planned>,
}

/// The trace, ready to replay.
#[derive(Debug, Default)]
pub struct Schedule {
    pub header: Option<Header>,
    /// Sessions that became ready when recorded, by their open.
    pub sessions: Vec<SessionPlan>,
    /// Distinct statements by fingerprint.
    pub statements: Vec<Fingerprint>,
    /// The recorded transactions' shapes (ids as `connbench trace` names them).
    pub shapes: Vec<String>,
    /// Sessions not replayed: refused when recorded (CancelRequest connections are
    /// `cancels`, replayed as cancels).
    pub skipped_sessions: u64,
    /// The recorded CancelRequests, each with the session it cancels.
    pub cancels: Vec<CancelPlan>,
    /// Why the trace ended early (a recording cut short), when it did.
    pub cut: Option<String>,
    /// Every SQL text the recording ran successfully, one per fingerprint: the
    /// pre-flight parses them.
    pub ran_ok: Vec<String>,
    /// Recorded SQL that starts with CREATE: a relation it names need not exist before.
    pub creates: Vec<String>,
}

/// Requests the replay cannot send as recorded, by cause.
#[derive(Debug, Default)]
struct Unplayable(BTreeMap<&'static str, u64>);

impl Schedule {
    /// Reads `path` whole. A trace cut short gives what it holds (and `cut` says so);
    /// a damaged, foreign or newer trace is an error.
    pub fn read(path: &Path) -> Result<Schedule> {
        Self::from_reader(TraceReader::open(path)?, None)
    }

    /// [`Schedule::read`], and the trace's profile from the same pass (a cut trace's
    /// profile covers what came before the cut, as the schedule does).
    pub fn read_profiled(path: &Path) -> Result<(Schedule, Profile)> {
        let reader = TraceReader::open(path)?;
        let mut profiler = Profiler::new(reader.header());
        let s = Self::from_reader(reader, Some(&mut profiler))?;
        Ok((s, profiler.finish()))
    }

    /// The one pass over a trace's events, each also given to `profiler` when there is one.
    fn from_reader(reader: TraceReader, mut profiler: Option<&mut Profiler>) -> Result<Schedule> {
        let header = reader.header().clone();
        if header.options.redact_values {
            bail!(
                "the trace was recorded with --redact-values: its parameter values and the literals \
                 of its SQL were left out, so it cannot be replayed as recorded; record again without \
                 --redact-values"
            );
        }
        let mut b = Builder {
            engine: header.engine,
            ..Builder::default()
        };
        for e in reader {
            match e {
                Ok(e) => {
                    if let Some(p) = profiler.as_deref_mut() {
                        p.add(&e);
                    }
                    b.add(e)
                }
                Err(e) if e.is_truncation() => {
                    b.schedule.cut = Some(e.to_string());
                    break;
                }
                Err(e) => return Err(e.into()),
            }
        }
        let mut s = b.finish()?;
        s.header = Some(header);
        Ok(s)
    }

    /// The trace's engine.
    pub fn engine(&self) -> Engine {
        self.header.as_ref().map_or(Engine::Postgres, |h| h.engine)
    }

    /// Requests in all sessions.
    pub fn requests(&self) -> u64 {
        self.sessions.iter().map(|s| s.requests.len() as u64).sum()
    }
}

#[derive(Default)]
struct Builder {
    engine: Engine,
    schedule: Schedule,
    open: HashMap<u64, SessionState>,
    done: Vec<SessionPlan>,
    by_sql: HashMap<String, usize>,
    by_id: HashMap<u64, usize>,
    ran_ok: std::collections::HashSet<usize>,
    unplayable: Unplayable,
    /// Shape id -> its index in [`Schedule::shapes`].
    shape_index: HashMap<String, u32>,
    cancels: Vec<cancel::Recorded>,
}

/// A session being read: its plan, its prepared statements' fingerprints by name, its
/// transaction status.
#[derive(Default)]
struct SessionState {
    plan: SessionPlan,
    statements: HashMap<String, usize>,
    boundaries: Boundaries,
    /// The open transaction's shape so far, and its first request's index in the plan.
    shape: TxShape,
    tx_from: usize,
    skip: bool,
}

impl Builder {
    fn add(&mut self, e: Event) {
        match e {
            Event::Header(_) => {}
            Event::SessionOpen(o) => self.open_session(&o),
            Event::Request(r) => self.request(*r),
            Event::SessionClose(c) => {
                if let Some(mut s) = self.open.remove(&c.session) {
                    s.plan.close_ns = Some(c.at_ns);
                    self.close(s);
                }
            }
        }
    }

    fn open_session(&mut self, o: &SessionOpen) {
        if o.cancel_request {
            self.cancels.push(cancel::Recorded {
                at_ns: o.open_ns,
                pid: o.backend_pid,
            });
            return;
        }
        let skip = !o.ready;
        let plan = SessionPlan {
            session: o.session,
            open_ns: o.open_ns,
            close_ns: None,
            user: o.user.clone(),
            database: o.database.clone(),
            backend_pid: o.backend_pid,
            requests: Vec::new(),
        };
        self.open.insert(
            o.session,
            SessionState {
                plan,
                skip,
                ..SessionState::default()
            },
        );
    }

    fn close(&mut self, s: SessionState) {
        if s.skip {
            self.schedule.skipped_sessions += 1;
        } else {
            self.done.push(s.plan);
        }
    }

    /// The index of `sql`'s fingerprint.
    fn statement(&mut self, sql: &str) -> usize {
        if let Some(&i) = self.by_sql.get(sql) {
            return i;
        }
        let dialect = match self.engine {
            Engine::Postgres => Dialect::Postgres,
            Engine::Mysql => Dialect::Mysql,
        };
        let f = fingerprint(sql, dialect);
        let i = *self.by_id.entry(f.id).or_insert_with(|| {
            self.schedule.statements.push(f);
            self.schedule.statements.len() - 1
        });
        // Bounded: pgbench -M simple makes every statement's text new.
        if self.by_sql.len() < 100_000 {
            self.by_sql.insert(sql.to_string(), i);
        }
        i
    }

    fn request(&mut self, r: Request) {
        let Some(mut s) = self.open.remove(&r.session) else {
            return;
        };
        if !s.skip {
            if let Some(p) = self.plan(&mut s, &r) {
                let last = p.seen.place.is_some_and(|p| p.last);
                s.plan.requests.push(p);
                if last {
                    self.name_shape(&mut s);
                }
            }
        }
        self.open.insert(r.session, s);
    }

    /// The transaction that just ended: its shape named on each of its requests.
    fn name_shape(&mut self, s: &mut SessionState) {
        let id = std::mem::take(&mut s.shape).id();
        let next = self.schedule.shapes.len() as u32;
        let i = *self.shape_index.entry(id.clone()).or_insert(next);
        if i == next {
            self.schedule.shapes.push(id);
        }
        for q in s.plan.requests.iter_mut().skip(s.tx_from) {
            q.shape = Some(i);
        }
    }

    fn plan(&mut self, s: &mut SessionState, r: &Request) -> Option<Planned> {
        let ok = r.outcome == Outcome::Ok;
        let (wire, statement, runs) = match &r.op {
            Op::Query(q) => {
                let Some(sql) = &q.sql else {
                    self.unplayable.add("SQL over the recorder's 1 MiB cap (null)");
                    return None;
                };
                let i = self.statement(sql);
                self.note_sql(sql, i, ok);
                (
                    Wire::Postgres(vec![Frontend::Query(sql.clone())]),
                    Some(i),
                    vec![Some(i)],
                )
            }
            Op::Extended { steps } => {
                let (wire, statement, runs) = self.group(s, steps, ok)?;
                (Wire::Postgres(wire), statement, runs)
            }
            Op::FunctionCall { .. } => {
                self.unplayable.add("FunctionCall (its arguments are not kept)");
                return None;
            }
            _ => self.mysql(s, r, ok)?,
        };
        let place = s.boundaries.recorded(r);
        let work = Work::of(&r.op);
        let ran = executions::ran(runs.len(), r.outcome == Outcome::Error, r.tags.len());
        if let Some(p) = place {
            if p.first {
                s.shape = TxShape::default();
                s.tx_from = s.plan.requests.len();
            }
            // As `trace` names the shape: each execution that ran.
            for run in &runs[..ran] {
                s.shape
                    .push(run.map_or(UNKNOWN_STATEMENT, |i| self.schedule.statements[i].id));
            }
        }
        let seen = Seen {
            response_ns: r.response_ns,
            error: (r.outcome == Outcome::Error).then(|| error_key(self.engine, r.error.as_ref())),
            place,
            ran,
        };
        Some(Planned {
            at_ns: r.at_ns,
            wire,
            statement,
            runs,
            kill: match (&r.op, self.engine) {
                (Op::ComQuery(q), Engine::Mysql) => {
                    q.sql.as_deref().and_then(kill::parse).map(|(query, named)| Kill {
                        target: Err(kill::UNRESOLVED),
                        query,
                        named,
                    })
                }
                _ => None,
            },
            work,
            shape: None,
            think_ns: r.think_ns,
            seen,
        })
    }

    /// A MySQL command: its packet, the statement it prepares or executes, and the one
    /// it executes. `None` (counted) when it cannot be sent as recorded, or for COM_QUIT.
    fn mysql(&mut self, s: &mut SessionState, r: &Request, ok: bool) -> Option<(Wire, Option<usize>, Runs)> {
        if self.engine != Engine::Mysql {
            self.unplayable.add("a MySQL command in a PostgreSQL trace");
            return None;
        }
        let prepared = r.prepared.as_ref().map(|p| p.statement_id);
        let command = match mysql::command(&r.op, prepared) {
            Ok(Some(c)) => c,
            Ok(None) => return None,
            Err(cause) => {
                self.unplayable.add(cause);
                return None;
            }
        };
        let statement = match &r.op {
            Op::ComQuery(q) | Op::ComStmtPrepare(q) => {
                let sql = q.sql.as_deref().unwrap_or_default();
                let i = self.statement(sql);
                self.note_sql(sql, i, ok);
                if let Some(id) = prepared {
                    s.statements.insert(id.to_string(), i);
                }
                // A preparation runs nothing: a statement's calls are its executions.
                if matches!(r.op, Op::ComStmtPrepare(_)) {
                    return Some((Wire::Mysql(command), None, Vec::new()));
                }
                Some(i)
            }
            Op::ComStmtExecute { statement_id, .. } => s.statements.get(&statement_id.to_string()).copied(),
            _ => return Some((Wire::Mysql(command), None, Vec::new())),
        };
        Some((Wire::Mysql(command), statement, vec![statement]))
    }

    fn note_sql(&mut self, sql: &str, i: usize, ok: bool) {
        if ok && self.ran_ok.insert(i) {
            self.schedule.ran_ok.push(sql.to_string());
        }
        let head = sql.trim_start();
        if head.len() >= 6 && head[..6].eq_ignore_ascii_case("create") && self.schedule.creates.len() < 10_000
        {
            self.schedule.creates.push(sql.to_string());
        }
    }

    /// An extended group's messages, the statement its first Bind runs, and the one
    /// each Execute runs (what its portal was bound to).
    fn group(
        &mut self,
        s: &mut SessionState,
        steps: &[Step],
        ok: bool,
    ) -> Option<(Vec<Frontend>, Option<usize>, Runs)> {
        let mut wire = Vec::with_capacity(steps.len() + 1);
        let mut statement = None;
        let mut runs = Vec::new();
        let mut portals: HashMap<&str, Option<usize>> = HashMap::new();
        for step in steps {
            wire.push(match step {
                Step::Parse {
                    statement: name,
                    sql,
                    param_types,
                } => {
                    let Some(text) = &sql.sql else {
                        self.unplayable.add("SQL over the recorder's 1 MiB cap (null)");
                        return None;
                    };
                    let i = self.statement(text);
                    self.note_sql(text, i, ok);
                    if s.statements.len() < 100_000 || s.statements.contains_key(name) {
                        s.statements.insert(name.clone(), i);
                    }
                    Frontend::Parse {
                        name: name.clone(),
                        sql: text.clone(),
                        param_types: param_types.clone(),
                    }
                }
                Step::Bind {
                    portal,
                    statement: name,
                    params,
                    result_formats,
                } => {
                    let bound = s.statements.get(name).copied();
                    statement = statement.or(bound);
                    portals.insert(portal, bound);
                    let Some(params) = params else {
                        self.unplayable
                            .add("parameters over the recorder's 1 MiB cap (null)");
                        return None;
                    };
                    let Some(params) = params.iter().map(param).collect::<Option<Vec<_>>>() else {
                        self.unplayable.add("a parameter without its value");
                        return None;
                    };
                    Frontend::Bind {
                        portal: portal.clone(),
                        statement: name.clone(),
                        params,
                        result_formats: result_formats.iter().map(|f| *f as i16).collect(),
                    }
                }
                Step::Describe { what, name } => Frontend::Describe {
                    what: which(what),
                    name: name.clone(),
                },
                Step::Execute { portal, max_rows } => {
                    runs.push(portals.get(portal.as_str()).copied().flatten());
                    Frontend::Execute {
                        portal: portal.clone(),
                        max_rows: (*max_rows).min(i32::MAX as u32) as i32,
                    }
                }
                Step::Close { what, name } => Frontend::Close {
                    what: which(what),
                    name: name.clone(),
                },
                Step::Flush { waited: false } => Frontend::Flush,
                Step::Flush { waited: true } => Frontend::FlushThenWait,
                Step::Dropped { .. } => {
                    self.unplayable
                        .add("an extended group over the recorder's 1,024 steps");
                    return None;
                }
            });
        }
        wire.push(Frontend::Sync);
        Some((wire, statement, runs))
    }

    fn finish(mut self) -> Result<Schedule> {
        if !self.unplayable.0.is_empty() {
            let total: u64 = self.unplayable.0.values().sum();
            let causes: Vec<String> = self
                .unplayable
                .0
                .iter()
                .map(|(c, n)| format!("{n} with {c}"))
                .collect();
            bail!(
                "{total} recorded request(s) cannot be replayed as recorded: {}; nothing was sent",
                causes.join(", ")
            );
        }
        // Sessions still open when the trace ends (cut short): replayed to their last
        // request.
        let open: Vec<SessionState> = self.open.drain().map(|(_, s)| s).collect();
        for s in open {
            self.close(s);
        }
        self.done.sort_by_key(|s| (s.open_ns, s.session));
        let targets: Vec<cancel::Target> = self
            .done
            .iter()
            .map(|s| cancel::Target {
                session: s.session,
                pid: s.backend_pid,
                open_ns: s.open_ns,
                close_ns: s.close_ns,
            })
            .collect();
        self.schedule.cancels = cancel::plan(&self.cancels, &targets);
        for s in &mut self.done {
            for p in &mut s.requests {
                if let Some(k) = &mut p.kill {
                    k.target = kill::target(s.open_ns + p.at_ns, k.named, &targets);
                }
            }
        }
        self.schedule.sessions = self.done;
        Ok(self.schedule)
    }
}

impl Unplayable {
    fn add(&mut self, cause: &'static str) {
        *self.0.entry(cause).or_default() += 1;
    }
}

/// How a recorded error is counted: PostgreSQL's SQLSTATE; MySQL's `code/SQLSTATE` (as
/// the MySQL session keys its errors), `?????` when the recording has none.
fn error_key(engine: Engine, e: Option<&connbench_trace::event::ServerError>) -> String {
    let state = e.and_then(|e| e.sqlstate.clone());
    match (engine, e.and_then(|e| e.code)) {
        (Engine::Mysql, Some(code)) => format!("{code}/{}", state.unwrap_or_else(|| "HY000".into())),
        _ => state.unwrap_or_else(|| "?????".into()),
    }
}

/// `S` for a statement, `P` for a portal.
fn which(what: &str) -> u8 {
    if what == "statement" {
        b'S'
    } else {
        b'P'
    }
}

/// A recorded parameter's format and bytes; `None` when its value was not kept.
fn param(p: &Param) -> Option<(bool, Option<Vec<u8>>)> {
    let binary = p.format == Some(Format::Binary);
    if p.null {
        return Some((binary, None));
    }
    if let Some(t) = &p.text {
        return Some((binary, Some(t.as_bytes().to_vec())));
    }
    if p.len == 0 {
        return Some((binary, Some(Vec::new())));
    }
    let hex = p.hex.as_deref()?;
    Some((binary, Some(mysql::unhex(hex)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_decode_from_text_hex_and_null() {
        let p = |text: Option<&str>, hex: Option<&str>, null: bool, binary: bool| Param {
            type_id: None,
            format: Some(if binary { Format::Binary } else { Format::Text }),
            null,
            len: 2,
            text: text.map(str::to_string),
            hex: hex.map(str::to_string),
        };
        assert_eq!(
            param(&p(Some("42"), None, false, false)),
            Some((false, Some(b"42".to_vec())))
        );
        assert_eq!(
            param(&p(None, Some("00ff"), false, true)),
            Some((true, Some(vec![0, 255])))
        );
        assert_eq!(param(&p(None, None, true, false)), Some((false, None)));
        // Redacted: neither text nor hex.
        assert_eq!(param(&p(None, None, false, false)), None);
        assert_eq!(mysql::unhex("0g"), None);
    }

    fn event(json: &str) -> Event {
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"))
    }

    /// A session that prepares a statement, runs it in a transaction and creates a table:
    /// the messages to send, the statement each runs, what the recording saw.
    #[test]
    fn a_session_becomes_its_messages_statements_and_transactions() {
        let mut b = Builder::default();
        let req = |seq: u64, op: &str, tx: &str| {
            event(&format!(
                r#"{{"type":"request","session":7,"seq":{seq},"at_ns":{},"think_ns":1,"request_bytes":9,{op},
                "outcome":"ok","first_byte_ns":1,"response_ns":{},"response_bytes":5,"rows":0,"tx":"{tx}"}}"#,
                100 * seq,
                10 + seq
            ))
        };
        b.add(event(
            r#"{"type":"session_open","session":7,"open_ns":5000,"transport":"tcp","tls_requested":false,
            "auth_method":"trust","user":"app","database":"shop","backend_pid":1,"protocol":"3.0","phases":{},
            "ready":true,"error":null}"#,
        ));
        b.add(req(
            0,
            r#""op":"extended","steps":[{"step":"parse","statement":"s1","sql":"SELECT $1::int"}]"#,
            "idle",
        ));
        b.add(req(1, r#""op":"query","sql":"BEGIN""#, "transaction"));
        b.add(req(
            2,
            r#""op":"extended","steps":[{"step":"bind","portal":"","statement":"s1","params":[{"format":"text","len":1,"text":"7"}],"result_formats":[1]},{"step":"execute","portal":"","max_rows":0}]"#,
            "transaction",
        ));
        b.add(req(3, r#""op":"query","sql":"COMMIT""#, "idle"));
        b.add(req(4, r#""op":"query","sql":"CREATE TABLE t (a int)""#, "idle"));
        b.add(event(
            r#"{"type":"session_close","session":7,"at_ns":900,"by":"client","requests":5,"bytes_to_server":1,"bytes_to_client":1}"#,
        ));
        let s = b.finish().unwrap();
        assert_eq!(s.sessions.len(), 1);
        let p = &s.sessions[0];
        assert_eq!((p.open_ns, p.close_ns, p.requests.len()), (5000, Some(900), 5));
        let r = &p.requests;
        assert_eq!(r[2].at_ns, 200);
        assert_eq!(
            r[2].wire,
            Wire::Postgres(vec![
                Frontend::Bind {
                    portal: String::new(),
                    statement: "s1".into(),
                    params: vec![(false, Some(b"7".to_vec()))],
                    result_formats: vec![1],
                },
                Frontend::Execute {
                    portal: String::new(),
                    max_rows: 0
                },
                Frontend::Sync,
            ])
        );
        // The Bind runs what the Parse of an earlier request prepared; the Parse alone
        // runs nothing, so it is no call of it, but it opens the transaction its
        // statement runs in (connbench_trace::transaction).
        assert_eq!(r[0].statement, None);
        assert!(s.statements[r[2].statement.unwrap()]
            .text
            .starts_with("SELECT $1"));
        assert_eq!(
            r.iter()
                .map(|r| (!r.runs.is_empty(), r.seen.place.map(|p| (p.first, p.last))))
                .collect::<Vec<_>>(),
            vec![
                (false, Some((true, false))),
                (true, Some((false, false))),
                (true, Some((false, false))),
                (true, Some((false, true))),
                (true, Some((true, true)))
            ]
        );
        // Two transactions, two shapes: each request names its transaction's.
        assert_eq!(
            r.iter().map(|r| r.shape).collect::<Vec<_>>(),
            [Some(0), Some(0), Some(0), Some(0), Some(1)]
        );
        assert_eq!(s.shapes.len(), 2);
        assert_eq!(r[3].seen.response_ns, Some(13));
        assert_eq!(s.ran_ok.len(), 4);
        assert_eq!(s.creates, vec!["CREATE TABLE t (a int)".to_string()]);
    }

    #[test]
    fn what_cannot_be_replayed_is_counted_by_cause() {
        let mut b = Builder::default();
        b.add(event(
            r#"{"type":"session_open","session":1,"open_ns":0,"transport":"tcp","tls_requested":false,
            "auth_method":null,"user":null,"database":null,"backend_pid":null,"protocol":null,"phases":{},
            "ready":true,"error":null}"#,
        ));
        for op in [
            r#""op":"function_call","function_oid":1,"args":0"#,
            r#""op":"query","sql":null"#,
            r#""op":"query","sql":null"#,
        ] {
            b.add(event(&format!(
                r#"{{"type":"request","session":1,"seq":0,"at_ns":0,"think_ns":null,"request_bytes":1,{op},
                "outcome":"ok","first_byte_ns":null,"response_ns":null,"response_bytes":0,"rows":0,"tx":null}}"#
            )));
        }
        let e = b.finish().unwrap_err().to_string();
        assert!(
            e.starts_with("3 recorded request(s) cannot be replayed as recorded: 1 with FunctionCall"),
            "{e}"
        );
        assert!(
            e.contains("2 with SQL over the recorder's 1 MiB cap (null)"),
            "{e}"
        );
    }
}

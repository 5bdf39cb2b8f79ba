//! Housekeeping: the requests an application's driver and pool send that its own code
//! never wrote (a pool's pre-ping, its reset on release, a driver's SETs, SHOWs and
//! catalogue look-ups at connect, MySQL's COM_PING), recognised by their fingerprint and
//! by where they stand, and tallied from a trace in one pass: per kind and fingerprint,
//! requests, round trips and recorded time, against the application's own transactions.
//! `connbench trace` prices them (`stats::housekeeping`) and `connbench replay --without
//! housekeeping` leaves out the same requests, by the same [`classify`], so the saving is
//! measured as well as predicted.
//!
//! The catalogue was read from the drivers' sources (docs/trace.md, "Housekeeping"):
//! asyncpg's `Connection.get_reset_query` (`SELECT pg_advisory_unlock_all(); CLOSE ALL;
//! UNLISTEN *; RESET ALL`, sent by its pool on every release) and its type introspection
//! (`typeinfo_tree`, `TYPE_BY_NAME`); SQLAlchemy's pool pre-ping (`SELECT 1`, run by
//! psycopg2's and psycopg's dialects in autocommit) and its PostgreSQL dialect's
//! initialize (`select pg_catalog.version()`, `select current_schema()`, `show
//! standard_conforming_strings`, `show transaction isolation level`), its reset on
//! return (`ROLLBACK` while idle); PyMySQL's `SET NAMES` and `SET AUTOCOMMIT`,
//! mysql-connector's `SET NAMES ... COLLATE`, `SELECT @@session...`, `SET @@session...`;
//! SQLAlchemy's MySQL dialect's `SELECT @@transaction_isolation`, `SHOW VARIABLES LIKE`;
//! both MySQL drivers' `ping()` (COM_PING); mysql-connector's pool's `reset_session()`
//! on every return (COM_RESET_CONNECTION).
//!
//! Where a request stands decides as much as its text: a `SELECT 1`, a `SET` or a
//! catalogue query inside one of the application's transactions is the application's.
//! Only a request outside any transaction, or one that is a transaction of its own
//! ([`stands_alone`], on `transaction`'s one definition), is housekeeping; asyncpg's
//! introspection is recognised anywhere, as it runs where the application's first use
//! of a type puts it.

use std::collections::HashMap;

use crate::event::{Event, Op, Outcome, Request};
use crate::executions::{note_prepared, Executions};
use crate::fingerprint::{fingerprint, Dialect, Fingerprint};
use crate::reader::{ReadError, TraceReader};
use crate::transaction::{Boundaries, Place, Work};
use crate::Engine;

/// Distinct housekeeping fingerprints kept apart; more are counted as one row (drivers
/// send a handful).
pub const MAX_ROWS: usize = 1_000;

/// The text standing for MySQL's COM_PING, a command with no SQL; its fingerprint is
/// this text's, so `--without` can name it as any statement.
pub const COM_PING: &str = "COM_PING";

/// The text standing for MySQL's COM_RESET_CONNECTION (a pool's reset, as
/// mysql-connector's pooling sends it on MySQL 5.7 and later), by its fingerprint too.
/// The trace does not keep such a command's payload, so `replay` refuses a trace that
/// holds one; `trace` still names and prices it.
pub const COM_RESET_CONNECTION: &str = "COM_RESET_CONNECTION";
const COM_RESET_CONNECTION_CODE: u8 = 0x1f;

/// What a housekeeping request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A pool's pre-ping or validation: `SELECT 1`, COM_PING.
    Ping,
    /// A pool's reset on release: asyncpg's reset query, `DISCARD ALL`, `RESET ALL`, a
    /// `ROLLBACK` with no transaction open.
    Reset,
    /// A driver's session set-up: `SET`, `SHOW`, MySQL's `SELECT @@...`.
    SessionSetup,
    /// Type and catalogue look-ups: asyncpg's introspection, `pg_catalog`,
    /// `information_schema`, the server's version, the current schema.
    Lookup,
}

impl Kind {
    /// How reports name it.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Ping => "pre-ping",
            Kind::Reset => "reset on release",
            Kind::SessionSetup => "session set-up",
            Kind::Lookup => "type/catalogue look-up",
        }
    }
}

/// Whether a request with `place` in its transaction (`transaction::Boundaries`) stands
/// outside the application's transactions: outside any, or a transaction of its own.
pub fn stands_alone(place: Option<Place>) -> bool {
    place.is_none_or(|p| p.first && p.last)
}

/// The kind of housekeeping a request is, from its statement's normalised text (a
/// [`Fingerprint`]'s), whether it is MySQL's COM_PING, whether it [`stands_alone`], and
/// whether it comes `at_connect`, before the session's first application statement
/// (where a driver's set-up and look-ups may stand in a transaction of their own:
/// SQLAlchemy's dialect initialises inside BEGIN ... ROLLBACK on psycopg2).
pub fn classify(text: Option<&str>, com_ping: bool, alone: bool, at_connect: bool) -> Option<Kind> {
    if com_ping {
        return Some(Kind::Ping);
    }
    let t = text?.trim().trim_end_matches(';').trim().to_ascii_uppercase();
    // asyncpg's introspection, wherever the application's first use of a type puts it.
    if t.contains("TYPEINFO_TREE") || is_asyncpg_type_by_name(&t) {
        return Some(Kind::Lookup);
    }
    // Several statements (a simple Query's, a group's executions joined: [`joined`]) are
    // housekeeping only if each is: asyncpg's reset is four resets, but `SELECT 1;
    // UPDATE ...` is the application's work, and leaving it out would replay another
    // application. The first statement names the kind.
    let mut kinds = statements(&t).map(classify_text);
    let first = kinds.next().flatten();
    if kinds.any(|k| k.is_none()) {
        return None;
    }
    match first? {
        k if alone => Some(k),
        k @ (Kind::SessionSetup | Kind::Lookup) if at_connect => Some(k),
        _ => None,
    }
}

/// Whether a normalised statement only opens or ends a transaction: neither the
/// application's work nor housekeeping, it stands beside either.
pub fn is_transaction_control(text: &str) -> bool {
    let t = text.to_ascii_uppercase();
    let control = |s: &str| {
        ["BEGIN", "START TRANSACTION", "COMMIT", "ROLLBACK", "END"]
            .iter()
            .any(|w| {
                s.strip_prefix(w)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
            })
    };
    // Every statement of it: `BEGIN; UPDATE ...; COMMIT` in one Query is work.
    let mut parts = statements(&t).peekable();
    parts.peek().is_some() && parts.all(control)
}

/// The statements of a normalised text, split at its semicolons, trimmed, empty ones
/// dropped. A normalised text holds no literal (each is a placeholder), so a semicolon
/// separates statements; where one does not (a dollar-quoted body), a piece matches no
/// pattern, which only makes a request the application's work.
fn statements(t: &str) -> impl Iterator<Item = &str> {
    t.split(';').map(str::trim).filter(|s| !s.is_empty())
}

/// The text [`classify`] and [`is_transaction_control`] read for a request that runs
/// several statements (a pipelined group's executions, in order): their normalised texts
/// joined by semicolons; `None` when one of them is unknown to the trace.
pub fn joined<'a>(texts: impl IntoIterator<Item = Option<&'a str>>) -> Option<String> {
    let parts: Option<Vec<&str>> = texts.into_iter().collect();
    parts.map(|p| p.join("; "))
}

/// One session's requests in order: their kinds, and whether the application has run a
/// statement of its own yet (before it, a driver's set-up counts even inside a
/// transaction).
#[derive(Debug, Clone, Default)]
pub struct Session {
    applied: bool,
}

impl Session {
    /// Before the session's first application statement.
    pub fn at_connect(&self) -> bool {
        !self.applied
    }

    /// The kind of the session's next request ([`classify`]); `runs`: it runs a
    /// statement (`transaction::Work::Runs`).
    pub fn classify(
        &mut self,
        text: Option<&str>,
        com_ping: bool,
        place: Option<Place>,
        runs: bool,
    ) -> Option<Kind> {
        let kind = classify(text, com_ping, stands_alone(place), self.at_connect());
        self.applied |= kind.is_none() && runs && !text.is_some_and(is_transaction_control);
        kind
    }
}

/// [`classify`]'s patterns, on an upper-cased normalised text.
fn classify_text(t: &str) -> Option<Kind> {
    let starts = |p: &str| t.starts_with(p);
    let resets = [
        "RESET ALL",
        "DISCARD ALL",
        "DISCARD TEMP",
        "CLOSE ALL",
        "UNLISTEN *",
        "DEALLOCATE ALL",
    ];
    let lookups = [
        "SELECT VERSION()",
        "SELECT PG_CATALOG.VERSION()",
        "SELECT CURRENT_SCHEMA()",
        "SELECT DATABASE()",
    ];
    let catalogue = ["PG_CATALOG.", "PG_TYPE", "PG_NAMESPACE", "INFORMATION_SCHEMA."];
    if matches!(t, "SELECT $1" | "SELECT ?" | "SELECT 1" | "") {
        Some(Kind::Ping)
    } else if t.contains("PG_ADVISORY_UNLOCK_ALL()")
        || resets.iter().any(|p| starts(p))
        || t == "ROLLBACK"
        || t == COM_RESET_CONNECTION
    {
        Some(Kind::Reset)
    } else if starts("SET ") || starts("SHOW ") || starts("SELECT @@") || starts("SELECT @ @") {
        // (The fingerprint spells MySQL's `@@` as `@ @`.)
        Some(Kind::SessionSetup)
    } else if lookups.contains(&t) || catalogue.iter().any(|w| t.contains(w)) {
        Some(Kind::Lookup)
    } else {
        None
    }
}

/// asyncpg's `TYPE_BY_NAME`: a type's oid by name and schema, its codec's look-up.
fn is_asyncpg_type_by_name(t: &str) -> bool {
    t.starts_with("SELECT T.OID, T.TYPELEM AS ELEMTYPE, T.TYPTYPE AS KIND FROM PG_CATALOG.PG_TYPE")
}

/// Whether `--without housekeeping` leaves a request of `kind` and normalised `text`
/// out: pings, resets, look-ups and read-only set-up (SHOW, `SELECT @@`) are; a `SET`
/// is kept, because it changes how the session behaves (its encoding, autocommit, time
/// zone, search path): without it the replay would be of another application.
pub fn left_out_by_default(kind: Kind, text: &str) -> bool {
    let t = text.to_ascii_uppercase();
    !(kind == Kind::SessionSetup && statements(&t).any(|s| s.starts_with("SET ")))
}

/// One kind and fingerprint of housekeeping, as recorded.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Row {
    pub kind: Kind,
    /// 16 hex digits, as `trace`'s statements and `replay --without` name it.
    pub fingerprint: String,
    pub text: String,
    pub requests: u64,
    /// Exchanges waited on (a pipelined request shares its predecessor's).
    pub round_trips: u64,
    /// Requests sent before the session's first application statement.
    pub at_connect: u64,
    /// Server and network time of its requests, as recorded, summed, ms.
    pub time_ms: f64,
    /// `time_ms` as a share of every request's recorded time.
    pub share: Option<f64>,
    /// Round trips per application transaction.
    pub round_trips_per_transaction: Option<f64>,
    /// `replay --without housekeeping` leaves it out ([`left_out_by_default`]).
    pub left_out_by_default: bool,
}

/// A trace's housekeeping against the application's own work.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Housekeeping {
    pub sessions: u64,
    /// Every request, and their round trips and recorded time (ms).
    pub requests: u64,
    pub round_trips: u64,
    pub time_ms: f64,
    /// Transactions as `trace` counts them, and those that hold anything besides
    /// housekeeping: the application's. A checkout is not on the wire; for a pool used
    /// one transaction per checkout, an application transaction is one.
    pub transactions: u64,
    pub application_transactions: u64,
    /// The requests that stand in no transaction (a MySQL COM_PING, a statement closed
    /// while idle): their round trips and recorded time (ms). A transaction's time leaves
    /// them out, so a figure per application transaction adds them back.
    pub outside_round_trips: u64,
    pub outside_time_ms: f64,
    /// By kind, then round trips, most first.
    pub rows: Vec<Row>,
}

/// Reads the trace at `path` whole into its housekeeping (what came before a cut).
pub fn read(path: &std::path::Path) -> Result<Housekeeping, ReadError> {
    let reader = TraceReader::open(path)?;
    let mut t = Tally::new(reader.header().engine);
    for e in reader {
        match e {
            Ok(e) => t.add(&e),
            Err(e) if e.is_truncation() => break,
            Err(e) => return Err(e),
        }
    }
    Ok(t.finish())
}

/// A session being read.
#[derive(Default)]
struct Open {
    boundaries: Boundaries,
    /// Statement names and MySQL ids → their SQL, as `profile` keeps them.
    names: HashMap<String, String>,
    kinds: Session,
    /// The open transaction holds only housekeeping so far.
    only_housekeeping: bool,
}

/// Reads events into a [`Housekeeping`], one at a time.
pub struct Tally {
    dialect: Dialect,
    open: HashMap<u64, Open>,
    out: Housekeeping,
    rows: HashMap<(Kind, u64), Row>,
}

impl Tally {
    pub fn new(engine: Engine) -> Tally {
        Tally {
            dialect: match engine {
                Engine::Postgres => Dialect::Postgres,
                Engine::Mysql => Dialect::Mysql,
            },
            open: HashMap::new(),
            out: Housekeeping::default(),
            rows: HashMap::new(),
        }
    }

    pub fn add(&mut self, e: &Event) {
        match e {
            Event::SessionOpen(o) => {
                self.out.sessions += 1;
                self.open.insert(o.session, Open::default());
            }
            Event::Request(r) => self.request(r),
            Event::SessionClose(c) => {
                if let Some(mut s) = self.open.remove(&c.session) {
                    self.closed(&mut s);
                }
            }
            Event::Header(_) => {}
        }
    }

    /// A transaction still open at the session's end counts as far as it went.
    fn closed(&mut self, s: &mut Open) {
        if s.boundaries.close() {
            self.out.transactions += 1;
            self.out.application_transactions += u64::from(!s.only_housekeeping);
        }
    }

    fn request(&mut self, r: &Request) {
        let Some(s) = self.open.get_mut(&r.session) else {
            return;
        };
        let (sql, several) = sql_of(&r.op, &mut s.names, self.dialect);
        note_prepared(r, &mut s.names);
        let ping = matches!(r.op, Op::ComPing);
        let f = if ping {
            Some(fingerprint(COM_PING, self.dialect))
        } else if matches!(
            r.op,
            Op::ComOther {
                command: COM_RESET_CONNECTION_CODE,
                ..
            }
        ) {
            Some(fingerprint(COM_RESET_CONNECTION, self.dialect))
        } else {
            sql.map(|q| fingerprint(&q, self.dialect))
        };
        let place = s.boundaries.recorded(r);
        let text = match &several {
            Some(all) => all.as_deref(),
            None => f.as_ref().map(|f| f.text.as_str()),
        };
        let at_connect = s.kinds.at_connect();
        let kind = s.kinds.classify(text, ping, place, Work::of(&r.op).runs());
        if let Some(p) = place {
            if p.first {
                s.only_housekeeping = true;
            }
            s.only_housekeeping &= kind.is_some() || text.is_some_and(is_transaction_control);
            if p.last {
                self.out.transactions += 1;
                self.out.application_transactions += u64::from(!s.only_housekeeping);
            }
        }
        let round_trip = r.think_ns.is_some() && r.outcome != Outcome::NoResponse;
        let ms = r.response_ns.unwrap_or(0) as f64 / 1e6;
        self.out.requests += 1;
        self.out.round_trips += u64::from(round_trip);
        self.out.time_ms += ms;
        if place.is_none() {
            self.out.outside_round_trips += u64::from(round_trip);
            self.out.outside_time_ms += ms;
        }
        if let (Some(kind), Some(f)) = (kind, f) {
            self.row(kind, f, round_trip, at_connect, ms);
        }
    }

    fn row(&mut self, kind: Kind, f: Fingerprint, round_trip: bool, at_connect: bool, ms: f64) {
        let full = self.rows.len() >= MAX_ROWS && !self.rows.contains_key(&(kind, f.id));
        let key = (kind, if full { 0 } else { f.id });
        let row = self.rows.entry(key).or_insert_with(|| Row {
            kind,
            fingerprint: if full { "-".into() } else { f.id_hex() },
            left_out_by_default: left_out_by_default(kind, &f.text),
            text: if full {
                "(other housekeeping)".into()
            } else {
                f.text
            },
            requests: 0,
            round_trips: 0,
            at_connect: 0,
            time_ms: 0.0,
            share: None,
            round_trips_per_transaction: None,
        });
        row.requests += 1;
        row.round_trips += u64::from(round_trip);
        row.at_connect += u64::from(at_connect);
        row.time_ms += ms;
    }

    /// What was read (sessions still open count as far as they went).
    pub fn finish(mut self) -> Housekeeping {
        for (_, mut s) in std::mem::take(&mut self.open) {
            self.closed(&mut s);
        }
        let mut out = self.out;
        let (total, tx) = (out.time_ms, out.application_transactions);
        out.rows = self
            .rows
            .into_values()
            .map(|mut r| {
                r.share = (total > 0.0).then(|| r.time_ms / total);
                r.round_trips_per_transaction = (tx > 0).then(|| r.round_trips as f64 / tx as f64);
                r
            })
            .collect();
        out.rows.sort_by(|a, b| {
            a.kind
                .cmp(&b.kind)
                .then(b.round_trips.cmp(&a.round_trips))
                .then(a.fingerprint.cmp(&b.fingerprint))
        });
        out
    }
}

/// The SQL a request runs or prepares (the first it executes, or the one it prepares),
/// which names its row; and, for a request that executes several statements, their
/// normalised texts [`joined`], which its kind is read from (`Some(None)`: one of them is
/// unknown).
fn sql_of(
    op: &Op,
    names: &mut HashMap<String, String>,
    dialect: Dialect,
) -> (Option<String>, Option<Option<String>>) {
    let e = Executions::of(op, names);
    let several = (e.sqls.len() > 1).then(|| {
        let texts: Vec<Option<String>> = e
            .sqls
            .iter()
            .map(|q| q.as_deref().map(|q| fingerprint(q, dialect).text))
            .collect();
        joined(texts.iter().map(Option::as_deref))
    });
    (e.sqls.into_iter().flatten().next().or(e.parsed), several)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pg(sql: &str) -> String {
        fingerprint(sql, Dialect::Postgres).text
    }

    fn my(sql: &str) -> String {
        fingerprint(sql, Dialect::Mysql).text
    }

    /// The drivers' own texts, as their sources send them, outside a transaction.
    #[test]
    fn the_drivers_habits_are_recognised_by_kind() {
        let reset = "SELECT pg_advisory_unlock_all();\nCLOSE ALL;\nUNLISTEN *;\nRESET ALL;";
        let cases = [
            (pg("SELECT 1"), Kind::Ping),
            (my("SELECT 1"), Kind::Ping),
            (pg(reset), Kind::Reset),
            (pg("DISCARD ALL"), Kind::Reset),
            (pg("ROLLBACK"), Kind::Reset),
            (pg("show standard_conforming_strings"), Kind::SessionSetup),
            (pg("show transaction isolation level"), Kind::SessionSetup),
            (my("SET NAMES utf8mb4"), Kind::SessionSetup),
            (my("SET AUTOCOMMIT = 0"), Kind::SessionSetup),
            (my("SELECT @@session.autocommit"), Kind::SessionSetup),
            (my("SELECT @@transaction_isolation"), Kind::SessionSetup),
            (pg("select pg_catalog.version()"), Kind::Lookup),
            (pg("select current_schema()"), Kind::Lookup),
        ];
        for (text, kind) in &cases {
            assert_eq!(classify(Some(text), false, true, false), Some(*kind), "{text}");
        }
        assert_eq!(
            classify(None, true, false, false),
            Some(Kind::Ping),
            "COM_PING anywhere"
        );
        let reset = my(COM_RESET_CONNECTION);
        assert_eq!(classify(Some(&reset), false, true, false), Some(Kind::Reset));
    }

    /// The same texts inside the application's transaction are the application's; its
    /// own statements never are housekeeping; asyncpg's introspection is, anywhere.
    #[test]
    fn where_a_request_stands_decides() {
        for sql in [
            "SELECT 1",
            "SET LOCAL lock_timeout = '1s'",
            "ROLLBACK",
            "SELECT * FROM pg_catalog.pg_class",
        ] {
            assert_eq!(classify(Some(&pg(sql)), false, false, false), None, "{sql}");
        }
        for sql in [
            "SELECT * FROM orders WHERE id = 1",
            "INSERT INTO t VALUES (1)",
            "BEGIN",
            "COMMIT",
        ] {
            assert_eq!(classify(Some(&pg(sql)), false, true, false), None, "{sql}");
        }
        let intro = "WITH RECURSIVE typeinfo_tree(oid, ns) AS (SELECT 1) SELECT * FROM typeinfo_tree";
        assert_eq!(
            classify(Some(&pg(intro)), false, false, false),
            Some(Kind::Lookup)
        );
        // At connect, a driver's set-up and look-ups inside a transaction of their own
        // (SQLAlchemy's initialize on psycopg2); a ping or a reset there is not one.
        let version = pg("select pg_catalog.version()");
        assert_eq!(classify(Some(&version), false, false, true), Some(Kind::Lookup));
        assert_eq!(classify(Some(&pg("SELECT 1")), false, false, true), None);
        let hstore =
            pg("SELECT t.oid, typarray FROM pg_type t JOIN pg_namespace ns ON typnamespace = ns.oid");
        assert_eq!(classify(Some(&hstore), false, false, true), Some(Kind::Lookup));
        let mut s = Session::default();
        let (open, inside) = (
            Some(Place {
                first: true,
                last: false,
            }),
            Some(Place {
                first: false,
                last: false,
            }),
        );
        assert_eq!(s.classify(Some(&pg("BEGIN")), false, open, true), None);
        assert!(s.at_connect(), "BEGIN is no application statement");
        assert_eq!(
            s.classify(Some(&version), false, inside, true),
            Some(Kind::Lookup)
        );
        assert_eq!(
            s.classify(Some(&pg("INSERT INTO t VALUES (1)")), false, inside, true),
            None
        );
        assert!(!s.at_connect());
        assert_eq!(s.classify(Some(&version), false, inside, true), None);
        assert!(is_transaction_control("COMMIT") && !is_transaction_control("COMMITTED_ROWS"));
        let place = |first, last| Some(Place { first, last });
        assert!(stands_alone(None) && stands_alone(place(true, true)));
        assert!(!stands_alone(place(true, false)) && !stands_alone(place(false, true)));
    }

    #[test]
    fn sets_are_kept_by_default_and_the_rest_left_out() {
        assert!(!left_out_by_default(Kind::SessionSetup, &my("SET NAMES utf8mb4")));
        assert!(left_out_by_default(
            Kind::SessionSetup,
            &pg("SHOW server_version")
        ));
        assert!(left_out_by_default(Kind::Reset, &pg("DISCARD ALL")));
        assert!(left_out_by_default(Kind::Ping, COM_PING));
    }

    /// Several statements in one request (a simple Query's, or a pipelined group's
    /// executions [`joined`]) are housekeeping only if each is, and transaction control
    /// only if each is. Reading the first alone made a pipelined `BEGIN; UPDATE; END`
    /// "transaction control", so `trace` counted no application transaction in it, and
    /// would have let `--without housekeeping` drop `SELECT 1; UPDATE ...` whole.
    #[test]
    fn several_statements_are_housekeeping_only_if_each_is() {
        let group = |sqls: &[&str]| {
            joined(
                sqls.iter()
                    .map(|q| Some(pg(q)))
                    .collect::<Vec<_>>()
                    .iter()
                    .map(Option::as_deref),
            )
            .unwrap()
        };
        let work = group(&["BEGIN", "UPDATE t SET a = 1 WHERE id = 2", "END"]);
        assert!(!is_transaction_control(&work));
        assert_eq!(classify(Some(&work), false, true, false), None);
        assert!(is_transaction_control(&group(&["BEGIN", "COMMIT"])));
        assert!(!is_transaction_control(&pg(
            "BEGIN; INSERT INTO t VALUES (1); COMMIT"
        )));
        let ping_then_work = group(&["SELECT 1", "UPDATE t SET a = 1"]);
        assert_eq!(classify(Some(&ping_then_work), false, true, false), None);
        assert_eq!(
            classify(Some(&pg("SELECT 1; DELETE FROM t")), false, true, false),
            None
        );
        let setup = group(&["SHOW server_version", "SET search_path = app"]);
        assert_eq!(
            classify(Some(&setup), false, true, true),
            Some(Kind::SessionSetup)
        );
        assert!(
            !left_out_by_default(Kind::SessionSetup, &setup),
            "a SET among them is kept"
        );
        assert_eq!(joined([Some("SELECT 1"), None]), None, "an unknown execution");
    }

    fn event(json: &str) -> Event {
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"))
    }

    /// An asyncpg pool's session: a SHOW at connect, then two checkouts of BEGIN,
    /// INSERT, COMMIT, each followed by the pool's reset: two application transactions
    /// of the five `trace` counts, the reset's two round trips one per transaction.
    #[test]
    fn a_pools_session_is_tallied_against_its_transactions() {
        let mut t = Tally::new(Engine::Postgres);
        t.add(&event(
            r#"{"type":"session_open","session":1,"open_ns":0,"transport":"tcp","tls_requested":false,
            "auth_method":"trust","user":"app","database":"shop","backend_pid":1,"protocol":"3.0","phases":{},
            "ready":true,"error":null}"#,
        ));
        let mut seq = 0;
        let mut req = |sql: &str, tx: &str| {
            seq += 1;
            event(&format!(
                r#"{{"type":"request","session":1,"seq":{seq},"at_ns":{},"think_ns":1,"request_bytes":9,
                "op":"query","sql":{sql:?},"outcome":"ok","first_byte_ns":1,"response_ns":1000000,
                "response_bytes":5,"rows":0,"tx":"{tx}"}}"#,
                seq * 10_000_000
            ))
        };
        let reset = "SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL;";
        let mut events = vec![req("SHOW server_version", "idle")];
        for _ in 0..2 {
            events.push(req("BEGIN", "transaction"));
            events.push(req("INSERT INTO t VALUES (1)", "transaction"));
            events.push(req("COMMIT", "idle"));
            events.push(req(reset, "idle"));
        }
        for e in &events {
            t.add(e);
        }
        let h = t.finish();
        assert_eq!((h.requests, h.round_trips, h.transactions), (9, 9, 5));
        assert_eq!(h.application_transactions, 2);
        assert_eq!(
            (h.outside_round_trips, h.outside_time_ms),
            (0, 0.0),
            "every request stands in a transaction"
        );
        assert_eq!(h.rows.len(), 2);
        let r = &h.rows[0];
        assert_eq!(
            (r.kind, r.requests, r.round_trips, r.at_connect),
            (Kind::Reset, 2, 2, 0)
        );
        assert_eq!(r.round_trips_per_transaction, Some(1.0));
        assert_eq!(r.share, Some(2.0 / 9.0));
        assert_eq!(r.fingerprint, fingerprint(reset, Dialect::Postgres).id_hex());
        let s = &h.rows[1];
        assert_eq!(
            (s.kind, s.at_connect, s.left_out_by_default),
            (Kind::SessionSetup, 1, true)
        );
    }

    /// PyMySQL's `ping()` before a transaction: a COM_PING while idle stands in no
    /// transaction, so its round trip and time are counted apart, for a figure per
    /// application transaction to add back.
    #[test]
    fn a_com_ping_stands_in_no_transaction() {
        let mut t = Tally::new(Engine::Mysql);
        t.add(&event(
            r#"{"type":"session_open","session":1,"open_ns":0,"transport":"tcp","tls_requested":false,
            "auth_method":"mysql_native_password","user":"app","database":"shop","backend_pid":1,
            "protocol":"10","phases":{},"ready":true,"error":null}"#,
        ));
        let req = |seq: u64, op: &str| {
            event(&format!(
                r#"{{"type":"request","session":1,"seq":{seq},"at_ns":{},"think_ns":1,"request_bytes":9,
                {op},"outcome":"ok","first_byte_ns":1,"response_ns":500000,"response_bytes":5,"rows":0,
                "tx":"idle"}}"#,
                seq * 10_000_000
            ))
        };
        t.add(&req(1, r#""op":"com_ping""#));
        t.add(&req(2, r#""op":"com_query","sql":"INSERT INTO t VALUES (1)""#));
        let h = t.finish();
        assert_eq!((h.transactions, h.application_transactions), (1, 1));
        assert_eq!((h.outside_round_trips, h.outside_time_ms), (1, 0.5));
        assert_eq!(h.rows[0].kind, Kind::Ping);
    }
}

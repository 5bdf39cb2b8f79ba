//! The trace decoders on real traffic: a small TCP tee in the test stands where the
//! recorder will stand, between pgbench, psql or sysbench and the sandbox's PostgreSQL or
//! MariaDB, and feeds both directions' bytes (each chunk before it is passed on, as the
//! recorder must) to a `trace::Decoder` per connection. The events go through the trace
//! writer and reader, and are checked against what the client reports and the server
//! counts: statements per kind, transaction status, the phases of the connect, and that
//! no password or authentication payload that crossed the wire is in the trace.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use connbench::targets::Engine;
use connbench_trace::event::{Op, Outcome, Request, SessionOpen, Step, TxStatus};
use connbench_trace::{
    fingerprint, ClosedBy, DecodeOptions, Decoder, Dialect, Direction, Event, Header, RecordOptions,
    SessionMeta, TraceReader, TraceWriter, Transport,
};

use crate::common::{conninfo, sandbox, start_recorder, stderr, stdout, through_port, OwnMariadb};

/// PostgreSQL's SSLRequest.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

/// What a tee saw: the decoders' events and each connection's raw bytes per direction.
#[derive(Default)]
struct Seen {
    events: Vec<Event>,
    /// Each chunk: its connection, direction and bytes.
    raw: Vec<(u64, Direction, Vec<u8>)>,
    sessions: u64,
    closed: u64,
}

/// A TCP tee with a decoder per connection.
struct Tee {
    addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl Tee {
    /// Listens on loopback and relays to `upstream`, answering PostgreSQL's SSLRequest
    /// with `N` and withdrawing MySQL's TLS offer, as the recorder will.
    fn start(engine: Engine, upstream: SocketAddr) -> Tee {
        Tee::start_with(engine, upstream, DecodeOptions::default())
    }

    /// [`Tee::start`] with the decoders' options.
    fn start_with(engine: Engine, upstream: SocketAddr, options: DecodeOptions) -> Tee {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (seen.clone(), stop.clone());
        let start = Instant::now();
        let accept = std::thread::spawn(move || {
            let ids = AtomicU64::new(0);
            for client in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let session = ids.fetch_add(1, Ordering::SeqCst) + 1;
                s.lock().unwrap().sessions += 1;
                let s = s.clone();
                std::thread::spawn(move || relay(engine, options, client, upstream, session, start, s));
            }
        });
        Tee {
            addr,
            seen,
            stop,
            accept: Some(accept),
        }
    }

    /// Waits until every connection accepted has closed, then stops; the events.
    fn finish(mut self) -> Seen {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (sessions, closed) = {
                let s = self.seen.lock().unwrap();
                (s.sessions, s.closed)
            };
            if sessions > 0 && closed == sessions {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{closed} of {sessions} connections closed"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        self.accept.take().unwrap().join().unwrap();
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

fn now(start: Instant) -> u64 {
    start.elapsed().as_nanos() as u64
}

/// One connection: both directions copied on their own threads, each chunk fed to the
/// decoder before it is passed on, so the decoder sees a request before its response.
fn relay(
    engine: Engine,
    options: DecodeOptions,
    mut client: TcpStream,
    upstream: SocketAddr,
    session: u64,
    start: Instant,
    seen: Arc<Mutex<Seen>>,
) {
    let open_ns = now(start);
    let server = TcpStream::connect(upstream).unwrap();
    let meta = SessionMeta {
        session,
        open_ns,
        transport: Transport::Tcp,
        connect_ns: Some(now(start) - open_ns),
        tls_terminated: false,
    };
    let decoder = Arc::new(Mutex::new(Decoder::new(engine, meta, options)));
    let feed = |dir: Direction, bytes: &[u8]| {
        let mut out = Vec::new();
        decoder.lock().unwrap().feed(dir, now(start), bytes, &mut out);
        let mut s = seen.lock().unwrap();
        s.events.extend(out);
        s.raw.push((session, dir, bytes.to_vec()));
    };
    if engine == Engine::Postgres {
        let mut head = [0u8; 8];
        let peeked = (0..100).find_map(|_| match client.peek(&mut head) {
            Ok(8) | Ok(0) => Some(()),
            _ => {
                std::thread::sleep(Duration::from_millis(5));
                None
            }
        });
        if peeked.is_some() && head == SSL_REQUEST {
            client.read_exact(&mut head).unwrap();
            feed(Direction::ToServer, &head);
            feed(Direction::ToClient, b"N");
            client.write_all(b"N").unwrap();
        }
    }
    let first_eof: Mutex<Option<ClosedBy>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for (dir, mut from, mut to) in [
            (
                Direction::ToServer,
                client.try_clone().unwrap(),
                server.try_clone().unwrap(),
            ),
            (
                Direction::ToClient,
                server.try_clone().unwrap(),
                client.try_clone().unwrap(),
            ),
        ] {
            let (feed, first_eof) = (&feed, &first_eof);
            scope.spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                let mut greeting = engine == Engine::Mysql && dir == Direction::ToClient;
                loop {
                    let n = from.read(&mut buf).unwrap_or(0);
                    if n == 0 {
                        first_eof.lock().unwrap().get_or_insert(match dir {
                            Direction::ToServer => ClosedBy::Client,
                            Direction::ToClient => ClosedBy::Server,
                        });
                        let _ = to.shutdown(Shutdown::Write);
                        return;
                    }
                    if std::mem::take(&mut greeting) {
                        connbench_trace::mysql::withdraw_tls_offer(&mut buf[..n]);
                    }
                    feed(dir, &buf[..n]);
                    if to.write_all(&buf[..n]).is_err() {
                        let _ = from.shutdown(Shutdown::Both);
                        return;
                    }
                }
            });
        }
    });
    let mut out = Vec::new();
    let by = first_eof.lock().unwrap().unwrap_or(ClosedBy::Client);
    decoder.lock().unwrap().close(now(start), by, &mut out);
    let mut s = seen.lock().unwrap();
    s.events.extend(out);
    s.closed += 1;
}

/// The events written as a gzip trace and read back, and the trace's text.
fn through_a_file(engine: Engine, events: &[Event], name: &str) -> (Vec<Event>, String) {
    let path = std::env::temp_dir().join(format!("cbt-trace-{name}-{}.jsonl.gz", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let mut w = TraceWriter::create(
        &path,
        &Header::new(engine, "connbench test".into(), RecordOptions::default()),
    )
    .unwrap();
    for e in events {
        w.write(e).unwrap();
    }
    w.finish_file().unwrap();
    let reader = TraceReader::open(&path).unwrap();
    let back: Vec<Event> = reader.map(|e| e.unwrap()).collect();
    let mut text = String::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(&path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    (back, text)
}

fn requests(events: &[Event]) -> Vec<&Request> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Request(r) => Some(&**r),
            _ => None,
        })
        .collect()
}

fn opens(events: &[Event]) -> Vec<&SessionOpen> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::SessionOpen(o) => Some(&**o),
            _ => None,
        })
        .collect()
}

/// What each request ran, by kind and normalised statement: `query: SELECT ...`,
/// `parse: ...`, `bind: ...` and `execute: ...` (the statement prepared under that name
/// or id in the same session).
fn statements(events: &[Event], dialect: Dialect) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    let mut add = |k: String| *m.entry(k).or_insert(0) += 1;
    let fp = |s: &Option<String>| fingerprint(s.as_deref().unwrap_or("?"), dialect).text;
    let mut named: HashMap<(u64, String), String> = HashMap::new();
    for r in requests(events) {
        let name = |n: &dyn std::fmt::Display| (r.session, n.to_string());
        match &r.op {
            Op::Query(s) | Op::ComQuery(s) => add(format!("query: {}", fp(&s.sql))),
            Op::ComStmtPrepare(s) => {
                add(format!("prepare: {}", fp(&s.sql)));
                if let Some(p) = &r.prepared {
                    named.insert(name(&p.statement_id), fp(&s.sql));
                }
            }
            Op::ComStmtExecute { statement_id, .. } => add(format!(
                "execute: {}",
                named.get(&name(statement_id)).cloned().unwrap_or_default()
            )),
            Op::Extended { steps } => {
                for s in steps {
                    match s {
                        Step::Parse { statement, sql, .. } => {
                            add(format!("parse: {}", fp(&sql.sql)));
                            named.insert(name(statement), fp(&sql.sql));
                        }
                        Step::Bind { statement, .. } => add(format!(
                            "bind: {}",
                            named.get(&name(statement)).cloned().unwrap_or_default()
                        )),
                        Step::Execute { .. } => add("execute".into()),
                        _ => {}
                    }
                }
            }
            other => add(format!("{other:?}")),
        }
    }
    m
}

/// pgbench's own count of transactions from its output.
fn transactions(pgbench_out: &str) -> usize {
    pgbench_out
        .lines()
        .find_map(|l| l.strip_prefix("number of transactions actually processed: "))
        .and_then(|v| v.split('/').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no transaction count in pgbench's output:\n{pgbench_out}"))
}

/// A database of this module's own with pgbench's tables at scale 1 (others' tests share
/// the sandbox: this one's writes stay in it).
fn pgbench_database() -> String {
    static DB: OnceLock<String> = OnceLock::new();
    DB.get_or_init(|| {
        let admin = conninfo("unix");
        let o = Command::new("psql")
            .args([admin.as_str(), "-Atc", "CREATE DATABASE cbtrace"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let db = crate::common::with_dbname(&admin, "cbtrace");
        let o = Command::new("pgbench")
            .args(["-i", "-q", "-s", "1", &db])
            .output()
            .unwrap();
        assert!(o.status.success(), "pgbench -i: {}", stderr(&o));
        crate::common::with_dbname(&conninfo("tcp"), "cbtrace")
    })
    .clone()
}

/// `conninfo` pointed at the tee.
fn via(conninfo: &str, tee: &Tee) -> String {
    conninfo
        .split_whitespace()
        .map(|kv| match kv.split_once('=') {
            Some(("port", _)) => format!("port={}", tee.addr.port()),
            _ => kv.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The SASL messages' payloads the client sent (client-first's nonce, client-final's
/// proof), read from the raw bytes of each connection: what must not be in the trace.
fn sasl_payloads(raw: &[(u64, Direction, Vec<u8>)]) -> Vec<String> {
    let mut found = Vec::new();
    let sessions: std::collections::BTreeSet<u64> = raw.iter().map(|(s, _, _)| *s).collect();
    for session in sessions {
        let up: Vec<u8> = raw
            .iter()
            .filter(|(s, d, _)| *s == session && *d == Direction::ToServer)
            .flat_map(|(_, _, b)| b.clone())
            .collect();
        // The StartupMessage (untyped), then typed messages; SASL's are 'p'.
        let len = |at: usize| u32::from_be_bytes(up[at..at + 4].try_into().unwrap()) as usize;
        let mut at = len(0);
        while at + 5 <= up.len() {
            let end = at + 1 + len(at + 1);
            let body = &up[at + 5..end.min(up.len())];
            if up[at] == b'p' {
                let text = String::from_utf8_lossy(body);
                for key in ["r=", "p="] {
                    for (i, _) in text.match_indices(key) {
                        let v: String = text[i + 2..]
                            .chars()
                            .take_while(|c| *c != ',' && *c != '\0')
                            .collect();
                        if v.len() >= 16 {
                            found.push(v);
                        }
                    }
                }
            }
            at = end;
        }
    }
    found
}

#[test]
fn pgbench_through_the_tee_is_traced_statement_for_statement() {
    let db = pgbench_database();
    let upstream: SocketAddr = format!("127.0.0.1:{}", sandbox().postgres_port).parse().unwrap();
    let passfile = std::fs::read_to_string(&sandbox().passfile).unwrap();
    let password = passfile.trim().rsplit(':').next().unwrap().to_string();
    let select = "SELECT abalance FROM pgbench_accounts WHERE aid = $1";
    for mode in ["simple", "extended", "prepared"] {
        let tee = Tee::start(Engine::Postgres, upstream);
        let o = Command::new("pgbench")
            .args(["-n", "-S", "-t", "50", "-c", "1", "-M", mode, &via(&db, &tee)])
            .output()
            .unwrap();
        assert!(o.status.success(), "pgbench -M {mode}: {}", stderr(&o));
        let n = transactions(&stdout(&o));
        let seen = tee.finish();
        let (events, text) = through_a_file(Engine::Postgres, &seen.events, mode);
        assert_eq!(events, seen.events, "the trace reads back as written");
        let counts = statements(&events, Dialect::Postgres);
        let count = |k: &str| counts.get(&format!("{k}: {select}")).copied();
        match mode {
            "simple" => assert_eq!(count("query"), Some(n), "{counts:?}"),
            "extended" => assert_eq!((count("parse"), count("bind")), (Some(n), Some(n)), "{counts:?}"),
            _ => assert_eq!(
                (count("parse"), count("bind")),
                (Some(1), Some(n)),
                "prepared once: {counts:?}"
            ),
        }
        let reads: Vec<&Request> = requests(&events)
            .into_iter()
            .filter(|r| r.rows == 1 && r.tags == ["SELECT 1"])
            .collect();
        assert!(reads.len() >= n, "{mode}: {} reads of one row", reads.len());
        for r in requests(&events) {
            assert_eq!(
                (r.outcome, r.tx),
                (Outcome::Ok, Some(TxStatus::Idle)),
                "{mode}: {r:?}"
            );
            assert!(r.response_ns.is_some() && r.think_ns.is_some(), "{r:?}");
        }
        for o in opens(&events) {
            assert!(o.ready && !o.tls_requested, "{o:?}");
            assert_eq!(o.auth_method.as_deref(), Some("SCRAM-SHA-256"));
            assert_eq!(
                (o.user.as_deref(), o.database.as_deref()),
                (Some("connbench"), Some("cbtrace"))
            );
            assert_eq!(o.phases.auth_round_trips, Some(2), "SCRAM's two exchanges");
            assert!(
                o.phases.startup_ns.is_some() && o.phases.auth_ns.is_some() && o.phases.ready_ns.is_some()
            );
        }
        assert!(text.contains("\"type\":\"session_close\""));
        assert!(!text.contains(&password), "the password is in the trace");
        let payloads = sasl_payloads(&seen.raw);
        assert!(
            payloads.len() >= 2,
            "SCRAM's nonce and proof crossed the wire: {payloads:?}"
        );
        for p in payloads {
            assert!(!text.contains(&p), "a SASL payload ({p}) is in the trace");
        }
    }
}

#[test]
fn a_pgbench_transaction_and_psql_asking_for_tls_are_traced() {
    let db = pgbench_database();
    let upstream: SocketAddr = format!("127.0.0.1:{}", sandbox().postgres_port).parse().unwrap();
    let tee = Tee::start(Engine::Postgres, upstream);
    let o = Command::new("pgbench")
        .args(["-n", "-t", "10", "-c", "1", "-M", "extended", &via(&db, &tee)])
        .output()
        .unwrap();
    assert!(o.status.success(), "pgbench: {}", stderr(&o));
    let n = transactions(&stdout(&o));
    // sslmode=prefer: the tee answers the SSLRequest `N`, as the recorder will.
    let prefer = via(&db, &tee).replace("sslmode=disable", "sslmode=prefer");
    let o = Command::new("psql")
        .args([prefer.as_str(), "-Atc", "SELECT 1", "-c", "SELECT 'two'"])
        .output()
        .unwrap();
    assert!(o.status.success(), "psql: {}", stderr(&o));
    let seen = tee.finish();
    let events = seen.events;
    let counts = statements(&events, Dialect::Postgres);
    for stmt in [
        "BEGIN",
        "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2",
        "SELECT abalance FROM pgbench_accounts WHERE aid = $1",
        "UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2",
        "UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2",
        "INSERT INTO pgbench_history(tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)",
        "END",
    ] {
        assert_eq!(
            counts.get(&format!("parse: {stmt}")),
            Some(&n),
            "{stmt}: {counts:?}"
        );
    }
    // Inside the transaction the status is T; after END, I.
    let rs = requests(&events);
    let in_tx = rs.iter().filter(|r| r.tx == Some(TxStatus::Transaction)).count();
    assert_eq!(in_tx, 6 * n, "BEGIN and the five statements after it");
    let updated: u64 = rs.iter().filter_map(|r| r.affected_rows).sum();
    assert_eq!(
        updated,
        4 * n as u64,
        "three updates and an insert of one row each"
    );
    let psql = opens(&events)
        .into_iter()
        .find(|o| o.tls_requested)
        .expect("psql's session");
    assert!(
        psql.ready && !psql.encrypted && psql.phases.tls_ns.is_some(),
        "{psql:?}"
    );
    assert_eq!(counts.get("query: SELECT $1"), Some(&2), "{counts:?}");
}

#[test]
fn redacted_values_leave_no_value_in_a_real_trace() {
    let db = pgbench_database();
    let upstream: SocketAddr = format!("127.0.0.1:{}", sandbox().postgres_port).parse().unwrap();
    let options = DecodeOptions {
        redact_values: true,
        ..DecodeOptions::default()
    };
    let tee = Tee::start_with(Engine::Postgres, upstream, options);
    let o = Command::new("pgbench")
        .args(["-n", "-t", "5", "-c", "1", "-M", "prepared", &via(&db, &tee)])
        .output()
        .unwrap();
    assert!(o.status.success(), "pgbench: {}", stderr(&o));
    let o = Command::new("psql")
        .args([
            via(&db, &tee).as_str(),
            "-Atc",
            "SELECT 'card 4111-1111' AS secret, 271828 AS number WHERE 'x' <> 'quiet word'",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "psql: {}", stderr(&o));
    let seen = tee.finish();
    let (events, text) = through_a_file(Engine::Postgres, &seen.events, "redacted");
    for value in ["4111-1111", "271828", "quiet word"] {
        assert!(!text.contains(value), "{value:?} is in a redacted trace");
    }
    assert!(
        text.contains("SELECT $1 AS secret, $2 AS number WHERE $3 <> $4"),
        "the statement's shape stays"
    );
    let mut bound = 0;
    for r in requests(&events) {
        if let Op::Extended { steps } = &r.op {
            for s in steps {
                if let Step::Bind { params: Some(ps), .. } = s {
                    for p in ps {
                        assert!(p.text.is_none() && p.hex.is_none() && p.len > 0, "{p:?}");
                        bound += 1;
                    }
                }
            }
        }
    }
    assert_eq!(
        bound,
        5 * 11,
        "tpcb-like binds 2 + 1 + 2 + 2 + 4 values a transaction"
    );
}

/// A sandbox with MariaDB of this module's own: its statement counters count only what
/// these tests send.
static MARIA: OwnMariadb = OwnMariadb::new();

/// The server's statement counters, read over its socket.
fn com_counters() -> BTreeMap<String, i64> {
    let m = MARIA.info().mariadb.as_ref().unwrap();
    let o = Command::new("mariadb")
        .arg(format!("--defaults-extra-file={}", m.defaults_file.display()))
        .arg(format!("--socket={}", m.socket.display()))
        .args(["--skip-ssl", "-N", "-B", "connbench", "-e"])
        .arg("SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_stmt_prepare', 'Com_stmt_execute', 'Com_stmt_close', 'Com_begin', 'Com_commit')")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, v)| (k.to_string(), v.trim().parse().unwrap()))
        .collect()
}

#[test]
fn sysbench_and_the_mariadb_client_through_the_tee_are_traced_as_the_server_counts() {
    let m = MARIA.info().mariadb.as_ref().unwrap();
    let password = MARIA.password();
    let common = [
        "--db-driver=mysql".to_string(),
        "--mysql-user=connbench".into(),
        format!("--mysql-password={password}"),
        "--mysql-db=connbench".into(),
        "--tables=1".into(),
        "--table-size=100".into(),
    ];
    let socket = format!("--mysql-socket={}", m.socket.display());
    for step in ["cleanup", "prepare"] {
        let o = Command::new("sysbench")
            .arg("oltp_read_write")
            .args(&common)
            .arg(&socket)
            .arg(step)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "sysbench {step}: {}{}",
            stdout(&o),
            stderr(&o)
        );
    }
    let upstream: SocketAddr = format!("127.0.0.1:{}", m.port).parse().unwrap();
    let tee = Tee::start(Engine::Mysql, upstream);
    let before = com_counters();
    let o = Command::new("sysbench")
        .arg("oltp_read_write")
        .args(&common)
        .args([
            "--mysql-host=127.0.0.1".to_string(),
            format!("--mysql-port={}", tee.addr.port()),
        ])
        .args(["--events=20", "--time=0", "--threads=1", "run"])
        .output()
        .unwrap();
    assert!(o.status.success(), "sysbench run: {}{}", stdout(&o), stderr(&o));
    let after = com_counters();
    let text_client = Command::new("mariadb")
        .args([
            "--skip-ssl",
            "-h",
            "127.0.0.1",
            "-P",
            &tee.addr.port().to_string(),
            "-u",
            "connbench",
        ])
        .arg(format!("-p{password}"))
        .args([
            "connbench",
            "-e",
            "SELECT 1; BEGIN; SELECT 2; COMMIT; SELECT 'three'",
        ])
        .output()
        .unwrap();
    assert!(text_client.status.success(), "mariadb: {}", stderr(&text_client));
    let seen = tee.finish();
    let (events, text) = through_a_file(Engine::Mysql, &seen.events, "mariadb");
    let rs = requests(&events);
    let count = |f: &dyn Fn(&Op) -> bool| rs.iter().filter(|r| f(&r.op)).count() as i64;
    let server = |k: &str| after[k] - before[k];
    let prepares = count(&|op| matches!(op, Op::ComStmtPrepare(_)));
    let executes = count(&|op| matches!(op, Op::ComStmtExecute { .. }));
    let closes = count(&|op| matches!(op, Op::ComStmtClose { .. }));
    assert!(executes > 0, "sysbench used prepared statements");
    assert_eq!(
        (prepares, executes, closes),
        (
            server("Com_stmt_prepare"),
            server("Com_stmt_execute"),
            server("Com_stmt_close")
        ),
        "the trace against the server's counters"
    );
    // Every execution's parameters were read with their values.
    for r in &rs {
        if let Op::ComStmtExecute { params, .. } = &r.op {
            let params = params.as_ref().expect("parameters read");
            assert!(
                params
                    .iter()
                    .all(|p| p.null || p.text.is_some() || p.hex.is_some()),
                "{r:?}"
            );
        }
        assert_ne!(r.outcome, Outcome::Unanswered, "{r:?}");
        assert!(r.error.is_none(), "{r:?}");
    }
    // sysbench's transactions, prepared too: BEGIN puts the session in one, COMMIT ends
    // it; per transaction ten point selects and one of each other statement.
    let counts = statements(&events, Dialect::Mysql);
    for (stmt, per_tx) in [
        ("BEGIN", 1),
        ("SELECT c FROM sbtest1 WHERE id = ?", 10),
        ("SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?", 1),
        ("UPDATE sbtest1 SET k = k + ? WHERE id = ?", 1),
        ("DELETE FROM sbtest1 WHERE id = ?", 1),
        ("INSERT INTO sbtest1(id, k, c, pad) VALUES (?, ?, ?, ?)", 1),
        ("COMMIT", 1),
    ] {
        assert_eq!(
            counts.get(&format!("execute: {stmt}")),
            Some(&(20 * per_tx)),
            "{stmt}: {counts:?}"
        );
    }
    let mut names = HashMap::new();
    for r in &rs {
        match (&r.op, &r.prepared) {
            (Op::ComStmtPrepare(s), Some(p)) => {
                names.insert((r.session, p.statement_id), s.sql.clone().unwrap_or_default());
            }
            (Op::ComStmtExecute { statement_id, .. }, _) => match names[&(r.session, *statement_id)].as_str()
            {
                "BEGIN" => assert_eq!(r.tx, Some(TxStatus::Transaction), "{r:?}"),
                "COMMIT" => assert_eq!(r.tx, Some(TxStatus::Idle), "{r:?}"),
                _ => {}
            },
            (Op::ComQuery(s), _) if s.sql.as_deref() == Some("BEGIN") => {
                assert_eq!(r.tx, Some(TxStatus::Transaction))
            }
            (Op::ComQuery(s), _) if s.sql.as_deref() == Some("COMMIT") => {
                assert_eq!(r.tx, Some(TxStatus::Idle))
            }
            _ => {}
        }
    }
    assert_eq!(
        counts.get("query: SELECT ?"),
        Some(&3),
        "the client's three selects: {counts:?}"
    );
    for o in opens(&events) {
        assert!(o.ready && !o.tls_requested, "{o:?}");
        assert_eq!(o.user.as_deref(), Some("connbench"));
        assert!(o.auth_method.is_some() && o.phases.auth_ns.is_some(), "{o:?}");
    }
    assert!(!text.contains(&password), "the password is in the trace");
    // The handshake responses' auth data (the scrambled password) is not in it either.
    for (_, dir, bytes) in &seen.raw {
        if *dir == Direction::ToServer && bytes.len() > 36 && bytes[3] == 1 {
            let body = &bytes[4..];
            let user_end = 32 + body[32..].iter().position(|&b| b == 0).unwrap();
            let n = body[user_end + 1] as usize;
            let auth = &body[user_end + 2..user_end + 2 + n];
            let hex: String = auth.iter().map(|b| format!("{b:02x}")).collect();
            assert!(n >= 20 && !text.contains(&hex), "auth data in the trace");
        }
    }
}

/// `connbench record --listen 127.0.0.1:0` in front of the sandbox's PostgreSQL (over
/// TCP) with `extra` flags, writing `out`: the child, and the sandbox's `tcp` conninfo
/// turned to reach the sandbox through it (database cbtrace, sslmode=prefer).
fn start_record(out: &std::path::Path, extra: &[&str]) -> (std::process::Child, String) {
    let upstream = format!("127.0.0.1:{}", sandbox().postgres_port);
    let (child, port) = start_recorder(&upstream, extra, out);
    (child, through_port(&port, "cbtrace", "prefer"))
}

/// pgbench's tpcb-like script through `connbench record`, then `connbench trace --json`:
/// its transactions are one shape (BEGIN, the three UPDATEs and the SELECT, the INSERT,
/// END: their literals apart, each client's values its own) counted as pgbench counted
/// them, seven round trips each, and predicted at +50 ms from the shape's own figures.
#[test]
fn connbench_trace_lists_pgbench_transaction_as_one_shape() {
    pgbench_database();
    let dir = crate::common::scratch("trace-shapes");
    let out = dir.join("shapes.trace.gz");
    let (child, through) = start_record(&out, &[]);
    let o = Command::new("pgbench")
        .args(["-n", "-c", "2", "-t", "40", &through])
        .output()
        .unwrap();
    crate::common::stop_recorder(child);
    assert!(o.status.success(), "pgbench through the recorder: {}", stderr(&o));
    let n = transactions(&stdout(&o)) as u64;
    let o = crate::common::connbench(&["trace", out.to_str().unwrap(), "--json", "--rtt", "50ms"]);
    assert!(o.status.success(), "connbench trace: {}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let shapes = v["profile"]["shapes"].as_array().expect("profile.shapes");
    let tpcb = shapes
        .iter()
        .find(|s| s["statements"][0] == "BEGIN")
        .unwrap_or_else(|| panic!("no shape starting with BEGIN: {shapes:#?}"));
    let texts: Vec<&str> = tpcb["statements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "BEGIN",
            "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2",
            "SELECT abalance FROM pgbench_accounts WHERE aid = $1",
            "UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2",
            "UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2",
            "INSERT INTO pgbench_history(tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)",
            "END",
        ]
    );
    assert_eq!(tpcb["count"], n, "{tpcb:#}");
    assert_eq!(tpcb["round_trips"], 7.0, "{tpcb:#}");
    assert_eq!(tpcb["truncated"], false);
    assert_eq!(
        shapes[0]["id"], tpcb["id"],
        "the transactions take most of the time"
    );
    let predicted = v["shape_predictions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["shape"] == tpcb["id"])
        .expect("the shape's predictions");
    let at50 = predicted["predictions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["scenario"] == "+50 ms")
        .expect("+50 ms");
    let mean = tpcb["time_ms"]["mean"].as_f64().unwrap();
    let t = at50["transaction_ms"].as_f64().unwrap();
    assert!((t - (mean + 50.0 * 7.0)).abs() < 1e-6, "{at50:#}");
    let text = crate::common::connbench(&["trace", out.to_str().unwrap(), "--top", "3"]);
    assert!(
        stdout(&text).contains("transaction shapes by share of time"),
        "{}",
        stdout(&text)
    );
}

/// `connbench record --upstream-tls`, as an application whose database requires TLS is
/// recorded: psql speaks plaintext to the recorder (its SSLRequest answered `N`), the
/// recorder speaks TLS to the server, and SCRAM (whose -PLUS offer the recorder withdraws)
/// goes through. The server sees its session encrypted; the trace says so in its header
/// and holds the query. A client that requires TLS of the recorder is told how to record.
#[test]
fn connbench_record_upstream_tls_carries_plaintext_inside_tls() {
    pgbench_database();
    let dir = crate::common::scratch("record-tls");
    let out = dir.join("tls.trace");
    let (child, through) = start_record(&out, &["--upstream-tls"]);
    let o = Command::new("psql")
        .args([
            &through,
            "-XAtc",
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "psql through the recorder: {}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "t", "the server's side of the session is TLS");
    // An application that requires TLS of the recorder itself: refused by its own libpq
    // after the `N`, and the recorder says how to record it.
    let require = through.replace("sslmode=prefer", "sslmode=require");
    let o = Command::new("psql")
        .args([&require, "-XAtc", "SELECT 1"])
        .output()
        .unwrap();
    assert!(
        !o.status.success(),
        "psql with sslmode=require went on in plaintext"
    );
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let done = child.wait_with_output().unwrap();
    assert_eq!(done.status.code(), Some(130), "{}", stderr(&done));
    let said = stdout(&done);
    assert!(said.contains("record: 2 session(s)"), "{said}");
    assert!(
        said.contains("1 session(s) required TLS and closed after the recorder's N")
            && said.contains("--listen-tls"),
        "{said}"
    );
    let mut reader = TraceReader::open(&out).unwrap();
    assert!(reader.header().options.upstream_tls, "{:?}", reader.header());
    let events: Vec<Event> = reader.by_ref().map(Result::unwrap).collect();
    assert!(
        requests(&events)
            .iter()
            .any(|r| format!("{:?}", r.op).contains("pg_stat_ssl")),
        "{events:?}"
    );
    assert_eq!(
        opens(&events)[0].auth_method.as_deref(),
        Some("SCRAM-SHA-256"),
        "{events:?}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// `connbench record` as a user runs it, in front of the sandbox's PostgreSQL: pgbench's
/// TPC-B-like transaction, prepared, from two clients through it (pgbench asks for TLS,
/// sslmode=prefer, and goes on in plaintext); Ctrl-C. The trace holds each of pgbench's
/// statements once per transaction it processed and no password; `connbench trace`
/// reads the application's shape: its transactions, their round trips (one per
/// statement, prepared), two connections, and predictions by the round-trip model.
#[test]
fn connbench_record_traces_pgbench_and_trace_reads_its_shape() {
    // pgbench's tables in this module's own database, cbtrace.
    pgbench_database();
    let dir = crate::common::scratch("record");
    let out = dir.join("app.trace.gz");
    let (child, through) = start_record(&out, &[]);
    let o = Command::new("pgbench")
        .args(["-n", "-c", "2", "-t", "40", "-M", "prepared", &through])
        .output()
        .unwrap();
    assert!(o.status.success(), "pgbench through the recorder: {}", stderr(&o));
    let n = transactions(&stdout(&o));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let done = child.wait_with_output().unwrap();
    assert_eq!(done.status.code(), Some(130), "{}", stderr(&done));
    let said = stdout(&done);
    // pgbench's own first connection (it reads the tables' scale), then a client's each.
    assert!(said.contains("record: 3 session(s)"), "{said}");
    assert!(
        said.contains("3 session(s) asked for TLS and went on in plaintext"),
        "{said}"
    );

    // The trace: each statement once per transaction, no password.
    let text = {
        let mut s = String::new();
        flate2::read::MultiGzDecoder::new(std::fs::File::open(&out).unwrap())
            .read_to_string(&mut s)
            .unwrap();
        s
    };
    let passfile = std::fs::read_to_string(&sandbox().passfile).unwrap();
    let password = passfile.trim().rsplit(':').next().unwrap();
    assert!(!text.contains(password), "the password is in the trace");
    let events: Vec<Event> = TraceReader::open(&out).unwrap().map(Result::unwrap).collect();
    let counts = statements(&events, Dialect::Postgres);
    let branches = "UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2";
    assert_eq!(
        counts.get(&format!("bind: {branches}")).copied(),
        Some(n),
        "{counts:?}"
    );
    assert_eq!(
        counts.get(&format!("parse: {branches}")).copied(),
        Some(2),
        "once a client: {counts:?}"
    );

    // pgbench's first connection runs simple queries, each a transaction of its own.
    let mut per_session: BTreeMap<u64, usize> = BTreeMap::new();
    for r in requests(&events) {
        *per_session.entry(r.session).or_default() += 1;
    }
    let k = *per_session.values().min().unwrap();
    assert!(k < 10, "pgbench's check: {per_session:?}");

    // What `trace` reads of it.
    let o = crate::common::connbench(&["trace", out.to_str().unwrap(), "--json", "--rtt", "50ms"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let p = &v["profile"];
    assert_eq!(p["connections"]["sessions"], 3, "{p}");
    assert_eq!(p["requests"]["transactions"], (n + k) as u64, "{p}");
    let rts = p["requests"]["round_trips_per_transaction"].as_f64().unwrap();
    // BEGIN, five statements and END, a round trip each; in each client's first
    // transaction the Parse of all seven, a round trip each (pgbench prepares a
    // statement when it first runs it; BEGIN's Parse, sent while idle, opens the
    // transaction it prepares for); and the check's queries, one each.
    let expected = (7 * n + 2 * 7 + k) as f64 / (n + k) as f64;
    assert!(
        (rts - expected).abs() < 1e-9,
        "{rts} round trips a transaction, not {expected}"
    );
    assert_eq!(p["connections"]["auth_methods"][0][0], "SCRAM-SHA-256", "{p}");
    assert_eq!(p["statements"][0]["calls"], n as u64, "{p}");
    // The same report as a page: the top statement and the prediction rows, escaped.
    let page = dir.join("app.html");
    let o = crate::common::connbench(&["trace", out.to_str().unwrap(), "--html", page.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    let top = p["statements"][0]["text"].as_str().unwrap();
    assert!(
        html.contains(&top.replace('<', "&lt;").replace('>', "&gt;")),
        "{top} not in {html}"
    );
    assert!(
        html.contains("<td>+50 ms</td>") || html.contains("<td>+1 ms</td>"),
        "{html}"
    );
    // The pictures: the connections and requests in time (a lane per session: three),
    // a waterfall of the tpcb-like shape's seven statements (its fourth statement's
    // colour is the waterfall's alone: the lines chart has three shapes, three
    // colours), the predicted time against the added round trip, and each shape's
    // times by percentile.
    assert_eq!(html.matches("<svg").count(), 4, "{html}");
    assert_eq!(html.matches("\"tick\">session ").count(), 3, "a lane per session");
    assert!(html.contains("by percentile, as recorded"), "{html}");
    crate::report::chromium_shows(
        &page,
        &dir,
        [0xd5, 0x5e, 0x00],
        "the waterfall's fourth statement",
    );
    // The timeline's connection bars, whose colour nothing else on the page has.
    crate::report::chromium_shows(&page, &dir, [0x8d, 0xa0, 0xcb], "the timeline's connections");
    let again = crate::common::connbench(&["trace", out.to_str().unwrap(), "--html", page.to_str().unwrap()]);
    assert_eq!(
        again.status.code(),
        Some(2),
        "an existing page is never overwritten"
    );
    // The model's arithmetic on the figures it printed: +50 ms per round trip.
    let pr = &v["predictions"];
    let (local, far) = (
        pr[0]["transaction_ms"].as_f64().unwrap(),
        pr[1]["transaction_ms"].as_f64().unwrap(),
    );
    assert_eq!(pr[1]["scenario"], "+50 ms", "{pr}");
    assert!((far - (local + 50.0 * rts)).abs() < 1e-6, "{pr}");
    std::fs::remove_dir_all(dir).unwrap();
}

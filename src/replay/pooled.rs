//! `replay --pool N`: the recorded application's sessions through a client-side pool, as
//! a transaction-pooling application pool would serve them. The recorded opens and closes
//! are not replayed as connects; each transaction (and each request outside one) borrows
//! a connection when its first request is due and gives it back at the answer that leaves
//! the connection idle (PostgreSQL's ReadyForQuery `I`, MySQL's server status).
//!
//! The pool is load's (`crate::load::pool`, one per worker thread, no locks): the same
//! size, lifetime and idle rules `load --connection pool` measures. What it lacks for a
//! replay lives here, beside it: what each pooled connection has prepared. A named
//! statement a session prepared must exist on whichever connection it borrows, so each
//! connection keeps its prepared statements by SQL text (and declared parameter types;
//! MySQL: the COM_STMT_PREPARE payload) under names of its own
//! ([`Namer`]: they never collide with a recorded name); a recorded Parse of a statement
//! the connection already holds is left out, a Bind or Describe of one it lacks gets a
//! Parse first, and a recorded Close of a statement is left out (other sessions' borrows
//! share it). MySQL alike: COM_STMT_PREPARE once per connection and SQL, its id mapped
//! for COM_STMT_EXECUTE/RESET, COM_STMT_CLOSE not sent.
//!
//! Session state a pool does not carry from one borrow to the next (a session-level SET,
//! temporary tables, LISTEN, advisory or named locks, SQL-level PREPARE, COM_INIT_DB) is
//! counted by kind before the replay ([`session_state`]); the report warns once per kind.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::cancel::Slot;
use super::conn::{self, Answer};
use super::mysql::Command;
use super::schedule::{SessionPlan, Wire};
use super::txlog::Period;
use crate::load::pool::{Pool, Pooled};
use crate::proto::mysql::codec::{COM_INIT_DB, COM_QUERY, COM_STMT_CLOSE, COM_STMT_PREPARE};
use crate::proto::postgres::Frontend;
use crate::proto::{self, ConnectError, Endpoint, PhaseCursor};
use connbench_trace::event::TxStatus;

/// `--pool N` and its retirement rules, load's (`--pool-max-lifetime`,
/// `--pool-idle-timeout`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PoolSettings {
    /// Connections in all, over every thread.
    pub size: usize,
    pub max_lifetime: Option<Duration>,
    pub idle_timeout: Option<Duration>,
}

impl PoolSettings {
    /// Each thread's share of `size` over at most `threads` threads: `size` split as
    /// evenly as it goes (3 over 2: 2 and 1), never more threads than connections, so the
    /// replay opens at most `size` at once (load rounds each thread's share up instead).
    pub fn split(&self, threads: usize) -> Vec<usize> {
        let threads = threads.clamp(1, self.size.max(1));
        (0..threads)
            .map(|i| self.size / threads + usize::from(i < self.size % threads))
            .collect()
    }
}

/// Names for the statements pooled connections prepare: a prefix no recorded statement
/// name starts with, then a number.
#[derive(Debug, Clone)]
pub struct Namer {
    prefix: String,
}

impl Namer {
    /// A prefix that none of `sessions`' statement names starts with.
    pub fn for_sessions(sessions: &[SessionPlan]) -> Namer {
        let mut prefix = "connbench_pool_".to_string();
        let names: Vec<&str> = sessions
            .iter()
            .flat_map(|s| &s.requests)
            .filter_map(|r| match &r.wire {
                Wire::Postgres(m) => Some(m),
                Wire::Mysql(_) => None,
            })
            .flatten()
            .filter_map(|m| match m {
                Frontend::Parse { name, .. } | Frontend::Bind { statement: name, .. } => Some(name.as_str()),
                Frontend::Describe { name, .. } | Frontend::Close { name, .. } => Some(name.as_str()),
                _ => None,
            })
            .collect();
        while names.iter().any(|n| n.starts_with(&prefix)) {
            prefix.push('_');
        }
        Namer { prefix }
    }

    fn name(&self, n: u64) -> String {
        format!("{}{n}", self.prefix)
    }
}

/// What one pooled connection has prepared.
#[derive(Debug, Default)]
struct Prepared {
    /// PostgreSQL: (SQL, declared parameter types) -> this connection's name.
    postgres: HashMap<(String, Vec<u32>), String>,
    /// MySQL: COM_STMT_PREPARE's payload -> this connection's statement id.
    mysql: HashMap<Vec<u8>, u32>,
}

/// The pool's own counts on one thread, added to its tally when its sessions end.
#[derive(Debug, Default, Clone)]
pub struct PoolCounts {
    pub connects: u64,
    pub connect_ns: u64,
    /// Statements prepared on a connection because a borrow used one that the session had
    /// prepared on another.
    pub prepared_again: u64,
    /// Connections a session left inside a transaction (it closed, or the trace ended):
    /// rolled back before going back to the pool.
    pub rolled_back: u64,
}

/// One worker thread's pool and what its connections hold.
pub struct ThreadPool {
    pool: Pool,
    ep: Endpoint,
    namer: Namer,
    next_name: RefCell<u64>,
    prepared: RefCell<HashMap<u64, Prepared>>,
    pub counts: RefCell<PoolCounts>,
    /// `--metrics-listen`'s period of this thread: the pool's connects go there.
    live: Option<Period>,
}

impl ThreadPool {
    pub fn new(
        size: usize,
        s: &PoolSettings,
        ep: Endpoint,
        namer: Namer,
        live: Option<Period>,
    ) -> ThreadPool {
        ThreadPool {
            pool: Pool::new(size, s.max_lifetime, s.idle_timeout),
            ep,
            namer,
            next_name: RefCell::new(0),
            prepared: RefCell::new(HashMap::new()),
            counts: RefCell::new(PoolCounts::default()),
            live,
        }
    }

    /// A connection of the endpoint, its time counted as one of the pool's connects.
    async fn open(&self) -> Result<(proto::Session, proto::Timeline), ConnectError> {
        let began = Instant::now();
        let out = proto::connect(&self.ep, &PhaseCursor::default()).await;
        if out.is_ok() {
            let ns = began.elapsed().as_nanos() as u64;
            let mut c = self.counts.borrow_mut();
            c.connects += 1;
            c.connect_ns += ns;
            if let Some(l) = &self.live {
                let mut l = l.lock().unwrap_or_else(|p| p.into_inner());
                l.connects += 1;
                l.connect_ns += ns;
            }
        }
        out
    }

    /// Opens the pool's connections before the clock starts, as an application's pool
    /// does when it starts (load's pool does the same), one after another (a thread's
    /// share: few); one that fails is left for the first borrow to open (and count).
    pub async fn fill(&self) {
        for _ in 0..self.pool.size {
            if let Ok((s, _)) = self.open().await {
                self.pool.add(s);
            }
        }
    }

    /// Every idle connection, closed at the end.
    pub async fn close(&self) {
        for s in self.pool.drain() {
            s.close().await;
        }
    }

    fn fresh_name(&self) -> String {
        let mut n = self.next_name.borrow_mut();
        *n += 1;
        self.namer.name(*n)
    }
}

/// The statements one recorded session prepared, by its own names (ids).
#[derive(Debug, Default)]
struct SessionNames {
    postgres: HashMap<String, (String, Vec<u32>)>,
    mysql: HashMap<u32, Vec<u8>>,
}

/// One session's side of the pool: the connection it holds, if any.
pub struct Borrower {
    pool: Rc<ThreadPool>,
    held: Option<Pooled>,
    names: SessionNames,
    /// A recorded cancel targets this session: the held connection's key goes here.
    slot: Option<Slot>,
    /// Per group sent and not yet answered (pipelined), the statements it prepared.
    in_flight: VecDeque<Vec<(String, Vec<u32>)>>,
}

impl Borrower {
    pub fn new(pool: Rc<ThreadPool>, slot: Option<Slot>) -> Borrower {
        Borrower {
            pool,
            held: None,
            names: SessionNames::default(),
            slot,
            in_flight: VecDeque::new(),
        }
    }

    /// Takes a connection unless one is held; returns how long the pool kept it waiting
    /// (a free connection, or a new one's connect).
    pub async fn borrow(&mut self) -> Result<Duration, ConnectError> {
        if self.held.is_some() {
            return Ok(Duration::ZERO);
        }
        let began = Instant::now();
        let pool = self.pool.clone();
        let (c, made) = pool.pool.acquire(|| pool.open()).await?;
        if made.is_some() {
            pool.prepared.borrow_mut().insert(c.id, Prepared::default());
        }
        if let Some(slot) = &self.slot {
            slot.hold(&c.session);
        }
        self.held = Some(c);
        Ok(began.elapsed())
    }

    /// Sends `wire` on the held connection (borrowed first), its prepared statements
    /// named as that connection has them.
    pub async fn exchange(&mut self, wire: &Wire) -> Result<Answer, ConnectError> {
        let Some(c) = self.held.as_mut() else {
            return Err(unheld());
        };
        let pool = &self.pool;
        // Taken out while the request runs (no borrow held across it), put back after.
        let mut taken = pool.prepared.borrow_mut().remove(&c.id).unwrap_or_default();
        let out = match wire {
            Wire::Postgres(msgs) => {
                let mut added = Vec::new();
                let msgs = rename(msgs, &mut self.names, &mut taken, pool, &mut added);
                let out = conn::exchange(&mut c.session, &mut HashMap::new(), &Wire::Postgres(msgs)).await;
                // A Parse that failed (a syntax error, an aborted transaction) left
                // nothing behind: prepare it again at its next use.
                if !matches!(&out, Ok(a) if a.error.is_none()) {
                    for k in added {
                        taken.postgres.remove(&k);
                    }
                }
                out
            }
            Wire::Mysql(cmd) => mysql(c, cmd, &mut self.names, &mut taken, pool).await,
        };
        pool.prepared.borrow_mut().insert(c.id, taken);
        out
    }

    /// Sends a PostgreSQL group on the held connection whose answer is read later
    /// ([`Borrower::receive`]), after the groups the application pipelined behind it;
    /// returns when its last byte was written.
    pub async fn send(&mut self, msgs: &[Frontend]) -> Result<Instant, ConnectError> {
        let Some(c) = self.held.as_mut() else {
            return Err(unheld());
        };
        let pool = &self.pool;
        let mut taken = pool.prepared.borrow_mut().remove(&c.id).unwrap_or_default();
        let mut added = Vec::new();
        let msgs = rename(msgs, &mut self.names, &mut taken, pool, &mut added);
        pool.prepared.borrow_mut().insert(c.id, taken);
        self.in_flight.push_back(added);
        conn::send(&mut c.session, &msgs).await
    }

    /// The answer of the oldest group [`Borrower::send`] sent, `written` then.
    pub async fn receive(&mut self, written: Instant) -> Result<Answer, ConnectError> {
        let Some(c) = self.held.as_mut() else {
            return Err(unheld());
        };
        let added = self.in_flight.pop_front().unwrap_or_default();
        let out = conn::receive(&mut c.session, written).await;
        // As in `exchange`: what a failed group prepared is prepared again at its next use.
        if !matches!(&out, Ok(a) if a.error.is_none()) {
            if let Some(p) = self.pool.prepared.borrow_mut().get_mut(&c.id) {
                for k in added {
                    p.postgres.remove(&k);
                }
            }
        }
        out
    }

    /// Gives the connection back when `status` leaves it idle.
    pub fn give_back(&mut self, status: TxStatus) {
        if status == TxStatus::Idle {
            if let Some(c) = self.held.take() {
                if let Some(slot) = &self.slot {
                    slot.release();
                }
                self.pool.pool.release(c);
            }
        }
    }

    /// The session's end: a connection still held inside a transaction (the session
    /// closed in one, or the trace ended) is rolled back first, as an application's pool
    /// resets what it is given back; one that broke is retired by the pool.
    pub async fn finish(mut self, status: TxStatus) {
        if let Some(slot) = &self.slot {
            slot.release();
        }
        let Some(mut c) = self.held.take() else { return };
        if status != TxStatus::Idle && !c.session.is_broken() {
            let wire = match &c.session {
                proto::Session::Postgres(_) => Wire::Postgres(vec![Frontend::Query("ROLLBACK".into())]),
                proto::Session::Mysql(_) => Wire::Mysql(Command {
                    code: COM_QUERY,
                    payload: b"ROLLBACK".to_vec(),
                    statement_id: None,
                    prepares: None,
                    answered: true,
                }),
            };
            let _ = conn::exchange(&mut c.session, &mut HashMap::new(), &wire).await;
            self.pool.counts.borrow_mut().rolled_back += 1;
        }
        self.pool.pool.release(c);
    }
}

fn unheld() -> ConnectError {
    ConnectError::new(
        proto::Phase::Query,
        proto::ErrorKind::Config("a pooled request without a connection".into()),
    )
}

/// `msgs` with the session's statement names turned into the connection's: a Parse the
/// connection already holds left out, a Bind or Describe of one it lacks preceded by its
/// Parse, a statement's Close left out. `added` gets the keys prepared by this group.
fn rename(
    msgs: &[Frontend],
    names: &mut SessionNames,
    conn: &mut Prepared,
    pool: &ThreadPool,
    added: &mut Vec<(String, Vec<u32>)>,
) -> Vec<Frontend> {
    let mut out = Vec::with_capacity(msgs.len() + 1);
    let mut own = |name: &str, out: &mut Vec<Frontend>, names: &SessionNames, again: bool| {
        own_name(name, out, names, conn, pool, added, again)
    };
    for m in msgs {
        match m {
            Frontend::Parse {
                name,
                sql,
                param_types,
            } if !name.is_empty() => {
                names
                    .postgres
                    .insert(name.clone(), (sql.clone(), param_types.clone()));
                own(name, &mut out, names, false);
            }
            Frontend::Bind {
                portal,
                statement,
                params,
                result_formats,
            } if !statement.is_empty() => {
                let statement = own(statement, &mut out, names, true).unwrap_or_else(|| statement.clone());
                out.push(Frontend::Bind {
                    portal: portal.clone(),
                    statement,
                    params: params.clone(),
                    result_formats: result_formats.clone(),
                });
            }
            Frontend::Describe { what: b'S', name } if !name.is_empty() => {
                let name = own(name, &mut out, names, true).unwrap_or_else(|| name.clone());
                out.push(Frontend::Describe { what: b'S', name });
            }
            Frontend::Close { what: b'S', name } if !name.is_empty() => {}
            m => out.push(m.clone()),
        }
    }
    out
}

/// The connection's name for the session's statement `name`, its Parse pushed first when
/// the connection lacks it (`again`: counted as prepared again); `None` when the session
/// never prepared it (sent as recorded: the server says).
fn own_name(
    name: &str,
    out: &mut Vec<Frontend>,
    names: &SessionNames,
    conn: &mut Prepared,
    pool: &ThreadPool,
    added: &mut Vec<(String, Vec<u32>)>,
    again: bool,
) -> Option<String> {
    let (sql, types) = names.postgres.get(name)?;
    let key = (sql.clone(), types.clone());
    if let Some(n) = conn.postgres.get(&key) {
        return Some(n.clone());
    }
    let n = pool.fresh_name();
    out.push(Frontend::Parse {
        name: n.clone(),
        sql: sql.clone(),
        param_types: types.clone(),
    });
    if again {
        pool.counts.borrow_mut().prepared_again += 1;
    }
    conn.postgres.insert(key.clone(), n.clone());
    added.push(key);
    Some(n)
}

/// A MySQL command on a pooled connection: a COM_STMT_PREPARE once per connection and
/// SQL, a statement id mapped to the connection's (prepared first when it lacks it),
/// COM_STMT_CLOSE not sent.
async fn mysql(
    c: &mut Pooled,
    cmd: &Command,
    names: &mut SessionNames,
    conn: &mut Prepared,
    pool: &ThreadPool,
) -> Result<Answer, ConnectError> {
    let unsent = |c: &Pooled| Answer {
        took: None,
        error: None,
        status: match &c.session {
            proto::Session::Mysql(s) if s.in_transaction() => TxStatus::Transaction,
            _ => TxStatus::Idle,
        },
        prepared: None,
        commands: 0,
    };
    if let (COM_STMT_PREPARE, Some(recorded)) = (cmd.code, cmd.prepares) {
        names.mysql.insert(recorded, cmd.payload.clone());
        if conn.mysql.contains_key(&cmd.payload) {
            return Ok(unsent(c));
        }
        let a = conn::exchange(&mut c.session, &mut HashMap::new(), &Wire::Mysql(cmd.clone())).await?;
        if let Some(id) = a.prepared {
            conn.mysql.insert(cmd.payload.clone(), id);
        }
        return Ok(a);
    }
    let Some(recorded) = cmd.statement_id else {
        return conn::exchange(&mut c.session, &mut HashMap::new(), &Wire::Mysql(cmd.clone())).await;
    };
    if cmd.code == COM_STMT_CLOSE {
        return Ok(unsent(c));
    }
    let Some(sql) = names.mysql.get(&recorded) else {
        return conn::exchange(&mut c.session, &mut HashMap::new(), &Wire::Mysql(cmd.clone())).await;
    };
    let id = match conn.mysql.get(sql) {
        Some(id) => *id,
        None => {
            let prepare = Command {
                code: COM_STMT_PREPARE,
                payload: sql.clone(),
                statement_id: None,
                prepares: None,
                answered: true,
            };
            let a = conn::exchange(&mut c.session, &mut HashMap::new(), &Wire::Mysql(prepare)).await?;
            let Some(id) = a.prepared else {
                // Its error is the execution's to meet: sent with the recorded id.
                return conn::exchange(&mut c.session, &mut HashMap::new(), &Wire::Mysql(cmd.clone())).await;
            };
            pool.counts.borrow_mut().prepared_again += 1;
            conn.mysql.insert(sql.clone(), id);
            id
        }
    };
    let mut ids = HashMap::from([(recorded, id)]);
    conn::exchange(&mut c.session, &mut ids, &Wire::Mysql(cmd.clone())).await
}

/// Requests that set session state a pool does not carry between borrows, by kind.
pub fn session_state(sessions: &[SessionPlan]) -> BTreeMap<&'static str, u64> {
    let mut kinds = BTreeMap::new();
    for r in sessions.iter().flat_map(|s| &s.requests) {
        let kind = match &r.wire {
            Wire::Postgres(msgs) => msgs.iter().find_map(|m| match m {
                Frontend::Query(sql) | Frontend::Parse { sql, .. } => state_kind(sql),
                _ => None,
            }),
            Wire::Mysql(c) if c.code == COM_INIT_DB => Some("default schema (COM_INIT_DB)"),
            Wire::Mysql(c) if c.code == COM_QUERY || c.code == COM_STMT_PREPARE => {
                state_kind(&String::from_utf8_lossy(&c.payload[..c.payload.len().min(4096)]))
            }
            Wire::Mysql(_) => None,
        };
        if let Some(k) = kind {
            *kinds.entry(k).or_default() += 1;
        }
    }
    kinds
}

/// The kind of session state `sql` sets, if any (its first words, and lock functions
/// anywhere in it).
fn state_kind(sql: &str) -> Option<&'static str> {
    let head: String = sql
        .trim_start()
        .chars()
        .take(4096)
        .collect::<String>()
        .to_ascii_lowercase();
    let words: Vec<&str> = head.split_whitespace().take(4).collect();
    let first = words.first().copied().unwrap_or("");
    let second = words.get(1).copied().unwrap_or("");
    match first {
        "set" if !matches!(second, "local" | "transaction" | "constraints") => {
            return Some("session setting (SET)")
        }
        "create" if words[1..].iter().any(|w| matches!(*w, "temp" | "temporary")) => {
            return Some("temporary table")
        }
        "listen" => return Some("LISTEN"),
        "prepare" => return Some("SQL-level PREPARE"),
        "use" => return Some("default schema (USE)"),
        "lock" if second == "tables" => return Some("LOCK TABLES"),
        _ => {}
    }
    if head.contains("pg_advisory_lock") || head.contains("pg_try_advisory_lock") {
        return Some("advisory lock");
    }
    if head.contains("get_lock(") {
        return Some("named lock (GET_LOCK)");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_is_split_over_threads_never_above_its_size() {
        let s = |size| PoolSettings {
            size,
            max_lifetime: None,
            idle_timeout: None,
        };
        assert_eq!(s(3).split(2), vec![2, 1]);
        assert_eq!(s(2).split(8), vec![1, 1]);
        assert_eq!(s(1).split(4), vec![1]);
        assert_eq!(s(5).split(1), vec![5]);
        for (size, threads) in [(7, 3), (2, 2), (10, 4)] {
            assert_eq!(s(size).split(threads).iter().sum::<usize>(), size);
        }
    }

    #[test]
    fn session_state_is_named_by_kind() {
        assert_eq!(state_kind("SET search_path = app"), Some("session setting (SET)"));
        assert_eq!(state_kind("set local work_mem = '1MB'"), None);
        assert_eq!(state_kind("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"), None);
        assert_eq!(state_kind("CREATE TEMP TABLE t (a int)"), Some("temporary table"));
        assert_eq!(
            state_kind("create global temporary table t (a int)"),
            Some("temporary table")
        );
        assert_eq!(state_kind("LISTEN jobs"), Some("LISTEN"));
        assert_eq!(state_kind("SELECT pg_advisory_lock(1)"), Some("advisory lock"));
        assert_eq!(state_kind("SELECT pg_advisory_xact_lock(1)"), None);
        assert_eq!(
            state_kind("SELECT GET_LOCK('a', 1)"),
            Some("named lock (GET_LOCK)")
        );
        assert_eq!(state_kind("SELECT 1"), None);
        assert_eq!(state_kind("UPDATE settings SET a = 1"), None);
    }

    fn plan(msgs: Vec<Frontend>) -> SessionPlan {
        SessionPlan {
            requests: vec![super::super::schedule::Planned {
                at_ns: 0,
                wire: Wire::Postgres(msgs),
                statement: None,
                runs: vec![None],
                kill: None,
                work: connbench_trace::transaction::Work::Runs,
                shape: None,
                think_ns: None,
                seen: Default::default(),
            }],
            ..SessionPlan::default()
        }
    }

    #[test]
    fn the_pools_names_never_start_like_a_recorded_one() {
        let p = plan(vec![Frontend::Parse {
            name: "connbench_pool_1".into(),
            sql: "SELECT 1".into(),
            param_types: vec![],
        }]);
        let n = Namer::for_sessions(&[p]);
        assert_eq!(n.name(1), "connbench_pool__1");
        assert_eq!(Namer::for_sessions(&[]).name(2), "connbench_pool_2");
    }
}

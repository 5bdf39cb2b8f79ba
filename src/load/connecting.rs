//! How a run's clients get connected, and what a connect that is turned away counts as.
//!
//! The ramp: the connections opened before the clock (a persistent client's, a pool's)
//! start on an even schedule, connection k at `k / --connect-rate` after the ramp's
//! start, counted across the worker threads (a token bucket would let a burst through
//! after a quiet stretch; an even schedule never does, and a lagging one just connects as
//! fast as it can). Without a rate they start at once, as before. pgbench connects every
//! client before its clock starts, each thread one client after another; so does the
//! ramp, its time, rate and failed attempts reported apart from the measurement.
//!
//! A refused connect ([`refused`]: the server's or PgBouncer's "too many connections",
//! a database starting or stopping, a Unix socket's full backlog, nothing listening) is
//! neither a transaction nor a failed one: each attempt is counted once, as a failed
//! connect attempt by kind, and the client backs off ([`Backoff`]) and tries again, so
//! clients over a server's limit neither spin nor flood it. Any other failure to connect
//! is the transaction's, as before. Also the process's own open-file limit, raised or
//! refused before the workers start ([`ensure_open_files`]).

use std::io::ErrorKind as Io;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use super::plan::{LoadPlan, Policy, RampProgress};
use super::shared::{note_first_error, WorkerShared};
use crate::connect::FailureCount;
use crate::proto::{self, ConnectError, ErrorKind, Phase, PhaseCursor, Session, Timeline};

/// The first back-off pause: the 20 ms pause a client used to take after any failed
/// connect, so a server that comes back quickly (a PgBouncer restart) is found as soon.
pub const BACKOFF_FIRST: Duration = Duration::from_millis(20);
/// The longest: the pause doubles up to a second, so a client refused for long tries
/// at most twice a second (each pause is drawn in [d/2, d]), and a server back from a
/// restart of a few seconds is found within a second of it.
pub const BACKOFF_CAP: Duration = Duration::from_secs(1);
/// How long past its last slot the ramp waits for clients still refused; those left
/// start the run without a connection and go on trying in it, counted there.
pub const RAMP_PATIENCE: Duration = Duration::from_secs(5);
/// With no end to the run (`-t`), how long a client's connects may be refused in a row
/// before the last refusal fails its transaction (so `-t` ends).
pub const REFUSED_PATIENCE: Duration = Duration::from_secs(60);
/// From this many clients, a run given no `--connect-rate` ramps at
/// [`DEFAULT_CONNECT_RATE`]: ten thousand connects at once overflow a listening socket's
/// backlog (EAGAIN on a Unix socket) and the server's accept loop.
pub const PACED_FROM: usize = 1000;
/// Connects a second when many clients are asked and no rate is given: 10,000 clients
/// connected in 5 s where the client keeps up. Each SCRAM login costs the client about
/// a millisecond of PBKDF2, so on two busy cores it falls behind (1,700/s achieved at
/// 10,000 clients through PgBouncer, docs/benchmarks.md) and connects as fast as it can,
/// which a lower default would only slow.
pub const DEFAULT_CONNECT_RATE: f64 = 2000.0;

/// Whether a failed connect was turned away rather than failed: the server or pooler
/// at its connection limit (PostgreSQL's 53300, PgBouncer's 08P01 "no more connections
/// allowed", MySQL's 1040), a database starting up or shutting down (57P03), or nothing
/// accepting at the socket (ECONNREFUSED; EAGAIN, a Unix socket's full backlog; ENOENT,
/// a Unix socket not there while its server restarts).
pub fn refused(e: &ConnectError) -> bool {
    match &e.kind {
        ErrorKind::Server { code, message } => {
            let number = code.split('/').next().unwrap_or(code);
            matches!(code.as_str(), "53300" | "57P03")
                || number == "1040"
                || (code == "08P01" && message.contains("no more connections allowed"))
        }
        ErrorKind::Io { source, .. } => {
            e.phase == Phase::Connect
                && matches!(
                    source.kind(),
                    Io::ConnectionRefused | Io::WouldBlock | Io::NotFound
                )
        }
        _ => false,
    }
}

/// Exponential back-off with jitter: pauses of [d/2, d], d from [`BACKOFF_FIRST`]
/// doubling to [`BACKOFF_CAP`]. Half the pause is fixed so a client's attempts are
/// bounded (at most one per 0.5 s once capped); half is drawn so clients refused together
/// do not come back together.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { next: BACKOFF_FIRST }
    }
}

impl Backoff {
    /// The pause before the next attempt.
    pub fn pause(&mut self, rng: &mut crate::rng::Rng) -> Duration {
        let d = self.next;
        self.next = (d * 2).min(BACKOFF_CAP);
        let half = d / 2;
        half + half.mul_f64(1.0 - rng.unit())
    }
}

/// Why a client has no connection.
pub enum NotConnected {
    /// A connect failed other than by refusal (or was refused past its patience).
    Failed(ConnectError),
    /// The run ended while the client backed off: nothing to count.
    RunEnded,
}

/// One connect, remembering the server's version and TLS from the first.
async fn open(shared: &WorkerShared) -> Result<(Session, Timeline), ConnectError> {
    let cursor = PhaseCursor::default();
    let (session, timeline) = proto::connect(&shared.plan.endpoint, &cursor).await?;
    if shared.server_version.borrow().is_none() {
        *shared.server_version.borrow_mut() = session.server_version().map(str::to_string);
        *shared.tls.borrow_mut() = timeline.tls.clone();
    }
    Ok((session, timeline))
}

/// The ramp's schedule: when the connection numbered `k` (across the workers) starts,
/// and the instant past which the ramp stops waiting for refused ones.
pub fn slot(plan: &LoadPlan, start: Instant, k: usize) -> Instant {
    match plan.connect_rate {
        Some(rate) => start + Duration::from_secs_f64(k as f64 / rate),
        None => start,
    }
}

/// When the ramp gives up on clients still refused: [`RAMP_PATIENCE`] past its last slot.
pub fn ramp_deadline(plan: &LoadPlan, start: Instant, wanted: usize) -> Instant {
    slot(plan, start, wanted.saturating_sub(1)) + RAMP_PATIENCE
}

/// A connection before the clock (a persistent client's or a pool's), first tried at
/// `at`: refused attempts are counted and backed off until `deadline`; any other failure
/// gives up at once (the client then connects in the run, as before).
pub async fn ramp_open(shared: &WorkerShared, at: Instant, deadline: Instant) -> Option<Session> {
    if at > Instant::now() {
        tokio::time::sleep_until(at.into()).await;
    }
    {
        let mut r = shared.ramp.borrow_mut();
        let now = Instant::now();
        r.first_attempt = Some(r.first_attempt.map_or(now, |f| f.min(now)));
    }
    let mut backoff = Backoff::default();
    loop {
        let e = match open(shared).await {
            Ok((s, t)) => {
                let mut setup = shared.setup.borrow_mut();
                setup.0 += 1;
                setup.1 += t.total_ns;
                let mut r = shared.ramp.borrow_mut();
                let now = Instant::now();
                r.last_connected = Some(r.last_connected.map_or(now, |l| l.max(now)));
                r.ramp.connected += 1;
                RampProgress::count(&shared.plan.ramp_progress, |p| &p.connected, 1);
                return Some(s);
            }
            Err(e) => e,
        };
        count_in(&mut shared.ramp.borrow_mut().ramp.failures, &e);
        shared.ramp.borrow_mut().ramp.failed_attempts += 1;
        RampProgress::count(&shared.plan.ramp_progress, |p| &p.failed_attempts, 1);
        let pause = backoff.pause(&mut shared.backoff_rng.borrow_mut());
        if !refused(&e) || Instant::now() + pause > deadline {
            note_first_error(shared, || e.to_string());
            return None;
        }
        tokio::time::sleep(pause).await;
    }
}

/// A connection during the run (a persistent client's reconnect, `-C`'s, a pool's):
/// each refused attempt is counted once in the measured window and backed off, until
/// one connects, one fails otherwise, or the run ends.
pub async fn open_in_run(shared: &WorkerShared) -> Result<(Session, Timeline), NotConnected> {
    let mut backoff = Backoff::default();
    let first = Instant::now();
    loop {
        let e = match open(shared).await {
            Ok(made) => return Ok(made),
            Err(e) if refused(&e) => e,
            Err(e) => return Err(NotConnected::Failed(e)),
        };
        let end = shared.times.borrow().and_then(|t| t.end);
        if end.is_none() && first.elapsed() > REFUSED_PATIENCE {
            return Err(NotConnected::Failed(e));
        }
        record_refused(shared, &e);
        let pause = backoff.pause(&mut shared.backoff_rng.borrow_mut());
        if let Some(end) = end.filter(|&end| Instant::now() + pause >= end) {
            tokio::time::sleep_until(end.into()).await;
            return Err(NotConnected::RunEnded);
        }
        tokio::time::sleep(pause).await;
    }
}

/// Counts a refused attempt in the interval it happened in, when in the measured window
/// (a warm-up's, like its transactions, is not recorded).
fn record_refused(shared: &WorkerShared, e: &ConnectError) {
    note_first_error(shared, || e.to_string());
    let Some(t) = *shared.times.borrow() else {
        return;
    };
    let now = Instant::now();
    if now < t.measure_start || t.end.is_some_and(|end| now >= end) {
        return;
    }
    let index =
        (now.duration_since(t.measure_start).as_nanos() / shared.plan.interval.as_nanos().max(1)) as usize;
    shared
        .measurements
        .borrow_mut()
        .record_refused(index, &kind(e), || e.to_string());
    if shared.plan.progress.is_some() {
        shared.progress.borrow_mut().refused += 1;
    }
}

/// A failed connect's counting key, as a failed transaction's: the SQLSTATE for the
/// server's errors (so they group by class), else the phase and kind.
fn kind(e: &ConnectError) -> String {
    match &e.kind {
        ErrorKind::Server { code, .. } => code.clone(),
        _ => e.key(),
    }
}

/// Counts `e` by its [`kind`].
fn count_in(map: &mut std::collections::BTreeMap<String, FailureCount>, e: &ConnectError) {
    let key = kind(e);
    match map.get_mut(&key) {
        Some(f) => f.count += 1,
        None => {
            map.insert(
                key,
                FailureCount {
                    count: 1,
                    example: e.to_string(),
                },
            );
        }
    }
}

/// Descriptors a run holds at most: a socket per connection (three through the route's
/// in-process relays: the client's, the relay's accepted one and its upstream), and a
/// margin for the runtime's (an epoll, an eventfd and a timer per worker), the logs and
/// standard streams.
pub fn descriptors_needed(plan: &LoadPlan) -> u64 {
    let connections = match &plan.policy {
        Policy::Persistent | Policy::PerTransaction => plan.clients,
        Policy::Pool { size_per_thread, .. } => size_per_thread * plan.threads.max(1),
    } as u64;
    let per = if plan.accounting.relays.is_empty() { 1 } else { 3 };
    connections * per + 64 + 8 * plan.threads as u64
}

/// Raises this process's open-file soft limit to the hard limit when the run needs more
/// than the soft one allows; refuses the run, before anything starts, when it needs more
/// than the hard limit.
pub fn ensure_open_files(plan: &LoadPlan) -> Result<()> {
    let needed = descriptors_needed(plan);
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Ok(());
    }
    if needed <= lim.rlim_cur {
        return Ok(());
    }
    if needed > lim.rlim_max {
        bail!(
            "load: {} clients need about {needed} open files (a socket each, plus the runtime's), but this \
             process's open-file limit (RLIMIT_NOFILE) is {} (hard limit {}): raise it before the run (`ulimit -n \
             {needed}` or more in the shell, as root to pass the hard limit; LimitNOFILE= in a systemd unit, nofile \
             in /etc/security/limits.conf), or run fewer clients",
            plan.clients,
            lim.rlim_cur,
            lim.rlim_max
        );
    }
    let raised = libc::rlimit {
        rlim_cur: lim.rlim_max,
        rlim_max: lim.rlim_max,
    };
    // SAFETY: setrlimit reads the struct it is given; raising the soft limit up to the
    // hard one needs no privilege.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        bail!(
            "load: {} clients need about {needed} open files, over the soft limit {}, and raising it to the hard \
             limit {} failed ({}): raise it with `ulimit -n {needed}` before the run",
            plan.clients,
            lim.rlim_cur,
            lim.rlim_max,
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(code: &str, message: &str) -> ConnectError {
        ConnectError::new(
            Phase::Startup,
            ErrorKind::Server {
                code: code.into(),
                message: message.into(),
            },
        )
    }

    fn io(phase: Phase, kind: Io) -> ConnectError {
        ConnectError::new(phase, ErrorKind::io(kind.into(), ""))
    }

    #[test]
    fn refusals_are_told_apart_from_failures() {
        for (e, is) in [
            (server("53300", "sorry, too many clients already"), true),
            (
                server("08P01", "no more connections allowed (max_client_conn)"),
                true,
            ),
            (server("08P01", "server login has been failing"), false),
            (server("57P03", "the database system is starting up"), true),
            (server("1040/08004", "Too many connections"), true),
            (server("28P01", "password authentication failed"), false),
            (io(Phase::Connect, Io::ConnectionRefused), true),
            (io(Phase::Connect, Io::WouldBlock), true),
            (io(Phase::Connect, Io::NotFound), true),
            // A reset once connected (a relay's --refuse) is a failure, not a refusal.
            (io(Phase::Startup, Io::ConnectionReset), false),
            (io(Phase::Startup, Io::ConnectionRefused), false),
        ] {
            assert_eq!(refused(&e), is, "{e}");
        }
    }

    #[test]
    fn backoff_doubles_to_its_cap_with_a_fixed_half() {
        let mut rng = crate::rng::Rng::new(7);
        let mut b = Backoff::default();
        let pauses: Vec<Duration> = (0..12).map(|_| b.pause(&mut rng)).collect();
        let mut d = BACKOFF_FIRST;
        for p in &pauses {
            assert!(*p >= d / 2 && *p <= d, "{p:?} against {d:?}");
            d = (d * 2).min(BACKOFF_CAP);
        }
        // Capped: ten seconds of refusals are at most 20 attempts after the first few.
        assert!(pauses[8..].iter().all(|p| *p >= BACKOFF_CAP / 2));
    }
}

//! One client's loop: pace, choose a script, run a transaction under the connection
//! policy (retrying what pgbench retries), and record it in the worker's measurements and
//! log. Also what a worker's clients share ([`WorkerShared`]) and how a connection is
//! opened for them. This is the hot path: every transaction goes through [`client`].

use std::rc::Rc;
use std::time::{Duration, Instant};

use super::connecting::{open_in_run, NotConnected};
use super::plan::{End, LoadPlan, Policy, WeightedScript};
use super::shared::{note_first_error, Times, WorkerShared};
use crate::load::log::{Entry, Failure, Outcome};
use crate::net::transport::Counters;
use crate::proto::Session;
use crate::proto::{ConnectError, ErrorKind, Timeline};
use crate::workload::{ClientSeat, CommandTimes, Executor, Script};

/// Where each script's commands start in the run's per-command records.
fn command_offsets(scripts: &[WeightedScript]) -> Vec<usize> {
    scripts
        .iter()
        .scan(0, |at, s| {
            let start = *at;
            *at += s.script.commands.len();
            Some(start)
        })
        .collect()
}

/// The failure's counting key: the SQLSTATE for server errors (so they group by
/// class), else the phase and kind.
fn failure_key(e: &ConnectError) -> String {
    match &e.kind {
        ErrorKind::Server { code, .. } => code.clone(),
        _ => e.key(),
    }
}

/// A Poisson schedule of intended starts for one client.
struct Schedule {
    next: Instant,
    mean_gap_s: f64,
}

impl Schedule {
    fn advance(&mut self, rng: &mut crate::rng::Rng) -> Instant {
        let at = self.next;
        // Exponential gaps give Poisson arrivals (pgbench -R does the same).
        let gap = -rng.unit().ln() * self.mean_gap_s;
        self.next += Duration::from_secs_f64(gap);
        at
    }
}

/// One executor per script (each has its own variables). The first is seeded as
/// pgbench seeds a client, so its values repeat pgbench's for the same --random-seed;
/// further scripts get streams of their own.
fn executors(plan: &LoadPlan, global_id: usize) -> Vec<Executor> {
    plan.scripts
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let seat = ClientSeat {
                scale: plan.scale,
                client_id: global_id,
                // A worker of a many-machine run knows the clients before its own and its own.
                clients: plan.first_client + plan.clients,
                run_seed: plan.seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            };
            let mut exec = Executor::new(&s.script, seat);
            exec.debug = plan.debug;
            if plan.per_command {
                exec.time_commands(&s.script);
            }
            exec
        })
        .collect()
}

/// Records a measured transaction skipped under -L (pgbench logs it as skipped);
/// whether the client has now done its transactions.
fn skip(
    shared: &WorkerShared,
    global_id: usize,
    chosen: usize,
    now: Instant,
    measured_done: &mut u64,
) -> bool {
    shared.measurements.borrow_mut().record_skip();
    *measured_done += 1;
    log_transaction(
        shared,
        Entry {
            client: global_id,
            number: *measured_done,
            script: chosen,
            outcome: Outcome::Skipped,
            at: now,
            retries: 0,
        },
    );
    matches!(shared.plan.end, End::TransactionsPerClient(n) if *measured_done >= n)
}

/// The interval a transaction that ended at `ended` counts in. A transaction in flight
/// at the window's end finishes just after it: it belongs to the window's last
/// interval, not to a new interval a few microseconds long (whose tps would be absurd).
/// One that started after the end (a paced client working off its backlog) goes in the
/// interval it ended in, so the series shows the drain where it happened rather than
/// piled into the last interval.
fn interval_index(plan: &LoadPlan, t: &Times, started: Instant, ended: Instant) -> usize {
    let index = (ended.saturating_duration_since(t.measure_start).as_nanos()
        / plan.interval.as_nanos().max(1)) as usize;
    match (plan.end, t.end) {
        (End::Duration(d), Some(end)) if started < end => {
            index.min((d.as_nanos().div_ceil(plan.interval.as_nanos().max(1)) as usize).saturating_sub(1))
        }
        _ => index,
    }
}

/// One finished transaction (after its tries), as its records need it.
#[derive(Clone, Copy)]
struct Tx {
    client: usize,
    script: usize,
    /// Where its script's commands start in the per-command records.
    offset: usize,
    /// Its number among the client's measured transactions (the log's).
    number: u64,
    retries: u32,
    /// Whether it counts (in the measured window, or in the arm's turn).
    measured: bool,
    intended: Instant,
    started: Instant,
    ended: Instant,
    /// The interval it counts in ([`interval_index`]).
    index: usize,
    /// Whether the client runs under -R (and so has a schedule lag).
    paced: bool,
}

/// One client's loop. Returns its persistent session, for closing outside the timed
/// region. On Ctrl-C the worker drops this future wherever it waits.
pub async fn client(id: usize, shared: Rc<WorkerShared>, mut session: Option<Session>) -> Option<Session> {
    let plan = shared.plan.clone();
    let t = shared.times.borrow().expect("set before clients run");
    let global_id = plan.first_client + id;
    let mut execs = executors(&plan, global_id);
    let offsets = command_offsets(&plan.scripts);
    let (total_weight, mut chooser) = chooser(&plan, global_id);
    let (mut schedule, mut timer) = pacing(&plan, &t);
    let mut measured_done: u64 = 0;
    let mut reconnect_pause = false;
    // The executor holding the client's variables and random state (every script's
    // starts alike, so any may be first).
    let mut current = 0;
    loop {
        if shared.stopped.get() {
            return session;
        }
        // Taking turns: wait (untimed) for this arm's turn; the run is over when the
        // turns are.
        let in_turn = match &plan.turn {
            Some(turn) => match turn.enter().await {
                Some(t) => Some(t),
                None => return session,
            },
            None => None,
        };
        // When to start: now, or the next intended start under -R.
        let intended = match schedule.as_mut() {
            Some(s) => s.advance(&mut execs[0].rng),
            None => Instant::now().max(t.warm_start),
        };
        if t.end.is_some_and(|end| intended >= end) {
            return session;
        }
        if reconnect_pause {
            reconnect_pause = false;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The script is drawn first, as pgbench draws it: a skipped transaction has one
        // too (the log says which).
        let chosen = choose(&plan.scripts, total_weight, &mut chooser);
        if let Some(now) = too_late(&plan, schedule.is_some(), intended) {
            if intended >= t.measure_start && skip(&shared, global_id, chosen, now, &mut measured_done) {
                return session;
            }
            continue;
        }
        if intended > Instant::now() {
            let precise = match timer.as_mut() {
                Some(t) => t.sleep_until(intended).await.is_ok(),
                None => false,
            };
            if !precise {
                tokio::time::sleep_until(intended.into()).await;
            }
        }
        let started = Instant::now();
        let measured = in_turn
            .as_ref()
            .map_or(intended >= t.measure_start, |turn| turn.measured);
        current = switch_executor(&mut execs, current, chosen);
        let exec = &mut execs[chosen];
        let script = &plan.scripts[chosen].script;
        // pgbench 15's retries: a serialization failure or a deadlock runs the
        // transaction again with the same random values (the generator as it was before
        // the first try), while tries remain, the latency limit is not passed and the
        // measurement has not ended; its latency runs from the first try.
        // A retry draws the same random values, as pgbench's does: the script's random
        // state before the first try is put back before each retry.
        let before = (plan.max_tries != 1).then(|| exec.random_state());
        let mut retries: u32 = 0;
        let outcome = loop {
            let outcome = transaction(&shared, exec, script, &mut session).await;
            match (&outcome, &before) {
                (Err(e), Some(rng))
                    if retriable(&e.error) && may_retry(&plan, retries + 1, intended, t.end) =>
                {
                    if plan.verbose_errors {
                        say_retry(global_id, chosen, &e.error, retries + 1);
                    }
                    retries += 1;
                    exec.restore_random_state(rng.clone());
                }
                _ => break outcome,
            }
        };
        let ended = Instant::now();
        if let Some(turn) = in_turn {
            turn.end(ended);
        }
        let tx = Tx {
            client: global_id,
            script: chosen,
            offset: offsets[chosen],
            number: measured_done + 1,
            retries,
            measured,
            intended,
            started,
            ended,
            index: interval_index(&plan, &t, started, ended),
            paced: schedule.is_some(),
        };
        if finish(
            &shared,
            &tx,
            exec,
            script,
            outcome,
            &mut reconnect_pause,
            &mut measured_done,
        ) {
            return session;
        }
        if !plan.think.is_zero() {
            tokio::time::sleep(plan.think).await;
        }
    }
}

/// pgbench's -v: a failed try that will be retried.
fn say_retry(global_id: usize, chosen: usize, error: &ConnectError, tries: u32) {
    eprintln!("client {global_id} script {chosen}: {error} (try {tries}, will retry)");
}

/// The script chooser of client `global_id`: the scripts' total weight and the client's
/// own generator. The script of each transaction is drawn by weight from it (pgbench
/// draws from its thread's; per client, a seed repeats the choices whatever -j is).
fn chooser(plan: &LoadPlan, global_id: usize) -> (i64, crate::rng::Rng) {
    let total_weight: i64 = plan.scripts.iter().map(|s| i64::from(s.weight)).sum();
    let seed = (global_id as u64 + 1).wrapping_mul(0x5851_F42D_4C95_7F2D) ^ plan.seed;
    (total_weight, crate::rng::Rng::new(seed ^ 0xC0FF_EE00_D15C_0DE5))
}

/// Under -R: the client's schedule of intended starts, and the timer it waits on.
/// Paced clients wait on a high-resolution timer: tokio's rounds up to the next
/// millisecond, which -R would charge to latency.
fn pacing(plan: &LoadPlan, t: &Times) -> (Option<Schedule>, Option<crate::net::timer::PreciseTimer>) {
    let schedule = plan.rate.map(|r| Schedule {
        next: t.warm_start,
        mean_gap_s: plan.clients as f64 / r,
    });
    let timer = match schedule {
        Some(_) => crate::net::timer::PreciseTimer::new().ok(),
        None => None,
    };
    (schedule, timer)
}

/// Under -R with a latency limit, a transaction already further behind its schedule
/// than the limit cannot meet it: it is skipped, not sent (pgbench -L), so a backlog
/// does not snowball into the server. The moment it was found late, if it is.
fn too_late(plan: &LoadPlan, paced: bool, intended: Instant) -> Option<Instant> {
    if let (Some(limit), true) = (plan.latency_limit, paced) {
        let now = Instant::now();
        if now.saturating_duration_since(intended) > limit {
            return Some(now);
        }
    }
    None
}

/// A pgbench client's scripts share its variables and random state: they move to the
/// executor of the script it runs now (two swaps, no copy). The executor now current.
fn switch_executor(execs: &mut [Executor], current: usize, chosen: usize) -> usize {
    if chosen != current {
        let (low, high) = execs.split_at_mut(chosen.max(current));
        low[chosen.min(current)].hand_over(&mut high[0]);
    }
    chosen
}

/// What a transaction leaves once it ended (after its tries): its records when it was
/// measured, a failure said, the client aborted where pgbench aborts it. Whether the
/// client is done: aborted, or its measured transactions are all done.
fn finish(
    shared: &WorkerShared,
    tx: &Tx,
    exec: &mut Executor,
    script: &Script,
    outcome: Result<(Counters, Option<Timeline>), TxError>,
    reconnect_pause: &mut bool,
    measured_done: &mut u64,
) -> bool {
    let plan = &shared.plan;
    let (global_id, chosen, retries, measured) = (tx.client, tx.script, tx.retries, tx.measured);
    match outcome {
        Ok((bytes, connect)) => {
            if measured {
                record_commit(shared, tx, bytes, connect.as_ref(), exec.times.as_ref());
            }
        }
        Err(TxError { ended: true, .. }) => return true,
        Err(TxError {
            error,
            connecting,
            lost,
            ..
        }) => {
            note_first_error(shared, || error.to_string());
            if plan.verbose_errors {
                eprintln!(
                    "client {global_id} script {chosen}: {error} (try {}, failed)",
                    retries + 1
                );
            }
            if measured {
                // A transaction that failed while connecting never ran the script:
                // the executor's times are still the previous transaction's.
                let times = exec.times.as_ref().filter(|_| !connecting);
                record_failure(shared, tx, &error, times);
            }
            *reconnect_pause = connecting;
            let lost = connecting || lost;
            if exec.aborted.is_none()
                && aborts_client(&error, lost, plan.continue_on_error, script.goes_on_after)
            {
                exec.aborted = Some(format!("client {global_id} aborted in script {chosen}: {error}"));
            }
        }
    }
    if let Some(why) = exec.aborted.take() {
        // pgbench stops a client on an error it does not go on from, or whose script
        // leaves a transaction open; so does connbench, and the run reports it.
        note_first_error(shared, || why.clone());
        shared.aborted.borrow_mut().push(why);
        if plan.exit_on_abort {
            shared.halt.send_replace(true);
        }
        return true;
    }
    if measured {
        *measured_done += 1;
        if let End::TransactionsPerClient(n) = plan.end {
            if *measured_done >= n {
                return true;
            }
        }
    }
    false
}

/// Records a measured transaction that committed: the measurements, the progress period,
/// the run's last end and the log.
fn record_commit(
    shared: &WorkerShared,
    tx: &Tx,
    bytes: Counters,
    connect: Option<&Timeline>,
    times: Option<&CommandTimes>,
) {
    let plan = &shared.plan;
    let (index, started, intended, ended) = (tx.index, tx.started, tx.intended, tx.ended);
    let latency = ended.saturating_duration_since(intended).as_nanos() as u64;
    let mut rec = shared.measurements.borrow_mut();
    rec.record_transaction(index, latency, bytes);
    rec.record_script(tx.script, true);
    rec.record_retries(tx.retries);
    if plan.latency_limit.is_some_and(|l| latency > l.as_nanos() as u64) {
        rec.late += 1;
    }
    if tx.paced {
        rec.record_lag(started.saturating_duration_since(intended).as_nanos() as u64);
    }
    if let Some(tl) = connect {
        rec.record_connect(index, tl);
    }
    if let Some(times) = times {
        rec.record_commands_at(tx.offset, times);
    }
    if plan.progress.is_some() {
        let mut p = shared.progress.borrow_mut();
        p.transactions += 1;
        p.latency_us.saturating_record((latency / 1_000).max(1));
        if let Some(tl) = connect {
            p.connects += 1;
            p.connect_ns += tl.total_ns;
        }
        if tx.paced {
            let lag = started.saturating_duration_since(intended).as_micros() as u64;
            p.lag_max_us = p.lag_max_us.max(Some(lag));
        }
    }
    let mut last = shared.last_end.borrow_mut();
    *last = Some(last.map_or(ended, |l| l.max(ended)));
    log_transaction(
        shared,
        Entry {
            client: tx.client,
            number: tx.number,
            script: tx.script,
            outcome: Outcome::Committed {
                latency_ns: latency,
                lag_ns: started.saturating_duration_since(intended).as_nanos() as u64,
            },
            at: ended,
            retries: tx.retries,
        },
    );
}

/// Records a measured transaction that failed (after its tries): counted by kind,
/// never formatted unless it is the first of its kind.
fn record_failure(shared: &WorkerShared, tx: &Tx, error: &ConnectError, times: Option<&CommandTimes>) {
    let message = || error.to_string();
    let key = failure_key(error);
    let mut rec = shared.measurements.borrow_mut();
    rec.record_failure(tx.index, &key, message, true);
    // From the intended start, as a successful transaction's latency is.
    rec.record_failed_time(tx.ended.saturating_duration_since(tx.intended).as_nanos() as u64);
    rec.record_script(tx.script, false);
    rec.record_retries(tx.retries);
    if let Some(times) = times {
        rec.record_commands_at(tx.offset, times);
    }
    if shared.plan.progress.is_some() {
        let mut p = shared.progress.borrow_mut();
        p.failures += 1;
        *p.failure_kinds.entry(key).or_default() += 1;
    }
    log_transaction(
        shared,
        Entry {
            client: tx.client,
            number: tx.number,
            script: tx.script,
            outcome: Outcome::Failed(log_failure(error)),
            at: tx.ended,
            retries: tx.retries,
        },
    );
}

/// Hands a measured transaction to the worker's log, when there is one (after the
/// transaction has ended: the log is never in the timed part).
fn log_transaction(shared: &WorkerShared, e: Entry) {
    if let Some(log) = shared.log.borrow_mut().as_mut() {
        log.record(&e);
    }
}

/// A failure's kind in pgbench's log words.
fn log_failure(e: &ConnectError) -> Failure {
    match &e.kind {
        ErrorKind::Server { code, .. } if code == "40001" => Failure::Serialization,
        ErrorKind::Server { code, .. } if code == "40P01" => Failure::Deadlock,
        _ => Failure::Other,
    }
}

/// Whether a transaction that failed (after its tries) stops its client, as pgbench
/// decides (pgbench.c: `canRetryError`, `canContinueOnError`): a serialization failure
/// or a deadlock never does, it is counted and the client goes on; any other SQL error
/// does, unless --continue-on-error or the workload goes on after it (sysbench's
/// ignorable errors); an error of the script itself (`\set`, `\gset`, `\shell`, a
/// pipeline out of turn) always does, as pgbench 19 aborts on a meta-command's error even
/// with --continue-on-error. Where connbench differs on purpose: a connection that fails
/// or is lost (the server's FATAL, a reset, a refused connect) is counted and the client
/// connects again (pgbench aborts it), so a restart or a fault can be measured.
fn aborts_client(e: &ConnectError, lost: bool, continue_on_error: bool, goes_on_after: &[&str]) -> bool {
    if lost {
        return false;
    }
    match &e.kind {
        ErrorKind::Server { code, .. } => {
            // MySQL's codes are "errno/SQLSTATE" (1213/40001 is InnoDB's deadlock).
            let (number, state) = code.split_once('/').unwrap_or((code, code));
            let goes_on = matches!(state, "40001" | "40P01")
                || continue_on_error
                || goes_on_after.iter().any(|c| *c == number || *c == state);
            !goes_on
        }
        ErrorKind::Script { .. } => true,
        // Sockets, timeouts, TLS and the protocol: the connection's, not the script's.
        _ => false,
    }
}

/// Whether a failed try may be retried, as pgbench 15 decides: a serialization failure
/// (40001) or a deadlock (40P01) only; MySQL's codes carry the SQLSTATE after the errno
/// (InnoDB's deadlock is 1213/40001).
fn retriable(e: &ConnectError) -> bool {
    matches!(&e.kind, ErrorKind::Server { code, .. }
        if matches!(code.rsplit('/').next(), Some("40001" | "40P01")))
}

/// Whether another try is allowed after `tries`: within --max-tries (0: no limit), within
/// the latency limit of the intended start, and before the measurement's end.
fn may_retry(plan: &LoadPlan, tries: u32, intended: Instant, end: Option<Instant>) -> bool {
    let now = Instant::now();
    (plan.max_tries == 0 || tries < plan.max_tries)
        && plan
            .latency_limit
            .is_none_or(|l| now.saturating_duration_since(intended) <= l)
        && end.is_none_or(|e| now < e)
}

/// The script of the next transaction: with one, that one; with several, a draw in
/// [0, total weight) walked down the weights, as pgbench's chooseScript does.
fn choose(scripts: &[WeightedScript], total_weight: i64, rng: &mut crate::rng::Rng) -> usize {
    if scripts.len() == 1 {
        return 0;
    }
    let mut w = rng.range(0, total_weight - 1);
    for (i, s) in scripts.iter().enumerate() {
        w -= i64::from(s.weight);
        if w < 0 {
            return i;
        }
    }
    scripts.len() - 1
}

/// A failed transaction, whether it failed while connecting, and whether its
/// connection was lost; or (`ended`) none at all: the run ended while its client was
/// backing off from refused connects, which are counted as such.
struct TxError {
    error: ConnectError,
    connecting: bool,
    lost: bool,
    ended: bool,
}

impl TxError {
    fn connecting(n: NotConnected) -> TxError {
        let (error, ended) = match n {
            NotConnected::Failed(e) => (e, false),
            NotConnected::RunEnded => (
                ConnectError::new(
                    crate::proto::Phase::Connect,
                    ErrorKind::Config("the run ended while connecting".into()),
                ),
                true,
            ),
        };
        TxError {
            error,
            connecting: true,
            lost: false,
            ended,
        }
    }
}

/// One transaction under the plan's policy: get a connection, run the script, give the
/// connection back. Returns the bytes it moved and the connect it made, if any.
async fn transaction(
    shared: &WorkerShared,
    exec: &mut Executor,
    script: &Script,
    persistent: &mut Option<Session>,
) -> Result<(Counters, Option<Timeline>), TxError> {
    let plan = &shared.plan;
    let connect_err = TxError::connecting;
    // A connect's state (its TLS and SCRAM exchanges) is boxed where it is awaited: held
    // inline, it would size every client's future for the whole run, whether it ever
    // reconnects or not (bytes that 10,000 idle clients each keep).
    match &plan.policy {
        Policy::Persistent => {
            let mut made = None;
            if persistent.is_none() {
                let (s, tl) = Box::pin(open_in_run(shared)).await.map_err(connect_err)?;
                exec.prepared = false;
                *persistent = Some(s);
                made = Some(tl);
            }
            let s = persistent.as_mut().expect("connected above");
            let before = s.counters();
            let result = exec.run(script, plan.mode, s).await;
            let bytes = delta(before, s.counters(), made.is_some());
            let lost = s.is_broken();
            if lost {
                *persistent = None;
            }
            result.map(|_| (bytes, made)).map_err(|e| TxError {
                error: e.error,
                connecting: false,
                lost,
                ended: false,
            })
        }
        Policy::PerTransaction => {
            let (mut s, tl) = Box::pin(open_in_run(shared)).await.map_err(connect_err)?;
            exec.prepared = false;
            let result = exec.run(script, plan.mode, &mut s).await;
            let bytes = s.counters();
            let lost = s.is_broken();
            s.close().await;
            result.map(|_| (bytes, Some(tl))).map_err(|e| TxError {
                error: e.error,
                connecting: false,
                lost,
                ended: false,
            })
        }
        Policy::Pool { .. } => {
            let pool = shared.pool.as_ref().expect("pool policy has a pool");
            let (mut conn, made) = pool
                .acquire(|| Box::pin(open_in_run(shared)))
                .await
                .map_err(connect_err)?;
            // Prepared statements live on one connection; a pooled client may get
            // another one each time, so it prepares again when the connection changed.
            if made.is_some() || exec.connection != conn.id {
                exec.prepared = false;
            }
            exec.connection = conn.id;
            let before = conn.session.counters();
            let result = exec.run(script, plan.mode, &mut conn.session).await;
            let bytes = delta(before, conn.session.counters(), made.is_some());
            let lost = conn.session.is_broken();
            pool.release(conn);
            result.map(|_| (bytes, made)).map_err(|e| TxError {
                error: e.error,
                connecting: false,
                lost,
                ended: false,
            })
        }
    }
}

/// Bytes moved between two counter readings; with `from_zero` the whole connection's
/// (it was opened inside this transaction).
fn delta(before: Counters, after: Counters, from_zero: bool) -> Counters {
    if from_zero {
        return after;
    }
    Counters {
        bytes_sent: after.bytes_sent - before.bytes_sent,
        bytes_received: after.bytes_received - before.bytes_received,
        round_trips: after.round_trips - before.round_trips,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Phase;

    fn server(code: &str) -> ConnectError {
        let message = "the server's words".to_string();
        ConnectError::new(
            Phase::Query,
            ErrorKind::Server {
                code: code.into(),
                message,
            },
        )
    }

    #[test]
    fn which_errors_abort_a_client() {
        let script = ConnectError::new(
            Phase::Query,
            ErrorKind::Script {
                key: "division-by-zero",
                message: "command 1 (\\set x 1/0): division by zero".into(),
            },
        );
        let reset = ConnectError::new(
            Phase::Query,
            ErrorKind::io(std::io::ErrorKind::ConnectionReset.into(), ""),
        );
        let sysbench = crate::workload::sysbench::IGNORABLE;
        // Retried as pgbench retries: serialization failures and deadlocks, either engine's.
        for (code, retried) in [
            ("40001", true),
            ("40P01", true),
            ("1213/40001", true),
            ("1205/HY000", false),
            ("23505", false),
        ] {
            assert_eq!(retriable(&server(code)), retried, "{code}");
        }
        // (error, connection lost, --continue-on-error, workload's list) -> aborts
        for (e, lost, go_on, list, aborts) in [
            // An SQL error aborts, as in pgbench, unless --continue-on-error.
            (server("22012"), false, false, &[][..], true),
            (server("22012"), false, true, &[][..], false),
            (server("1062/23000"), false, false, &[][..], true),
            // A serialization failure or deadlock never does (PostgreSQL's or MySQL's).
            (server("40001"), false, false, &[][..], false),
            (server("40P01"), false, false, &[][..], false),
            (server("1213/40001"), false, false, &[][..], false),
            // sysbench's ignorable errors, for its workloads: by SQLSTATE or errno.
            (server("23505"), false, false, sysbench, false),
            (server("1205/HY000"), false, false, sysbench, false),
            (server("22012"), false, false, sysbench, true),
            // The script's own error always does, as in pgbench 19.
            (script, false, true, sysbench, true),
            // A lost connection never does: the client connects again.
            (server("57P01"), true, false, &[][..], false),
            (reset, false, false, &[][..], false),
        ] {
            assert_eq!(
                aborts_client(&e, lost, go_on, list),
                aborts,
                "{e} lost={lost} go_on={go_on}"
            );
        }
    }
}

//! A replay's figures beside the recording's, in the shape the report prints and
//! `--json` writes (docs/json.md): per statement fingerprint its calls and response
//! time now and when recorded, failures by SQLSTATE now and then, transactions, and the
//! replay's fidelity to its schedule. Percentiles are HdrHistogram's
//! (`stats::load::latency`); nothing here is estimated.

use std::collections::{BTreeMap, HashMap};

use hdrhistogram::Histogram;
use serde::Serialize;

use super::schedule::Schedule;
use super::{Run, Speed};
use crate::load::measurements::command_histogram;
use crate::stats::load::latency;

/// What the recording saw, counted before the replay runs (it consumes the schedule).
#[derive(Debug, Clone)]
pub struct AsRecorded {
    pub sessions: u64,
    pub requests: u64,
    pub transactions: u64,
    failures: BTreeMap<String, u64>,
    statements: HashMap<usize, (u64, u64, Histogram<u64>)>,
    /// Each recorded transaction's time, its first request to its last response, ns.
    transaction: Histogram<u64>,
    transaction_ns: u64,
}

impl AsRecorded {
    pub fn of(s: &Schedule) -> AsRecorded {
        let mut r = AsRecorded {
            sessions: s.sessions.len() as u64,
            requests: 0,
            transactions: 0,
            failures: BTreeMap::new(),
            statements: HashMap::new(),
            transaction: command_histogram(),
            transaction_ns: 0,
        };
        for session in &s.sessions {
            // As `connbench trace` times one (connbench_trace::transaction): from its
            // first request's send to its last answer.
            let mut first: Option<u64> = None;
            for p in &session.requests {
                let Some(place) = p.seen.place else { continue };
                if place.first {
                    first = Some(p.at_ns);
                }
                if place.last {
                    let from = first.take().unwrap_or(p.at_ns);
                    let ns = (p.at_ns + p.seen.response_ns.unwrap_or(0)).saturating_sub(from);
                    r.transaction.saturating_record(ns.max(1));
                    r.transaction_ns += ns;
                }
            }
        }
        for p in s.sessions.iter().flat_map(|s| &s.requests) {
            r.requests += 1;
            r.transactions += u64::from(p.seen.place.is_some_and(|p| p.last));
            if let Some(code) = &p.seen.error {
                *r.failures.entry(code.clone()).or_default() += 1;
            }
            // Each execution that ran a call, sharing the answer's time (Tally::answered).
            let ran = p.seen.ran.min(p.runs.len());
            for (k, i) in p.runs[..ran].iter().enumerate() {
                let Some(i) = *i else { continue };
                let e = r
                    .statements
                    .entry(i)
                    .or_insert_with(|| (0, 0, command_histogram()));
                e.0 += 1;
                e.1 += u64::from(p.seen.error.is_some() && k + 1 == ran);
                if let Some(ns) = p.seen.response_ns {
                    e.2.saturating_record((ns / ran as u64).max(1));
                }
            }
        }
        r
    }
}

/// p50, p99 and max in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Times {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Times {
    fn of(h: &Histogram<u64>) -> Option<Times> {
        latency(h, 1).map(|l| Times {
            p50_ms: l.p50_ns as f64 / 1e6,
            p99_ms: l.p99_ns as f64 / 1e6,
            max_ms: l.max_ns as f64 / 1e6,
        })
    }
}

/// A mean beside p50, p99 and max, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Spread {
    /// `sum_ns` is the exact sum of what `h` holds (its own mean is at 2 digits).
    pub(super) fn of(h: &Histogram<u64>, sum_ns: u64) -> Option<Spread> {
        let t = Times::of(h)?;
        Some(Spread {
            mean_ms: sum_ns as f64 / h.len() as f64 / 1e6,
            p50_ms: t.p50_ms,
            p99_ms: t.p99_ms,
            max_ms: t.max_ms,
        })
    }
}

/// Transactions' times now and when recorded: the unit of `connbench trace`'s
/// predictions, so `replay --rtt N` measures what `trace` predicted for +N ms.
#[derive(Debug, Clone, Serialize)]
pub struct TransactionTimes {
    /// First request sent to last answer read, now.
    pub now: Option<Spread>,
    /// The recorder's first request to its last response.
    pub recorded: Option<Spread>,
    /// The connects' mean now (start to the session's ready; with `--pool`, the pool's
    /// connects), ms.
    pub connect_mean_ms: Option<f64>,
    /// The mean transaction now with its share of the connects:
    /// (Σ transactions + Σ connects) / transactions, `trace`'s `per_transaction_ms`.
    pub per_transaction_ms: Option<f64>,
}

/// One shape, recorded, predicted and now.
#[derive(Debug, Clone, Serialize)]
pub struct ShapeRow {
    /// As `connbench trace` names it (`profile.shapes[].id`).
    pub id: String,
    /// Its statements' normalised texts, in order.
    pub statements: Vec<String>,
    /// Round trips per transaction, as recorded (mean).
    pub round_trips: f64,
    pub count_recorded: u64,
    pub count_now: u64,
    /// The recorder's first request to its last response, ms.
    pub recorded_mean_ms: Option<f64>,
    /// `trace`'s prediction of a transaction of this shape at the replay's added round
    /// trip (its recorded mean + the RTT × its round trips).
    pub predicted_ms: Option<f64>,
    /// First request sent to last answer read, now.
    pub now: Option<Spread>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StatementRow {
    pub fingerprint: String,
    pub text: String,
    pub calls: u64,
    pub calls_recorded: u64,
    pub failures: u64,
    pub failures_recorded: u64,
    /// Request's last byte to ReadyForQuery, now; `null` when it never ran.
    pub now: Option<Times>,
    /// The recorder's request's last byte to the response's last byte.
    pub recorded: Option<Times>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FailureRow {
    pub sqlstate: String,
    pub now: u64,
    pub recorded: u64,
}

/// `--pool`: the pool in front of the replay, and what it did.
#[derive(Debug, Clone, Serialize)]
pub struct PoolSummary {
    /// Connections in all (`--pool`).
    pub size: usize,
    /// Each replay thread's share of them.
    pub per_thread: Vec<usize>,
    pub max_lifetime_s: Option<f64>,
    pub idle_timeout_s: Option<f64>,
    /// Connections the pool opened (before the clock, and again after retiring one).
    pub connects: u64,
    /// Their mean time, start to ready, ms.
    pub connect_mean_ms: Option<f64>,
    /// Statements prepared again on a borrowed connection that lacked one the session
    /// had prepared on another.
    pub prepared_again: u64,
    /// Connections a session left inside a transaction, rolled back before going back.
    pub rolled_back: u64,
    /// Requests that set session state the pool does not keep between borrows, by kind
    /// (replayed all the same, on whichever connection was borrowed).
    pub session_state: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Counts {
    pub sessions: u64,
    /// Sessions that connected (the replay; with `--pool`, sessions every borrow of which
    /// got a connection) or became ready (the recording).
    pub connected: u64,
    pub requests: u64,
    pub transactions: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Fidelity {
    /// Requests sent at most 1 ms after their intended time, as a share of those sent;
    /// `null` with `--speed max` (no schedule).
    pub on_time_share: Option<f64>,
    /// Actual send − intended send.
    pub lag: Option<Times>,
    /// The part of each request's lag spent waiting for the previous answer (the
    /// connect, for a session's first): `max(intended, answer) − intended`. The server
    /// answered later than when recorded, or the session carried lag from before.
    pub waiting_for_server: Option<Times>,
    /// `--pool`: the part spent waiting for the pool to hand a connection over (a free
    /// one, or a new one's connect), 0 for a request on a connection the transaction
    /// already holds; `null` without a pool.
    pub waiting_for_pool: Option<Times>,
    /// The rest, connbench's own send delay: `send − max(intended, answer)`, less the
    /// pool's wait.
    pub send_delay: Option<Times>,
    /// Requests whose own send delay exceeded 1 ms, as a share of those sent.
    pub send_delay_late_share: Option<f64>,
    /// Why lag is `null`.
    pub lag_note: Option<String>,
    pub failed_now_not_then: u64,
    pub failed_then_not_now: u64,
    /// A few of the new failures: SQLSTATE and message.
    pub failed_now_examples: Vec<String>,
    /// Sessions that could not connect (with `--pool`: that a borrow failed for).
    pub sessions_not_connected: u64,
    pub connect_errors: BTreeMap<String, u64>,
    /// Connections lost during the replay, by error.
    pub connections_lost: BTreeMap<String, u64>,
    /// Requests of the schedule not sent (a session that did not connect or broke, or
    /// Ctrl-C).
    pub requests_not_sent: u64,
}

/// The report's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub method: String,
    /// `1` is the recorded pace; `max`: no schedule.
    pub speed: String,
    pub elapsed_s: f64,
    pub interrupted: bool,
    /// The replay threads' CPU from the schedule's start to their last session's end
    /// (reading the trace before it is not in it).
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    /// Their CPU per request answered, µs; `null` when none was.
    pub cpu_per_request_us: Option<f64>,
    pub recorded: Counts,
    pub replayed: Counts,
    /// Sessions not replayed: refused when recorded.
    pub sessions_skipped: u64,
    /// The recorded CancelRequests: how many were sent again, and why any was not.
    pub cancels: super::cancel::Counts,
    /// The recording was cut short: what it held was replayed.
    pub trace_cut: Option<String>,
    pub response: Option<Times>,
    /// `--pool`: the client-side pool; `null` without one (each session on its own
    /// connection, as recorded).
    pub pool: Option<PoolSummary>,
    /// `--without`: what was left out of the schedule (the recorded counts are of what
    /// was kept); absent without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left_out: Option<super::without::LeftOut>,
    pub transaction_times: TransactionTimes,
    /// Each transaction shape now, recorded and predicted (`replay::shapes`); empty
    /// until the handler adds them.
    pub shapes: Vec<ShapeRow>,
    pub statements: Vec<StatementRow>,
    pub failures: Vec<FailureRow>,
    pub fidelity: Fidelity,
}

/// How the figures are made, stated in the output.
fn method(speed: Speed, pooled: bool) -> String {
    let pace = match speed {
        Speed::Max => "--speed max: no schedule; every session opened at once and each request sent as soon \
             as the previous answer was in, so lag is not measured"
            .to_string(),
        Speed::Factor(f) => format!(
            "open loop at {}: each session opened, and each request sent, at its recorded offset from \
             the first session's open divided by {f}; lag is the actual send minus that intended time (a request \
             sent late because the previous answer came late counts its wait, as pgbench -R's lag), split in two \
             parts that add up to it: waiting for the server (the intended time to the previous answer's \
             arrival, or the connect's end, plus the application's think time after it, when that came later) and connbench's own send delay (the later \
             of the two to the moment the request is written: the timer's wake-up, the thread's turn on a core)",
            if f == 1.0 { "the recorded pace".to_string() } else { format!("{f}x the recorded pace") }
        ),
    };
    format!(
        "{pace}; each session waits for an answer before its next request, unless the application did not \
         (a PostgreSQL group it pipelined, sent before the previous answer, goes at its time and the answers \
         are read in order after it), and then for the application's recorded think time (its own time between an answer and \
         its next request), also when behind its schedule (at the pace's speed; not with --speed max); \
         a transaction's time is its first request's send to its last answer, beside the recorder's first \
         request to last response; percentiles are HDR histograms' at 2 significant digits; a request's time now is its last byte written to its answer's last byte read (ReadyForQuery; MySQL's final OK, EOF or ERR), beside the \
         recorder's request's last byte to the response's last byte; calls are executions of \
         the statement (a Query or COM_QUERY, each Execute of an extended group, a COM_STMT_EXECUTE; after an \
         error, those up to the one that failed), by fingerprint, a group's time shared equally among its \
         executions as `connbench trace` shares it; a transaction \
         runs from the first request sent while idle that runs or prepares a statement to the answer that leaves the session idle after one ran, as `connbench trace` counts, and is listed under the shape of the recorded transaction it began as{}",
        if pooled {
            "; --pool: the recorded opens and closes were not replayed as connects: each transaction (and each \
             request outside one) borrowed a connection of its thread's pool (filled before the clock) when its \
             first request was due and gave it back at the answer that left it idle; a named prepared statement \
             was prepared on each connection once, under a name of the pool's; a request's lag has a third part, \
             waiting for the pool (from when it could be sent to the connection's handover)"
        } else {
            ""
        }
    )
}

impl Summary {
    pub fn new(rec: &AsRecorded, schedule: &Schedule, run: &Run, speed: Speed) -> Summary {
        let t = &run.tally;
        let mut statements: Vec<StatementRow> = schedule
            .statements
            .iter()
            .enumerate()
            .filter_map(|(i, f)| {
                let now = t.statements.get(&i);
                let then = rec.statements.get(&i);
                (now.is_some() || then.is_some()).then(|| StatementRow {
                    fingerprint: f.id_hex(),
                    text: f.text.clone(),
                    calls: now.map_or(0, |s| s.calls),
                    calls_recorded: then.map_or(0, |s| s.0),
                    failures: now.map_or(0, |s| s.failures),
                    failures_recorded: then.map_or(0, |s| s.1),
                    now: now.and_then(|s| Times::of(&s.response)),
                    recorded: then.and_then(|s| Times::of(&s.2)),
                })
            })
            .collect();
        statements.sort_by(|a, b| b.calls_recorded.cmp(&a.calls_recorded).then(a.text.cmp(&b.text)));
        let mut codes: Vec<&String> = t.failures.keys().chain(rec.failures.keys()).collect();
        codes.sort();
        codes.dedup();
        let failures = codes
            .into_iter()
            .map(|c| FailureRow {
                sqlstate: c.clone(),
                now: t.failures.get(c).copied().unwrap_or(0),
                recorded: rec.failures.get(c).copied().unwrap_or(0),
            })
            .collect();
        let scheduled = matches!(speed, Speed::Factor(_));
        let mean = |ns: u64, n: u64| (n > 0).then(|| ns as f64 / n as f64 / 1e6);
        let pool = run.pool.map(|p| PoolSummary {
            size: p.size,
            per_thread: p.split(run.threads),
            max_lifetime_s: p.max_lifetime.map(|d| d.as_secs_f64()),
            idle_timeout_s: p.idle_timeout.map(|d| d.as_secs_f64()),
            connects: t.connects,
            connect_mean_ms: mean(t.connect_ns, t.connects),
            prepared_again: t.prepared_again,
            rolled_back: t.rolled_back,
            session_state: run
                .session_state
                .iter()
                .map(|(k, n)| (k.to_string(), *n))
                .collect(),
        });
        Summary {
            method: method(speed, pool.is_some()),
            speed: match speed {
                Speed::Max => "max".into(),
                Speed::Factor(f) => format!("{f}"),
            },
            elapsed_s: run.elapsed.as_secs_f64(),
            interrupted: run.interrupted,
            cpu_user_s: t.cpu.0.as_secs_f64(),
            cpu_system_s: t.cpu.1.as_secs_f64(),
            cpu_per_request_us: (t.sent > 0).then(|| (t.cpu.0 + t.cpu.1).as_secs_f64() * 1e6 / t.sent as f64),
            recorded: Counts {
                sessions: rec.sessions,
                connected: rec.sessions,
                requests: rec.requests,
                transactions: rec.transactions,
            },
            replayed: Counts {
                sessions: t.sessions,
                connected: t.connected,
                requests: t.sent,
                transactions: t.transactions,
            },
            sessions_skipped: schedule.skipped_sessions,
            cancels: run.cancels.clone(),
            trace_cut: schedule.cut.clone(),
            response: Times::of(&t.response),
            pool,
            left_out: None,
            transaction_times: TransactionTimes {
                now: Spread::of(&t.transaction, t.transaction_ns),
                recorded: Spread::of(&rec.transaction, rec.transaction_ns),
                connect_mean_ms: mean(t.connect_ns, t.connects),
                per_transaction_ms: (t.transactions > 0)
                    .then(|| (t.transaction_ns + t.connect_ns) as f64 / t.transactions as f64 / 1e6),
            },
            statements,
            failures,
            shapes: Vec::new(),
            fidelity: Fidelity {
                on_time_share: (scheduled && t.sent > 0).then(|| t.on_time as f64 / t.sent as f64),
                lag: if scheduled { Times::of(&t.lag) } else { None },
                waiting_for_server: if scheduled { Times::of(&t.waiting) } else { None },
                waiting_for_pool: if scheduled { Times::of(&t.pool_wait) } else { None },
                send_delay: if scheduled { Times::of(&t.send_delay) } else { None },
                send_delay_late_share: (scheduled && t.sent > 0).then(|| t.late_sends as f64 / t.sent as f64),
                lag_note: (!scheduled).then(|| "--speed max: no schedule to lag behind".to_string()),
                failed_now_not_then: t.failed_now_not_then,
                failed_then_not_now: t.failed_then_not_now,
                failed_now_examples: t.examples.clone(),
                sessions_not_connected: t.sessions - t.connected,
                connect_errors: t.connect_errors.clone(),
                connections_lost: t.lost.clone(),
                requests_not_sent: t.not_sent,
            },
        }
    }
}

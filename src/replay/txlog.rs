//! A replayed session's transactions written to `-l`'s log, in pgbench 15's format
//! through load's own writer (`crate::load::log`), so the tools people run on pgbench's
//! logs read a replay's; and added to its thread's live period (load's
//! `measurements::Interval`) for `--metrics-listen`: transactions, their latency, failures by
//! SQLSTATE, connects, the period's largest lag.
//!
//! One line per transaction, not per request: pgbench's format is per transaction, and a
//! transaction is the unit the application's users wait for. A transaction is what
//! `trace` and the report count (`connbench_trace::transaction`, docs/trace.md): from the
//! first request sent while the session is idle that runs a statement or prepares one,
//! to the answer that leaves it idle after work (an autocommit statement is one). `client_id` is the session's place in the trace (by
//! its open, from 0); `time` runs from the first request's intended send (its actual send
//! with `--speed max`) to the last answer, as pgbench -R's latency runs from the
//! scheduled start; `schedule_lag` (with a schedule) is the first request's lag;
//! `failed` (or `serialization`/`deadlock` with `--failures-detailed`) when any of its
//! requests failed now; `script_no` is 0.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::load::log::{Entry, Failure, Outcome, TxLog};
use crate::load::measurements::Interval;
use connbench_trace::transaction::Place;

/// A thread's figures since the last scrape's period, taken by the progress ticker.
pub type Period = Arc<Mutex<Interval>>;

/// One session's transactions, logged on its thread's writer and counted in its thread's
/// live period, when either is asked for.
pub struct Transactions {
    client: usize,
    number: u64,
    open: Option<Open>,
    log: Option<Rc<RefCell<TxLog>>>,
    live: Option<Period>,
}

/// A transaction under way.
struct Open {
    start: Instant,
    lag_ns: u64,
    failure: Option<Failure>,
    /// The first error's key, for the live failures by kind.
    error: Option<String>,
}

/// One answered request, as the log needs it.
pub struct Step<'a> {
    /// When it was meant to go (`None`: no schedule) and when it went.
    pub intended: Option<Instant>,
    pub sent: Instant,
    /// Its lag behind the schedule, ns (0 with none).
    pub lag_ns: u64,
    /// Its error now: the SQLSTATE (MySQL: `code/SQLSTATE`).
    pub error: Option<&'a str>,
    pub answered: Instant,
    /// Its place in its transaction (a request outside one is not logged).
    pub place: Place,
}

impl Transactions {
    pub fn new(client: usize, log: Option<Rc<RefCell<TxLog>>>, live: Option<Period>) -> Transactions {
        Transactions {
            client,
            number: 0,
            open: None,
            log,
            live,
        }
    }

    /// The live period, locked (a poisoned lock still counts: its data are plain sums).
    fn with_live(&self, f: impl FnOnce(&mut Interval)) {
        if let Some(l) = &self.live {
            f(&mut l.lock().unwrap_or_else(|p| p.into_inner()));
        }
    }

    /// The session's connect: its time, or the error's key.
    pub fn connected(&mut self, took_ns: u64, error: Option<&str>) {
        self.with_live(|l| match error {
            None => {
                l.connects += 1;
                l.connect_ns += took_ns;
            }
            Some(e) => *l.failure_kinds.entry(e.to_string()).or_default() += 1,
        });
    }

    /// Counts a request into its transaction; logs the transaction it ends.
    pub fn step(&mut self, s: &Step) {
        let open = self.open.get_or_insert(Open {
            start: s.intended.unwrap_or(s.sent),
            lag_ns: s.lag_ns,
            failure: None,
            error: None,
        });
        if let Some(code) = s.error {
            open.failure.get_or_insert(failure(code));
            open.error.get_or_insert_with(|| code.to_string());
        }
        if s.intended.is_some() {
            let lag_us = s.lag_ns / 1_000;
            self.with_live(|l| l.lag_max_us = Some(l.lag_max_us.map_or(lag_us, |m| m.max(lag_us))));
        }
        if !s.place.last {
            return;
        }
        let Some(open) = self.open.take() else { return };
        self.number += 1;
        let latency_ns = s.answered.saturating_duration_since(open.start).as_nanos() as u64;
        self.with_live(|l| match &open.error {
            None => {
                l.transactions += 1;
                l.latency_us.saturating_record((latency_ns / 1_000).max(1));
            }
            Some(code) => {
                l.failures += 1;
                *l.failure_kinds.entry(code.clone()).or_default() += 1;
            }
        });
        let outcome = match open.failure {
            Some(f) => Outcome::Failed(f),
            None => Outcome::Committed {
                latency_ns,
                lag_ns: open.lag_ns,
            },
        };
        let Some(log) = &self.log else { return };
        log.borrow_mut().record(&Entry {
            client: self.client,
            number: self.number,
            script: 0,
            outcome,
            at: s.answered,
            retries: 0,
        });
    }
}

/// pgbench's kinds: PostgreSQL's serialization failure and deadlock (MySQL's deadlock,
/// 1213/40001, is a serialization failure by its SQLSTATE, as pgbench would read it).
fn failure(code: &str) -> Failure {
    match code.rsplit('/').next() {
        Some("40001") => Failure::Serialization,
        Some("40P01") => Failure::Deadlock,
        _ => Failure::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::log::{Clock, Columns, LogSettings};
    use std::time::Duration;

    /// BEGIN, an UPDATE that fails, ROLLBACK: one failed line; then a Parse and the
    /// autocommit statement it prepared: one line from the Parse's intended send, its lag.
    #[test]
    fn a_line_per_transaction_from_its_first_intended_send_to_its_last_answer() {
        let dir = std::env::temp_dir().join(format!("cb-txlog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let settings = LogSettings {
            prefix: dir.join("log").display().to_string(),
            sampling_rate: None,
            aggregate_interval_s: None,
            failures_detailed: true,
        };
        let files = settings.create(1).unwrap();
        let t0 = Instant::now();
        let columns = Columns {
            lag: true,
            ..Columns::default()
        };
        let log = Rc::new(RefCell::new(files.writer(0, columns, Clock::new(t0), 1).unwrap()));
        let live = Period::default();
        let mut tx = Transactions::new(3, Some(log.clone()), Some(live.clone()));
        let ms = |n| t0 + Duration::from_millis(n);
        let step = |at: u64, error, first, last| Step {
            intended: Some(ms(at)),
            sent: ms(at + 1),
            lag_ns: 1_000_000,
            error,
            answered: ms(at + 2),
            place: Place { first, last },
        };
        tx.step(&step(0, None, true, false));
        tx.step(&step(10, Some("40001"), false, false));
        tx.step(&step(20, None, false, true));
        tx.step(&step(30, None, true, false));
        tx.step(&step(40, None, false, true));
        drop(tx);
        Rc::try_unwrap(log).ok().unwrap().into_inner().finish().unwrap();
        let text = std::fs::read_to_string(settings.path(std::process::id(), 0)).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(' ').collect()).collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(&lines[0][..4], ["3", "1", "serialization", "0"], "{text}");
        // The Parse's 30 ms intended to the statement's answer at 42 ms: 12,000 µs; the
        // lag is its first request's, 1,000 µs.
        assert_eq!(&lines[1][..4], ["3", "2", "12000", "0"], "{text}");
        assert_eq!(lines[1][6], "1000", "{text}");
        let l = live.lock().unwrap();
        assert_eq!((l.transactions, l.failures, l.latency_us.len()), (1, 1, 1));
        assert_eq!(l.failure_kinds.get("40001"), Some(&1));
        assert_eq!(l.lag_max_us, Some(1000));
    }
}

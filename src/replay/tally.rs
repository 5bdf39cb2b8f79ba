//! What a replay counts, per session while it runs and merged at the end (`+=`, no shared
//! state in the timed region): each statement's response times now, the lag of every
//! request behind its intended send time, failures by SQLSTATE, the requests whose
//! outcome differs from the recording's (failed now but not then, and the reverse),
//! transactions, and the sessions that could not connect.
//!
//! Histograms keep 2 significant digits (a percentile within 1% of the recorded value):
//! a session holds one per statement it runs, and a trace may hold thousands of sessions.

use super::cancel::Counts;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::host::Cpu;

use crate::load::measurements::command_histogram;

/// One statement's executions now.
#[derive(Debug, Clone)]
pub struct StatementTally {
    pub calls: u64,
    pub failures: u64,
    /// Request's last byte sent to ReadyForQuery, ns.
    pub response: Histogram<u64>,
}

impl Default for StatementTally {
    fn default() -> StatementTally {
        StatementTally {
            calls: 0,
            failures: 0,
            response: command_histogram(),
        }
    }
}

/// One recorded transaction shape's transactions now.
#[derive(Debug, Clone)]
pub struct ShapeTally {
    pub count: u64,
    pub sum_ns: u64,
    /// First request sent to last answer read, ns.
    pub time: Histogram<u64>,
}

impl Default for ShapeTally {
    fn default() -> ShapeTally {
        ShapeTally {
            count: 0,
            sum_ns: 0,
            time: command_histogram(),
        }
    }
}

/// A replay's counts.
#[derive(Debug, Clone)]
pub struct Tally {
    /// Transactions now by the shape of the recorded transaction they began as (an
    /// index into the schedule's `shapes`).
    // Both are counted into on every answer: foldhash, not std's SipHash (callgrind,
    // issue 56); the keys are the trace's own indexes.
    pub shapes: HashMap<u32, ShapeTally, foldhash::fast::RandomState>,
    pub statements: HashMap<usize, StatementTally, foldhash::fast::RandomState>,
    /// Every request's response time now, ns.
    pub response: Histogram<u64>,
    /// Actual send − intended send, ns (recorded as at least 1 ns).
    pub lag: Histogram<u64>,
    /// Each answered request's intended send to its answer, ns: its lag and its response
    /// time together, so a late connect or a wait for the pool is in it (pgbench -R's
    /// latency, from the scheduled start). Empty with no schedule.
    pub from_intended: Histogram<u64>,
    /// The part of each lag spent waiting for the previous answer (or the connect):
    /// `max(intended, answer) − intended`, ns.
    pub waiting: Histogram<u64>,
    /// `--pool`: the part spent waiting for the pool to hand a connection over (a free
    /// one, or a new one's connect), ns; 0 for a request on a connection already held.
    /// Empty without a pool.
    pub pool_wait: Histogram<u64>,
    /// The rest, connbench's own: `send − max(intended, answer)` less the pool's wait, ns.
    pub send_delay: Histogram<u64>,
    /// Requests sent at most 1 ms after their intended time.
    pub on_time: u64,
    /// Requests whose own send delay exceeded 1 ms.
    pub late_sends: u64,
    pub sent: u64,
    /// Requests of the schedule not sent: the session could not connect, broke, or the
    /// replay was stopped.
    pub not_sent: u64,
    pub failures: BTreeMap<String, u64>,
    pub failed_now_not_then: u64,
    pub failed_then_not_now: u64,
    /// Examples of `failed_now_not_then`: SQLSTATE and message, a few.
    pub examples: Vec<String>,
    pub transactions: u64,
    /// Each transaction's time now, its first request's send to its last answer, ns
    /// (`connbench trace`'s "first request to last response").
    pub transaction: Histogram<u64>,
    /// Their sum, ns, for the mean.
    pub transaction_ns: u64,
    pub sessions: u64,
    /// Sessions that connected; with `--pool`, sessions every borrow of which got a
    /// connection.
    pub connected: u64,
    /// Connections opened: a session's own, or the pool's.
    pub connects: u64,
    /// The connects' times summed (the connect's start to the session's ready), ns.
    pub connect_ns: u64,
    /// `--pool`: statements prepared on a borrowed connection that lacked one the session
    /// had prepared on another.
    pub prepared_again: u64,
    /// `--pool`: connections a session left inside a transaction, rolled back before
    /// going back to the pool.
    pub rolled_back: u64,
    /// Connect failures and lost connections by their key (phase and kind).
    pub connect_errors: BTreeMap<String, u64>,
    pub lost: BTreeMap<String, u64>,
    /// The replay threads' CPU time (user, system) from the schedule's start to their
    /// last session's end, each thread's own (getrusage), as load's clients'.
    pub cpu: Cpu,
    /// MySQL KILLs sent with the replayed connection's id, or not sent and why
    /// (super::kill); `recorded` is the schedule's to say.
    pub kills: Counts,
}

impl Default for Tally {
    fn default() -> Tally {
        Tally {
            shapes: HashMap::default(),
            statements: HashMap::default(),
            response: command_histogram(),
            lag: command_histogram(),
            from_intended: command_histogram(),
            waiting: command_histogram(),
            pool_wait: command_histogram(),
            send_delay: command_histogram(),
            on_time: 0,
            late_sends: 0,
            sent: 0,
            not_sent: 0,
            failures: BTreeMap::new(),
            failed_now_not_then: 0,
            failed_then_not_now: 0,
            examples: Vec::new(),
            transactions: 0,
            transaction: command_histogram(),
            transaction_ns: 0,
            sessions: 0,
            connected: 0,
            connects: 0,
            connect_ns: 0,
            prepared_again: 0,
            rolled_back: 0,
            connect_errors: BTreeMap::new(),
            lost: BTreeMap::new(),
            cpu: (Duration::ZERO, Duration::ZERO),
            kills: Counts::default(),
        }
    }
}

/// One request's lag behind its intended send time, in parts that add up to it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lag {
    /// The intended time to the previous answer's arrival (the connect's end for a
    /// session's first request), when that came later: the session could not send
    /// before it. The server's doing, or lag carried from the session's earlier requests.
    pub waiting_ns: u64,
    /// `--pool`: the wait for the pool to hand a connection over (`None` without one).
    pub pool_ns: Option<u64>,
    /// The later of the intended time and that arrival, to the send, less the pool's
    /// wait: connbench's own (its timer's wake-up, the thread's turn on a core, writing
    /// the request).
    pub send_delay_ns: u64,
}

impl Lag {
    /// The split of `sent − intended` around `ready` (when the session could send).
    pub fn of(intended: std::time::Instant, ready: std::time::Instant, sent: std::time::Instant) -> Lag {
        let from = intended.max(ready);
        Lag {
            waiting_ns: from.saturating_duration_since(intended).as_nanos() as u64,
            pool_ns: None,
            send_delay_ns: sent.saturating_duration_since(from).as_nanos() as u64,
        }
    }

    /// The same lag with `pool` of its send delay spent waiting for the pool.
    pub fn with_pool(self, pool: std::time::Duration) -> Lag {
        let pool_ns = (pool.as_nanos() as u64).min(self.send_delay_ns);
        Lag {
            pool_ns: Some(pool_ns),
            send_delay_ns: self.send_delay_ns - pool_ns,
            ..self
        }
    }

    /// The whole lag, ns.
    pub fn total_ns(&self) -> u64 {
        self.waiting_ns + self.pool_ns.unwrap_or(0) + self.send_delay_ns
    }
}

/// The figures past which a histogram saturates rather than fails.
fn record(h: &mut Histogram<u64>, ns: u64) {
    h.saturating_record(ns.max(1));
}

impl Tally {
    /// One request's send: its lag behind the schedule split in two (`None` with no
    /// schedule).
    pub fn sent(&mut self, lag: Option<Lag>) {
        self.sent += 1;
        if let Some(l) = lag {
            let total = l.total_ns();
            record(&mut self.lag, total);
            record(&mut self.waiting, l.waiting_ns);
            if let Some(ns) = l.pool_ns {
                record(&mut self.pool_wait, ns);
            }
            record(&mut self.send_delay, l.send_delay_ns);
            self.on_time += u64::from(total <= 1_000_000);
            self.late_sends += u64::from(l.send_delay_ns > 1_000_000);
        }
    }

    /// One answer (`response_ns` `None`: a command with none): the statement each of
    /// its executions ran, how many of them `ran` (all, or up to the one that failed),
    /// its time, its error now and then. Each execution that ran is a call of its
    /// statement, with an equal share of the answer's time, as `trace` counts them.
    pub fn answered(
        &mut self,
        runs: &[Option<usize>],
        ran: usize,
        response_ns: Option<u64>,
        now: Option<(&str, &str)>,
        then: Option<&str>,
    ) {
        if let Some(ns) = response_ns {
            record(&mut self.response, ns);
        }
        let ran = ran.min(runs.len());
        for (k, i) in runs[..ran].iter().enumerate() {
            let Some(i) = *i else { continue };
            let s = self.statements.entry(i).or_default();
            s.calls += 1;
            s.failures += u64::from(now.is_some() && k + 1 == ran);
            if let Some(ns) = response_ns {
                record(&mut s.response, ns / ran as u64);
            }
        }
        if let Some((code, _)) = now {
            *self.failures.entry(code.to_string()).or_default() += 1;
        }
        match (now, then) {
            (Some((code, message)), None) => {
                self.failed_now_not_then += 1;
                if self.examples.len() < 5 {
                    self.examples.push(format!("{code}: {message}"));
                }
            }
            (None, Some(_)) => self.failed_then_not_now += 1,
            _ => {}
        }
    }

    /// One request answered `ns` after its intended send time.
    pub fn answered_after_intended(&mut self, ns: u64) {
        record(&mut self.from_intended, ns);
    }

    /// One transaction ended, `ns` after its first request was sent; `shape`, the
    /// recorded transaction's it began as.
    pub fn transaction(&mut self, ns: u64, shape: Option<u32>) {
        self.transactions += 1;
        record(&mut self.transaction, ns);
        self.transaction_ns += ns;
        if let Some(i) = shape {
            let t = self.shapes.entry(i).or_default();
            t.count += 1;
            t.sum_ns += ns;
            record(&mut t.time, ns);
        }
    }

    pub fn merge(&mut self, o: Tally) {
        for (i, s) in o.shapes {
            let t = self.shapes.entry(i).or_default();
            t.count += s.count;
            t.sum_ns += s.sum_ns;
            let _ = t.time.add(&s.time);
        }
        for (i, s) in o.statements {
            let t = self.statements.entry(i).or_default();
            t.calls += s.calls;
            t.failures += s.failures;
            let _ = t.response.add(&s.response);
        }
        let _ = self.response.add(&o.response);
        let _ = self.lag.add(&o.lag);
        let _ = self.from_intended.add(&o.from_intended);
        let _ = self.waiting.add(&o.waiting);
        let _ = self.pool_wait.add(&o.pool_wait);
        let _ = self.send_delay.add(&o.send_delay);
        self.on_time += o.on_time;
        self.late_sends += o.late_sends;
        self.sent += o.sent;
        self.not_sent += o.not_sent;
        for (k, n) in o.failures {
            *self.failures.entry(k).or_default() += n;
        }
        self.failed_now_not_then += o.failed_now_not_then;
        self.failed_then_not_now += o.failed_then_not_now;
        for e in o.examples {
            if self.examples.len() < 5 {
                self.examples.push(e);
            }
        }
        self.transactions += o.transactions;
        let _ = self.transaction.add(&o.transaction);
        self.transaction_ns += o.transaction_ns;
        self.sessions += o.sessions;
        self.connected += o.connected;
        self.connects += o.connects;
        self.connect_ns += o.connect_ns;
        self.prepared_again += o.prepared_again;
        self.rolled_back += o.rolled_back;
        for (k, n) in o.connect_errors {
            *self.connect_errors.entry(k).or_default() += n;
        }
        for (k, n) in o.lost {
            *self.lost.entry(k).or_default() += n;
        }
        self.cpu.0 += o.cpu.0;
        self.cpu.1 += o.cpu.1;
        self.kills.merge(o.kills);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lag_splits_at_the_later_of_the_intended_time_and_the_answer() {
        let t0 = std::time::Instant::now();
        let ms = |n| t0 + std::time::Duration::from_millis(n);
        // The answer came 3 ms after the intended time; sent 1 ms after the answer.
        let l = Lag::of(ms(10), ms(13), ms(14));
        assert_eq!((l.waiting_ns, l.send_delay_ns), (3_000_000, 1_000_000));
        // The answer was in before the intended time: all of the lag is connbench's.
        let l = Lag::of(ms(10), ms(5), ms(12));
        assert_eq!((l.waiting_ns, l.send_delay_ns), (0, 2_000_000));
        let mut t = Tally::default();
        t.sent(Some(Lag::of(ms(10), ms(5), ms(12))));
        assert_eq!((t.on_time, t.late_sends), (0, 1));
        // 3 ms of a 4 ms send delay waiting for the pool: three parts, one total.
        let l = Lag::of(ms(10), ms(11), ms(15)).with_pool(std::time::Duration::from_millis(3));
        assert_eq!(
            (l.waiting_ns, l.pool_ns, l.send_delay_ns),
            (1_000_000, Some(3_000_000), 1_000_000)
        );
        assert_eq!(l.total_ns(), 5_000_000);
        t.sent(Some(l));
        assert_eq!((t.pool_wait.len(), t.late_sends), (1, 1));
    }

    #[test]
    fn outcomes_are_compared_with_the_recording_and_merge_adds() {
        let mut a = Tally::default();
        let lag = |waiting_ns, send_delay_ns| {
            Some(Lag {
                waiting_ns,
                pool_ns: None,
                send_delay_ns,
            })
        };
        a.sent(lag(0, 500_000));
        a.answered(&[Some(0)], 1, Some(1_000), None, None);
        a.sent(lag(1_500_000, 500_000));
        a.answered(
            &[Some(0)],
            1,
            Some(2_000),
            Some(("42P01", "relation \"x\" does not exist")),
            None,
        );
        let mut b = Tally::default();
        b.sent(None);
        b.answered(&[Some(1)], 1, Some(3_000), None, Some("40001"));
        b.answered_after_intended(5_000);
        a.merge(b);
        assert_eq!(a.from_intended.len(), 1);
        assert_eq!((a.sent, a.on_time, a.lag.len()), (3, 1, 2));
        assert_eq!(a.late_sends, 0);
        assert_eq!(a.lag.max(), a.lag.highest_equivalent(2_000_000));
        assert_eq!(a.waiting.max(), a.waiting.highest_equivalent(1_500_000));
        assert_eq!((a.failed_now_not_then, a.failed_then_not_now), (1, 1));
        assert_eq!(a.failures.get("42P01"), Some(&1));
        assert_eq!(a.statements[&0].calls, 2);
        assert_eq!(a.statements[&0].failures, 1);
        assert_eq!(a.statements[&1].calls, 1);
        assert_eq!(a.response.len(), 3);
    }
}

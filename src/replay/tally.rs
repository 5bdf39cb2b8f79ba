//! What a replay counts, per session while it runs and merged at the end (`+=`, no shared
//! state in the timed region): each statement's response times now, the lag of every
//! request behind its intended send time, failures by SQLSTATE, the requests whose
//! outcome differs from the recording's (failed now but not then, and the reverse),
//! transactions, and the sessions that could not connect.
//!
//! Histograms keep 2 significant digits (a percentile within 1% of the recorded value):
//! a session holds one per statement it runs, and a trace may hold thousands of sessions.

use std::collections::{BTreeMap, HashMap};

use hdrhistogram::Histogram;

use crate::load::record::command_histogram;

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

/// A replay's counts.
#[derive(Debug, Clone)]
pub struct Tally {
    pub statements: HashMap<usize, StatementTally>,
    /// Every request's response time now, ns.
    pub response: Histogram<u64>,
    /// Actual send − intended send, ns (recorded as at least 1 ns).
    pub lag: Histogram<u64>,
    /// Requests sent at most 1 ms after their intended time.
    pub on_time: u64,
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
    pub sessions: u64,
    pub connected: u64,
    /// Connect failures and lost connections by their key (phase and kind).
    pub connect_errors: BTreeMap<String, u64>,
    pub lost: BTreeMap<String, u64>,
}

impl Default for Tally {
    fn default() -> Tally {
        Tally {
            statements: HashMap::new(),
            response: command_histogram(),
            lag: command_histogram(),
            on_time: 0,
            sent: 0,
            not_sent: 0,
            failures: BTreeMap::new(),
            failed_now_not_then: 0,
            failed_then_not_now: 0,
            examples: Vec::new(),
            transactions: 0,
            sessions: 0,
            connected: 0,
            connect_errors: BTreeMap::new(),
            lost: BTreeMap::new(),
        }
    }
}

/// The figures past which a histogram saturates rather than fails.
fn record(h: &mut Histogram<u64>, ns: u64) {
    h.saturating_record(ns.max(1));
}

impl Tally {
    /// One request's send: its lag behind the schedule (`None` with no schedule).
    pub fn sent(&mut self, lag_ns: Option<u64>) {
        self.sent += 1;
        if let Some(l) = lag_ns {
            record(&mut self.lag, l);
            if l <= 1_000_000 {
                self.on_time += 1;
            }
        }
    }

    /// One answer (`response_ns` `None`: a command with none): its statement, time,
    /// error now and then.
    pub fn answered(
        &mut self,
        statement: Option<usize>,
        response_ns: Option<u64>,
        now: Option<(&str, &str)>,
        then: Option<&str>,
    ) {
        if let Some(ns) = response_ns {
            record(&mut self.response, ns);
        }
        if let Some(i) = statement {
            let s = self.statements.entry(i).or_default();
            s.calls += 1;
            s.failures += u64::from(now.is_some());
            if let Some(ns) = response_ns {
                record(&mut s.response, ns);
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

    pub fn merge(&mut self, o: Tally) {
        for (i, s) in o.statements {
            let t = self.statements.entry(i).or_default();
            t.calls += s.calls;
            t.failures += s.failures;
            let _ = t.response.add(&s.response);
        }
        let _ = self.response.add(&o.response);
        let _ = self.lag.add(&o.lag);
        self.on_time += o.on_time;
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
        self.sessions += o.sessions;
        self.connected += o.connected;
        for (k, n) in o.connect_errors {
            *self.connect_errors.entry(k).or_default() += n;
        }
        for (k, n) in o.lost {
            *self.lost.entry(k).or_default() += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_are_compared_with_the_recording_and_merge_adds() {
        let mut a = Tally::default();
        a.sent(Some(500_000));
        a.answered(Some(0), Some(1_000), None, None);
        a.sent(Some(2_000_000));
        a.answered(
            Some(0),
            Some(2_000),
            Some(("42P01", "relation \"x\" does not exist")),
            None,
        );
        let mut b = Tally::default();
        b.sent(None);
        b.answered(Some(1), Some(3_000), None, Some("40001"));
        a.merge(b);
        assert_eq!((a.sent, a.on_time, a.lag.len()), (3, 1, 2));
        assert_eq!((a.failed_now_not_then, a.failed_then_not_now), (1, 1));
        assert_eq!(a.failures.get("42P01"), Some(&1));
        assert_eq!(a.statements[&0].calls, 2);
        assert_eq!(a.statements[&0].failures, 1);
        assert_eq!(a.statements[&1].calls, 1);
        assert_eq!(a.response.len(), 3);
    }
}

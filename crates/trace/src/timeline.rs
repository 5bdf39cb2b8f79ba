//! A bounded sample of the application's connections and requests in time, for a
//! picture (`trace --html`'s timeline): the first [`MAX_LANES`] sessions opened, each a
//! lane from its open to its close, with its requests (sent, answered) and its
//! transactions (first request to last answer, and the shape they ran) at their times.
//! The profile is aggregate only; a timeline shows what its means hide (a pool's
//! connections open for the whole recording, a connection per request, bursts, think
//! time between requests).
//!
//! Bounded whatever the trace's size: at most [`MAX_LANES`] lanes of at most
//! [`MAX_MARKS`] requests and [`MAX_MARKS`] transactions each (8,000 marks, under
//! 400 KB in memory). Once a lane's cap is reached the picture ends where its first request or
//! transaction left out began ([`Timeline::until_ms`]), so whatever is drawn before
//! that is complete for the lanes drawn, and everything left out is counted: the
//! sessions beyond the lanes, the requests of drawn sessions beyond the window.
//!
//! Not serialised with the profile: it is a sample for a picture, not a figure (the
//! trace file holds every event for whoever wants them all).

use std::collections::HashMap;

/// Sessions drawn, the first opened.
pub const MAX_LANES: usize = 20;
/// Requests, and transactions, kept per lane.
pub const MAX_MARKS: usize = 200;

/// One request at its time, ms since the recording began.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mark {
    pub at_ms: f64,
    /// Sent to answered; `None` when it was not answered.
    pub response_ms: Option<f64>,
    pub error: bool,
}

/// One transaction at its time, ms since the recording began, and its shape's id (as
/// [`crate::shapes::ShapeProfile::id`] names it).
#[derive(Debug, Clone, PartialEq)]
pub struct TxMark {
    pub from_ms: f64,
    pub to_ms: f64,
    pub shape: String,
}

/// One session's lane.
#[derive(Debug, Clone, PartialEq)]
pub struct Lane {
    pub session: u64,
    pub open_ms: f64,
    /// `None` while the recording ended with it open.
    pub close_ms: Option<f64>,
    pub requests: Vec<Mark>,
    pub transactions: Vec<TxMark>,
}

/// The sample, finished: what is drawn and what was left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    /// Sessions the recording holds.
    pub sessions: u64,
    pub lanes: Vec<Lane>,
    /// Where the picture begins: the first session's open, ms since the recording
    /// began.
    pub from_ms: f64,
    /// Where the picture ends, ms since the recording began: where a lane's first
    /// request or transaction beyond its cap began, else the end of the last lane
    /// drawn.
    pub until_ms: f64,
    /// The picture ends before the lanes do because a lane's cap was reached.
    pub cut: bool,
    /// The recording's length, ms (first open to last event).
    pub recording_ms: f64,
    /// Requests of the lanes' sessions not drawn (beyond `until_ms`).
    pub requests_left_out: u64,
    /// Requests in all the recording holds (of every session).
    pub requests: u64,
}

/// Fed event by event (by the [`crate::profile::Profiler`]); times are ns since the
/// recording began.
#[derive(Debug, Default)]
pub(crate) struct Sampler {
    lanes: Vec<Lane>,
    by_session: HashMap<u64, usize>,
    sessions: u64,
    requests: u64,
    /// The earliest start of anything a full lane could not keep, ns.
    cut_ns: Option<u64>,
    /// Requests a full lane could not keep.
    dropped: u64,
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

impl Sampler {
    pub(crate) fn open(&mut self, session: u64, at_ns: u64) {
        self.sessions += 1;
        if self.lanes.len() < MAX_LANES && !self.by_session.contains_key(&session) {
            self.by_session.insert(session, self.lanes.len());
            self.lanes.push(Lane {
                session,
                open_ms: ms(at_ns),
                close_ms: None,
                requests: Vec::new(),
                transactions: Vec::new(),
            });
        }
    }

    fn lane(&mut self, session: u64) -> Option<&mut Lane> {
        let i = *self.by_session.get(&session)?;
        self.lanes.get_mut(i)
    }

    fn cut_at(&mut self, ns: u64) {
        self.cut_ns = Some(self.cut_ns.map_or(ns, |c| c.min(ns)));
    }

    /// A request sent at `at_ns`, answered `response_ns` later.
    pub(crate) fn request(&mut self, session: u64, at_ns: u64, response_ns: Option<u64>, error: bool) {
        self.requests += 1;
        let Some(lane) = self.lane(session) else { return };
        if lane.requests.len() < MAX_MARKS {
            lane.requests.push(Mark {
                at_ms: ms(at_ns),
                response_ms: response_ns.map(ms),
                error,
            });
        } else {
            self.dropped += 1;
            self.cut_at(at_ns);
        }
    }

    /// A transaction from `from_ns` to `to_ns`; `shape` names its shape, asked only
    /// for a transaction the sample keeps.
    pub(crate) fn transaction(
        &mut self,
        session: u64,
        from_ns: u64,
        to_ns: u64,
        shape: impl FnOnce() -> String,
    ) {
        let Some(lane) = self.lane(session) else { return };
        if lane.transactions.len() < MAX_MARKS {
            lane.transactions.push(TxMark {
                from_ms: ms(from_ns),
                to_ms: ms(to_ns),
                shape: shape(),
            });
        } else {
            self.cut_at(from_ns);
        }
    }

    pub(crate) fn close(&mut self, session: u64, at_ns: u64) {
        if let Some(lane) = self.lane(session) {
            lane.close_ms = Some(ms(at_ns));
        }
        // A session id may come again in a long recording; a new one is a new session.
        self.by_session.remove(&session);
    }

    /// The sample, cut where the first thing left out began; `last_ns`, the
    /// recording's last event, `first_ns` its first open.
    pub(crate) fn finish(mut self, first_ns: u64, last_ns: u64) -> Timeline {
        let end_of = |l: &Lane| {
            let last_request = l
                .requests
                .iter()
                .map(|m| m.at_ms + m.response_ms.unwrap_or(0.0))
                .fold(l.open_ms, f64::max);
            l.close_ms.unwrap_or_else(|| ms(last_ns).max(last_request))
        };
        let lanes_end = self.lanes.iter().map(end_of).fold(ms(first_ns), f64::max);
        let (until_ms, cut) = match self.cut_ns {
            Some(c) if ms(c) < lanes_end => (ms(c), true),
            _ => (lanes_end, false),
        };
        let mut left_out = self.dropped;
        for l in &mut self.lanes {
            let before = l.requests.len();
            l.requests.retain(|m| m.at_ms < until_ms);
            left_out += (before - l.requests.len()) as u64;
            l.transactions.retain(|t| t.from_ms < until_ms);
        }
        // Lanes opened after the picture ends have nothing in it.
        self.lanes.retain(|l| l.open_ms <= until_ms);
        Timeline {
            sessions: self.sessions,
            from_ms: ms(first_ns),
            lanes: self.lanes,
            until_ms,
            cut,
            recording_ms: ms(last_ns.saturating_sub(first_ns)),
            requests_left_out: left_out,
            requests: self.requests,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A handful of sessions: every one a lane, every request and transaction drawn,
    /// the picture ending at the last close.
    #[test]
    fn a_small_recording_is_drawn_whole() {
        let mut s = Sampler::default();
        s.open(1, 0);
        s.open(2, 5 * MS);
        s.request(1, MS, Some(MS), false);
        s.request(2, 6 * MS, None, true);
        s.transaction(1, MS, 2 * MS, || "abc".into());
        s.close(1, 10 * MS);
        s.close(2, 12 * MS);
        let t = s.finish(0, 12 * MS);
        assert_eq!((t.sessions, t.lanes.len(), t.requests), (2, 2, 2));
        assert_eq!((t.until_ms, t.cut, t.requests_left_out), (12.0, false, 0));
        assert_eq!(t.lanes[0].requests[0].response_ms, Some(1.0));
        assert!(t.lanes[1].requests[0].error);
        assert_eq!(t.lanes[0].transactions[0].shape, "abc");
        assert_eq!(t.lanes[1].close_ms, Some(12.0));
    }

    /// Far more sessions and requests than drawn: the lanes and marks stay at their
    /// caps, the picture ends where the first request left out was sent, and what was
    /// left out is counted, nothing lost from the totals.
    #[test]
    fn a_huge_recording_stays_within_the_caps() {
        let mut s = Sampler::default();
        let sessions = 1_000u64;
        for id in 0..sessions {
            s.open(id, id * MS);
        }
        // Session 0 is busy: one request a millisecond for 10 s.
        for k in 0..10_000u64 {
            s.request(0, k * MS, Some(MS / 2), false);
            s.transaction(0, k * MS, k * MS + MS / 2, || "busy".into());
        }
        // Every other session one request.
        for id in 1..sessions {
            s.request(id, id * MS + 100, Some(MS), false);
        }
        for id in 0..sessions {
            s.close(id, 20_000 * MS);
        }
        let t = s.finish(0, 20_000 * MS);
        assert_eq!(t.sessions, sessions);
        assert_eq!(t.requests, 10_000 + sessions - 1);
        assert_eq!(t.lanes.len(), MAX_LANES);
        assert!(t.cut);
        // The request beyond the cap (sent at MAX_MARKS ms) is the first a lane could not keep.
        assert_eq!(t.until_ms, MAX_MARKS as f64);
        assert!(t.lanes.iter().all(|l| l.requests.len() <= MAX_MARKS));
        assert!(t.lanes.iter().all(|l| l.transactions.len() <= MAX_MARKS));
        let drawn: u64 = t.lanes.iter().map(|l| l.requests.len() as u64).sum();
        // Of the drawn sessions', only those beyond the window are left out.
        assert_eq!(drawn + t.requests_left_out, 10_000 + MAX_LANES as u64 - 1);
        assert!(t
            .lanes
            .iter()
            .flat_map(|l| &l.requests)
            .all(|m| m.at_ms < t.until_ms));
    }

    /// A session left open at the recording's end runs to its last event; the id of a
    /// closed session used again is a session of its own.
    #[test]
    fn an_open_session_runs_to_the_end_and_ids_may_come_again() {
        let mut s = Sampler::default();
        s.open(7, 0);
        s.close(7, 3 * MS);
        s.open(7, 4 * MS);
        s.request(7, 5 * MS, Some(MS), false);
        let t = s.finish(0, 9 * MS);
        assert_eq!(t.lanes.len(), 2);
        assert_eq!(t.lanes[0].close_ms, Some(3.0));
        assert!(t.lanes[0].requests.is_empty());
        assert_eq!((t.lanes[1].close_ms, t.lanes[1].requests.len()), (None, 1));
        assert_eq!(t.until_ms, 9.0);
    }
}

//! `replay --without`: the schedule without some requests, so what they cost is measured
//! (the replay's elapsed time with them and without them), not only predicted.
//! `housekeeping` leaves out what `connbench_trace::housekeeping` recognises and leaves
//! out by default (pings, resets on release, look-ups, read-only set-up: not a `SET`,
//! which changes how the session behaves; a reset goes, as a pool sends it whether or not
//! the checkout changed anything); a fingerprint (16 hex digits, as `trace` prints it)
//! leaves out every request of that statement.
//!
//! A request left out takes its time with it and nothing else: the application's own
//! time around it stays. Its think time (before it) joins the next request's, and every
//! later request of its session, and the session's close, come earlier by its recorded
//! response time. A transaction whose first or last request is left out begins or ends
//! at its neighbour, so `replay` and its log still count the transactions `trace` does.

use std::collections::BTreeMap;

use serde::Serialize;

use super::schedule::{Planned, Schedule, SessionPlan, Wire};
use connbench_trace::housekeeping::{joined, left_out_by_default, Kind, Session, COM_PING};
use connbench_trace::{fingerprint, Dialect};

/// MySQL's COM_PING command byte.
const COM_PING_CODE: u8 = 0x0e;

/// What one `--without` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Without {
    /// What `housekeeping::left_out_by_default` leaves out.
    Housekeeping,
    /// Every request of this statement fingerprint.
    Fingerprint(u64),
}

impl Without {
    /// `housekeeping`, or a statement's 16-hex-digit fingerprint.
    pub fn parse(s: &str) -> Result<Without, String> {
        if s.eq_ignore_ascii_case("housekeeping") {
            return Ok(Without::Housekeeping);
        }
        match u64::from_str_radix(s, 16) {
            Ok(id) if s.len() == 16 => Ok(Without::Fingerprint(id)),
            _ => Err(format!(
                "--without {s:?}: give `housekeeping` or a statement's fingerprint, the 16 hex digits \
                 `connbench trace` prints (e.g. 6ab42f507ac0c2de)"
            )),
        }
    }
}

impl Without {
    /// As given: `housekeeping`, or the fingerprint's 16 hex digits.
    pub fn name(&self) -> String {
        match self {
            Without::Housekeeping => "housekeeping".into(),
            Without::Fingerprint(id) => format!("{id:016x}"),
        }
    }
}

/// One fingerprint left out.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeftOutRow {
    pub fingerprint: String,
    /// Its housekeeping kind; `null` for a statement named by its fingerprint that is not.
    pub kind: Option<Kind>,
    pub text: String,
    pub requests: u64,
    /// Their recorded response time, summed, ms: how much earlier the rest came.
    pub recorded_ms: f64,
}

/// What `--without` left out of the schedule, and the housekeeping it kept.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LeftOut {
    /// The `--without` values, as given.
    pub without: Vec<String>,
    pub requests: u64,
    pub rows: Vec<LeftOutRow>,
    /// Housekeeping `--without housekeeping` kept (a `SET` changes the session), by
    /// fingerprint: requests.
    pub kept: Vec<LeftOutRow>,
}

/// Refuses a fingerprint that names no statement of the trace (a typo, or another
/// trace's), before anything connects.
pub fn check(schedule: &Schedule, without: &[Without]) -> Result<(), String> {
    let dialect = match schedule.engine() {
        crate::targets::Engine::Postgres => Dialect::Postgres,
        crate::targets::Engine::Mysql => Dialect::Mysql,
    };
    let ping = fingerprint(COM_PING, dialect).id;
    for w in without {
        if let Without::Fingerprint(id) = w {
            if *id != ping && !schedule.statements.iter().any(|f| f.id == *id) {
                return Err(format!(
                    "--without {id:016x}: no statement of the trace has this fingerprint; `connbench \
                     trace TRACE` lists them (statements, and housekeeping)"
                ));
            }
        }
    }
    Ok(())
}

/// Leaves out of `schedule` what `without` names; what was left out, counted.
pub fn apply(schedule: &mut Schedule, without: &[Without]) -> LeftOut {
    let dialect = match schedule.engine() {
        crate::targets::Engine::Postgres => Dialect::Postgres,
        crate::targets::Engine::Mysql => Dialect::Mysql,
    };
    let ping = fingerprint(COM_PING, dialect);
    let mut rows: BTreeMap<(bool, String), LeftOutRow> = BTreeMap::new();
    let mut out = LeftOut {
        without: without.iter().map(Without::name).collect(),
        ..LeftOut::default()
    };
    for s in &mut schedule.sessions {
        let requests = std::mem::take(&mut s.requests);
        let mut keep = Kept::default();
        let mut kinds = Session::default();
        for p in requests {
            let com_ping = matches!(&p.wire, Wire::Mysql(c) if c.code == COM_PING_CODE);
            let f = if com_ping {
                Some(&ping)
            } else {
                p.statement.and_then(|i| schedule.statements.get(i))
            };
            let text = f.map(|f| f.text.as_str());
            // A group of several executions is read whole, as `trace` reads it.
            let all = (p.runs.len() > 1).then(|| {
                joined(p.runs.iter().map(|i| {
                    i.and_then(|i| schedule.statements.get(i))
                        .map(|f| f.text.as_str())
                }))
            });
            let read = match &all {
                Some(all) => all.as_deref(),
                None => text,
            };
            let kind = kinds.classify(read, com_ping, p.seen.place, p.work.runs());
            let house = without.contains(&Without::Housekeeping)
                && kind.is_some_and(|k| left_out_by_default(k, read.unwrap_or_default()));
            // A group goes by a fingerprint only if every execution of it is that statement.
            let named = f.is_some_and(|f| without.contains(&Without::Fingerprint(f.id)))
                && p.runs.iter().all(|i| *i == p.statement);
            let drop = house || named;
            if let (Some(f), Some(k), false) = (f, kind, drop) {
                if without.contains(&Without::Housekeeping) {
                    let ns = p.seen.response_ns.unwrap_or(0);
                    tally(&mut rows, true, f.id_hex(), Some(k), &f.text, ns);
                }
            }
            if !drop {
                keep.push(p, s);
                continue;
            }
            let (id, text) = f.map_or(("-".to_string(), "(no SQL)".to_string()), |f| {
                (f.id_hex(), f.text.clone())
            });
            let ns = p.seen.response_ns.unwrap_or(0);
            tally(&mut rows, false, id, kind, &text, ns);
            out.requests += 1;
            keep.leave_out(p, s);
        }
    }
    for ((kept, _), r) in rows {
        if kept {
            out.kept.push(r);
        } else {
            out.rows.push(r);
        }
    }
    // Most first, as `trace` lists them.
    out.rows.sort_by(|a, b| {
        b.requests
            .cmp(&a.requests)
            .then(a.fingerprint.cmp(&b.fingerprint))
    });
    out
}

fn tally(
    rows: &mut BTreeMap<(bool, String), LeftOutRow>,
    kept: bool,
    id: String,
    kind: Option<Kind>,
    text: &str,
    ns: u64,
) {
    let r = rows.entry((kept, id.clone())).or_insert_with(|| LeftOutRow {
        fingerprint: id,
        kind,
        text: text.to_string(),
        requests: 0,
        recorded_ms: 0.0,
    });
    r.requests += 1;
    r.recorded_ms += ns as f64 / 1e6;
}

/// A session's requests being kept, with what the left-out ones pass on.
#[derive(Default)]
struct Kept {
    /// Recorded response time left out so far: how much earlier the rest come.
    shift_ns: u64,
    /// Think time of left-out requests since the last kept one.
    think_ns: Option<u64>,
    /// A transaction's first request was left out: the next kept one opens it.
    opens: bool,
}

impl Kept {
    fn push(&mut self, mut p: Planned, s: &mut SessionPlan) {
        p.at_ns = p.at_ns.saturating_sub(self.shift_ns);
        if let (Some(t), Some(before)) = (p.think_ns.as_mut(), self.think_ns.take()) {
            *t += before;
        }
        if let Some(place) = p.seen.place.as_mut() {
            place.first |= std::mem::take(&mut self.opens);
        }
        s.requests.push(p);
    }

    fn leave_out(&mut self, p: Planned, s: &mut SessionPlan) {
        self.shift_ns += p.seen.response_ns.unwrap_or(0);
        if let Some(t) = p.think_ns {
            *self.think_ns.get_or_insert(0) += t;
        }
        if let Some(place) = p.seen.place {
            if place.first && !place.last {
                self.opens = true;
            }
            if place.last && !place.first {
                if std::mem::take(&mut self.opens) {
                    // Its transaction was left out whole.
                } else if let Some(prev) = s.requests.last_mut().and_then(|q| q.seen.place.as_mut()) {
                    // It ends at the request before, which is in it.
                    prev.last = true;
                }
            }
        }
        if let Some(c) = s.close_ns.as_mut() {
            *c = c.saturating_sub(p.seen.response_ns.unwrap_or(0));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::postgres::Frontend;
    use crate::replay::schedule::Seen;
    use connbench_trace::transaction::{Place, Work};

    /// One planned simple Query of statement `i`, 10 ms after the last, 1 ms think, 2 ms
    /// answered, at `place`.
    fn planned(i: usize, at_ms: u64, place: Option<(bool, bool)>) -> Planned {
        Planned {
            at_ns: at_ms * 1_000_000,
            wire: Wire::Postgres(vec![Frontend::Query(String::new())]),
            statement: Some(i),
            runs: vec![Some(i)],
            kill: None,
            work: Work::Runs,
            shape: None,
            think_ns: Some(1_000_000),
            seen: Seen {
                response_ns: Some(2_000_000),
                error: None,
                place: place.map(|(first, last)| Place { first, last }),
                ran: 1,
            },
        }
    }

    /// BEGIN, INSERT, COMMIT, the pool's reset, twice, and a SET at connect: without
    /// housekeeping the resets go, their think time joins the next request's, the rest
    /// of the session comes 2 ms earlier for each, and the SET is kept and named.
    #[test]
    fn housekeeping_left_out_takes_its_time_and_nothing_else() {
        let texts = [
            "SET TIME ZONE 'UTC'",
            "BEGIN",
            "INSERT INTO t VALUES (1)",
            "COMMIT",
            "RESET ALL",
        ];
        let statements = texts.iter().map(|t| fingerprint(t, Dialect::Postgres)).collect();
        let mut requests = vec![planned(0, 0, Some((true, true)))];
        for k in 0..2u64 {
            let at = 10 + 40 * k;
            requests.push(planned(1, at, Some((true, false))));
            requests.push(planned(2, at + 10, Some((false, false))));
            requests.push(planned(3, at + 20, Some((false, true))));
            requests.push(planned(4, at + 30, Some((true, true))));
        }
        let mut s = Schedule {
            statements,
            sessions: vec![SessionPlan {
                requests,
                close_ns: Some(100_000_000),
                ..SessionPlan::default()
            }],
            ..Schedule::default()
        };
        let l = apply(&mut s, &[Without::Housekeeping]);
        assert_eq!(l.requests, 2);
        assert_eq!(
            (l.rows.len(), l.rows[0].requests, l.rows[0].kind),
            (1, 2, Some(Kind::Reset))
        );
        assert_eq!((l.kept.len(), l.kept[0].kind), (1, Some(Kind::SessionSetup)));
        let r = &s.sessions[0].requests;
        assert_eq!(r.len(), 7);
        // The second BEGIN: 2 ms earlier, the reset's 1 ms think added to its own.
        assert_eq!((r[4].at_ns, r[4].think_ns), (48_000_000, Some(2_000_000)));
        assert_eq!(s.sessions[0].close_ns, Some(96_000_000));

        // A fingerprint named leaves out a statement inside a transaction: the INSERTs'
        // transactions still begin and end where they did.
        let mut named = Schedule {
            statements: s.statements.clone(),
            sessions: s.sessions.clone(),
            ..Schedule::default()
        };
        let commit = Without::Fingerprint(named.statements[3].id);
        let l = apply(&mut named, std::slice::from_ref(&commit));
        assert_eq!(l.requests, 2);
        let places: Vec<_> = named.sessions[0]
            .requests
            .iter()
            .map(|p| p.seen.place.unwrap())
            .collect();
        assert!(places[2].last && places[4].last, "{places:?}");
        assert_eq!(
            Without::parse("6ab42f507ac0c2de"),
            Ok(Without::Fingerprint(0x6ab42f507ac0c2de))
        );
        assert!(Without::parse("pings").unwrap_err().contains("16 hex digits"));
        assert_eq!(check(&named, std::slice::from_ref(&commit)), Ok(()));
        let typo = check(&named, &[Without::Fingerprint(1)]).unwrap_err();
        assert!(
            typo.contains("0000000000000001") && typo.contains("connbench trace"),
            "{typo}"
        );
    }
}

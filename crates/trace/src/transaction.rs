//! What a transaction is, defined once for `trace`'s profile, `replay`'s count and log,
//! and the suites that compare them (docs/trace.md, "Transactions").
//!
//! A transaction runs from the first request sent while the session is idle that runs a
//! statement, or prepares one it then runs, to the answer that leaves the session idle
//! again after something ran: an explicit BEGIN ... COMMIT, an implicit one (MySQL with
//! autocommit off, whose first statement opens it), or an autocommit statement alone.
//! The status comes from the answers: PostgreSQL's ReadyForQuery, MySQL's
//! SERVER_STATUS_IN_TRANS. An answer that carries none (MySQL's COM_STMT_CLOSE has no
//! answer; a request cut off has none) leaves the status as it was: taking "no status"
//! for "idle" split one MySQL booking of seven round trips into three transactions.
//!
//! A preparation sent while idle (PostgreSQL's Parse or Describe alone, MySQL's
//! COM_STMT_PREPARE) opens the transaction tentatively: the application pays its round
//! trip for the statement it runs next, so it counts in that transaction's time. One
//! that nothing ran after by the session's end is no transaction.

use crate::event::{Op, Outcome, Request, Step, TxStatus};

/// What a request does, as far as transactions go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// Runs a statement: a Query, an extended group with an Execute, COM_QUERY,
    /// COM_STMT_EXECUTE, a FunctionCall.
    Runs,
    /// Prepares or describes a statement without running it.
    Prepares,
    /// Neither: closing a statement, a ping, COM_INIT_DB, COM_QUIT.
    Other,
}

impl Work {
    pub fn of(op: &Op) -> Work {
        match op {
            Op::Query(_) | Op::ComQuery(_) | Op::ComStmtExecute { .. } | Op::FunctionCall { .. } => {
                Work::Runs
            }
            Op::Extended { steps } if steps.iter().any(|s| matches!(s, Step::Execute { .. })) => Work::Runs,
            Op::Extended { steps }
                if steps
                    .iter()
                    .any(|s| matches!(s, Step::Parse { .. } | Step::Describe { .. })) =>
            {
                Work::Prepares
            }
            Op::ComStmtPrepare(_) => Work::Prepares,
            _ => Work::Other,
        }
    }

    pub fn runs(self) -> bool {
        self == Work::Runs
    }
}

/// A request's place in its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// It opened the transaction (tentatively, for a preparation).
    pub first: bool,
    /// Its answer closed it.
    pub last: bool,
}

/// One session's transaction boundaries, fed its requests in order.
#[derive(Debug, Clone)]
pub struct Boundaries {
    status: TxStatus,
    /// The open transaction, and whether anything ran in it yet.
    open: Option<bool>,
}

impl Default for Boundaries {
    fn default() -> Self {
        Boundaries::new()
    }
}

impl Boundaries {
    pub fn new() -> Boundaries {
        Boundaries {
            status: TxStatus::Idle,
            open: None,
        }
    }

    /// A recorded request: its work, whether it was answered, the status it left.
    pub fn recorded(&mut self, r: &Request) -> Option<Place> {
        let answered = matches!(r.outcome, Outcome::Ok | Outcome::Error);
        self.request(Work::of(&r.op), answered, r.tx)
    }

    /// A request that does `work`, was `answered` or not, and whose answer left `after`
    /// (`None`: it carried no status). `None` when the request belongs to no
    /// transaction (a statement closed while idle).
    pub fn request(&mut self, work: Work, answered: bool, after: Option<TxStatus>) -> Option<Place> {
        if answered {
            if let Some(s) = after {
                self.status = s;
            }
        }
        let first = self.open.is_none();
        if first && !(work.runs() || (work == Work::Prepares && answered)) {
            return None;
        }
        let ran = self.open.get_or_insert(false);
        *ran |= work.runs();
        let last = answered && *ran && self.status == TxStatus::Idle;
        if last {
            self.open = None;
        }
        Some(Place { first, last })
    }

    /// The session ended: `true` when a transaction that ran something was open (it
    /// counts as far as it went); a tentative one, or none, is `false`.
    pub fn close(&mut self) -> bool {
        self.open.take() == Some(true)
    }

    /// The status the last answer left.
    pub fn status(&self) -> TxStatus {
        self.status
    }
}

/// The round trips a request adds to its transaction's time: its own
/// ([`Request::round_trips`]), and for the transaction's first request sent while an
/// earlier transaction's answer was still awaited (pipelined behind it) one more: it was
/// no round trip of the application's, but its own answer still comes a round trip
/// after it, so the transaction, from its first send to its last answer, takes one.
pub fn round_trips(r: &Request, place: Place) -> u64 {
    let answered = matches!(r.outcome, Outcome::Ok | Outcome::Error);
    r.round_trips() + u64::from(place.first && r.think_ns.is_none() && answered)
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: Work = Work::Runs;
    const P: Work = Work::Prepares;
    const O: Work = Work::Other;
    const IDLE: Option<TxStatus> = Some(TxStatus::Idle);
    const IN: Option<TxStatus> = Some(TxStatus::Transaction);

    fn places(steps: &[(Work, bool, Option<TxStatus>)]) -> Vec<Option<(bool, bool)>> {
        let mut b = Boundaries::new();
        steps
            .iter()
            .map(|&(w, a, s)| b.request(w, a, s).map(|p| (p.first, p.last)))
            .collect()
    }

    /// MySQL Connector/Python with autocommit off and a prepared cursor: prepare and
    /// run a SELECT (the implicit start), close it (no answer), prepare and run an
    /// UPDATE, COMMIT, close: one transaction from the first prepare to the COMMIT.
    #[test]
    fn an_implicit_mysql_transaction_with_prepared_statements_is_one() {
        let got = places(&[
            (P, true, IDLE),
            (R, true, IN),
            (O, false, None),
            (P, true, IN),
            (R, true, IN),
            (R, true, IDLE),
            (O, false, None),
        ]);
        let t = Some((false, false));
        assert_eq!(
            got,
            vec![Some((true, false)), t, t, t, t, Some((false, true)), None]
        );
    }

    /// Autocommit statements are each their own; BEGIN ... a failure ... ROLLBACK is
    /// one; a preparation alone at the end is none.
    #[test]
    fn autocommit_explicit_failed_and_tentative() {
        let failed = Some(TxStatus::Failed);
        let got = places(&[
            (R, true, IDLE),
            (R, true, IN),
            (R, true, failed),
            (R, true, IDLE),
            (P, true, IDLE),
        ]);
        assert_eq!(
            got,
            vec![
                Some((true, true)),
                Some((true, false)),
                Some((false, false)),
                Some((false, true)),
                Some((true, false)),
            ]
        );
        let mut b = Boundaries::new();
        b.request(P, true, IDLE);
        assert!(!b.close(), "a preparation nothing ran after is no transaction");
        b.request(R, false, None);
        assert!(b.close(), "a statement cut off counts as far as it went");
    }

    #[test]
    fn work_of_each_op() {
        let parse = Step::Parse {
            statement: "s".into(),
            sql: Default::default(),
            param_types: vec![],
        };
        let exec = Step::Execute {
            portal: String::new(),
            max_rows: 0,
        };
        assert_eq!(
            Work::of(&Op::Extended {
                steps: vec![parse.clone()]
            }),
            P
        );
        assert_eq!(
            Work::of(&Op::Extended {
                steps: vec![parse, exec]
            }),
            R
        );
        assert_eq!(Work::of(&Op::ComStmtPrepare(Default::default())), P);
        assert_eq!(Work::of(&Op::ComStmtClose { statement_id: 1 }), O);
        assert_eq!(Work::of(&Op::ComPing), O);
    }

    /// A transaction pipelined behind the one before it still takes a round trip from
    /// its first send to its answer; a request pipelined inside a transaction adds none.
    #[test]
    fn a_pipelined_transaction_takes_its_answers_round_trip() {
        let request = |think: &str| -> Request {
            serde_json::from_str(&format!(
                r#"{{"session":1,"seq":1,"at_ns":5,"think_ns":{think},"request_bytes":9,"op":"query","sql":"SELECT 1","outcome":"ok","first_byte_ns":1,"response_ns":2,"response_bytes":9,"rows":1,"tx":"idle"}}"#
            ))
            .unwrap()
        };
        let first = Place {
            first: true,
            last: true,
        };
        let inside = Place {
            first: false,
            last: false,
        };
        assert_eq!(round_trips(&request("null"), first), 1);
        assert_eq!(round_trips(&request("null"), inside), 0);
        assert_eq!(round_trips(&request("3"), first), 1);
        assert_eq!(round_trips(&request("3"), inside), 1);
    }
}

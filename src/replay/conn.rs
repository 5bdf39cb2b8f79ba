//! One replayed session's connection and its per-request wire calls, for either engine:
//! send a request as recorded, read its answer, time it. A MySQL connection also maps
//! the recorded server's statement ids to the ids its own server returned for the same
//! COM_STMT_PREPARE, so COM_STMT_EXECUTE and COM_STMT_CLOSE name the right statement.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::schedule::Wire;
use crate::proto::mysql::codec::COM_STMT_PREPARE;
use crate::proto::postgres::Frontend;
use crate::proto::{self, ConnectError};
use connbench_trace::event::TxStatus;

/// A replay's connection: the session, and (MySQL) the recorded server's statement ids
/// mapped to this connection's.
pub struct Conn {
    pub session: proto::Session,
    /// Recorded statement id -> this connection's.
    pub ids: HashMap<u32, u32>,
}

/// What came back for one request.
#[derive(Debug)]
pub struct Answer {
    /// The request's last byte written to the answer's last byte read; `None` for a
    /// command with no answer (COM_STMT_CLOSE).
    pub took: Option<Duration>,
    /// The error's key (PostgreSQL SQLSTATE, MySQL `code/SQLSTATE`) and message.
    pub error: Option<(String, String)>,
    pub status: TxStatus,
    /// COM_STMT_PREPARE: the id this connection's server gave the statement.
    pub prepared: Option<u32>,
    /// The statements that completed (PostgreSQL's CommandComplete messages; MySQL's
    /// answer without an error): with an error, the executions that ran are these and
    /// the one that failed.
    pub commands: usize,
}

impl Conn {
    pub fn new(session: proto::Session) -> Conn {
        Conn {
            session,
            ids: HashMap::new(),
        }
    }

    /// Sends `wire` and reads its answer. A `wire` of the other engine is refused.
    pub async fn exchange(&mut self, wire: &Wire) -> Result<Answer, ConnectError> {
        exchange(&mut self.session, &mut self.ids, wire).await
    }

    /// Sends a PostgreSQL group whose answer is read later, after the groups pipelined
    /// behind it ([`Conn::receive`]); returns when its last byte was written.
    pub async fn send(&mut self, msgs: &[Frontend]) -> Result<Instant, ConnectError> {
        send(&mut self.session, msgs).await
    }

    /// Reads the answer of the oldest group [`Conn::send`] sent, `written` then.
    pub async fn receive(&mut self, written: Instant) -> Result<Answer, ConnectError> {
        receive(&mut self.session, written).await
    }

    pub async fn close(self) {
        self.session.close().await
    }
}

/// Sends `wire` on `session` and reads its answer; a MySQL statement id is mapped through
/// `ids` (an id it lacks is sent as it is). A `wire` of the other engine is refused.
pub async fn exchange(
    session: &mut proto::Session,
    ids: &mut HashMap<u32, u32>,
    wire: &Wire,
) -> Result<Answer, ConnectError> {
    match (&mut *session, wire) {
        (proto::Session::Postgres(_), Wire::Postgres(msgs)) => {
            let written = send(session, msgs).await?;
            receive(session, written).await
        }
        (proto::Session::Mysql(session), Wire::Mysql(c)) => {
            let mapped;
            let payload = match c.statement_id {
                Some(recorded) => {
                    let now = ids.get(&recorded).copied().unwrap_or(recorded);
                    let mut p = c.payload.clone();
                    p[..4].copy_from_slice(&now.to_le_bytes());
                    mapped = p;
                    &mapped[..]
                }
                None => &c.payload[..],
            };
            session.send_command(c.code, payload).await?;
            let written = Instant::now();
            let out = if !c.answered {
                None
            } else if c.code == COM_STMT_PREPARE {
                Some(session.read_prepared().await?)
            } else {
                Some(session.read_answer().await?)
            };
            let took = out.as_ref().map(|_| written.elapsed());
            let prepared = out.as_ref().and_then(|o| o.statement_id);
            if let (Some(recorded), Some(now)) = (c.prepares, prepared) {
                ids.insert(recorded, now);
            }
            let status = if session.in_transaction() {
                TxStatus::Transaction
            } else {
                TxStatus::Idle
            };
            let error = out.and_then(|o| o.error);
            Ok(Answer {
                took,
                commands: usize::from(error.is_none()),
                error,
                status,
                prepared,
            })
        }
        _ => Err(other_engine()),
    }
}

/// Sends a PostgreSQL group: up to each Flush the recorded client waited after, then
/// its answer, as the client paid that round trip; then the rest. Returns when its last
/// byte was written, where its time starts, as the recorder times a request (its last
/// byte to its answer's last).
pub async fn send(session: &mut proto::Session, msgs: &[Frontend]) -> Result<Instant, ConnectError> {
    let proto::Session::Postgres(s) = session else {
        return Err(other_engine());
    };
    let mut rest = msgs;
    while let Some(at) = rest.iter().position(|m| *m == Frontend::FlushThenWait) {
        s.send_raw(&rest[..=at]).await?;
        s.await_answer().await?;
        rest = &rest[at + 1..];
    }
    s.send_raw(rest).await?;
    Ok(Instant::now())
}

/// Reads the answer, up to its ReadyForQuery, of the oldest PostgreSQL group sent and
/// not yet answered, `written` then.
pub async fn receive(session: &mut proto::Session, written: Instant) -> Result<Answer, ConnectError> {
    let proto::Session::Postgres(s) = session else {
        return Err(other_engine());
    };
    let out = s.read_raw().await?;
    Ok(Answer {
        took: Some(written.elapsed()),
        error: out.error,
        status: match out.status {
            b'T' => TxStatus::Transaction,
            b'E' => TxStatus::Failed,
            _ => TxStatus::Idle,
        },
        prepared: None,
        commands: out.commands as usize,
    })
}

fn other_engine() -> ConnectError {
    ConnectError::new(
        proto::Phase::Query,
        proto::ErrorKind::Config("the target speaks the other engine's protocol than the trace".into()),
    )
}

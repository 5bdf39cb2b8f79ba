//! One replayed session's connection and its per-request wire calls, for either engine:
//! send a request as recorded, read its answer, time it. A MySQL connection also maps
//! the recorded server's statement ids to the ids its own server returned for the same
//! COM_STMT_PREPARE, so COM_STMT_EXECUTE and COM_STMT_CLOSE name the right statement.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::schedule::Wire;
use crate::proto::{self, mysql, postgres, ConnectError};
use crate::trace::event::TxStatus;

/// A replay's connection.
pub enum Conn {
    Postgres(postgres::Session),
    Mysql {
        session: mysql::Session,
        /// Recorded statement id -> this connection's.
        ids: HashMap<u32, u32>,
    },
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
}

impl Conn {
    pub fn new(s: proto::Session) -> Conn {
        match s {
            proto::Session::Postgres(s) => Conn::Postgres(s),
            proto::Session::Mysql(s) => Conn::Mysql {
                session: s,
                ids: HashMap::new(),
            },
        }
    }

    /// Sends `wire` and reads its answer. A `wire` of the other engine is refused.
    pub async fn exchange(&mut self, wire: &Wire) -> Result<Answer, ConnectError> {
        match (self, wire) {
            (Conn::Postgres(s), Wire::Postgres(msgs)) => {
                s.send_raw(msgs).await?;
                let written = Instant::now();
                let out = s.read_raw().await?;
                Ok(Answer {
                    took: Some(written.elapsed()),
                    error: out.error,
                    status: match out.status {
                        b'T' => TxStatus::Transaction,
                        b'E' => TxStatus::Failed,
                        _ => TxStatus::Idle,
                    },
                })
            }
            (Conn::Mysql { session, ids }, Wire::Mysql(c)) => {
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
                } else if c.code == super::mysql::COM_STMT_PREPARE {
                    Some(session.read_prepared().await?)
                } else {
                    Some(session.read_answer().await?)
                };
                let took = out.as_ref().map(|_| written.elapsed());
                if let (Some(recorded), Some(now)) = (c.prepares, out.as_ref().and_then(|o| o.statement_id)) {
                    ids.insert(recorded, now);
                }
                let status = if session.in_transaction() {
                    TxStatus::Transaction
                } else {
                    TxStatus::Idle
                };
                Ok(Answer {
                    took,
                    error: out.and_then(|o| o.error),
                    status,
                })
            }
            _ => Err(ConnectError::new(
                proto::Phase::Query,
                proto::ErrorKind::Config(
                    "the target speaks the other engine's protocol than the trace".into(),
                ),
            )),
        }
    }

    pub async fn close(self) {
        match self {
            Conn::Postgres(s) => s.close().await,
            Conn::Mysql { session, .. } => session.close().await,
        }
    }
}

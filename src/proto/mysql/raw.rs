//! Recorded commands, sent as they were: the raw-command side of the MySQL/MariaDB
//! session that `connbench replay` drives. A caller sends one command packet (its code
//! and payload as recorded, a statement id already mapped to this connection's) and
//! reads its answer: OK, an error, result sets (text or binary rows, counted), or
//! COM_STMT_PREPARE_OK with the statement id the server now gives.
//!
//! A server error is an answer here, not a failure: the session stays usable, and the
//! caller counts it (`code/SQLSTATE`, as the session's errors key them). Only a broken
//! socket or a malformed packet is an `Err`.

use super::{ConnectError, ErrorKind, Phase, Session};

/// What the server answered to one command.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CommandOutcome {
    /// Rows returned (or affected, when none were returned).
    pub rows: u64,
    /// The error's `code/SQLSTATE` and message.
    pub error: Option<(String, String)>,
    /// SERVER_STATUS_IN_TRANS after the answer.
    pub in_transaction: bool,
    /// COM_STMT_PREPARE_OK's statement id.
    pub statement_id: Option<u32>,
}

impl Session {
    /// Sends command `cmd` with `payload` as one packet (a new sequence).
    pub async fn send_command(&mut self, cmd: u8, payload: &[u8]) -> Result<(), ConnectError> {
        self.command(cmd);
        self.wbuf.extend_from_slice(payload);
        self.send(Phase::Query).await
    }

    /// Reads a command's answer: OK, ERR or result sets.
    pub async fn read_answer(&mut self) -> Result<CommandOutcome, ConnectError> {
        let r = self.response(Phase::Query, |_| {}).await;
        self.outcome(r.map(|rows| (rows, None)))
    }

    /// Reads COM_STMT_PREPARE's answer: the new statement id, or the error.
    pub async fn read_prepared(&mut self) -> Result<CommandOutcome, ConnectError> {
        let r = self.read_prepare_ok(Phase::Query).await;
        self.outcome(r.map(|id| (0, Some(id))))
    }

    /// A server error as an answer; anything else that failed as the failure.
    fn outcome(&self, r: Result<(u64, Option<u32>), ConnectError>) -> Result<CommandOutcome, ConnectError> {
        let in_transaction = self.in_transaction();
        match r {
            Ok((rows, statement_id)) => Ok(CommandOutcome {
                rows,
                error: None,
                in_transaction,
                statement_id,
            }),
            Err(ConnectError {
                kind: ErrorKind::Server { code, message },
                ..
            }) if !self.broken => Ok(CommandOutcome {
                rows: 0,
                error: Some((code, message)),
                in_transaction,
                statement_id: None,
            }),
            Err(e) => Err(e),
        }
    }
}

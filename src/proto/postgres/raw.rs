//! Recorded frontend messages, sent as they were: the raw-message side of the PostgreSQL
//! session that `connbench replay` drives. A caller hands over the messages of one
//! request (a simple Query, or an extended-protocol group with its own statement and
//! portal names and parameter bytes, ended by a Sync) and reads the answer to its
//! ReadyForQuery, counting rows and command tags and keeping the first error's SQLSTATE.
//!
//! A server error is an answer here, not a failure: the session stays usable, and the
//! caller counts it. Only a broken socket or a message the protocol does not allow is an
//! `Err`. COPY has no recorded data to send (the trace keeps its size only), so a
//! `COPY ... FROM STDIN` is refused with CopyFail, which the server answers with an
//! error the caller counts (protocol §55.2.6), and a COPY's output is read and dropped.

use postgres_protocol::message::{backend::Message, frontend};

use super::{protocol, server_error, ConnectError, ErrorKind, Phase, Session};

/// One frontend message as recorded (protocol §55.7), values already decoded to bytes.
#[derive(Debug, Clone, PartialEq)]
pub enum Frontend {
    Query(String),
    Parse {
        name: String,
        sql: String,
        param_types: Vec<u32>,
    },
    Bind {
        portal: String,
        statement: String,
        /// Per parameter: binary format, and its bytes (`None`: SQL NULL).
        params: Vec<(bool, Option<Vec<u8>>)>,
        result_formats: Vec<i16>,
    },
    /// `what`: `S` a statement, `P` a portal.
    Describe {
        what: u8,
        name: String,
    },
    Execute {
        portal: String,
        max_rows: i32,
    },
    Close {
        what: u8,
        name: String,
    },
    Flush,
    /// A Flush after which the sender waits for the answer so far before it sends
    /// the rest (as the recorded client did: `connbench replay` pays its round trip).
    FlushThenWait,
    Sync,
}

/// What the server answered up to its ReadyForQuery.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawOutcome {
    /// DataRow messages.
    pub rows: u64,
    /// CommandComplete messages (one per statement that ran to its end).
    pub commands: u32,
    /// The first ErrorResponse's SQLSTATE and message.
    pub error: Option<(String, String)>,
    /// ReadyForQuery's status: `I`, `T` or `E`.
    pub status: u8,
}

/// Why COPY FROM STDIN is refused: the trace has its size, not its data.
const COPY_FAIL: &str = "connbench replay: the trace does not keep COPY data";

impl Session {
    /// Writes `msgs` and sends them in one write.
    pub async fn send_raw(&mut self, msgs: &[Frontend]) -> Result<(), ConnectError> {
        let p = Phase::Query;
        for m in msgs {
            let buf = &mut self.wbuf;
            match m {
                Frontend::Query(sql) => frontend::query(sql, buf).map_err(|e| protocol(p, e))?,
                Frontend::Parse {
                    name,
                    sql,
                    param_types,
                } => frontend::parse(name, sql, param_types.iter().copied(), buf)
                    .map_err(|e| protocol(p, e))?,
                Frontend::Bind {
                    portal,
                    statement,
                    params,
                    result_formats,
                } => frontend::bind(
                    portal,
                    statement,
                    params.iter().map(|(binary, _)| i16::from(*binary)),
                    params.iter().map(|(_, v)| v.as_deref()),
                    |v: Option<&[u8]>, b: &mut bytes::BytesMut| match v {
                        Some(v) => {
                            b.extend_from_slice(v);
                            Ok(postgres_protocol::IsNull::No)
                        }
                        None => Ok(postgres_protocol::IsNull::Yes),
                    },
                    result_formats.iter().copied(),
                    buf,
                )
                .map_err(|_| ConnectError::new(p, ErrorKind::Protocol("cannot encode Bind".into())))?,
                Frontend::Describe { what, name } => {
                    frontend::describe(*what, name, buf).map_err(|e| protocol(p, e))?
                }
                Frontend::Execute { portal, max_rows } => {
                    frontend::execute(portal, *max_rows, buf).map_err(|e| protocol(p, e))?
                }
                Frontend::Close { what, name } => {
                    frontend::close(*what, name, buf).map_err(|e| protocol(p, e))?
                }
                Frontend::Flush | Frontend::FlushThenWait => frontend::flush(buf),
                Frontend::Sync => frontend::sync(buf),
            }
        }
        self.send(p).await
    }

    /// Waits until the server has answered something (a whole message is buffered),
    /// consuming nothing: what a client does after a Flush before it goes on.
    pub async fn await_answer(&mut self) -> Result<(), ConnectError> {
        let p = Phase::Query;
        loop {
            match self.buffered_message(p) {
                Ok(Some(_)) => return Ok(()),
                Ok(None) => self.fill(p).await?,
                Err(e) => {
                    self.broken = true;
                    return Err(e);
                }
            }
        }
    }

    /// Reads the answer up to the next ReadyForQuery.
    pub async fn read_raw(&mut self) -> Result<RawOutcome, ConnectError> {
        let p = Phase::Query;
        let mut out = RawOutcome::default();
        loop {
            if let Err(e) = self.buffered_message(p) {
                self.broken = true;
                return Err(e);
            }
            let m = match Message::parse(&mut self.rbuf) {
                Ok(Some(m)) => m,
                Ok(None) => {
                    self.fill(p).await?;
                    continue;
                }
                Err(e) => {
                    self.broken = true;
                    return Err(ConnectError::new(
                        p,
                        ErrorKind::Protocol(format!("malformed message from the server: {e}")),
                    ));
                }
            };
            match m {
                Message::DataRow(_) => out.rows += 1,
                Message::CommandComplete(_) => out.commands += 1,
                Message::ErrorResponse(body) if out.error.is_none() => {
                    if let ErrorKind::Server { code, message } = server_error(&body) {
                        out.error = Some((code, message));
                    }
                }
                Message::CopyInResponse(_) => {
                    frontend::copy_fail(COPY_FAIL, &mut self.wbuf).map_err(|e| protocol(p, e))?;
                    self.send(p).await?;
                }
                Message::ReadyForQuery(body) => {
                    out.status = body.status();
                    self.transaction_status = out.status;
                    return Ok(out);
                }
                // ParseComplete, BindComplete, RowDescription, NoData, notices, COPY's
                // output, ParameterStatus, notifications: nothing to count.
                _ => {}
            }
        }
    }
}

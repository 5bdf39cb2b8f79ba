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

use bytes::Buf;
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

    /// Reads the answer up to the next ReadyForQuery. The messages a replay only counts
    /// or passes over are read in place, as [`Session::finish_statement`] reads them
    /// (parsing each split it off the buffer: an allocation and reference counts a
    /// message); an error, a COPY's start, and any tag not listed here are parsed, so
    /// a tag the protocol does not have is still refused.
    pub async fn read_raw(&mut self) -> Result<RawOutcome, ConnectError> {
        let p = Phase::Query;
        let mut out = RawOutcome::default();
        loop {
            let next = self.buffered_message(p).inspect_err(|_| self.broken = true)?;
            let Some((tag, len)) = next else {
                self.fill(p).await?;
                continue;
            };
            match tag {
                b'D' => out.rows += 1,
                b'C' => out.commands += 1,
                b'Z' => {
                    if len != 6 {
                        self.broken = true;
                        let why = format!("the server sent a ReadyForQuery of {} bytes; it has 1", len - 1);
                        return Err(ConnectError::new(p, ErrorKind::Protocol(why)));
                    }
                    out.status = self.rbuf[5];
                    self.transaction_status = out.status;
                    self.rbuf.advance(len);
                    return Ok(out);
                }
                // ParseComplete, BindComplete, CloseComplete, RowDescription, NoData,
                // ParameterDescription, EmptyQueryResponse, PortalSuspended, notices,
                // ParameterStatus, notifications, COPY's output: nothing to count.
                b'1' | b'2' | b'3' | b'T' | b'n' | b't' | b'I' | b's' | b'N' | b'S' | b'A' | b'H' | b'W'
                | b'd' | b'c' => {}
                _ => {
                    self.parsed(&mut out).await?;
                    continue;
                }
            }
            self.rbuf.advance(len);
        }
    }

    /// The next message, whole in the buffer, parsed: a first error kept, a COPY FROM
    /// STDIN refused; anything else the protocol has passed over.
    async fn parsed(&mut self, out: &mut RawOutcome) -> Result<(), ConnectError> {
        let p = Phase::Query;
        let m = match Message::parse(&mut self.rbuf) {
            Ok(Some(m)) => m,
            // Not reached (the message is whole in the buffer), but a peer's bytes never
            // decide a panic.
            Ok(None) => return Err(self.malformed("a message shorter than its length")),
            Err(e) => return Err(self.malformed(&e.to_string())),
        };
        match m {
            Message::ErrorResponse(body) if out.error.is_none() => {
                if let ErrorKind::Server { code, message } = server_error(&body) {
                    out.error = Some((code, message));
                }
            }
            Message::CopyInResponse(_) => {
                frontend::copy_fail(COPY_FAIL, &mut self.wbuf).map_err(|e| protocol(p, e))?;
                self.send(p).await?;
            }
            // A later error, the messages read in place above when parsed here: nothing
            // to count.
            _ => {}
        }
        Ok(())
    }

    fn malformed(&mut self, why: &str) -> ConnectError {
        self.broken = true;
        ConnectError::new(
            Phase::Query,
            ErrorKind::Protocol(format!("malformed message from the server: {why}")),
        )
    }
}

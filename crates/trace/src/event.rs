//! The trace's vocabulary: the header and the events a recording writes, one JSON object
//! per line (docs/trace.md is the format's reference; this file is its source of truth).
//!
//! A trace is a header, then events in the order they complete: a session's
//! `session_open` (written once its connect has finished or failed), each `request` of it
//! (written once its response has ended, so request and response are one record), and its
//! `session_close`. Sessions interleave; within one session the order is open, requests
//! by `seq`, close. Times are integer nanoseconds: a session's `open_ns` counts from the
//! trace's start (the header's `start_time`), everything else of the session from its
//! `open_ns`. A figure the recorder could not measure is `null` (or absent), never 0.
//!
//! Nothing here holds a password, an authentication payload or a cancel key: the
//! decoders never copy them out of the wire, so no type has a field for them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Engine;

/// The `format` a trace's header names.
pub const FORMAT: &str = "connbench-trace";
/// The version this connbench writes, and the newest it reads.
pub const VERSION: u32 = 1;

/// One line of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    Header(Header),
    SessionOpen(Box<SessionOpen>),
    Request(Box<Request>),
    SessionClose(SessionClose),
}

impl Event {
    /// The `type` of this event as written.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Header(_) => "header",
            Event::SessionOpen(_) => "session_open",
            Event::Request(_) => "request",
            Event::SessionClose(_) => "session_close",
        }
    }
}

/// The names of the event types this version reads.
pub const EVENT_TYPES: [&str; 4] = ["header", "session_open", "request", "session_close"];

/// The first line: what the file is and how it was recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Always [`FORMAT`].
    pub format: String,
    /// The format's version ([`VERSION`] when written by this connbench).
    pub version: u32,
    /// The wire protocol recorded: `postgres` or `mysql` (MySQL and MariaDB).
    #[serde(with = "engine_name")]
    pub engine: Engine,
    /// The connbench that recorded it (`connbench 0.1.0 (3f2a9c1, built ...)`).
    pub recorder: String,
    /// The trace's start, RFC 3339 UTC with microseconds; `open_ns` counts from it.
    pub start_time: String,
    #[serde(default)]
    pub options: RecordOptions,
    /// Set when the trace was read from a packet capture (`connbench record
    /// --from-pcap`) rather than recorded by the hop: what was read and where it was
    /// taken, since every time in the trace is then the capture point's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureSource>,
}

/// Where a trace read from a packet capture came from.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CaptureSource {
    /// The capture file as given.
    pub file: String,
    /// The server's TCP port: the connections read were those to and from it.
    pub server_port: u16,
    /// The capture's link type (`ethernet`, `linux_sll`, `linux_sll2`, `null`, `raw`).
    pub link: String,
    /// The interface it was taken on, when the file says (pcapng's `if_name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
}

impl Header {
    /// A header for a recording of `engine` starting now, by `recorder` (the recording
    /// program and its version: the format does not know who writes it).
    pub fn new(engine: Engine, recorder: String, options: RecordOptions) -> Header {
        Header {
            format: FORMAT.to_string(),
            version: VERSION,
            engine,
            recorder,
            start_time: humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string(),
            options,
            capture: None,
        }
    }
}

/// How the recording was made.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RecordOptions {
    /// Parameter values, literals in SQL text and error messages were left out; their
    /// types and sizes were kept.
    #[serde(default)]
    pub redact_values: bool,
    /// The address the recorder listened on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// The address it relayed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// The recorder opened TLS to the upstream itself (the app's side is plaintext).
    #[serde(default)]
    pub upstream_tls: bool,
    /// The recorder terminated the application's TLS with a certificate of its own
    /// (`record --listen-tls`): a session's `tls` says which used it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub listen_tls: bool,
}

/// How the client reached the recorder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    Unix,
    Tcp,
}

/// A connection's set-up: who, how, and how long each phase took.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SessionOpen {
    /// The recorder's number for the connection, unique within the trace.
    pub session: u64,
    /// When the recorder accepted it, since the trace's start.
    pub open_ns: u64,
    pub transport: Option<Transport>,
    /// The client asked for TLS (PostgreSQL's SSLRequest, MySQL's CLIENT_SSL).
    pub tls_requested: bool,
    /// PostgreSQL's GSSENCRequest.
    #[serde(default, skip_serializing_if = "is_false")]
    pub gss_requested: bool,
    /// The client's bytes went on encrypted, so nothing after the request was decoded.
    #[serde(default, skip_serializing_if = "is_false")]
    pub encrypted: bool,
    /// The application's connection was TLS, which the recorder terminated (`record
    /// --listen-tls`): what is inside was decoded. Its handshake is in `phases`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub tls: bool,
    /// The TLS version negotiated with the application (`TLSv1.3`), when `tls`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_version: Option<String>,
    /// A PostgreSQL CancelRequest connection (its secret key is never written).
    #[serde(default, skip_serializing_if = "is_false")]
    pub cancel_request: bool,
    /// `trust`, `cleartext`, `md5`, `SCRAM-SHA-256`, ... or MySQL's plugin name.
    pub auth_method: Option<String>,
    pub user: Option<String>,
    pub database: Option<String>,
    /// PostgreSQL's startup parameters or MySQL's connection attributes, without the
    /// user and database and without anything whose name suggests a secret.
    #[serde(default)]
    pub parameters: BTreeMap<String, String>,
    /// The names of parameters left out as possible secrets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters_withheld: Vec<String>,
    /// What the server reported: PostgreSQL's ParameterStatus, MySQL's version.
    #[serde(default)]
    pub server: BTreeMap<String, String>,
    /// The server's process (PostgreSQL BackendKeyData) or thread (MySQL) id.
    pub backend_pid: Option<u32>,
    /// PostgreSQL's protocol version (`3.0`), MySQL's handshake protocol (`10`).
    pub protocol: Option<String>,
    /// MySQL: the capability flags the client asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_capabilities: Option<u64>,
    pub phases: Phases,
    /// The session became ready for requests.
    pub ready: bool,
    /// Read from a capture that began after the connection opened: its startup was not
    /// seen, so user, database, authentication and phases are unknown (`null`), and
    /// `open_ns` is when the capture first saw it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub joined: bool,
    /// The server refused the connection.
    pub error: Option<ServerError>,
}

/// The connect's phases as the recorder saw them, in protocol words (docs/statistics.md):
/// each from the first byte of what starts it to the last byte of what ends it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Phases {
    /// The recorder's own connect to the upstream.
    pub connect_ns: Option<u64>,
    /// The client's TLS request to its answer.
    pub tls_ns: Option<u64>,
    /// PostgreSQL: StartupMessage to the server's first authentication message.
    /// MySQL: the upstream connect to the server's greeting.
    pub startup_ns: Option<u64>,
    /// To AuthenticationOk (PostgreSQL) or the OK packet (MySQL).
    pub auth_ns: Option<u64>,
    /// The client's authentication messages: the round trips `auth` waited for.
    pub auth_round_trips: Option<u32>,
    /// PostgreSQL: AuthenticationOk to ReadyForQuery.
    pub ready_ns: Option<u64>,
    /// The application's TLS handshake with the recorder (`tls`): from its start
    /// (PostgreSQL: the `S` sent; MySQL: the SSLRequest read) to the client's Finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_handshake_ns: Option<u64>,
    /// The handshake's round trips: the recorder's flights the client waited for (TLS
    /// 1.3: 1, TLS 1.2: 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_handshake_round_trips: Option<u32>,
}

/// One request and its response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub session: u64,
    /// 0, 1, 2, ... within the session.
    pub seq: u64,
    /// The request's first byte, since the session's open.
    pub at_ns: u64,
    /// The client's think time: from the end of the previous response (or of the
    /// connect) to this request's first byte; `null` when it was sent while an earlier
    /// request still awaited its answer (pipelined).
    pub think_ns: Option<u64>,
    pub request_bytes: u64,
    #[serde(flatten)]
    pub op: Op,
    pub outcome: Outcome,
    /// The request's last byte to the response's first byte (0 when the response
    /// began before the request ended, as after a Flush).
    pub first_byte_ns: Option<u64>,
    /// The request's last byte to the response's last (PostgreSQL's ReadyForQuery,
    /// MySQL's final packet).
    pub response_ns: Option<u64>,
    pub response_bytes: u64,
    /// Rows returned (DataRow messages, MySQL row packets).
    pub rows: u64,
    /// Rows a command reported as affected (PostgreSQL's tag, MySQL's OK packet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affected_rows: Option<u64>,
    /// PostgreSQL's command tags (`SELECT 1`, `UPDATE 1`), one per statement.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ServerError>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub notices: u64,
    /// COPY ... FROM STDIN data the client sent.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub copy_in_bytes: u64,
    /// COPY ... TO STDOUT data the server sent.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub copy_out_bytes: u64,
    /// MySQL COM_STMT_PREPARE: what the server prepared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepared: Option<Prepared>,
    /// The transaction status after the response.
    pub tx: Option<TxStatus>,
    /// MySQL: autocommit was on after the response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autocommit: Option<bool>,
}

impl Request {
    /// The round trips the client waited for in this request: one when it was sent
    /// after the previous answer (not pipelined) and has an answer, and one more for
    /// each Flush inside it after which the client waited for the answer so far.
    pub fn round_trips(&self) -> u64 {
        let own = self.think_ns.is_some() && self.outcome != Outcome::NoResponse;
        let inner = match &self.op {
            Op::Extended { steps } => steps
                .iter()
                .filter(|s| matches!(s, Step::Flush { waited: true }))
                .count() as u64,
            _ => 0,
        };
        u64::from(own) + inner
    }
}

/// What a request asked, by protocol.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// PostgreSQL's simple Query.
    Query(Sql),
    /// PostgreSQL's extended protocol: the messages up to and including a Sync.
    Extended {
        steps: Vec<Step>,
    },
    /// PostgreSQL's FunctionCall (its arguments are not kept).
    FunctionCall {
        function_oid: u32,
        args: u32,
    },
    ComQuery(Sql),
    ComStmtPrepare(Sql),
    ComStmtExecute {
        statement_id: u32,
        /// The cursor flags byte.
        flags: u8,
        /// `null` when they could not be read: the packet was over the decoder's cap, or
        /// the statement's parameter count was not known.
        params: Option<Vec<Param>>,
    },
    ComStmtClose {
        statement_id: u32,
    },
    ComStmtReset {
        statement_id: u32,
    },
    ComPing,
    ComInitDb {
        schema: String,
    },
    ComQuit,
    /// Any other command, by code and name (its payload is not kept: COM_CHANGE_USER's
    /// holds authentication data).
    ComOther {
        command: u8,
        name: String,
    },
}

/// Statement text as sent, or with its literals replaced when values are redacted.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Sql {
    /// `null` when the message was over the decoder's size cap.
    pub sql: Option<String>,
    /// With `redact_values`: each literal replaced by a placeholder, its kind and size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub literals: Option<Vec<Literal>>,
}

/// A literal taken out of SQL text by redaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Literal {
    /// `number`, `string` or `bits`.
    pub kind: String,
    /// Its length in the SQL text, quotes included.
    pub len: u64,
}

/// One message of an extended-protocol group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    Parse {
        statement: String,
        #[serde(flatten)]
        sql: Sql,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        param_types: Vec<u32>,
    },
    Bind {
        portal: String,
        statement: String,
        /// `null` when the message was over the decoder's cap.
        params: Option<Vec<Param>>,
        /// 0 text, 1 binary: one for all columns, or one per column.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        result_formats: Vec<u16>,
    },
    /// `what`: `statement` or `portal`.
    Describe {
        what: String,
        name: String,
    },
    Execute {
        portal: String,
        max_rows: u32,
    },
    Close {
        what: String,
        name: String,
    },
    /// `waited`: the client waited for the server's answer to the steps before it
    /// before it sent the rest of the group (asyncpg prepares a statement with Parse,
    /// Describe and Flush, then binds it once described): a round trip of its own
    /// inside the request.
    Flush {
        #[serde(default, skip_serializing_if = "is_false")]
        waited: bool,
    },
    /// Messages of the group beyond the decoder's cap, counted only.
    Dropped {
        count: u64,
    },
}

/// A bound parameter value.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Param {
    /// PostgreSQL: the type's OID, when the Parse or a ParameterDescription gave it.
    /// MySQL: the field type code with the unsigned flag (0x8000) as the wire has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub type_id: Option<u32>,
    /// PostgreSQL: the value's format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<Format>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub null: bool,
    /// The value's size on the wire, in bytes.
    pub len: u64,
    /// The value as text (PostgreSQL text format; MySQL numbers, dates and UTF-8
    /// strings), absent when redacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The value's bytes in hex where they are not text, absent when redacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hex: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Text,
    Binary,
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    /// The server answered with an error (see `error`).
    Error,
    /// The command has no response (MySQL's COM_STMT_CLOSE, COM_QUIT).
    NoResponse,
    /// The session ended, or stopped being decoded, before the response did.
    Unanswered,
}

/// A server's error or refusal.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ServerError {
    pub sqlstate: Option<String>,
    /// MySQL's error number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    /// PostgreSQL's severity (`ERROR`, `FATAL`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
    /// The message, `null` when values are redacted (messages quote values).
    pub message: Option<String>,
}

/// MySQL COM_STMT_PREPARE_OK.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prepared {
    pub statement_id: u32,
    pub params: u16,
    pub columns: u16,
}

/// The transaction status after a response: PostgreSQL's ReadyForQuery `I`/`T`/`E`;
/// MySQL's SERVER_STATUS_IN_TRANS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TxStatus {
    Idle,
    Transaction,
    Failed,
}

/// Who ended a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClosedBy {
    /// Terminate, COM_QUIT, or the client's end of the socket first.
    Client,
    /// The server's end first, or a FATAL error.
    Server,
    /// The recording stopped with the session open.
    Recorder,
}

/// A session's end and its totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionClose {
    pub session: u64,
    /// Since the session's open.
    pub at_ns: u64,
    pub by: ClosedBy,
    pub requests: u64,
    pub bytes_to_server: u64,
    pub bytes_to_client: u64,
    /// A FATAL error the server sent outside any request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ServerError>,
    /// Why the decoder stopped decoding and passed the rest through (encrypted traffic,
    /// a malformed or oversized message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_error: Option<String>,
    /// Bytes passed through without being decoded, both directions.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub undecoded_bytes: u64,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `Engine` as `postgres` / `mysql` both ways, with the error this format names (the
/// enum itself only serialises).
mod engine_name {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::Engine;

    pub fn serialize<S: Serializer>(e: &Engine, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match e {
            Engine::Postgres => "postgres",
            Engine::Mysql => "mysql",
        })
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Engine, D::Error> {
        match String::deserialize(d)?.as_str() {
            "postgres" => Ok(Engine::Postgres),
            "mysql" => Ok(Engine::Mysql),
            other => Err(serde::de::Error::custom(format!(
                "engine {other:?} is neither postgres nor mysql"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reads_back_as_written_with_its_op_flat_beside_the_times() {
        let r = Event::Request(Box::new(Request {
            session: 3,
            seq: 0,
            at_ns: 10,
            think_ns: None,
            request_bytes: 40,
            op: Op::Extended {
                steps: vec![
                    Step::Parse {
                        statement: "s1".into(),
                        sql: Sql {
                            sql: Some("SELECT $1".into()),
                            literals: None,
                        },
                        param_types: vec![23],
                    },
                    Step::Bind {
                        portal: String::new(),
                        statement: "s1".into(),
                        params: Some(vec![Param {
                            type_id: Some(23),
                            format: Some(Format::Text),
                            len: 1,
                            text: Some("7".into()),
                            ..Param::default()
                        }]),
                        result_formats: vec![],
                    },
                    Step::Flush { waited: false },
                ],
            },
            outcome: Outcome::Ok,
            first_byte_ns: Some(5),
            response_ns: Some(u64::MAX),
            response_bytes: 30,
            rows: 1,
            affected_rows: None,
            tags: vec!["SELECT 1".into()],
            error: None,
            notices: 0,
            copy_in_bytes: 0,
            copy_out_bytes: 0,
            prepared: None,
            tx: Some(TxStatus::Idle),
            autocommit: None,
        }));
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.starts_with(r#"{"type":"request","session":3"#), "{line}");
        assert!(
            line.contains(r#""op":"extended","steps":[{"step":"parse","statement":"s1","sql":"SELECT $1""#),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), r, "{line}");
        let h = Event::Header(Header::new(
            Engine::Mysql,
            "connbench test".into(),
            RecordOptions::default(),
        ));
        let line = serde_json::to_string(&h).unwrap();
        assert!(line.contains(r#""engine":"mysql""#), "{line}");
        assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), h);
    }
}

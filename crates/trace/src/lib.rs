//! connbench's application-trace format, a crate of its own: what a trace is, how it is
//! written and read, and how the bytes a relay carries become trace events. It depends
//! on nothing of connbench's (Cargo holds it to that), so other tools can read and write
//! traces with it. Everything here is pure: no sockets, no clocks of its own. The relay
//! owns the sockets and stamps each chunk it reads with the time since the trace's
//! start; this crate turns chunks into events and events into lines.
//!
//! - [`event`]: the format's vocabulary (header, `session_open`, `request`,
//!   `session_close`); docs/trace.md describes it for other tools.
//! - [`writer`] and [`reader`]: JSON Lines, optionally gzip, streamed both ways in
//!   bounded memory; the reader names the line of anything it cannot read.
//! - [`Decoder`], over `postgres` and `mysql`: one per relayed connection, fed both
//!   directions' bytes as they pass (cut anywhere) and giving events. A decoder never
//!   panics and never holds more than its caps, whatever a peer sends: on bytes it
//!   cannot follow (encrypted, malformed, oversized) it says why once and lets the rest
//!   through undecoded, so the relay keeps relaying.
//! - [`fingerprint`]: normalised statements and `--redact-values`' literal removal.
//! - [`executions`]: what a request executed, an execution per Execute of a pipelined
//!   group, for the profile and the replay alike.
//! - [`profile`] and [`shapes`]: what `connbench trace` reports of an application, read
//!   from its events in one pass; its transactions grouped by shape; [`timeline`], a
//!   bounded sample of its sessions and requests in time, for a picture.
//! - [`housekeeping`]: what the application's driver and pool sent that its code did
//!   not write (pre-pings, resets, set-up, look-ups), recognised and tallied.
//!
//! The decoders feed on what each side *received*: when the recorder answers a client's
//! TLS request itself (PostgreSQL's `N`), it feeds that answer as the server's bytes.

mod connection;
pub mod event;
pub mod executions;
pub mod fingerprint;
mod frame;
pub mod housekeeping;
pub mod mysql;
mod mysql_packet;
pub mod postgres;
pub mod reader;
pub mod profile;
mod session;
pub mod shapes;
mod spread;
pub mod timeline;
pub mod transaction;
#[cfg(test)]
mod testing;
pub mod writer;

pub use event::{CaptureSource, ClosedBy, Event, Header, RecordOptions, Transport};
pub use fingerprint::{fingerprint, redact_literals, Dialect, Fingerprint};
pub use reader::{ReadError, TraceReader};
pub use writer::{Compression, TraceWriter};

use event::Sql;

/// The database engines connbench speaks, by wire protocol; a trace's header says which
/// one it holds. Defined here, in the crate that depends on nothing of connbench's, so
/// the format owns its vocabulary; connbench's `targets::Engine` is this enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    #[default]
    Postgres,
    /// MySQL and MariaDB: one wire protocol.
    Mysql,
}

/// Which way bytes were going.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the client to the server.
    ToServer,
    /// From the server to the client.
    ToClient,
}

/// What the relay knows about a connection when it hands it to a decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionMeta {
    /// Unique within the trace.
    pub session: u64,
    /// When the relay accepted the client, since the trace's start.
    pub open_ns: u64,
    pub transport: Transport,
    /// How long the relay's own connect to the upstream took.
    pub connect_ns: Option<u64>,
    /// The recorder answers the client's TLS itself (`record --listen-tls`) and feeds
    /// what is inside: an accepted encryption request is followed by plaintext, not by
    /// bytes the decoder cannot read.
    pub tls_terminated: bool,
}

/// The application's TLS handshake as the recorder that terminated it measured it: from
/// its start (PostgreSQL: the recorder's `S` written; MySQL: the client's SSLRequest
/// read) to the client's Finished read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsAccepted {
    /// `TLSv1.3`, `TLSv1.2`.
    pub version: Option<String>,
    pub handshake_ns: u64,
    /// The recorder's flights the client waited for (TLS 1.3: 1; 1.2: 2; a
    /// HelloRetryRequest adds one).
    pub round_trips: u32,
}

/// How decoders treat what they see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Keep parameter types and sizes but not values; literals in SQL text become
    /// placeholders; error messages are left out.
    pub redact_values: bool,
    /// The largest message decoded whole. A larger one is counted and relayed; its SQL
    /// or values are `null` in the trace. Also what a decoder holds at most per
    /// direction.
    pub max_message_bytes: usize,
}

impl Default for DecodeOptions {
    fn default() -> DecodeOptions {
        DecodeOptions {
            redact_values: false,
            max_message_bytes: 1 << 20,
        }
    }
}

/// One relayed connection's decoder.
// One per connection, made once and fed in place: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Decoder {
    Postgres(postgres::Decoder),
    Mysql(mysql::Decoder),
}

impl Decoder {
    pub fn new(engine: Engine, meta: SessionMeta, options: DecodeOptions) -> Decoder {
        match engine {
            Engine::Postgres => Decoder::Postgres(postgres::Decoder::new(meta, options)),
            Engine::Mysql => Decoder::Mysql(mysql::Decoder::new(meta, options)),
        }
    }

    /// A decoder for a connection already open when a packet capture began: fed from
    /// the first whole message of each direction on, its `session_open` (written to
    /// `out` now) marked `joined`, its startup unknown. `None` for an engine whose
    /// decoder cannot start mid-stream: MySQL's framing of results depends on the
    /// capabilities the handshake agreed (CLIENT_DEPRECATE_EOF and others), which a
    /// capture that missed it cannot know.
    pub fn joined(
        engine: Engine,
        meta: SessionMeta,
        options: DecodeOptions,
        out: &mut Vec<Event>,
    ) -> Option<Decoder> {
        match engine {
            Engine::Postgres => Some(Decoder::Postgres(postgres::Decoder::joined(meta, options, out))),
            Engine::Mysql => None,
        }
    }

    /// Decoding stops for `reason` (bytes missing from a capture): requests awaiting
    /// answers are written unanswered, later bytes are counted as undecoded, and the
    /// reason is the session's `decode_error` at its close.
    pub fn interrupt(&mut self, reason: String, out: &mut Vec<Event>) {
        match self {
            Decoder::Postgres(d) => d.interrupt(reason, out),
            Decoder::Mysql(d) => d.interrupt(reason, out),
        }
    }

    /// Bytes that passed in `dir`, read at `at_ns` (since the trace's start); events
    /// that completed are appended to `out`.
    pub fn feed(&mut self, dir: Direction, at_ns: u64, bytes: &[u8], out: &mut Vec<Event>) {
        match self {
            Decoder::Postgres(d) => d.feed(dir, at_ns, bytes, out),
            Decoder::Mysql(d) => d.feed(dir, at_ns, bytes, out),
        }
    }

    /// The connection ended at `at_ns`: the session's remaining events (its open, if it
    /// never became ready; requests left unanswered; its close). Later calls add nothing.
    pub fn close(&mut self, at_ns: u64, by: ClosedBy, out: &mut Vec<Event>) {
        match self {
            Decoder::Postgres(d) => d.close(at_ns, by, out),
            Decoder::Mysql(d) => d.close(at_ns, by, out),
        }
    }

    /// The recorder's TLS handshake with the client (`SessionMeta::tls_terminated`):
    /// done, or failed and why (decoding stops with the reason, said at the close). Call
    /// it after feeding the encryption request (and PostgreSQL's `S`), before the
    /// plaintext from inside.
    pub fn tls_accepted(&mut self, tls: Result<TlsAccepted, String>, out: &mut Vec<Event>) {
        match self {
            Decoder::Postgres(d) => d.tls_accepted(tls, out),
            Decoder::Mysql(d) => d.tls_accepted(tls, out),
        }
    }

    /// The client asked for TLS (the recorder cannot read past it unless it terminates
    /// it).
    pub fn tls_requested(&self) -> bool {
        match self {
            Decoder::Postgres(d) => d.tls_requested(),
            Decoder::Mysql(d) => d.tls_requested(),
        }
    }

    /// Bytes the decoder holds now for messages in progress (at most `max_message_bytes`
    /// each way) and requests awaiting answers (at most 64 MiB, and 4,096 of them):
    /// for tests and the recorder's memory check. Besides, a session remembers its
    /// prepared statements' parameter types within a fixed budget (1 MiB of PostgreSQL
    /// OIDs, 2 MiB of MySQL types) and names, tags and fields of at most 4 KiB.
    pub fn buffered(&self) -> usize {
        match self {
            Decoder::Postgres(d) => d.buffered(),
            Decoder::Mysql(d) => d.buffered(),
        }
    }
}

/// The message telling a user how to record an application that asks for TLS.
pub const TLS_ADVICE: &str = "the client asked for TLS, which the recorder cannot read; \
     record plaintext from the application (sslmode=disable or prefer, ssl-mode=DISABLED) \
     and let the recorder open TLS to the server, as a cloud SQL proxy does";

/// A statement's text for the trace: as sent, or with literals replaced.
fn sql_text(bytes: Option<&[u8]>, redact: bool, dialect: Dialect) -> Sql {
    let Some(b) = bytes else { return Sql::default() };
    let s = String::from_utf8_lossy(b);
    if redact {
        let (text, literals) = redact_literals(&s, dialect);
        Sql {
            sql: Some(text),
            literals: Some(literals),
        }
    } else {
        Sql {
            sql: Some(s.into_owned()),
            literals: None,
        }
    }
}

/// Whether a startup parameter or connection attribute's name suggests a secret: such
/// values are never written, only the name.
fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["pass", "secret", "token", "key", "cred", "auth", "sasl"]
        .iter()
        .any(|w| n.contains(w))
}

/// An error message as the trace keeps it: cut to 1 KiB; none when values are redacted
/// (messages quote values: `invalid input syntax for type integer: "abc"`).
fn error_message(msg: &[u8], redact: bool) -> Option<String> {
    if redact {
        return None;
    }
    let mut s = String::from_utf8_lossy(&msg[..msg.len().min(1024)]).into_owned();
    if msg.len() > 1024 {
        s.push('…');
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_looking_names_are_withheld() {
        for n in [
            "password",
            "PGPASSWORD",
            "api_key",
            "sslkey",
            "auth_token",
            "credentials",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in [
            "application_name",
            "client_encoding",
            "_client_name",
            "program_name",
        ] {
            assert!(!is_secret_name(n), "{n}");
        }
        assert_eq!(error_message(b"bad value 42", true), None);
    }
}

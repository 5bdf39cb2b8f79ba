//! The skeleton both wire decoders stand on: one relayed connection's bookkeeping, which
//! is the same whatever the protocol. It holds the two directions' [`Framer`]s, the
//! `session_open` event being filled in (written once, by the first of the protocol's
//! "ready" or the close), the [`Exchanges`] awaiting answers, how the session ended (the
//! client's goodbye, the server's fatal error) and why decoding stopped, if it did.
//!
//! A decoder (`postgres`, `mysql`) owns one and adds only its protocol: its states, what
//! a frame means in each, and what it must remember between frames (statement types,
//! capabilities). [`Connection::chunk`] and [`Connection::done`] bracket a fed chunk;
//! [`Connection::close`] writes the `session_close` record the same way for both.

use super::event::{ClosedBy, Event, ServerError, SessionOpen};
use super::frame::Framer;
use super::session::Exchanges;
use super::{DecodeOptions, Direction, SessionMeta, TlsAccepted};

/// One connection's protocol-independent state.
#[derive(Debug)]
pub(super) struct Connection {
    pub(super) meta: SessionMeta,
    pub(super) options: DecodeOptions,
    up: Framer,
    down: Framer,
    /// `session_open`, filled in as the connection starts.
    pub(super) open: SessionOpen,
    open_written: bool,
    pub(super) x: Exchanges,
    /// When the client said goodbye (Terminate, COM_QUIT): the close is then the
    /// client's whoever drops the socket.
    pub(super) terminated_at: Option<u64>,
    /// A fatal error the server sent: the close is then the server's.
    pub(super) fatal: Option<ServerError>,
    /// Why decoding stopped, said once at the close.
    decode_error: Option<String>,
    /// Bytes passed through undecoded after decoding stopped.
    undecoded: u64,
    closed: bool,
}

impl Connection {
    pub(super) fn new(meta: SessionMeta, options: DecodeOptions) -> Connection {
        let cap = options.max_message_bytes;
        Connection {
            meta,
            options,
            up: Framer::new(cap),
            down: Framer::new(cap),
            open: SessionOpen {
                session: meta.session,
                open_ns: meta.open_ns,
                transport: Some(meta.transport),
                ..SessionOpen::default()
            },
            open_written: false,
            x: Exchanges::new(meta.session, meta.open_ns),
            terminated_at: None,
            fatal: None,
            decode_error: None,
            undecoded: 0,
            closed: false,
        }
    }

    /// The bytes held: both framers' partial messages and the requests awaiting answers.
    pub(super) fn buffered(&self) -> usize {
        self.up.buffered() + self.down.buffered() + self.x.pending_bytes() as usize
    }

    /// A chunk of `len` bytes going `dir`: counted, and its direction's framer handed
    /// out for the decoder to run (give it back with [`Connection::done`]); `None` once
    /// the connection is closed, when nothing more is decoded or counted.
    pub(super) fn chunk(&mut self, dir: Direction, len: usize) -> Option<Framer> {
        if self.closed {
            return None;
        }
        let slot = match dir {
            Direction::ToServer => {
                self.x.bytes_to_server += len as u64;
                &mut self.up
            }
            Direction::ToClient => {
                self.x.bytes_to_client += len as u64;
                &mut self.down
            }
        };
        // The framer is taken out so the decoder can run it while it changes itself.
        Some(std::mem::replace(slot, Framer::new(0)))
    }

    /// The framer back after a chunk, with the `left` bytes the decoder did not follow
    /// (everything after decoding stopped).
    pub(super) fn done(&mut self, dir: Direction, framer: Framer, left: usize) {
        self.undecoded += left as u64;
        match dir {
            Direction::ToServer => self.up = framer,
            Direction::ToClient => self.down = framer,
        }
    }

    /// Decoding stops for `reason` (the first reason is the one kept); the decoder then
    /// lets the rest through and writes what awaited answers as unanswered.
    /// The recorder's handshake with the client: its figures into `session_open`, or
    /// why it failed (for the decoder to stop with).
    pub(super) fn tls_accepted(&mut self, tls: Result<TlsAccepted, String>) -> Result<(), String> {
        let t = tls.map_err(|e| format!("the TLS handshake with the application failed: {e}"))?;
        self.open.tls = true;
        self.open.tls_version = t.version;
        self.open.phases.tls_handshake_ns = Some(t.handshake_ns);
        self.open.phases.tls_handshake_round_trips = Some(t.round_trips);
        Ok(())
    }

    pub(super) fn stop(&mut self, reason: String) {
        self.decode_error.get_or_insert(reason);
    }

    /// Writes `session_open` if it was not written yet (the connection became ready, or
    /// it ends before it did).
    pub(super) fn write_open(&mut self, out: &mut Vec<Event>) {
        if !self.open_written {
            self.open_written = true;
            self.open.phases.connect_ns = self.meta.connect_ns;
            out.push(Event::SessionOpen(Box::new(std::mem::take(&mut self.open))));
        }
    }

    /// Starts the close: `false` when the connection was closed already. The decoder
    /// then writes what it holds back ([`Exchanges::abandon`]) and calls
    /// [`Connection::close`].
    pub(super) fn closing(&mut self, out: &mut Vec<Event>) -> bool {
        if self.closed {
            return false;
        }
        self.closed = true;
        self.write_open(out);
        true
    }

    /// The `session_close` record: the client's when it said goodbye, the server's when
    /// it sent a fatal error, else as the relay saw it (`by`).
    pub(super) fn close(&mut self, at_ns: u64, by: ClosedBy, out: &mut Vec<Event>) {
        let by = if self.terminated_at.is_some() {
            ClosedBy::Client
        } else if self.fatal.is_some() {
            ClosedBy::Server
        } else {
            by
        };
        let mut close = self.x.close(at_ns, by, self.fatal.take());
        close.decode_error = self.decode_error.take();
        close.undecoded_bytes = self.undecoded;
        out.push(Event::SessionClose(close));
    }
}

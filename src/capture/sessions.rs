//! A capture's connections to the server's port: each a pair of reassembled directions
//! ([`Stream`]) feeding the same `connbench_trace::Decoder` the recorder uses, with the
//! capture's timestamps, and the events written as they complete. What the hop learns
//! from its sockets, a capture learns from flags: a SYN opens a session (its SYN-ACK is
//! the "connect"), FIN and RST say who closed, and a gap in a direction interrupts its
//! decoder, which closes the session as undecodable from there (`decode_error`): bytes
//! are never guessed, and the other sessions are untouched.
//!
//! A connection already open when the capture began (no SYN) is `joined`: PostgreSQL's
//! decoder starts at the client's first segment made of whole messages (the server's
//! bytes before it answer requests not seen); MySQL's cannot start mid-stream, and such
//! sessions are counted, not written.

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::SocketAddr;

use connbench_trace::{
    ClosedBy, DecodeOptions, Decoder, Direction, Event, SessionMeta, TraceWriter, Transport,
};

use super::file::Segment;
use super::tcp::{Piece, Stream};
use crate::targets::Engine;

/// Closed connections remembered, at most (then those closed over
/// [`CLOSED_FOR_NS`] ago are forgotten): TCP's TIME_WAIT is a minute at most.
const CLOSED_KEPT: usize = 65_536;
const CLOSED_FOR_NS: u64 = 120_000_000_000;
/// Gaps described one by one; past this many they are counted.
const GAP_NOTES: usize = 10;

/// What a capture's reading counted.
#[derive(Debug, Default)]
pub struct Tally {
    pub segments: u64,
    pub sessions: u64,
    /// Sessions already open when the capture began.
    pub joined: u64,
    /// Joined sessions not decoded: the engine's decoder cannot start mid-stream, or no
    /// whole message was seen to start from.
    pub joined_undecoded: u64,
    pub requests: u64,
    /// Sessions whose decoding stopped (a gap, bytes it could not follow).
    pub undecoded: u64,
    pub gaps: u64,
    pub gap_notes: Vec<String>,
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// Bytes captured twice (retransmissions, overlaps), delivered once.
    pub duplicate_bytes: u64,
    /// Segments that came before a hole filled.
    pub reordered: u64,
}

/// One connection: client and server addresses, its directions, its decoder.
struct Conn {
    id: u64,
    client: SocketAddr,
    /// First seen (its SYN, or any segment of a joined one), since the capture's start.
    open_ns: u64,
    syn_ack_ns: Option<u64>,
    joined: bool,
    up: Stream,
    down: Stream,
    decoder: Option<Decoder>,
    /// Not decoded (a joined MySQL session): bytes are counted only.
    ignored: bool,
    /// Who sent the first FIN.
    first_fin: Option<ClosedBy>,
}

/// The connections of one capture and the trace they go to.
pub struct Sessions<W: Write> {
    engine: Engine,
    options: DecodeOptions,
    port: u16,
    start_ns: u64,
    conns: HashMap<(SocketAddr, SocketAddr), Conn>,
    /// Connections closed, and when: the last ACK after both FINs (or segments after a
    /// RST) belong to them, not to a connection the capture joined.
    closed: HashMap<(SocketAddr, SocketAddr), u64>,
    next_id: u64,
    writer: TraceWriter<W>,
    events: Vec<Event>,
    pub tally: Tally,
}

impl<W: Write> Sessions<W> {
    /// Sessions to the server at `port`, times counted from `start_ns` (the capture's
    /// first packet), events written to `writer`.
    pub fn new(
        (engine, options): (Engine, DecodeOptions),
        port: u16,
        start_ns: u64,
        writer: TraceWriter<W>,
    ) -> Sessions<W> {
        Sessions {
            engine,
            options,
            port,
            start_ns,
            conns: HashMap::new(),
            closed: HashMap::new(),
            next_id: 0,
            writer,
            events: Vec::new(),
            tally: Tally::default(),
        }
    }

    /// One captured segment; those not to or from the server's port are skipped.
    pub fn segment(&mut self, s: &Segment<'_>) -> io::Result<()> {
        let to_server = s.dst.port() == self.port;
        if !to_server && s.src.port() != self.port {
            return Ok(());
        }
        self.tally.segments += 1;
        let at = s.ts_ns.saturating_sub(self.start_ns);
        let key = if to_server { (s.src, s.dst) } else { (s.dst, s.src) };
        let opening = s.syn && s.ack.is_none() && to_server;
        if opening
            && self
                .conns
                .get(&key)
                .is_some_and(|c| c.up.started() || c.down.started())
        {
            // The same ports again: the earlier connection is over.
            let by = self.conns[&key].first_fin.unwrap_or(ClosedBy::Client);
            self.close(key, at, by);
        }
        if !self.conns.contains_key(&key) {
            if !opening && self.closed.contains_key(&key) {
                return Ok(());
            }
            self.closed.remove(&key);
            self.next_id += 1;
            self.tally.sessions += 1;
            self.tally.joined += !opening as u64;
            let conn = Conn {
                id: self.next_id,
                client: key.0,
                open_ns: at,
                syn_ack_ns: None,
                joined: !opening,
                up: Stream::default(),
                down: Stream::default(),
                decoder: None,
                ignored: false,
                first_fin: None,
            };
            self.conns.insert(key, conn);
        }
        let conn = self.conns.get_mut(&key).expect("inserted above");
        let (dir, by) = if to_server {
            (Direction::ToServer, ClosedBy::Client)
        } else {
            (Direction::ToClient, ClosedBy::Server)
        };
        let (mine, theirs) = match dir {
            Direction::ToServer => (&mut conn.up, &mut conn.down),
            Direction::ToClient => (&mut conn.down, &mut conn.up),
        };
        if s.syn {
            mine.syn(s.seq);
            if !to_server {
                conn.syn_ack_ns.get_or_insert(at);
            }
            return Ok(());
        }
        // What this segment acknowledges was sent before it: the other direction first.
        let mut acked = Vec::new();
        if let Some(ack) = s.ack {
            theirs.acked(ack, at, &mut acked);
        }
        let mut pieces = Vec::new();
        mine.segment(s.seq, s.payload, s.fin, at, &mut pieces);
        let other = match dir {
            Direction::ToServer => Direction::ToClient,
            Direction::ToClient => Direction::ToServer,
        };
        self.feed(key, other, acked);
        self.feed(key, dir, pieces);
        let conn = self.conns.get_mut(&key).expect("still open");
        if s.fin {
            conn.first_fin.get_or_insert(by);
        }
        if s.rst || (conn.up.finished() && conn.down.finished()) {
            let by = if s.rst { by } else { conn.first_fin.unwrap_or(by) };
            self.close(key, at, by);
        }
        self.write()
    }

    /// Pieces delivered going `dir`: to the decoder (made on the first, for a joined
    /// session on the client's first whole messages), a gap interrupting it.
    fn feed(&mut self, key: (SocketAddr, SocketAddr), dir: Direction, pieces: Vec<Piece>) {
        let (engine, options) = (self.engine, self.options);
        let Some(conn) = self.conns.get_mut(&key) else {
            return;
        };
        for piece in pieces {
            match piece {
                Piece::Data { at_ns, bytes } => {
                    match dir {
                        Direction::ToServer => self.tally.bytes_up += bytes.len() as u64,
                        Direction::ToClient => self.tally.bytes_down += bytes.len() as u64,
                    }
                    if conn.decoder.is_none() && !conn.ignored {
                        conn.decoder = start(conn, (engine, options), (dir, &bytes), &mut self.events);
                        if conn.ignored {
                            self.tally.joined_undecoded += 1;
                        }
                    }
                    if let Some(d) = conn.decoder.as_mut() {
                        d.feed(dir, at_ns, &bytes, &mut self.events);
                    }
                }
                Piece::Gap { at_ns, missing } => {
                    self.tally.gaps += 1;
                    let reason = format!(
                        "the capture misses {missing} byte(s) going to the {} at {:.6} s (a packet \
                         tcpdump did not keep): nothing decoded after them",
                        if dir == Direction::ToServer {
                            "server"
                        } else {
                            "client"
                        },
                        at_ns as f64 / 1e9
                    );
                    if self.tally.gap_notes.len() < GAP_NOTES {
                        self.tally
                            .gap_notes
                            .push(format!("session {} (client {}): {reason}", conn.id, conn.client));
                    }
                    if conn.decoder.is_none() && !conn.joined && !conn.ignored {
                        // The set-up itself is missing: the session is written, undecoded.
                        conn.decoder = start(conn, (engine, options), (dir, &[]), &mut self.events);
                    }
                    if let Some(d) = conn.decoder.as_mut() {
                        d.interrupt(reason, &mut self.events);
                    }
                }
            }
        }
    }

    /// Ends a connection at `at` (since the capture's start): what waits behind holes
    /// said, its decoder closed.
    fn close(&mut self, key: (SocketAddr, SocketAddr), at: u64, by: ClosedBy) {
        let Some(mut conn) = self.conns.remove(&key) else {
            return;
        };
        if self.closed.len() >= CLOSED_KEPT {
            // Long closed: a port reused after this long opens with a SYN anyway.
            self.closed.retain(|_, t| at.saturating_sub(*t) < CLOSED_FOR_NS);
        }
        self.closed.insert(key, at);
        let (mut up, mut down) = (Vec::new(), Vec::new());
        conn.up.finish(at, &mut up);
        conn.down.finish(at, &mut down);
        self.tally.duplicate_bytes += conn.up.duplicate_bytes + conn.down.duplicate_bytes;
        self.tally.reordered += conn.up.reordered + conn.down.reordered;
        let (joined, ignored) = (conn.joined, conn.ignored);
        self.conns.insert(key, conn);
        self.feed(key, Direction::ToServer, up);
        self.feed(key, Direction::ToClient, down);
        let mut conn = self.conns.remove(&key).expect("put back above");
        if conn.decoder.is_none() && !joined && !ignored {
            // A connection that sent nothing is written as the recorder writes one.
            let (engine, options) = (self.engine, self.options);
            conn.decoder = start(
                &mut conn,
                (engine, options),
                (Direction::ToServer, &[]),
                &mut self.events,
            );
        }
        match conn.decoder.as_mut() {
            Some(d) => d.close(at, by, &mut self.events),
            None if !ignored => self.tally.joined_undecoded += 1,
            None => {}
        }
    }

    /// Writes the events completed so far, counting requests and undecoded sessions.
    fn write(&mut self) -> io::Result<()> {
        for e in self.events.drain(..) {
            match &e {
                Event::Request(_) => self.tally.requests += 1,
                Event::SessionClose(c) if c.decode_error.is_some() => self.tally.undecoded += 1,
                _ => {}
            }
            self.writer.write(&e)?;
        }
        Ok(())
    }

    /// The capture ended at `at` (since its start): every session still open closed as
    /// the recorder's (in the order they were seen), the trace finished; the writer
    /// and what it wrote (events, uncompressed bytes).
    pub fn finish(mut self, at: u64) -> io::Result<(W, Tally, u64, u64)> {
        let mut open: Vec<_> = self.conns.iter().map(|(k, c)| (c.id, *k)).collect();
        open.sort();
        for (_, key) in open {
            self.close(key, at, ClosedBy::Recorder);
        }
        self.write()?;
        let (events, bytes) = (self.writer.events(), self.writer.bytes());
        Ok((self.writer.finish()?, self.tally, events, bytes))
    }
}

/// The decoder for `conn` as its first bytes (`dir`, `first`) pass: a new session's
/// from its start; a joined one's from the client's first whole messages (PostgreSQL;
/// `None` until then), or none at all (MySQL: `conn.ignored`).
fn start(
    conn: &mut Conn,
    (engine, options): (Engine, DecodeOptions),
    (dir, first): (Direction, &[u8]),
    events: &mut Vec<Event>,
) -> Option<Decoder> {
    let meta = SessionMeta {
        session: conn.id,
        open_ns: conn.open_ns,
        transport: Transport::Tcp,
        connect_ns: conn.syn_ack_ns.map(|a| a.saturating_sub(conn.open_ns)),
        // A capture sees TLS as the wire carries it, encrypted: nothing terminated it.
        tls_terminated: false,
    };
    if !conn.joined {
        return Some(Decoder::new(engine, meta, options));
    }
    if engine == Engine::Postgres && (dir != Direction::ToServer || !whole_messages(first)) {
        return None;
    }
    let d = Decoder::joined(engine, meta, options, events);
    conn.ignored = d.is_none();
    d
}

/// Whether `bytes` are one or more whole PostgreSQL client messages, exactly: where a
/// joined session's decoding may safely start (a segment cut inside a message fails the
/// lengths).
fn whole_messages(mut bytes: &[u8]) -> bool {
    if bytes.is_empty() {
        return false;
    }
    while !bytes.is_empty() {
        let Some(&[kind, a, b, c, d]) = bytes.get(..5) else {
            return false;
        };
        let len = u32::from_be_bytes([a, b, c, d]) as usize;
        if !b"QPBEDCHSFXdcfp".contains(&kind) || len < 4 || len + 1 > bytes.len() {
            return false;
        }
        bytes = &bytes[len + 1..];
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_messages_are_told_from_a_cut() {
        let sync = [b'S', 0, 0, 0, 4];
        let query = [b'Q', 0, 0, 0, 8, b's', b'e', b'l', 0];
        assert!(whole_messages(&[&query[..], &sync[..]].concat()));
        assert!(!whole_messages(&query[..7]));
        assert!(!whole_messages(&query[1..]));
        assert!(!whole_messages(&[]));
    }
}

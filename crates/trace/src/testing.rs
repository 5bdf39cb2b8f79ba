//! Test helpers for the decoders: wire messages built by hand, and a conversation fed
//! in chunks cut wherever a test says.

use super::event::{ClosedBy, Event, Request, SessionClose, SessionOpen, Transport};
use super::{DecodeOptions, Decoder, Direction, SessionMeta};
use crate::Engine;

pub use Direction::{ToClient as Down, ToServer as Up};

/// A PostgreSQL typed message.
pub fn pg(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![kind];
    m.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// A PostgreSQL untyped (startup-phase) message.
pub fn pg_untyped(body: &[u8]) -> Vec<u8> {
    let mut m = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    m.extend_from_slice(body);
    m
}

/// A MySQL packet.
pub fn my(seq: u8, body: &[u8]) -> Vec<u8> {
    let mut m = (body.len() as u32).to_le_bytes()[..3].to_vec();
    m.push(seq);
    m.extend_from_slice(body);
    m
}

/// NUL-terminated strings, concatenated.
pub fn cstrs(parts: &[&str]) -> Vec<u8> {
    let mut v = Vec::new();
    for p in parts {
        v.extend_from_slice(p.as_bytes());
        v.push(0);
    }
    v
}

pub fn meta() -> SessionMeta {
    SessionMeta {
        session: 1,
        open_ns: 1_000,
        transport: Transport::Tcp,
        connect_ns: Some(100),
        tls_terminated: false,
    }
}

/// Feeds a conversation: message `i` passes at `1_000 + 1_000 * (i + 1)` ns, cut into
/// pieces at the offsets `cut(i, len)` gives; then the connection closes.
pub fn run(
    engine: Engine,
    options: DecodeOptions,
    script: &[(Direction, Vec<u8>)],
    cut: impl FnMut(usize, usize) -> Vec<usize>,
) -> (Vec<Event>, Decoder) {
    let (events, d, _) = run_watching(engine, options, script, cut);
    (events, d)
}

/// [`run`], and the most the decoder held at any point.
pub fn run_watching(
    engine: Engine,
    options: DecodeOptions,
    script: &[(Direction, Vec<u8>)],
    mut cut: impl FnMut(usize, usize) -> Vec<usize>,
) -> (Vec<Event>, Decoder, usize) {
    let mut held = 0;
    let mut d = Decoder::new(engine, meta(), options);
    let mut out = Vec::new();
    let mut t = 1_000;
    for (i, (dir, bytes)) in script.iter().enumerate() {
        t += 1_000;
        let mut at = 0;
        let mut cuts = cut(i, bytes.len());
        cuts.retain(|&c| c > 0 && c < bytes.len());
        cuts.sort_unstable();
        cuts.push(bytes.len());
        for c in cuts {
            if c > at {
                d.feed(*dir, t, &bytes[at..c], &mut out);
                held = held.max(d.buffered());
                at = c;
            }
        }
    }
    d.close(t + 1_000, ClosedBy::Client, &mut out);
    (out, d, held)
}

/// The events with their times zeroed, to compare runs cut differently.
pub fn timeless(events: &[Event]) -> Vec<Event> {
    events
        .iter()
        .cloned()
        .map(|mut e| {
            match &mut e {
                Event::Request(r) => {
                    r.at_ns = 0;
                    r.think_ns = r.think_ns.map(|_| 0);
                    r.first_byte_ns = r.first_byte_ns.map(|_| 0);
                    r.response_ns = r.response_ns.map(|_| 0);
                }
                Event::SessionOpen(o) => o.phases = Default::default(),
                Event::SessionClose(c) => c.at_ns = 0,
                Event::Header(_) => {}
            }
            e
        })
        .collect()
}

/// The events as the trace would hold them.
pub fn json(events: &[Event]) -> String {
    events
        .iter()
        .map(|e| serde_json::to_string(e).unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The requests among `events`.
pub fn requests(events: &[Event]) -> Vec<&Request> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Request(r) => Some(&**r),
            _ => None,
        })
        .collect()
}

/// The session's open.
pub fn open_of(events: &[Event]) -> &SessionOpen {
    events
        .iter()
        .find_map(|e| match e {
            Event::SessionOpen(o) => Some(&**o),
            _ => None,
        })
        .expect("a session_open")
}

/// The session's close, which must be the last event.
pub fn close_of(events: &[Event]) -> &SessionClose {
    match events.last() {
        Some(Event::SessionClose(c)) => c,
        other => panic!("the last event is not a close: {other:?}"),
    }
}

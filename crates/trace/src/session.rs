//! What both wire decoders keep per session once it is ready: the requests sent and not
//! yet answered, in order (responses come back in the order requests went out, on both
//! protocols, so the oldest unanswered request owns the next response byte), the
//! sequence numbers, the client's think time, the byte totals, and the close record.
//!
//! An [`Exchange`] is a `request` event being filled in: its request part when the
//! request's bytes pass, its response part as the server answers; it is written once,
//! when the response ends, with its times turned from trace time into the session's.

use std::collections::VecDeque;

use super::event::{ClosedBy, Event, Op, Outcome, Request, ServerError, SessionClose, TxStatus};

/// The most requests a session may have awaiting answers: deeper than any pipeline a
/// client library builds (libpq's and pgbench's are tens to hundreds), and it bounds
/// the memory a client that never reads can make the recorder hold.
pub(super) const MAX_PENDING: usize = 4096;
/// The most request bytes those may hold between them (their decoded SQL and values
/// are about as large).
pub(super) const MAX_PENDING_BYTES: u64 = 64 << 20;

/// A request and, as it arrives, its response.
#[derive(Debug)]
pub(super) struct Exchange {
    pub req: Request,
    /// The request's last byte, in trace time.
    pub sent_ns: u64,
    first_byte_at: Option<u64>,
    /// A command the server does not answer, queued behind one it does.
    silent: bool,
    /// The request's bytes whose contents it holds (its messages decoded into the
    /// event; not COPY or LOCAL INFILE data, not steps dropped): what it costs the
    /// queue's budget.
    pub held: u64,
}

impl Exchange {
    /// Response bytes arriving at `at_ns`.
    pub fn respond(&mut self, at_ns: u64, wire_len: u64) {
        self.first_byte_at.get_or_insert(at_ns);
        self.req.response_bytes += wire_len;
    }

    /// More of the request (a message of an extended group, COPY data) at `at_ns`.
    pub fn extend(&mut self, at_ns: u64, wire_len: u64) {
        self.sent_ns = at_ns;
        self.req.request_bytes += wire_len;
    }
}

/// A session's requests in flight and its totals.
#[derive(Debug)]
pub(super) struct Exchanges {
    session: u64,
    open_ns: u64,
    pending: VecDeque<Exchange>,
    /// The request bytes of `pending`.
    pending_bytes: u64,
    /// Requests refused by a full queue (decoding stops at the first, so they are one or
    /// two): written, unanswered, with the rest.
    overflow: Vec<Exchange>,
    next_seq: u64,
    /// The end of the last response, or of the connect: where think time starts.
    last_end_ns: Option<u64>,
    pub bytes_to_server: u64,
    pub bytes_to_client: u64,
}

impl Exchanges {
    pub fn new(session: u64, open_ns: u64) -> Exchanges {
        Exchanges {
            session,
            open_ns,
            pending: VecDeque::new(),
            pending_bytes: 0,
            overflow: Vec::new(),
            next_seq: 0,
            last_end_ns: None,
            bytes_to_server: 0,
            bytes_to_client: 0,
        }
    }

    /// The session became ready at `at_ns` (think time before the first request counts
    /// from here).
    pub fn ready(&mut self, at_ns: u64) {
        self.last_end_ns = Some(at_ns);
    }

    /// `ex`, begun by messages that ask the server for nothing (a Flush sent after the
    /// last Sync: psycopg 3 in pipeline mode sends one, then waits for every answer),
    /// starts again at `first_ns`, the first message that asks for something: its time
    /// and the client's think time count from there, and it is pipelined only if an
    /// earlier request still awaits its answer then.
    pub fn restart(&self, ex: &mut Exchange, first_ns: u64) {
        ex.req.at_ns = first_ns.saturating_sub(self.open_ns);
        ex.req.think_ns = self.think(first_ns);
    }

    fn think(&self, first_ns: u64) -> Option<u64> {
        if self.pending.is_empty() {
            self.last_end_ns.map(|e| first_ns.saturating_sub(e))
        } else {
            None
        }
    }

    /// A new request whose first byte passed at `first_ns`.
    pub fn start(&mut self, first_ns: u64, wire_len: u64, op: Op) -> Exchange {
        let think_ns = self.think(first_ns);
        let seq = self.next_seq;
        self.next_seq += 1;
        Exchange {
            req: Request {
                session: self.session,
                seq,
                at_ns: first_ns.saturating_sub(self.open_ns),
                think_ns,
                request_bytes: wire_len,
                op,
                outcome: Outcome::Unanswered,
                first_byte_ns: None,
                response_ns: None,
                response_bytes: 0,
                rows: 0,
                affected_rows: None,
                tags: Vec::new(),
                error: None,
                notices: 0,
                copy_in_bytes: 0,
                copy_out_bytes: 0,
                prepared: None,
                tx: None,
                autocommit: None,
            },
            sent_ns: first_ns,
            first_byte_at: None,
            silent: false,
            held: wire_len,
        }
    }

    /// Queues a request that was sent whole; an error when too many await answers (the
    /// request is then written as unanswered by [`Exchanges::abandon`]).
    pub fn push(&mut self, ex: Exchange) -> Result<(), String> {
        if self.pending.len() >= MAX_PENDING || self.pending_bytes + ex.held > MAX_PENDING_BYTES {
            self.overflow.push(ex);
            return Err(format!(
                "more than {MAX_PENDING} requests or {} MiB awaiting answers (the client does not read its responses)",
                MAX_PENDING_BYTES >> 20
            ));
        }
        self.pending_bytes += ex.held;
        self.pending.push_back(ex);
        Ok(())
    }

    fn pop(&mut self) -> Option<Exchange> {
        let ex = self.pending.pop_front()?;
        self.pending_bytes -= ex.held;
        Some(ex)
    }

    /// Request bytes awaiting answers.
    pub fn pending_bytes(&self) -> u64 {
        self.pending_bytes
    }

    pub fn front_mut(&mut self) -> Option<&mut Exchange> {
        self.pending.front_mut()
    }

    pub fn back_mut(&mut self) -> Option<&mut Exchange> {
        self.pending.back_mut()
    }

    /// The oldest request's response ended at `end_ns`: its event.
    pub fn finish_front(&mut self, end_ns: u64, tx: Option<TxStatus>, out: &mut Vec<Event>) {
        if let Some(ex) = self.pop() {
            self.finish(ex, end_ns, tx, out);
        }
        while self.pending.front().is_some_and(|e| e.silent) {
            if let Some(mut ex) = self.pop() {
                ex.req.outcome = Outcome::NoResponse;
                out.push(Event::Request(Box::new(ex.req)));
            }
        }
    }

    /// Writes `ex` as answered at `end_ns`.
    pub fn finish(&mut self, mut ex: Exchange, end_ns: u64, tx: Option<TxStatus>, out: &mut Vec<Event>) {
        ex.req.outcome = if ex.req.error.is_some() {
            Outcome::Error
        } else {
            Outcome::Ok
        };
        ex.req.first_byte_ns = ex.first_byte_at.map(|f| f.saturating_sub(ex.sent_ns));
        ex.req.response_ns = Some(end_ns.saturating_sub(ex.sent_ns));
        ex.req.tx = tx;
        self.last_end_ns = Some(end_ns.max(ex.sent_ns));
        out.push(Event::Request(Box::new(ex.req)));
    }

    /// Writes `ex`, a command the server does not answer: at once, or after the
    /// requests ahead of it, so a session's requests are written in order.
    pub fn no_response(&mut self, mut ex: Exchange, out: &mut Vec<Event>) -> Result<(), String> {
        if !self.pending.is_empty() {
            ex.silent = true;
            return self.push(ex);
        }
        ex.req.outcome = Outcome::NoResponse;
        self.last_end_ns = Some(ex.sent_ns);
        out.push(Event::Request(Box::new(ex.req)));
        Ok(())
    }

    /// Writes every request still waiting, as unanswered.
    pub fn abandon(&mut self, out: &mut Vec<Event>) {
        self.pending_bytes = 0;
        let overflow = std::mem::take(&mut self.overflow);
        for mut ex in self.pending.drain(..).chain(overflow) {
            ex.req.outcome = if ex.silent {
                Outcome::NoResponse
            } else {
                Outcome::Unanswered
            };
            ex.req.first_byte_ns = ex.first_byte_at.map(|f| f.saturating_sub(ex.sent_ns));
            out.push(Event::Request(Box::new(ex.req)));
        }
    }

    /// The session's close record.
    pub fn close(&self, at_ns: u64, by: ClosedBy, error: Option<ServerError>) -> SessionClose {
        SessionClose {
            session: self.session,
            at_ns: at_ns.saturating_sub(self.open_ns),
            by,
            requests: self.next_seq,
            bytes_to_server: self.bytes_to_server,
            bytes_to_client: self.bytes_to_client,
            error,
            decode_error: None,
            undecoded_bytes: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn think_time_is_null_for_a_pipelined_request_and_times_are_the_sessions() {
        let mut x = Exchanges::new(7, 1_000);
        x.ready(2_000);
        let a = x.start(2_500, 10, Op::ComPing);
        assert_eq!((a.req.at_ns, a.req.think_ns, a.req.seq), (1_500, Some(500), 0));
        x.push(a).unwrap();
        let b = x.start(2_600, 10, Op::ComPing);
        assert_eq!(b.req.think_ns, None, "sent while the first awaited its answer");
        x.push(b).unwrap();
        x.front_mut().unwrap().respond(3_000, 11);
        let mut out = Vec::new();
        x.finish_front(3_100, None, &mut out);
        let Event::Request(r) = &out[0] else { panic!() };
        assert_eq!(
            (r.first_byte_ns, r.response_ns, r.outcome),
            (Some(500), Some(600), Outcome::Ok)
        );
        x.abandon(&mut out);
        let Event::Request(r) = &out[1] else { panic!() };
        assert_eq!((r.seq, r.outcome, r.response_ns), (1, Outcome::Unanswered, None));
        let c = x.close(9_000, ClosedBy::Client, None);
        assert_eq!((c.at_ns, c.requests), (8_000, 2));
    }
}

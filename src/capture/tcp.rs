//! One direction of a captured TCP connection put back in order: sequence numbers
//! (wrapping at 2^32, so positions are kept as a 64-bit stream offset), segments that
//! came early held until the hole before them fills, retransmissions and overlaps cut to
//! the bytes not yet delivered, the sender's FIN. A hole is never guessed over: it is
//! declared a [`Piece::Gap`] only when the bytes are known lost to the capture (the peer
//! acknowledged them, the connection or capture ended, or more than [`MAX_AHEAD`] waits
//! behind it), and then skipped with its size said.

use std::collections::BTreeMap;

/// The most held beyond a hole, per direction: what waits longer than this is behind a
/// hole the capture lost, not a reordering (which TCP keeps within a window).
pub const MAX_AHEAD: usize = 8 << 20;

/// What a direction delivers, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Bytes, with the capture time at which they were all there.
    Data { at_ns: u64, bytes: Vec<u8> },
    /// `missing` bytes the capture does not have, known lost at `at_ns`.
    Gap { at_ns: u64, missing: u64 },
}

/// One direction's reassembly.
#[derive(Debug, Default)]
pub struct Stream {
    /// The sequence number of the next byte to deliver; `None` before the first segment.
    next: Option<u32>,
    /// The stream offset of `next`: bytes delivered and skipped so far.
    offset: u64,
    /// Segments beyond a hole, by stream offset: their bytes and capture time.
    ahead: BTreeMap<u64, (Vec<u8>, u64)>,
    held: usize,
    /// The stream offset of the sender's FIN.
    fin_at: Option<u64>,
    /// Bytes dropped as already delivered (retransmissions, overlaps).
    pub duplicate_bytes: u64,
    /// Segments held until a hole before them filled.
    pub reordered: u64,
}

impl Stream {
    /// The sender's SYN: its data starts at `isn + 1`.
    pub fn syn(&mut self, isn: u32) {
        if self.next.is_none() {
            self.next = Some(isn.wrapping_add(1));
        }
    }

    /// Whether anything was seen of this direction.
    pub fn started(&self) -> bool {
        self.next.is_some()
    }

    /// A segment at `seq` with `payload` (and the FIN flag), captured at `at_ns`.
    pub fn segment(&mut self, seq: u32, payload: &[u8], fin: bool, at_ns: u64, out: &mut Vec<Piece>) {
        let next = *self.next.get_or_insert(seq);
        // Within 2 GiB either way of the next byte: a wrap-around is a small step.
        let start = self.offset as i64 + seq.wrapping_sub(next) as i32 as i64;
        let end = start + payload.len() as i64;
        if fin && end >= 0 {
            self.fin_at.get_or_insert(end as u64);
        }
        if end <= self.offset as i64 {
            self.duplicate_bytes += payload.len() as u64;
            return;
        }
        if start <= self.offset as i64 {
            let skip = (self.offset as i64 - start) as usize;
            self.duplicate_bytes += skip as u64;
            self.deliver(&payload[skip..], at_ns, out);
            self.drain(at_ns, out);
            return;
        }
        let start = start as u64;
        let keep = match self.ahead.get(&start) {
            Some((held, _)) => held.len() < payload.len(),
            None => true,
        };
        if keep {
            if let Some((old, _)) = self.ahead.insert(start, (payload.to_vec(), at_ns)) {
                self.held -= old.len();
                self.duplicate_bytes += old.len() as u64;
            }
            self.held += payload.len();
            self.reordered += 1;
        } else {
            self.duplicate_bytes += payload.len() as u64;
        }
        while self.held > MAX_AHEAD {
            self.skip_hole(at_ns, out);
        }
    }

    /// The peer acknowledged up to `ack` at `at_ns`: bytes before it that the capture
    /// lacks were received, so they are lost to the capture, not late.
    pub fn acked(&mut self, ack: u32, at_ns: u64, out: &mut Vec<Piece>) {
        let Some(next) = self.next else { return };
        let mut upto = self.offset as i64 + ack.wrapping_sub(next) as i32 as i64;
        if self.fin_at.is_some_and(|f| upto == f as i64 + 1) {
            // The FIN takes a sequence number of its own.
            upto -= 1;
        }
        while upto > self.offset as i64 {
            let hole_end = self
                .ahead
                .keys()
                .next()
                .copied()
                .unwrap_or(u64::MAX)
                .min(upto as u64);
            self.gap(hole_end, at_ns, out);
        }
    }

    /// The connection or the capture ended at `at_ns`: what waits beyond a hole is
    /// delivered after the hole is said.
    pub fn finish(&mut self, at_ns: u64, out: &mut Vec<Piece>) {
        while !self.ahead.is_empty() {
            self.skip_hole(at_ns, out);
        }
    }

    /// The sender's FIN was reached: every byte before it delivered.
    pub fn finished(&self) -> bool {
        self.fin_at.is_some_and(|f| f <= self.offset)
    }

    /// Bytes held beyond holes.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.held
    }

    fn skip_hole(&mut self, at_ns: u64, out: &mut Vec<Piece>) {
        if let Some(&first) = self.ahead.keys().next() {
            self.gap(first, at_ns, out);
        }
    }

    /// Declares the bytes up to stream offset `to` lost, then delivers what follows.
    fn gap(&mut self, to: u64, at_ns: u64, out: &mut Vec<Piece>) {
        let missing = to - self.offset;
        out.push(Piece::Gap { at_ns, missing });
        self.advance(missing);
        self.drain(at_ns, out);
    }

    fn deliver(&mut self, bytes: &[u8], at_ns: u64, out: &mut Vec<Piece>) {
        if bytes.is_empty() {
            return;
        }
        out.push(Piece::Data {
            at_ns,
            bytes: bytes.to_vec(),
        });
        self.advance(bytes.len() as u64);
    }

    fn advance(&mut self, n: u64) {
        self.offset += n;
        self.next = self.next.map(|s| s.wrapping_add(n as u32));
    }

    /// Held segments the stream has reached, delivered (their bytes already delivered
    /// dropped), at the later of their own time and `at_ns`'s: a receiver reads them only
    /// once the hole before them is filled.
    fn drain(&mut self, at_ns: u64, out: &mut Vec<Piece>) {
        while let Some(entry) = self.ahead.first_entry() {
            if *entry.key() > self.offset {
                break;
            }
            let start = *entry.key();
            let (bytes, own) = entry.remove();
            self.held -= bytes.len();
            let skip = ((self.offset - start) as usize).min(bytes.len());
            self.duplicate_bytes += skip as u64;
            self.deliver(&bytes[skip..], own.max(at_ns), out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(out: &[Piece]) -> Vec<u8> {
        out.iter()
            .flat_map(|p| match p {
                Piece::Data { bytes, .. } => bytes.clone(),
                Piece::Gap { .. } => Vec::new(),
            })
            .collect()
    }

    /// Out of order, a duplicate, an overlap reaching past what was delivered, a
    /// retransmission that is longer than the held one, and sequence numbers wrapping
    /// past 2^32 in the middle of it all: the bytes come out once each, in order.
    #[test]
    fn reassembles_out_of_order_duplicates_overlaps_across_a_wrap() {
        let isn = u32::MAX - 5;
        let mut s = Stream::default();
        s.syn(isn);
        let first = isn.wrapping_add(1); // u32::MAX - 4
        let text = b"abcdefghijklmnopqrstuvwxyz";
        let at = |i: usize| first.wrapping_add(i as u32);
        let mut out = Vec::new();
        // "fgh" early (past the wrap), then "abc", then "abc" again, then "cdefg"
        // overlapping both sides, then "klm" held and retransmitted longer as "klmnop",
        // then "hij" overlapping what was delivered, then the rest with the FIN.
        s.segment(at(5), b"fgh", false, 10, &mut out);
        assert!(data(&out).is_empty(), "held until the hole fills");
        s.segment(at(0), b"abc", false, 11, &mut out);
        assert_eq!(data(&out), b"abc");
        s.segment(at(0), b"abc", false, 12, &mut out);
        s.segment(at(2), b"cdefg", false, 13, &mut out);
        assert_eq!(data(&out), b"abcdefgh");
        s.segment(at(10), b"klm", false, 14, &mut out);
        s.segment(at(10), b"klmnop", false, 15, &mut out);
        assert_eq!(s.held(), 6);
        s.segment(at(7), b"hij", false, 16, &mut out);
        assert_eq!(data(&out), &text[..16]);
        s.segment(at(16), &text[16..], true, 17, &mut out);
        assert_eq!(data(&out), text);
        assert!(
            out.iter().all(|p| matches!(p, Piece::Data { .. })),
            "no gap: {out:?}"
        );
        assert!(s.finished());
        assert_eq!(s.held(), 0);
        assert_eq!(s.duplicate_bytes, 3 + 1 + 2 + 3 + 1);
        // The bytes held before the hole filled count from when it filled.
        assert_eq!(
            out[1],
            Piece::Data {
                at_ns: 13,
                bytes: b"defg".to_vec()
            }
        );
        assert_eq!(
            out[2],
            Piece::Data {
                at_ns: 13,
                bytes: b"h".to_vec()
            }
        );
        // Acknowledging the FIN's own sequence number is no gap.
        s.acked(at(27), 18, &mut out);
        assert!(out.iter().all(|p| matches!(p, Piece::Data { .. })));
    }

    /// A segment the capture lost: nothing is delivered past it until the peer's ACK
    /// shows it was received, then the gap is said with its size and the rest follows.
    #[test]
    fn a_lost_segment_is_a_gap_once_acknowledged() {
        let mut s = Stream::default();
        s.syn(1000);
        let mut out = Vec::new();
        s.segment(1001, b"abc", false, 1, &mut out);
        s.segment(1007, b"ghi", false, 2, &mut out);
        assert_eq!(data(&out), b"abc");
        s.acked(1004, 3, &mut out);
        assert_eq!(out.len(), 1, "acknowledged only what was delivered");
        s.acked(1010, 4, &mut out);
        assert_eq!(out[1], Piece::Gap { at_ns: 4, missing: 3 });
        assert_eq!(data(&out), b"abcghi");
        // A gap at the end of the stream: bytes acknowledged that never showed up.
        s.acked(1015, 5, &mut out);
        assert_eq!(out[3], Piece::Gap { at_ns: 5, missing: 5 });
        s.segment(1015, b"z", false, 6, &mut out);
        assert_eq!(data(&out), b"abcghiz");
        // Held data at the end is delivered after its hole is said.
        s.segment(1020, b"late", false, 7, &mut out);
        s.finish(8, &mut out);
        assert_eq!(out[out.len() - 2], Piece::Gap { at_ns: 8, missing: 4 });
        assert_eq!(data(&out), b"abcghizlate");
    }

    /// A connection already open when the capture began starts at its first segment.
    #[test]
    fn a_joined_stream_starts_at_its_first_segment() {
        let mut s = Stream::default();
        let mut out = Vec::new();
        s.segment(7, b"xyz", false, 1, &mut out);
        s.segment(4, b"abcxyz", false, 2, &mut out);
        s.segment(10, b"!", false, 3, &mut out);
        assert_eq!(data(&out), b"xyz!");
    }
}

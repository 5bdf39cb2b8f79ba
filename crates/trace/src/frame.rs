//! Bytes into messages, and fields out of messages, for both wire decoders.
//!
//! A [`Framer`] is fed one direction's bytes as they pass, cut anywhere, and hands back
//! each message once its last byte has arrived, with the times of the chunks that held
//! its first and last byte. It never trusts a length it has read: a body is copied only
//! up to the cap the decoder chooses for it (the rest is counted and dropped), so a peer
//! that announces a gigabyte costs the cap, not the gigabyte. [`Cursor`] reads a
//! message's fields with bounds checks: every read returns `None` past the end, so a
//! malformed message is an error to report, never a panic.

/// How a direction's messages are framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// PostgreSQL before the StartupMessage: a 4-byte length (itself included), no type.
    PgUntyped,
    /// PostgreSQL: a type byte, then a 4-byte length (itself included).
    PgTyped,
    /// MySQL: a 3-byte little-endian length, then a sequence number.
    Mysql,
}

/// How much of a message's body to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keep {
    /// Up to the framer's cap.
    All,
    /// The first [`PREFIX`] bytes (names and headers).
    Prefix,
    Nothing,
}

/// What is kept of a body not kept whole: enough for the statement and portal names
/// (63 bytes each in PostgreSQL) and any packet header.
pub(super) const PREFIX: usize = 256;

/// The largest lengths a peer may announce before the stream is called malformed:
/// PostgreSQL's own limits (1 GiB messages, 10,000-byte startup packets).
const PG_MAX_LEN: usize = 0x3fff_ffff;
const PG_MAX_STARTUP: usize = 10_000;

/// One message, once its last byte has arrived.
#[derive(Debug)]
pub(super) struct Frame<'a> {
    /// PostgreSQL's type byte (0 before the StartupMessage); MySQL's sequence number.
    pub kind: u8,
    /// The body's length as announced.
    pub len: usize,
    /// What was kept of the body.
    pub body: &'a [u8],
    /// The whole body was kept.
    pub complete: bool,
    /// Header and body on the wire.
    pub wire_len: u64,
    /// The times of the chunks that held the first and the last byte.
    pub first_ns: u64,
    pub last_ns: u64,
}

/// Splits one direction into messages.
#[derive(Debug)]
pub(super) struct Framer {
    head: [u8; 5],
    head_len: usize,
    /// The body's announced length, once the header is read.
    len: Option<usize>,
    /// Body bytes seen so far.
    seen: usize,
    keep: Option<Keep>,
    body: Vec<u8>,
    first_ns: u64,
    cap: usize,
}

impl Framer {
    pub fn new(cap: usize) -> Framer {
        Framer {
            head: [0; 5],
            head_len: 0,
            len: None,
            seen: 0,
            keep: None,
            body: Vec::new(),
            first_ns: 0,
            cap,
        }
    }

    /// Bytes held for the message in progress (bounded by the cap).
    pub fn buffered(&self) -> usize {
        self.body.capacity()
    }

    /// Whether a message is part-way through.
    pub fn mid_message(&self) -> bool {
        self.head_len > 0
    }

    /// Consumes `input` up to the end of the next message and returns it, or `None` when
    /// `input` ran out first (the part read is kept for the next call). `keep` says, from
    /// the message's kind, length and first body byte, how much to keep.
    pub fn next(
        &mut self,
        framing: Framing,
        input: &mut &[u8],
        at_ns: u64,
        keep: impl Fn(u8, usize, Option<u8>) -> Keep,
    ) -> Result<Option<Frame<'_>>, String> {
        let head_size = match framing {
            Framing::PgUntyped => 4,
            Framing::PgTyped => 5,
            Framing::Mysql => 4,
        };
        if self.len.is_none() {
            if input.is_empty() {
                return Ok(None);
            }
            if self.head_len == 0 {
                self.first_ns = at_ns;
                self.seen = 0;
                self.keep = None;
                self.body.clear();
                if self.body.capacity() > self.cap.max(PREFIX) {
                    self.body = Vec::new();
                }
            }
            let take = (head_size - self.head_len).min(input.len());
            self.head[self.head_len..self.head_len + take].copy_from_slice(&input[..take]);
            self.head_len += take;
            *input = &input[take..];
            if self.head_len < head_size {
                return Ok(None);
            }
            self.len = Some(body_len(framing, &self.head)?);
        }
        let len = self.len.unwrap_or(0);
        if self.keep.is_none() {
            if len > 0 && input.is_empty() {
                return Ok(None);
            }
            let kind = self.kind(framing);
            let k = keep(kind, len, input.first().copied().filter(|_| len > 0));
            self.keep = Some(k);
            let room = match k {
                Keep::All => len.min(self.cap),
                Keep::Prefix => len.min(PREFIX),
                Keep::Nothing => 0,
            };
            self.body.reserve(room);
        }
        let want = len - self.seen;
        let take = want.min(input.len());
        let room = match self.keep {
            Some(Keep::All) => self.cap,
            Some(Keep::Prefix) => PREFIX,
            _ => 0,
        }
        .min(len);
        let copy = room.saturating_sub(self.seen).min(take);
        self.body.extend_from_slice(&input[..copy]);
        self.seen += take;
        *input = &input[take..];
        if self.seen < len {
            return Ok(None);
        }
        let kind = self.kind(framing);
        self.head_len = 0;
        self.len = None;
        Ok(Some(Frame {
            kind,
            len,
            complete: self.body.len() == len,
            body: &self.body,
            wire_len: (head_size + len) as u64,
            first_ns: self.first_ns,
            last_ns: at_ns,
        }))
    }

    fn kind(&self, framing: Framing) -> u8 {
        match framing {
            Framing::PgUntyped => 0,
            Framing::PgTyped => self.head[0],
            Framing::Mysql => self.head[3],
        }
    }
}

/// The body length a header announces, or why the stream is not this protocol.
fn body_len(framing: Framing, h: &[u8; 5]) -> Result<usize, String> {
    match framing {
        Framing::PgUntyped => {
            let n = u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize;
            if !(8..=PG_MAX_STARTUP).contains(&n) {
                return Err(format!(
                    "a startup packet of {n} bytes (PostgreSQL's are 8 to {PG_MAX_STARTUP})"
                ));
            }
            Ok(n - 4)
        }
        Framing::PgTyped => {
            let n = u32::from_be_bytes([h[1], h[2], h[3], h[4]]) as usize;
            if !(4..=PG_MAX_LEN).contains(&n) {
                return Err(format!(
                    "message {:?} with length {n} (PostgreSQL's are 4 to {PG_MAX_LEN})",
                    h[0] as char
                ));
            }
            Ok(n - 4)
        }
        Framing::Mysql => Ok(u32::from_le_bytes([h[0], h[1], h[2], 0]) as usize),
    }
}

/// Bounds-checked reads from a message body.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cursor<'a> {
    buf: &'a [u8],
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8]) -> Cursor<'a> {
        Cursor { buf }
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.buf)
    }

    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.buf.len() {
            return None;
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Some(a)
    }

    pub fn u8(&mut self) -> Option<u8> {
        self.bytes(1).map(|b| b[0])
    }

    pub fn u16_be(&mut self) -> Option<u16> {
        self.bytes(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    pub fn i32_be(&mut self) -> Option<i32> {
        self.bytes(4)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u32_be(&mut self) -> Option<u32> {
        self.i32_be().map(|v| v as u32)
    }

    pub fn u16_le(&mut self) -> Option<u16> {
        self.bytes(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }

    pub fn u32_le(&mut self) -> Option<u32> {
        self.bytes(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64_le(&mut self) -> Option<u64> {
        self.bytes(8).map(|b| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            u64::from_le_bytes(a)
        })
    }

    /// A NUL-terminated string (without its NUL).
    pub fn cstr(&mut self) -> Option<&'a [u8]> {
        let end = self.buf.iter().position(|&b| b == 0)?;
        let s = &self.buf[..end];
        self.buf = &self.buf[end + 1..];
        Some(s)
    }

    /// MySQL's length-encoded integer.
    pub fn lenenc(&mut self) -> Option<u64> {
        match self.u8()? {
            n @ 0..=0xfa => Some(n as u64),
            0xfc => self.u16_le().map(u64::from),
            0xfd => self
                .bytes(3)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], 0]) as u64),
            0xfe => self.u64_le(),
            _ => None,
        }
    }

    /// MySQL's length-encoded string.
    pub fn lenenc_bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.lenenc()?;
        self.bytes(usize::try_from(n).ok()?)
    }
}

/// The longest name, tag or field [`text`] keeps: far above what servers and clients
/// send (PostgreSQL's names are 63 bytes), and a bound on what a peer can make the
/// decoder hold in the session's bookkeeping.
pub(super) const MAX_TEXT: usize = 4096;

/// A name, tag or field from the wire: lossy UTF-8, cut at [`MAX_TEXT`] bytes (with `…`).
/// Statement text and values do not go through here: they are kept whole.
pub(super) fn text(b: &[u8]) -> String {
    let mut s = String::from_utf8_lossy(&b[..b.len().min(MAX_TEXT)]).into_owned();
    if b.len() > MAX_TEXT {
        s.push('…');
    }
    s
}

/// Lower-case hex.
pub(super) fn hex(b: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for &x in b {
        s.push(DIGITS[(x >> 4) as usize] as char);
        s.push(DIGITS[(x & 15) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(_: u8, _: usize, _: Option<u8>) -> Keep {
        Keep::All
    }

    #[test]
    fn messages_come_whole_from_any_cut_and_long_bodies_cost_only_the_cap() {
        let mut wire = vec![b'Q', 0, 0, 0, 9];
        wire.extend_from_slice(b"abcd\0");
        wire.extend_from_slice(&[b'X', 0, 0, 0, 4]);
        for cut in 0..wire.len() {
            let mut f = Framer::new(16);
            let mut got = Vec::new();
            for (i, part) in [&wire[..cut], &wire[cut..]].into_iter().enumerate() {
                let mut input = part;
                while let Some(m) = f.next(Framing::PgTyped, &mut input, i as u64, all).unwrap() {
                    got.push((m.kind, m.body.to_vec(), m.wire_len));
                }
            }
            assert_eq!(
                got,
                vec![(b'Q', b"abcd\0".to_vec(), 10), (b'X', vec![], 5)],
                "cut at {cut}"
            );
        }
        let mut f = Framer::new(16);
        let mut big = vec![b'd', 0, 0, 0x10, 4];
        big.extend(std::iter::repeat_n(7u8, 4096));
        let mut input = &big[..];
        let m = f.next(Framing::PgTyped, &mut input, 0, all).unwrap().unwrap();
        assert_eq!((m.len, m.body.len(), m.complete), (4096, 16, false));
        assert!(f.buffered() <= PREFIX.max(16));
        let mut bad: &[u8] = &[b'Q', 0, 0, 0, 3];
        assert!(f
            .next(Framing::PgTyped, &mut bad, 0, all)
            .unwrap_err()
            .contains("length 3"));
    }

    #[test]
    fn a_cursor_says_none_past_the_end() {
        let mut c = Cursor::new(&[0xfc, 0x01]);
        assert_eq!(c.lenenc(), None);
        let mut c = Cursor::new(b"ab");
        assert_eq!(c.cstr(), None);
        assert_eq!(c.bytes(3), None);
        assert_eq!(c.bytes(2), Some(&b"ab"[..]));
        assert_eq!(hex(&[0, 0xab]), "00ab");
        assert_eq!(text(&[b'a'; MAX_TEXT + 9]).len(), MAX_TEXT + '…'.len_utf8());
    }
}

//! The MySQL protocol's value encodings, pure and apart from the session's I/O: the
//! command bytes, length-encoded integers and strings, the OK, EOF and ERR packets'
//! fields, COM_STMT_PREPARE_OK, a prepared statement's execute body with its parameter
//! types, and `$n` placeholders turned into MySQL's `?`. Each reads with bounds checks,
//! so a short or hostile packet is `None` or a default, never a panic.
//!
//! The one place connbench writes these: the session sends with them, and `replay`
//! encodes a recorded command with them.

use mysql_common::constants::StatusFlags;

use super::Prepared;
use crate::proto::{ConnectError, ErrorKind, Phase};

/// The command bytes connbench sends (MySQL Client/Server Protocol, "Text Protocol" and
/// "Prepared Statements").
pub const COM_QUIT: u8 = 0x01;
pub const COM_INIT_DB: u8 = 0x02;
pub const COM_QUERY: u8 = 0x03;
pub const COM_PING: u8 = 0x0e;
pub const COM_STMT_PREPARE: u8 = 0x16;
pub const COM_STMT_EXECUTE: u8 = 0x17;
pub const COM_STMT_CLOSE: u8 = 0x19;
pub const COM_STMT_RESET: u8 = 0x1a;

const MYSQL_TYPE_VAR_STRING: u8 = 0xfd;
const MYSQL_TYPE_LONGLONG: u8 = 0x08;

/// The body of COM_STMT_EXECUTE after its command byte. A value written as a plain
/// integer (pgbench's `\set` variables, the built-in workloads' ids) is bound as a
/// BIGINT, as a program binds its integers (sysbench does); anything else as a string,
/// which the server converts to the column's type as for a text query. Types go with
/// the first execution and again only when they change.
pub(super) fn encode_execute(out: &mut Vec<u8>, st: &mut Prepared, params: &[&str]) {
    out.extend_from_slice(&st.id.to_le_bytes());
    out.push(0); // CURSOR_TYPE_NO_CURSOR
    out.extend_from_slice(&1u32.to_le_bytes());
    let n = st.order.len();
    if n == 0 {
        return;
    }
    out.extend(std::iter::repeat_n(0u8, n.div_ceil(8)));
    let value = |i: usize| params.get(i).copied().unwrap_or_default();
    // The usual case, the types of the last execution again, is written in one pass
    // that reads each value once; a value whose type changed starts the packet's types
    // over from here.
    let flag = out.len();
    if st.types.len() == n {
        out.push(0); // no new types: the server keeps the last ones
        let same = st.order.iter().zip(&st.types).all(|(&i, &t)| {
            let v = value(i);
            let int = plain_integer(v);
            put_value(out, v, int);
            type_of(int) == t
        });
        if same {
            return;
        }
        out.truncate(flag);
    }
    out.push(1); // new parameters bound: types follow
    st.types.clear();
    for &i in &st.order {
        let t = type_of(plain_integer(value(i)));
        st.types.push(t);
        out.extend_from_slice(&[t, 0]);
    }
    for &i in &st.order {
        let v = value(i);
        put_value(out, v, plain_integer(v));
    }
}

fn type_of(int: Option<i64>) -> u8 {
    if int.is_some() {
        MYSQL_TYPE_LONGLONG
    } else {
        MYSQL_TYPE_VAR_STRING
    }
}

fn put_value(out: &mut Vec<u8>, v: &str, int: Option<i64>) {
    match int {
        Some(n) => out.extend_from_slice(&n.to_le_bytes()),
        None => put_lenenc_str(out, v.as_bytes()),
    }
}

/// `v` as an i64 when it is written as one plainly: no sign but a leading `-`, no leading
/// zeros ("007" stays a string: a string column's '007' must not compare as 7). One pass
/// over the digits: this runs for every parameter of every execution.
fn plain_integer(v: &str) -> Option<i64> {
    let (negative, digits) = match v.as_bytes() {
        [b'-', rest @ ..] => (true, rest),
        all => (false, all),
    };
    match digits {
        [] | [b'0', _, ..] => return None,
        [b'0'] => return (!negative).then_some(0),
        _ => {}
    }
    // Accumulated negative: i64::MIN has no positive twin.
    let mut acc: i64 = 0;
    for &b in digits {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        acc = acc.checked_mul(10)?.checked_sub(i64::from(d))?;
    }
    if negative {
        Some(acc)
    } else {
        acc.checked_neg()
    }
}

/// An ERR packet: `0xff`, the error code, `#` and a five-character SQLSTATE (protocol
/// 4.1), then the message. The key is `ER<code>/<SQLSTATE>`, e.g. `1045/28000`.
/// The largest payload one packet carries (16 MiB - 1): a payload this long or longer
/// continues in the next packet.
pub(super) const SPLIT: usize = 0xff_ffff;

/// A packet's header: the payload's length (under [`SPLIT`]) in 3 bytes, then `seq`.
pub(super) fn header(len: usize, seq: u8) -> [u8; 4] {
    [len as u8, (len >> 8) as u8, (len >> 16) as u8, seq]
}

/// The payload length a packet's header announces.
pub(super) fn payload_len(header: &[u8]) -> usize {
    header[0] as usize | (header[1] as usize) << 8 | (header[2] as usize) << 16
}

/// A payload of 16 MiB or more as the protocol frames it, appended to `out`: packets
/// of [`SPLIT`] bytes and the rest, and an empty one after the last when that one was
/// full; `seq` numbers each.
pub(super) fn frame_split(payload: &[u8], seq: &mut u8, out: &mut Vec<u8>) {
    let mut chunks = payload.chunks(SPLIT).peekable();
    while let Some(chunk) = chunks.next() {
        out.extend_from_slice(&header(chunk.len(), *seq));
        out.extend_from_slice(chunk);
        *seq = seq.wrapping_add(1);
        if chunk.len() == SPLIT && chunks.peek().is_none() {
            out.extend_from_slice(&header(0, *seq));
            *seq = seq.wrapping_add(1);
        }
    }
}

pub(super) fn server_error(phase: Phase, pkt: &[u8]) -> ConnectError {
    let code = pkt
        .get(1..3)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .unwrap_or(0);
    let rest = pkt.get(3..).unwrap_or_default();
    let (state, message) = match rest.split_first() {
        Some((b'#', r)) if r.len() >= 5 => (String::from_utf8_lossy(&r[..5]).into_owned(), &r[5..]),
        _ => ("HY000".to_string(), rest),
    };
    ConnectError::new(
        phase,
        ErrorKind::Server {
            code: format!("{code}/{state}"),
            message: String::from_utf8_lossy(message).into_owned(),
        },
    )
}

/// A length-encoded integer at the start of `b`, and the bytes it took.
pub(super) fn lenenc_int(b: &[u8]) -> Option<(u64, usize)> {
    let le = |n: usize| -> Option<u64> {
        let bytes = b.get(1..1 + n)?;
        Some(bytes.iter().rev().fold(0u64, |acc, &x| acc << 8 | x as u64))
    };
    match *b.first()? {
        x @ 0..=0xfa => Some((x as u64, 1)),
        0xfc => Some((le(2)?, 3)),
        0xfd => Some((le(3)?, 4)),
        0xfe => Some((le(8)?, 9)),
        _ => None,
    }
}

/// The column name of a ColumnDefinition41 packet: its fifth length-encoded string,
/// after catalog, schema, table and org_table.
pub(super) fn column_name(def: &[u8]) -> Option<String> {
    let mut rest = def;
    for _ in 0..4 {
        let (n, used) = lenenc_int(rest)?;
        rest = rest.get(used.checked_add(usize::try_from(n).ok()?)?..)?;
    }
    lenenc_str(rest).map(|b| String::from_utf8_lossy(b).into_owned())
}

/// A length-encoded string at the start of `b` (None for NULL or a short packet).
pub(super) fn lenenc_str(b: &[u8]) -> Option<&[u8]> {
    let (n, used) = lenenc_int(b)?;
    let end = used.checked_add(usize::try_from(n).ok()?)?;
    b.get(used..end)
}

/// `s` as a length-encoded string.
pub fn put_lenenc_str(out: &mut Vec<u8>, s: &[u8]) {
    put_lenenc_int(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// `n` as a length-encoded integer: one byte up to 250, else `0xfc`, `0xfd` or `0xfe` and
/// 2, 3 or 8 little-endian bytes.
pub fn put_lenenc_int(out: &mut Vec<u8>, n: u64) {
    match n {
        0..=0xfa => out.push(n as u8),
        0xfb..=0xffff => {
            out.push(0xfc);
            out.extend_from_slice(&(n as u16).to_le_bytes());
        }
        0x1_0000..=0xff_ffff => {
            out.push(0xfd);
            out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xfe);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
}

/// COM_STMT_PREPARE_OK's fixed fields; its parameters' and then its columns' definitions
/// follow, each list ended by an EOF packet when not empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PrepareOk {
    pub statement_id: u32,
    pub columns: u16,
    pub params: u16,
}

/// COM_STMT_PREPARE_OK (`0x00`, then at least 11 bytes); `None` for anything else.
pub(super) fn prepare_ok(pkt: &[u8]) -> Option<PrepareOk> {
    match pkt {
        [0x00, i0, i1, i2, i3, c0, c1, p0, p1, _, _, _, ..] => Some(PrepareOk {
            statement_id: u32::from_le_bytes([*i0, *i1, *i2, *i3]),
            columns: u16::from_le_bytes([*c0, *c1]),
            params: u16::from_le_bytes([*p0, *p1]),
        }),
        _ => None,
    }
}

/// An OK packet's affected rows and status flags.
pub(super) fn ok_packet(pkt: &[u8]) -> (u64, StatusFlags) {
    let parse = || {
        let (affected, a) = lenenc_int(pkt.get(1..)?)?;
        let (_, b) = lenenc_int(pkt.get(1 + a..)?)?;
        let s = pkt.get(1 + a + b..3 + a + b)?;
        Some((
            affected,
            StatusFlags::from_bits_truncate(u16::from_le_bytes([s[0], s[1]])),
        ))
    };
    parse().unwrap_or((0, StatusFlags::empty()))
}

/// An EOF packet's status flags (after the warning count).
pub(super) fn eof_status(pkt: &[u8]) -> StatusFlags {
    pkt.get(3..5)
        .map(|s| StatusFlags::from_bits_truncate(u16::from_le_bytes([s[0], s[1]])))
        .unwrap_or(StatusFlags::empty())
}

/// `$n` placeholders to MySQL's `?`, with the parameter each `?` takes. Quoted text and
/// identifiers are left alone.
pub(super) fn placeholders(sql: &str) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(sql.len());
    let mut order = Vec::new();
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '\'' | '"' | '`') => quote = Some(c),
            (None, '$') if chars.peek().is_some_and(|d| d.is_ascii_digit()) => {
                let mut n = 0usize;
                while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                    n = n.saturating_mul(10).saturating_add(d as usize);
                    chars.next();
                }
                order.push(n.saturating_sub(1));
                out.push('?');
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    (out, order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_of_16_mib_or_more_is_split_and_a_full_last_packet_gets_an_empty_one() {
        const FULL: usize = SPLIT;
        // Exactly one full packet: it, then an empty one.
        let mut out = Vec::new();
        let mut seq = 7;
        frame_split(&vec![b'a'; FULL], &mut seq, &mut out);
        assert_eq!(out.len(), 4 + FULL + 4);
        assert_eq!(&out[..4], &[0xff, 0xff, 0xff, 7]);
        assert_eq!(&out[4 + FULL..], &[0, 0, 0, 8]);
        assert_eq!(seq, 9);
        // A full packet and 5 bytes more: two packets, no empty one.
        out.clear();
        seq = 255;
        frame_split(&vec![b'b'; FULL + 5], &mut seq, &mut out);
        assert_eq!(out.len(), 4 + FULL + 4 + 5);
        assert_eq!(&out[..4], &[0xff, 0xff, 0xff, 255]);
        assert_eq!(&out[4 + FULL..4 + FULL + 4], &[5, 0, 0, 0], "the sequence wraps");
        assert_eq!(seq, 1);
    }

    #[test]
    fn placeholders_become_question_marks_in_order() {
        let (sql, order) = placeholders("UPDATE t SET a = a + $1 WHERE id = $2 AND s = '$3'");
        assert_eq!(sql, "UPDATE t SET a = a + ? WHERE id = ? AND s = '$3'");
        assert_eq!(order, vec![0, 1]);
        let (sql, order) = placeholders("SELECT $2, $1, $2");
        assert_eq!((sql.as_str(), order), ("SELECT ?, ?, ?", vec![1, 0, 1]));
    }

    #[test]
    fn plain_integers_bind_as_bigint_and_types_go_only_when_they_change() {
        for (v, want) in [
            ("0", Some(0)),
            ("42", Some(42)),
            ("-7", Some(-7)),
            ("007", None),
            ("+7", None),
            ("-0", None),
            ("", None),
            ("-", None),
            ("1.5", None),
            ("99999999999999999999", None),
            ("9223372036854775807", Some(i64::MAX)),
            ("9223372036854775808", None),
            ("-9223372036854775808", Some(i64::MIN)),
            ("-9223372036854775809", None),
            ("-00", None),
            ("00", None),
            ("10", Some(10)),
            ("-1x", None),
            ("٣", None),
        ] {
            assert_eq!(plain_integer(v), want, "{v:?}");
        }
        let mut st = Prepared {
            id: 7,
            order: vec![1, 0],
            types: Vec::new(),
        };
        let head = |out: &[u8]| (out[..4].to_vec(), out[4], out[9]);
        let mut out = Vec::new();
        encode_execute(&mut out, &mut st, &["x", "5"]);
        // id, no cursor, iteration count 1, a null bitmap byte, then "new types: 1".
        assert_eq!(head(&out), (7u32.to_le_bytes().to_vec(), 0, 0));
        assert_eq!(out[10], 1);
        assert_eq!(&out[11..15], &[MYSQL_TYPE_LONGLONG, 0, MYSQL_TYPE_VAR_STRING, 0]);
        assert_eq!(&out[15..23], &5i64.to_le_bytes());
        assert_eq!(&out[23..], &[1, b'x']);
        out.clear();
        encode_execute(&mut out, &mut st, &["y", "6"]);
        assert_eq!(out[10], 0, "the same types are not sent again");
        assert_eq!(&out[11..19], &6i64.to_le_bytes());
        assert_eq!(&out[19..], &[1, b'y']);
        out.clear();
        encode_execute(&mut out, &mut st, &["8", "007"]);
        assert_eq!(out[10], 1, "changed types are sent");
        assert_eq!(&out[11..15], &[MYSQL_TYPE_VAR_STRING, 0, MYSQL_TYPE_LONGLONG, 0]);
        // The first value matched its old type and was written before the second's
        // changed: the packet holds each value once, after the new types.
        assert_eq!(&out[15..19], &[3, b'0', b'0', b'7']);
        assert_eq!(&out[19..], &8i64.to_le_bytes());
    }

    #[test]
    fn short_or_hostile_packets_never_panic() {
        for pkt in [
            &[][..],
            &[0xff],
            &[0xff, 1],
            &[0x00],
            &[0x00, 0xfc],
            &[0xfe, 0xff],
            &[0xfd, 1, 2],
        ] {
            let _ = server_error(Phase::Query, pkt);
            let _ = ok_packet(pkt);
            let _ = eof_status(pkt);
            let _ = lenenc_int(pkt);
            let _ = lenenc_str(pkt);
        }
        assert_eq!(
            lenenc_str(&[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            None
        );
        let e = server_error(Phase::Auth, b"\xff\x15\x04#28000Access denied");
        assert_eq!(e.key(), "auth:1045/28000");
        assert!(e.to_string().contains("Access denied"), "{e}");
    }

    #[test]
    fn lenenc_round_trips() {
        for n in [0usize, 250, 251, 65535, 65536, 70000] {
            let s = vec![b'x'; n];
            let mut out = Vec::new();
            put_lenenc_str(&mut out, &s);
            assert_eq!(lenenc_str(&out), Some(&s[..]), "{n}");
        }
        for (n, head) in [
            (250u64, &[250u8][..]),
            (251, &[0xfc, 251, 0]),
            (1 << 24, &[0xfe, 0, 0, 0, 1]),
        ] {
            let mut out = Vec::new();
            put_lenenc_int(&mut out, n);
            assert!(out.starts_with(head), "{n}: {out:?}");
            assert_eq!(lenenc_int(&out), Some((n, out.len())), "{n}");
        }
    }

    #[test]
    fn prepare_ok_reads_the_id_and_counts_of_a_whole_packet() {
        let pkt = [0x00, 9, 0, 0, 0, 2, 0, 3, 0, 0, 0, 0];
        let want = PrepareOk {
            statement_id: 9,
            columns: 2,
            params: 3,
        };
        assert_eq!(prepare_ok(&pkt), Some(want));
        assert_eq!(prepare_ok(&pkt[..11]), None);
        assert_eq!(prepare_ok(&[0xff, 0x15, 0x04]), None);
        assert_eq!(prepare_ok(&[]), None);
    }
}

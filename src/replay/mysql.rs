//! A recorded MySQL/MariaDB request as the command packet to send again: COM_QUERY,
//! COM_STMT_PREPARE, COM_STMT_EXECUTE (its parameters encoded back into the binary
//! protocol from the trace's text or hex, with their recorded types), COM_STMT_CLOSE,
//! COM_STMT_RESET, COM_PING and COM_INIT_DB. A statement id in a payload is the
//! recorded server's; the session maps it to the id its own server returned for the
//! same COM_STMT_PREPARE before sending (MySQL Client/Server Protocol,
//! "COM_STMT_EXECUTE" and "Binary Protocol Value").
//!
//! Pure: no I/O. What cannot be sent as recorded (a parameter whose value or type was
//! not kept, COM_CHANGE_USER and the other commands whose payload the trace leaves out)
//! is named by its cause. The command bytes and the length-encoded strings are
//! `proto::mysql::codec`'s, the ones the session sends with.

use crate::proto::mysql::codec::{
    put_lenenc_str, COM_INIT_DB, COM_PING, COM_QUERY, COM_STMT_CLOSE, COM_STMT_EXECUTE, COM_STMT_PREPARE,
    COM_STMT_RESET,
};
use connbench_trace::event::{Op, Param};

/// One command to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    pub code: u8,
    pub payload: Vec<u8>,
    /// The recorded statement id in the payload's first 4 bytes, to map.
    pub statement_id: Option<u32>,
    /// COM_STMT_PREPARE: the id the recorded server gave it.
    pub prepares: Option<u32>,
    /// The command has an answer to read (COM_STMT_CLOSE has none).
    pub answered: bool,
}

/// `op` as a command; `Ok(None)` for COM_QUIT (the session's close sends it).
pub fn command(op: &Op, prepared_id: Option<u32>) -> Result<Option<Command>, &'static str> {
    let plain = |code: u8, payload: Vec<u8>| Command {
        code,
        payload,
        statement_id: None,
        prepares: None,
        answered: true,
    };
    let with_id = |code: u8, id: u32, answered: bool| Command {
        code,
        payload: id.to_le_bytes().to_vec(),
        statement_id: Some(id),
        prepares: None,
        answered,
    };
    Ok(Some(match op {
        Op::ComQuery(q) => plain(COM_QUERY, q.sql.clone().ok_or(SQL_CAPPED)?.into_bytes()),
        Op::ComStmtPrepare(q) => Command {
            prepares: prepared_id,
            ..plain(COM_STMT_PREPARE, q.sql.clone().ok_or(SQL_CAPPED)?.into_bytes())
        },
        Op::ComStmtExecute {
            statement_id,
            flags,
            params,
        } => {
            let params = params
                .as_ref()
                .ok_or("parameters the recorder could not read (null)")?;
            Command {
                payload: execute_payload(*statement_id, *flags, params)?,
                ..with_id(COM_STMT_EXECUTE, *statement_id, true)
            }
        }
        Op::ComStmtClose { statement_id } => with_id(COM_STMT_CLOSE, *statement_id, false),
        Op::ComStmtReset { statement_id } => with_id(COM_STMT_RESET, *statement_id, true),
        Op::ComPing => plain(COM_PING, Vec::new()),
        Op::ComInitDb { schema } => plain(COM_INIT_DB, schema.clone().into_bytes()),
        Op::ComQuit => return Ok(None),
        Op::ComOther { .. } => return Err("a MySQL command whose payload the trace does not keep"),
        _ => return Err("a PostgreSQL request in a MySQL trace"),
    }))
}

const SQL_CAPPED: &str = "SQL over the recorder's 1 MiB cap (null)";

/// COM_STMT_EXECUTE's payload after its command byte: id, flags, one iteration, the null
/// bitmap, "new types bound" with every type, then the non-null values.
fn execute_payload(id: u32, flags: u8, params: &[Param]) -> Result<Vec<u8>, &'static str> {
    let mut b = Vec::with_capacity(16 + params.len() * 12);
    b.extend_from_slice(&id.to_le_bytes());
    b.push(flags);
    b.extend_from_slice(&1u32.to_le_bytes());
    if params.is_empty() {
        return Ok(b);
    }
    let mut nulls = vec![0u8; params.len().div_ceil(8)];
    for (i, p) in params.iter().enumerate() {
        if p.null {
            nulls[i / 8] |= 1 << (i % 8);
        }
    }
    b.extend_from_slice(&nulls);
    b.push(1);
    for p in params {
        let t = p.type_id.ok_or("a parameter of unknown type")?;
        b.extend_from_slice(&(t as u16).to_le_bytes());
    }
    for p in params.iter().filter(|p| !p.null) {
        value(&mut b, p)?;
    }
    Ok(b)
}

const NO_VALUE: &str = "a parameter without its value";

/// One binary-protocol value, the inverse of the trace decoder's reading.
fn value(b: &mut Vec<u8>, p: &Param) -> Result<(), &'static str> {
    let t = p.type_id.unwrap_or(0) as u16;
    let text = p.text.as_deref();
    match t as u8 {
        0x06 => {}
        0x01 | 0x02 | 0x0d | 0x03 | 0x09 | 0x08 => {
            let size = match t as u8 {
                0x01 => 1,
                0x02 | 0x0d => 2,
                0x03 | 0x09 => 4,
                _ => 8,
            };
            let v: i128 = text
                .ok_or(NO_VALUE)?
                .parse()
                .map_err(|_| "an integer that does not parse")?;
            b.extend_from_slice(&(v as u64).to_le_bytes()[..size]);
        }
        0x04 => {
            let v: f32 = text
                .ok_or(NO_VALUE)?
                .parse()
                .map_err(|_| "a FLOAT that does not parse")?;
            b.extend_from_slice(&v.to_le_bytes());
        }
        0x05 => {
            let v: f64 = text
                .ok_or(NO_VALUE)?
                .parse()
                .map_err(|_| "a DOUBLE that does not parse")?;
            b.extend_from_slice(&v.to_le_bytes());
        }
        0x07 | 0x0a | 0x0c => {
            let v = datetime(text.ok_or(NO_VALUE)?).ok_or("a date that does not parse")?;
            b.push(v.len() as u8);
            b.extend_from_slice(&v);
        }
        0x0b => {
            let v = time(text.ok_or(NO_VALUE)?).ok_or("a TIME that does not parse")?;
            b.push(v.len() as u8);
            b.extend_from_slice(&v);
        }
        _ => {
            let bytes = match (text, p.hex.as_deref()) {
                (Some(s), _) => s.as_bytes().to_vec(),
                (None, Some(h)) => unhex(h).ok_or("a value whose hex does not parse")?,
                (None, None) if p.len == 0 => Vec::new(),
                _ => return Err(NO_VALUE),
            };
            put_lenenc_str(b, &bytes);
        }
    }
    Ok(())
}

/// `YYYY-MM-DD[ HH:MM:SS[.ffffff]]` as 4, 7 or 11 bytes.
fn datetime(s: &str) -> Option<Vec<u8>> {
    let (date, clock) = match s.split_once(' ') {
        Some((d, c)) => (d, Some(c)),
        None => (s, None),
    };
    let mut d = date.split('-');
    let y: u16 = d.next()?.parse().ok()?;
    let m: u8 = d.next()?.parse().ok()?;
    let day: u8 = d.next()?.parse().ok()?;
    let mut out = y.to_le_bytes().to_vec();
    out.extend_from_slice(&[m, day]);
    if let Some(c) = clock {
        let (hms, us) = match c.split_once('.') {
            Some((hms, us)) => (hms, Some(us.parse::<u32>().ok()?)),
            None => (c, None),
        };
        let mut t = hms.split(':');
        for _ in 0..3 {
            out.push(t.next()?.parse().ok()?);
        }
        if let Some(us) = us {
            out.extend_from_slice(&us.to_le_bytes());
        }
    }
    Some(out)
}

/// `[-]H:MM:SS[.ffffff]` (hours may pass 24) as 8 or 12 bytes.
fn time(s: &str) -> Option<Vec<u8>> {
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (1u8, r),
        None => (0, s),
    };
    let (hms, us) = match s.split_once('.') {
        Some((hms, us)) => (hms, Some(us.parse::<u32>().ok()?)),
        None => (s, None),
    };
    let mut t = hms.split(':');
    let h: u64 = t.next()?.parse().ok()?;
    let m: u8 = t.next()?.parse().ok()?;
    let sec: u8 = t.next()?.parse().ok()?;
    let mut out = vec![neg];
    out.extend_from_slice(&((h / 24) as u32).to_le_bytes());
    out.extend_from_slice(&[(h % 24) as u8, m, sec]);
    if let Some(us) = us {
        out.extend_from_slice(&us.to_le_bytes());
    }
    Some(out)
}

/// A trace's `hex` value back to bytes (both engines' binary values).
pub(super) fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(t: u32, text: Option<&str>, hex: Option<&str>, null: bool) -> Param {
        Param {
            type_id: Some(t),
            format: None,
            null,
            len: 0,
            text: text.map(str::to_string),
            hex: hex.map(str::to_string),
        }
    }

    /// The trace decoder's own test payload (a LONGLONG 42, a VAR_STRING "hé", a NULL)
    /// comes back byte for byte.
    #[test]
    fn execute_payloads_encode_what_the_decoder_read() {
        let ps = [
            param(0x08, Some("42"), None, false),
            param(0xfd, Some("hé"), None, false),
            param(0x06, None, None, true),
        ];
        let b = execute_payload(9, 0, &ps).unwrap();
        let mut want = vec![9, 0, 0, 0, 0, 1, 0, 0, 0, 0b100, 1];
        for t in [0x08u16, 0xfd, 0x06] {
            want.extend_from_slice(&t.to_le_bytes());
        }
        want.extend_from_slice(&42i64.to_le_bytes());
        want.push(3);
        want.extend_from_slice("hé".as_bytes());
        assert_eq!(b, want);
        // Unsigned and negative integers, dates, times, floats, bytes.
        let mut v = Vec::new();
        value(&mut v, &param(0x8003, Some("4294967295"), None, false)).unwrap();
        value(&mut v, &param(0x01, Some("-1"), None, false)).unwrap();
        assert_eq!(v, [0xff, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(
            datetime("2024-02-29 13:05:09").unwrap(),
            [0xe8, 0x07, 2, 29, 13, 5, 9]
        );
        assert_eq!(datetime("2024-02-29").unwrap().len(), 4);
        assert_eq!(datetime("2024-02-29 13:05:09.000001").unwrap().len(), 11);
        assert_eq!(time("-26:03:04").unwrap(), [1, 1, 0, 0, 0, 2, 3, 4]);
        let mut v = Vec::new();
        value(&mut v, &param(0x05, Some("0.1"), None, false)).unwrap();
        assert_eq!(v, 0.1f64.to_le_bytes());
        let mut v = Vec::new();
        value(&mut v, &param(0xfc, None, Some("00ff"), false)).unwrap();
        assert_eq!(v, [2, 0, 0xff]);
        let redacted = Param {
            len: 3,
            ..param(0xfd, None, None, false)
        };
        assert_eq!(value(&mut Vec::new(), &redacted), Err(NO_VALUE));
        assert_eq!(command(&Op::ComQuit, None), Ok(None));
    }
}

//! MySQL/MariaDB packets the decoder reads, parsed with bounds checks (the "Client/Server
//! Protocol" pages of MySQL's source documentation and MariaDB's knowledge base): the
//! server's greeting, the client's handshake response (every field but its auth
//! response, which is stepped over and never copied), OK, EOF and ERR packets, and the
//! parameters of COM_STMT_EXECUTE (and of COM_QUERY with query attributes) in the binary
//! protocol's value encoding. Each parser returns `None` for a packet that does not
//! hold what it should.

use super::event::{Param, ServerError};
use super::frame::{hex, text, Cursor};

pub(super) const CLIENT_MYSQL: u32 = 0x0000_0001;
pub(super) const CLIENT_CONNECT_WITH_DB: u32 = 0x0000_0008;
pub(super) const CLIENT_PROTOCOL_41: u32 = 0x0000_0200;
pub(super) const CLIENT_SSL: u32 = 0x0000_0800;
pub(super) const CLIENT_SECURE_CONNECTION: u32 = 0x0000_8000;
pub(super) const CLIENT_PLUGIN_AUTH: u32 = 0x0008_0000;
pub(super) const CLIENT_CONNECT_ATTRS: u32 = 0x0010_0000;
pub(super) const CLIENT_PLUGIN_AUTH_LENENC: u32 = 0x0020_0000;
pub(super) const CLIENT_DEPRECATE_EOF: u32 = 0x0100_0000;
pub(super) const CLIENT_QUERY_ATTRIBUTES: u32 = 0x0800_0000;
/// MariaDB's extended capability: result sets may omit column definitions.
pub(super) const MARIADB_CLIENT_CACHE_METADATA: u32 = 0x0000_0010;
pub(super) const SERVER_STATUS_IN_TRANS: u16 = 0x0001;
pub(super) const SERVER_STATUS_AUTOCOMMIT: u16 = 0x0002;
pub(super) const SERVER_MORE_RESULTS_EXISTS: u16 = 0x0008;
/// COM_STMT_EXECUTE's flag: a parameter count follows (with query attributes).
const PARAMETER_COUNT_AVAILABLE: u8 = 0x08;

/// Connection attributes and parameters kept per session.
const MAX_ATTRIBUTES: usize = 64;

/// The server's Protocol::HandshakeV10.
#[derive(Debug, Default)]
pub(super) struct Greeting {
    pub version: String,
    pub connection_id: u32,
    pub caps: u32,
    /// MariaDB's extended capabilities (0 from MySQL).
    pub ext_caps: u32,
    pub plugin: Option<String>,
}

pub(super) fn greeting(body: &[u8]) -> Option<Greeting> {
    let mut c = Cursor::new(body);
    if c.u8()? != 10 {
        return None;
    }
    let version = text(c.cstr()?);
    let connection_id = c.u32_le()?;
    c.bytes(9)?; // the scramble's first part and a filler
    let mut g = Greeting {
        version,
        connection_id,
        caps: c.u16_le()? as u32,
        ..Greeting::default()
    };
    if c.is_empty() {
        return Some(g);
    }
    c.bytes(3)?; // collation, status
    g.caps |= (c.u16_le()? as u32) << 16;
    let scramble_len = c.u8()?;
    c.bytes(6)?;
    let ext = c.u32_le()?;
    if g.caps & CLIENT_MYSQL == 0 {
        g.ext_caps = ext;
    }
    if g.caps & CLIENT_SECURE_CONNECTION != 0 {
        c.bytes((scramble_len as usize).saturating_sub(8).max(13))?;
    }
    if g.caps & CLIENT_PLUGIN_AUTH != 0 {
        let rest = c.rest();
        let name = rest.split(|&b| b == 0).next().unwrap_or_default();
        g.plugin = Some(text(name));
    }
    Some(g)
}

/// The client's Protocol::HandshakeResponse41, or its SSLRequest.
#[derive(Debug, Default)]
pub(super) struct Response {
    pub caps: u32,
    pub ext_caps: u32,
    /// Only the first 32 bytes: CLIENT_SSL set, TLS follows.
    pub ssl_request: bool,
    pub user: Option<String>,
    pub database: Option<String>,
    pub plugin: Option<String>,
    pub attributes: Vec<(String, String)>,
}

pub(super) fn handshake_response(body: &[u8]) -> Option<Response> {
    let mut c = Cursor::new(body);
    let caps = c.u32_le()?;
    if caps & CLIENT_PROTOCOL_41 == 0 {
        return None;
    }
    c.bytes(4 + 1 + 19)?; // max packet, collation, filler
    let ext = c.u32_le()?;
    let mut r = Response {
        caps,
        ext_caps: if caps & CLIENT_MYSQL == 0 { ext } else { 0 },
        ..Response::default()
    };
    if c.is_empty() {
        r.ssl_request = caps & CLIENT_SSL != 0;
        return Some(r);
    }
    r.user = Some(text(c.cstr()?));
    // The auth response: stepped over, never copied.
    if caps & CLIENT_PLUGIN_AUTH_LENENC != 0 {
        c.lenenc_bytes()?;
    } else if caps & CLIENT_SECURE_CONNECTION != 0 {
        let n = c.u8()? as usize;
        c.bytes(n)?;
    } else {
        c.cstr()?;
    }
    if caps & CLIENT_CONNECT_WITH_DB != 0 {
        r.database = c.cstr().map(text);
    }
    if caps & CLIENT_PLUGIN_AUTH != 0 {
        r.plugin = c.cstr().map(text);
    }
    if caps & CLIENT_CONNECT_ATTRS != 0 {
        if let Some(attrs) = c.lenenc_bytes() {
            let mut a = Cursor::new(attrs);
            while !a.is_empty() && r.attributes.len() < MAX_ATTRIBUTES {
                let (Some(k), Some(v)) = (a.lenenc_bytes(), a.lenenc_bytes()) else {
                    break;
                };
                r.attributes.push((text(k), text(v)));
            }
        }
    }
    Some(r)
}

/// What an OK or EOF packet says.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Status {
    pub affected: Option<u64>,
    pub flags: u16,
}

/// An OK packet (0x00, or 0xFE where CLIENT_DEPRECATE_EOF ends a result set with one).
pub(super) fn ok(body: &[u8]) -> Option<Status> {
    let mut c = Cursor::new(body);
    c.u8()?;
    let affected = c.lenenc()?;
    c.lenenc()?;
    Some(Status {
        affected: Some(affected),
        flags: c.u16_le().unwrap_or(0),
    })
}

/// An EOF packet (0xFE, under 9 bytes).
pub(super) fn eof(body: &[u8]) -> Status {
    let mut c = Cursor::new(body);
    let flags = c.bytes(3).and_then(|_| c.u16_le()).unwrap_or(0);
    Status {
        affected: None,
        flags,
    }
}

/// An ERR packet.
pub(super) fn err(body: &[u8], redact: bool) -> ServerError {
    let mut c = Cursor::new(body);
    c.u8();
    let code = c.u16_le();
    let mut rest = c;
    let sqlstate = if rest.u8() == Some(b'#') {
        rest.bytes(5).map(text)
    } else {
        rest = c;
        None
    };
    ServerError {
        sqlstate,
        code,
        severity: None,
        message: super::error_message(rest.rest(), redact),
    }
}

/// COM_STMT_EXECUTE's parameters, after the statement id, flags and iteration count.
/// `n` is the statement's count from its COM_STMT_PREPARE_OK; `types` the types last
/// sent for it (an execution may leave them out), updated when sent.
pub(super) fn execute_params(
    c: &mut Cursor<'_>,
    flags: u8,
    n: usize,
    types: &mut Vec<u16>,
    query_attributes: bool,
    redact: bool,
) -> Option<Vec<Param>> {
    let mut n = n;
    if query_attributes && (n > 0 || flags & PARAMETER_COUNT_AVAILABLE != 0) {
        n = usize::try_from(c.lenenc()?).ok()?;
    }
    if n == 0 {
        return Some(Vec::new());
    }
    binary_values(c, n, types, query_attributes, redact)
}

/// COM_QUERY's query attributes, when the client has CLIENT_QUERY_ATTRIBUTES: stepped
/// over (they are not the statement's values) to reach the query text.
pub(super) fn skip_query_attributes(c: &mut Cursor<'_>) -> Option<()> {
    let n = usize::try_from(c.lenenc()?).ok()?;
    c.lenenc()?; // parameter sets: always 1
    if n > 0 {
        binary_values(c, n, &mut Vec::new(), true, true)?;
    }
    Some(())
}

/// A null bitmap, the new-types flag, types (and names), then the non-null values.
fn binary_values(
    c: &mut Cursor<'_>,
    n: usize,
    types: &mut Vec<u16>,
    named: bool,
    redact: bool,
) -> Option<Vec<Param>> {
    if n > c.len() * 8 {
        return None;
    }
    let nulls = c.bytes(n.div_ceil(8))?;
    if c.u8()? == 1 {
        types.clear();
        for _ in 0..n {
            types.push(c.u16_le()?);
            if named {
                c.lenenc_bytes()?;
            }
        }
    }
    let mut params = Vec::with_capacity(n);
    for i in 0..n {
        let t = types.get(i).copied();
        let mut p = Param {
            type_id: t.map(u32::from),
            ..Param::default()
        };
        if nulls[i / 8] & (1 << (i % 8)) != 0 {
            p.null = true;
        } else {
            value(c, t?, &mut p, redact)?;
        }
        params.push(p);
    }
    Some(params)
}

/// One binary-protocol value of type `t` (low byte the field type, 0x8000 unsigned).
fn value(c: &mut Cursor<'_>, t: u16, p: &mut Param, redact: bool) -> Option<()> {
    let unsigned = t & 0x8000 != 0;
    let (bytes, shown): (&[u8], Option<String>) = match t as u8 {
        0x06 => (&[], None), // MYSQL_TYPE_NULL
        0x01 | 0x02 | 0x0d | 0x03 | 0x09 | 0x08 => {
            let b = c.bytes(int_size(t as u8))?;
            (b, Some(int(b, unsigned)))
        }
        0x04 => {
            let b = c.bytes(4)?;
            (b, Some(f32::from_le_bytes(b.try_into().ok()?).to_string()))
        }
        0x05 => {
            let b = c.bytes(8)?;
            (b, Some(f64::from_le_bytes(b.try_into().ok()?).to_string()))
        }
        0x07 | 0x0a | 0x0c => {
            let n = c.u8()? as usize;
            let b = c.bytes(n)?;
            (b, Some(datetime(b)))
        }
        0x0b => {
            let n = c.u8()? as usize;
            let b = c.bytes(n)?;
            (b, Some(time(b)))
        }
        // BIT and GEOMETRY are bytes; everything else is a length-encoded string.
        0x10 | 0xff => (c.lenenc_bytes()?, None),
        _ => {
            let b = c.lenenc_bytes()?;
            (b, std::str::from_utf8(b).ok().map(str::to_string))
        }
    };
    p.len = bytes.len() as u64;
    if !redact {
        match shown {
            Some(s) => p.text = Some(s),
            None if !bytes.is_empty() => p.hex = Some(hex(bytes)),
            None => {}
        }
    }
    Some(())
}

/// The size of a binary integer: TINY, SHORT and YEAR, LONG and INT24, LONGLONG.
fn int_size(t: u8) -> usize {
    match t {
        0x01 => 1,
        0x02 | 0x0d => 2,
        0x03 | 0x09 => 4,
        _ => 8,
    }
}

/// A little-endian integer of 1, 2, 4 or 8 bytes, signed or not, in decimal.
fn int(b: &[u8], unsigned: bool) -> String {
    let mut a = [0u8; 8];
    a[..b.len()].copy_from_slice(b);
    let v = u64::from_le_bytes(a);
    if unsigned {
        return v.to_string();
    }
    let shift = 64 - 8 * b.len() as u32;
    (((v << shift) as i64) >> shift).to_string()
}

/// A binary DATE/DATETIME/TIMESTAMP (0, 4, 7 or 11 bytes).
fn datetime(b: &[u8]) -> String {
    let mut c = Cursor::new(b);
    let (y, m, d) = (c.u16_le().unwrap_or(0), c.u8().unwrap_or(0), c.u8().unwrap_or(0));
    let mut s = format!("{y:04}-{m:02}-{d:02}");
    if b.len() >= 7 {
        let (h, mi, se) = (c.u8().unwrap_or(0), c.u8().unwrap_or(0), c.u8().unwrap_or(0));
        s += &format!(" {h:02}:{mi:02}:{se:02}");
        if let Some(us) = c.u32_le() {
            s += &format!(".{us:06}");
        }
    }
    s
}

/// A binary TIME (0, 8 or 12 bytes): sign, days, hours, minutes, seconds, microseconds.
fn time(b: &[u8]) -> String {
    let mut c = Cursor::new(b);
    let neg = c.u8().unwrap_or(0) == 1;
    let days = c.u32_le().unwrap_or(0) as u64;
    let (h, m, s) = (
        c.u8().unwrap_or(0) as u64,
        c.u8().unwrap_or(0),
        c.u8().unwrap_or(0),
    );
    let mut out = format!("{}{:02}:{m:02}:{s:02}", if neg { "-" } else { "" }, days * 24 + h);
    if let Some(us) = c.u32_le() {
        out += &format!(".{us:06}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_values_read_as_their_types_and_redaction_keeps_only_sizes() {
        // Three parameters: LONGLONG 42, VAR_STRING "hé", NULL; types sent.
        let mut body = vec![0b100, 1];
        for t in [0x08u16, 0xfd, 0x06] {
            body.extend_from_slice(&t.to_le_bytes());
        }
        body.extend_from_slice(&42i64.to_le_bytes());
        body.push(3);
        body.extend_from_slice("hé".as_bytes());
        let mut types = Vec::new();
        let ps = execute_params(&mut Cursor::new(&body), 0, 3, &mut types, false, false).unwrap();
        assert_eq!(ps[0].text.as_deref(), Some("42"));
        assert_eq!((ps[1].text.as_deref(), ps[1].len), (Some("hé"), 3));
        assert!(ps[2].null);
        assert_eq!(types, [0x08, 0xfd, 0x06]);
        // The same values again without types: the remembered ones apply.
        let mut again = vec![0b100, 0];
        again.extend_from_slice(&(-7i64).to_le_bytes());
        again.extend_from_slice(&[1, b'x']);
        let ps = execute_params(&mut Cursor::new(&again), 0, 3, &mut types, false, true).unwrap();
        assert_eq!(
            (ps[0].text.as_ref(), ps[0].hex.as_ref(), ps[0].len),
            (None, None, 8)
        );
        assert_eq!(ps[1].len, 1);
        // Cut short: an error, not a panic.
        assert!(execute_params(&mut Cursor::new(&body[..9]), 0, 3, &mut Vec::new(), false, false).is_none());
        assert_eq!(
            (int(&[0xff], false), int(&[0xff, 0xff], true)),
            ("-1".into(), "65535".into())
        );
        assert_eq!(int(&(-5i32).to_le_bytes(), false), "-5");
        assert_eq!(int(&u64::MAX.to_le_bytes(), true), u64::MAX.to_string());
        assert_eq!(datetime(&[0xe8, 0x07, 2, 29, 13, 5, 9]), "2024-02-29 13:05:09");
        assert_eq!(time(&[1, 1, 0, 0, 0, 2, 3, 4]), "-26:03:04");
    }

    #[test]
    fn err_packets_with_and_without_sqlstate() {
        let e = err(b"\xff\x15\x04#28000Access denied", false);
        assert_eq!(
            (e.code, e.sqlstate.as_deref(), e.message.as_deref()),
            (Some(1045), Some("28000"), Some("Access denied"))
        );
        let e = err(b"\xff\x10\x04Too many connections", false);
        assert_eq!(
            (e.sqlstate, e.message.as_deref()),
            (None, Some("Too many connections"))
        );
    }
}

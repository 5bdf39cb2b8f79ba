//! The four messages every extended or prepared statement sends (Bind, Describe of the
//! portal, Execute, and Sync), written in one pass.
//!
//! `postgres-protocol`'s general writers take iterators and closures, back-patch each
//! message's length, and check the buffer's room at every field: about 1,200
//! instructions a statement under callgrind (issue 56), a sixth of the client's whole
//! path. These messages always have the same shape here (the unnamed portal, text
//! parameters, text results), so their lengths are known before the first byte and one
//! reservation covers all four. The bytes are the crate's: a test compares them.

use bytes::BytesMut;

/// Describe of the unnamed portal, then Execute of it with no row limit.
const DESCRIBE_EXECUTE: [u8; 17] = [b'D', 0, 0, 0, 6, b'P', 0, b'E', 0, 0, 0, 9, 0, 0, 0, 0, 0];
const SYNC: [u8; 5] = [b'S', 0, 0, 0, 4];

/// Appends Bind (portal "" of `statement`, `params` as text), Describe and Execute of
/// the portal, and Sync when `sync`. On an error nothing is written; the message says
/// what the protocol cannot carry.
pub(super) fn bind_execute(
    buf: &mut BytesMut,
    statement: &str,
    params: &[&str],
    sync: bool,
) -> Result<(), String> {
    if statement.as_bytes().contains(&0) {
        return Err(format!("the statement name {statement:?} contains a NUL byte"));
    }
    let count = i16::try_from(params.len()).map_err(|_| {
        format!(
            "{} parameters; a Bind message carries at most 32767",
            params.len()
        )
    })?;
    let values: usize = params.iter().map(|p| 4 + p.len()).sum();
    // Length, portal "", the statement's name, one format code for all parameters (text),
    // the parameter count, the values, one format code for all results (text).
    let body = 4 + 1 + statement.len() + 1 + 4 + 2 + values + 4;
    let length = i32::try_from(body)
        .map_err(|_| format!("a Bind message of {body} bytes; the protocol's limit is 2 GiB"))?;
    // The whole run is sized once and written through a cursor: `BytesMut`'s own
    // writers check the room and move the length at every field (about 40 instructions
    // each, most of this function's cost when written that way).
    let at = buf.len();
    let tail = if sync { SYNC.len() } else { 0 };
    buf.resize(at + 1 + body + DESCRIBE_EXECUTE.len() + tail, 0);
    let mut out = Cursor(&mut buf[at..]);
    out.put(b"B");
    out.put(&length.to_be_bytes());
    out.put(&[0]);
    out.put(statement.as_bytes());
    out.put(&[0, 0, 1, 0, 0]);
    out.put(&count.to_be_bytes());
    for p in params {
        // Each fits: the whole message's length did.
        out.put(&(p.len() as i32).to_be_bytes());
        out.put(p.as_bytes());
    }
    out.put(&[0, 1, 0, 0]);
    out.put(&DESCRIBE_EXECUTE);
    if sync {
        out.put(&SYNC);
    }
    Ok(())
}

/// Writes byte runs one after another into a slice sized for all of them.
struct Cursor<'a>(&'a mut [u8]);

impl Cursor<'_> {
    fn put(&mut self, bytes: &[u8]) {
        let (head, rest) = std::mem::take(&mut self.0).split_at_mut(bytes.len());
        head.copy_from_slice(bytes);
        self.0 = rest;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use postgres_protocol::message::frontend;

    /// What `postgres-protocol` writes for the same statement.
    fn reference(statement: &str, params: &[&str], sync: bool) -> BytesMut {
        let mut buf = BytesMut::new();
        frontend::bind(
            "",
            statement,
            std::iter::once(0i16),
            params.iter().copied(),
            |v: &str, buf: &mut BytesMut| {
                buf.extend_from_slice(v.as_bytes());
                Ok(postgres_protocol::IsNull::No)
            },
            std::iter::once(0i16),
            &mut buf,
        )
        .unwrap_or_else(|_| panic!("postgres-protocol cannot encode {statement:?}"));
        frontend::describe(b'P', "", &mut buf).unwrap();
        frontend::execute("", 0, &mut buf).unwrap();
        if sync {
            frontend::sync(&mut buf);
        }
        buf
    }

    #[test]
    fn writes_the_bytes_postgres_protocol_writes() {
        let long = "x".repeat(70_000);
        let cases: [(&str, &[&str], bool); 5] = [
            ("", &[], true),
            ("P_0", &["42"], true),
            ("P_1", &["1", "", "héllo", "-7"], false),
            ("a_longer_statement_name", &[long.as_str(), "2"], true),
            ("", &["with\0nul"], false),
        ];
        for (statement, params, sync) in cases {
            let mut buf = BytesMut::from(&b"kept"[..]);
            bind_execute(&mut buf, statement, params, sync).unwrap();
            assert_eq!(&buf[..4], b"kept", "what was buffered before stays");
            assert_eq!(
                &buf[4..],
                &reference(statement, params, sync)[..],
                "{statement:?} {params:?} {sync}"
            );
        }
    }

    #[test]
    fn refuses_what_the_protocol_cannot_carry_and_writes_nothing() {
        let mut buf = BytesMut::new();
        let e = bind_execute(&mut buf, "P\0", &["1"], true).unwrap_err();
        assert!(e.contains("NUL"), "{e}");
        let many = vec!["1"; 40_000];
        let e = bind_execute(&mut buf, "P_0", &many, true).unwrap_err();
        assert!(e.contains("40000 parameters"), "{e}");
        assert!(buf.is_empty());
    }
}

//! Hostile peers: a "server" that speaks just enough of PostgreSQL's protocol to get
//! connbench to a query, then answers with a malformed message. This is not a mock
//! database (nothing here stands in for PostgreSQL's behaviour): it is the byte-level
//! input no real server sends, which connbench must turn into an error naming the
//! violation, never a panic or a stall.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use crate::common::connbench;

/// Serves every connection: reads the startup message, sends AuthenticationOk and
/// ReadyForQuery, reads one message (the query) and answers `reply`, then holds the
/// connection open. Returns the port.
fn serve(reply: Vec<u8>) -> u16 {
    serve_then(reply, true)
}

/// As [`serve`]; with `hold` false the connection is closed after the reply, so a reader
/// that wants more bytes meets the end of the stream rather than a silent peer.
pub fn serve_then(reply: Vec<u8>, hold: bool) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        // Holding: serve every connection (a retrying client comes back). Not holding:
        // one connection, then the thread ends, so thousands of cases leave no threads.
        for conn in listener.incoming().take(if hold { usize::MAX } else { 1 }) {
            let Ok(mut c) = conn else { return };
            let reply = reply.clone();
            std::thread::spawn(move || {
                let _ = c.set_read_timeout(Some(Duration::from_secs(20)));
                let mut len = [0u8; 4];
                if c.read_exact(&mut len).is_err() {
                    return;
                }
                let mut rest = vec![0u8; u32::from_be_bytes(len) as usize - 4];
                let _ = c.read_exact(&mut rest);
                let _ = c.write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 0, b'Z', 0, 0, 0, 5, b'I']);
                let mut head = [0u8; 5];
                if c.read_exact(&mut head).is_ok() {
                    let mut body =
                        vec![0u8; u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize - 4];
                    let _ = c.read_exact(&mut body);
                    let _ = c.write_all(&reply);
                }
                // Hold the connection open: a reader that waits for more would stall here.
                if hold {
                    std::thread::sleep(Duration::from_secs(20));
                }
            });
        }
    });
    port
}

#[test]
fn malformed_backend_messages_are_protocol_errors_not_panics_or_stalls() {
    let ready = [b'Z', 0, 0, 0, 5, b'I'];
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        // CommandComplete with no tag at all (length 4), then a proper ReadyForQuery.
        (
            "C of length 4",
            [&[b'C', 0, 0, 0, 4][..], &ready].concat(),
            "needs at least",
        ),
        // ReadyForQuery without its status byte.
        ("Z of length 4", vec![b'Z', 0, 0, 0, 4], "needs at least"),
        // A length field shorter than itself.
        ("length 2", vec![b'D', 0, 0, 0, 2], "length field is 2"),
        // A length PostgreSQL never sends (2 GiB): reading towards it would wait forever.
        (
            "length 2 GiB",
            vec![b'D', 0x7f, 0xff, 0xff, 0xff],
            "length field is 2147483647",
        ),
    ];
    for (name, reply, expect) in cases {
        let port = serve(reply);
        let target = format!("host=127.0.0.1 port={port} user=x dbname=x sslmode=disable");
        let t0 = Instant::now();
        let o = connbench(&["connect", &target, "-n", "1", "-q", "select 1"]);
        let out = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert_ne!(o.status.code(), Some(101), "{name}: connbench panicked: {out}");
        assert!(
            !o.status.success(),
            "{name}: a malformed answer cannot succeed: {out}"
        );
        assert!(
            out.contains(expect),
            "{name}: the error names the violation: {out}"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "{name}: took {:?}",
            t0.elapsed()
        );
    }
}

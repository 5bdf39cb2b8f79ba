//! The sidecar with TLS to the server (PostgreSQL only): the app speaks plaintext to the
//! relay, which answers its SSLRequest `N`, opens TLS to the server itself and carries
//! the app's bytes inside, withdrawing SCRAM channel binding the app could not complete.
//! Apart from the plain relay because only this path speaks the protocol.
//!
//! With a distance, the sidecar stands beside the app and the server is far: the sidecar
//! opens TCP and TLS to the server itself, locally here, so the server's first answer is
//! held until a real path would have let it reach the app, four round trips after the
//! connect (TCP's handshake, the SSLRequest, TLS 1.3's handshake, and the startup
//! message's own exchange), each leg drawn with the shape's delay and jitter. The bytes
//! after it are delayed both ways as on the plain relay.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{handshake, reset_on_close, wait_until, Addr, Leg, RelayStats, Shape, Shaped, Sock};
use crate::net::transport::TlsSetup;

/// PostgreSQL's SSLRequest: length 8, code 80877103.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

/// The sidecar with TLS to the server: plaintext from the app, TLS upstream.
pub(super) async fn relay_tls(
    mut client: Sock,
    accepted: Instant,
    upstream: &Addr,
    shape: Shape,
    tls: &TlsSetup,
    seed: u64,
    stats: &RelayStats,
) -> io::Result<()> {
    let client_fd = client.fd();
    let fail = |e: io::Error| {
        reset_on_close(client_fd);
        e
    };
    // The app's first message: an SSLRequest (sslmode=prefer) gets `N`, the plaintext
    // StartupMessage (at least 8 bytes too) is kept for the server.
    let mut first = [0u8; 8];
    {
        let (mut r, mut w) = client.split();
        r.read_exact(&mut first).await?;
        if first == SSL_REQUEST {
            w.write_all(b"N").await?;
        }
    }
    let pending = (first != SSL_REQUEST).then_some(first);
    let Addr::Tcp(a) = upstream else {
        return Err(fail(io::Error::other("upstream TLS needs a TCP upstream")));
    };
    let mut tcp = TcpStream::connect(a).await.map_err(fail)?;
    let _ = tcp.set_nodelay(true);
    let server_fd = tcp.as_raw_fd();
    tcp.write_all(&SSL_REQUEST).await.map_err(fail)?;
    let mut answer = [0u8; 1];
    tcp.read_exact(&mut answer).await.map_err(fail)?;
    if answer[0] != b'S' {
        return Err(fail(io::Error::other("the server refused TLS")));
    }
    let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
    let mut stream = connector
        .connect(tls.server_name.clone(), tcp)
        .await
        .map_err(fail)?;
    // The startup message (read whole: its first 8 bytes may already be in `pending`).
    let startup = {
        let (mut r, _) = client.split();
        let head = match pending {
            Some(p) => p,
            None => {
                let mut h = [0u8; 8];
                r.read_exact(&mut h).await?;
                h
            }
        };
        let len = u32::from_be_bytes(head[..4].try_into().unwrap()) as usize;
        if !(8..=10_000).contains(&len) {
            return Err(fail(io::Error::other("not a PostgreSQL startup message")));
        }
        let mut msg = head.to_vec();
        msg.resize(len, 0);
        r.read_exact(&mut msg[8..]).await?;
        msg
    };
    stream.write_all(&startup).await.map_err(fail)?;
    stats.bytes_up.fetch_add(startup.len() as u64, Ordering::Relaxed);
    // The server's first answer. Over TLS it offers SCRAM-SHA-256-PLUS (channel binding
    // to the TLS session), which a plaintext client must refuse (libpq does: it would be
    // a downgrade); the binding would be to the sidecar's TLS anyway, not the app's. So
    // the sidecar withdraws the -PLUS mechanism, as a TLS-terminating proxy must.
    let mut head = [0u8; 5];
    stream.read_exact(&mut head).await.map_err(fail)?;
    let len = u32::from_be_bytes(head[1..5].try_into().unwrap()) as usize;
    if !(4..=1 << 20).contains(&len) {
        return Err(fail(io::Error::other("unexpected first message from the server")));
    }
    let mut body = vec![0u8; len - 4];
    stream.read_exact(&mut body).await.map_err(fail)?;
    let first = strip_channel_binding(head[0], &body).unwrap_or_else(|| [&head[..], &body[..]].concat());
    if !shape.one_way.is_zero() || !shape.jitter.is_zero() {
        let mut rng = crate::rng::Rng::new(seed.rotate_left(29) | 1);
        let legs: std::time::Duration = (0..8).map(|_| handshake::leg(&shape, &mut rng)).sum();
        wait_until(accepted + legs).await;
    }
    {
        let (_, mut w) = client.split();
        w.write_all(&first).await?;
    }
    stats.bytes_down.fetch_add(first.len() as u64, Ordering::Relaxed);
    let (sr, sw) = tokio::io::split(&mut stream);
    let crossed = AtomicU64::new(0);
    let shaped = Shaped {
        shape,
        seed,
        stats,
        crossed: &crossed,
    };
    let server = (
        super::Reader::Plain(Box::new(sr)),
        Box::new(sw) as Box<dyn tokio::io::AsyncWrite + Unpin>,
    );
    if shaped.both_ways(client.split(), server, Leg::NOW).await {
        reset_on_close(client_fd);
        reset_on_close(server_fd);
    }
    Ok(())
}

/// AuthenticationSASL (`R`, code 10) without SCRAM-SHA-256-PLUS, re-framed; `None` for
/// any other message (forwarded unchanged). Also the recorder's, with TLS upstream.
pub fn strip_channel_binding(kind: u8, body: &[u8]) -> Option<Vec<u8>> {
    if kind != b'R' || body.len() < 4 || body[..4] != 10u32.to_be_bytes() {
        return None;
    }
    let mechanisms: Vec<&[u8]> = body[4..]
        .split(|&b| b == 0)
        .filter(|m| !m.is_empty() && *m != b"SCRAM-SHA-256-PLUS")
        .collect();
    let mut out_body = 10u32.to_be_bytes().to_vec();
    for m in mechanisms {
        out_body.extend_from_slice(m);
        out_body.push(0);
    }
    out_body.push(0);
    let mut out = vec![b'R'];
    out.extend_from_slice(&((out_body.len() + 4) as u32).to_be_bytes());
    out.extend_from_slice(&out_body);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sidecar_withdraws_channel_binding_only() {
        let mut body = 10u32.to_be_bytes().to_vec();
        body.extend_from_slice(b"SCRAM-SHA-256-PLUS\0SCRAM-SHA-256\0\0");
        let out = strip_channel_binding(b'R', &body).unwrap();
        let mut want = vec![b'R'];
        want.extend_from_slice(&(4u32 + 4 + 14 + 1).to_be_bytes());
        want.extend_from_slice(&10u32.to_be_bytes());
        want.extend_from_slice(b"SCRAM-SHA-256\0\0");
        assert_eq!(out, want);
        assert!(
            strip_channel_binding(b'R', &0u32.to_be_bytes()).is_none(),
            "AuthenticationOk"
        );
        assert!(strip_channel_binding(b'E', b"xyz").is_none());
    }
}

//! PostgreSQL's CancelRequest (protocol §55.2.8, "Canceling Requests in Progress"): the
//! key a backend hands its client in BackendKeyData, and the request that uses it, sent
//! on a connection of its own. The key is a secret (whoever holds it may cancel the
//! session's queries): it lives in memory only, and its `Debug` never shows it.

use bytes::BytesMut;
use postgres_protocol::message::frontend;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::negotiate_tls;
use crate::proto::socket::open_socket;
use crate::proto::{ConnectError, Endpoint, ErrorKind, Phase, PhaseCursor, Stopwatch};

/// A backend's pid and secret key, from its BackendKeyData.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CancelKey {
    pub pid: i32,
    secret: i32,
}

impl CancelKey {
    pub fn new(pid: i32, secret: i32) -> CancelKey {
        CancelKey { pid, secret }
    }
}

impl std::fmt::Debug for CancelKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelKey")
            .field("pid", &self.pid)
            .field("secret", &"<withheld>")
            .finish()
    }
}

/// Sends a CancelRequest for `key` to `ep` on a new connection (TLS when the endpoint
/// uses it, as libpq does since PostgreSQL 17), then waits for the server to close it:
/// the server answers nothing, and whether a query was cancelled is seen only on the
/// session itself (57014). A backend with no query running ignores it. Bounded by the
/// endpoint's connect limit, so a silent peer cannot hold it.
pub async fn send_cancel(ep: &Endpoint, key: CancelKey) -> Result<(), ConnectError> {
    let limit = ep.connect_limit();
    match tokio::time::timeout(limit, cancel_on_new_connection(ep, key)).await {
        Ok(r) => r,
        Err(_) => Err(ConnectError::new(
            Phase::Query,
            ErrorKind::Config(format!(
                "CancelRequest for backend {}: no close from the server within {} ms",
                key.pid,
                limit.as_millis()
            )),
        )),
    }
}

async fn cancel_on_new_connection(ep: &Endpoint, key: CancelKey) -> Result<(), ConnectError> {
    let mut sw = Stopwatch::start();
    let cursor = PhaseCursor::default();
    let stream = open_socket(&ep.target, &cursor, &mut sw).await?;
    let mut stream = match &ep.tls {
        Some(tls) => negotiate_tls(&ep.target, stream, tls).await?,
        None => stream,
    };
    let mut buf = BytesMut::with_capacity(16);
    frontend::cancel_request(key.pid, key.secret, &mut buf);
    let io = |e, what: &str| {
        ConnectError::new(
            Phase::Query,
            ErrorKind::io(e, format!(" {what} the CancelRequest for backend {}", key.pid)),
        )
    };
    stream.write_all(&buf).await.map_err(|e| io(e, "sending"))?;
    stream.flush().await.map_err(|e| io(e, "sending"))?;
    // The server reads the request, signals the backend and closes: EOF (or a reset).
    let mut sink = [0u8; 64];
    loop {
        match stream.read(&mut sink).await {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(()),
            Err(e) => return Err(io(e, "closing after")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keys_debug_withholds_its_secret() {
        let shown = format!("{:?}", CancelKey::new(4242, 0x5ec2e7));
        assert!(shown.contains("4242"), "{shown}");
        assert!(!shown.contains(&0x5ec2e7.to_string()), "{shown}");
    }
}

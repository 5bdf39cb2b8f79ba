//! The engine-neutral first phases of a connect: `resolve` (TCP only) and the socket
//! `connect`, with the errors both engines share (a TLS failure's cause, a silent close).
//! Apart so that `postgres` and `mysql` each use it without using each other.

use std::net::SocketAddr;

use super::{ConnectError, ErrorKind, Phase, PhaseCursor, Stopwatch};
use crate::net::transport::{self, Stream};
use crate::targets::{Host, Target};

/// The engine-neutral first phases: `resolve` (TCP only) and the socket `connect`, each
/// marked on `sw`.
pub(super) async fn open_socket(
    t: &Target,
    cursor: &PhaseCursor,
    sw: &mut Stopwatch,
) -> Result<Stream, ConnectError> {
    Ok(match &t.host {
        Host::Unix(_) => {
            cursor.set(Phase::Connect);
            let s = connect_socket_unix(t).await?;
            sw.mark(Phase::Connect, 0);
            s
        }
        Host::Tcp(host) => {
            cursor.set(Phase::Resolve);
            let addrs = resolve(t, host).await?;
            sw.mark(Phase::Resolve, 0);
            cursor.set(Phase::Connect);
            let s = connect_socket_tcp(&addrs).await?;
            sw.mark_network(Phase::Connect, 1);
            s
        }
    })
}

async fn resolve(t: &Target, host: &str) -> Result<Vec<SocketAddr>, ConnectError> {
    if let Some(ip) = t.hostaddr {
        return Ok(vec![SocketAddr::new(ip, t.port)]);
    }
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, t.port)]);
    }
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, t.port))
        .await
        .map_err(|e| {
            ConnectError::new(
                Phase::Resolve,
                ErrorKind::io(e, format!(" resolving host {host:?}")),
            )
        })?
        .collect();
    if addrs.is_empty() {
        return Err(ConnectError::new(
            Phase::Resolve,
            ErrorKind::Config(format!("host {host:?} has no addresses")),
        ));
    }
    Ok(addrs)
}

async fn connect_socket_unix(t: &Target) -> Result<Stream, ConnectError> {
    let path = t.socket_path().expect("a Unix target has a socket path");
    transport::connect_unix(&path).await.map_err(|e| {
        let hint = match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                "; is a server running there, and is the port right?"
            }
            _ => "",
        };
        ConnectError::new(
            Phase::Connect,
            ErrorKind::io(e, format!(" on socket {}{hint}", path.display())),
        )
    })
}

/// Tries each address in turn, as libpq does, and reports the last failure.
async fn connect_socket_tcp(addrs: &[SocketAddr]) -> Result<Stream, ConnectError> {
    let mut last = None;
    for addr in addrs {
        match transport::connect_tcp(*addr).await {
            Ok(s) => return Ok(s),
            Err(e) => {
                last = Some(ConnectError::new(
                    Phase::Connect,
                    ErrorKind::io(e, format!(" on {addr}")),
                ))
            }
        }
    }
    Err(last.expect("at least one address"))
}

pub(super) fn tls_cause(e: &std::io::Error) -> String {
    match e.get_ref() {
        Some(inner) => inner.to_string(),
        None => e.to_string(),
    }
}

/// The server closed the connection without a word (EOF).
pub(super) fn closed(p: Phase) -> ConnectError {
    ConnectError::new(p, ErrorKind::io(std::io::ErrorKind::UnexpectedEof.into(), ""))
}

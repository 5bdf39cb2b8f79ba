//! The phased connect against every sandbox target: phases present, round trips as the
//! protocol says, phases adding up to the total, and each kind of failure named by phase.

use std::time::Duration;

use connbench::connect::connect_once;
use connbench::proto::Endpoint;
use connbench::proto::{ConnectError, ErrorKind, Phase, Timeline};
use connbench::targets::Target;

use crate::common::{connbench, conninfo, runtime, sandbox, stderr, stdout};

fn endpoint(conninfo: &str) -> Endpoint {
    Endpoint::new(Target::parse(conninfo).unwrap()).unwrap()
}

fn connect(conninfo: &str, query: Option<&str>) -> Result<Timeline, ConnectError> {
    let ep = endpoint(conninfo);
    runtime().block_on(connect_once(&ep, query)).map(|(t, _)| t)
}

fn rts(t: &Timeline) -> Vec<(Phase, u32)> {
    Phase::ALL
        .iter()
        .filter_map(|&p| t.phase(p).map(|s| (p, s.round_trips)))
        .collect()
}

#[test]
fn every_sandbox_target_has_the_protocols_round_trips() {
    use Phase::*;
    // SCRAM: SASLInitialResponse and SASLResponse are two exchanges after the startup.
    // TCP: one round trip for the handshake, and a (zero-cost) resolve of the IP literal.
    // TLS: the SSLRequest answer, then TLS 1.3's handshake, which takes two round trips
    // here because PostgreSQL 15's default ssl_ecdh_curve (prime256v1) answers the
    // client's X25519 key share with a HelloRetryRequest.
    let scram_unix = vec![(Connect, 0), (Startup, 1), (Auth, 2), (Ready, 0), (Query, 1)];
    let scram_tcp = vec![
        (Resolve, 0),
        (Connect, 1),
        (Startup, 1),
        (Auth, 2),
        (Ready, 0),
        (Query, 1),
    ];
    let trust_unix = vec![(Connect, 0), (Startup, 1), (Auth, 0), (Ready, 0), (Query, 1)];
    let trust_tcp = vec![
        (Resolve, 0),
        (Connect, 1),
        (Startup, 1),
        (Auth, 0),
        (Ready, 0),
        (Query, 1),
    ];
    let tls = vec![
        (Resolve, 0),
        (Connect, 1),
        (Tls, 3),
        (Startup, 1),
        (Auth, 2),
        (Ready, 0),
        (Query, 1),
    ];
    let expected = [
        ("unix", &scram_unix),
        ("tcp", &scram_tcp),
        ("tls", &tls),
        ("pgbouncer_unix", &scram_unix),
        ("pgbouncer_tcp", &scram_tcp),
        ("pgbouncer_tx_unix", &scram_unix),
        ("pgbouncer_tx_tcp", &scram_tcp),
        ("unix_trust", &trust_unix),
        ("tcp_trust", &trust_tcp),
        ("pgbouncer_unix_trust", &trust_unix),
    ];
    assert_eq!(
        expected.len(),
        sandbox().targets.len(),
        "every sandbox target is checked"
    );
    for (name, want) in expected {
        let t = connect(&conninfo(name), Some("SELECT 1")).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(&rts(&t), want, "round trips per phase at {name}");
        let sum: u64 = t.phases.iter().flatten().map(|s| s.ns).sum();
        assert_eq!(sum, t.total_ns, "{name}: the phases add up to the total");
        assert!(t.total_ns > 0);
        assert!(t.counters.bytes_sent > 0 && t.counters.bytes_received > 0);
        assert_eq!(
            t.tls.is_some(),
            name == "tls",
            "{name}: TLS only on the tls target"
        );
    }
}

#[test]
fn tls_reports_what_was_negotiated_and_verifies_like_libpq() {
    let t = connect(&conninfo("tls"), None).unwrap();
    let tls = t.tls.expect("tls info");
    assert_eq!(tls.version, "TLSv1.3");
    assert!(tls.cipher.starts_with("TLS13_"), "{}", tls.cipher);

    // verify-full checks the host name; verify-ca only the chain.
    let port = sandbox().postgres_port;
    let ca = sandbox().ca_cert.display().to_string();
    let pass = sandbox().passfile.display().to_string();
    let base = format!("host=wrong.invalid hostaddr=127.0.0.1 port={port} user=connbench dbname=connbench passfile={pass} sslrootcert={ca}");
    let e = connect(&format!("{base} sslmode=verify-full"), None).unwrap_err();
    assert_eq!(e.phase, Phase::Tls, "{e}");
    assert!(
        e.to_string().contains("not valid for name") || e.to_string().contains("NotValidForName"),
        "{e}"
    );
    connect(&format!("{base} sslmode=verify-ca"), None).expect("verify-ca ignores the host name");
    // require without a root certificate encrypts but verifies nothing.
    let t = connect(
        &format!(
            "host=127.0.0.1 port={port} user=connbench dbname=connbench passfile={pass} sslmode=require"
        ),
        None,
    )
    .unwrap();
    assert!(t.tls.is_some());
}

#[test]
fn wrong_password_fails_in_auth_with_sqlstate() {
    let info = sandbox();
    let e = connect(
        &format!(
            "host={} port={} user=connbench dbname=connbench password=wrong",
            info.dir.display(),
            info.postgres_port
        ),
        None,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "auth: password authentication failed for user \"connbench\" (28P01)"
    );
    assert_eq!(e.key(), "auth:28P01");
}

#[test]
fn tls_required_but_not_offered() {
    // The sandbox's PgBouncer has no TLS for clients.
    let info = sandbox();
    let e = connect(
        &format!(
            "host=127.0.0.1 port={} user=connbench dbname=connbench passfile={} sslmode=require",
            info.pgbouncer_port,
            info.passfile.display()
        ),
        None,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "tls: server does not support SSL, but sslmode=require"
    );
}

#[test]
fn refused_port_and_missing_socket_fail_in_connect() {
    let e = connect("host=127.0.0.1 port=1 user=x dbname=x sslmode=disable", None).unwrap_err();
    assert_eq!(e.to_string(), "connect: connection refused on 127.0.0.1:1");
    let e = connect("host=/tmp/cb-no-such-dir port=5432 user=x dbname=x", None).unwrap_err();
    assert_eq!(e.phase, Phase::Connect);
    assert_eq!(
        e.to_string(),
        "connect: no such file or directory on socket /tmp/cb-no-such-dir/.s.PGSQL.5432; is a server running there, and is the port right?"
    );
}

#[test]
fn unknown_database_fails_after_auth() {
    let info = sandbox();
    let e = connect(
        &format!(
            "host={} port={} user=connbench dbname=nope passfile={}",
            info.dir.display(),
            info.postgres_port,
            info.passfile.display()
        ),
        None,
    )
    .unwrap_err();
    // PostgreSQL checks the database after authentication, while the backend
    // initialises: AuthenticationOk arrives, then the error, so it is a `ready` failure.
    assert!(
        matches!(&e.kind, ErrorKind::Server { code, .. } if code == "3D000"),
        "{e}"
    );
    assert_eq!(e.to_string(), "ready: database \"nope\" does not exist (3D000)");
}

#[test]
fn an_unreachable_host_times_out_in_connect() {
    // Loopback stands in for an unreachable host: a listener whose accept queue is full
    // drops further SYNs, so connect() hangs until connect_timeout (libpq raises 1 s to 2).
    let (port, _held) = full_listener();
    let e = connect(
        &format!("host=127.0.0.1 port={port} user=x dbname=x sslmode=disable connect_timeout=1"),
        None,
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "connect: timed out after 2.00 s (connect_timeout)");
}

#[test]
fn a_silent_server_times_out_in_startup() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let e = connect(
        &format!("host=127.0.0.1 port={port} user=x dbname=x sslmode=disable connect_timeout=2"),
        None,
    )
    .unwrap_err();
    assert_eq!(e.phase, Phase::Startup, "{e}");
    assert!(matches!(e.kind, ErrorKind::Timeout(d) if d == Duration::from_secs(2)));
}

/// A TCP listener with a backlog of 0 and its queue already full, plus what holds it.
fn full_listener() -> (u16, Vec<std::net::TcpStream>) {
    // SAFETY: plain socket calls on a descriptor we own; it is never closed while in use
    // because it is leaked into the returned holder's lifetime (the test's).
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as u16;
        addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let len = std::mem::size_of::<libc::sockaddr_in>() as u32;
        assert_eq!(libc::bind(fd, &addr as *const _ as *const libc::sockaddr, len), 0);
        assert_eq!(libc::listen(fd, 0), 0);
        let mut bound: libc::sockaddr_in = std::mem::zeroed();
        let mut blen = len;
        libc::getsockname(fd, &mut bound as *mut _ as *mut libc::sockaddr, &mut blen);
        let port = u16::from_be(bound.sin_port);
        // Fill the queue: connections that complete but are never accepted.
        let mut held = Vec::new();
        for _ in 0..4 {
            let s = std::net::TcpStream::connect_timeout(
                &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
                Duration::from_millis(200),
            );
            match s {
                Ok(s) => held.push(s),
                Err(_) => break,
            }
        }
        (port, held)
    }
}

/// A MySQL target pointed at PostgreSQL's port: each side waits for the other to speak
/// first, so the connect runs into its bound. `connect` gives the target up after that
/// first bound instead of waiting one per attempt (a warm-up and a measured connect were
/// two), and its error states the bound. Timed against a bound that holds on a busy
/// machine: two bounds would take at least 4 s, one takes 2 s and the process's start.
#[test]
fn a_server_of_another_protocol_costs_connect_one_bound() {
    let pg = conninfo("tcp");
    let port = pg
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("port="))
        .unwrap();
    let started = std::time::Instant::now();
    let o = connbench(&[
        "connect",
        &format!("mariadb://x@127.0.0.1:{port}/x?connect-timeout=2"),
        "-n",
        "1",
    ]);
    let took = started.elapsed();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = format!("{}{}", stdout(&o), stderr(&o));
    assert!(out.contains("timed out after 2.00 s (connect_timeout)"), "{out}");
    assert!(out.contains("its first attempt timed out"), "{out}");
    assert!(took < Duration::from_millis(3900), "one bound, not two: {took:?}");
}

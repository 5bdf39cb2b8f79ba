//! `connbench record --listen-tls` against the sandbox's servers: applications that
//! require TLS (psql with `sslmode=require` and with `verify-full` against the CA the
//! recorder wrote beside the trace; the `mariadb` client with `--ssl
//! --ssl-verify-server-cert`) recorded with only their address changed. Their statements
//! are decoded from inside the TLS the recorder terminated, the trace says they used TLS
//! and what the handshake took, `connbench trace` prices it, and neither the password
//! nor any private key is in the trace's bytes. Bad flags are refused with the flag, the
//! value and the fix.

use std::path::Path;
use std::process::Command;

use connbench_trace::event::SessionOpen;
use connbench_trace::{Event, TraceReader};

use crate::common::{sandbox, start_recorder, stderr, stdout, stop_recorder, through_port, OwnMariadb};

/// The events of a trace, and its raw bytes (a plain `.trace`: no gzip to see through).
fn read_trace(path: &Path) -> (Vec<Event>, String) {
    let mut reader = TraceReader::open(path).unwrap();
    assert!(reader.header().options.listen_tls, "{:?}", reader.header());
    let events = reader.by_ref().map(Result::unwrap).collect();
    (events, std::fs::read_to_string(path).unwrap())
}

fn opens(events: &[Event]) -> Vec<&SessionOpen> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::SessionOpen(o) => Some(&**o),
            _ => None,
        })
        .collect()
}

/// Whether a request's SQL in the trace holds `text`.
fn has_sql(events: &[Event], text: &str) -> bool {
    events.iter().any(|e| match e {
        Event::Request(r) => format!("{:?}", r.op).contains(text),
        _ => false,
    })
}

/// Every session opened over TLS the recorder terminated: its version, its handshake's
/// time and round trips, and decoded to readiness.
fn assert_all_tls(events: &[Event], n: usize) {
    let o = opens(events);
    assert_eq!(o.len(), n, "{events:#?}");
    for s in o {
        assert!(s.tls && s.tls_requested && s.ready && !s.encrypted, "{s:?}");
        assert_eq!(s.tls_version.as_deref(), Some("TLSv1.3"), "{s:?}");
        let ns = s.phases.tls_handshake_ns.expect("the handshake's time");
        assert!(ns > 0 && ns < 10_000_000_000, "{s:?}");
        assert_eq!(s.phases.tls_handshake_round_trips, Some(1), "TLS 1.3: {s:?}");
    }
}

/// psql with sslmode=require, then with verify-full trusting the CA the recorder wrote
/// (by its IP and by localhost), through `record --listen-tls` to the sandbox's
/// PostgreSQL over plaintext TCP. Fails against a recorder that answers the SSLRequest
/// `N` again (psql refuses to go on: sslmode=require) or whose certificate does not
/// name the listen address (verify-full refuses it).
#[test]
fn psql_requiring_tls_is_recorded_through_listen_tls() {
    let dir = crate::common::scratch("record-listen-tls");
    let out = dir.join("pg.trace");
    let upstream = format!("127.0.0.1:{}", sandbox().postgres_port);
    let (child, port) = start_recorder(&upstream, &["--listen-tls"], &out);
    let ca = dir.join("pg.trace.ca.crt");
    assert!(ca.exists(), "the CA beside the trace");
    let require = through_port(&port, "connbench", "require");
    let verify = format!(
        "{} sslrootcert={}",
        through_port(&port, "connbench", "verify-full"),
        ca.display()
    );
    let by_name = verify.replace("host=127.0.0.1", "host=localhost");
    for (conninfo, tag) in [
        (&require, "require"),
        (&verify, "verify_ip"),
        (&by_name, "verify_name"),
    ] {
        let o = Command::new("psql")
            .args([conninfo.as_str(), "-XAt", "-c", "\\conninfo", "-c"])
            .arg(format!("SELECT 'listen_tls_{tag}'"))
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "psql {tag} through the recorder: {}",
            stderr(&o)
        );
        let said = stdout(&o);
        assert!(
            said.contains("SSL connection (protocol: TLSv1.3") && said.contains(&format!("listen_tls_{tag}")),
            "{tag}: {said}"
        );
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let done = child.wait_with_output().unwrap();
    assert_eq!(done.status.code(), Some(130), "{}", stderr(&done));
    let said = format!("{}{}", stdout(&done), stderr(&done));
    assert!(
        said.contains("3 session(s) used TLS, terminated by the recorder"),
        "{said}"
    );
    assert!(!said.contains("PRIVATE KEY"), "{said}");
    let (events, bytes) = read_trace(&out);
    assert_all_tls(&events, 3);
    for tag in ["require", "verify_ip", "verify_name"] {
        assert!(
            has_sql(&events, &format!("listen_tls_{tag}")),
            "{tag}: {events:#?}"
        );
    }
    let password = std::fs::read_to_string(&sandbox().passfile).unwrap();
    let password = password.lines().next().unwrap().rsplit(':').next().unwrap();
    assert!(password.len() >= 8, "a real password to look for");
    assert!(!bytes.contains(password), "the password is in the trace");
    assert!(
        !bytes.contains("PRIVATE KEY") && !bytes.contains("BEGIN"),
        "key material in the trace"
    );
    // Only the trace and the CA's certificate were written: no key file anywhere.
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["pg.trace", "pg.trace.ca.crt"]);
    let ca_text = std::fs::read_to_string(&ca).unwrap();
    assert!(ca_text.contains("BEGIN CERTIFICATE") && !ca_text.contains("PRIVATE"));
    // `connbench trace` prints the TLS on its connections line and prices the recorded
    // handshake over TLS.
    let o = crate::common::connbench(&["trace", out.to_str().unwrap(), "--rtt", "50ms"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let line = text.lines().find(|l| l.starts_with("connections")).unwrap();
    assert!(line.contains("3 over TLS (terminated by the recorder"), "{text}");
    let o = crate::common::connbench(&["trace", out.to_str().unwrap(), "--rtt", "50ms", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["profile"]["connections"]["tls"], 3, "{v:#}");
    let over = v["predictions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["scenario"] == "+50 ms, over TLS")
        .unwrap();
    assert!(
        over["how"].as_str().unwrap().contains("the handshake recorded"),
        "{over:#}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

static MARIA: OwnMariadb = OwnMariadb::new();

/// The `mariadb` client requiring TLS and verifying the recorder's certificate, through
/// `record --listen-tls` to the sandbox's MariaDB: the server's TLS offer is kept, the
/// client's SSLRequest carried on, and the server sees a TLS session (its Ssl_cipher);
/// the statements are decoded, the password is not in the trace. Fails against a
/// recorder that withdraws the TLS offer again (the client refuses: the server does not
/// support TLS) or rewrites nothing and forwards plaintext (the handshake breaks).
#[test]
fn the_mariadb_client_requiring_tls_is_recorded_through_listen_tls() {
    let m = MARIA.info().mariadb.as_ref().unwrap();
    let password = MARIA.password();
    let dir = crate::common::scratch("record-listen-tls-maria");
    let out = dir.join("maria.trace");
    let upstream = format!("127.0.0.1:{}", m.port);
    let (child, port) = start_recorder(&upstream, &["--engine", "mysql", "--listen-tls"], &out);
    let ca = dir.join("maria.trace.ca.crt");
    let o = Command::new("mariadb")
        .arg(format!("--defaults-extra-file={}", m.defaults_file.display()))
        .args([
            "-h",
            "127.0.0.1",
            "-P",
            &port,
            "--ssl",
            "--ssl-verify-server-cert",
        ])
        .arg(format!("--ssl-ca={}", ca.display()))
        .args([
            "-N",
            "-B",
            "connbench",
            "-e",
            "SHOW SESSION STATUS LIKE 'Ssl_version'; SELECT 'listen_tls_maria'",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "mariadb through the recorder: {}", stderr(&o));
    let said = stdout(&o);
    assert!(
        said.contains("Ssl_version\tTLSv1.3") && said.contains("listen_tls_maria"),
        "the server's side is TLS too: {said}"
    );
    stop_recorder(child);
    let (events, bytes) = read_trace(&out);
    assert_all_tls(&events, 1);
    assert!(has_sql(&events, "listen_tls_maria"), "{events:#?}");
    assert_eq!(opens(&events)[0].user.as_deref(), Some("connbench"));
    assert!(!bytes.contains(&password), "the password is in the trace");
    assert!(!bytes.contains("PRIVATE KEY"));
    std::fs::remove_dir_all(dir).unwrap();
}

/// Bad TLS flags are refused before anything listens, each naming the flag, the value
/// and the fix; the CA beside a trace is never written over, and the refused
/// recording leaves no trace behind.
#[test]
fn bad_listen_tls_flags_are_refused_with_the_fix() {
    let dir = crate::common::scratch("record-listen-tls-bad");
    let out = dir.join("x.trace");
    let out_s = out.to_str().unwrap();
    let refused = |extra: &[&str]| {
        let mut args = vec![
            "record",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "127.0.0.1:1",
            "--out",
            out_s,
        ];
        args.extend_from_slice(extra);
        let o = crate::common::connbench(&args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        stderr(&o)
    };
    let cert = dir.join("app.crt");
    let key = dir.join("app.key");
    let e = refused(&["--listen-cert", cert.to_str().unwrap()]);
    assert!(
        e.contains("--listen-cert") && e.contains("needs --listen-key"),
        "{e}"
    );
    let e = refused(&["--listen-key", key.to_str().unwrap()]);
    assert!(e.contains("needs --listen-cert"), "{e}");
    let e = refused(&[
        "--listen-cert",
        cert.to_str().unwrap(),
        "--listen-key",
        key.to_str().unwrap(),
    ]);
    assert!(
        e.contains("--listen-cert") && e.contains("app.crt") && e.contains("cannot read"),
        "{e}"
    );
    // A certificate with another's key.
    let pair = |name: &str| {
        let k = rcgen::KeyPair::generate().unwrap();
        let c = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .self_signed(&k)
            .unwrap();
        std::fs::write(dir.join(format!("{name}.crt")), c.pem()).unwrap();
        std::fs::write(dir.join(format!("{name}.key")), k.serialize_pem()).unwrap();
    };
    pair("app");
    pair("other");
    let other = dir.join("other.key");
    let e = refused(&[
        "--listen-cert",
        cert.to_str().unwrap(),
        "--listen-key",
        other.to_str().unwrap(),
    ]);
    assert!(e.contains("does not go with --listen-cert"), "{e}");
    let o = crate::common::connbench(&[
        "record",
        "--listen",
        "/tmp/x.sock",
        "--upstream",
        "127.0.0.1:1",
        "--out",
        out_s,
        "--listen-tls",
    ]);
    assert!(
        stderr(&o).contains("a Unix socket carries no TLS"),
        "{}",
        stderr(&o)
    );
    // The CA file exists: refused, and the trace it would have gone beside is not left.
    std::fs::write(dir.join("x.trace.ca.crt"), "mine").unwrap();
    let e = refused(&["--listen-tls"]);
    assert!(
        e.contains("never overwritten") && e.contains("x.trace.ca.crt"),
        "{e}"
    );
    assert!(!out.exists(), "the refused recording's trace is gone");
    assert_eq!(
        std::fs::read_to_string(dir.join("x.trace.ca.crt")).unwrap(),
        "mine"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

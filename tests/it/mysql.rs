//! MySQL/MariaDB, the second engine, against the real MariaDB 10.11 that connbench's
//! sandbox starts: the phased connect on every MariaDB target, failures named by phase,
//! `init`, and `load` with every workload, query mode and connection policy. Each load
//! is checked against the server's own count of what it did.

use std::sync::{Mutex, OnceLock};

use connbench::connect::connect_once;
use connbench::proto::{Endpoint, ErrorKind, Phase, Timeline};
use connbench::sandbox::{Sandbox, SandboxInfo, SandboxOptions};
use connbench::target::Target;

use crate::common::{check_schema, connbench, runtime, stderr, stdout};

/// One sandbox with MariaDB for this module's tests (never dropped: its watchdog removes
/// it when the test process ends).
fn sandbox() -> &'static SandboxInfo {
    static HOLD: OnceLock<Mutex<Sandbox>> = OnceLock::new();
    static INFO: OnceLock<SandboxInfo> = OnceLock::new();
    INFO.get_or_init(|| {
        let sb = std::thread::spawn(|| {
            runtime().block_on(Sandbox::start(&SandboxOptions {
                mariadb: true,
                ..SandboxOptions::default()
            }))
        })
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("sandbox with MariaDB did not start: {e:#}"));
        let info = sb.info.clone();
        let _ = HOLD.set(Mutex::new(sb));
        info
    })
}

fn conninfo(name: &str) -> String {
    sandbox().target(name).unwrap().conninfo.clone()
}

fn connect(conninfo: &str, query: Option<&str>) -> Result<Timeline, connbench::proto::ConnectError> {
    let ep = Endpoint::new(Target::parse(conninfo).unwrap()).unwrap();
    runtime().block_on(connect_once(&ep, query)).map(|(t, _)| t)
}

/// What the server itself says, through the `mariadb` client and the sandbox's option
/// file: an independent reading of what connbench did.
fn server_says(sql: &str) -> String {
    let sb = sandbox();
    let m = sb.mariadb.as_ref().unwrap();
    let out = std::process::Command::new("mariadb")
        .arg(format!("--defaults-extra-file={}", m.defaults_file.display()))
        .arg(format!("--socket={}", m.socket.display()))
        .args(["--skip-ssl", "-N", "-B", "connbench", "-e", sql])
        .output()
        .expect("run the mariadb client");
    assert!(out.status.success(), "mariadb -e {sql:?}: {}", stderr(&out));
    stdout(&out).trim().to_string()
}

#[test]
fn every_mariadb_target_has_its_round_trips_and_phases_add_up() {
    use Phase::*;
    // Server-first: the greeting comes unasked (no round trip), native password is one
    // exchange, ed25519 two (an auth switch carries its nonce), TLS one more for the
    // SSLRequest-less handshake of TLS 1.3, and TCP's handshake one.
    let cases: [(&str, &[(Phase, u32)]); 4] = [
        (
            "mariadb_unix",
            &[(Connect, 0), (Startup, 0), (Auth, 1), (Query, 1)],
        ),
        (
            "mariadb_tcp",
            &[(Resolve, 0), (Connect, 1), (Startup, 0), (Auth, 1), (Query, 1)],
        ),
        (
            "mariadb_ed25519_unix",
            &[(Connect, 0), (Startup, 0), (Auth, 2), (Query, 1)],
        ),
        (
            "mariadb_tls",
            &[(Resolve, 0), (Connect, 1), (Startup, 0), (Auth, 1), (Query, 1)],
        ),
    ];
    for (name, want) in cases {
        let t = connect(&conninfo(name), Some("SELECT 1")).unwrap_or_else(|e| panic!("{name}: {e}"));
        let got: Vec<(Phase, u32)> = Phase::ALL
            .iter()
            .filter(|&&p| p != Tls)
            .filter_map(|&p| t.phase(p).map(|s| (p, s.round_trips)))
            .collect();
        assert_eq!(got, want, "{name}");
        let sum: u64 = t.phases.iter().flatten().map(|s| s.ns).sum();
        assert!(
            sum.abs_diff(t.total_ns) < 1_000,
            "{name}: phases {sum} ns, total {} ns",
            t.total_ns
        );
        if name == "mariadb_tls" {
            let tls = t.phase(Tls).expect("a TLS phase");
            assert!(tls.round_trips >= 1, "{name}: {tls:?}");
            assert!(
                t.tls.as_ref().is_some_and(|i| i.version.starts_with("TLS")),
                "{:?}",
                t.tls
            );
        } else {
            assert!(t.phase(Tls).is_none() && t.tls.is_none(), "{name}");
        }
    }
}

#[test]
fn mariadb_connect_json_follows_the_connect_schema() {
    let out = connbench(&[
        "connect",
        &conninfo("mariadb_unix"),
        &conninfo("mariadb_tls"),
        "-n",
        "5",
        "-q",
        "SELECT 1",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    check_schema("connect", &v);
    let phases: Vec<&str> = v["targets"][1]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        phases,
        ["resolve", "connect", "tls", "startup", "auth", "query"],
        "{v}"
    );
    assert_eq!(
        v["targets"][1]["server_version"]
            .as_str()
            .map(|s| s.starts_with("10.")),
        Some(true),
        "{v}"
    );
}

#[test]
fn mariadb_failures_name_their_phase_code_and_never_the_password() {
    let sb = sandbox();
    let m = sb.mariadb.as_ref().unwrap();
    let wrong = format!(
        "mysql://connbench:n0tThePassw0rd@127.0.0.1:{}/connbench?ssl-mode=DISABLED",
        m.port
    );
    let e = connect(&wrong, None).unwrap_err();
    assert_eq!(e.phase, Phase::Auth, "{e}");
    assert!(
        matches!(&e.kind, ErrorKind::Server { code, .. } if code == "1045/28000"),
        "{e}"
    );
    let unknown_db = conninfo("mariadb_tcp").replace("/connbench?", "/no_such_db?");
    let e = connect(&unknown_db, None).unwrap_err();
    assert_eq!(e.phase, Phase::Auth, "{e}");
    assert!(e.to_string().contains("no_such_db"), "{e}");
    // TLS against a CA that did not sign the server's certificate.
    let other_ca = std::env::temp_dir().join(format!("connbench-other-ca-{}.crt", std::process::id()));
    let cert = rcgen::generate_simple_self_signed(vec!["other".to_string()]).unwrap();
    std::fs::write(&other_ca, cert.cert.pem()).unwrap();
    let tls =
        conninfo("mariadb_tls").replace(&sb.ca_cert.display().to_string(), &other_ca.display().to_string());
    let e = connect(&tls, None).unwrap_err();
    std::fs::remove_file(&other_ca).unwrap();
    assert_eq!(e.phase, Phase::Tls, "{e}");
    // The command line: one clear line with the phase, and no password.
    let out = connbench(&["connect", &wrong, "-n", "2"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let all = stdout(&out) + &stderr(&out);
    assert!(all.contains("auth: Access denied"), "{all}");
    assert!(!all.contains("n0tThePassw0rd"), "{all}");
}

#[test]
fn mariadb_init_and_load_every_workload_mode_and_policy() {
    let target = conninfo("mariadb_unix");
    // A table connbench did not create is never dropped or altered: init refuses.
    server_says("CREATE TABLE connbench.accounts (id int)");
    let out = connbench(&["init", &target]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("connbench.accounts exists and was not created by connbench"),
        "{}",
        stderr(&out)
    );
    assert_eq!(server_says("SELECT count(*) FROM connbench.accounts"), "0");
    server_says("DROP TABLE connbench.accounts");

    let out = connbench(&["init", &target, "-s", "1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(server_says("SELECT count(*) FROM connbench.accounts"), "100000");
    assert_eq!(server_says("SELECT count(*) FROM connbench.tellers"), "10");
    let comment = server_says(
        "SELECT table_comment FROM information_schema.tables WHERE table_schema = 'connbench' AND table_name = 'accounts'",
    );
    assert_eq!(comment, "connbench dataset; scale=1");
    let cases: &[&[&str]] = &[
        &["-S", "-M", "simple"],
        &["-S", "-M", "extended"],
        &["-S", "-M", "prepared"],
        &["-b", "tpcb-like", "-M", "prepared"],
        &["-b", "simple-update"],
        &["-b", "tpcb-like", "-C"],
        &[
            "-S",
            "--connection",
            "pool",
            "--pool-size",
            "2",
            "--pool-max-lifetime",
            "200ms",
        ],
        &["-b", "connect-only"],
    ];
    for case in cases {
        let before: u64 = server_says("SELECT count(*) FROM connbench.history")
            .parse()
            .unwrap();
        let mut args = vec!["load", &target, "-c", "3", "-j", "2", "-T", "600ms", "--json"];
        args.extend_from_slice(case);
        let out = connbench(&args);
        assert!(out.status.success(), "{case:?}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let s = &v["summary"];
        let done = s["transactions"].as_u64().unwrap();
        assert!(done > 20, "{case:?}: {s}");
        assert_eq!(s["failed_transactions"].as_u64(), Some(0), "{case:?}: {s}");
        let after: u64 = server_says("SELECT count(*) FROM connbench.history")
            .parse()
            .unwrap();
        if case.contains(&"tpcb-like") || case.contains(&"simple-update") {
            // Every counted transaction inserted one history row (none run outside the window
            // without a warm-up, bar those in flight when it closed).
            assert!(
                after - before >= done,
                "{case:?}: {} rows for {done} transactions",
                after - before
            );
        } else {
            assert_eq!(after, before, "{case:?}");
        }
        if case.contains(&"pool") {
            let reopened = v["series"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["connects"].as_u64().unwrap())
                .sum::<u64>();
            assert!(
                reopened > 0,
                "{case:?}: a 200 ms lifetime reopens connections: {v}"
            );
        }
        assert!(
            s["server_cpu_s"].is_null(),
            "a target given as text is not the sandbox's: {s}"
        );
    }
    let out = connbench(&["init", &target, "--drop"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        server_says("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'connbench'"),
        "0"
    );
}

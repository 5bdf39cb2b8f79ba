//! The `connbench` binary as users run it: tables, JSON keys, one clear line per bad
//! target, and the documented exit codes.

use crate::common::{connbench, conninfo, stderr, stdout, TempFile};

#[test]
fn connect_prints_a_phase_table_and_compares_with_the_first_target() {
    let unix = format!("unix={}", conninfo("unix"));
    let pooled = format!("pooled={}", conninfo("pgbouncer_unix_trust"));
    let o = connbench(&["connect", &unix, &pooled, "-n", "20", "-q", "SELECT 1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for needle in [
        "connbench connect: 20 connections per target after 1 warm-up",
        "\nunix  host=",
        "\npooled  host=",
        "  phase     rt  mean ± sd",
        "  startup    1",
        "  auth       2",
        "  query      1",
        "  total      4",
        "first connection of this run (warm-up, not counted)",
        "20 samples, 0 failures",
        "total connect time, relative to unix",
        "1.00x",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in:\n{out}");
    }
    assert!(!out.contains("password"), "no password in output");
}

#[test]
fn connect_json_has_stable_keys() {
    let o = connbench(&[
        "connect",
        &conninfo("tcp"),
        &conninfo("unix_trust"),
        "-n",
        "5",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    crate::common::check_schema("connect", &v);
    assert_eq!(v["command"], "connect");
    assert_eq!(v["settings"]["samples"], 5);
    assert_eq!(v["settings"]["warmup"], 1);
    assert!(v["method"].as_str().unwrap().contains("CLOCK_MONOTONIC"));
    let targets = v["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 2);
    let tcp = &targets[0];
    assert_eq!(tcp["transport"], "tcp");
    assert_eq!(tcp["samples"], 5);
    assert_eq!(tcp["failures"], 0);
    assert_eq!(tcp["relative_to_first"], 1.0);
    let names: Vec<&str> = tcp["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["resolve", "connect", "startup", "auth", "ready"]);
    for p in tcp["phases"].as_array().unwrap().iter().chain([&tcp["total"]]) {
        for key in [
            "round_trips",
            "n",
            "mean_us",
            "stddev_us",
            "min_us",
            "p50_us",
            "p90_us",
            "p99_us",
            "max_us",
        ] {
            assert!(p[key].is_number(), "{key} in {p}");
        }
        assert!(p["p50_us"].as_f64() <= p["p99_us"].as_f64());
    }
    assert_eq!(tcp["total"]["name"], "total");
    assert_eq!(tcp["total"]["round_trips"], 4);
    assert_eq!(tcp["warmup"].as_array().unwrap().len(), 1);
    assert!(targets[1]["relative_to_first"].as_f64().unwrap() > 0.0);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("password"));

    // A target that never connects still gives schema-valid JSON, saying why.
    let o = connbench(&[
        "connect",
        "host=127.0.0.1 port=1 user=x dbname=x sslmode=disable",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    crate::common::check_schema("connect", &v);
    let t = &v["targets"][0];
    assert!(t["total"].is_null());
    assert_eq!(t["failures"], 3);
    assert_eq!(t["failures_by_kind"][0]["kind"], "connect:io-connectionrefused");
    assert!(t["gave_up"].as_str().unwrap().contains("first 3 attempts"));
}

#[test]
fn bad_targets_give_one_clear_line_and_exit_2() {
    let cases = [
        ("host=/tmp colour=blue", "unknown key \"colour\""),
        (
            "host=/tmp port=99999",
            "invalid port \"99999\": expected a number from 1 to 65535",
        ),
        (
            "host=h sslmode=verify-full sslrootcert=/nonexistent.crt",
            "sslrootcert \"/nonexistent.crt\": file not found",
        ),
        ("postgres://u:secret@h/d?nope=1", "unknown key \"nope\""),
    ];
    for (target, want) in cases {
        let o = connbench(&["connect", target]);
        assert_eq!(o.status.code(), Some(2), "{target}: {}", stderr(&o));
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "one line for {target}: {err}");
        assert!(err.starts_with("error: target "), "{err}");
        assert!(err.contains(want), "{target}: {err}");
        assert!(!err.contains("secret"), "password redacted: {err}");
    }
}

#[test]
fn failing_targets_say_the_phase_and_exit_1() {
    let info = crate::common::sandbox();
    let cases = [
        (
            format!(
                "host={} port={} user=connbench dbname=connbench password=wrong",
                info.dir.display(),
                info.postgres_port
            ),
            "auth: password authentication failed for user \"connbench\" (28P01)",
        ),
        (
            "host=127.0.0.1 port=1 user=x dbname=x sslmode=disable".to_string(),
            "connect: connection refused on 127.0.0.1:1",
        ),
        (
            format!(
                "host=127.0.0.1 port={} user=connbench dbname=connbench passfile={} sslmode=require",
                info.pgbouncer_port,
                info.passfile.display()
            ),
            "tls: server does not support SSL, but sslmode=require",
        ),
        (
            "host=/tmp/cb-nothing-here user=x dbname=x".to_string(),
            "connect: no such file or directory on socket /tmp/cb-nothing-here/.s.PGSQL.5432",
        ),
    ];
    for (target, want) in cases {
        let o = connbench(&["connect", &target, "-n", "50"]);
        assert_eq!(o.status.code(), Some(1), "{target}: {}", stderr(&o));
        let err = stderr(&o);
        let line = err.lines().find(|l| l.starts_with("error: ")).unwrap_or_default();
        assert!(line.contains(want), "{target}: {err}");
        assert_eq!(
            err.lines().filter(|l| l.starts_with("error: ")).count(),
            1,
            "{err}"
        );
        let out = stdout(&o);
        assert!(
            out.contains("gave up on this target: no connection succeeded in the first 3 attempts"),
            "{out}"
        );
        assert!(
            !out.contains("wrong") && !err.contains("password=wrong"),
            "password never printed"
        );
    }
}

#[test]
fn help_explains_and_exit_codes_are_documented() {
    let o = connbench(&["connect", "--help"]);
    assert!(o.status.success());
    let help = stdout(&o);
    for needle in [
        "--warmup",
        "cold",
        "interleaved",
        "--sandbox",
        "Exit codes",
        "130",
    ] {
        assert!(help.contains(needle), "missing {needle:?} in help:\n{help}");
    }
    let o = connbench(&["connect", "-n", "0"]);
    assert_eq!(o.status.code(), Some(2), "clap usage errors exit 2");
}

#[test]
fn peer_tools_accept_the_sandbox_conninfo_unchanged() {
    // psql and pgbench are pointed at the exact same endpoints connbench measures.
    let sql = "SELECT current_user || ' ' || coalesce((SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()), 'pooled')";
    for t in &crate::common::sandbox().targets {
        let o = std::process::Command::new("psql")
            .args([t.conninfo.as_str(), "-XAtc", sql])
            .env_remove("PGPASSWORD")
            .output()
            .expect("psql (postgresql-client) is installed by scripts/setup.sh");
        assert!(o.status.success(), "psql {}: {}", t.name, stderr(&o));
        let got = stdout(&o);
        let user = if t.name.ends_with("_trust") {
            "connbench_trust"
        } else {
            "connbench"
        };
        assert!(got.starts_with(user), "{}: {got}", t.name);
        if t.name == "tls" {
            assert_eq!(
                got.trim(),
                "connbench true",
                "psql negotiates TLS on the tls target"
            );
        }
    }
    let script = TempFile::new("select1.sql", "SELECT 1;\n");
    let o = std::process::Command::new("pgbench")
        .args(["-n", "-C", "-t", "5", "-f"])
        .arg(script.path())
        .arg(conninfo("unix"))
        .output()
        .unwrap();
    assert!(o.status.success(), "pgbench: {}", stderr(&o));
    assert!(stdout(&o).contains("average connection time"), "{}", stdout(&o));
}

/// The committed JSON Schemas are the ones the report types generate, so the files that
/// tests validate output against cannot drift from the code. With
/// CONNBENCH_WRITE_SCHEMAS=1 the test writes them instead.
#[test]
fn json_schemas_are_generated_from_the_report_types() {
    for (name, schema) in [
        ("connect", connbench::report::json::schema()),
        ("load", connbench::report::load::schema()),
        ("run", connbench::report::data::schema()),
        ("workers", connbench::report::workers::schema()),
    ] {
        let path = format!("{}/docs/schema/{name}.schema.json", env!("CARGO_MANIFEST_DIR"));
        let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
        if std::env::var_os("CONNBENCH_WRITE_SCHEMAS").is_some() {
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == text,
            "{path} is not what the types generate; run CONNBENCH_WRITE_SCHEMAS=1 cargo test --test it json_schemas"
        );
    }
}

//! `connbench replay --pool N` on real traffic: pgbench with `-C` (a new connection per
//! transaction, the application that asks "what would a pool save me?") recorded through
//! `connbench record`, its tables initialised again, the trace replayed through a pool of
//! 2: the server counts the same writes per table and holds the same balances, and it saw
//! as many new backends as the report's pool connects (plus the pre-flight's one), at most
//! 2. A prepared-statement trace (`-M prepared -C`) replayed through a pool of 1 meets no
//! failure: each session's statements live on the one connection under the pool's names.
//! Bad `--pool` values are refused before anything connects.

use std::time::{Duration, Instant};

use crate::common::{connbench, conninfo, scratch, stderr, stdout, with_dbname};
use crate::replay::{
    assert_replayed_whole, create_database, pgbench_init, record_pgbench_with as record, server_figures,
    value,
};

/// psql's single value for `sql` on the sandbox's `postgres` database (not the replay's:
/// a session there would count in its figures).
fn admin_value(sql: &str) -> String {
    value(&with_dbname(&conninfo("unix"), "postgres"), sql)
}

/// Waits until no client backend is connected to `db`: a closed connection's backend
/// exits a moment after, and only then are its statistics (its session, its writes)
/// in the server's counters.
fn wait_idle(db: &str) {
    let began = Instant::now();
    let sql = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = '{db}' AND backend_type = 'client backend'"
    );
    while admin_value(&sql) != "0" {
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "backends of {db} still connected after 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sessions the server counts for `db` (pg_stat_database, every client backend that
/// connected to it).
fn sessions(db: &str) -> i64 {
    wait_idle(db);
    admin_value(&format!(
        "SELECT sessions FROM pg_stat_database WHERE datname = '{db}'"
    ))
    .parse()
    .unwrap()
}

/// The server's own counts of pgbench's writes: rows inserted and updated per table.
fn writes(db: &str) -> Vec<String> {
    wait_idle(db);
    let conn = with_dbname(&conninfo("unix"), db);
    let rows = value(
        &conn,
        "SELECT string_agg(relname || ' ' || n_tup_ins || ' ' || n_tup_upd, ', ' ORDER BY relname) \
         FROM pg_stat_user_tables WHERE relname LIKE 'pgbench_%'",
    );
    rows.split(", ").map(str::to_string).collect()
}

/// `writes` after minus before, table by table.
fn delta(before: &[String], after: &[String]) -> Vec<(String, i64, i64)> {
    let parse = |l: &String| {
        let f: Vec<&str> = l.split(' ').collect();
        (
            f[0].to_string(),
            f[1].parse::<i64>().unwrap(),
            f[2].parse::<i64>().unwrap(),
        )
    };
    before
        .iter()
        .zip(after)
        .map(|(b, a)| {
            let (b, a) = (parse(b), parse(a));
            assert_eq!(b.0, a.0);
            (a.0, a.1 - b.1, a.2 - b.2)
        })
        .collect()
}

/// 300 transactions of 4 clients, each on a new connection, replayed through a pool of 2:
/// the same writes per table, the same balances, every request answered and none failed
/// now that had not; the server saw the pre-flight's session and the pool's connects,
/// and nothing else: at most 2, and exactly the report's figure.
#[test]
fn a_connection_per_transaction_app_replays_through_a_pool_of_two() {
    let admin = create_database("cbpool");
    pgbench_init(&admin);
    let dir = scratch("replay-pool");
    let trace = dir.join("c.trace.gz");
    let before = writes("cbpool");
    record("cbpool", &trace, &["-C", "-c", "4", "-t", "75"]);
    let recorded = delta(&before, &writes("cbpool"));
    let figures = server_figures(&admin);
    assert_eq!(figures[0], "300", "{figures:?}");

    pgbench_init(&admin);
    let before = writes("cbpool");
    let sessions_before = sessions("cbpool");
    let target = with_dbname(&conninfo("tcp"), "cbpool");
    let t = trace.to_str().unwrap();
    let o = connbench(&["replay", t, "--target", &target, "--pool", "2", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let new_backends = sessions("cbpool") - sessions_before;
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let s = &v["summary"];
    assert_eq!(delta(&before, &writes("cbpool")), recorded, "{s}");
    assert_eq!(server_figures(&admin), figures, "{s}");
    assert_replayed_whole(s);
    let f = &s["fidelity"];
    // pgbench's check connection and one per transaction.
    assert_eq!(s["recorded"]["sessions"], 301, "{s}");
    let p = &s["pool"];
    let connects = p["connects"].as_i64().unwrap();
    assert!((1..=2).contains(&connects), "{s}");
    // The pre-flight's session, then the pool's connects.
    assert_eq!(new_backends, connects + 1, "{s}");
    assert_eq!(p["size"], 2, "{s}");
    assert_eq!(
        p["per_thread"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_i64().unwrap())
            .sum::<i64>(),
        2
    );
    // The lag's three parts, each measured.
    for part in ["waiting_for_server", "waiting_for_pool", "send_delay"] {
        assert!(f[part]["p99_ms"].as_f64().is_some(), "{part}: {s}");
    }
    assert!(
        s["transaction_times"]["connect_mean_ms"].as_f64().is_some(),
        "{s}"
    );

    // As fast as the server answers, the text report: the pool's line, no lag.
    let o = connbench(&[
        "replay", t, "--target", &target, "--pool", "2", "--speed", "max", "-j", "1",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("served by a pool of 2 (2 per thread)"), "{text}");
    assert!(text.contains("failed now but not when recorded 0"), "{text}");
    assert!(text.contains("--speed max: no schedule"), "{text}");
}

/// pgbench's prepared statements (each session prepares P0_0, P0_1, ... on its own
/// connection) through a pool of 1: every session's statements on the one connection,
/// where the same names from the next session would collide (42P05) and a Bind of a
/// statement the connection lacks would fail (26000). No failure, the same balances.
#[test]
fn prepared_statements_live_on_whichever_connection_is_borrowed() {
    let admin = create_database("cbpoolprep");
    pgbench_init(&admin);
    let dir = scratch("replay-pool-prep");
    let trace = dir.join("p.trace.gz");
    record(
        "cbpoolprep",
        &trace,
        &["-M", "prepared", "-C", "-c", "2", "-t", "50"],
    );
    let figures = server_figures(&admin);
    pgbench_init(&admin);
    let target = with_dbname(&conninfo("tcp"), "cbpoolprep");
    let t = trace.to_str().unwrap();
    for (pool, threads) in [("1", "1"), ("2", "1")] {
        let o = connbench(&[
            "replay", t, "--target", &target, "--pool", pool, "-j", threads, "--json",
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let s = &v["summary"];
        assert_eq!(s["fidelity"]["failed_now_not_then"], 0, "--pool {pool}: {s}");
        assert_eq!(s["failures"], serde_json::json!([]), "--pool {pool}: {s}");
        assert_eq!(
            s["replayed"]["requests"], s["recorded"]["requests"],
            "--pool {pool}: {s}"
        );
        assert_eq!(s["pool"]["connects"].to_string(), pool, "{s}");
        if pool == "1" {
            assert_eq!(server_figures(&admin), figures, "{s}");
        }
    }
    // A pool whose connections outlive their lifetime at once: each comes back retired
    // and is closed on the next borrow. The replay thread has no LocalSet; closing in
    // a task of its own panicked its sessions ("replay session panicked").
    let o = connbench(&[
        "replay",
        t,
        "--target",
        &target,
        "--pool",
        "1",
        "--pool-max-lifetime",
        "1ms",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let s = &v["summary"];
    assert_eq!(s["replayed"]["requests"], s["recorded"]["requests"], "{s}");
    assert!(
        s["pool"]["connects"].as_u64().unwrap() > 1,
        "retired and opened again: {s}"
    );
}

/// Bad values are refused by name before anything connects (exit 2).
#[test]
fn bad_pool_values_are_refused_by_name() {
    let target = conninfo("tcp");
    let cases: [(&[&str], &str); 5] = [
        (&["--pool", "0"], "a pool needs at least one connection"),
        (&["--pool=-1"], "--pool"),
        (&["--pool", "two"], "--pool"),
        (&["--pool-max-lifetime", "5s"], "--pool <N>"),
        (&["--pool", "2", "--speed", "0"], "--speed"),
    ];
    for (args, says) in cases {
        let mut all = vec!["replay", "/nonexistent.trace", "--target", &target];
        all.extend_from_slice(args);
        let o = connbench(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
    let o = connbench(&[
        "replay",
        "/nonexistent.trace",
        "--target",
        &target,
        "--pool",
        "2",
        "--pool-idle-timeout",
        "0s",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is no period"), "{}", stderr(&o));
}

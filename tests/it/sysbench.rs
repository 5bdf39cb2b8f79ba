//! connbench's oltp-* workloads against sysbench 1.0 itself, on tables sysbench
//! prepared: for every workload, in the simple and the prepared protocol, on the
//! sandbox's PostgreSQL and MariaDB, the server counts the same statements per
//! transaction under both tools.
//!
//! Each tool runs a workload twice, for a few transactions and for 20 more, and the
//! difference of the two runs' counter deltas is what 20 transactions cost: what a
//! tool does once per connection (connbench finding the tables, both preparing
//! statements) cancels out, so the comparison is per transaction and exact. MariaDB's
//! counters are `Com_*` by statement type; PostgreSQL has no such counter without
//! pg_stat_statements (which the sandbox does not load), so there the counts are
//! transactions (`xact_commit`, read from another database so the reading does not
//! count itself), index and sequential scans and rows inserted and updated on the
//! sbtest tables. PostgreSQL writes a session's statistics when the session ends, so a
//! reading can catch another session's late: a pair that differs is measured again (up
//! to three times), as a real difference in statements repeats every time.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use crate::common::{connbench, stderr, stdout, OwnMariadb};

/// A sandbox with MariaDB of this module's own: its server-wide statement counters
/// must not count the MySQL module's tests.
static MARIA: OwnMariadb = OwnMariadb::new();

/// (sysbench's script, connbench's workload), oltp_delete last: the rows it deletes
/// would change what the others' updates count.
const WORKLOADS: [(&str, &str); 8] = [
    ("oltp_point_select", "oltp-point-select"),
    ("oltp_read_only", "oltp-read-only"),
    ("oltp_read_write", "oltp-read-write"),
    ("oltp_write_only", "oltp-write-only"),
    ("oltp_update_index", "oltp-update-index"),
    ("oltp_update_non_index", "oltp-update-non-index"),
    ("oltp_insert", "oltp-insert"),
    ("oltp_delete", "oltp-delete"),
];

/// Two tables, so every group of statements goes through the table draw.
const SIZE: [&str; 2] = ["--tables=2", "--table-size=1000"];
const FEW: u64 = 5;
const MORE: u64 = 25;

/// How to reach one engine with both tools and read its counters.
struct Server {
    conninfo: String,
    sysbench: Vec<String>,
    env: Vec<(String, String)>,
    counters: Box<dyn Fn() -> BTreeMap<String, i64>>,
}

fn sysbench(s: &Server, script: &str, extra: &[String]) -> String {
    let out = Command::new("sysbench")
        .arg(script)
        .args(&s.sysbench)
        .args(SIZE)
        .args(extra)
        .envs(s.env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("run sysbench (Debian's package sysbench)");
    assert!(
        out.status.success(),
        "sysbench {script} {extra:?}: {}{}",
        stdout(&out),
        stderr(&out)
    );
    stdout(&out)
}

/// The counters' change over `f`.
fn delta(s: &Server, f: impl FnOnce()) -> BTreeMap<String, i64> {
    let before = (s.counters)();
    f();
    let after = (s.counters)();
    after.iter().map(|(k, v)| (k.clone(), v - before[k])).collect()
}

/// What `MORE - FEW` transactions of a workload cost, by `run(n)` for n transactions.
fn per_transactions(s: &Server, run: impl Fn(u64)) -> BTreeMap<String, i64> {
    let few = delta(s, || run(FEW));
    let more = delta(s, || run(MORE));
    more.iter().map(|(k, v)| (k.clone(), v - few[k])).collect()
}

/// Prepares the tables with sysbench, calls `ready`, and compares every workload.
fn compare(s: &Server, ready: impl Fn()) {
    sysbench(s, "oltp_read_write", &["cleanup".into()]);
    sysbench(s, "oltp_read_write", &["prepare".into()]);
    ready();
    let mut failures = Vec::new();
    for (script, workload) in WORKLOADS {
        for (mode, ps) in [("simple", "disable"), ("prepared", "auto")] {
            // A counter another session moved at the wrong moment (PostgreSQL flushes a
            // session's statistics when it ends, a moment this test can only wait for)
            // makes one measurement differ; a real difference in statements repeats. So a
            // pair that differs is measured again, up to three times in all, and every
            // attempt is kept in the failure.
            let mut attempts = Vec::new();
            for _ in 0..3 {
                let by_sysbench = per_transactions(s, |n| {
                    let out = sysbench(
                        s,
                        script,
                        &[
                            format!("--db-ps-mode={ps}"),
                            format!("--events={n}"),
                            "--threads=1".into(),
                            "run".into(),
                        ],
                    );
                    assert!(out.contains("ignored errors:                      0 "), "{out}");
                });
                let by_connbench = per_transactions(s, |n| {
                    let out = connbench(&[
                        "load",
                        &s.conninfo,
                        "-b",
                        workload,
                        "-M",
                        mode,
                        "-t",
                        &n.to_string(),
                        "--sysbench",
                        "table-size=1000",
                        "--json",
                    ]);
                    assert!(out.status.success(), "{workload} -M {mode}: {}", stderr(&out));
                    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                    assert_eq!(
                        v["summary"]["failed_transactions"], 0,
                        "{workload} -M {mode}: {v}"
                    );
                });
                // sysbench's oltp_insert sends its INSERT as text even with prepared
                // statements on (con:query); connbench honours -M, so only the execute
                // counter differs there, the statement counts are the same.
                let skip = |k: &str| workload == "oltp-insert" && k == "Com_stmt_execute";
                let (a, b): (BTreeMap<_, _>, BTreeMap<_, _>) = (
                    by_sysbench.into_iter().filter(|(k, _)| !skip(k)).collect(),
                    by_connbench.into_iter().filter(|(k, _)| !skip(k)).collect(),
                );
                println!(
                    "{workload:22} {mode:8} per {} transactions: sysbench {a:?}",
                    MORE - FEW
                );
                assert!(
                    a.values().any(|&v| v >= (MORE - FEW) as i64),
                    "{workload}: the counters moved too little to compare anything: {a:?}"
                );
                if a == b {
                    attempts.clear();
                    break;
                }
                attempts.push(format!("sysbench {a:?}, connbench {b:?}"));
            }
            if !attempts.is_empty() {
                failures.push(format!("{workload} -M {mode}: {}", attempts.join("; then ")));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "the server counted different statements per transaction:\n{}",
        failures.join("\n")
    );
}

#[test]
fn oltp_workloads_send_sysbench_s_statements_on_mariadb() {
    let sb = MARIA.info();
    let m = sb.mariadb.as_ref().unwrap();
    let conninfo = sb.target("mariadb_unix").unwrap().conninfo.clone();
    let password = MARIA.password();
    let (file, socket) = (m.defaults_file.clone(), m.socket.clone());
    let counters = move || {
        let out = Command::new("mariadb")
            .arg(format!("--defaults-extra-file={}", file.display()))
            .arg(format!("--socket={}", socket.display()))
            .args(["--skip-ssl", "-N", "-B", "connbench", "-e"])
            .arg(
                "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_select', 'Com_insert', 'Com_update', \
                 'Com_delete', 'Com_begin', 'Com_commit', 'Com_rollback', 'Com_stmt_execute')",
            )
            .output()
            .expect("run the mariadb client");
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .map(|(k, v)| (k.to_string(), v.trim().parse().unwrap()))
            .collect()
    };
    compare(
        &Server {
            conninfo,
            sysbench: vec![
                "--db-driver=mysql".into(),
                format!("--mysql-socket={}", m.socket.display()),
                "--mysql-user=connbench".into(),
                format!("--mysql-password={password}"),
                "--mysql-db=connbench".into(),
            ],
            env: vec![],
            counters: Box::new(counters),
        },
        || {},
    );
}

/// A conninfo's `key=value` words.
fn words(conninfo: &str) -> BTreeMap<String, String> {
    conninfo
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn psql(conninfo: &str, q: &str) -> String {
    let o = Command::new("psql").args([conninfo, "-Atc", q]).output().unwrap();
    assert!(o.status.success(), "{q}: {}", stderr(&o));
    stdout(&o).trim().to_string()
}

#[test]
fn oltp_workloads_send_sysbench_s_statements_on_postgres() {
    let sb = MARIA.info();
    let conninfo = sb.target("unix").unwrap().conninfo.clone();
    let w = words(&conninfo);
    let other_db = conninfo.replace("dbname=connbench", "dbname=postgres");
    let db = conninfo.clone();
    let counters = move || {
        // Transactions, read from database postgres (a session's own commit counts in
        // its own database), once the tools' backends have flushed their statistics on
        // exit: until two readings agree.
        let xact =
            "SELECT xact_commit || ' ' || xact_rollback FROM pg_stat_database WHERE datname = 'connbench'";
        let mut last = psql(&other_db, xact);
        loop {
            std::thread::sleep(Duration::from_millis(300));
            let now = psql(&other_db, xact);
            if now == last {
                break;
            }
            last = now;
        }
        let tables = psql(
            &db,
            "SELECT sum(idx_scan) || ' ' || sum(seq_scan) || ' ' || sum(n_tup_ins) || ' ' || sum(n_tup_upd) \
             FROM pg_stat_user_tables WHERE relname LIKE 'sbtest%'",
        );
        let names = [
            "xact_commit",
            "xact_rollback",
            "idx_scan",
            "seq_scan",
            "n_tup_ins",
            "n_tup_upd",
        ];
        names
            .iter()
            .zip(last.split(' ').chain(tables.split(' ')))
            .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
            .collect()
    };
    let server = Server {
        conninfo: conninfo.clone(),
        sysbench: vec![
            "--db-driver=pgsql".into(),
            format!("--pgsql-host={}", w["host"]),
            format!("--pgsql-port={}", w["port"]),
            format!("--pgsql-user={}", w["user"]),
            "--pgsql-db=connbench".into(),
        ],
        env: vec![("PGPASSFILE".into(), w["passfile"].clone())],
        counters: Box::new(counters),
    };
    // Autovacuum's own transactions (on the catalogs too, after prepare's churn) would
    // count in xact_commit at random moments: this module's sandbox runs without it.
    compare(&server, || {
        psql(&conninfo, "ALTER SYSTEM SET autovacuum = off");
        psql(&conninfo, "SELECT pg_reload_conf()");
    });
}

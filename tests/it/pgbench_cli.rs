//! pgbench's side of `connbench load`: its tables (`pgbench -i`), its command line, its
//! logs and its retries, checked against pgbench 15 itself on the sandbox where the two
//! can be compared.

use std::process::Command;
use std::sync::OnceLock;

use crate::common::{connbench, conninfo, stderr, stdout};
use crate::load::sql;

/// `conninfo` with its dbname replaced.
fn with_dbname(conninfo: &str, db: &str) -> String {
    conninfo
        .split_whitespace()
        .map(|kv| {
            if kv.starts_with("dbname=") {
                format!("dbname={db}")
            } else {
                kv.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A database of its own on the shared sandbox, filled by `pgbench -i -s 2` (and nothing
/// of connbench's in it): its conninfo.
pub fn pgbench_db() -> &'static str {
    static DB: OnceLock<String> = OnceLock::new();
    DB.get_or_init(|| {
        let name = format!("cbt_pgbench_{}", std::process::id());
        sql(&format!("CREATE DATABASE {name}"));
        let ci = with_dbname(&conninfo("unix"), &name);
        let o = Command::new("pgbench")
            .args(["-i", "-q", "-s", "2", &ci])
            .output()
            .expect("pgbench 15 is installed");
        assert!(o.status.success(), "pgbench -i: {}", stderr(&o));
        ci
    })
}

#[test]
fn select_only_runs_on_pgbench_s_tables_with_their_scale() {
    let db = pgbench_db();
    let o = connbench(&["load", db, "-S", "-c", "4", "-j", "2", "-T", "2", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    crate::common::check_schema("load", &v);
    assert_eq!(v["settings"]["scale"], 2, "pgbench -i -s 2's scale");
    assert_eq!(v["settings"]["tables"], "pgbench_*");
    assert!(v["summary"]["transactions"].as_u64().unwrap() > 0);
    assert_eq!(v["summary"]["failed_transactions"], 0);

    // tpcb-like and simple-update write pgbench's tables: history grows by one row a
    // transaction, as under pgbench.
    for builtin in ["tpcb-like", "simple-update"] {
        let o = connbench(&["load", db, "-b", builtin, "-c", "2", "-t", "10"]);
        assert!(o.status.success(), "{builtin}: {}", stderr(&o));
        assert!(
            stdout(&o).contains("on tables pgbench_*, scale 2"),
            "{builtin}: {}",
            stdout(&o)
        );
    }
    let history = Command::new("psql")
        .args([db, "-Atc", "select count(*) from pgbench_history"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&history.stdout).trim(), "40");

    // Asking for connbench's tables where there are only pgbench's names both.
    let o = connbench(&["load", db, "-S", "-t", "1", "--tables", "connbench"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("connbench's tables are not in schema connbench"),
        "{}",
        stderr(&o)
    );
    let o = connbench(&[
        "load", db, "-S", "-t", "1", "--tables", "pgbench", "--schema", "x",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--schema x names connbench's tables"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn where_neither_set_of_tables_is_the_error_names_both() {
    let name = format!("cbt_empty_{}", std::process::id());
    sql(&format!("CREATE DATABASE {name}"));
    let db = with_dbname(&conninfo("unix"), &name);
    let o = connbench(&["load", &db, "-S", "-t", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("neither connbench's tables (schema connbench) nor pgbench's"),
        "{e}"
    );
    assert!(e.contains("connbench init") && e.contains("pgbench -i"), "{e}");
    let o = connbench(&["load", &db, "-S", "-t", "1", "--tables", "pgbench"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("pgbench's tables (pgbench_branches"),
        "{}",
        stderr(&o)
    );
    sql(&format!("DROP DATABASE {name}"));
}

#[test]
fn connbench_s_own_schema_wins_where_both_are_there() {
    // The shared database holds connbench's tables; pgbench's beside them (public) are
    // not used unless asked for, and init never touches them (a schema of its own here:
    // other tests run on the shared one).
    crate::common::dataset();
    let u = conninfo("unix");
    let o = Command::new("pgbench")
        .args(["-i", "-q", "-s", "1", &u])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    sql("UPDATE pgbench_branches SET bbalance = 7");
    let scale_and_tables = |extra: &[&str]| {
        let mut args = vec!["load", &u, "-S", "-t", "5", "--json"];
        args.extend_from_slice(extra);
        let o = connbench(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        (
            v["settings"]["tables"].as_str().unwrap().to_string(),
            v["settings"]["scale"].as_i64().unwrap(),
        )
    };
    assert_eq!(scale_and_tables(&[]), ("connbench.*".to_string(), 1));
    assert_eq!(
        scale_and_tables(&["--tables", "pgbench"]),
        ("pgbench_*".to_string(), 1)
    );
    let schema = format!("cbt_both_{}", std::process::id());
    for args in [
        vec!["init", &u, "-s", "1", "--schema", &schema],
        vec!["init", &u, "--schema", &schema, "--drop"],
    ] {
        let o = connbench(&args);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    assert_eq!(
        sql("SELECT bbalance::text FROM pgbench_branches"),
        ["7"],
        "init never touches pgbench's"
    );
}

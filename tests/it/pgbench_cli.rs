//! pgbench's side of `connbench load`: its tables (`pgbench -i`), its command line, its
//! logs and its retries, checked against pgbench 15 itself on the sandbox where the two
//! can be compared.

use std::process::Command;
use std::sync::OnceLock;

use crate::common::{connbench, conninfo, stderr, stdout, with_dbname};
use crate::load::sql;

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

    // tpcb-like and simple-update write pgbench's tables (history grows; other tests
    // write there too, so at least by these runs' transactions).
    let rows = || -> u64 {
        let o = Command::new("psql")
            .args([db, "-Atc", "select count(*) from pgbench_history"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
    };
    let before = rows();
    for builtin in ["tpcb-like", "simple-update"] {
        let o = connbench(&["load", db, "-b", builtin, "-c", "2", "-t", "10"]);
        assert!(o.status.success(), "{builtin}: {}", stderr(&o));
        assert!(
            stdout(&o).contains("on tables pgbench_*, scale 2") && stdout(&o).contains("20 in"),
            "{builtin}: {}",
            stdout(&o)
        );
    }
    assert!(rows() >= before + 40);

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

/// Runs `connbench load` with `args` and `--json` on success; the parsed report.
fn load_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["load"];
    all.extend_from_slice(args);
    all.push("--json");
    let o = connbench(&all);
    assert!(o.status.success(), "connbench {all:?}: {}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    crate::common::check_schema("load", &v);
    v
}

#[test]
fn pgbench_s_documented_command_lines_run_with_connbench_load() {
    let db = pgbench_db();
    // From pgbench's documentation, long options, the database last.
    let v = load_json(&[
        "--client=4",
        "--jobs=2",
        "--time=2",
        "--builtin=select-only",
        "--no-vacuum",
        "--protocol=prepared",
        "--random-seed=7",
        db,
    ]);
    assert_eq!(v["settings"]["clients"], 4);
    assert_eq!(v["settings"]["threads"], 2);
    assert_eq!(v["settings"]["mode"], "prepared");
    assert_eq!(v["settings"]["workload"], "select-only");
    assert!(v["summary"]["transactions"].as_u64().unwrap() > 0);
    let v = load_json(&["--connect", "--transactions=5", "--skip-some-updates", db]);
    assert_eq!(v["settings"]["connection"]["policy"], "per-transaction");
    assert_eq!(v["settings"]["workload"], "simple-update");
    assert_eq!(v["summary"]["transactions"], 5);

    // Several scripts, drawn by weight per transaction: -b abbreviations, -S and -N in
    // the order given, each script's transactions counted.
    let v = load_json(&["-b", "se@1", "-N", "-b", "t@3", "-S", "-c", "2", "-t", "100", db]);
    let names: Vec<&str> = v["settings"]["scripts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["select-only", "simple-update", "tpcb-like", "select-only"]
    );
    assert_eq!(
        v["settings"]["workload"],
        "select-only@1, simple-update@1, tpcb-like@3, select-only@1"
    );
    let counts: Vec<u64> = v["summary"]["scripts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["transactions"].as_u64().unwrap())
        .collect();
    assert_eq!(counts.iter().sum::<u64>(), 200, "{counts:?}");
    // tpcb-like has half the weight: of 200 draws, it is the most drawn (binomial: by
    // far) and every script is drawn at least once.
    assert!(counts.iter().all(|&c| c > 0), "{counts:?}");
    assert!(
        counts[2] > counts[0] && counts[2] > counts[1] && counts[2] > counts[3],
        "{counts:?}"
    );
}

/// pgbench's most common command line, `pgbench -h H -p P -U U [options] DBNAME`, with
/// the password from PGPASSFILE: both tools run it, on the same database.
#[test]
fn host_port_and_user_are_pgbench_s_h_p_and_u() {
    let db = pgbench_db();
    let field = |k: &str| {
        db.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("no {k} in {db}"))
            .to_string()
    };
    let (host, port, user, dbname, passfile) = (
        field("host"),
        field("port"),
        field("user"),
        field("dbname"),
        field("passfile"),
    );
    let args = [
        "-n", "-h", &host, "-p", &port, "-U", &user, "-S", "-c", "2", "-t", "5", &dbname,
    ];
    let pgbench = Command::new("pgbench")
        .args(args)
        .env("PGPASSFILE", &passfile)
        .output()
        .unwrap();
    assert!(pgbench.status.success(), "pgbench: {}", stderr(&pgbench));
    assert!(
        stdout(&pgbench).contains("number of transactions actually processed: 10/10"),
        "{}",
        stdout(&pgbench)
    );
    let mut all = vec!["load"];
    all.extend_from_slice(&args);
    all.push("--json");
    let o = Command::new(env!("CARGO_BIN_EXE_connbench"))
        .args(&all)
        .env("PGPASSFILE", &passfile)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["summary"]["transactions"], 10, "{v}");
    // -h, -p and -U win over the target's own, as they do over PG* variables.
    let wrong = with_dbname("host=/nonexistent port=1 user=nobody", &dbname);
    let o = Command::new(env!("CARGO_BIN_EXE_connbench"))
        .args([
            "load", &wrong, "-h", &host, "-p", &port, "-U", &user, "-S", "-t", "3",
        ])
        .env("PGPASSFILE", &passfile)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // Help is -? (and --help), as in pgbench, since -h is the host.
    let o = connbench(&["load", "-?"]);
    assert!(
        o.status.success() && stdout(&o).contains("Usage: connbench load"),
        "{}",
        stderr(&o)
    );
    let o = connbench(&["load", "--sandbox", "-h", "/tmp", "-t", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("-h, -p and -U"), "{}", stderr(&o));
}

#[test]
fn pgbench_s_listing_options_print_and_exit() {
    let o = connbench(&["load", "-b", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    for b in ["tpcb-like", "simple-update", "select-only"] {
        assert!(stdout(&o).contains(b), "{}", stdout(&o));
    }
    let o = connbench(&["load", "--show-script", "se"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "-- select-only\n\\set aid random(1, 100000 * :scale)\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n"
    );
}

#[test]
fn bad_pgbench_input_names_the_flag_its_value_and_the_fix() {
    let db = pgbench_db();
    let script = crate::common::TempFile::new("define.sql", "SELECT :k;\n");
    let file_at = format!("{}@x", script.path());
    for (args, want) in [
        (
            vec!["-b", "s"],
            vec!["-b \"s\"", "ambiguous", "simple-update and select-only"],
        ),
        (vec!["-b", "nope"], vec!["-b \"nope\"", "no built-in script"]),
        (vec!["-b", "se@-1"], vec!["-b \"se@-1\"", "weight"]),
        (vec!["-f", &file_at], vec!["-f", "@x", "weight"]),
        (
            vec!["-b", "se@0", "-b", "t@0", "-t", "1"],
            vec!["weight 0", "NAME@1"],
        ),
        (vec!["--partitions", "4"], vec!["--partitions", "connbench init"]),
        (vec!["-i"], vec!["-i/--initialize", "connbench init"]),
        (
            vec!["--sampling-rate", "2", "-l"],
            vec!["sampling rate \"2\"", "0.01"],
        ),
        (
            vec!["--max-tries", "0", "-t", "5"],
            vec!["--max-tries 0", "-T", "-L"],
        ),
        (vec!["--log-prefix", "x"], vec!["--log"]),
    ] {
        let mut all = vec!["load", db];
        all.extend_from_slice(&args);
        let o = connbench(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        for w in want {
            assert!(stderr(&o).contains(w), "{args:?}: wanted {w:?} in {}", stderr(&o));
        }
    }
    // -v is accepted, and says it does nothing.
    let o = connbench(&["load", db, "-v", "-S", "-t", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("connbench does not vacuum"), "{}", stderr(&o));
}

/// Runs SQL with psql on `db`; the output.
pub fn psql(db: &str, q: &str) -> String {
    let o = Command::new("psql").args([db, "-Atc", q]).output().unwrap();
    assert!(o.status.success(), "{q}: {}", stderr(&o));
    stdout(&o).trim().to_string()
}

#[test]
fn serialization_failures_are_retried_with_pgbench_s_counts() {
    let db = pgbench_db();
    psql(db, "CREATE TABLE IF NOT EXISTS cbt_retry (id int PRIMARY KEY, v bigint); INSERT INTO cbt_retry VALUES (1, 0) ON CONFLICT DO NOTHING");
    // Four clients updating one row under REPEATABLE READ: concurrent updates fail with
    // 40001, which pgbench 15 and connbench retry.
    let script = crate::common::TempFile::new(
        "retry.sql",
        "\\set d random(1, 10)\nBEGIN ISOLATION LEVEL REPEATABLE READ;\nSELECT v FROM cbt_retry WHERE id = 1;\n\\sleep 1 ms\nUPDATE cbt_retry SET v = v + :d WHERE id = 1;\nEND;\n",
    );
    let f = script.path();
    let summary = |extra: &[&str]| {
        let mut args = vec![db, "-f", f, "-c", "4", "-T", "2"];
        args.extend_from_slice(extra);
        load_json(&args)["summary"].clone()
    };
    let once = summary(&[]);
    let failed = once["failed_transactions"].as_u64().unwrap();
    assert!(failed > 0, "concurrent updates of one row fail: {once:#}");
    assert_eq!(once["serialization_failures"], failed, "{once:#}");
    assert_eq!(once["retried_transactions"], 0);

    let retried = summary(&["--max-tries", "100", "--failures-detailed"]);
    let (r, retries) = (
        retried["retried_transactions"].as_u64().unwrap(),
        retried["retries"].as_u64().unwrap(),
    );
    assert!(r > 0 && retries >= r, "{retried:#}");
    assert!(
        retried["failed_transactions"].as_u64().unwrap() * 20 < retried["transactions"].as_u64().unwrap(),
        "with 100 tries, nearly every transaction ends committed: {retried:#}"
    );
    // pgbench 15 on the same script and flags reports the same figures.
    let o = Command::new("pgbench")
        .args([
            "-n",
            "-f",
            f,
            "-c",
            "4",
            "-T",
            "2",
            "--max-tries",
            "100",
            "--failures-detailed",
            db,
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for line in [
        "number of transactions retried: ",
        "total number of retries: ",
        "number of serialization failures: ",
    ] {
        assert!(out.contains(line), "pgbench says {line:?}: {out}");
    }
    // Unlimited tries need an end: here -T.
    let unlimited = summary(&["--max-tries", "0"]);
    assert!(
        unlimited["retried_transactions"].as_u64().unwrap() > 0,
        "{unlimited:#}"
    );
    // The text report says it as pgbench does.
    let o = connbench(&["load", db, "-f", f, "-c", "2", "-T", "1", "--max-tries", "5"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("retried ") && stdout(&o).contains("serialization"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn progress_timestamps_are_unix_epoch_seconds() {
    let db = pgbench_db();
    let o = connbench(&["load", db, "-S", "-T", "2", "-P", "1", "--progress-timestamp"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let stamps: Vec<f64> = stderr(&o)
        .lines()
        .filter_map(|l| l.strip_prefix("progress: "))
        .filter_map(|l| l.split(' ').next()?.parse().ok())
        .collect();
    assert!(!stamps.is_empty(), "{}", stderr(&o));
    // Printed to a tenth of a second ({:.1}, as pgbench prints it), so a stamp taken
    // just before `now` may round up past it by up to 0.05 s (1795899518.1 against
    // 1795899518.087 failed the strict bound in a clean-clone run).
    for t in stamps {
        assert!(
            t > now - 60.0 && t <= now + 0.05,
            "{t} is not a timestamp of this run (now {now})"
        );
    }
}

/// --exit-on-abort: client 0's first transaction fails and aborts it, which stops client
/// 1 long before its 100,000 transactions; the run ends early with an error, and the
/// report covers what ran. Without the option client 1 runs on, checked with a run short
/// enough to end.
#[test]
fn exit_on_abort_stops_every_client_at_the_first_abort() {
    let db = pgbench_db();
    let dir = crate::common::scratch("exit-on-abort");
    let script = dir.join("fail0.sql");
    std::fs::write(&script, "SELECT CASE WHEN :client_id = 0 THEN 1/0 ELSE 1 END;\n").unwrap();
    let f = script.to_str().unwrap();
    // pgbench 16's option: the installed pgbench 15 does not have it, so connbench alone.
    let o = connbench(&[
        "load",
        db,
        "-c",
        "2",
        "-t",
        "100000",
        "--exit-on-abort",
        "-f",
        f,
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--exit-on-abort: a client aborted"),
        "{}",
        stderr(&o)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // On a busy machine client 1 may not have finished one transaction before the stop.
    let done = v["summary"]["transactions"].as_u64().unwrap();
    assert!(done < 100_000, "client 1 ran on: {done}");
    assert!(v["summary"]["failed_transactions"].as_u64().unwrap() >= 1);
    // Without it: client 0 aborts at its first transaction and client 1 runs all of its
    // own; with --continue-on-error client 0 fails each of its transactions and goes on.
    for (extra, failed) in [(None, 1), (Some("--continue-on-error"), 50)] {
        let mut args = vec!["load", db, "-c", "2", "-t", "50", "-f", f, "--json"];
        args.extend(extra);
        let o = connbench(&args);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(
            (
                v["summary"]["transactions"].as_u64(),
                v["summary"]["failed_transactions"].as_u64()
            ),
            (Some(50), Some(failed)),
            "{extra:?}: {}",
            stderr(&o)
        );
    }
}

//! Repetitions of a trace that writes, each from the same data (issue 55). The traces
//! check, in their own recorded statements, the data they start from: a statement that
//! succeeded when recorded fails when the rows are not those of the recording (a
//! division by zero unless `pgbench_history` is empty and every balance 0; a duplicate
//! primary key when the rows a repetition inserts are there already), so each
//! repetition's `failed_now_not_then` says whether it started from the recorded data.
//! A run with `--restore none` shows the check sees what it should: the repetitions
//! after the first fail it.

use std::process::Command;

use crate::common::{
    conninfo, run, sandbox, scratch, start_recorder, stderr, stop_recorder, through_port, with_dbname,
    OwnMariadb,
};

/// psql on the shared sandbox's database `db`: the first column of each row.
fn psql(db: &str, sql: &str) -> String {
    let o = Command::new("psql")
        .args([with_dbname(&conninfo("unix"), db).as_str(), "-Atc", sql])
        .output()
        .unwrap();
    assert!(o.status.success(), "{sql}: {}", stderr(&o));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// The figure `name` of every repetition of every cell.
fn every(v: &serde_json::Value, name: &str) -> Vec<f64> {
    v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["values"][name].as_array().unwrap().clone())
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// The databases connbench's restores made of database `db` on the shared sandbox (other
/// tests' copies, of their own databases, are not this one's business).
fn copies_left(db: &str) -> String {
    psql(
        "postgres",
        &format!(
            "SELECT coalesce(string_agg(datname, ','), '') FROM pg_database WHERE datname LIKE \
             'connbench_restore_%' AND shobj_description(oid, 'pg_database') LIKE '%a copy of {db} %'"
        ),
    )
}

/// Database `db` of the shared sandbox with pgbench's tables, and pgbench's TPC-B-like
/// script recorded on it into `dir/app.trace.gz`, after two statements that fail unless
/// `pgbench_history` is empty and every balance 0; the tables then made again, as the
/// recording found them.
fn record_tpcb(db: &str, dir: &std::path::Path) {
    let _ = sandbox();
    psql("postgres", &format!("DROP DATABASE IF EXISTS {db}"));
    psql("postgres", &format!("CREATE DATABASE {db}"));
    let conn = with_dbname(&conninfo("unix"), db);
    let init = || {
        let o = Command::new("pgbench")
            .args(["-i", "-q", "-s", "1", &conn])
            .output()
            .unwrap();
        assert!(o.status.success(), "pgbench -i: {}", stderr(&o));
    };
    init();
    let upstream = format!("127.0.0.1:{}", sandbox().postgres_port);
    let (child, port) = start_recorder(&upstream, &["--engine", "postgres"], &dir.join("app.trace.gz"));
    let through = through_port(&port, db, "disable");
    let o = Command::new("psql")
        .args([through.as_str(), "-Atc"])
        .arg("SELECT 1/(count(*) = 0)::int FROM pgbench_history")
        .args(["-c", "SELECT 1/(sum(abalance) = 0)::int FROM pgbench_accounts"])
        .output()
        .unwrap();
    assert!(o.status.success(), "the checks, recorded: {}", stderr(&o));
    let o = Command::new("pgbench")
        .args(["-n", "-c", "1", "-t", "5", &through])
        .output()
        .unwrap();
    stop_recorder(child);
    assert!(o.status.success(), "pgbench through the recorder: {}", stderr(&o));
    init();
}

const DISTANCE: &str = r#"
name = "app-restore"
question = "What does 20 ms cost the application, each repetition from the same data?"
kind = "load"
duration = "30s"
repetitions = 3
prewarm = false
figure = "latency_p50_ms"
baseline = "distance=0ms"
[defaults]
workload = "trace:app.trace.gz"
target = "tcp"
threads = 1
restore = "template"
[axes]
distance = ["0ms", "20ms"]
"#;

/// pgbench's TPC-B-like script recorded on the user's own database (here the shared
/// sandbox's `cbrestore`, which connbench did not make): with `restore = "template"`
/// every repetition of both cells starts from the rows the recording started from
/// (no recorded statement fails now), no warning, the method said, the database left as
/// the run found it and connbench's copy gone; with `--restore none` the repetitions
/// after the first start from the rows the ones before left, and fail the check.
#[test]
fn a_writing_trace_restored_on_your_own_database_starts_each_repetition_from_the_same_rows() {
    let dir = scratch("restore-pg");
    record_tpcb("cbrestore", &dir);
    std::fs::write(dir.join("s.toml"), DISTANCE).unwrap();
    let args = |extra: &[&str]| {
        let mut a: Vec<String> = [
            "run",
            dir.join("s.toml").to_str().unwrap(),
            "--json",
            "--store",
            dir.join("r.sqlite").to_str().unwrap(),
            "--target",
            &format!("tcp={}", with_dbname(&conninfo("tcp"), "cbrestore")),
        ]
        .map(String::from)
        .to_vec();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let o = run(&args(&[]));
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("nothing is restored"), "{err}");
    assert!(
        err.contains("each repetition starts from a copy of database cbrestore on")
            && err.contains("times before a repetition (median"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    crate::common::check_schema("run", &v);
    let failed = every(&v, "failed_now_not_then");
    assert_eq!(
        failed,
        vec![0.0; 6],
        "every repetition from the recorded rows: {err}"
    );
    assert!(every(&v, "requests").iter().all(|n| *n >= 30.0), "{v}");
    assert_eq!(
        psql("cbrestore", "SELECT count(*) FROM pgbench_history"),
        "0",
        "left as found"
    );
    assert_eq!(copies_left("cbrestore"), "", "connbench's copy is dropped");

    // The control: nothing restored, and the check fails from the second repetition on.
    let o = run(&args(&["--restore", "none"]));
    let err = stderr(&o);
    assert!(err.contains("nothing is restored between them"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let failed = every(&v, "failed_now_not_then");
    assert_eq!(failed.iter().filter(|f| **f > 0.0).count(), 5, "{failed:?}");
    // Five rows a replay, six repetitions (and a retake's, when steal forced one).
    let rows: u32 = psql("cbrestore", "SELECT count(*) FROM pgbench_history")
        .parse()
        .unwrap();
    assert!(rows >= 30 && rows % 5 == 0, "{rows}");
    psql("postgres", "DROP DATABASE cbrestore");
}

/// Ctrl-C in the middle of a restoring run: the run stops as interrupted, and still puts
/// the database back as it found it and drops connbench's copy.
#[test]
fn a_restoring_run_stopped_by_ctrl_c_leaves_no_copy_and_the_database_as_found() {
    let dir = scratch("restore-int");
    record_tpcb("cbrestoreint", &dir);
    std::fs::write(
        dir.join("s.toml"),
        DISTANCE.replace("repetitions = 3", "repetitions = 40"),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_connbench"))
        .args(["run", dir.join("s.toml").to_str().unwrap(), "--store"])
        .arg(dir.join("r.sqlite"))
        .arg("--target")
        .arg(format!("tcp={}", with_dbname(&conninfo("tcp"), "cbrestoreint")))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once the copy is there, and a few repetitions later.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while copies_left("cbrestoreint").is_empty() {
        assert!(std::time::Instant::now() < deadline, "no copy was made");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_secs(3));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(
        err.contains("put back as the run found it and the copy dropped"),
        "{err}"
    );
    assert_eq!(copies_left("cbrestoreint"), "", "{err}");
    assert_eq!(psql("cbrestoreint", "SELECT count(*) FROM pgbench_history"), "0");
    psql("postgres", "DROP DATABASE cbrestoreint");
}

const ON_THE_SANDBOX: &str = r#"
name = "app-sandbox"
question = "Through PgBouncer or not, each repetition from the same data?"
kind = "load"
duration = "30s"
repetitions = 3
prewarm = false
figure = "latency_p50_ms"
baseline = "target=tcp"
[defaults]
workload = "trace:app.trace.gz"
threads = 1
[axes]
target = ["tcp", "pgbouncer_tcp"]
"#;

/// On connbench's own sandbox a trace that writes is restored without being asked, and
/// through PgBouncer too (whose server connections to the database are closed for the
/// restore): the trace makes its table and inserts two rows with a primary key, so a
/// repetition that finds them there fails; none does, and no warning is given.
#[test]
fn a_writing_trace_on_the_sandbox_is_restored_by_default_through_pgbouncer_too() {
    let _ = sandbox();
    psql("postgres", "DROP DATABASE IF EXISTS cbrestoresb");
    psql("postgres", "CREATE DATABASE cbrestoresb");
    let dir = scratch("restore-sb");
    let upstream = format!("127.0.0.1:{}", sandbox().postgres_port);
    let (child, port) = start_recorder(&upstream, &["--engine", "postgres"], &dir.join("app.trace.gz"));
    let o = Command::new("psql")
        .arg(through_port(&port, "cbrestoresb", "disable"))
        .args([
            "-c",
            "CREATE TABLE IF NOT EXISTS restore_events (id int PRIMARY KEY)",
        ])
        .args(["-c", "INSERT INTO restore_events VALUES (1), (2)"])
        .output()
        .unwrap();
    stop_recorder(child);
    assert!(o.status.success(), "psql through the recorder: {}", stderr(&o));
    psql("postgres", "DROP DATABASE cbrestoresb");
    std::fs::write(dir.join("s.toml"), ON_THE_SANDBOX).unwrap();
    let o = run(&[
        "run".into(),
        dir.join("s.toml").to_str().unwrap().into(),
        "--json".into(),
        "--store".into(),
        dir.join("r.sqlite").to_str().unwrap().into(),
    ]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("nothing is restored"), "{err}");
    assert!(
        err.contains("each repetition starts from a copy of database connbench on connbench's sandbox"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(every(&v, "failed_now_not_then"), vec![0.0; 6], "{err}");
    assert_eq!(every(&v, "requests_not_sent"), vec![0.0; 6], "{err}");
}

static MARIA: OwnMariadb = OwnMariadb::new();

/// The same on MariaDB, on a target whose cell asks (`--restore template`): the trace,
/// recorded from the `mariadb` client, inserts rows with a primary key into a table that
/// was there before, and makes a table of its own; every repetition finds neither its
/// rows nor its table, the snapshot schema is gone after the run, and the table's rows
/// are as the run found them.
#[test]
fn a_writing_trace_on_mariadb_starts_each_repetition_from_the_same_rows() {
    let info = MARIA.info();
    let m = info.mariadb.as_ref().unwrap();
    let client = |sql: &str| {
        let o = Command::new("mariadb")
            .arg(format!("--defaults-extra-file={}", m.defaults_file.display()))
            .arg(format!("--socket={}", m.socket.display()))
            .args(["--skip-ssl", "-N", "-B", "connbench", "-e", sql])
            .output()
            .unwrap();
        assert!(o.status.success(), "{sql}: {}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    client("DROP TABLE IF EXISTS orders; DROP TABLE IF EXISTS audit");
    client(
        "CREATE TABLE orders (id INT PRIMARY KEY, note TEXT); INSERT INTO orders VALUES (1, 'there before')",
    );
    let dir = scratch("restore-maria");
    let (child, port) = start_recorder(
        &format!("127.0.0.1:{}", m.port),
        &["--engine", "mysql"],
        &dir.join("app.trace.gz"),
    );
    let o = Command::new("mariadb")
        .arg(format!("--defaults-extra-file={}", m.defaults_file.display()))
        .args(["-h", "127.0.0.1", "-P", &port, "--skip-ssl", "connbench", "-e"])
        .arg(
            "INSERT INTO orders VALUES (2, 'new'), (3, 'new'); \
             CREATE TABLE audit (id INT PRIMARY KEY); INSERT INTO audit VALUES (1)",
        )
        .output()
        .unwrap();
    stop_recorder(child);
    assert!(o.status.success(), "mariadb through the recorder: {}", stderr(&o));
    client("DELETE FROM orders WHERE id > 1; DROP TABLE audit");
    let suite = DISTANCE
        .replace("restore = \"template\"\n", "")
        .replace("target = \"tcp\"", "target = \"maria\"");
    std::fs::write(dir.join("s.toml"), suite).unwrap();
    let target = info.target("mariadb_tcp").unwrap().conninfo.clone();
    let o = run(&[
        "run".into(),
        dir.join("s.toml").to_str().unwrap().into(),
        "--json".into(),
        "--store".into(),
        dir.join("r.sqlite").to_str().unwrap().into(),
        "--target".into(),
        format!("maria={target}"),
        "--restore".into(),
        "template".into(),
    ]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("nothing is restored"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(every(&v, "failed_now_not_then"), vec![0.0; 6], "{err}");
    assert_eq!(
        client("SELECT GROUP_CONCAT(id) FROM orders"),
        "1",
        "left as found"
    );
    assert_eq!(
        client("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name LIKE 'connbench\\_restore\\_%'"),
        "0"
    );
    assert_eq!(
        client("SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'audit'"),
        "0"
    );
}

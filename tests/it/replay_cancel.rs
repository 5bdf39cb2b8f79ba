//! A recorded cancel replayed: psql runs `SELECT pg_sleep(5)` through `connbench record`
//! and is sent SIGINT once the query has run half a second (seen in pg_stat_activity,
//! not guessed with a sleep), so psql sends a CancelRequest on a connection of its own and
//! the query fails with 57014. Replayed, the CancelRequest goes to the replayed session's
//! backend at its recorded time: the statement ends as it ended then, not after 5 s, and
//! its 57014 matches the recording's; the same through `--pool 1`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{
    connbench, conninfo, scratch, start_recorder, stderr, stdout, stop_recorder, through_port, with_dbname,
};
use crate::replay::{create_database, value};

/// The statement the application ran and cancelled.
const SLOW: &str = "SELECT pg_sleep(5) AS cancelled_by_test";

/// Records psql's cancelled `SLOW` on `db` into `out`; returns how long the query had run
/// (server's clock) when psql was signalled.
fn record_cancelled_psql(admin: &str, db: &str, out: &std::path::Path) {
    let upstream = format!("127.0.0.1:{}", crate::common::sandbox().postgres_port);
    let (recorder, port) = start_recorder(&upstream, &["--engine", "postgres"], out);
    let mut psql = Command::new("psql")
        .args([through_port(&port, db, "disable").as_str(), "-Atc", SLOW])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Polled on the server's own record of the query: it has run 500 ms when this says so,
    // however busy the machine.
    let ran = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE query = '{SLOW}' AND state = 'active' \
         AND clock_timestamp() - query_start >= interval '500 ms'"
    );
    let deadline = Instant::now() + Duration::from_secs(4);
    while value(admin, &ran) != "1" {
        assert!(
            Instant::now() < deadline,
            "the query never ran 500 ms in pg_stat_activity"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: signalling our own child; psql's SIGINT handler sends the CancelRequest.
    unsafe { libc::kill(psql.id() as i32, libc::SIGINT) };
    let status = psql.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut psql.stderr.take().unwrap(), &mut err).unwrap();
    stop_recorder(recorder);
    assert!(!status.success(), "psql was not cancelled: {err}");
    assert!(err.contains("canceling statement due to user request"), "{err}");
}

/// The cancelled statement's row of a replay's summary.
fn slow_row(s: &serde_json::Value) -> &serde_json::Value {
    s["statements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["text"].as_str().unwrap().contains("pg_sleep"))
        .unwrap_or_else(|| panic!("no pg_sleep row: {s}"))
}

/// The replayed statement ended within 10% of its recorded time, plus 150 ms: the
/// CancelRequest's own connection (connect, then the postmaster's signal to the backend)
/// and the session's send lag both fall inside the measured time now, and on a busy
/// 2-core machine running a debug build each can take tens of milliseconds. Uncancelled,
/// the statement runs 5 s, far outside.
fn assert_ended_as_recorded(s: &serde_json::Value) {
    let row = slow_row(s);
    let now = row["now"]["max_ms"].as_f64().unwrap();
    let then = row["recorded"]["max_ms"].as_f64().unwrap();
    eprintln!("cancelled statement: now {now} ms, recorded {then} ms");
    assert!((500.0..4000.0).contains(&then), "recorded {then} ms: {s}");
    assert!(
        (now - then).abs() <= then * 0.10 + 150.0,
        "now {now} ms, recorded {then} ms: {s}"
    );
    assert_eq!(row["failures"], 1, "{s}");
    assert_eq!(row["failures_recorded"], 1, "{s}");
    let c = &s["cancels"];
    assert_eq!(c["recorded"], 1, "{s}");
    assert_eq!(c["replayed"], 1, "{s}");
    assert_eq!(c["not_replayed"], serde_json::json!({}), "{s}");
    let f = &s["fidelity"];
    assert_eq!(f["failed_then_not_now"], 0, "{s}");
    assert_eq!(f["failed_now_not_then"], 0, "{s}");
    let canceled = s["failures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["sqlstate"] == "57014")
        .unwrap_or_else(|| panic!("no 57014 row: {s}"));
    assert_eq!(canceled["now"], 1, "{s}");
    assert_eq!(canceled["recorded"], 1, "{s}");
}

#[test]
fn a_recorded_cancel_ends_the_replayed_statement_when_it_ended_then() {
    let admin = create_database("cbcancel");
    let dir = scratch("replay-cancel");
    let trace = dir.join("cancel.trace.gz");
    record_cancelled_psql(&admin, "cbcancel", &trace);
    let target = with_dbname(&conninfo("tcp"), "cbcancel");
    let t = trace.to_str().unwrap();
    for extra in [&[][..], &["--pool", "1"][..]] {
        let o = connbench(&[&["replay", t, "--target", &target, "--json"][..], extra].concat());
        assert_eq!(o.status.code(), Some(0), "{extra:?}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_ended_as_recorded(&v["summary"]);
    }
    // The text report says it too.
    let o = connbench(&["replay", t, "--target", &target]);
    assert!(
        stdout(&o).contains("cancels      1 of 1 recorded replayed"),
        "{}",
        stdout(&o)
    );
}

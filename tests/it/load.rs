//! `connbench init` and `connbench load` against the real sandbox: table safety, every
//! target, every connection policy, rate limiting, surviving killed backends, and JSON
//! that matches its schema.

use std::process::{Command, Stdio};
use std::time::Duration;

use connbench::proto::PhaseCursor;
use connbench::proto::{self, Endpoint};
use connbench::targets::Target;

use crate::common::{connbench, conninfo, runtime, sandbox, stderr, stdout, TempFile};

use crate::common::dataset;

/// Runs SQL as the sandbox superuser; returns the first column of each row.
pub fn sql(q: &str) -> Vec<String> {
    sql_at(&conninfo("unix"), q)
}

fn load_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["load"];
    all.extend_from_slice(args);
    all.push("--json");
    let o = connbench(&all);
    assert!(o.status.success(), "connbench {all:?}: {}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    check_schema(&v);
    v
}

/// Validates a load report against docs/schema/load.schema.json.
fn check_schema(v: &serde_json::Value) {
    crate::common::check_schema("load", v);
}

#[test]
fn init_never_touches_tables_it_did_not_create() {
    // A user table of the same name in another schema, and an unmarked one in the way.
    sql("CREATE TABLE IF NOT EXISTS public.accounts (aid int, note text)");
    sql("INSERT INTO public.accounts VALUES (1, 'mine')");
    sql("CREATE SCHEMA IF NOT EXISTS theirs");
    sql("CREATE TABLE IF NOT EXISTS theirs.history (x int)");
    let u = conninfo("unix");

    let o = connbench(&["init", &u, "--schema", "cbt_init", "-s", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("100011 rows loaded with COPY"),
        "{}",
        stdout(&o)
    );
    assert_eq!(sql("SELECT count(*)::text FROM cbt_init.accounts"), ["100000"]);
    assert_eq!(
        sql("SELECT note FROM public.accounts"),
        ["mine"],
        "a same-named table elsewhere is untouched"
    );

    // Re-init replaces only connbench's own tables.
    let o = connbench(&["init", &u, "--schema", "cbt_init", "-s", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("replaced connbench's earlier tables"),
        "{}",
        stderr(&o)
    );
    assert_eq!(sql("SELECT count(*)::text FROM cbt_init.branches"), ["2"]);

    // A table connbench did not create stops init and drop, and survives both.
    for args in [
        vec!["init", &u, "--schema", "theirs"],
        vec!["init", &u, "--schema", "theirs", "--drop"],
    ] {
        let o = connbench(&args);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("theirs.history exists and was not created by connbench"),
            "{}",
            stderr(&o)
        );
    }
    assert_eq!(sql("SELECT count(*)::text FROM theirs.history"), ["0"]);
    assert_eq!(
        sql("SELECT count(*)::text FROM pg_tables WHERE schemaname = 'theirs'"),
        ["1"]
    );

    let o = connbench(&["init", &u, "--schema", "cbt_init", "--drop"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        sql("SELECT count(*)::text FROM pg_namespace WHERE nspname = 'cbt_init'"),
        ["0"]
    );
    assert_eq!(sql("SELECT note FROM public.accounts"), ["mine"]);
}

#[test]
fn load_runs_against_every_sandbox_target() {
    dataset();
    for t in &sandbox().targets {
        let v = load_json(&[&t.conninfo, "-S", "-c", "2", "-t", "20"]);
        let s = &v["summary"];
        assert_eq!(s["transactions"], 40, "{}: {s}", t.name);
        assert_eq!(s["failed_transactions"], 0, "{}", t.name);
        assert_eq!(v["tls"].is_object(), t.name == "tls", "{}", t.name);
    }
    // tpcb-like through transaction pooling, in every protocol mode but prepared.
    for mode in ["simple", "extended"] {
        let v = load_json(&[&conninfo("pgbouncer_tx_unix"), "-M", mode, "-c", "2", "-t", "20"]);
        assert_eq!(v["summary"]["failed_transactions"], 0, "{mode}");
    }
    // Prepared statements through transaction pooling work, or fail with an explanation.
    let o = connbench(&[
        "load",
        &conninfo("pgbouncer_tx_unix"),
        "-S",
        "-M",
        "prepared",
        "-c",
        "4",
        "-j",
        "2",
        "-T",
        "1",
    ]);
    let err = stderr(&o);
    if !o.status.success() || stdout(&o).contains("failed        ") {
        assert!(
            err.contains("note: prepared statements live on one server connection"),
            "{err}"
        );
    }
}

#[test]
fn persistent_connections_open_before_the_clock() {
    dataset();
    let v = load_json(&[&conninfo("unix"), "-M", "prepared", "-c", "3", "-t", "30"]);
    let s = &v["summary"];
    assert_eq!(s["transactions"], 90);
    assert_eq!(s["connections"]["opened_before_measurement"], 3);
    assert_eq!(s["connections"]["opened_during_measurement"], 0);
    assert_eq!(s["tps"], s["tps_excluding_connect"]);
    let l = &s["latency"];
    assert_eq!(l["n"], 90);
    assert!(l["p50_ms"].as_f64() <= l["p99_ms"].as_f64());
    assert!(s["bytes_sent"].as_u64().unwrap() > 0);
    assert!(s["cpu_per_transaction_us"].as_f64().unwrap() > 0.0);
}

#[test]
fn per_transaction_connects_every_time_and_records_phases() {
    dataset();
    let v = load_json(&[&conninfo("unix"), "-C", "-S", "-c", "2", "-t", "10"]);
    let c = &v["summary"]["connections"];
    assert_eq!(c["opened_before_measurement"], 0);
    assert_eq!(c["opened_during_measurement"], 20);
    let names: Vec<&str> = c["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["connect", "startup", "auth", "ready"]);
    let s = &v["summary"];
    assert!(s["tps_excluding_connect"].as_f64() > s["tps"].as_f64());
    // connect-only: each transaction is a connect, nothing else.
    let v = load_json(&[
        &conninfo("pgbouncer_unix_trust"),
        "-b",
        "connect-only",
        "-t",
        "15",
    ]);
    assert_eq!(v["summary"]["connections"]["opened_during_measurement"], 15);
}

#[test]
fn pool_lifetime_expiry_really_reconnects() {
    dataset();
    // One pooled connection retired every 300 ms, a transaction every ~50 ms for 2 s.
    let v = load_json(&[
        &conninfo("unix"),
        "-S",
        "--connection",
        "pool",
        "--pool-size",
        "1",
        "--pool-max-lifetime",
        "300ms",
        "--think",
        "50ms",
        "-T",
        "2",
        "--interval",
        "500ms",
    ]);
    let c = &v["summary"]["connections"];
    let reconnects = c["opened_during_measurement"].as_u64().unwrap();
    assert!(
        (4..=9).contains(&reconnects),
        "2 s / 300 ms lifetime: {reconnects} connects"
    );
    let series = v["series"].as_array().unwrap();
    let with_connects = series.iter().filter(|i| i["connects"].as_u64() > Some(0)).count();
    assert!(with_connects >= 3, "reconnects spread over the run: {series:?}");
    // A long lifetime keeps the one connection.
    let v = load_json(&[
        &conninfo("unix"),
        "-S",
        "--connection",
        "pool",
        "--pool-max-lifetime",
        "5m",
        "-t",
        "30",
    ]);
    // Opened before the clock, as a persistent client's: none inside the measurement.
    assert_eq!(v["summary"]["connections"]["opened_before_measurement"], 1);
    assert_eq!(v["summary"]["connections"]["opened_during_measurement"], 0);
}

#[test]
fn rate_limiting_achieves_the_target() {
    dataset();
    let dir = crate::common::scratch("rate");
    let prefix = dir.join("lag");
    let v = load_json(&[
        &conninfo("unix"),
        "-S",
        "-R",
        "500",
        "-c",
        "4",
        "-T",
        "8",
        "-l",
        "--log-prefix",
        prefix.to_str().unwrap(),
    ]);
    let s = &v["summary"];
    let tps = s["tps"].as_f64().unwrap();
    // Poisson arrivals: 4,000 expected, standard deviation ~63 (1.6%). At 500 tps, not
    // 1,000: with two busy loops beside other builds on the 2 cores this debug build and
    // its server reached 681 tps of 1,000. Never more than the schedule; fewer only by
    // what the clients were behind it when the window closed (the transactions due in
    // the last `lag` seconds, which the maximum lag bounds): the whole suite under
    // --stress reached 474.6 tps of 500, its backlog so explained, while a limiter that
    // schedules too few (a gap too long) stays on time and fails.
    let lag_s = s["schedule_lag"]["max_ms"].as_f64().unwrap() / 1e3;
    assert!(
        tps < 500.0 * 1.05 && tps + 500.0 * lag_s / s["measured_s"].as_f64().unwrap() > 500.0 * 0.95,
        "achieved {tps} tps for a target of 500, {lag_s} s behind the schedule at worst"
    );
    assert_eq!(s["schedule_lag"]["n"], s["transactions"], "{s}");
    let woken = paced_wake_up_lags_us(&dir);
    // The timer's share of the lag, judged where the timer alone decides it: at a wake-up
    // (a transaction whose intended start came after its client's previous one ended; a
    // client behind its schedule starts at once, and its lag is the backlog). The lowest
    // tenth, because a busy machine delays the rest: with two busy loops beside other
    // builds on the 2 cores the median wake-up was 1.0-1.3 ms late, while the lowest tenth
    // stayed at 22-24 µs (26 µs with the builds alone). A timer that fires on a 1 ms tick
    // is late by the distance from the intended start to the next tick, uniform over 0-1
    // ms for Poisson starts, so at most 6% of its wake-ups can come within 60 µs however
    // idle the machine; tokio's wheel put its lowest tenth at 0.49-0.88 ms.
    assert!(
        woken.len() >= 100,
        "{} of {} transactions were timer wake-ups: too few to judge the timer",
        woken.len(),
        s["transactions"]
    );
    let p10 = woken[woken.len() / 10];
    assert!(
        p10 < 60,
        "the quickest tenth of {} timer wake-ups came up to {p10} µs after their intended \
         start (lags, µs: {:?} ...)",
        woken.len(),
        &woken[..woken.len().min(40)]
    );
}

/// From the per-transaction logs under `dir` (pgbench's format with the schedule lag,
/// µs): the lag of every transaction whose intended start (its end minus its latency,
/// which under -R runs from the intended start) came after its client's previous
/// transaction ended, so the client slept on its timer until then; sorted.
fn paced_wake_up_lags_us(dir: &std::path::Path) -> Vec<i64> {
    // Per client: (transaction number, end µs, latency µs, lag µs).
    let mut per_client: std::collections::BTreeMap<i64, Vec<[i64; 4]>> = Default::default();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        for line in std::fs::read_to_string(entry.path()).unwrap().lines() {
            // client_id transaction_no time script_no time_epoch time_us schedule_lag
            let f: Vec<i64> = line
                .split_whitespace()
                .map(|x| {
                    x.parse()
                        .unwrap_or_else(|_| panic!("a committed transaction: {line}"))
                })
                .collect();
            assert_eq!(f.len(), 7, "a log line with the schedule lag: {line}");
            per_client
                .entry(f[0])
                .or_default()
                .push([f[1], f[4] * 1_000_000 + f[5], f[2], f[6]]);
        }
    }
    let mut lags = Vec::new();
    for tx in per_client.values_mut() {
        tx.sort();
        for w in tx.windows(2) {
            let ([_, previous_end, _, _], [_, end, latency, lag]) = (w[0], w[1]);
            if end - latency > previous_end {
                lags.push(lag);
            }
        }
    }
    lags.sort();
    lags
}

/// Runs SQL on the server at `conninfo`; returns the first column of each row.
fn sql_at(conninfo: &str, q: &str) -> Vec<String> {
    let ep = Endpoint::new(Target::parse(conninfo).unwrap()).unwrap();
    let q = q.to_string();
    std::thread::spawn(move || {
        runtime().block_on(async {
            let (mut s, _) = proto::connect(&ep, &PhaseCursor::default()).await.unwrap();
            let rows = s.query_column(&q).await.unwrap_or_else(|e| panic!("{q}: {e}"));
            s.close().await;
            rows
        })
    })
    .join()
    .unwrap()
}

/// Waits until `n` sessions named `app` (application_name) are connected to the server
/// at `conninfo`, by the server's own view: a test that strikes mid-run strikes after
/// this event, not after a sleep that a slow start on a busy machine can outlast.
fn wait_for_sessions(conninfo: &str, app: &str, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let q = format!(
        "SELECT count(*)::text FROM pg_stat_activity WHERE application_name = '{app}' \
         AND pid <> pg_backend_pid()"
    );
    loop {
        let seen: usize = sql_at(conninfo, &q)[0].parse().unwrap();
        if seen >= n {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{n} sessions of {app} never connected (saw {seen})"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every failure of a load report: (kind, count).
fn failure_kinds(v: &serde_json::Value) -> Vec<(String, u64)> {
    v["summary"]["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap().to_string(),
                f["count"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// A backend terminated mid-run (`pg_terminate_backend`) is counted by the server's
/// reason, 57P01, whichever side of the race its client is on: reading the server's
/// FATAL, or writing its next query into the closed socket first (EPIPE), where the
/// reason is read back before the write's error is reported. The strike waits for the
/// clients to be connected, an event, so a slow start on a busy machine cannot miss it.
#[test]
fn a_terminated_backend_is_counted_and_the_client_reconnects() {
    dataset();
    // Its own application_name, so the strike hits this test's sessions only, never a
    // load that another test runs on the shared sandbox at the same time.
    let target = format!("{} application_name=cbt-terminated", conninfo("unix"));
    let child = Command::new(env!("CARGO_BIN_EXE_connbench"))
        .args(["load", &target, "-c", "3", "-T", "3", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_sessions(&target, "cbt-terminated", 3);
    let killed = sql(
        "SELECT count(pg_terminate_backend(pid))::text FROM pg_stat_activity \
         WHERE application_name = 'cbt-terminated' AND pid <> pg_backend_pid()",
    );
    assert!(killed[0].parse::<u32>().unwrap() >= 1, "terminated {killed:?}");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    check_schema(&v);
    let s = &v["summary"];
    let failures = s["failures"].as_array().unwrap();
    assert!(
        failures
            .iter()
            .any(|f| f["kind"] == "57P01" && f["class"] == "57 operator intervention"),
        "{failures:?}"
    );
    let kinds = failure_kinds(&v);
    assert!(
        kinds.iter().all(|(k, _)| k == "57P01"),
        "every failure is the server's 57P01, none an I/O error: {kinds:?}"
    );
    assert!(
        s["connections"]["opened_during_measurement"].as_u64().unwrap() >= 1,
        "clients reconnected"
    );
    // A bound that holds with both cores busy: three clients over three seconds.
    assert!(s["transactions"].as_u64().unwrap() > 20, "and went on");
}

/// A PostgreSQL restart mid-run (a fast shutdown, as an operator's): the sessions it
/// ends are counted by the server's 57P01, never as an I/O error of a query, and the
/// connects that find the server down (refused: 57P03, ECONNREFUSED, a missing socket)
/// are counted as refused connect attempts, each once, not as failed transactions. A
/// sandbox of its own, since it restarts the server.
#[test]
fn a_postgres_restart_mid_run_is_counted_by_the_servers_reason() {
    let mut sb = crate::common::start_sandbox();
    let target = format!(
        "{} application_name=cbt-restart",
        sb.info.target("unix").unwrap().conninfo
    );
    let ep = Endpoint::new(Target::parse(&target).unwrap()).unwrap();
    std::thread::spawn(move || {
        runtime().block_on(async {
            connbench::dataset::pgbench::init(&ep, "connbench", 1)
                .await
                .unwrap();
        })
    })
    .join()
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_connbench"))
        .args(["load", &target, "-S", "-c", "3", "-T", "4", "-R", "600", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_sessions(&target, "cbt-restart", 3);
    std::thread::scope(|s| {
        s.spawn(|| runtime().block_on(sb.restart_postgres()).unwrap());
    });
    let out = child.wait_with_output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let kinds = failure_kinds(&v);
    assert!(
        kinds.iter().any(|(k, _)| k == "57P01"),
        "the restart ended sessions with 57P01: {kinds:?}"
    );
    assert!(
        kinds.iter().all(|(k, _)| !k.starts_with("query:")),
        "no query failed with an I/O error: {kinds:?}"
    );
    let connections = &v["summary"]["connections"];
    assert!(
        connections["failed_attempts"].as_u64().unwrap() > 0,
        "the clients' reconnects found the server down: {connections}"
    );
    assert!(
        kinds
            .iter()
            .all(|(k, _)| k != "57P03" && !k.starts_with("connect:")),
        "a refused connect is not a failed transaction: {kinds:?}"
    );
    sb.stop().unwrap();
}

#[test]
fn every_transaction_failing_exits_1_with_the_first_error() {
    let script = TempFile::new("bad.sql", "SELECT * FROM no_such_table;\n");
    // --continue-on-error: each of the five fails (without it the first aborts the client).
    let o = connbench(&[
        "load",
        &conninfo("unix"),
        "-f",
        script.path(),
        "-t",
        "5",
        "--continue-on-error",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("error: every transaction failed; the first error: query: relation \"no_such_table\" does not exist (42P01)"),
        "{}",
        stderr(&o)
    );
    assert!(
        stdout(&o).contains("5x 42P01 [42 syntax error or access rule violation]"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn load_without_tables_says_how_to_make_them() {
    let o = connbench(&["load", &conninfo("unix"), "--schema", "cbt_missing"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("connbench's tables are not in schema cbt_missing"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("connbench init"), "{}", stderr(&o));
}

#[test]
fn ctrl_c_during_load_still_reports() {
    dataset();
    let target = format!("{} application_name=cbt-ctrl-c", conninfo("unix"));
    let child = Command::new(env!("CARGO_BIN_EXE_connbench"))
        .args(["load", &target, "-S", "-c", "2", "-T", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Ctrl-C once the clients are connected and running (an event), plus a moment for
    // transactions to be measured.
    wait_for_sessions(&target, "cbt-ctrl-c", 2);
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("interrupted: the figures below cover the measurement before Ctrl-C"),
        "{text}"
    );
    assert!(text.contains("latency       mean"), "{text}");
}

/// Warm-up transactions run but are not recorded: the server's own count of tpcb-like
/// history rows (one per transaction, in a schema only this test writes to) exceeds the
/// transactions the report counts, and the series starts when the measurement does.
/// `--series` prints one row per interval.
#[test]
fn warmup_runs_but_is_not_recorded_and_series_prints_per_interval() {
    let schema = "cb_warmup_test";
    let o = connbench(&["init", &conninfo("unix"), "--schema", schema]);
    assert!(o.status.success(), "{}", stderr(&o));
    let history = || {
        sql(&format!("SELECT count(*) FROM {schema}.history"))[0]
            .parse::<u64>()
            .unwrap()
    };
    let before = history();
    let v = load_json(&[
        &conninfo("unix"),
        "--schema",
        schema,
        "-c",
        "2",
        "--warmup",
        "700ms",
        "-T",
        "1",
    ]);
    let recorded = v["summary"]["transactions"].as_u64().unwrap();
    let ran = history() - before;
    assert!(recorded > 0, "{v}");
    // Every recorded transaction committed one history row, and so did every warm-up
    // one: the server seeing more than the report counts is the warm-up left out. (It
    // asked for 10 more, which a machine busy enough to stretch each transaction past
    // 140 ms did not give.)
    assert!(
        ran > recorded,
        "the server saw {ran} transactions, the report counts {recorded}: warm-up ones must be left out"
    );
    assert_eq!(v["settings"]["warmup_s"], 0.7);
    assert_eq!(
        v["series"][0]["start_s"], 0.0,
        "the series starts with the measurement"
    );
    let o = connbench(&[
        "load",
        &conninfo("unix"),
        "--schema",
        schema,
        "-S",
        "-T",
        "2",
        "--series",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let header = text
        .lines()
        .position(|l| l.contains("from s") && l.contains("connects"))
        .unwrap_or_else(|| panic!("no series table: {text}"));
    let rows: Vec<&str> = text
        .lines()
        .skip(header + 1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(rows.len(), 2, "one row per 1 s interval of a 2 s run: {rows:#?}");
    assert!(rows[0].trim_start().starts_with("0.0"), "{rows:#?}");
    let o = connbench(&["init", &conninfo("unix"), "--schema", schema, "--drop"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn cpu_is_accounted_per_group_and_is_null_with_a_reason_where_not_measured() {
    crate::common::dataset();
    let f = |v: &serde_json::Value, k: &str| {
        v["summary"][k]
            .as_f64()
            .unwrap_or_else(|| panic!("summary.{k} is not a number: {}", v["summary"]))
    };
    // The sandbox's own server, saturated by select-only: every group positive, and the
    // groups together no more than the machine's busy cores (they are part of it) nor
    // its cores.
    let v = load_json(&["--sandbox", "unix", "-S", "-c", "4", "-j", "2", "-T", "2"]);
    for k in [
        "server_cpu_s",
        "server_cpu_per_transaction_us",
        "context_switches_per_transaction",
        "cpu_per_transaction_us",
        "client_cores",
    ] {
        assert!(f(&v, k) > 0.0, "{k}: {}", v["summary"]);
    }
    let measured = f(&v, "measured_s");
    let used = (f(&v, "cpu_user_s") + f(&v, "cpu_system_s") + f(&v, "server_cpu_s")) / measured;
    let m = &v["summary"]["machine"];
    let (busy, cores) = (m["busy_cores"].as_f64().unwrap(), m["cores"].as_f64().unwrap());
    // Clock ticks are 10 ms: over 2 s that is a few hundredths of a core either way.
    assert!(
        used <= busy + 0.05 && used <= cores + 0.05,
        "client + server {used} cores, busy {busy} of {cores}"
    );
    assert!(v["summary"]["pooler_cpu_s"].is_null() && v["summary"]["relay_cpu_s"].is_null());
    assert!(
        v["summary"]["utilisation"]
            .as_str()
            .unwrap()
            .contains("the server"),
        "{}",
        v["summary"]
    );

    // A local server connbench did not start: null, and the reason says what to give.
    let v = load_json(&[&conninfo("unix"), "-S", "-T", "1"]);
    assert!(v["summary"]["server_cpu_s"].is_null(), "{}", v["summary"]);
    assert!(v["summary"]["server_cpu_per_transaction_us"].is_null());
    let why = v["summary"]["server_cpu_not_measured"].as_str().unwrap();
    assert!(why.contains("--server-pid"), "{why}");
    let o = connbench(&["load", &conninfo("unix"), "-S", "-T", "1"]);
    assert!(
        stdout(&o).contains("server CPU    not measured"),
        "{}",
        stdout(&o)
    );
    // ... and with its postmaster named, measured.
    let pid = crate::common::sandbox().postgres_pid.to_string();
    let v = load_json(&[&conninfo("unix"), "-S", "-T", "1", "--server-pid", &pid]);
    assert!(f(&v, "server_cpu_s") > 0.0, "{}", v["summary"]);
    let o = connbench(&[
        "load",
        &conninfo("unix"),
        "-S",
        "-T",
        "1",
        "--server-pid",
        "999999999",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--server-pid 999999999: no such process"),
        "{}",
        stderr(&o)
    );

    // Packets: over TCP each query and its answer cross loopback (at least one packet
    // each way per transaction; other tests running beside this one only add to it).
    let v = load_json(&[&conninfo("tcp_trust"), "-S", "-T", "1"]);
    assert!(f(&v, "packets_sent_per_transaction") >= 1.0, "{}", v["summary"]);
    assert!(
        f(&v, "packets_received_per_transaction") >= 1.0,
        "{}",
        v["summary"]
    );

    // Through PgBouncer with a connection per transaction: the pooler apart, and the
    // server's CPU per new connection.
    let v = load_json(&["--sandbox", "pgbouncer_unix", "-S", "-C", "-T", "1"]);
    assert!(f(&v, "pooler_cpu_s") > 0.0, "{}", v["summary"]);
    assert!(f(&v, "pooler_cpu_per_transaction_us") > 0.0);
    // Direct with a connection per transaction: the server forks a backend each time.
    let v = load_json(&["--sandbox", "unix", "-S", "-C", "-T", "1"]);
    assert!(f(&v, "server_cpu_per_connect_us") > 100.0, "{}", v["summary"]);
}

#[test]
fn per_command_report_times_each_command_and_puts_failures_where_they_happened() {
    dataset();
    // Half the transactions fail at their last command (x even: division by zero).
    let script = TempFile::new(
        "per-command.sql",
        "\\set x random(1, 10)\nSELECT pg_sleep(0.002);\nSELECT 1 /\n  (:x % 2);\n",
    );
    let path = script.path();
    // --continue-on-error: a failed transaction's client goes on (else it would abort).
    let v = load_json(&[
        &conninfo("unix"),
        "-f",
        path,
        "-r",
        "-c",
        "2",
        "-t",
        "40",
        "--continue-on-error",
    ]);
    let s = &v["summary"];
    let (ok, failed) = (
        s["transactions"].as_u64().unwrap(),
        s["failed_transactions"].as_u64().unwrap(),
    );
    assert_eq!(ok + failed, 80, "{s}");
    assert!(
        ok > 10 && failed > 10,
        "random(1, 10) is even about half the time: {s}"
    );
    let c = s["per_command"].as_array().expect("per_command with -r");
    let texts: Vec<&str> = c.iter().map(|c| c["command"].as_str().unwrap()).collect();
    assert_eq!(
        texts,
        [
            "\\set x random(1, 10)",
            "SELECT pg_sleep(0.002);",
            "SELECT 1 / (:x % 2);"
        ]
    );
    // Every measured transaction ran the first two commands; the last completed in the
    // successful ones and failed in the others.
    assert_eq!(c[0]["executions"], ok + failed);
    assert_eq!(c[1]["executions"], ok + failed);
    assert_eq!(c[2]["executions"], ok);
    assert_eq!(c[2]["failures"], failed);
    assert_eq!(c[0]["failures"], 0);
    let ms = |i: usize, k: &str| c[i][k].as_f64().unwrap();
    assert!(
        ms(1, "mean_ms") >= 2.0 && ms(1, "p50_ms") >= 1.98,
        "pg_sleep(0.002): {}",
        c[1]
    );
    assert!(ms(0, "mean_ms") < 0.1, "a \\set is arithmetic: {}", c[0]);
    assert!(ms(1, "p50_ms") <= ms(1, "p99_ms") && ms(1, "p99_ms") <= ms(1, "max_ms") * 1.01);
    // A transaction is its commands, back to back: their means add up to nearly its mean
    // latency (the rest is the client's loop between commands). Only where every
    // transaction succeeds do the two means cover the same transactions: above, the
    // sleep's mean also counts the failed ones, which the latency leaves out.
    let whole = TempFile::new(
        "per-command-ok.sql",
        "\\set x random(1, 10)\nSELECT pg_sleep(0.002);\nSELECT :x;\n",
    );
    let v = load_json(&[&conninfo("unix"), "-f", whole.path(), "-r", "-c", "2", "-t", "40"]);
    let (s, c) = (&v["summary"], v["summary"]["per_command"].as_array().unwrap());
    assert_eq!(s["failed_transactions"], 0, "{s}");
    let sum: f64 = c.iter().map(|c| c["mean_ms"].as_f64().unwrap()).sum();
    let tx = s["latency"]["mean_ms"].as_f64().unwrap();
    assert!(
        sum <= tx * 1.01 && sum >= tx * 0.8,
        "commands {sum} ms, transaction {tx} ms"
    );

    // Text: one row per command, in script order; without -r there is none, and the
    // JSON key is null.
    let o = connbench(&["load", &conninfo("unix"), "-f", path, "-r", "-t", "5"]);
    let text = stdout(&o);
    let header = text
        .lines()
        .position(|l| l.starts_with("per command"))
        .unwrap_or_else(|| panic!("no per-command table: {text}"));
    let rows: Vec<&str> = text.lines().skip(header + 2).take(3).collect();
    assert!(rows[1].ends_with("SELECT pg_sleep(0.002);"), "{rows:#?}");
    let v = load_json(&[&conninfo("unix"), "-S", "-t", "5"]);
    assert!(v["summary"]["per_command"].is_null(), "{}", v["summary"]);
}

#[test]
fn latency_limit_counts_late_transactions_and_skips_hopeless_ones_under_a_rate() {
    // One client, 4 ms per transaction: at most about 250 tps.
    let script = TempFile::new("latency-limit.sql", "SELECT pg_sleep(0.004);\n");
    let path = script.path();
    let v = load_json(&[&conninfo("unix"), "-f", path, "-t", "20", "-L", "2"]);
    let s = &v["summary"];
    assert_eq!(v["settings"]["latency_limit_ms"], 2.0);
    assert_eq!(s["transactions"], 20);
    assert_eq!(
        s["late_transactions"], 20,
        "every 4 ms transaction is over 2 ms: {s}"
    );
    assert!(
        s["skipped_transactions"].is_null(),
        "nothing is skipped without -R: {s}"
    );

    // Asked for 1,000 tps, the client falls behind. Without a limit the backlog grows
    // for the whole second; with -L 10 what is already 10 ms late is skipped, so the
    // transactions sent stay within about the limit plus their own 4 ms.
    let free = load_json(&[&conninfo("unix"), "-f", path, "-T", "1", "-R", "1000"]);
    let limited = load_json(&[&conninfo("unix"), "-f", path, "-T", "1", "-R", "1000", "-L", "10"]);
    let (fs, ls) = (&free["summary"], &limited["summary"]);
    assert!(fs["latency"]["max_ms"].as_f64().unwrap() > 200.0, "{fs}");
    assert!(fs["late_transactions"].is_null() && fs["skipped_transactions"].is_null());
    let skipped = ls["skipped_transactions"].as_u64().unwrap();
    let sent = ls["transactions"].as_u64().unwrap();
    assert!(
        skipped > 300,
        "about 750 of the ~1,000 due cannot be served: {ls}"
    );
    assert!(
        (700..=1300).contains(&(skipped + sent)),
        "the sent and the skipped are the transactions due: {ls}"
    );
    // What was sent started at most 10 ms late: its typical latency is the limit plus its
    // own 4 ms, where the unlimited run's backlog put hundreds of ms on each. The median,
    // not the maximum: with every core busy one transaction can wait 100 ms for a core.
    let (free_p50, limited_p50) = (
        fs["latency"]["p50_ms"].as_f64().unwrap(),
        ls["latency"]["p50_ms"].as_f64().unwrap(),
    );
    assert!(
        limited_p50 < 50.0 && limited_p50 * 4.0 < free_p50,
        "limited p50 {limited_p50} ms, free p50 {free_p50} ms: {ls}"
    );
    let o = connbench(&[
        "load",
        &conninfo("unix"),
        "-f",
        path,
        "-T",
        "1",
        "-R",
        "1000",
        "-L",
        "10",
    ]);
    assert!(stdout(&o).contains("never sent"), "{}", stdout(&o));

    for bad in ["0", "-5", "soon"] {
        let flag = format!("--latency-limit={bad}");
        let o = connbench(&["load", &conninfo("unix"), "-f", path, &flag]);
        assert_eq!(o.status.code(), Some(2), "{flag}: {}", stderr(&o));
        assert!(stderr(&o).contains("latency limit"), "{flag}: {}", stderr(&o));
    }
}

/// A table a test creates for its script to insert into, and the script file: what the
/// clients drew, seen from the server. `done` drops the table; the script goes with the
/// guard.
struct Sink {
    table: String,
    script: TempFile,
}

impl Sink {
    /// `body` writes the script, given the table's name.
    fn new(tag: &str, body: impl Fn(&str) -> String) -> Sink {
        let table = format!("cb_{tag}_seen_{}", std::process::id());
        sql(&format!("CREATE TABLE {table} (v bigint)"));
        let script = TempFile::new(&format!("{tag}.sql"), &body(&table));
        Sink { table, script }
    }

    fn path(&self) -> &str {
        self.script.path()
    }

    /// Empties the table, runs `load` with the script and `args`, returns its JSON.
    fn load(&self, args: &[&str]) -> serde_json::Value {
        sql(&format!("TRUNCATE {}", self.table));
        let mut all = vec![conninfo("unix"), "-f".into(), self.path().into()];
        all.extend(args.iter().map(|a| a.to_string()));
        load_json(&all.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// The values inserted, sorted.
    fn values(&self) -> Vec<i64> {
        sql(&format!("SELECT v FROM {} ORDER BY v", self.table))
            .iter()
            .map(|v| v.parse().unwrap())
            .collect()
    }

    fn done(self) {
        sql(&format!("DROP TABLE {}", self.table));
    }
}

#[test]
fn the_same_random_seed_repeats_every_clients_random_choices() {
    let sink = Sink::new("seed", |t| {
        format!("\\set a random(1, 1000000000)\nINSERT INTO {t} VALUES (:a);\n")
    });
    let drawn = |seed: &str| {
        let v = sink.load(&["-c", "3", "-t", "20", "--random-seed", seed]);
        assert_eq!(v["settings"]["random_seed"].as_u64().unwrap().to_string(), seed);
        sink.values()
    };
    let (a, b, other) = (drawn("7"), drawn("7"), drawn("8"));
    assert_eq!(a.len(), 60);
    assert_eq!(a, b, "the same seed draws the same values");
    assert_ne!(a, other, "another seed draws others");
    // Without a seed, the one drawn from the clock is reported, and repeats the run.
    let v = sink.load(&["-c", "3", "-t", "20"]);
    let used = v["settings"]["random_seed"].as_u64().expect("the seed used");
    let first = sink.values();
    assert_eq!(drawn(&used.to_string()), first);
    sink.done();
}

#[test]
fn a_script_drawing_from_random_zipfian_sends_its_skew_to_the_server() {
    let sink = Sink::new("zipf", |t| {
        format!("\\set k random_zipfian(1, 100, 1.5)\nINSERT INTO {t} VALUES (:k);\n")
    });
    for mode in ["simple", "prepared"] {
        sink.load(&["-c", "2", "-t", "300", "-M", mode]);
        let v = sink.values();
        assert_eq!(v.len(), 600);
        assert!(v[0] >= 1 && v[599] <= 100, "{mode}: in range");
        // P(1) / P(2) = 2^1.5 = 2.8 for s = 1.5: of 600 draws, 1 far ahead of 2.
        let count = |k: i64| v.iter().filter(|&&x| x == k).count();
        assert!(
            count(1) > count(2) * 3 / 2 && count(1) > 100,
            "{mode}: skewed to 1: {} ones, {} twos",
            count(1),
            count(2)
        );
    }
    sink.done();
}

#[test]
fn defined_variables_reach_the_script_and_scale_can_be_overridden() {
    let sink = Sink::new("define", |t| {
        format!("INSERT INTO {t} VALUES (:k * 10 + :scale);\n")
    });
    let v = sink.load(&["-t", "3", "-D", "k=7", "-D", "scale=3"]);
    assert_eq!(v["settings"]["defines"], serde_json::json!({"k": 7, "scale": 3}));
    assert_eq!(sink.values(), [73, 73, 73]);
    for (bad, want) in [
        ("k", "write NAME=VALUE"),
        ("a-b=1", "a variable name"),
        ("client_id=1", "numbers the clients itself"),
    ] {
        let o = connbench(&["load", &conninfo("unix"), "-f", sink.path(), "-D", bad]);
        assert_eq!(o.status.code(), Some(2), "-D {bad}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "-D {bad}: {}", stderr(&o));
    }
    // A value that is not a number is text, substituted as written, as pgbench does: here
    // it becomes a column name the server does not know.
    let o = connbench(&[
        "load",
        &conninfo("unix"),
        "-f",
        sink.path(),
        "-D",
        "k=x",
        "-t",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("column \"x\" does not exist"),
        "{}",
        stderr(&o)
    );
    sink.done();
}

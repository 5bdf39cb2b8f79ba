//! Faults during a run, injected by the relay (as Toxiproxy's toxics) between connbench
//! and the sandbox's real PostgreSQL: each is survived and counted by kind, or ends the
//! run with a clear message, and no wait on a stalled peer goes unbounded. Loads run
//! under a rate, below saturation, so they leave the cores to the tests beside them.

use std::time::{Duration, Instant};

use crate::common::{connbench, conninfo, dataset, stderr};
use crate::relay::spawn_relay;

/// The sandbox's PostgreSQL over TCP, as host:port, and a conninfo that reaches it
/// through `at` instead.
fn through(at: &str) -> (String, String) {
    let direct = conninfo("tcp");
    let port = direct
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("port="))
        .unwrap()
        .to_string();
    let (_, relay_port) = at.rsplit_once(':').unwrap();
    (
        format!("127.0.0.1:{port}"),
        direct.replace(&format!("port={port}"), &format!("port={relay_port}")),
    )
}

fn load_json(args: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let out = connbench(args);
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code(), v, stderr(&out))
}

fn failures_of_kind(v: &serde_json::Value, needle: &str) -> u64 {
    v["summary"]["failures"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"].as_str().unwrap_or_default().contains(needle))
        .map(|f| f["count"].as_u64().unwrap())
        .sum()
}

#[test]
fn resets_after_n_bytes_are_counted_and_the_clients_reconnect() {
    dataset();
    let upstream = through("x:0").0;
    let (_relay, at, _) = spawn_relay(&["--upstream", &upstream, "--reset-after", "100000"]);
    let target = through(&at).1;
    let (code, v, err) = load_json(&[
        "load", &target, "-S", "-c", "2", "-T", "1500ms", "-R", "3000", "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let s = &v["summary"];
    let resets = failures_of_kind(&v, "reset");
    assert!(resets >= 2, "resets counted by kind: {s}");
    assert_eq!(s["failed_transactions"].as_u64(), Some(resets), "{s}");
    assert!(
        s["transactions"].as_u64().unwrap() > 20 * resets,
        "the run went on: {s}"
    );
}

#[test]
fn a_bandwidth_cut_mid_run_slows_the_run_from_that_moment() {
    dataset();
    let upstream = through("x:0").0;
    let (_relay, at, banner) = spawn_relay(&["--upstream", &upstream, "--cut-bandwidth", "1500ms=16kbit"]);
    assert!(
        banner.contains("bandwidth cut to 2.0 KiB/s after 1.50 s"),
        "{banner}"
    );
    let target = through(&at).1;
    let (code, v, err) = load_json(&[
        "load",
        &target,
        "-S",
        "-c",
        "2",
        "-T",
        "3s",
        "-R",
        "200",
        "--interval",
        "500ms",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let series = v["series"].as_array().unwrap();
    let tps = |i: usize| series[i]["tps"].as_f64().unwrap();
    // 2.0-3.0 s: the window's last second, after the cut (a paced client's backlog then
    // drains in intervals of their own after the window): the link's pace, a few
    // transactions a second at 2 KiB/s, against the rate before it. Compared within the
    // run, since a busy machine may not reach the rate at all (56 tps of 200 was seen with
    // two busy loops beside other builds on the 2 cores): a cut from the start, or none,
    // leaves the two halves alike.
    let (before, after) = (tps(0).min(tps(1)), tps(4).max(tps(5)));
    assert!(after < 50.0, "after it, the link's pace: {series:?}");
    assert!(
        before > 20.0 && before > 3.0 * after,
        "before the cut {before} tps, after it {after}: {series:?}"
    );
}

#[test]
fn a_slow_close_neither_stalls_the_clients_nor_fails_them() {
    dataset();
    let upstream = through("x:0").0;
    let (_relay, at, banner) = spawn_relay(&["--upstream", &upstream, "--slow-close", "1s"]);
    assert!(banner.contains("close 1.00 s late"), "{banner}");
    let target = through(&at).1;
    // A connection per transaction: every transaction ends with a close the relay passes
    // on a second late. connbench's close sends Terminate and does not wait for the peer.
    let started = Instant::now();
    let (code, v, err) = load_json(&[
        "load", &target, "-S", "-C", "-c", "2", "-T", "2s", "-R", "40", "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let s = &v["summary"];
    assert_eq!(s["failed_transactions"], 0, "{s}");
    // A client that waited for the peer's close after each transaction would complete a
    // few (12 of the 80 due, with a build that read to the relay's EOF after Terminate).
    assert!(
        s["transactions"].as_u64().unwrap() >= 40,
        "the clients did not wait for the late close: {s}"
    );
    // One whose transaction's clock ran until the close would take a second and more in
    // every transaction. The quickest, since under -R the latency runs from the intended
    // start, and a busy machine that cannot keep up with 40 SCRAM connects a second (two
    // busy loops beside other builds on the 2 cores) puts its backlog into most of them.
    assert!(
        s["latency"]["min_ms"].as_f64().unwrap() < 1000.0,
        "no transaction waited for the late close: {s}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "the run was not held open"
    );
}

#[test]
fn a_share_of_refused_connections_fails_those_connects_only() {
    dataset();
    let upstream = through("x:0").0;
    let (_relay, at, _) = spawn_relay(&["--upstream", &upstream, "--refuse", "0.3"]);
    let target = through(&at).1;
    let (code, v, err) = load_json(&[
        "load", &target, "-S", "-C", "-c", "2", "-T", "1500ms", "-R", "300", "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let s = &v["summary"];
    let (done, failed) = (
        s["transactions"].as_u64().unwrap(),
        s["failed_transactions"].as_u64().unwrap(),
    );
    assert!(failed > 0 && done > 0, "{s}");
    // A count, so the machine's load does not move it: each connection is refused with
    // probability 0.3, one connection per transaction, so the share is binomial around
    // 0.3 (about 430 transactions: a standard deviation of 0.022). Four standard
    // deviations either side: a refusal drawn twice per connection (0.51), or a refused
    // connect counted as two failures (0.46), fails.
    let n = done + failed;
    assert!(n >= 50, "too few transactions to judge the share: {s}");
    let share = failed as f64 / n as f64;
    let sd = (0.3f64 * 0.7 / n as f64).sqrt();
    assert!(
        (share - 0.3).abs() < 4.0 * sd,
        "refused share {share:.3} of {n} against 0.3 ± {:.3}: {s}",
        4.0 * sd
    );
    assert_eq!(
        failures_of_kind(&v, "reset"),
        failed,
        "every failure is a reset: {s}"
    );
}

#[test]
fn a_stalled_proxy_ends_in_a_timeout_and_a_stall_mid_run_in_a_message() {
    dataset();
    let upstream = through("x:0").0;
    // Accepts and never answers: the connect phase times out and says so.
    let (_relay, at, _) = spawn_relay(&["--upstream", &upstream, "--stall"]);
    let target = format!("{} connect_timeout=2", through(&at).1);
    let started = Instant::now();
    let out = connbench(&["connect", &target, "-n", "2"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let all = String::from_utf8_lossy(&out.stdout).into_owned() + &stderr(&out);
    assert!(all.contains("startup: timed out after 2"), "{all}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );

    // A path that stops forwarding mid-run (the relay process is stopped): the clients
    // wait on the server past the window, and the run ends 5 s later, saying why.
    let (relay, at, _) = spawn_relay(&["--upstream", &upstream]);
    let target = through(&at).1;
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_connbench"))
        .args([
            "load", &target, "-S", "-c", "2", "-T", "2s", "-R", "2000", "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    let pid = relay.pid() as i32;
    // SAFETY: kill(2) on a child process of this test.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let took = started.elapsed();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("still waited on the server 5.00 s after the measured window closed"),
        "{}",
        stderr(&out)
    );
    assert!(
        took < Duration::from_secs(12),
        "the run ended {took:?} after the stall"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["summary"]["transactions"].as_u64().unwrap() > 0, "{v}");
}

/// The faults suite's three strikes on a sandbox of its own (the shared one must keep
/// running for the tests beside this one): PgBouncer restarted, PostgreSQL restarted,
/// backends terminated under a pool. Each is survived and counted, its figures are
/// stored, the report's chart marks the moment, and the restarted servers are stopped
/// with the sandbox.
#[test]
fn restarts_and_terminations_mid_run_are_survived_counted_and_marked() {
    let dir = crate::common::scratch("faults");
    let suite = r#"
name = "faults-mini"
question = "What do a pooler restart, a database restart and dropped connections cost?"
kind = "load"
duration = "7s"
warmup = "500ms"
repetitions = 1
prewarm = false
order = "sequential"
figure = "recovery_s"
[defaults]
workload = "select-only"
clients = 4
threads = 2
rate = 300
interval = "100ms"
fault_at = "2s"
[[cells]]
name = "pgbouncer-restart"
fault = "pgbouncer-restart"
target = "pgbouncer_unix"
[[cells]]
name = "postgres-restart"
fault = "postgres-restart"
target = "unix"
[[cells]]
name = "terminate-backends"
fault = "terminate-backends"
target = "unix"
connection = "pool"
pool_size = 2
"#;
    let file = dir.join("faults.toml");
    std::fs::write(&file, suite).unwrap();
    let store = dir.join("r.sqlite");
    let (file, store) = (file.to_str().unwrap(), store.to_str().unwrap());
    let o = connbench(&["run", file, "--store", store]);
    assert!(o.status.success(), "{}", stderr(&o));
    let sandbox_dir = stderr(&o)
        .lines()
        .find_map(|l| l.strip_prefix("sandbox: started in ").map(str::to_string))
        .expect("the suite started a sandbox of its own");
    assert!(
        !std::path::Path::new(&sandbox_dir).exists(),
        "the sandbox was removed"
    );
    let leftover = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|c| String::from_utf8_lossy(c).contains(&sandbox_dir))
        .count();
    assert_eq!(leftover, 0, "a restarted server outlived its sandbox");

    // What each strike measured of itself (the repetition's detail in the store; the
    // report's JSON carries its kind and moment only).
    let stored = connbench::experiment::store::Store::open(std::path::Path::new(store))
        .unwrap()
        .load_run(1)
        .unwrap()
        .expect("the run was stored");
    let mut reps: Vec<_> = stored.repetitions.iter().collect();
    reps.sort_by_key(|r| r.cell);
    let struck: Vec<serde_json::Value> = reps
        .iter()
        .map(|r| r.detail.as_ref().unwrap()["fault"].clone())
        .collect();
    let o = connbench(&["report", "1", "--store", store, "--json", "-"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let cells = v["runs"][0]["cells"].as_array().unwrap();
    // The connections each cell's load held when struck: a persistent connection per
    // client, or the pool's.
    for (((cell, kind), held), struck) in cells
        .iter()
        .zip(["pgbouncer-restart", "postgres-restart", "terminate-backends"])
        .zip([4u64, 4, 2])
        .zip(&struck)
    {
        let fig = |k: &str| cell["values"][k][0].as_f64();
        let when = |k: &str| {
            struck[k]
                .as_f64()
                .unwrap_or_else(|| panic!("{kind}: no {k}: {struck}"))
        };
        assert_eq!(cell["repetitions"]["succeeded"], 1, "{kind}: {cell}");
        assert!(
            fig("failed_transactions").unwrap() > 0.0,
            "{kind}: a strike fails something: {cell}"
        );
        let took = fig("fault_took_s").unwrap();
        let recovery = fig("recovery_s").expect("throughput came back before the end");
        // Not before throughput came back, judged against the series measured in the
        // same moments: the last interval after the strike in which nothing completed
        // ends no later than the recovery. A recovery that takes a window with any
        // interval in band for one with all of them (`any` for `all` in stats/fault.rs)
        // read 0.4 s here while nothing completed until 2.6 s. The strike's own
        // time is no bound for this: it ends when the readiness probe (a SCRAM login
        // polled every 25 ms) succeeds, which on a loaded machine comes well after the
        // clients are back (0.33 s for a PgBouncer the clients had reconnected to within
        // its first interval, every interval of the half second after it in band).
        let intervals = cell["series"]["intervals"].as_array().unwrap();
        let at = 2.0;
        let last_empty_end = intervals
            .iter()
            .filter(|i| i["end_s"].as_f64().unwrap() > at + 1e-9 && i["transactions"] == 0)
            .map(|i| i["end_s"].as_f64().unwrap())
            .fold(None, |m: Option<f64>, e| Some(m.map_or(e, |m| m.max(e))));
        let around: Vec<_> = intervals
            .iter()
            .filter(|i| (at - 0.3..at + 1.5).contains(&i["start_s"].as_f64().unwrap()))
            .map(|i| i["transactions"].as_u64().unwrap())
            .collect();
        if let Some(end) = last_empty_end {
            assert!(
                at + recovery >= end - 1e-9,
                "{kind}: recovery {recovery} s, but nothing completed until {end} s \
                 (transactions per 0.1 s from {:.1} s: {around:?})",
                at - 0.3
            );
        }
        // Whether or not an interval is empty (a terminate under a pool empties none), not
        // before the strike took effect, measured by the strike: a terminate's query goes
        // out after a login, which a loaded machine can make take a whole interval (then
        // the intervals before it, at the level before the fault, read as its recovery).
        let landed = when("landed_s");
        let landed_end = intervals
            .iter()
            .map(|i| i["end_s"].as_f64().unwrap())
            .find(|&e| e > landed + 1e-9)
            .unwrap();
        assert!(
            at + recovery >= landed_end - 1e-9,
            "{kind}: recovery {recovery} s, but the strike landed at {landed} s, in the interval \
             ending {landed_end} s (transactions per 0.1 s from {:.1} s: {around:?})",
            at - 0.3
        );
        // And every connection the load held was dropped and replaced by the end of the
        // recovery's half second, counted by the clients (a connection is counted with the
        // first transaction it completes): the load cannot be back on connections the
        // strike left alive. A refused reconnect backs off from 20 ms, doubling (a pool,
        // on its thread's next transaction): a client is back within about its last
        // pause of the server answering, inside the half second for these outages.
        let window_end = at + recovery + 0.4;
        let replaced: u64 = intervals
            .iter()
            .filter(|i| {
                i["end_s"].as_f64().unwrap() > landed + 1e-9
                    && i["end_s"].as_f64().unwrap() <= window_end + 1e-9
            })
            .map(|i| i["connects"].as_u64().unwrap())
            .sum();
        let connects: Vec<_> = intervals
            .iter()
            .filter(|i| (at - 0.3..at + 1.5).contains(&i["start_s"].as_f64().unwrap()))
            .map(|i| i["connects"].as_u64().unwrap())
            .collect();
        assert!(
            replaced >= held,
            "{kind}: {replaced} connections replaced from the strike at {landed} s to {window_end:.1} s, \
             of the {held} the load held (connects per 0.1 s from {:.1} s: {connects:?})",
            at - 0.3
        );
        if kind == "terminate-backends" {
            assert!(
                struck["terminated"].as_u64().unwrap() >= held,
                "{kind}: the strike terminated {} backends, of the {held} the load held",
                struck["terminated"]
            );
        }
        // Soon after it: the clients reconnect after their back-off's last pause (20 ms
        // doubling, at most 1 s) and catch up the backlog the outage left (0.02-0.46 s
        // after the server was back with other builds on the 2 cores, up to 0.81 s with
        // two busy loops beside them, where PostgreSQL's restart took 1.9 s, when the
        // clients retried every 20 ms; the back-off adds up to about half the outage).
        // A recovery timed from the start of the measurement instead of the strike, 2 s
        // earlier, fails.
        assert!(
            recovery - took < 2.0,
            "{kind}: recovery {recovery} s, {:.2} s after the strike ended ({took} s)",
            recovery - took
        );
        assert!(
            fig("reconnects_per_s_peak").unwrap() > 0.0,
            "{kind}: clients reconnected"
        );
        assert_eq!(cell["series"]["fault"]["kind"], kind);
        assert_eq!(cell["series"]["fault"]["at_s"], 2.0);
        // The series covers the window without a gap (an interval in which nothing
        // completed is kept, with 0), and the longest stall is its longest run of such
        // intervals, at the series' resolution.
        let intervals = cell["series"]["intervals"].as_array().unwrap();
        let (mut end, mut run, mut longest) = (0.0, 0, 0);
        for i in intervals {
            let start = i["start_s"].as_f64().unwrap();
            assert!((start - end).abs() < 1e-6, "{kind}: a gap at {end} s: {i}");
            end = i["end_s"].as_f64().unwrap();
            run = if i["transactions"] == 0 { run + 1 } else { 0 };
            longest = longest.max(run);
        }
        assert!(end >= 7.0 - 1e-6, "{kind}: the series ends at {end} s");
        let stall = fig("longest_stall_s").unwrap();
        if kind != "terminate-backends" {
            // A restart: no transaction completes while the server is down, and the
            // clients measure when that is in the same moments as the series. A dropped
            // connection fails its client's next transaction, and each refused reconnect
            // is counted (a refused connect, not a failed transaction) as its client backs
            // off: every interval strictly between the first and the last with a failure
            // or a refusal is empty.
            // So is every interval wholly inside the time the restart measured the server
            // down (from the moment the old one's connections were gone, its client
            // backends exited, to the last readiness probe the new one refused; 0.18-0.27
            // s of a quiet machine's restart). The stall is at least the longest such run.
            let failing: Vec<usize> = intervals
                .iter()
                .enumerate()
                .filter(|(_, i)| {
                    i["failures"].as_u64().unwrap() + i["refused_connects"].as_u64().unwrap() > 0
                })
                .map(|(k, _)| k)
                .collect();
            let (first, last) = (failing[0], *failing.last().unwrap());
            let (stopped, refused) = (when("dropped_s"), when("refused_until_s"));
            let down: Vec<usize> = (0..intervals.len())
                .filter(|&k| {
                    let i = &intervals[k];
                    (first < k && k < last)
                        || (i["start_s"].as_f64().unwrap() >= stopped - 1e-9
                            && i["end_s"].as_f64().unwrap() <= refused + 1e-9)
                })
                .collect();
            let failures: Vec<_> = intervals
                .iter()
                .filter(|i| (at - 0.3..at + 1.5).contains(&i["start_s"].as_f64().unwrap()))
                .map(|i| i["failures"].as_u64().unwrap())
                .collect();
            for &k in &down {
                assert_eq!(
                    intervals[k]["transactions"],
                    0,
                    "{kind}: transactions completed at {} s, while the server was down (failures \
                     from interval {first} to {last}, the server measured down {stopped}-{refused} s; \
                     transactions per 0.1 s from {:.1} s: {around:?}, failures: {failures:?})",
                    intervals[k]["start_s"],
                    at - 0.3
                );
            }
            let (mut run, mut longest_down) = (0, 0);
            for k in 0..intervals.len() {
                run = if down.contains(&k) { run + 1 } else { 0 };
                longest_down = longest_down.max(run);
            }
            assert!(
                stall >= 0.1 * longest_down as f64 - 1e-9,
                "{kind}: longest stall {stall} s, but the server was down for {longest_down} whole \
                 intervals (failures from {first} to {last}, measured down {stopped}-{refused} s; \
                 transactions per 0.1 s from {:.1} s: {around:?}, failures: {failures:?})",
                at - 0.3
            );
        }
        if kind == "postgres-restart" {
            // A database restart takes the server down for its shutdown checkpoint and its
            // start (0.28 s refusing logins from the stop signal on a quiet machine, longer
            // loaded), so the clients' reconnects are refused, each client's at 20, 40, 80
            // ms and on: counted as refused connects, not as failed transactions, which are
            // the dropped sessions, one per client.
            let failed = fig("failed_transactions").unwrap();
            let refused_connects: u64 = intervals
                .iter()
                .map(|i| i["refused_connects"].as_u64().unwrap())
                .sum();
            assert!(
                refused_connects > 0 && failed <= 2.0 * held as f64,
                "{kind}: {failed} failed transactions and {refused_connects} refused connects for {held} \
                 clients: no reconnect was refused, or a refused one failed a transaction \
                 (server measured down {stopped:.3}-{refused:.3} s; failures per 0.1 s from {:.1} s: {failures:?})",
                at - 0.3,
                stopped = when("dropped_s"),
                refused = when("refused_until_s"),
                failures = intervals
                    .iter()
                    .filter(|i| (at - 0.3..at + 1.5).contains(&i["start_s"].as_f64().unwrap()))
                    .map(|i| i["failures"].as_u64().unwrap())
                    .collect::<Vec<_>>()
            );
        }
        assert!(
            (stall - 0.1 * longest as f64).abs() < 1e-9,
            "{kind}: longest stall {stall} s against {longest} empty intervals in a row"
        );
    }
    // A restart is timed until the server accepts connections again.
    let pg = &cells[1]["values"];
    assert!(pg["fault_took_s"][0].as_f64().unwrap() > 0.0, "{pg}");
    let html = dir.join("r.html");
    let o = connbench(&["report", "1", "--store", store, "--html", html.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(
        page.matches(r#"class="fault""#).count(),
        3,
        "each chart marks its fault"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// A store whose disk fills up mid-run: the run stops with a message that says so and
/// what to do, and every repetition saved before it is still there. The disk is a small
/// tmpfs, which needs root to mount.
#[test]
#[ignore = "needs root (scripts/test.sh runs it as root)"]
fn a_full_disk_stops_the_run_with_a_message_and_keeps_what_was_saved() {
    let dir = crate::common::scratch("diskfull");
    let disk = dir.join("disk");
    std::fs::create_dir_all(&disk).unwrap();
    let mount = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(&disk)
        .status()
        .unwrap();
    assert!(mount.success(), "mount tmpfs");
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(disk.clone());
    let suite = r#"
name = "fill"
question = "How far does a small disk go?"
kind = "connect"
repetitions = 2000
prewarm = false
[defaults]
samples = 2
[axes]
target = ["unix_trust"]
"#;
    std::fs::write(dir.join("s.toml"), suite).unwrap();
    let store = disk.join("r.sqlite");
    let mut args = vec![
        "run".to_string(),
        dir.join("s.toml").display().to_string(),
        "--store".to_string(),
        store.display().to_string(),
    ];
    args.extend(crate::common::map(&["unix_trust"]));
    let o = crate::common::run(&args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("the disk holding the results store is full"),
        "{err}"
    );
    assert!(err.contains("everything saved before this is kept"), "{err}");
    // Room again: the store opens and holds the repetitions saved before the disk filled.
    let saved = {
        let _ = std::fs::remove_file(disk.join("r.sqlite-shm"));
        let copy = dir.join("copy.sqlite");
        for ext in ["", "-wal"] {
            let from = std::path::PathBuf::from(format!("{}{ext}", store.display()));
            if from.exists() {
                std::fs::copy(&from, format!("{}{ext}", copy.display())).unwrap();
            }
        }
        let s = connbench::experiment::store::Store::open(&copy).unwrap();
        s.list_runs().unwrap()[0].repetitions_saved
    };
    assert!(
        saved >= 10,
        "the repetitions before the disk filled are kept: {saved}"
    );
    drop(_unmount);
    std::fs::remove_dir_all(dir).unwrap();
}

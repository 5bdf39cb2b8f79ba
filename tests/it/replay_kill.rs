//! A recorded MySQL `KILL QUERY` replayed: PyMySQL (tests/apps/pymysql_kill_slow.py) runs
//! `SELECT SLEEP(5)` on one connection and stops it from another half a second later with
//! `KILL QUERY <its connection id>`. Replayed, the KILL names the replayed connection's id
//! (before, the recorded one: 1094 "unknown thread id" and the whole 5 s again), so the
//! slow statement ends within 10% of its recorded time, fails as it failed then (1317),
//! and the KILL counts as replayed; the same through `--pool 2`.

use serde_json::Value;

use crate::common::{
    app, apps_python, connbench, scratch, start_recorder, stderr, stop_recorder, OwnMariadb,
};

/// A sandbox with MariaDB of this module's own.
static MARIA: OwnMariadb = OwnMariadb::new();

/// The replay's summary of `trace` on the sandbox's MariaDB, with `extra` flags.
fn replay(trace: &std::path::Path, extra: &[&str]) -> Value {
    let target = MARIA.info().target("mariadb_tcp").unwrap().conninfo.clone();
    let mut args = vec!["replay", trace.to_str().unwrap(), "--target", &target, "--json"];
    args.extend(extra);
    let o = connbench(&args);
    assert!(o.status.success(), "connbench replay: {}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    v["summary"].clone()
}

#[test]
fn a_recorded_kill_query_stops_the_replayed_connections_query() {
    let Some(py) = apps_python() else { return };
    let m = MARIA.info().mariadb.as_ref().unwrap();
    let dir = scratch("replay-kill");
    let out = dir.join("kill.trace.gz");
    let (child, port) = start_recorder(&format!("127.0.0.1:{}", m.port), &["--engine", "mysql"], &out);
    let pw = MARIA.password();
    let done = app(
        &py,
        "pymysql_kill_slow.py",
        &["127.0.0.1", &port, "connbench", &pw, "connbench"],
    );
    stop_recorder(child);
    assert_eq!(done["killed"], true, "{done}");
    let recorded_ms = done["slow_ms"].as_f64().unwrap();
    assert!(
        recorded_ms < 4_000.0,
        "the KILL stopped the recorded query: {done}"
    );

    for extra in [&[][..], &["--pool", "2"][..]] {
        let s = replay(&out, extra);
        assert_eq!(
            (
                s["cancels"]["recorded"].as_u64(),
                s["cancels"]["replayed"].as_u64()
            ),
            (Some(1), Some(1)),
            "{extra:?}: {:#}",
            s["cancels"]
        );
        let f = &s["fidelity"];
        assert_eq!(
            (
                f["failed_now_not_then"].as_u64(),
                f["failed_then_not_now"].as_u64()
            ),
            (Some(0), Some(0)),
            "{extra:?}: the KILL and the stopped query fail as recorded: {f:#}"
        );
        let slow = s["statements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["text"].as_str().unwrap().contains("SLEEP"))
            .unwrap_or_else(|| panic!("the slow statement: {s:#}"));
        let (now, then) = (
            slow["now"]["max_ms"].as_f64().unwrap(),
            slow["recorded"]["max_ms"].as_f64().unwrap(),
        );
        eprintln!("{extra:?}: the killed SLEEP took {now:.1} ms replayed, {then:.1} ms recorded");
        assert!(
            (now / then - 1.0).abs() <= 0.10,
            "{extra:?}: now {now:.1} ms, recorded {then:.1} ms"
        );
    }
}

//! Housekeeping on real drivers: an asyncpg pool that resets its connection on every
//! release (tests/apps/asyncpg_pool_orders.py), recorded through `connbench record`;
//! `connbench trace` names the reset with its round trips, one per application
//! transaction, and predicts what the application saves without it at +50 ms;
//! `connbench replay --without housekeeping --rtt 50ms` measures that saving (the replay's
//! elapsed time with the resets and without them, both 50 ms away, in one test) and it
//! agrees with the prediction within 10%.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::{
    connbench, conninfo, sandbox, scratch, skip, start_recorder, stderr, stdout, stop_recorder, through_port,
};

/// Orders the application takes: a transaction and a reset each, 4 round trips, 200 ms
/// at +50 ms; the replays take about 4 and 3 seconds.
const ORDERS: u64 = 20;

/// The venv's Python with the applications' drivers; `None` (the test skipped) outside
/// scripts/test.sh, which installs them and sets CONNBENCH_APPS_PYTHON.
fn python() -> Option<PathBuf> {
    let p = std::env::var_os("CONNBENCH_APPS_PYTHON").map(PathBuf::from);
    if p.is_none() {
        skip(
            false,
            "CONNBENCH_APPS_PYTHON unset: scripts/test.sh installs the drivers and sets it",
        );
    }
    p
}

/// `tests/apps/NAME` run with `args`: its one JSON line.
fn app(python: &Path, name: &str, args: &[&str]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/apps")
        .join(name);
    let o = Command::new(python).arg(&script).args(args).output().unwrap();
    assert!(o.status.success(), "{name} {args:?}: {}", stderr(&o));
    serde_json::from_str(stdout(&o).trim()).unwrap_or_else(|e| panic!("{name}: {e}: {}", stdout(&o)))
}

/// `connbench ARGS` that must succeed, its JSON.
fn json(args: &[&str]) -> Value {
    let o = connbench(args);
    assert!(o.status.success(), "connbench {args:?}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)))
}

#[test]
fn an_asyncpg_pools_reset_is_named_priced_and_its_saving_measured() {
    let Some(py) = python() else { return };
    let direct = conninfo("tcp");
    app(&py, "asyncpg_pool_orders.py", &[&direct, "0", "--setup"]);
    let dir = scratch("apps-housekeeping");
    let out = dir.join("orders.trace.gz");
    let upstream = format!("127.0.0.1:{}", sandbox().postgres_port);
    let (child, port) = start_recorder(&upstream, &["--engine", "postgres"], &out);
    let through = through_port(&port, "connbench", "disable");
    let done = app(&py, "asyncpg_pool_orders.py", &[&through, &ORDERS.to_string()]);
    stop_recorder(child);
    assert_eq!(done["committed"], ORDERS);
    let trace = out.to_str().unwrap();

    // trace: the reset named, one round trip an application transaction.
    let v = json(&["trace", trace, "--json", "--rtt", "50ms"]);
    let h = &v["housekeeping"];
    let tally = &h["tally"];
    assert_eq!(tally["application_transactions"], ORDERS, "{h:#}");
    let rows = tally["rows"].as_array().unwrap();
    let reset = rows
        .iter()
        .find(|r| r["kind"] == "reset")
        .unwrap_or_else(|| panic!("no reset: {h:#}"));
    assert!(
        reset["text"]
            .as_str()
            .unwrap()
            .starts_with("SELECT pg_advisory_unlock_all()"),
        "{reset:#}"
    );
    assert_eq!(
        (&reset["requests"], &reset["round_trips"]),
        (&ORDERS.into(), &ORDERS.into()),
        "{reset:#}"
    );
    assert_eq!(reset["round_trips_per_transaction"], 1.0, "{reset:#}");
    assert_eq!(reset["left_out_by_default"], true, "{reset:#}");
    let fp = reset["fingerprint"].as_str().unwrap();
    let text = connbench(&["trace", trace, "--rtt", "50ms"]);
    let text = stdout(&text);
    assert!(text.contains("reset on release") && text.contains(fp), "{text}");
    let at50 = h["without"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["scenario"] == "+50 ms")
        .unwrap_or_else(|| panic!("no +50 ms: {h:#}"));
    assert_eq!(at50["requests"], ORDERS, "{at50:#}");
    let predicted = at50["saved_ms"].as_f64().unwrap();

    // replay: with the resets and without them, both 50 ms away.
    let target = conninfo("tcp");
    let replay = |extra: &[&str]| -> Value {
        let mut a = vec!["replay", trace, "--target", &target, "--rtt", "50ms", "--json"];
        a.extend(extra);
        json(&a)["summary"].clone()
    };
    let with = replay(&[]);
    let without = replay(&["--without", "housekeeping"]);
    for s in [&with, &without] {
        assert_eq!(s["replayed"]["requests"], s["recorded"]["requests"], "{s:#}");
        assert_eq!(s["fidelity"]["requests_not_sent"], 0, "{s:#}");
    }
    let left = &without["left_out"];
    assert_eq!(left["requests"], ORDERS, "{left:#}");
    assert_eq!(left["rows"][0]["fingerprint"], fp, "{left:#}");
    assert_eq!(
        with["replayed"]["requests"].as_u64().unwrap() - without["replayed"]["requests"].as_u64().unwrap(),
        ORDERS
    );
    assert_eq!(without["replayed"]["transactions"], ORDERS, "{without:#}");
    assert!(with.get("left_out").is_none(), "{with:#}");
    let measured = (with["elapsed_s"].as_f64().unwrap() - without["elapsed_s"].as_f64().unwrap()) * 1e3;
    eprintln!(
        "without housekeeping at +50 ms: predicted saving {predicted:.1} ms, measured {measured:.1} ms"
    );
    assert!(
        (measured / predicted - 1.0).abs() <= 0.10,
        "replay without housekeeping saved {measured:.1} ms at +50 ms, trace predicted {predicted:.1} ms"
    );
}

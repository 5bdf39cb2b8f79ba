//! Pipelined applications, recorded and replayed: each Execute of a group a call of its
//! own statement (in `trace`'s statement table, its shapes and `replay`'s report), and
//! groups the client sent before the previous answer replayed before it, so a replay at
//! distance pays the round trips the application paid, no more.

use std::path::Path;

use serde_json::Value;

use crate::apps::{at_port, pg_database, shape_where, trace_json, within_the_prediction};
use crate::common::{
    app, apps_python, connbench, conninfo, relay_50ms, scratch, start_recorder, stderr, stop_recorder,
    with_dbname,
};

/// `connbench replay TRACE --rtt 50ms --json` on the sandbox's cbapps.
fn replay_far(trace: &Path) -> (Value, String) {
    crate::apps::replay_far(trace, &with_dbname(&conninfo("tcp"), "cbapps"))
}

/// The calls of the statement whose text starts with `head` in trace's JSON.
fn calls(v: &Value, head: &str) -> u64 {
    v["profile"]["statements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["text"].as_str().is_some_and(|t| t.starts_with(head)))
        .and_then(|s| s["calls"].as_u64())
        .unwrap_or_else(|| panic!("no statement {head}: {v:#}"))
}

/// psycopg 3 in pipeline mode (tests/apps/psycopg_pipeline_orders.py): an order is
/// BEGIN, five INSERTs and an UPDATE in one group before its Sync, and COMMIT; psycopg
/// sends a Flush after each Sync and waits for the answers. `trace` counts every INSERT
/// and UPDATE the application executed (before: one call a group, 40 INSERTs for 200),
/// the order's shape lists each and takes three round trips (before, the groups behind
/// a Flush counted as pipelined: one), `replay --rtt 50ms` measures the order within 5%
/// of the prediction, and the application's own order through a 50 ms relay is within
/// 10% of it.
#[test]
fn psycopg_pipeline_orders_are_counted_per_execute_and_predicted() {
    let Some(py) = apps_python() else { return };
    let db = pg_database();
    let run = |conninfo: &str, batches: &str, extra: &[&str]| {
        let mut a = vec![conninfo, batches, "4"];
        a.extend(extra);
        app(&py, "psycopg_pipeline_orders.py", &a)
    };
    run(&db, "0", &["--setup"]);
    let dir = scratch("apps-pipeline");
    let out = dir.join("orders.trace.gz");
    let upstream = format!("127.0.0.1:{}", crate::common::sandbox().postgres_port);
    let (child, port) = start_recorder(&upstream, &[], &out);
    let done = run(&at_port(&db, &port), "10", &[]);
    stop_recorder(child);
    assert_eq!(done["orders"], 40);

    let v = trace_json(&out);
    assert_eq!(
        calls(&v, "INSERT INTO cb_app_lines"),
        done["executed"]["insert"].as_u64().unwrap()
    );
    assert_eq!(
        calls(&v, "UPDATE cb_app_customers"),
        done["executed"]["update"].as_u64().unwrap()
    );
    let (order, predicted) = shape_where(&v, |s| s["statements"].as_array().is_some_and(|l| l.len() == 8));
    assert_eq!(order["count"], 40, "{order:#}");
    assert_eq!(order["round_trips"], 3.0, "BEGIN, the group, COMMIT: {order:#}");

    let (r, err) = replay_far(&out);
    let row = r["summary"]["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["id"] == order["id"])
        .unwrap_or_else(|| panic!("the order's shape in the replay: {r:#}"))
        .clone();
    assert_eq!(
        (row["count_now"].as_u64(), row["count_recorded"].as_u64()),
        (Some(40), Some(40))
    );
    within_the_prediction(&row, &err, "psycopg pipeline");
    let insert = r["summary"]["statements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("INSERT INTO cb_app_lines"))
        })
        .unwrap_or_else(|| panic!("the INSERT in the replay: {r:#}"))
        .clone();
    assert_eq!(
        (insert["calls"].as_u64(), insert["calls_recorded"].as_u64()),
        (Some(200), Some(200)),
        "{insert:#}"
    );

    let (relay, port) = relay_50ms(&upstream);
    let far = run(&at_port(&db, &port), "3", &[]);
    drop(relay);
    let own = far["order_mean_ms"].as_f64().unwrap();
    eprintln!(
        "psycopg pipeline: the application's own order 50 ms away {own:.1} ms, predicted {predicted:.1} ms"
    );
    assert!(
        (own / predicted - 1.0).abs() <= 0.10,
        "own {own:.1} ms, predicted {predicted:.1} ms"
    );
}

/// Groups sent back to back before any answer (`load`'s `\syncpipeline`: three
/// autocommit transactions in one pipeline, the second of two statements), recorded:
/// `trace` counts the pipelined requests and gives each transaction its one round trip
/// (its answer still comes a round trip after its send); the replay at +50 ms sends them
/// pipelined, so the session's twenty pipelines take about twenty round trips, where
/// one request at a time needs sixty (3 s): the bound lies between what each would take
/// at the least.
#[test]
fn a_pipeline_of_syncs_is_replayed_pipelined() {
    let dir = scratch("apps-syncpipeline");
    let script = dir.join("pipe.sql");
    std::fs::write(
        &script,
        "\\set c random(1, 100)\n\\startpipeline\nSELECT :c::int + 1;\n\\syncpipeline\n\
         SELECT :c::int + 2;\nSELECT :c::int + 3;\n\\syncpipeline\nSELECT :c::int + 4;\n\\endpipeline\n",
    )
    .unwrap();
    let out = dir.join("pipe.trace.gz");
    let upstream = format!("127.0.0.1:{}", crate::common::sandbox().postgres_port);
    let (child, port) = start_recorder(&upstream, &[], &out);
    let through = at_port(&pg_database(), &port);
    let o = connbench(&[
        "load",
        &through,
        "-f",
        script.to_str().unwrap(),
        "-M",
        "extended",
        "-c",
        "1",
        "-t",
        "20",
    ]);
    assert!(o.status.success(), "connbench load: {}", stderr(&o));
    stop_recorder(child);

    let v = trace_json(&out);
    assert_eq!(
        v["profile"]["requests"]["pipelined"], 40,
        "{:#}",
        v["profile"]["requests"]
    );
    assert_eq!(calls(&v, "SELECT $1::int + $2"), 80, "four executions a pipeline");
    let shapes = v["profile"]["shapes"].as_array().unwrap();
    assert!(
        shapes.iter().all(|s| s["round_trips"] == 1.0),
        "each transaction takes its answer's round trip: {shapes:#?}"
    );

    let (r, err) = replay_far(&out);
    let s = &r["summary"];
    assert_eq!(
        s["replayed"]["transactions"], s["recorded"]["transactions"],
        "{s:#}"
    );
    for row in s["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["count_recorded"].as_u64() >= Some(10))
    {
        within_the_prediction(row, &err, "syncpipeline");
    }
    let elapsed = s["elapsed_s"].as_f64().unwrap();
    // The pipelines' 20 round trips and the connects' (4 each) at the least; one request
    // at a time, 60 round trips for the pipelines alone.
    assert!(
        (1.0..2.0).contains(&elapsed),
        "twenty pipelines 50 ms away took {elapsed:.2} s: 1.0 s pipelined at the least, 3.0 s one at a time"
    );
}

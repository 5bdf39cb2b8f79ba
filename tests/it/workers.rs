//! Load from many machines, simulated on this one: three worker processes of one run
//! against the sandbox, the sandbox's PostgreSQL as the results store, then the merged
//! report; a worker left alone fails the run naming the one that never came; and the
//! Kubernetes Job that runs such workers passes Kubernetes' own schemas, offline.

use std::process::{Command, Stdio};

use connbench::experiment::store::{deserialize_histogram, Store};

use crate::common::{check_schema, connbench, conninfo, dataset, stderr, stdout, TempFile};
use crate::load::sql;

/// A PostgreSQL results store of its own in the shared sandbox: a new database.
fn postgres_store(name: &str) -> String {
    let db = format!("cbt_{name}_{}", std::process::id());
    sql(&format!("DROP DATABASE IF EXISTS {db}"));
    sql(&format!("CREATE DATABASE {db}"));
    conninfo("unix").replace("dbname=connbench", &format!("dbname={db}"))
}

#[test]
fn three_workers_merge_exactly_and_start_together() {
    dataset();
    let store = postgres_store("workers");
    let target = conninfo("unix");
    // Under a rate, below saturation: the test measures merging, not the machine, and
    // leaves the cores to the tests beside it.
    let workers: Vec<_> = (0..3)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_connbench"))
                .args(["load", &target, "-S", "-c", "6", "-T", "2", "-R", "900", "--json"])
                .args([
                    "--workers",
                    "3",
                    "--worker-index",
                    &i.to_string(),
                    "--run",
                    "merge-test",
                ])
                .args(["--store", &store])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut counts = Vec::new();
    for (i, w) in workers.into_iter().enumerate() {
        let o = w.wait_with_output().unwrap();
        assert!(o.status.success(), "worker {i}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("worker {i} of 3: 2 clients")),
            "{}",
            stderr(&o)
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["settings"]["clients"], 2, "each worker runs its share");
        assert!((v["settings"]["rate_tps"].as_f64().unwrap() - 300.0).abs() < 1e-9);
        counts.push(v["summary"]["transactions"].as_u64().unwrap());
    }
    assert!(
        counts.iter().all(|&n| n > 300),
        "every worker measured: {counts:?}"
    );

    let o = connbench(&["report", "merge-test", "--store", &store, "--json", "-"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    check_schema("workers", &v);
    let run = &v["runs"][0];
    assert_eq!(run["status"], "done");
    assert_eq!(
        run["transactions"].as_u64().unwrap(),
        counts.iter().sum::<u64>(),
        "the merged count is the workers' sum"
    );
    assert_eq!(run["load"]["settings"]["clients"], 6, "the whole run's clients");
    let skew = run["start_skew_ms"].as_f64().unwrap();
    assert!(skew <= 20.0, "the workers started {skew} ms apart");
    assert!(run["missing"].as_array().unwrap().is_empty());

    // Every sample in one place: each worker's latencies, recorded one by one into a
    // single fresh histogram (not added histogram to histogram, as the merge does).
    let s = Store::open_location(&store).unwrap();
    let id = s.resolve_run("merge-test").unwrap();
    let (rows, intervals) = s.load_workers(id).unwrap();
    assert_eq!(rows.len(), 3);
    let mut all = connbench::load::record::latency_histogram();
    for r in &rows {
        let h = deserialize_histogram(r.latency_histogram.as_ref().unwrap()).unwrap();
        for v in h.iter_recorded() {
            for _ in 0..v.count_at_value() {
                all.record(v.value_iterated_to()).unwrap();
            }
        }
    }
    assert_eq!(all.len(), counts.iter().sum::<u64>());
    for (q, key) in [(0.5, "latency_p50_ms"), (0.99, "latency_p99_ms")] {
        let merged_ns = run[key].as_f64().unwrap() * 1e6;
        let one_place = all.value_at_quantile(q) as f64;
        assert!(
            (merged_ns - one_place).abs() < 1.0,
            "{key}: merged {merged_ns} ns, all samples {one_place} ns"
        );
    }
    // Intervals are saved per worker and merged interval by interval.
    let series = run["load"]["series"].as_array().unwrap();
    let by_interval: u64 = intervals.iter().map(|i| i.transactions as u64).sum();
    assert_eq!(by_interval, counts.iter().sum::<u64>());
    assert_eq!(
        series
            .iter()
            .map(|s| s["transactions"].as_u64().unwrap())
            .sum::<u64>(),
        by_interval
    );

    // Run names work as numbers do, and a finished run cannot be joined again.
    let o = connbench(&["runs", "show", "merge-test", "--store", &store]);
    assert!(
        stdout(&o).contains("load from 3 workers · status done"),
        "{}",
        stdout(&o)
    );
    let o = connbench(&[
        "load",
        &target,
        "-S",
        "-c",
        "6",
        "-T",
        "1",
        "--workers",
        "3",
        "--worker-index",
        "0",
        "--run",
        "merge-test",
        "--store",
        &store,
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is already over (done)"), "{}", stderr(&o));
}

#[test]
fn a_worker_that_never_arrives_fails_the_run_by_name() {
    dataset();
    let store = postgres_store("alone");
    let o = connbench(&[
        "load",
        &conninfo("unix"),
        "-S",
        "-c",
        "2",
        "-T",
        "1",
        "--workers",
        "2",
        "--worker-index",
        "0",
        "--run",
        "alone",
        "--worker-timeout",
        "1s",
        "--store",
        &store,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("worker 1 of run \"alone\" did not arrive within 1.00 s (ready: 1 of 2)"),
        "{}",
        stderr(&o)
    );
    let o = connbench(&["runs", "show", "alone", "--store", &store]);
    let text = stdout(&o);
    assert!(text.contains("status failed"), "{text}");
    assert!(
        text.contains("worker 0 is left out of the merged figures: failed: worker 1"),
        "{text}"
    );
    assert!(
        text.contains("worker 1 is left out of the merged figures: never registered"),
        "{text}"
    );
}

/// The sandbox's real SCRAM password, inline in the target and in the store's conninfo,
/// reaches neither the store nor any output.
#[test]
fn inline_passwords_never_reach_the_postgres_store_or_the_output() {
    dataset();
    let info = crate::common::sandbox();
    let passfile = std::fs::read_to_string(&info.passfile).unwrap();
    let secret = passfile.trim().rsplit(':').next().unwrap().to_string();
    assert!(secret.len() >= 16, "a real secret to look for");
    let inline = |c: String| {
        c.split_whitespace()
            .filter(|kv| !kv.starts_with("passfile="))
            .collect::<Vec<_>>()
            .join(" ")
            + &format!(" password={secret}")
    };
    let store = inline(postgres_store("secret"));
    let target = inline(conninfo("unix"));
    let mut outputs = Vec::new();
    for args in [
        vec![
            "load",
            &target,
            "-S",
            "-c",
            "1",
            "-T",
            "1",
            "-R",
            "100",
            "--workers",
            "1",
            "--worker-index",
            "0",
            "--run",
            "secret",
            "--store",
            &store,
        ],
        vec!["runs", "show", "secret", "--store", &store],
        vec!["report", "secret", "--store", &store, "--json", "-"],
        vec!["runs", "list", "--store", &store],
        vec!["report", "no-such-run", "--store", &store],
    ] {
        let o = connbench(&args);
        outputs.push(stdout(&o) + &stderr(&o));
    }
    assert!(outputs[0].contains("worker 0 of 1: saved"), "{}", outputs[0]);
    assert!(outputs[4].contains("no run no-such-run"), "{}", outputs[4]);
    for out in &outputs {
        assert!(!out.contains(&secret), "the password was printed: {out}");
    }
    let s = Store::open_location(&store).unwrap();
    let rows = s
        .db()
        .query(
            "SELECT suite_json || environment_json FROM runs \
             UNION ALL SELECT coalesce(error, '') || coalesce(result_json, '') FROM workers",
            &[],
        )
        .unwrap();
    assert_eq!(rows.len(), 2, "the run and its worker are saved");
    for r in rows {
        let text = r[0].text().unwrap_or_default();
        assert!(!text.contains(&secret), "the password was stored: {text}");
    }
}

#[test]
fn the_kubernetes_job_passes_strict_validation_offline() {
    let o = connbench(&[
        "kubernetes",
        "job",
        "--workers",
        "4",
        "--image",
        "registry.example/connbench:0.1",
        "--target",
        "host=db.example port=5432 dbname=app user=bench",
        "--target-secret",
        "cb-db",
        "--store",
        "postgres://cb@results.example/connbench",
        "--store-secret",
        "cb-store",
        "--run",
        "exp2",
        "--cpu",
        "2",
        "--",
        "-S",
        "-M",
        "prepared",
        "-c",
        "256",
        "-j",
        "4",
        "-T",
        "300",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let manifest = stdout(&o);
    for want in [
        "completionMode: \"Indexed\"",
        "completions: 4",
        "parallelism: 4",
        "name: \"CONNBENCH_STORE_PASSWORD\"",
        "name: \"cb-store\"",
    ] {
        assert!(manifest.contains(want), "{want} missing:\n{manifest}");
    }
    let file = TempFile::new("job.yaml", &manifest);
    // PyPI's kubernetes-validate, which scripts/test.sh installs; strict mode rejects any
    // property Kubernetes does not know. 1.32 is the kubectl this machine has.
    let validator = std::env::var("KUBERNETES_VALIDATE").unwrap_or_else(|_| "kubernetes-validate".into());
    let v = Command::new(&validator)
        .args(["--strict", "-k", "1.32.0"])
        .arg(file.path())
        .output()
        .unwrap_or_else(|e| panic!("{validator}: {e}; scripts/test.sh installs it (pip, in target/tools)"));
    assert!(
        v.status.success(),
        "{}{}",
        String::from_utf8_lossy(&v.stdout),
        String::from_utf8_lossy(&v.stderr)
    );
    assert!(
        String::from_utf8_lossy(&v.stdout).contains("passed"),
        "{}",
        String::from_utf8_lossy(&v.stdout)
    );
}

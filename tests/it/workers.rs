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
    postgres_store_at("unix", name)
}

/// The same, reached through the sandbox target `via` (`tls`: verify-full with its CA).
fn postgres_store_at(via: &str, name: &str) -> String {
    let db = format!("cbt_{name}_{}", std::process::id());
    sql(&format!("DROP DATABASE IF EXISTS {db}"));
    sql(&format!("CREATE DATABASE {db}"));
    conninfo(via).replace("dbname=connbench", &format!("dbname={db}"))
}

/// Three workers meet in a store they reach over TLS (verify-full, as on a shared
/// network), and their run merges exactly, in every report.
#[test]
fn three_workers_merge_exactly_and_start_together() {
    dataset();
    let store = postgres_store_at("tls", "workers");
    assert!(store.contains("sslmode=verify-full"), "{store}");
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
    let mut all = connbench::load::measurements::latency_histogram();
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

    // The HTML page (per-worker rows, the merged curve beside each worker's) and CSV.
    let out = crate::common::scratch("merged-report");
    let (html, csv) = (out.join("r.html"), out.join("csv"));
    let o = connbench(&[
        "report",
        "merge-test",
        "--store",
        &store,
        "--html",
        html.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    for want in [
        "load from 3 workers",
        "<td>2</td>",
        ">merged<",
        ">worker 2<",
        "<svg",
    ] {
        assert!(page.contains(want), "{want} missing from the page");
    }
    // The merged curve is drawn in the palette's first colour, #0072b2.
    crate::report::chromium_shows(&html, &out, [0x00, 0x72, 0xb2], "merged curve");
    let table = std::fs::read_to_string(csv.join("workers.csv")).unwrap();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines.len(),
        1 + 3 + 1,
        "a header, three workers, the merged row: {table}"
    );
    let merged_row: Vec<&str> = lines[4].split(',').collect();
    assert_eq!(merged_row[2], "", "the merged row has no worker: {table}");
    assert_eq!(merged_row[5], counts.iter().sum::<u64>().to_string(), "{table}");

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

/// Three workers of two clients at a database that takes five connections (so each
/// worker connects one at least and runs): the client refused in a worker's ramp, and
/// again in its run, is carried through the store,
/// so the merged run reports them as one process would: the ramps summed and ending at
/// the last client connected anywhere, the refused attempts summed by kind and interval,
/// in JSON and in text. A build whose workers save no ramp nor refusals merges a ramp of
/// no connections and no refused attempt: it fails here.
#[test]
fn refused_connects_and_the_ramp_merge_across_workers() {
    let (target, script) = crate::many::limited_target("workers_ramp", 5);
    let store = postgres_store("ramp");
    let workers: Vec<_> = (0..3)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_connbench"))
                .args([
                    "load",
                    &target,
                    "-f",
                    script.path(),
                    "-c",
                    "6",
                    "-T",
                    "2",
                    "--json",
                ])
                .args(["--workers", "3", "--worker-index", &i.to_string()])
                .args(["--run", "ramp-test", "--store", &store])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut own = Vec::new();
    for (i, w) in workers.into_iter().enumerate() {
        let o = w.wait_with_output().unwrap();
        assert!(o.status.success(), "worker {i}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        own.push(v["summary"]["connections"].clone());
    }
    let sum = |f: &dyn Fn(&serde_json::Value) -> &serde_json::Value| -> u64 {
        own.iter().map(|c| f(c).as_u64().unwrap()).sum()
    };
    let connected = sum(&|c| &c["ramp"]["connected"]);
    let ramp_failed = sum(&|c| &c["ramp"]["failed_attempts"]);
    let refused = sum(&|c| &c["failed_attempts"]);
    assert!(connected <= 5, "the database takes five: {own:?}");
    // A client at least was refused in the ramp, and tried again in the run.
    assert!(ramp_failed >= 1 && refused >= 1, "{own:?}");

    let o = connbench(&["report", "ramp-test", "--store", &store, "--json", "-"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    check_schema("workers", &v);
    let load = &v["runs"][0]["load"];
    check_schema("load", load);
    let c = &load["summary"]["connections"];
    let ramp = &c["ramp"];
    assert_eq!(ramp["wanted"], 6, "{ramp}");
    assert_eq!(ramp["connected"].as_u64(), Some(connected), "{ramp}");
    assert_eq!(ramp["failed_attempts"].as_u64(), Some(ramp_failed), "{ramp}");
    assert_eq!(ramp["failures"][0]["kind"], "53300", "{ramp}");
    assert_eq!(ramp["failures"][0]["count"].as_u64(), Some(ramp_failed), "{ramp}");
    assert_eq!(c["failed_attempts"].as_u64(), Some(refused), "{c}");
    assert_eq!(c["refused"][0]["kind"], "53300", "{c}");
    let per_interval: u64 = load["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["refused_connects"].as_u64().unwrap())
        .sum();
    assert_eq!(per_interval, refused, "{}", load["series"]);
    // The merged ramp ends at the last connection of any worker: never shorter than a
    // worker's own (within the clock offsets' error, microseconds here).
    let took = ramp["took_s"].as_f64().unwrap();
    for w in &own {
        let mine = w["ramp"]["took_s"].as_f64().unwrap();
        assert!(
            took >= mine - 1e-3,
            "merged {took} s, a worker's {mine} s: {ramp}"
        );
    }
    assert_eq!(load["summary"]["failed_transactions"], 0);

    let o = connbench(&["runs", "show", "ramp-test", "--store", &store]);
    let text = stdout(&o);
    for said in [
        format!("connect ramp  {connected} of 6 connected in"),
        format!("; {ramp_failed} failed attempts (53300 ×{ramp_failed})"),
        format!("refused       {refused} connect attempts during the measurement"),
    ] {
        assert!(text.contains(&said), "{said:?} not in:\n{text}");
    }
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

/// The PostgreSQL store over TLS, as targets have it: verify-full against the sandbox's
/// CA works and the server sees the store's session encrypted; a CA that did not sign
/// the server's certificate is refused with the reason, before anything is saved.
#[test]
fn the_postgres_store_speaks_tls_with_libpq_s_sslmode() {
    let store = postgres_store("tls");
    let db = store
        .split_whitespace()
        .find(|kv| kv.starts_with("dbname="))
        .unwrap()
        .to_string();
    let tls = conninfo("tls");
    assert!(tls.contains("sslmode=verify-full"), "{tls}");
    let tls_store = tls.replace("dbname=connbench", &db);
    let s = Store::open_location(&tls_store).unwrap();
    assert!(s.list_runs().unwrap().is_empty());
    let ssl = sql(
        "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
         WHERE a.application_name = 'connbench-store'",
    );
    assert!(
        ssl.iter().any(|v| v == "t"),
        "the store's session is not encrypted: {ssl:?}"
    );
    drop(s);
    // The same server, a CA of another sandbox's making: a self-made one here.
    let wrong_ca = TempFile::new("wrong-ca.crt", &rcgen_free_ca());
    let bad = tls_store
        .split_whitespace()
        .map(|kv| {
            if kv.starts_with("sslrootcert=") {
                format!("sslrootcert={}", wrong_ca.path())
            } else {
                kv.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    let o = connbench(&["runs", "list", "--store", &bad]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("results store")
            && stderr(&o).contains("TLS handshake")
            && stderr(&o).to_lowercase().contains("certificate"),
        "{}",
        stderr(&o)
    );
}

/// A CA certificate that signed nothing the sandbox serves.
fn rcgen_free_ca() -> String {
    let ca = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "/dev/null",
            "-subj",
            "/CN=not the sandbox",
            "-days",
            "1",
        ])
        .output()
        .expect("openssl");
    assert!(ca.status.success(), "{}", String::from_utf8_lossy(&ca.stderr));
    String::from_utf8(ca.stdout).unwrap()
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
        "--metrics-port",
        "9187",
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
        "runAsNonRoot: true",
        "readOnlyRootFilesystem: true",
        "mountPath: \"/tmp\"",
        "memory: \"256Mi\"",
        "prometheus.io/scrape: \"true\"",
        "containerPort: 9187",
        "- \":9187\"",
    ] {
        assert!(manifest.contains(want), "{want} missing:\n{manifest}");
    }
    validate_offline("job.yaml", &manifest, 1);
}

/// Checks `manifest` (`documents` YAML documents) with PyPI's kubernetes-validate, which
/// scripts/test.sh installs; strict mode rejects any property Kubernetes does not know.
/// 1.32 is the kubectl this machine has.
fn validate_offline(tag: &str, manifest: &str, documents: usize) {
    let file = TempFile::new(tag, manifest);
    let validator = std::env::var("KUBERNETES_VALIDATE").unwrap_or_else(|_| "kubernetes-validate".into());
    let v = Command::new(&validator)
        .args(["--strict", "-k", "1.32.0"])
        .arg(file.path())
        .output()
        .unwrap_or_else(|e| panic!("{validator}: {e}; scripts/test.sh installs it (pip, in target/tools)"));
    let out = String::from_utf8_lossy(&v.stdout).into_owned();
    assert!(
        v.status.success(),
        "{out}{}\n{manifest}",
        String::from_utf8_lossy(&v.stderr)
    );
    assert_eq!(out.matches("passed").count(), documents, "{out}");
}

/// The Job of experiment 1 in the user's cluster: the guide's suite file in a ConfigMap,
/// connbench beside the user's sidecar (a native sidecar sharing the socket's volume),
/// non-root and read-only, with the passwords from Secrets.
#[test]
fn the_sidecar_suite_job_passes_strict_validation_offline() {
    let suite = format!("{}/docs/guide/sidecar.toml", env!("CARGO_MANIFEST_DIR"));
    let o = connbench(&[
        "kubernetes",
        "suite",
        &suite,
        "--image",
        "registry.example/connbench:0.1",
        "--sidecar-image",
        "gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.14.0",
        "--sidecar-arg",
        "app:europe-west1:db?port=5432",
        "--sidecar-arg=--unix-socket=/cloudsql",
        "--sidecar-port",
        "5432",
        "--target",
        "sidecar_unix=host=/cloudsql/app:europe-west1:db dbname=app user=app",
        "--target",
        "sidecar_tcp=host=127.0.0.1 port=5432 dbname=app user=app sslmode=disable",
        "--target-secret",
        "app-db",
        "--store",
        "postgres://cb@results.example/connbench",
        "--store-secret",
        "cb-store",
        "--run",
        "sidecar-1",
        "--",
        "--quick",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let manifest = stdout(&o);
    for want in [
        "kind: \"ConfigMap\"",
        "suite.toml: ",
        "name: \"connbench-sidecar-1-suite\"",
        "restartPolicy: \"Always\"",
        "- \"--unix-socket=/cloudsql\"",
        "mountPath: \"/cloudsql\"",
        "- \"/etc/connbench/suite.toml\"",
        "- \"sidecar_unix=host=/cloudsql/app:europe-west1:db dbname=app user=app\"",
        "- \"--quick\"",
        "name: \"PGPASSWORD\"",
        "readOnlyRootFilesystem: true",
        "runAsNonRoot: true",
    ] {
        assert!(manifest.contains(want), "{want} missing:\n{manifest}");
    }
    validate_offline("suite-job.yaml", &manifest, 2);

    // A target the suite does not use, a sandbox target left unmapped, and a password in
    // a target are refused before anything is printed.
    let base = [
        "kubernetes",
        "suite",
        suite.as_str(),
        "--image",
        "i",
        "--sidecar-image",
        "s",
        "--store",
        "postgres://cb@results.example/connbench",
    ];
    for (targets, says) in [
        (
            vec![
                "sidecar_unix=host=/cloudsql dbname=app",
                "sidecr_tcp=host=127.0.0.1 dbname=app",
            ],
            "sidecar_tcp",
        ),
        (
            vec![
                "sidecar_unix=host=/cloudsql dbname=app password=hunter2",
                "sidecar_tcp=host=h dbname=app",
            ],
            "holds a password",
        ),
    ] {
        let mut args: Vec<&str> = base.to_vec();
        for t in &targets {
            args.extend(["--target", t]);
        }
        let o = connbench(&args);
        assert!(
            !o.status.success() && stdout(&o).is_empty(),
            "{targets:?} was taken"
        );
        assert!(
            stderr(&o).contains(says) && !stderr(&o).contains("hunter2"),
            "{}",
            stderr(&o)
        );
    }
}

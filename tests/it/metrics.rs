//! `--metrics-listen` against the real thing: Debian's Prometheus scrapes a load every
//! second, and its HTTP API must give back the run's own final transaction count exactly,
//! and a p99 from `histogram_quantile` within the buckets' error of the run's p99;
//! `promtool check metrics` passes on the endpoint's text.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{conninfo, dataset, scratch, Killed};

/// GET `path` from `addr`; the body.
fn get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    match text.split_once("\r\n\r\n") {
        Some((_, body)) => body.to_string(),
        None => panic!("no HTTP answer from {addr}: {text:?}"),
    }
}

/// An instant query through Prometheus' HTTP API: the value of its first sample.
fn query(prometheus: &str, q: &str) -> Option<f64> {
    let enc: String = q
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let body = get(prometheus, &format!("/api/v1/query?query={enc}"));
    let v: serde_json::Value = serde_json::from_str(body.trim()).ok()?;
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

/// A free local port (bound, then released for Prometheus to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn prometheus_scrapes_the_run_s_own_count_and_p99() {
    dataset();
    let dir = scratch("metrics");
    // The load: its endpoint on a port of the OS's choosing, said on stderr.
    let mut load = Command::new(env!("CARGO_BIN_EXE_connbench"))
        .args([
            "load",
            &conninfo("unix"),
            "-S",
            "-c",
            "2",
            "-T",
            "4",
            "--metrics-listen",
            "127.0.0.1:0",
            "--metrics-linger",
            "2m",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = load.stdout.take().unwrap();
    let mut stderr = BufReader::new(load.stderr.take().unwrap());
    let load = Killed(load);
    let mut line = String::new();
    let endpoint = loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "connbench ended without serving metrics"
        );
        if let Some(rest) = line.trim().strip_prefix("metrics: serving http://") {
            break rest.trim_end_matches("/metrics").to_string();
        }
    };
    // promtool reads the endpoint's text as Prometheus would.
    let text = get(&endpoint, "/metrics");
    promtool_check(&text);
    assert_eq!(get(&endpoint, "/").trim(), "connbench serves only /metrics");

    let web = format!("127.0.0.1:{}", free_port());
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: connbench\n    \
             static_configs:\n      - targets: [\"{endpoint}\"]\n"
        ),
    )
    .unwrap();
    let _prometheus = Killed(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address={web}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus is installed (scripts/setup.sh)"),
    );

    // The run's own figures, printed before the endpoint lingers.
    let v: serde_json::Value = serde_json::Deserializer::from_reader(stdout)
        .into_iter()
        .next()
        .expect("the run's JSON")
        .unwrap();
    let transactions = v["summary"]["transactions"].as_f64().unwrap();
    let p99_s = v["summary"]["latency"]["p99_ms"].as_f64().unwrap() / 1e3;
    assert!(transactions > 0.0);

    // Prometheus' own view, once its scrapes caught up with the final figures: the event
    // is the count, waited for (up to a minute on a busy machine), not a sleep.
    let started = Instant::now();
    let scraped = loop {
        let got = query(&web, "connbench_transactions_total{run=\"load\"}");
        if got == Some(transactions) || started.elapsed() > Duration::from_secs(60) {
            break got;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(scraped, Some(transactions), "Prometheus' count against the run's");
    let q99 = query(
        &web,
        "histogram_quantile(0.99, connbench_transaction_duration_seconds_bucket{run=\"load\"})",
    )
    .expect("a p99 from Prometheus");
    // Adjacent bounds differ by 4.4%; the run's own p99 has HDR's 0.1%.
    assert!(
        (q99 / p99_s - 1.0).abs() <= 0.05,
        "histogram_quantile p99 {q99} s against the run's {p99_s} s"
    );
    drop(load);
}

/// A load at a database that takes two connections, with three clients: once it serves
/// its final figures, the endpoint's refused connects, the ramp's failed attempts and its
/// connections are the run's own (its JSON's), each family with its HELP and TYPE, and
/// promtool passes the text. A build that exports none of them fails here.
#[test]
fn refused_connects_and_the_connect_ramp_are_exported() {
    let (target, script) = crate::many::limited_target("metrics_ramp", 2);
    let mut load = Command::new(env!("CARGO_BIN_EXE_connbench"))
        .args(["load", &target, "-f", script.path(), "-c", "3", "-T", "2"])
        .args([
            "--metrics-listen",
            "127.0.0.1:0",
            "--metrics-linger",
            "2m",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = load.stdout.take().unwrap();
    let mut stderr = BufReader::new(load.stderr.take().unwrap());
    let _load = Killed(load);
    // The final figures are served once the run has printed its report.
    let (mut endpoint, mut said, mut line) = (None, String::new(), String::new());
    loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "connbench ended without lingering: {said}"
        );
        said.push_str(&line);
        if let Some(rest) = line.trim().strip_prefix("metrics: serving http://") {
            endpoint = Some(rest.trim_end_matches("/metrics").to_string());
        }
        if line.contains("serving the final figures") {
            break;
        }
    }
    let v: serde_json::Value = serde_json::Deserializer::from_reader(stdout)
        .into_iter()
        .next()
        .expect("the run's JSON")
        .unwrap();
    let c = &v["summary"]["connections"];
    let text = get(endpoint.as_deref().unwrap(), "/metrics");
    let sample = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(&format!("{name}{{")))?;
        line.rsplit(' ').next()?.parse().ok()
    };
    for (name, kind, figure) in [
        (
            "connbench_refused_connects_total",
            "counter",
            &c["failed_attempts"],
        ),
        (
            "connbench_ramp_failed_connects_total",
            "counter",
            &c["ramp"]["failed_attempts"],
        ),
        ("connbench_ramp_connections", "gauge", &c["ramp"]["connected"]),
        ("connbench_ramp_connections_wanted", "gauge", &c["ramp"]["wanted"]),
    ] {
        assert!(text.contains(&format!("# TYPE {name} {kind}\n")), "{text}");
        assert!(text.contains(&format!("# HELP {name} ")), "{text}");
        assert_eq!(sample(name), figure.as_u64(), "{name} against the run's {c}");
    }
    // The database takes two: the third client was refused before the clock and in it.
    assert_eq!(sample("connbench_ramp_connections_wanted"), Some(3));
    assert!(
        sample("connbench_ramp_failed_connects_total") >= Some(1),
        "{text}"
    );
    assert!(sample("connbench_refused_connects_total") >= Some(1), "{text}");
    assert!(
        !text.contains("kind=\"53300\""),
        "a refusal is no failure: {text}"
    );
    promtool_check(&text);
}

/// `promtool check metrics` on `text`, as Prometheus' own tools read an exposition.
fn promtool_check(text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool is installed (scripts/setup.sh)");
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `run --metrics-listen`: one series per cell of a suite, fed by its counted repetitions
/// only (the pre-warm pass is discarded, as in the report), final once the run ends.
#[test]
fn a_suite_run_serves_a_series_per_cell() {
    dataset();
    let dir = scratch("metrics-suite");
    let suite = dir.join("s.toml");
    std::fs::write(
        &suite,
        "name = \"m\"\nquestion = \"q\"\nkind = \"load\"\nduration = \"300ms\"\nrepetitions = 2\n\
         [defaults]\nworkload = \"select-only\"\ntarget = \"unix\"\n[axes]\nclients = [1, 2]\n",
    )
    .unwrap();
    let mut run = Command::new(env!("CARGO_BIN_EXE_connbench"))
        .arg("run")
        .arg(&suite)
        .args(["--target", &format!("unix={}", conninfo("unix"))])
        .arg("--store")
        .arg(dir.join("r.sqlite"))
        .args(["--metrics-listen", "127.0.0.1:0", "--metrics-linger", "2m"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(run.stderr.take().unwrap());
    let _run = Killed(run);
    let mut endpoint = None;
    let mut line = String::new();
    // The final figures are served once the run has printed its answer.
    loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the run ended without lingering"
        );
        if let Some(rest) = line.trim().strip_prefix("metrics: serving http://") {
            endpoint = Some(rest.trim_end_matches("/metrics").to_string());
        }
        if line.contains("serving the final figures") {
            break;
        }
    }
    let text = get(endpoint.as_deref().unwrap(), "/metrics");
    let cells: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("connbench_transactions_total{"))
        .collect();
    assert_eq!(cells.len(), 2, "{text}");
    for c in &cells {
        assert!(c.contains("run=\"m\""), "{c}");
        assert!(c.rsplit(' ').next().unwrap().parse::<u64>().unwrap() > 0, "{c}");
    }
    assert_eq!(text.matches("finished=\"true\"").count(), 2, "{text}");
    // Each cell's ramp connected its clients (persistent: one connection each).
    let mut ramps: Vec<u64> = text
        .lines()
        .filter(|l| l.starts_with("connbench_ramp_connections{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    ramps.sort_unstable();
    assert_eq!(ramps, [1, 2], "{text}");
    promtool_check(&text);
}

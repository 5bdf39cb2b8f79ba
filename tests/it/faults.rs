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
    let share = failed as f64 / (done + failed) as f64;
    assert!(
        (0.1..0.55).contains(&share),
        "refused share {share:.2} of 0.3: {s}"
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

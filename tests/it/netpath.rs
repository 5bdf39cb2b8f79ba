//! The bridge path: a client in a namespace of connbench's own, behind a veth pair, a
//! bridge and NAT, against the same server as the host path; and nothing of it left after
//! a run, also when connbench is killed. Root only: the tests are `#[ignore]`d, so a
//! plain `cargo test` reports them as ignored rather than passed, and `scripts/test.sh`
//! runs them (`--include-ignored`) when it runs as root, as CI does.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{check_schema, dataset, run, scratch, stderr, suite_args};

/// The two tests look at the system's list of namespaces: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// connbench's namespaces (`cb-ID`) that exist now.
fn our_namespaces() -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with("cb-"))
        .map(str::to_string)
        .collect()
}

fn exists(args: &[&str]) -> bool {
    Command::new(args[0])
        .args(&args[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

#[test]
#[ignore = "needs root (scripts/test.sh runs it as root)"]
fn bridge_and_host_paths_both_measure() {
    assert!(is_root(), "netpath = bridge needs root: run this test as root");
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    dataset();
    let dir = scratch("netpath");
    let suite = r#"
name = "netpath"
question = "Bridge or host?"
kind = "connect"
repetitions = 2
prewarm = false
baseline = "netpath=host"
[defaults]
samples = 15
target = "tcp_trust"
[axes]
netpath = ["host", "bridge"]
"#;
    let before = our_namespaces();
    let (_, args) = suite_args(&dir, suite, &["tcp_trust"], &["--json"]);
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    check_schema("run", &v);
    for c in v["cells"].as_array().unwrap() {
        assert_eq!(
            c["values"]["total_mean_us"].as_array().unwrap().len(),
            2,
            "{}: {c}",
            c["name"]
        );
    }
    assert_eq!(our_namespaces(), before, "the namespace is removed after the run");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[ignore = "needs root (scripts/test.sh runs it as root)"]
fn a_killed_run_leaves_no_namespace_link_or_rule() {
    assert!(is_root(), "netpath = bridge needs root: run this test as root");
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    dataset();
    let dir = scratch("netpath-kill");
    let suite = r#"
name = "netpath-kill"
question = "Is everything removed after a SIGKILL?"
kind = "load"
duration = "60s"
repetitions = 1
prewarm = false
[defaults]
workload = "select-only"
target = "tcp"
netpath = "bridge"
"#;
    let before = our_namespaces();
    let (_, args) = suite_args(&dir, suite, &["tcp"], &[]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_connbench"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let ns = loop {
        if let Some(n) = our_namespaces().into_iter().find(|n| !before.contains(n)) {
            break n;
        }
        if t0.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("no namespace appeared");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let id = ns.trim_start_matches("cb-").to_string();
    // Let the run start measuring inside it, then kill: no destructor runs.
    std::thread::sleep(Duration::from_secs(2));
    assert!(exists(&["ip", "link", "show", &format!("cbb{id}")]));
    assert!(exists(&["nft", "list", "table", "ip", &format!("cb_{id}")]));
    child.kill().unwrap();
    child.wait().unwrap();
    let t0 = Instant::now();
    loop {
        let left = [
            our_namespaces().contains(&ns),
            exists(&["ip", "link", "show", &format!("cbb{id}")]),
            exists(&["ip", "link", "show", &format!("cbh{id}")]),
            exists(&["nft", "list", "table", "ip", &format!("cb_{id}")]),
        ];
        if left.iter().all(|l| !l) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "left after SIGKILL (namespace, bridge, veth, nft table): {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

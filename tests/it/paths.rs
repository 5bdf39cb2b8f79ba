//! Every engine on every path: PostgreSQL, PgBouncer and MariaDB, each reached directly,
//! through a sidecar over a Unix socket and over TCP, and from a distance, for `connect`,
//! `load` and `replay`; and (root only) from a client behind a bridge, in `connect` and
//! `load` suites (a trace workload for `replay`). One sandbox with MariaDB serves every case, and each case is short (a
//! handful of connects, 2 clients × 10 transactions, a replay of 20 requests at 5 ms),
//! so the matrix stays well under a minute or two on a busy machine.
//!
//! A case passes when it measured something real: connects made and none failed,
//! transactions done and none failed, every recorded request replayed and answered, and
//! through a distance an achieved round trip near the requested one that the command's
//! own figures carry. The few combinations connbench refuses by design are listed in
//! [`limitation`] (and in docs/reference.md, "Every engine on every path"): those must be
//! refused, with a message that names the limitation. Anything else refused fails the
//! test, which names the engine, target, path and command with the error.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::{
    connbench, root_or_skip, run, scratch, start_recorder, stderr, stop_recorder, OwnMariadb,
};

/// One sandbox with PostgreSQL, PgBouncer and MariaDB for every case here (never dropped:
/// its watchdog removes it when the test process ends).
static MARIA: OwnMariadb = OwnMariadb::new();

fn conninfo(name: &str) -> String {
    MARIA.info().target(name).unwrap().conninfo.clone()
}

/// The sandbox's targets, by engine: each engine over TCP and over its Unix socket (the
/// relays listen and dial either way), and with TLS.
const TARGETS: [(&str, &str); 8] = [
    ("PostgreSQL", "tcp"),
    ("PostgreSQL", "unix"),
    ("PostgreSQL", "tls"),
    ("PgBouncer", "pgbouncer_tcp"),
    ("PgBouncer", "pgbouncer_unix"),
    ("MariaDB", "mariadb_tcp"),
    ("MariaDB", "mariadb_unix"),
    ("MariaDB", "mariadb_tls"),
];

/// The round trip a distance case adds: small, so a case stays short, yet well above the
/// relay's 0.2 ms tolerance and a loaded machine's scheduling noise.
const DISTANCE_MS: f64 = 5.0;

#[derive(Debug, Clone, Copy, PartialEq)]
enum PathKind {
    Direct,
    SidecarUnix,
    SidecarTcp,
    Distance,
    /// `netpath = "bridge"`: a suite setting only (no command-line flag), root only.
    Bridge,
}

impl PathKind {
    /// The flags that put a command on this path.
    fn flags(self, command: Cmd) -> Vec<String> {
        let distance = format!("{DISTANCE_MS}ms");
        match (self, command) {
            (PathKind::Direct, _) => vec![],
            (PathKind::SidecarUnix, _) => vec!["--path".into(), "sidecar-unix".into()],
            (PathKind::SidecarTcp, _) => vec!["--path".into(), "sidecar-tcp".into()],
            // replay's flag is --rtt (--distance is its alias).
            (PathKind::Distance, Cmd::Replay) => vec!["--rtt".into(), distance],
            (PathKind::Distance, _) => vec!["--distance".into(), distance],
            (PathKind::Bridge, _) => unreachable!("the bridge path is a suite setting"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Cmd {
    Connect,
    Load,
    Replay,
}

/// The combinations connbench refuses by design, and words its refusal must hold. Keep
/// in step with docs/reference.md, "Every engine on every path".
fn limitation(target: &str, path: PathKind, command: Cmd) -> Option<&'static str> {
    match (target, path, command) {
        // The sidecar's own TLS to the server speaks PostgreSQL's SSLRequest; MySQL asks
        // for TLS inside its handshake. MariaDB takes a sidecar in plaintext.
        ("mariadb_tls", PathKind::SidecarUnix | PathKind::SidecarTcp, _) => {
            Some("a sidecar's TLS to the server is PostgreSQL-only")
        }
        // The bridge's client reaches the host's loopback through NAT: TCP only.
        ("unix" | "pgbouncer_unix" | "mariadb_unix", PathKind::Bridge, _) => {
            Some("netpath = bridge needs a TCP target")
        }
        _ => None,
    }
}

/// A script every engine runs without tables: one round trip per transaction.
fn script(dir: &Path) -> PathBuf {
    let p = dir.join("one.sql");
    std::fs::write(&p, "SELECT 1;\n").unwrap();
    p
}

/// `conninfo` (a libpq conninfo or a MariaDB URI) sent to `port` on 127.0.0.1 instead.
fn at_port(conninfo: &str, port: &str) -> String {
    if let Some(rest) = conninfo.strip_prefix("mariadb://") {
        let (auth, tail) = rest.split_once('@').unwrap();
        let (_, path) = tail.split_once('/').unwrap();
        return format!("mariadb://{auth}@127.0.0.1:{port}/{path}");
    }
    conninfo
        .split_whitespace()
        .map(|kv| match kv.split_once('=') {
            Some(("port", _)) => format!("port={port}"),
            Some(("host" | "hostaddr", _)) => "host=127.0.0.1".to_string(),
            _ => kv.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The TCP port of a sandbox target.
fn port_of(name: &str) -> String {
    let c = conninfo(name);
    if let Some(rest) = c.strip_prefix("mariadb://") {
        let host_port = rest.split_once('@').unwrap().1.split_once('/').unwrap().0;
        return host_port.rsplit_once(':').unwrap().1.to_string();
    }
    c.split_whitespace()
        .find_map(|kv| kv.strip_prefix("port="))
        .unwrap()
        .to_string()
}

/// A trace of each engine's wire, recorded with `connbench record` in front of `target`
/// (the sandbox's TCP target of that engine): `load` with 2 clients × 10 transactions.
fn record(dir: &Path, target: &str, engine: &str, script: &Path) -> PathBuf {
    let out = dir.join(format!("{target}.trace"));
    let (child, port) = start_recorder(
        &format!("127.0.0.1:{}", port_of(target)),
        &["--engine", engine],
        &out,
    );
    let through = at_port(&conninfo(target), &port);
    let o = connbench(&[
        "load",
        &through,
        "-f",
        script.to_str().unwrap(),
        "-c",
        "2",
        "-t",
        "10",
    ]);
    stop_recorder(child);
    assert!(o.status.success(), "recording {target}'s trace: {}", stderr(&o));
    out
}

/// The arguments of `command` on `target`, before its path's flags.
fn args(command: Cmd, target: &str, script: &Path, trace: &Path) -> Vec<String> {
    let t = conninfo(target);
    let s = script.to_str().unwrap().to_string();
    let own = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let mut a = match command {
        Cmd::Connect => own(&["connect", &format!("{target}={t}"), "-n", "5"]),
        Cmd::Load => own(&["load", &t, "-f", &s, "-c", "2", "-t", "10"]),
        Cmd::Replay => own(&["replay", trace.to_str().unwrap(), "--target", &t]),
    };
    a.push("--json".into());
    a
}

/// The achieved round trip printed by a command on a distance ("route: NAME: round trip
/// requested +5.00 ms, achieved +5.123 ms").
fn achieved_ms(err: &str) -> Option<f64> {
    let at = err.find("achieved +")? + "achieved +".len();
    err[at..].split(" ms").next()?.parse().ok()
}

/// Whether `o` measured something real for `command`; the reason when not.
fn measured(command: Cmd, path: PathKind, o: &Output) -> Result<(), String> {
    let err = stderr(o);
    if !o.status.success() {
        return Err(format!("exit {:?}: {err}", o.status.code()));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).map_err(|e| format!("not JSON ({e}): {err}"))?;
    // The command's own figure of one round trip or more, in ms: through a distance it
    // carries the added round trip (the relay was really on the path).
    let figure_ms = match command {
        Cmd::Connect => {
            let t = &v["targets"][0];
            if t["samples"].as_u64().unwrap_or(0) == 0 || t["failures"] != 0 {
                return Err(format!("connects: {t}"));
            }
            t["total"]["p50_us"].as_f64().map(|us| us / 1e3)
        }
        Cmd::Load => {
            let s = &v["summary"];
            if s["transactions"].as_u64().unwrap_or(0) != 20 || s["failed_transactions"] != 0 {
                return Err(format!("transactions: {s}"));
            }
            s["latency"]["mean_ms"].as_f64()
        }
        Cmd::Replay => {
            let s = &v["summary"];
            let answered = s["replayed"]["requests"].as_u64().unwrap_or(0);
            if answered == 0
                || s["replayed"]["requests"] != s["recorded"]["requests"]
                || s["fidelity"]["failed_now_not_then"] != 0
                || s["fidelity"]["sessions_not_connected"] != 0
            {
                return Err(format!("replay: {s}"));
            }
            s["response"]["p50_ms"].as_f64()
        }
    };
    let figure_ms = figure_ms.ok_or_else(|| {
        let mut j = v.to_string();
        j.truncate(400);
        format!("no latency figure in its JSON: {j}")
    })?;
    if path == PathKind::Distance {
        let a = achieved_ms(&err).ok_or_else(|| format!("no achieved round trip printed: {err}"))?;
        // Generous: a loaded 2-core machine adds scheduling delay, but an achieved round
        // trip far off the requested one means the relay was not in the path.
        if !(0.6 * DISTANCE_MS..=3.0 * DISTANCE_MS).contains(&a) {
            return Err(format!("achieved +{a} ms for +{DISTANCE_MS} ms: {err}"));
        }
        if figure_ms < 0.9 * DISTANCE_MS {
            return Err(format!(
                "{figure_ms} ms per round trip or more through +{DISTANCE_MS} ms: the relay was not on the path"
            ));
        }
    }
    Ok(())
}

/// What a case came to: `None` when it did as it should (measured, or refused as a stated
/// limitation), else why not.
fn judge(target: &str, path: PathKind, command: Cmd, o: &Output) -> Option<String> {
    match limitation(target, path, command) {
        Some(words) => {
            let err = stderr(o);
            (o.status.code() != Some(2) || !err.contains(words)).then(|| {
                format!(
                    "expected the stated limitation ({words:?}), exit 2; got exit {:?}: {err}",
                    o.status.code()
                )
            })
        }
        None => measured(command, path, o).err(),
    }
}

#[test]
fn every_engine_on_every_path_connects_loads_and_replays() {
    let dir = scratch("paths");
    let script = script(&dir);
    let pg_trace = record(&dir, "tcp", "postgres", &script);
    let maria_trace = record(&dir, "mariadb_tcp", "mysql", &script);
    let paths = [
        PathKind::Direct,
        PathKind::SidecarUnix,
        PathKind::SidecarTcp,
        PathKind::Distance,
    ];
    let mut failed = Vec::new();
    let mut cases = 0;
    for (engine, target) in TARGETS {
        let trace = if engine == "MariaDB" {
            &maria_trace
        } else {
            &pg_trace
        };
        for path in paths {
            for command in [Cmd::Connect, Cmd::Load, Cmd::Replay] {
                let mut a = args(command, target, &script, trace);
                a.extend(path.flags(command));
                let o = run(&a);
                cases += 1;
                if let Some(why) = judge(target, path, command, &o) {
                    failed.push(format!("{engine} ({target}) x {path:?} x {command:?}: {why}"));
                }
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {cases} cases failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// A suite of one cell on the bridge path, for `connect` or `load` (a trace workload for
/// `replay`).
fn bridge_suite(kind: Cmd, script: &Path, trace: &Path) -> String {
    let (kind, cell) = match kind {
        Cmd::Connect => ("connect", "samples = 5".to_string()),
        Cmd::Load => (
            "load",
            format!("workload = {:?}\nclients = 2", script.display().to_string()),
        ),
        Cmd::Replay => ("load", format!("workload = \"trace:{}\"", trace.display())),
    };
    format!(
        "name = \"bridge\"\nquestion = \"Does it run behind a bridge?\"\nkind = \"{kind}\"\n\
         duration = \"500ms\"\nwarmup = \"100ms\"\nrepetitions = 1\nprewarm = false\n\
         [defaults]\ntarget = \"t\"\nnetpath = \"bridge\"\n{cell}\n"
    )
}

#[test]
#[ignore = "needs root (scripts/test.sh runs it as root)"]
fn every_engine_on_the_bridge_path_connects_loads_and_replays() {
    if !root_or_skip("netpath = bridge needs root: a namespace, links and nftables rules") {
        return;
    }
    let dir = scratch("paths-bridge");
    let script = script(&dir);
    let pg_trace = record(&dir, "tcp", "postgres", &script);
    let maria_trace = record(&dir, "mariadb_tcp", "mysql", &script);
    let mut failed = Vec::new();
    let mut cases = 0;
    for (engine, target) in TARGETS {
        let trace = if engine == "MariaDB" {
            &maria_trace
        } else {
            &pg_trace
        };
        for command in [Cmd::Connect, Cmd::Load, Cmd::Replay] {
            let file = dir.join("s.toml");
            std::fs::write(&file, bridge_suite(command, &script, trace)).unwrap();
            let store = dir.join(format!("{target}-{command:?}.sqlite"));
            let a: Vec<String> = [
                "run",
                file.to_str().unwrap(),
                "--json",
                "--store",
                store.to_str().unwrap(),
                "--target",
                &format!("t={}", conninfo(target)),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let o = run(&a);
            cases += 1;
            let why = match limitation(target, PathKind::Bridge, command) {
                Some(_) => judge(target, PathKind::Bridge, command, &o),
                None => bridge_measured(command, &o).err(),
            };
            if let Some(why) = why {
                failed.push(format!("{engine} ({target}) x Bridge x {command:?}: {why}"));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {cases} cases failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// Whether a bridge suite's one cell measured: its repetition's figure is there and
/// positive.
fn bridge_measured(command: Cmd, o: &Output) -> Result<(), String> {
    if !o.status.success() {
        return Err(format!("exit {:?}: {}", o.status.code(), stderr(o)));
    }
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).map_err(|e| format!("not JSON ({e})"))?;
    let figure = match command {
        Cmd::Connect => "total_mean_us",
        _ => "tps",
    };
    let values = v["cells"][0]["values"][figure]
        .as_array()
        .cloned()
        .unwrap_or_default();
    match values.first().and_then(|x| x.as_f64()) {
        Some(x) if x > 0.0 => Ok(()),
        _ => Err(format!("no {figure} measured: {}", v["cells"][0])),
    }
}

//! The guides' suite files (docs/guide/*.toml) keep working: each is run with its
//! `--quick` profile against the shared test sandbox, its target names mapped onto
//! sandbox targets as a user maps them onto their own, and must answer. The engines
//! guide needs MariaDB and tables on both engines, which the MySQL module's own tests
//! create and drop; it is checked with `--dry-run` here, and its built-in twin, the
//! `engines` suite, runs in the quick lab.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::common::{connbench, conninfo, dataset, scratch, stderr, stdout, Killed};

/// Runs `docs/guide/FILE` with `names` mapped onto sandbox targets; returns the output.
fn run_guide(file: &str, names: &[(&str, &str)], extra: &[&str]) -> String {
    dataset();
    let dir = scratch(&format!("guide-{}", file.trim_end_matches(".toml")));
    let path = format!("{}/docs/guide/{file}", env!("CARGO_MANIFEST_DIR"));
    let store = dir.join("r.sqlite");
    let mut args = vec![
        "run".to_string(),
        path,
        "--store".to_string(),
        store.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    for (name, sandbox) in names {
        args.push("--target".into());
        args.push(format!("{name}={}", conninfo(sandbox)));
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = connbench(&refs);
    assert!(o.status.success(), "{file}: {}", stderr(&o));
    stdout(&o)
}

#[test]
fn the_sidecar_guide_answers_on_the_sandbox() {
    let out = run_guide(
        "sidecar.toml",
        &[("sidecar_unix", "unix"), ("sidecar_tcp", "tcp")],
        &["--quick"],
    );
    assert!(out.contains("answer: sidecar via unix"), "{out}");
}

/// Starts `connbench relay --listen LISTEN` in front of the sandbox's TCP port, speaking
/// TLS upstream as the Cloud SQL Auth Proxy does; returns it once it listens, with the
/// address it says it listens on.
fn sidecar(listen: &str) -> (Killed, String) {
    let tcp = conninfo("tcp");
    let field = |k: &str| {
        tcp.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("no {k} in {tcp}"))
            .to_string()
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_connbench"))
        .args(["relay", "--listen", listen, "--upstream-tls", "--upstream"])
        .arg(format!("{}:{}", field("host"), field("port")))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its first line says where it listens, once it does: the event to wait for.
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .strip_prefix("relay: ")
        .and_then(|l| l.split(" -> ").next())
        .unwrap_or_else(|| panic!("relay said {line:?}"))
        .to_string();
    (Killed(child), addr)
}

/// The recipe of docs/guide/sidecar.md with connbench's relay standing in for the user's
/// sidecar (plaintext in, TLS to PostgreSQL, on a Unix socket and a TCP port), the run
/// named as the Kubernetes Job names it and read back by that name: the same suite the
/// sidecar Job runs in a pod, run here.
#[test]
fn the_sidecar_guide_answers_through_a_relay_standing_in_for_the_sidecar() {
    dataset();
    let dir = scratch("guide-relay-sidecar");
    let (_unix, _) = sidecar(&dir.join(".s.PGSQL.5432").display().to_string());
    let (_tcp, addr) = sidecar("127.0.0.1:0");
    let (host, port) = addr.rsplit_once(':').unwrap();
    let tcp = conninfo("tcp");
    let rest: Vec<&str> = tcp
        .split_whitespace()
        .filter(|kv| !["host=", "port=", "sslmode="].iter().any(|k| kv.starts_with(k)))
        .collect();
    let rest = rest.join(" ");
    let store = dir.join("r.sqlite").display().to_string();
    let guide = format!("{}/docs/guide/sidecar.toml", env!("CARGO_MANIFEST_DIR"));
    let unix_target = format!(
        "sidecar_unix=host={} port=5432 sslmode=disable {rest}",
        dir.display()
    );
    let tcp_target = format!("sidecar_tcp=host={host} port={port} sslmode=disable {rest}");
    let args = [
        "run",
        guide.as_str(),
        "--quick",
        "--store",
        &store,
        "--run",
        "sidecar-1",
        "--target",
        &unix_target,
        "--target",
        &tcp_target,
    ];
    let o = connbench(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    // The answer wraps at 80 columns: read it with its lines joined.
    let joined = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        joined.contains("answer: sidecar via unix") && joined.contains("sidecar via tcp"),
        "{out}"
    );
    // Read back by name, as `connbench report RUN --store STORE` after the Job.
    let r = connbench(&["report", "sidecar-1", "--store", &store]);
    assert!(r.status.success(), "{}", stderr(&r));
    let joined = stdout(&r).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        joined.contains("Answer.** sidecar via unix") && joined.contains("sidecar via tcp"),
        "{}",
        stdout(&r)
    );
    // A second run may not take the name: refused before anything runs.
    let again = connbench(&args);
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("--run sidecar-1") && stderr(&again).contains("already"),
        "{}",
        stderr(&again)
    );
}

#[test]
fn the_scaling_guide_answers_on_the_sandbox() {
    let out = run_guide(
        "scaling.toml",
        &[("small", "tcp"), ("large", "unix")],
        &["--quick"],
    );
    assert!(out.contains("large clients=4"), "{out}");
    // Each client count answers the large instance against the small one, by its labels.
    let joined = out.split_whitespace().collect::<Vec<_>>().join(" ");
    for clients in [1, 4] {
        let wanted = format!("answer: clients={clients}, 16 vCPU: ");
        assert!(joined.contains(&wanted), "{wanted}: {out}");
    }
    assert!(
        joined.contains("x the tps of 2 vCPU (") && joined.contains("of linear"),
        "{out}"
    );
}

#[test]
fn the_connect_guide_answers_on_the_sandbox() {
    let out = run_guide(
        "connect.toml",
        &[("direct", "unix"), ("pgbouncer", "pgbouncer_unix")],
        &["--quick"],
    );
    assert!(out.contains("answer: target=pgbouncer"), "{out}");
}

#[test]
fn the_distance_guide_answers_on_the_sandbox() {
    let out = run_guide(
        "distance.toml",
        &[("far", "tcp"), ("far_pgbouncer", "pgbouncer_tcp")],
        &["--quick"],
    );
    // Answers wrap at 80 columns: read them with their lines joined.
    let joined = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(joined.contains("than pool, 5 min lifetime"), "{out}");
    assert!(joined.contains("PgBouncer near the database"), "{out}");
}

#[test]
fn the_engines_guide_is_a_valid_suite() {
    let out = run_guide(
        "engines.toml",
        &[("postgres", "unix"), ("mysql", "tcp")],
        &["--quick", "--dry-run"],
    );
    assert!(out.contains("2 cells"), "{out}");
}

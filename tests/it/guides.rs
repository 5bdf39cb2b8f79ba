//! The guides' suite files (docs/guide/*.toml) keep working: each is run with its
//! `--quick` profile against the shared test sandbox, its target names mapped onto
//! sandbox targets as a user maps them onto their own, and must answer. The engines
//! guide needs MariaDB and tables on both engines, which the MySQL module's own tests
//! create and drop; it is checked with `--dry-run` here, and its built-in twin, the
//! `engines` suite, runs in the quick lab.

use crate::common::{connbench, conninfo, dataset, scratch, stderr, stdout};

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

#[test]
fn the_scaling_guide_answers_on_the_sandbox() {
    let out = run_guide(
        "scaling.toml",
        &[("small", "tcp"), ("large", "unix")],
        &["--quick"],
    );
    assert!(out.contains("clients=4 target=large"), "{out}");
    assert!(out.matches("answer:").count() >= 3, "{out}");
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
    assert!(out.contains("than pool, 5 min lifetime"), "{out}");
    assert!(out.contains("PgBouncer near the database"), "{out}");
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

//! `connbench kubernetes`: manifests that run connbench on a cluster. `job` is the
//! Indexed Job of a load's workers; `suite` is a Job that runs a suite in one pod beside
//! the user's own sidecar container (experiment 1 in their cluster).
//!
//! For `job`, each pod is one worker: Kubernetes gives it `JOB_COMPLETION_INDEX`, which `load`
//! takes as `--worker-index`, and every pod runs the same `connbench load ... --workers N
//! --run NAME --store URL`. Passwords never appear in the manifest: the store's comes
//! from a Secret as `CONNBENCH_STORE_PASSWORD`, the target's as the variable its engine
//! reads (`PGPASSWORD`, `MYSQL_PWD`), and a target or store with a password in its text
//! is refused. The load flags are checked here by parsing the very command line the pods
//! will run, so a typo fails now rather than in N pods.
//!
//! For `suite`, the sidecar is a native sidecar (an init container with `restartPolicy:
//! Always`, Kubernetes 1.29+): a plain second container never ends, so the Job would
//! never complete; a native one starts first, is ready first when it has a startup
//! probe, and is stopped when connbench's container ends. The two share an emptyDir for
//! the sidecar's socket, and connbench's container runs as non-root on a read-only root
//! filesystem (its only writable place an emptyDir at /tmp).
//!
//! The manifest is written as YAML by a small writer below: every string is emitted as a
//! JSON string, which is a valid YAML double-quoted scalar, so no value can change
//! meaning (no crate needed for a tree of maps, lists and scalars).

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde_json::{json, Value};

use super::emit;
use crate::cli::{Cli, KubernetesJobArgs, KubernetesSuiteArgs};
use crate::Exit;

pub fn run_job(args: KubernetesJobArgs) -> Result<Exit> {
    let manifest = manifest(&args)?;
    emit(&match args.common.output.as_str() {
        "json" => serde_json::to_string_pretty(&manifest)? + "\n",
        _ => yaml(&manifest),
    });
    Ok(Exit::Success)
}

/// Refuses a target or store whose text holds a password: it would be written into
/// the manifest, which is stored in the cluster and often in git.
fn refuse_password(what: &str, text: &str, fix: &str) -> Result<()> {
    if crate::target::redact(text) != text
        || crate::target::parse_raw(text).is_ok_and(|raw| raw.contains_key("password"))
    {
        bail!(
            "{what} holds a password, which would be written into the manifest: remove it and give {fix} \
             (a Secret with the password under the key `password`)"
        );
    }
    Ok(())
}

/// Pods save to a store the user reads from elsewhere: only PostgreSQL will do.
fn require_postgres_store(store: &str, who: &str) -> Result<()> {
    if !crate::experiment::store::is_postgres_location(store) {
        bail!(
            "--store {store}: {who} need a PostgreSQL store (postgres://user@host/db) to save to, not a file"
        );
    }
    Ok(())
}

/// `--run`, or PREFIX-DATE-TIME.
fn run_name(run: &Option<String>, prefix: &str) -> String {
    match run {
        Some(r) => r.clone(),
        None => format!(
            "{prefix}-{}",
            crate::units::now_utc()
                .replace([':', 'T'], "-")
                .trim_end_matches('Z')
        ),
    }
}

/// The Job manifest `args` describe.
pub fn manifest(args: &KubernetesJobArgs) -> Result<Value> {
    refuse_password("--target", &args.target, "--target-secret NAME")?;
    refuse_password("--store", &args.common.store, "--store-secret NAME")?;
    require_postgres_store(&args.common.store, "workers on many machines")?;
    let run = run_name(&args.common.run, "load");
    let mut load_args: Vec<String> = vec!["load".into(), args.target.clone()];
    load_args.extend(args.load.iter().cloned());
    load_args.extend([
        "--workers".into(),
        args.workers.to_string(),
        "--run".into(),
        run.clone(),
        "--store".into(),
        args.common.store.clone(),
    ]);
    if let Some(port) = args.metrics_port {
        if args.load.iter().any(|a| a.starts_with("--metrics-")) {
            bail!("--metrics-port gives the workers' --metrics-listen and --metrics-linger: leave them out of the load flags");
        }
        load_args.extend([
            "--metrics-listen".into(),
            format!(":{port}"),
            "--metrics-linger".into(),
            "60s".into(),
        ]);
    }
    if !args.load.iter().any(|a| a.starts_with("--worker-timeout")) {
        // Pods are scheduled and their images pulled at different speeds.
        load_args.extend(["--worker-timeout".into(), "10m".into()]);
    }
    // The pods' command line, checked now with Kubernetes' index for worker 0.
    let mut check = vec!["connbench".to_string()];
    check.extend(load_args.iter().cloned());
    check.extend(["--worker-index".into(), "0".into()]);
    let parsed = Cli::try_parse_from(&check).map_err(|e| {
        anyhow::anyhow!(
            "the load flags after `--` are not valid for `connbench load`:\n{}",
            e.render()
        )
    })?;
    let crate::cli::Command::Load(load) = parsed.command else {
        bail!("the pods' command line is not a load");
    };
    if load.sandbox {
        bail!("--sandbox: the workers of a Job load one database: give its target with --target");
    }
    if args
        .load
        .iter()
        .any(|a| a.starts_with("--worker-index") || a.starts_with("--workers"))
    {
        bail!(
            "--workers and --worker-index are the Job's to give (--workers before `--`, JOB_COMPLETION_INDEX): \
             leave them out of the load flags"
        );
    }
    let name = job_name(&run);
    let labels = json!({"app.kubernetes.io/name": "connbench", "connbench/run": run});
    let env = secret_envs(&args.common, [args.target.as_str()]);
    let mut container = json!({
        "name": "connbench",
        "image": args.image,
        "args": load_args,
        "env": env,
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
        "securityContext": security_context(),
        "resources": resources(&args.common.cpu),
    });
    let mut pod_metadata = json!({"labels": labels});
    if let Some(port) = args.metrics_port {
        container["ports"] = json!([{"name": "metrics", "containerPort": port}]);
        pod_metadata["annotations"] = json!({
            "prometheus.io/scrape": "true",
            "prometheus.io/port": port.to_string(),
            "prometheus.io/path": "/metrics",
        });
    }
    Ok(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "completionMode": "Indexed",
            "completions": args.workers,
            "parallelism": args.workers,
            // A retried worker would register its index again; the run fails instead,
            // with the worker's own message in the store.
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 86400,
            "template": {
                "metadata": pod_metadata,
                "spec": {
                    "restartPolicy": "Never",
                    // One worker per node where the cluster allows: the point is more
                    // client machines.
                    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"connbench/run": run}},
                            "topologyKey": "kubernetes.io/hostname"
                        }
                    }]}},
                    "containers": [container],
                    "volumes": [{"name": "tmp", "emptyDir": {}}],
                }
            }
        }
    }))
}

/// connbench's container runs as the image's user (docs/container.md), unprivileged, on
/// a read-only root filesystem: it writes nothing but to the store and /tmp (an
/// emptyDir).
fn security_context() -> Value {
    json!({
        "runAsNonRoot": true,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "readOnlyRootFilesystem": true,
        "allowPrivilegeEscalation": false,
        "capabilities": {"drop": ["ALL"]},
    })
}

/// `--cpu` as request and limit (a measuring client should not be throttled below what
/// it asked for); without it a request the scheduler can place by, and no limit.
fn resources(cpu: &Option<String>) -> Value {
    match cpu {
        Some(cpu) => json!({"requests": {"cpu": cpu, "memory": "256Mi"}, "limits": {"cpu": cpu}}),
        None => json!({"requests": {"cpu": "1", "memory": "256Mi"}}),
    }
}

/// The container's passwords, from Secrets: the store's as `CONNBENCH_STORE_PASSWORD`,
/// the targets' as the variable each target's engine reads (`PGPASSWORD`, `MYSQL_PWD`).
fn secret_envs<'a>(
    c: &crate::cli::KubernetesCommon,
    targets: impl IntoIterator<Item = &'a str>,
) -> Vec<Value> {
    let mut env = Vec::new();
    if let Some(s) = &c.store_secret {
        env.push(secret_env("CONNBENCH_STORE_PASSWORD", s));
    }
    if let Some(s) = &c.target_secret {
        let mut vars: Vec<&str> = targets
            .into_iter()
            .map(|conninfo| match crate::target::Target::parse(conninfo) {
                Ok(t) if t.engine == crate::target::Engine::Mysql => "MYSQL_PWD",
                _ => "PGPASSWORD",
            })
            .collect();
        vars.sort();
        vars.dedup();
        env.extend(vars.into_iter().map(|v| secret_env(v, s)));
    }
    env
}

/// An environment variable read from the Secret `secret`'s key `password`.
fn secret_env(var: &str, secret: &str) -> Value {
    json!({"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": "password"}}})
}

pub fn run_suite(args: KubernetesSuiteArgs) -> Result<Exit> {
    let (config_map, job) = suite_manifest(&args)?;
    let docs: Vec<Value> = config_map.into_iter().chain([job]).collect();
    emit(&match args.common.output.as_str() {
        "json" => {
            serde_json::to_string_pretty(&json!({"apiVersion": "v1", "kind": "List", "items": docs}))? + "\n"
        }
        _ => docs.iter().map(yaml).collect::<Vec<_>>().join("---\n"),
    });
    Ok(Exit::Success)
}

/// Where a suite file is mounted in connbench's container.
const SUITE_DIR: &str = "/etc/connbench";

/// The sidecar Job `args` describe, and the ConfigMap holding its suite file (none for a
/// built-in suite, which the image carries).
pub fn suite_manifest(args: &KubernetesSuiteArgs) -> Result<(Option<Value>, Value)> {
    for t in &args.targets {
        refuse_password("--target", t, "--target-secret NAME")?;
    }
    refuse_password("--store", &args.common.store, "--store-secret NAME")?;
    require_postgres_store(&args.common.store, "a run in a pod")?;
    if !args.socket_dir.starts_with('/') || args.socket_dir == "/" || args.socket_dir.contains(':') {
        bail!(
            "--socket-dir {:?}: give an absolute directory of its own for the shared volume (e.g. /cloudsql)",
            args.socket_dir
        );
    }
    let (origin, text) = crate::experiment::suite::load_text(&args.suite)?;
    let builtin = origin == args.suite && !std::path::Path::new(&args.suite).exists();
    let quick = args.run_flags.iter().any(|f| f == "--quick");
    let profile = if quick {
        crate::experiment::suite::Profile::Quick
    } else {
        crate::experiment::suite::Profile::Full
    };
    let suite = crate::experiment::suite::Suite::parse_profile(&text, &origin, profile)?;
    // The pod has no sandbox: every target the cells use must be given.
    let split: Vec<(Option<&str>, &str)> = args
        .targets
        .iter()
        .map(|t| crate::target::split_label(t))
        .collect();
    let bare = split.iter().any(|(n, _)| n.is_none());
    let named: Vec<&str> = split.iter().filter_map(|(n, _)| *n).collect();
    for (t, (_, conninfo)) in args.targets.iter().zip(&split) {
        crate::target::Target::parse(conninfo)
            .with_context(|| format!("--target {:?}", crate::target::redact(t)))?;
    }
    let used: std::collections::BTreeSet<String> = suite
        .cells
        .iter()
        .filter_map(|c| c.settings.get("target").cloned())
        .collect();
    let missing: Vec<&String> = used
        .iter()
        .filter(|u| !bare && !named.contains(&u.as_str()))
        .collect();
    if !missing.is_empty() {
        bail!(
            "suite {origin} uses the target{} {}, which the pod cannot start (it has no sandbox): \
             give each as --target NAME=CONNINFO, as the pod reaches it (the sidecar's socket under {}, or 127.0.0.1)",
            if missing.len() == 1 { "" } else { "s" },
            missing.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(", "),
            args.socket_dir
        );
    }
    if let Some(unknown) = named.iter().find(|n| !used.contains(**n)) {
        bail!(
            "--target {unknown}=...: suite {origin} has no cell with target {unknown:?}; its targets: {}",
            used.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    for flag in ["--store", "--target", "--run", "--json", "--dry-run"] {
        if args
            .run_flags
            .iter()
            .any(|f| f == flag || f.starts_with(&format!("{flag}=")))
        {
            bail!("{flag} after `--`: the Job's own flags give it (or it has no use in a pod); leave it out of the run flags");
        }
    }
    let run = run_name(&args.common.run, &suite.name);
    let suite_arg = if builtin {
        args.suite.clone()
    } else {
        format!("{SUITE_DIR}/suite.toml")
    };
    let mut run_args: Vec<String> = vec!["run".into(), suite_arg];
    for t in &args.targets {
        run_args.extend(["--target".into(), t.clone()]);
    }
    run_args.extend([
        "--store".into(),
        args.common.store.clone(),
        "--run".into(),
        run.clone(),
    ]);
    run_args.extend(args.run_flags.iter().cloned());
    // The pod's command line, checked now rather than in the cluster.
    let check: Vec<String> = std::iter::once("connbench".to_string())
        .chain(run_args.iter().cloned())
        .collect();
    Cli::try_parse_from(&check).map_err(|e| {
        anyhow::anyhow!(
            "the run flags after `--` are not valid for `connbench run`:\n{}",
            e.render()
        )
    })?;
    let name = job_name(&run);
    let labels = json!({"app.kubernetes.io/name": "connbench", "connbench/run": run});
    let env = secret_envs(&args.common, split.iter().map(|(_, conninfo)| *conninfo));
    let socket_mount = json!({"name": "sidecar-socket", "mountPath": args.socket_dir});
    let mut mounts = vec![socket_mount.clone(), json!({"name": "tmp", "mountPath": "/tmp"})];
    let mut volumes = vec![
        json!({"name": "sidecar-socket", "emptyDir": {}}),
        json!({"name": "tmp", "emptyDir": {}}),
    ];
    let config_map = (!builtin).then(|| {
        let cm_name = format!("{}-suite", job_name(&run).chars().take(57).collect::<String>());
        mounts.push(json!({"name": "suite", "mountPath": SUITE_DIR, "readOnly": true}));
        volumes.push(json!({"name": "suite", "configMap": {"name": cm_name}}));
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": cm_name, "labels": labels},
            "data": {"suite.toml": text},
        })
    });
    let container = json!({
        "name": "connbench",
        "image": args.image,
        "args": run_args,
        "env": env,
        "volumeMounts": mounts,
        "securityContext": security_context(),
        "resources": resources(&args.common.cpu),
    });
    let mut sidecar = json!({
        "name": "sidecar",
        "image": args.sidecar_image,
        "restartPolicy": "Always",
        "volumeMounts": [socket_mount],
    });
    if !args.sidecar_args.is_empty() {
        sidecar["args"] = json!(args.sidecar_args);
    }
    if let Some(port) = args.sidecar_port {
        sidecar["startupProbe"] = json!({
            "tcpSocket": {"port": port},
            "periodSeconds": 1,
            "failureThreshold": 120,
        });
    }
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "completions": 1,
            "parallelism": 1,
            // A retried pod would start the run again under the same name, which the
            // store refuses; a failed run says why in the pod's log.
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 86400,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "initContainers": [sidecar],
                    "containers": [container],
                    "volumes": volumes,
                }
            }
        }
    });
    Ok((config_map, job))
}

/// `connbench-RUN`, as a DNS-1123 label (lower case, `-` for `_` and `.`, at most 63).
fn job_name(run: &str) -> String {
    let mut n: String = format!("connbench-{run}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    while n.ends_with('-') {
        n.pop();
    }
    n
}

/// `v` as YAML: block maps and lists, every string a JSON (so YAML double-quoted) scalar.
pub fn yaml(v: &Value) -> String {
    let mut out = String::new();
    write_yaml(v, 0, &mut out);
    out
}

/// A key as written: plain when it is a simple name (as Kubernetes' keys are), else quoted.
fn yaml_key(k: &str) -> String {
    let plain = k.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && k.chars().all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c));
    if plain {
        k.to_string()
    } else {
        Value::String(k.to_string()).to_string()
    }
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::Object(m) if m.is_empty() => Some("{}".into()),
        Value::Array(a) if a.is_empty() => Some("[]".into()),
        Value::Object(_) | Value::Array(_) => None,
        other => Some(other.to_string()),
    }
}

fn write_yaml(v: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, val) in m {
                let key = yaml_key(k);
                match scalar(val) {
                    Some(s) => out.push_str(&format!("{pad}{key}: {s}\n")),
                    None => {
                        out.push_str(&format!("{pad}{key}:\n"));
                        write_yaml(val, indent + 2, out);
                    }
                }
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                match scalar(item) {
                    Some(s) => out.push_str(&format!("{pad}- {s}\n")),
                    None => {
                        // The item's first line goes after the dash; the rest keep its indent.
                        let mut inner = String::new();
                        write_yaml(item, indent + 2, &mut inner);
                        let inner = inner.trim_start();
                        out.push_str(&format!("{pad}- {inner}"));
                    }
                }
            }
        }
        other => out.push_str(&format!("{pad}{}\n", scalar(other).unwrap_or_default())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_names_are_dns_labels() {
        assert_eq!(job_name("Exp2_big.run"), "connbench-exp2-big-run");
        assert!(job_name(&"x".repeat(100)).len() <= 63);
    }

    #[test]
    fn yaml_nests_maps_in_lists() {
        let v = json!({"a": [{"b": 1, "c": {"d": "x: y"}}, "s"], "e": {}, "f g": true});
        assert_eq!(
            yaml(&v),
            "a:\n  - b: 1\n    c:\n      d: \"x: y\"\n  - \"s\"\ne: {}\n\"f g\": true\n"
        );
    }

    #[test]
    fn a_password_in_the_target_is_refused() {
        let args = KubernetesJobArgs {
            workers: 3,
            image: "connbench:1".into(),
            target: "postgres://app:hunter2@db/app".into(),
            common: crate::cli::KubernetesCommon {
                store: "postgres://cb@results/cb".into(),
                run: Some("r".into()),
                store_secret: None,
                target_secret: None,
                cpu: None,
                output: "yaml".into(),
            },
            metrics_port: None,
            load: vec![],
        };
        let e = manifest(&args).unwrap_err().to_string();
        assert!(
            e.contains("--target holds a password") && !e.contains("hunter2"),
            "{e}"
        );
    }
}

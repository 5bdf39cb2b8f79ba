//! `connbench kubernetes`: manifests that run connbench on a cluster. `job` (here) is
//! the Indexed Job of a load's workers; `suite` ([`suite`]) is a Job that runs a suite in
//! one pod beside the user's own sidecar container (experiment 1 in their cluster); both
//! are written by [`yaml`]. What both Jobs share (passwords from Secrets, the container's
//! security context and resources, the names) is here.
//!
//! For `job`, each pod is one worker: Kubernetes gives it `JOB_COMPLETION_INDEX`, which `load`
//! takes as `--worker-index`, and every pod runs the same `connbench load ... --workers N
//! --run NAME --store URL`. Passwords never appear in the manifest: the store's comes
//! from a Secret as `CONNBENCH_STORE_PASSWORD`, the target's as the variable its engine
//! reads (`PGPASSWORD`, `MYSQL_PWD`), and a target or store with a password in its text
//! is refused. The load flags are checked here by parsing the very command line the pods
//! will run, so a typo fails now rather than in N pods.

use anyhow::{bail, Result};
use clap::Parser;
use serde_json::{json, Value};

use crate::cli::{Cli, KubernetesJobArgs};
use crate::exit::Exit;
use crate::setup::emit;

mod suite;
mod yaml;

pub use suite::{run_suite, suite_manifest};
pub use yaml::yaml;

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
    if crate::targets::redact(text) != text
        || crate::targets::parse_raw(text).is_ok_and(|raw| raw.contains_key("password"))
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
    let load_args = load_command_line(args, &run)?;
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

/// The workers' `connbench load` command line, checked now by parsing it as the pods
/// will (with Kubernetes' index for worker 0): the load flags given after `--`, and the
/// Job's own (workers, run, store, metrics, a worker timeout for slow pulls).
fn load_command_line(args: &KubernetesJobArgs, run: &str) -> Result<Vec<String>> {
    let mut load_args: Vec<String> = vec!["load".into(), args.target.clone()];
    load_args.extend(args.load.iter().cloned());
    load_args.extend([
        "--workers".into(),
        args.workers.to_string(),
        "--run".into(),
        run.to_string(),
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
    Ok(load_args)
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
            .map(|conninfo| match crate::targets::Target::parse(conninfo) {
                Ok(t) if t.engine == crate::targets::Engine::Mysql => "MYSQL_PWD",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_names_are_dns_labels() {
        assert_eq!(job_name("Exp2_big.run"), "connbench-exp2-big-run");
        assert!(job_name(&"x".repeat(100)).len() <= 63);
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

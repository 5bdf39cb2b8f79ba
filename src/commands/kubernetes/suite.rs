//! `connbench kubernetes suite`: a Job that runs a suite in one pod beside the user's own
//! sidecar container (experiment 1 in their cluster), and a ConfigMap with the suite
//! file when it is not a built-in one.
//!
//! The sidecar is a native sidecar (an init container with `restartPolicy: Always`,
//! Kubernetes 1.29+): a plain second container never ends, so the Job would never
//! complete; a native one starts first, is ready first when it has a startup probe, and
//! is stopped when connbench's container ends. The two share an emptyDir for the
//! sidecar's socket, and connbench's container runs as non-root on a read-only root
//! filesystem (its only writable place an emptyDir at /tmp).

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde_json::{json, Value};

use super::{
    job_name, refuse_password, require_postgres_store, resources, run_name, secret_envs, security_context,
    yaml,
};
use crate::cli::{Cli, KubernetesSuiteArgs};
use crate::exit::Exit;
use crate::experiment::suite::Suite;
use crate::setup::emit;

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
        crate::experiment::suite::Lengths::Quick
    } else {
        crate::experiment::suite::Lengths::Full
    };
    let suite = Suite::parse_profile(&text, &origin, profile)?;
    check_targets(args, &suite, &origin)?;
    let run = run_name(&args.common.run, &suite.name);
    let run_args = run_command_line(args, builtin, &run)?;
    Ok(suite_job(
        args,
        &run,
        run_args,
        (!builtin).then_some(text.as_str()),
    ))
}

/// The pod has no sandbox: every target the cells use must be given, each a conninfo,
/// and none the suite does not use.
fn check_targets(args: &KubernetesSuiteArgs, suite: &Suite, origin: &str) -> Result<()> {
    let split: Vec<(Option<&str>, &str)> = args
        .targets
        .iter()
        .map(|t| crate::targets::split_label(t))
        .collect();
    let bare = split.iter().any(|(n, _)| n.is_none());
    let named: Vec<&str> = split.iter().filter_map(|(n, _)| *n).collect();
    for (t, (_, conninfo)) in args.targets.iter().zip(&split) {
        crate::targets::Target::parse(conninfo)
            .with_context(|| format!("--target {:?}", crate::targets::redact(t)))?;
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
    Ok(())
}

/// The pod's `connbench run` command line, checked now rather than in the cluster: the
/// suite (a built-in by name, else the mounted file), the targets, the store and the
/// run's name, then the run flags given after `--`.
fn run_command_line(args: &KubernetesSuiteArgs, builtin: bool, run: &str) -> Result<Vec<String>> {
    for flag in ["--store", "--target", "--run", "--json", "--dry-run"] {
        if args
            .run_flags
            .iter()
            .any(|f| f == flag || f.starts_with(&format!("{flag}=")))
        {
            bail!("{flag} after `--`: the Job's own flags give it (or it has no use in a pod); leave it out of the run flags");
        }
    }
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
        run.to_string(),
    ]);
    run_args.extend(args.run_flags.iter().cloned());
    let check: Vec<String> = std::iter::once("connbench".to_string())
        .chain(run_args.iter().cloned())
        .collect();
    Cli::try_parse_from(&check).map_err(|e| {
        anyhow::anyhow!(
            "the run flags after `--` are not valid for `connbench run`:\n{}",
            e.render()
        )
    })?;
    Ok(run_args)
}

/// The Job (connbench's container beside the sidecar, sharing the socket's emptyDir)
/// and, for a suite file (`suite_text`), the ConfigMap that carries it.
fn suite_job(
    args: &KubernetesSuiteArgs,
    run: &str,
    run_args: Vec<String>,
    suite_text: Option<&str>,
) -> (Option<Value>, Value) {
    let name = job_name(run);
    let labels = json!({"app.kubernetes.io/name": "connbench", "connbench/run": run});
    let conninfos = args.targets.iter().map(|t| crate::targets::split_label(t).1);
    let env = secret_envs(&args.common, conninfos);
    let socket_mount = json!({"name": "sidecar-socket", "mountPath": args.socket_dir});
    let mut mounts = vec![socket_mount.clone(), json!({"name": "tmp", "mountPath": "/tmp"})];
    let mut volumes = vec![
        json!({"name": "sidecar-socket", "emptyDir": {}}),
        json!({"name": "tmp", "emptyDir": {}}),
    ];
    let config_map = suite_text.map(|text| {
        let cm_name = format!("{}-suite", job_name(run).chars().take(57).collect::<String>());
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
                    "initContainers": [sidecar(args, socket_mount)],
                    "containers": [container],
                    "volumes": volumes,
                }
            }
        }
    });
    (config_map, job)
}

/// The user's sidecar, as a native sidecar (see the module's note), with a startup
/// probe on its TCP port when given, so the first cell does not race its start.
fn sidecar(args: &KubernetesSuiteArgs, socket_mount: Value) -> Value {
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
    sidecar
}

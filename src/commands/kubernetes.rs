//! `connbench kubernetes job`: the Indexed Job that runs a load's workers on a cluster.
//!
//! Each pod is one worker: Kubernetes gives it `JOB_COMPLETION_INDEX`, which `load`
//! takes as `--worker-index`, and every pod runs the same `connbench load ... --workers N
//! --run NAME --store URL`. Passwords never appear in the manifest: the store's comes
//! from a Secret as `CONNBENCH_STORE_PASSWORD`, the target's as the variable its engine
//! reads (`PGPASSWORD`, `MYSQL_PWD`), and a target or store with a password in its text
//! is refused. The load flags are checked here by parsing the very command line the pods
//! will run, so a typo fails now rather than in N pods.
//!
//! The manifest is written as YAML by a small writer below: every string is emitted as a
//! JSON string, which is a valid YAML double-quoted scalar, so no value can change
//! meaning (no crate needed for a tree of maps, lists and scalars).

use anyhow::{bail, Result};
use clap::Parser;
use serde_json::{json, Value};

use super::emit;
use crate::cli::{Cli, KubernetesJobArgs};
use crate::Exit;

pub fn run_job(args: KubernetesJobArgs) -> Result<Exit> {
    let manifest = manifest(&args)?;
    emit(&match args.output.as_str() {
        "json" => serde_json::to_string_pretty(&manifest)? + "\n",
        _ => yaml(&manifest),
    });
    Ok(Exit::Success)
}

/// The Job manifest `args` describe.
pub fn manifest(args: &KubernetesJobArgs) -> Result<Value> {
    for (what, text, fix) in [
        ("--target", &args.target, "--target-secret NAME"),
        ("--store", &args.store, "--store-secret NAME"),
    ] {
        if crate::target::redact(text) != *text
            || crate::target::parse_raw(text).is_ok_and(|raw| raw.contains_key("password"))
        {
            bail!(
                "{what} holds a password, which would be written into the manifest: remove it and give {fix} \
                 (a Secret with the password under the key `password`)"
            );
        }
    }
    if !crate::experiment::store::is_postgres_location(&args.store) {
        bail!(
            "--store {}: workers on many machines need one PostgreSQL store (postgres://user@host/db), not a file",
            args.store
        );
    }
    let run = match &args.run {
        Some(r) => r.clone(),
        None => format!(
            "load-{}",
            crate::units::now_utc()
                .replace([':', 'T'], "-")
                .trim_end_matches('Z')
        ),
    };
    let mut load_args: Vec<String> = vec!["load".into(), args.target.clone()];
    load_args.extend(args.load.iter().cloned());
    load_args.extend([
        "--workers".into(),
        args.workers.to_string(),
        "--run".into(),
        run.clone(),
        "--store".into(),
        args.store.clone(),
    ]);
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
    let engine_password_var = match crate::target::Target::parse(&args.target) {
        Ok(t) if t.engine == crate::target::Engine::Mysql => "MYSQL_PWD",
        _ => "PGPASSWORD",
    };
    let name = job_name(&run);
    let labels = json!({"app.kubernetes.io/name": "connbench", "connbench/run": run});
    let secret = |var: &str, secret: &str| json!({"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": "password"}}});
    let mut env = Vec::new();
    if let Some(s) = &args.store_secret {
        env.push(secret("CONNBENCH_STORE_PASSWORD", s));
    }
    if let Some(s) = &args.target_secret {
        env.push(secret(engine_password_var, s));
    }
    let mut container = json!({
        "name": "connbench",
        "image": args.image,
        "args": load_args,
        "env": env,
    });
    if let Some(cpu) = &args.cpu {
        container["resources"] = json!({"requests": {"cpu": cpu}, "limits": {"cpu": cpu}});
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
                "metadata": {"labels": labels},
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
                }
            }
        }
    }))
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
            store: "postgres://cb@results/cb".into(),
            run: Some("r".into()),
            store_secret: None,
            target_secret: None,
            cpu: None,
            output: "yaml".into(),
            load: vec![],
        };
        let e = manifest(&args).unwrap_err().to_string();
        assert!(
            e.contains("--target holds a password") && !e.contains("hunter2"),
            "{e}"
        );
    }
}

//! `connbench load`: the flags become `LoadOptions` (the same a suite cell becomes), the
//! options a plan on the target (a sandbox's when asked, through its route), the engine
//! runs it, and the report is printed in text or JSON.

use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::{emit, init_sandbox_tables, routed, stop_on_signals};
use crate::cli::LoadArgs;
use crate::connect::Subject;
use crate::experiment::workers::{share, Worker};
use crate::load::init::{TableChoice, Tables};
use crate::load::workload::{Builtin, QueryMode};
use crate::proto::Endpoint;
use crate::report;
use crate::sandbox::{Sandbox, SandboxOptions};
use crate::stats;
use crate::Exit;

/// pgbench's DBNAME: a bare word (no `=`, not a URI) names a database, as libpq reads
/// pgbench's and psql's database argument; anything else is a conninfo or URI as given.
fn pgbench_dbname(text: &str) -> String {
    let word = !text.is_empty()
        && !text.contains('=')
        && !text.contains("://")
        && !text.contains(char::is_whitespace);
    if word {
        format!("dbname={text}")
    } else {
        text.to_string()
    }
}

pub async fn run_load(args: LoadArgs) -> Result<Exit> {
    // pgbench's -V, -b list and --show-script print and exit, as pgbench does.
    if args.pgbench.version {
        emit(&format!(
            "connbench load (connbench) {}\n",
            env!("CARGO_PKG_VERSION")
        ));
        return Ok(Exit::Success);
    }
    if args.scripts.list {
        let mut out = String::from("built-in scripts (-b NAME, or a prefix of one):\n");
        for b in Builtin::ALL {
            out += &format!("  {}\n", b.as_str());
        }
        emit(&out);
        return Ok(Exit::Success);
    }
    let mut options = args.options()?;
    if let Some(name) = &args.pgbench.show_script {
        let b =
            crate::options::find_builtin(name).map_err(|e| anyhow::anyhow!("--show-script {name:?}: {e}"))?;
        let tables = match options.tables {
            TableChoice::Connbench => Tables::Connbench(options.schema.clone()),
            _ => Tables::Pgbench,
        };
        emit(&format!(
            "-- {}\n{}",
            b.as_str(),
            crate::options::builtin_text(b, &tables)
        ));
        return Ok(Exit::Success);
    }
    if args.pgbench.vacuum_all {
        eprintln!(
            "note: -v: connbench does not vacuum before a run (pgbench -v vacuums the four tables); \
             run VACUUM ANALYZE on them first to start from vacuumed tables"
        );
    }
    // Every check that needs no server runs before a sandbox starts.
    for w in options.check()? {
        eprintln!("warning: {w}");
    }
    let script_name = options.workload_name();
    // A worker of a many-machine run takes its share of the clients and the rate.
    let (total_clients, total_rate) = (options.clients, options.rate);
    let share = match args.workers.workers {
        None => None,
        Some(n) => {
            if args.sandbox {
                bail!(
                    "--workers with --sandbox would give each worker a server of its own: start one with \
                     `connbench sandbox start` (or use your database) and give every worker its target"
                );
            }
            let index = args.workers.worker_index.context(
                "--workers needs --worker-index (or JOB_COMPLETION_INDEX, which Kubernetes' Indexed Jobs set)",
            )?;
            let (first, count) = share(options.clients, n as usize, index as usize)?;
            options.clients = count;
            options.rate = options.rate.map(|r| r * count as f64 / total_clients as f64);
            Some((index as usize, n as usize, first))
        }
    };

    // pgbench's -l: the log files are created now, so one that cannot be is refused before
    // a sandbox starts or a client connects.
    let log_files = options
        .log
        .as_ref()
        .map(|l| l.create(options.threads()))
        .transpose()?;

    // The sandbox lives until this function returns; its Drop stops and removes it.
    let mut sandbox = None;
    if args.sandbox && !args.pgbench.target_keys().is_empty() {
        bail!("-h, -p and -U say where your database is; with --sandbox the sandbox's target does: drop one or the other");
    }
    let target = if args.sandbox {
        let sb = Sandbox::start(&SandboxOptions {
            durable: args.server.durable,
            cpus: args.server.cpus.cpus(),
            mariadb: args
                .target
                .as_deref()
                .is_some_and(crate::sandbox::is_mariadb_target),
            ..SandboxOptions::default()
        })
        .await?;
        eprintln!("sandbox: started in {}", sb.info.dir.display());
        if options.on_sysbench_tables() {
            super::init_sandbox_sysbench_tables(&sb).await?;
        } else if options.reads_dataset() {
            init_sandbox_tables(&sb, args.schema(), args.scale).await?;
        }
        let name = args.target.as_deref().unwrap_or("unix");
        let t = sb.info.target(name)?.target()?;
        sandbox = Some(sb);
        t
    } else if let Some(t) = super::sandbox_target(args.target.as_deref().unwrap_or(""))? {
        if !args.pgbench.target_keys().is_empty() {
            bail!("-h, -p and -U say where your database is; the sandbox's target name does: drop one or the other");
        }
        t
    } else {
        let text = args.target.as_deref().map(pgbench_dbname).unwrap_or_default();
        crate::target::Target::parse_overriding(
            &text,
            &args.pgbench.target_keys(),
            &crate::target::ProcessEnv,
        )
        .with_context(|| format!("target {:?}", crate::target::redact(&text)))?
    };
    let direct = Endpoint::new(target)?;
    let (mut routed_subjects, routes) = routed(
        vec![Subject {
            endpoint: direct.clone(),
            description: None,
        }],
        &args.path,
        args.distance,
    )
    .await?;
    let endpoint = routed_subjects.remove(0).endpoint;
    let dataset = options.dataset(&direct, i64::from(args.scale)).await?;
    let scale = dataset.scale;
    if let Some(w) = options.scale_warning(total_clients, scale) {
        eprintln!("warning: {w}");
    }
    let mut plan = options.plan(endpoint, &dataset, None, args.progress)?;
    plan.log = log_files;
    let warmup = plan.warmup;
    let user_server = match (args.server_pid, &args.server_cgroup) {
        (Some(pid), _) => Some(crate::host::Source::Tree(pid)),
        (None, Some(dir)) => Some(crate::host::Source::Cgroup(dir.clone())),
        (None, None) => None,
    };
    // A running sandbox of connbench's that the target points at: its servers' CPU is
    // measured from the pids (or cgroups) it recorded.
    let own = super::own_sandbox(&direct.target).filter(|_| sandbox.is_none());
    plan.accounting = crate::options::accounting(
        &direct.target,
        sandbox.as_ref().map(|s: &Sandbox| &s.info).or(own.as_ref()),
        user_server,
    )?;
    plan.accounting.relays = routes.iter().flat_map(|r| r.relay_threads()).collect();
    let settings = report::load::LoadSettings {
        target: plan.endpoint.target.name(),
        conninfo: plan.endpoint.target.conninfo(),
        workload: script_name,
        mode: plan.mode,
        clients: plan.clients,
        threads: plan.threads,
        end: plan.end,
        warmup_s: plan.warmup.as_secs_f64(),
        rate_tps: plan.rate,
        latency_limit_ms: plan.latency_limit.map(|d| d.as_secs_f64() * 1e3),
        random_seed: Some(plan.seed),
        defines: options
            .defines
            .iter()
            .map(|(n, v)| (n.clone(), report::load::DefineValue::of(v)))
            .collect(),
        think_ms: plan.think.as_secs_f64() * 1e3,
        connection: plan.policy.clone(),
        interval_s: plan.interval.as_secs_f64(),
        scale,
        tables: Some(dataset.tables.describe()),
        scripts: options
            .workloads
            .iter()
            .map(|w| report::load::ScriptSetting {
                name: w.workload.name(),
                weight: w.weight,
            })
            .collect(),
        max_tries: options.max_tries,
        failures_detailed: args.pgbench.failures_detailed,
    };
    let stop = stop_on_signals();
    let worker = match share {
        None => None,
        Some((index, workers, first)) => {
            let whole = report::load::LoadSettings {
                clients: total_clients,
                rate_tps: total_rate,
                random_seed: args.random_seed.0,
                threads: args.threads * workers,
                ..settings.clone()
            };
            let store = super::open_store(&args.workers.store)?;
            let location = store.location().to_string();
            let name = args.workers.run.clone().context("--workers needs --run NAME")?;
            let w = Worker::join(
                store,
                &name,
                workers,
                index,
                &serde_json::to_value(&whole)?,
                &crate::experiment::store::Environment::here(None, None, None),
            )?;
            eprintln!(
                "worker {index} of {workers}: {} client{} (ids from {first}) of run {name:?} in {location}; \
                 waiting for the others to connect",
                plan.clients,
                if plan.clients == 1 { "" } else { "s" }
            );
            plan.first_client = first;
            plan.start_gate = Some(w.gate(args.workers.worker_timeout, stop.clone()));
            // Progress arrives per interval, so each interval is saved as it ends.
            plan.progress = Some(plan.interval);
            Some(w)
        }
    };
    let print_every = match (&worker, args.progress) {
        (Some(_), Some(p)) => Some((p.as_secs_f64() / plan.interval.as_secs_f64()).round().max(1.0) as usize),
        (_, None) => None,
        (None, Some(_)) => Some(1),
    };
    // Live metrics ride on the progress periods: every second unless -P (or a worker's
    // intervals) already set a period.
    let exporter = match &args.metrics.listen {
        None => None,
        Some(listen) => {
            if plan.progress.is_none() {
                plan.progress = Some(Duration::from_secs(1));
            }
            let e = crate::live::Exporter::start(
                listen,
                crate::live::Labels {
                    run: args.workers.run.clone().unwrap_or_else(|| "load".into()),
                    worker: args.workers.worker_index.unwrap_or(0),
                },
            )?;
            e.begin(&settings.workload, &settings.target, plan.clients as u64);
            eprintln!("metrics: serving http://{}/metrics", e.addr);
            Some(e)
        }
    };
    let mut save_error = None;
    let run = crate::load::engine::run(plan, stop, |p| {
        if let Some(e) = &exporter {
            e.add_period(&settings.workload, &p.totals);
        }
        let index = ((p.at_s / p.period_s).round() as usize).saturating_sub(1);
        if let Some(w) = &worker {
            let i = &p.totals;
            if let Err(e) = w.save_interval(index, i.transactions, i.failures, i.connects, &i.latency_us) {
                save_error.get_or_insert(e);
            }
        }
        if print_every.is_none_or(|k| (index + 1) % k != 0) {
            return;
        }
        let l = stats::load::latency(&p.totals.latency_us, 1_000);
        let q = |f: fn(&stats::load::Latency) -> u64| {
            l.as_ref()
                .map(|l| report::format_ns(f(l) as f64))
                .unwrap_or_else(|| "-".into())
        };
        // --progress-timestamp: the report's own time, as pgbench prints it.
        let at = if args.pgbench.progress_timestamp {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0)
        } else {
            p.at_s
        };
        eprintln!(
            "progress: {:.1} s, {:.1} tps, p50 {}, p99 {}, {} failed",
            at,
            p.totals.transactions as f64 / p.period_s,
            q(|l| l.p50_ns),
            q(|l| l.p99_ns),
            p.totals.failures
        );
    })
    .await;
    let run = match (run, &worker) {
        (Ok(run), Some(w)) => {
            if let Some(e) = save_error {
                eprintln!("warning: an interval could not be saved as it ended ({e:#}); the end saves them all again");
            }
            w.finish(&run, warmup)
                .context("cannot save this worker's results")?;
            eprintln!(
                "worker {} of {}: saved; `connbench report {} --store ...` merges the workers once all have ended",
                w.index, w.workers, w.name
            );
            run
        }
        (Ok(run), None) => run,
        (Err(e), Some(w)) => {
            if let Err(save) = w.fail(&format!("{e:#}")) {
                eprintln!("warning: cannot mark the run failed in the store: {save:#}");
            }
            return Err(e);
        }
        (Err(e), None) => return Err(e),
    };
    if let Some(e) = &exporter {
        e.finish(&settings.workload, &run.recorder);
    }
    let summary = stats::load::summarize_load(&run, settings.clients, settings.interval_s);
    let text = if args.json {
        report::load::json(
            &settings,
            &summary,
            run.server_version.as_deref(),
            run.tls.as_ref(),
            run.interrupted,
        )
    } else {
        report::load::text(
            &settings,
            &summary,
            run.server_version.as_deref(),
            run.interrupted,
            args.series,
        )
    };
    emit(&text);
    if let Some(m) = summary
        .machine
        .filter(|m| m.steal_percent > stats::load::STEAL_LIMIT_PERCENT)
    {
        eprintln!(
            "warning: the hypervisor took {:.0}% of this machine's CPU during the measurement (steal time): \
             another tenant ran on our cores, so the figures are slower than the path; re-run, and compare \
             runs with `connbench run`, which retakes a repetition above {}%",
            m.steal_percent,
            stats::load::STEAL_LIMIT_PERCENT
        );
    }
    let prepared_trouble = summary
        .failures
        .iter()
        .any(|f| f.kind == "26000" || f.kind == "42P05");
    if args.mode == QueryMode::Prepared && prepared_trouble {
        eprintln!(
            "note: prepared statements live on one server connection, but a transaction-pooling proxy \
             (PgBouncer before 1.21) hands each transaction any server connection: a statement prepared on \
             one is missing on another (26000) or already there from an earlier client (42P05); \
             use -M extended, or session pooling"
        );
    }
    if let (Some(e), Some(linger)) = (&exporter, args.metrics.linger) {
        if !run.interrupted {
            super::linger_metrics(e, linger).await;
        }
    }
    if let Some(sb) = sandbox.take() {
        let dir = sb.info.dir.clone();
        sb.stop()?;
        eprintln!("sandbox: stopped and removed {}", dir.display());
    }
    for why in &run.aborted {
        eprintln!("error: {why}");
    }
    if args.pgbench.exit_on_abort && !run.aborted.is_empty() {
        eprintln!(
            "error: --exit-on-abort: a client aborted, so every client stopped there; the figures above cover \
             the run until then"
        );
    }
    if summary.transactions == 0 && !run.interrupted {
        let first = run.first_error.as_deref().unwrap_or("no transaction completed");
        eprintln!("error: every transaction failed; the first error: {first}");
        return Ok(Exit::Failed);
    }
    Ok(if run.interrupted {
        Exit::Interrupted
    } else if !run.aborted.is_empty() {
        // As pgbench: a client the script aborted makes the results incomplete.
        if !args.pgbench.exit_on_abort {
            eprintln!(
                "error: {} client(s) aborted, so the figures above cover only what ran before; fix the \
                 script, or give --continue-on-error to count SQL errors and go on",
                run.aborted.len()
            );
        }
        Exit::Failed
    } else {
        Exit::Success
    })
}

//! `connbench load`: the flags, validated into a `LoadRequest` (its `LoadOptions` the
//! same a suite cell becomes), are prepared into a plan on the target (a sandbox's when
//! asked, through its route), `load::threads` runs it, and the report is printed in text or
//! JSON. Each step is a function below, in the order `run_load` calls them.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::sync::watch;

use crate::cli::LoadArgs;
use crate::connect::Subject;
use crate::exit::Exit;
use crate::experiment::workers::Worker;
use crate::host::Accounting;
use crate::live::{Exporter, Labels};
use crate::load::plan::{LoadPlan, LoadRun, Progress};
use crate::load::threads;
use crate::options::{Dataset, LoadCommand, LoadRequest, LoadTarget};
use crate::proto::Endpoint;
use crate::report::{self, load::LoadSettings};
use crate::sandbox::{Sandbox, SandboxOptions};
use crate::setup::route::routed;
use crate::setup::tables::{init_sandbox_sysbench_tables, init_sandbox_tables};
use crate::setup::targets::{own_sandbox, sandbox_target};
use crate::setup::{emit, stop_on_signals};
use crate::stats;
use crate::workload::QueryMode;

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
    let run = match args.command()? {
        LoadCommand::Print(text) => {
            emit(&text);
            return Ok(Exit::Success);
        }
        LoadCommand::Run(run) => *run,
    };
    announce(&run);
    // pgbench's -l: the log files are created now, so one that cannot be is refused before
    // a sandbox starts or a client connects.
    let log_files = run
        .options
        .log
        .as_ref()
        .map(|l| l.create(run.options.threads()))
        .transpose()?;
    // The sandbox lives until this function returns; its Drop stops and removes it.
    let (mut sandbox, direct) = open_target(&run).await?;
    let (endpoint, routes) = route(&run, &direct).await?;
    let dataset = run.options.dataset(&direct, i64::from(run.scale)).await?;
    if let Some(w) = run.options.scale_warning(total_clients(&run), dataset.scale) {
        eprintln!("warning: {w}");
    }
    let mut plan = run.options.plan(endpoint, &dataset, None, run.progress)?;
    plan.log = log_files;
    plan.accounting = accounting(&run, &direct, sandbox.as_ref())?;
    plan.accounting.relays = routes.iter().flat_map(|r| r.relay_threads()).collect();
    let settings = load_settings(&run, &plan, &dataset);
    let stop = stop_on_signals();
    let worker = join_worker(&run, &settings, &mut plan, &stop)?;
    let print_every = progress_every(&run, worker.is_some(), plan.interval);
    let exporter = serve_metrics(&run, &settings, &mut plan)?;
    let warmup = plan.warmup;
    let result = measure(&run, plan, stop, print_every, worker.as_ref(), exporter.as_ref()).await;
    let (loaded, save_error) = result;
    let loaded = settle_worker(loaded, worker.as_ref(), save_error, warmup)?;
    let summary = report_load(&run, &settings, &loaded, exporter.as_ref());
    if let (Some(e), Some(linger)) = (&exporter, run.metrics.as_ref().and_then(|m| m.linger)) {
        if !loaded.interrupted {
            crate::live::linger(e, linger).await;
        }
    }
    if let Some(sb) = sandbox.take() {
        let dir = sb.info.dir.clone();
        sb.stop()?;
        eprintln!("sandbox: stopped and removed {}", dir.display());
    }
    Ok(exit_status(&run, &loaded, &summary))
}

/// What is said before anything starts: pgbench's -v not honoured, and the scripts'
/// warnings (what will fail when it runs, as pgbench warns).
fn announce(run: &LoadRequest) {
    if run.vacuum_note {
        eprintln!(
            "note: -v: connbench does not vacuum before a run (pgbench -v vacuums the four tables); \
             run VACUUM ANALYZE on them first to start from vacuumed tables"
        );
    }
    for w in &run.warnings {
        eprintln!("warning: {w}");
    }
}

/// The whole run's clients: all of them, not this worker's share.
fn total_clients(run: &LoadRequest) -> usize {
    run.workers
        .as_ref()
        .map_or(run.options.clients, |w| w.total_clients)
}

/// The target: a sandbox started now (with its tables), a running sandbox's target by
/// name, or the conninfo given with -h/-p/-U over it.
async fn open_target(run: &LoadRequest) -> Result<(Option<Sandbox>, Endpoint)> {
    let (text, keys) = match &run.target {
        LoadTarget::OwnSandbox {
            name,
            durable,
            cpus,
            mariadb,
        } => {
            let sb = Sandbox::start(&SandboxOptions {
                durable: *durable,
                cpus: *cpus,
                mariadb: *mariadb,
                ..SandboxOptions::default()
            })
            .await?;
            eprintln!("sandbox: started in {}", sb.info.dir.display());
            if run.options.on_sysbench_tables() {
                init_sandbox_sysbench_tables(&sb).await?;
            } else if run.options.reads_dataset() {
                init_sandbox_tables(&sb, &run.options.schema, run.scale).await?;
            }
            let t = sb.info.target(name)?.target()?;
            return Ok((Some(sb), Endpoint::new(t)?));
        }
        LoadTarget::Given { text, keys } => (text, keys),
    };
    let target = if let Some(t) = sandbox_target(text)? {
        if !keys.is_empty() {
            bail!("-h, -p and -U say where your database is; the sandbox's target name does: drop one or the other");
        }
        t
    } else {
        let text = pgbench_dbname(text);
        crate::targets::Target::parse_overriding(&text, keys, &crate::targets::ProcessEnv)
            .with_context(|| format!("target {:?}", crate::targets::redact(&text)))?
    };
    Ok((None, Endpoint::new(target)?))
}

/// The endpoint the clients connect to: the target itself, or a relay before it.
async fn route(run: &LoadRequest, direct: &Endpoint) -> Result<(Endpoint, Vec<crate::route::Route>)> {
    let subject = Subject {
        endpoint: direct.clone(),
        description: None,
    };
    let (mut subjects, routes) = routed(vec![subject], &run.path, run.distance).await?;
    Ok((subjects.remove(0).endpoint, routes))
}

/// Whose CPU the run reads besides the client's. A running sandbox of connbench's that
/// the target points at: its servers' CPU is measured from the pids (or cgroups) it
/// recorded.
fn accounting(run: &LoadRequest, direct: &Endpoint, sandbox: Option<&Sandbox>) -> Result<Accounting> {
    let own = own_sandbox(&direct.target).filter(|_| sandbox.is_none());
    crate::options::accounting(
        &direct.target,
        sandbox.map(|s| &s.info).or(own.as_ref()),
        run.server.clone(),
    )
}

/// The run's settings as the report states them.
fn load_settings(run: &LoadRequest, plan: &LoadPlan, dataset: &Dataset) -> LoadSettings {
    let options = &run.options;
    LoadSettings {
        target: plan.endpoint.target.name(),
        conninfo: plan.endpoint.target.conninfo(),
        workload: options.workload_name(),
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
        scale: dataset.scale,
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
        failures_detailed: run.output.failures_detailed,
    }
}

/// A worker of a many-machine run: joins the run in the store and waits at its start
/// gate for the others.
fn join_worker(
    run: &LoadRequest,
    settings: &LoadSettings,
    plan: &mut LoadPlan,
    stop: &watch::Receiver<bool>,
) -> Result<Option<Worker>> {
    let Some(share) = &run.workers else {
        return Ok(None);
    };
    let (index, workers, first) = (share.index, share.workers, share.first);
    let whole = LoadSettings {
        clients: share.total_clients,
        rate_tps: share.total_rate,
        random_seed: run.options.random_seed,
        threads: run.options.threads * workers,
        ..settings.clone()
    };
    let store = crate::experiment::store::Store::open_at(share.store.as_deref())?;
    let location = store.location().to_string();
    let name = &share.run;
    let w = Worker::join(
        store,
        name,
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
    plan.start_gate = Some(w.gate(share.timeout, stop.clone()));
    // Progress arrives per interval, so each interval is saved as it ends.
    plan.progress = Some(plan.interval);
    Ok(Some(w))
}

/// Every how many progress periods a line is printed: each one, or for a worker (whose
/// periods are its intervals) every -P's worth of them.
fn progress_every(run: &LoadRequest, worker: bool, interval: Duration) -> Option<usize> {
    match (worker, run.progress) {
        (true, Some(p)) => Some((p.as_secs_f64() / interval.as_secs_f64()).round().max(1.0) as usize),
        (_, None) => None,
        (false, Some(_)) => Some(1),
    }
}

/// Live metrics ride on the progress periods: every second unless -P (or a worker's
/// intervals) already set a period; the connect ramp before them is counted as it goes.
fn serve_metrics(
    run: &LoadRequest,
    settings: &LoadSettings,
    plan: &mut LoadPlan,
) -> Result<Option<Exporter>> {
    let Some(m) = &run.metrics else {
        return Ok(None);
    };
    if plan.progress.is_none() {
        plan.progress = Some(Duration::from_secs(1));
    }
    let labels = Labels {
        run: m.run.clone(),
        worker: m.worker,
    };
    let first = (
        settings.workload.as_str(),
        settings.target.as_str(),
        plan.clients as u64,
    );
    let exporter = crate::live::start(Some(&m.listen), labels, Some(first))?;
    plan.ramp_progress = exporter.as_ref().and_then(|e| e.ramp(&settings.workload));
    Ok(exporter)
}

/// The load's run, each progress period handed to the exporter, saved by a worker,
/// and printed; with the first interval a worker could not save.
async fn measure(
    run: &LoadRequest,
    plan: LoadPlan,
    stop: watch::Receiver<bool>,
    print_every: Option<usize>,
    worker: Option<&Worker>,
    exporter: Option<&Exporter>,
) -> (Result<LoadRun>, Option<anyhow::Error>) {
    let workload = run.options.workload_name();
    let mut save_error = None;
    let result = threads::run(plan, stop, |p| {
        if let Some(e) = exporter {
            e.add_period(&workload, &p.totals);
        }
        let index = ((p.at_s / p.period_s).round() as usize).saturating_sub(1);
        if let Some(w) = worker {
            if let Err(e) = w.save_interval(index, &p.totals) {
                save_error.get_or_insert(e);
            }
        }
        if print_every.is_some_and(|k| (index + 1) % k == 0) {
            print_progress(&p, run.output.progress_timestamp);
        }
    })
    .await;
    (result, save_error)
}

/// A progress line: tps, p50 and p99 of the period, and its failures.
fn print_progress(p: &Progress, timestamp: bool) {
    let l = stats::load::latency(&p.totals.latency_us, 1_000);
    let q = |f: fn(&stats::load::Latency) -> u64| {
        l.as_ref()
            .map(|l| report::format_ns(f(l) as f64))
            .unwrap_or_else(|| "-".into())
    };
    // --progress-timestamp: the report's own time, as pgbench prints it.
    let at = if timestamp {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    } else {
        p.at_s
    };
    // Refused connects only when there are some, so the line stays pgbench's otherwise.
    let refused = match p.totals.refused {
        0 => String::new(),
        n => format!(", {n} connects refused"),
    };
    eprintln!(
        "progress: {:.1} s, {:.1} tps, p50 {}, p99 {}, {} failed{refused}",
        at,
        p.totals.transactions as f64 / p.period_s,
        q(|l| l.p50_ns),
        q(|l| l.p99_ns),
        p.totals.failures
    );
}

/// A worker saves its results at the end (or marks the run failed); alone, the run is
/// what `load::threads` returned.
fn settle_worker(
    result: Result<LoadRun>,
    worker: Option<&Worker>,
    save_error: Option<anyhow::Error>,
    warmup: Duration,
) -> Result<LoadRun> {
    let Some(w) = worker else {
        return result;
    };
    let run = match result {
        Ok(run) => run,
        Err(e) => {
            if let Err(save) = w.fail(&format!("{e:#}")) {
                eprintln!("warning: cannot mark the run failed in the store: {save:#}");
            }
            return Err(e);
        }
    };
    if let Some(e) = save_error {
        eprintln!(
            "warning: an interval could not be saved as it ended ({e:#}); the end saves them all again"
        );
    }
    w.finish(&run, warmup)
        .context("cannot save this worker's results")?;
    eprintln!(
        "worker {} of {}: saved; `connbench report {} --store ...` merges the workers once all have ended",
        w.index, w.workers, w.name
    );
    Ok(run)
}

/// The report, in text or JSON, and the warnings its figures call for.
fn report_load(
    run: &LoadRequest,
    settings: &LoadSettings,
    loaded: &LoadRun,
    exporter: Option<&Exporter>,
) -> stats::load::LoadSummary {
    if let Some(e) = exporter {
        e.finish(&settings.workload, &loaded.measurements);
    }
    let summary = stats::load::summarize_load(loaded, settings.clients, settings.interval_s);
    let version = loaded.server_version.as_deref();
    let text = if run.output.json {
        report::load::json(
            settings,
            &summary,
            version,
            loaded.tls.as_ref(),
            loaded.interrupted,
        )
    } else {
        report::load::text(settings, &summary, version, loaded.interrupted, run.output.series)
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
    if run.options.mode == QueryMode::Prepared && prepared_trouble {
        eprintln!(
            "note: prepared statements live on one server connection, but a transaction-pooling proxy \
             (PgBouncer before 1.21) hands each transaction any server connection: a statement prepared on \
             one is missing on another (26000) or already there from an earlier client (42P05); \
             use -M extended, or session pooling"
        );
    }
    summary
}

/// The exit status, after the clients' aborts and an all-failed run are said.
fn exit_status(run: &LoadRequest, loaded: &LoadRun, summary: &stats::load::LoadSummary) -> Exit {
    for why in &loaded.aborted {
        eprintln!("error: {why}");
    }
    let exit_on_abort = run.options.exit_on_abort;
    if exit_on_abort && !loaded.aborted.is_empty() {
        eprintln!(
            "error: --exit-on-abort: a client aborted, so every client stopped there; the figures above cover \
             the run until then"
        );
    }
    let ramp = &summary.ramp;
    if ramp.connected < ramp.wanted && !loaded.interrupted {
        eprintln!(
            "warning: {} of {} connections were not made before the measurement ({} failed attempts during the \
             ramp; the first error: {}); their clients went on trying during it, so fewer ran than asked",
            ramp.wanted - ramp.connected,
            ramp.wanted,
            ramp.failed_attempts,
            loaded.first_error.as_deref().unwrap_or("none kept")
        );
    }
    if summary.transactions == 0 && !loaded.interrupted {
        let first = loaded
            .first_error
            .as_deref()
            .unwrap_or("no transaction completed");
        if summary.failed_transactions == 0
            && (summary.refused_attempts > 0 || summary.ramp.failed_attempts > 0)
        {
            eprintln!("error: no transaction ran: every connect was refused; the first error: {first}");
        } else {
            eprintln!("error: every transaction failed; the first error: {first}");
        }
        return Exit::Failed;
    }
    if loaded.interrupted {
        Exit::Interrupted
    } else if !loaded.aborted.is_empty() {
        // As pgbench: a client the script aborted makes the results incomplete.
        if !exit_on_abort {
            eprintln!(
                "error: {} client(s) aborted, so the figures above cover only what ran before; fix the \
                 script, or give --continue-on-error to count SQL errors and go on",
                loaded.aborted.len()
            );
        }
        Exit::Failed
    } else {
        Exit::Success
    }
}

//! `connbench load`: the flags become `LoadOptions` (the same a suite cell becomes), the
//! options a plan on the target (a sandbox's when asked, through its route), the engine
//! runs it, and the report is printed in text or JSON.

use anyhow::Result;

use super::{emit, init_sandbox_tables, parse_target, routed, stop_on_signals};
use crate::cli::LoadArgs;
use crate::connect::Subject;
use crate::load::workload::QueryMode;
use crate::proto::Endpoint;
use crate::report;
use crate::sandbox::{Sandbox, SandboxOptions};
use crate::stats;
use crate::Exit;

pub async fn run_load(args: LoadArgs) -> Result<Exit> {
    let options = args.options();
    // Every check that needs no server runs before a sandbox starts.
    options.check()?;
    let (script_name, _) = options.script()?;

    // The sandbox lives until this function returns; its Drop stops and removes it.
    let mut sandbox = None;
    let target = if args.sandbox {
        let sb = Sandbox::start(&SandboxOptions {
            durable: args.server.durable,
            mariadb: args
                .target
                .as_deref()
                .is_some_and(crate::sandbox::is_mariadb_target),
            ..SandboxOptions::default()
        })
        .await?;
        eprintln!("sandbox: started in {}", sb.info.dir.display());
        if options.workload.reads_dataset() {
            init_sandbox_tables(&sb, &args.schema, args.scale).await?;
        }
        let name = args.target.as_deref().unwrap_or("unix");
        let t = sb.info.target(name)?.target()?;
        sandbox = Some(sb);
        t
    } else {
        parse_target(args.target.as_deref())?
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
    let scale = options.dataset_scale(&direct, i64::from(args.scale)).await?;
    let mut plan = options.plan(endpoint, scale, None, args.progress)?;
    let user_server = match (args.server_pid, &args.server_cgroup) {
        (Some(pid), _) => Some(crate::host::Source::Tree(pid)),
        (None, Some(dir)) => Some(crate::host::Source::Cgroup(dir.clone())),
        (None, None) => None,
    };
    plan.accounting = crate::options::accounting(
        &direct.target,
        sandbox.as_ref().map(|s: &Sandbox| &s.info),
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
        think_ms: plan.think.as_secs_f64() * 1e3,
        connection: plan.policy.clone(),
        interval_s: plan.interval.as_secs_f64(),
        scale,
    };
    let stop = stop_on_signals();
    let run = crate::load::engine::run(plan, stop, |p| {
        let l = stats::load::latency(&p.totals.latency_us, 1_000);
        let q = |f: fn(&stats::load::Latency) -> u64| {
            l.as_ref()
                .map(|l| report::format_ns(f(l) as f64))
                .unwrap_or_else(|| "-".into())
        };
        eprintln!(
            "progress: {:.1} s, {:.1} tps, p50 {}, p99 {}, {} failed",
            p.at_s,
            p.totals.transactions as f64 / p.period_s,
            q(|l| l.p50_ns),
            q(|l| l.p99_ns),
            p.totals.failures
        );
    })
    .await?;
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
    if let Some(sb) = sandbox.take() {
        let dir = sb.info.dir.clone();
        sb.stop()?;
        eprintln!("sandbox: stopped and removed {}", dir.display());
    }
    if summary.transactions == 0 && !run.interrupted {
        let first = run.first_error.as_deref().unwrap_or("no transaction completed");
        eprintln!("error: every transaction failed; the first error: {first}");
        return Ok(Exit::Failed);
    }
    Ok(if run.interrupted {
        Exit::Interrupted
    } else {
        Exit::Success
    })
}

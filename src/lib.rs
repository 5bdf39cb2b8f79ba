//! connbench: what does it cost an application to reach its database?
//!
//! The modules follow the data: `cli` (flags) -> `target` (validated targets) ->
//! `sandbox` (throwaway servers, when asked) -> `transport` (unix | tcp | tls stream with
//! counters) -> `proto` (the wire session, connected in timed phases) -> `init` (the
//! TPC-B-like tables) -> `workload` (what a transaction does) -> `connect` and `engine`
//! (the measurement loops, producing plain timelines and recorders) -> `record`
//! (per-worker histograms, merged) -> `stats` (summaries) -> `report` (text, JSON). No module reaches back up the pipeline. [`run`] is the whole program, callable
//! in-process by tests; `main.rs` only parses arguments and prints errors.

pub mod cli;
pub mod target;
pub mod suite;
pub mod sandbox;
pub mod transport;
pub mod relay;
pub mod route;
pub mod netns;
pub mod proto;
pub mod init;
pub mod workload;
pub mod connect;
pub mod timer;
pub mod engine;
pub mod record;
pub mod runner;
pub mod stats;
pub mod store;
pub mod report;

use std::io::{IsTerminal, Write};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use tokio::sync::watch;

use cli::{
    Cli, Command, ConnectArgs, ConnectionArg, InitArgs, LabArgs, LoadArgs, RunArgs, RunsCommand,
    SandboxCommand,
};
use connect::{ConnectSettings, Subject};
use proto::postgres::Endpoint;
use sandbox::{Sandbox, SandboxOptions};
use target::Target;

/// How the program ended (see `connbench --help` for the numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Success = 0,
    /// The run finished, but a target failed every attempt.
    Failed = 1,
    /// Usage or set-up error.
    Usage = 2,
    /// Ctrl-C ended the run; what was measured was still reported.
    Interrupted = 130,
}

/// Runs one connbench command. Errors are usage or set-up errors (exit 2).
pub fn run(cli: Cli) -> Result<Exit> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async {
        match cli.command {
            Command::Connect(args) => run_connect(args).await,
            Command::Init(args) => run_init(args).await,
            Command::Load(args) => run_load(args).await,
            Command::Run(args) => run_suite_command(args).await,
            Command::Suites => list_suites(),
            Command::Runs(cmd) => run_runs(cmd),
            Command::Compare { run_a, run_b, store } => compare_runs(run_a, run_b, &store),
            Command::Report(args) => report_runs(args),
            Command::Lab(args) => run_lab(args).await,
            Command::Sandbox(cmd) => run_sandbox(cmd).await,
            Command::Relay(args) => run_relay(args).await,
        }
    })
}

async fn run_connect(args: ConnectArgs) -> Result<Exit> {
    let settings = ConnectSettings {
        samples: args.samples as usize,
        warmup: args.warmup as usize,
        query: args.query.clone(),
        interval: args.interval,
    };
    // The sandbox lives until this function returns; its Drop stops and removes it.
    let mut sandbox = None;
    let subjects = if args.sandbox {
        let sb = Sandbox::start(&SandboxOptions::default()).await?;
        eprintln!(
            "sandbox: started in {} (postgres pid {}, pgbouncer pid {}; {}, {})",
            sb.info.dir.display(),
            sb.info.postgres_pid,
            sb.info.pgbouncer_pid,
            sb.info.postgres_version,
            sb.info.pgbouncer_version
        );
        let names: Vec<String> = if args.targets.is_empty() {
            sb.info.targets.iter().map(|t| t.name.clone()).collect()
        } else {
            args.targets.clone()
        };
        let mut subjects = Vec::new();
        for name in &names {
            let st = sb.info.target(name)?;
            subjects.push(Subject {
                endpoint: Endpoint::new(st.target()?).with_context(|| format!("target {name}"))?,
                description: Some(st.description.clone()),
            });
        }
        sandbox = Some(sb);
        subjects
    } else {
        let texts = if args.targets.is_empty() {
            vec![String::new()]
        } else {
            args.targets.clone()
        };
        let mut subjects = Vec::new();
        for text in &texts {
            let t = Target::parse(text).with_context(|| format!("target {:?}", target::redact(text)))?;
            let name = t.name();
            subjects.push(Subject {
                endpoint: Endpoint::new(t).with_context(|| format!("target {name}"))?,
                description: None,
            });
        }
        subjects
    };

    let (subjects, _routes) = routed(subjects, &args.path, args.distance).await?;
    let stop = stop_on_signals();
    let show_progress = std::io::stderr().is_terminal();
    let mut last_draw = Instant::now();
    let run = connect::measure(&subjects, &settings, stop, |done, total| {
        if show_progress && (last_draw.elapsed().as_millis() >= 100 || done == total) {
            last_draw = Instant::now();
            eprint!("\rconnecting: {done}/{total}  ");
            if done == total {
                eprint!("\r{:30}\r", "");
            }
        }
    })
    .await;
    if show_progress {
        eprint!("\r{:30}\r", "");
    }
    let mut summaries = stats::summarize_connect(&run);
    for t in &mut summaries {
        let predictions = args
            .predict_rtt
            .iter()
            .filter_map(|&rtt| stats::model::predict(t, rtt))
            .collect();
        t.predictions = predictions;
    }
    let text = if args.json {
        let report =
            report::json::connect_report(&settings, &summaries, run.interrupted, run.wall.as_secs_f64());
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        report::text::connect_report(&settings, &summaries, run.interrupted)
    };
    emit(&text);
    if let Some(sb) = sandbox.take() {
        let dir = sb.info.dir.clone();
        sb.stop()?;
        eprintln!("sandbox: stopped and removed {}", dir.display());
    }
    let mut exit = Exit::Success;
    for t in &run.targets {
        if let Some(err) = t.first_error() {
            eprintln!("error: target {}: {err}", t.name);
            exit = Exit::Failed;
        }
    }
    if run.interrupted {
        exit = Exit::Interrupted;
    }
    Ok(exit)
}

/// A target from the command line (or the PG* environment when none is given).
/// Puts each subject behind the relays of `--path` and `--distance`; the routes returned
/// keep the relays running. A distance is measured first and printed, requested against
/// achieved.
async fn routed(
    subjects: Vec<Subject>,
    path: &str,
    distance: Option<std::time::Duration>,
) -> Result<(Vec<Subject>, Vec<route::Route>)> {
    let spec = route::RouteSpec {
        path: route::PathKind::parse(path).context("--path")?,
        distance: distance.unwrap_or_default(),
    };
    if spec.is_direct() {
        return Ok((subjects, Vec::new()));
    }
    let mut out = Vec::new();
    let mut routes = Vec::new();
    for s in subjects {
        let r = route::build(&s.endpoint.target, spec)?;
        let mut ep = Endpoint::new(r.target.clone())?;
        ep.target.label = Some(format!("{}+{path}", s.endpoint.target.name()));
        if !spec.distance.is_zero() {
            let v = route::verify(&s.endpoint, &ep, spec.distance).await?;
            eprintln!(
                "route: {}: round trip requested +{:.2} ms, achieved +{:.3} ms{}",
                s.endpoint.target.name(),
                v.requested_ms,
                v.achieved_ms,
                if v.within_tolerance() {
                    ""
                } else {
                    " (outside max(0.2 ms, 3%): the machine may be overloaded)"
                }
            );
            ep.target.label = Some(format!(
                "{}+{}",
                s.endpoint.target.name(),
                report::format_duration(spec.distance)
            ));
        }
        out.push(Subject {
            endpoint: ep,
            description: s.description,
        });
        routes.push(r);
    }
    Ok((out, routes))
}

fn parse_target(text: Option<&str>) -> Result<Target> {
    let text = text.unwrap_or("");
    Target::parse(text).with_context(|| format!("target {:?}", target::redact(text)))
}

async fn run_init(args: InitArgs) -> Result<Exit> {
    let ep = Endpoint::new(parse_target(args.target.as_deref())?)?;
    if args.drop {
        let dropped = init::drop(&ep, &args.schema).await?;
        if dropped.is_empty() {
            eprintln!(
                "init: no connbench tables in schema {}; nothing to drop",
                args.schema
            );
        } else {
            eprintln!("init: dropped {}", dropped.join(", "));
        }
        return Ok(Exit::Success);
    }
    let report = init::init(&ep, &args.schema, args.scale).await?;
    if !report.replaced.is_empty() {
        eprintln!(
            "init: replaced connbench's earlier tables: {}",
            report.replaced.join(", ")
        );
    }
    emit(&format!(
        "init: schema {} at scale {}: {} rows loaded with COPY, keys added, vacuumed and analysed in {:.2} s\n",
        report.schema,
        report.scale,
        report.rows,
        report.elapsed.as_secs_f64()
    ));
    Ok(Exit::Success)
}

/// Creates the tables in a fresh sandbox and lets every sandbox role use them.
async fn init_sandbox_tables(sb: &Sandbox, schema: &str, scale: u32) -> Result<()> {
    let ep = Endpoint::new(sb.info.target("unix")?.target()?)?;
    let report = init::init(&ep, schema, scale).await?;
    eprintln!(
        "sandbox: {} rows at scale {scale} in schema {schema} ({:.2} s)",
        report.rows,
        report.elapsed.as_secs_f64()
    );
    init::grant(&ep, schema, sandbox::TRUST_ROLE).await
}

async fn run_load(args: LoadArgs) -> Result<Exit> {
    use workload::Builtin;
    init::check_schema(&args.schema)?;
    let builtin = match (&args.file, args.builtin, args.simple_update, args.select_only) {
        (Some(_), ..) => None,
        (None, Some(b), ..) => Some(b),
        (None, None, true, _) => Some(Builtin::SimpleUpdate),
        (None, None, _, true) => Some(Builtin::SelectOnly),
        _ => Some(Builtin::TpcbLike),
    };
    let policy_arg = if args.per_transaction {
        Some(ConnectionArg::PerTransaction)
    } else {
        args.connection
    };
    let policy_arg = match (builtin, policy_arg) {
        (Some(Builtin::ConnectOnly), None | Some(ConnectionArg::PerTransaction)) => ConnectionArg::PerTransaction,
        (Some(Builtin::ConnectOnly), Some(other)) => bail!(
            "-b connect-only measures connection set-up, so it runs with --connection per-transaction, not {other:?}"
        ),
        (_, p) => p.unwrap_or(ConnectionArg::Persistent),
    };
    let clients = args.clients as usize;
    let threads = (args.threads as usize).min(clients);
    let end = match (args.time, args.transactions) {
        (_, Some(0)) => bail!("invalid -t 0: give at least 1 transaction per client"),
        (_, Some(n)) => engine::End::TransactionsPerClient(n),
        (Some(t), None) if !(t > 0.0 && t.is_finite()) => {
            bail!("invalid -T {t}: give a positive number of seconds")
        }
        (Some(t), None) => engine::End::Duration(std::time::Duration::from_secs_f64(t)),
        (None, None) => engine::End::Duration(std::time::Duration::from_secs(10)),
    };
    if let Some(r) = args.rate {
        if !(r > 0.0 && r.is_finite()) {
            bail!("invalid -R {r}: give a positive rate in transactions per second");
        }
    }
    let progress = match args.progress {
        Some(p) if !(p > 0.0 && p.is_finite()) => bail!("invalid -P {p}: give a positive number of seconds"),
        Some(p) => Some(std::time::Duration::from_secs_f64(p)),
        None => None,
    };
    if args.interval.is_zero() {
        bail!("invalid --interval 0: give a length such as 1s or 1m");
    }
    let policy = match policy_arg {
        ConnectionArg::Persistent => engine::Policy::Persistent,
        ConnectionArg::PerTransaction => engine::Policy::PerTransaction,
        ConnectionArg::Pool => {
            if args.pool_size == 0 {
                bail!("invalid --pool-size 0: a pool needs at least one connection");
            }
            engine::Policy::Pool {
                size_per_thread: args.pool_size.div_ceil(threads),
                max_lifetime: args.pool_max_lifetime,
                idle_timeout: args.pool_idle_timeout,
            }
        }
    };
    let (script_name, script_text) = match (&args.file, builtin) {
        (Some(path), _) => (
            path.display().to_string(),
            std::fs::read_to_string(path).with_context(|| format!("cannot read -f {}", path.display()))?,
        ),
        (None, Some(b)) => (b.as_str().to_string(), b.script(&args.schema)),
        (None, None) => unreachable!("a builtin is chosen when no file is given"),
    };
    let script = workload::Script::parse(&script_name, &script_text)?;
    let needs_tables = builtin.is_some_and(|b| b.needs_tables());

    // The sandbox lives until this function returns; its Drop stops and removes it.
    let mut sandbox = None;
    let target = if args.sandbox {
        let sb = Sandbox::start(&SandboxOptions::default()).await?;
        eprintln!("sandbox: started in {}", sb.info.dir.display());
        if needs_tables || args.file.is_some() {
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
    let (mut routed_subjects, _routes) = routed(
        vec![Subject {
            endpoint: direct.clone(),
            description: None,
        }],
        &args.path,
        args.distance,
    )
    .await?;
    let endpoint = routed_subjects.remove(0).endpoint;
    let scale = if args.sandbox {
        args.scale as i64
    } else if needs_tables {
        init::scale_of(&direct, &args.schema).await? as i64
    } else if args.file.is_some() {
        init::scale_of(&direct, &args.schema)
            .await
            .map(|s| s as i64)
            .unwrap_or(args.scale as i64)
    } else {
        args.scale as i64
    };
    let settings = report::load::LoadSettings {
        target: endpoint.target.name(),
        conninfo: endpoint.target.conninfo(),
        workload: script_name,
        mode: args.mode,
        clients,
        threads,
        end,
        warmup_s: args.warmup.as_secs_f64(),
        rate_tps: args.rate,
        think_ms: args.think.as_secs_f64() * 1e3,
        connection: policy.clone(),
        interval_s: args.interval.as_secs_f64(),
        scale,
    };
    let plan = engine::LoadPlan {
        endpoint,
        script: std::sync::Arc::new(script),
        mode: args.mode,
        clients,
        threads,
        end,
        warmup: args.warmup,
        rate: args.rate,
        think: args.think,
        policy,
        interval: args.interval,
        progress,
        scale,
        netns: None,
    };
    let stop = stop_on_signals();
    let run = engine::run(plan, stop, |p| {
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
    let summary = stats::load::summarize_load(&run, clients, args.interval.as_secs_f64());
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
    let prepared_trouble = summary
        .failures
        .iter()
        .any(|f| f.kind == "26000" || f.kind == "42P05");
    if args.mode == workload::QueryMode::Prepared && prepared_trouble {
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

async fn run_sandbox(cmd: SandboxCommand) -> Result<Exit> {
    match cmd {
        SandboxCommand::Start { json } => {
            if let Some(info) = sandbox::detached_info()? {
                bail!(
                    "a sandbox is already running in {}; stop it with `connbench sandbox stop`",
                    info.dir.display()
                );
            }
            let sb = Sandbox::start(&SandboxOptions { detached: true }).await?;
            if json {
                emit(&(serde_json::to_string_pretty(&sb.info)? + "\n"));
            } else {
                emit(&describe_sandbox(&sb.info));
                emit("stop it with: connbench sandbox stop\n");
            }
            Ok(Exit::Success)
        }
        SandboxCommand::Stop => {
            match sandbox::stop_detached()? {
                Some(dir) => eprintln!("sandbox: stopped and removed {}", dir.display()),
                None => eprintln!("no sandbox is running (nothing to stop)"),
            }
            Ok(Exit::Success)
        }
        SandboxCommand::Status { json } => {
            let Some(info) = sandbox::detached_info()? else {
                if json {
                    emit("{\"running\": false}\n");
                } else {
                    emit("no sandbox is running; start one with `connbench sandbox start`\n");
                }
                return Ok(Exit::Success);
            };
            let alive = sandbox::pid_alive_in(info.postgres_pid, &info.dir)
                && sandbox::pid_alive_in(info.pgbouncer_pid, &info.dir);
            let check = match info.target("unix").and_then(|t| t.target()) {
                Ok(t) => match Endpoint::new(t) {
                    Ok(ep) => connect::connect_once(&ep, Some("SELECT 1"))
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                },
                Err(e) => Err(e.to_string()),
            };
            let ok = alive && check.is_ok();
            if json {
                let v = serde_json::json!({
                    "running": alive,
                    "accepts_connections": check.is_ok(),
                    "sandbox": info,
                });
                emit(&(serde_json::to_string_pretty(&v)? + "\n"));
            } else {
                emit(&describe_sandbox(&info));
                match check {
                    Ok(()) => emit("status: running, accepts connections\n"),
                    Err(e) => emit(&format!(
                        "status: processes alive: {alive}; connection check failed: {e}\n"
                    )),
                }
            }
            Ok(if ok { Exit::Success } else { Exit::Failed })
        }
    }
}

async fn run_relay(args: cli::RelayArgs) -> Result<Exit> {
    let listen: relay::Addr = args.listen.parse().context("--listen")?;
    let upstream: relay::Addr = args.upstream.parse().context("--upstream")?;
    let shape = relay::Shape {
        one_way: args.rtt / 2,
        jitter: args.jitter,
        bandwidth: args.bandwidth,
    };
    let tls = match (&upstream, args.upstream_tls) {
        (_, false) => None,
        (relay::Addr::Tcp(a), true) => {
            let (host, port) = a.rsplit_once(':').context("--upstream")?;
            let t = Target::parse(&format!(
                "host={} port={port} sslmode=require",
                host.trim_start_matches('[').trim_end_matches(']')
            ))
            .context("--upstream-tls")?;
            transport::TlsSetup::for_target(&t).map_err(|e| anyhow::anyhow!("--upstream-tls: {e}"))?
        }
        (relay::Addr::Unix(_), true) => {
            bail!("--upstream-tls needs a host:port upstream: PostgreSQL has no TLS on a Unix socket")
        }
    };
    let r = relay::Relay::start_with(&listen, &upstream, shape, tls)?;
    eprintln!(
        "relay: {} -> {}, adding {} each way (round trip +{}){}{}; Ctrl-C stops",
        r.addr(),
        upstream,
        report::format_duration(shape.one_way),
        report::format_duration(args.rtt),
        if args.jitter.is_zero() {
            String::new()
        } else {
            format!(", jitter ±{}", report::format_duration(args.jitter))
        },
        match args.bandwidth {
            Some(b) => format!(", capped at {:.1} Mbit/s", b * 8.0 / 1e6),
            None => String::new(),
        }
    );
    let mut stop = stop_on_signals();
    let _ = stop.wait_for(|s| *s).await;
    let st = &r.stats;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    emit(&format!(
        "relay: {} connection{} ({} refused upstream), {} up, {} down\n",
        load(&st.connections),
        if load(&st.connections) == 1 { "" } else { "s" },
        load(&st.upstream_failures),
        report::format_bytes(load(&st.bytes_up) as f64),
        report::format_bytes(load(&st.bytes_down) as f64)
    ));
    drop(r);
    Ok(Exit::Interrupted)
}

fn describe_sandbox(info: &sandbox::SandboxInfo) -> String {
    let mut s = format!(
        "sandbox in {} (servers run as {})\n  {} on port {}, pid {}\n  {} on port {}, pid {}\n\
         targets (libpq conninfo strings; they work unchanged with psql and pgbench):\n",
        info.dir.display(),
        info.run_as,
        info.postgres_version,
        info.postgres_port,
        info.postgres_pid,
        info.pgbouncer_version,
        info.pgbouncer_port,
        info.pgbouncer_pid,
    );
    let width = info.targets.iter().map(|t| t.name.len()).max().unwrap_or(0);
    for t in &info.targets {
        s.push_str(&format!("  {:<width$}  {}\n", t.name, t.conninfo));
    }
    s
}

/// A channel that turns true on the first Ctrl-C (or SIGTERM), so a run can stop cleanly
/// and still report.
fn stop_on_signals() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let term_fut = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term_fut => {}
        }
        eprintln!("\nstopping: reporting what was measured so far");
        let _ = tx.send(true);
    });
    rx
}

/// Writes to stdout; a closed pipe (`connbench ... | head`) ends the program quietly.
fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
    }
}

fn open_store(args: &cli::StoreArgs) -> Result<store::Store> {
    let path = match &args.store {
        Some(p) => p.clone(),
        None => store::default_path()?,
    };
    store::Store::open(&path)
}

fn list_suites() -> Result<Exit> {
    let mut out = String::new();
    for (name, text) in suite::BUILTIN {
        let s = suite::Suite::parse(text, name)?;
        out.push_str(&format!(
            "{name:<10} {} ({} cells, {:?})\n",
            s.question,
            s.cells.len(),
            s.kind
        ));
    }
    out.push_str(
        "\nrun one with `connbench run NAME` (add --quick for short runs), or all with `connbench lab`\n",
    );
    emit(&out);
    Ok(Exit::Success)
}

/// The sandbox (started only when some cell needs one of its targets) and the names
/// the suites may use.
async fn suite_context(
    suites: &[suite::Suite],
    overrides: &[String],
    schema: &str,
    store: store::Store,
) -> Result<(Option<Sandbox>, runner::Context)> {
    init::check_schema(schema)?;
    let mut targets = std::collections::BTreeMap::new();
    let mut replace_all = None;
    for o in overrides {
        let (name, conninfo) = match o.split_once('=') {
            Some((n, c)) if sandbox::TARGET_NAMES.contains(&n) => (Some(n), c),
            _ => (None, o.as_str()),
        };
        Target::parse(conninfo).with_context(|| format!("--target {:?}", target::redact(o)))?;
        match name {
            Some(n) => {
                targets.insert(n.to_string(), conninfo.to_string());
            }
            None => replace_all = Some(conninfo.to_string()),
        }
    }
    let used: std::collections::BTreeSet<String> = suites
        .iter()
        .flat_map(|s| s.cells.iter().filter_map(|c| c.settings.get("target").cloned()))
        .collect();
    if let Some(all) = &replace_all {
        for name in &used {
            targets.entry(name.clone()).or_insert_with(|| all.clone());
        }
    }
    let needs_sandbox = used
        .iter()
        .any(|t| sandbox::TARGET_NAMES.contains(&t.as_str()) && !targets.contains_key(t));
    let mut sb = None;
    let mut pgbouncer_version = None;
    if needs_sandbox {
        let started = Sandbox::start(&SandboxOptions::default()).await?;
        eprintln!("sandbox: started in {}", started.info.dir.display());
        let needs_tables = suites.iter().any(|s| {
            s.kind == suite::Kind::Load
                && s.cells.iter().any(|c| {
                    !matches!(
                        c.settings.get("workload").map(String::as_str),
                        Some("connect-only")
                    )
                })
        });
        if needs_tables {
            init_sandbox_tables(&started, schema, 1).await?;
        }
        for t in &started.info.targets {
            targets
                .entry(t.name.clone())
                .or_insert_with(|| t.conninfo.clone());
        }
        pgbouncer_version = Some(started.info.pgbouncer_version.clone());
        sb = Some(started);
    }
    let ctx = runner::Context {
        targets,
        schema: schema.to_string(),
        store,
        pgbouncer_version,
        stop: stop_on_signals(),
        scales: Default::default(),
        routes: Default::default(),
        bridge: Default::default(),
    };
    Ok((sb, ctx))
}

/// Progress on stderr when it is a terminal: steps done, the cell, and an estimate of
/// the time left.
fn suite_progress(name: String) -> impl FnMut(usize, usize, &str) {
    let show = std::io::stderr().is_terminal();
    let started = Instant::now();
    move |done, total, cell| {
        if !show {
            return;
        }
        let eta = if done > 0 {
            let per = started.elapsed().as_secs_f64() / done as f64;
            format!(", about {:.0} s left", per * (total - done) as f64)
        } else {
            String::new()
        };
        eprint!("\r\x1b[K{name}: step {}/{total}, {cell}{eta}", done + 1);
        if done + 1 == total {
            eprint!("\r\x1b[K");
        }
    }
}

async fn run_suite_command(args: RunArgs) -> Result<Exit> {
    let profile = if args.quick {
        suite::Profile::Quick
    } else {
        suite::Profile::Full
    };
    let (origin, text) = suite::load_text(&args.suite)?;
    let s = suite::Suite::parse_profile(&text, &origin, profile)?;
    if args.dry_run {
        let mut out = format!("{}: {}\n{} cells:\n", s.name, s.question, s.cells.len());
        for (i, c) in s.cells.iter().enumerate() {
            let base = if i == s.baseline { "  (baseline)" } else { "" };
            out.push_str(&format!("  {i:>3}  {}{base}\n", c.name));
        }
        out.push_str("steps in order (cell:repetition, 0 = pre-warm, discarded):\n ");
        for st in s.plan() {
            out.push_str(&format!(" {}:{}", st.cell, st.repetition));
        }
        out.push('\n');
        emit(&out);
        return Ok(Exit::Success);
    }
    let store = open_store(&args.store)?;
    let store_path = store.path().display().to_string();
    let (sb, ctx) = suite_context(std::slice::from_ref(&s), &args.targets, &args.schema, store).await?;
    let result = runner::run(&s, &ctx, suite_progress(s.name.clone())).await;
    drop(sb);
    let result = result?;
    emit(&if args.json {
        report::suite::json(&result)
    } else {
        report::suite::text(&result, &store_path)
    });
    Ok(if result.interrupted {
        Exit::Interrupted
    } else {
        Exit::Success
    })
}

async fn run_lab(args: LabArgs) -> Result<Exit> {
    let profile = if args.full {
        suite::Profile::Full
    } else {
        suite::Profile::Quick
    };
    let mut suites: Vec<suite::Suite> = suite::BUILTIN
        .iter()
        .map(|(name, text)| suite::Suite::parse_profile(text, name, profile))
        .collect::<Result<_>>()?;
    // The bridge path creates a namespace and links: root only. Said, not silently dropped.
    if let Err(why) = netns::check_supported() {
        suites.retain(|s| {
            let uses_bridge = s
                .cells
                .iter()
                .any(|c| c.settings.get("netpath").is_some_and(|v| v == "bridge"));
            if uses_bridge {
                eprintln!("lab: skipping suite {}: {why:#}", s.name);
            }
            !uses_bridge
        });
    }
    let store = open_store(&args.store)?;
    let store_path = store.path().display().to_string();
    let started = Instant::now();
    let (sb, ctx) = suite_context(&suites, &[], "connbench", store).await?;
    let mut answers = Vec::new();
    let mut interrupted = false;
    for s in &suites {
        let result = runner::run(s, &ctx, suite_progress(s.name.clone())).await?;
        emit(&(report::suite::text(&result, &store_path) + "\n"));
        answers.push((s.name.clone(), result.run_id, report::suite::answer(&result)));
        if result.interrupted {
            interrupted = true;
            break;
        }
    }
    drop(sb);
    let html = if args.no_html || answers.is_empty() {
        None
    } else {
        let path = match &args.html {
            Some(p) => p.clone(),
            None => std::path::Path::new(&store_path)
                .parent()
                .unwrap_or(std::path::Path::new("."))
                .join("reports")
                .join(format!(
                    "lab-{}-runs-{}-{}.html",
                    store::now_utc().replace(':', ""),
                    answers[0].1,
                    answers[answers.len() - 1].1
                )),
        };
        let reports: Vec<report::data::RunReport> = answers
            .iter()
            .map(|(_, run, _)| report::data::RunReport::load(&ctx.store, *run))
            .collect::<Result<_>>()?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        std::fs::write(&path, report::html::html(&reports))
            .with_context(|| format!("cannot write the HTML report to {}", path.display()))?;
        Some(path)
    };
    let mut out = format!(
        "lab ({} profile) answered {} question{} in {:.0} s; runs are in {store_path}\n",
        if args.full { "full" } else { "quick" },
        answers.len(),
        if answers.len() == 1 { "" } else { "s" },
        started.elapsed().as_secs_f64()
    );
    for (name, run, lines) in &answers {
        for l in lines {
            out.push_str(&report::style::wrap(
                &format!("{name} (run {run}): {l}"),
                "  ",
                "      ",
                80,
            ));
        }
    }
    if let Some(path) = html {
        out.push_str(&format!(
            "HTML report (charts, tables, environment): {}\n",
            path.display()
        ));
    }
    emit(&out);
    Ok(if interrupted {
        Exit::Interrupted
    } else {
        Exit::Success
    })
}

/// Writes `text` to `path`, or to standard output for `-`.
fn write_output(path: &std::path::Path, text: &str) -> Result<()> {
    if path.as_os_str() == "-" {
        emit(text);
        return Ok(());
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!("report: wrote {}", path.display());
    Ok(())
}

fn report_runs(args: cli::ReportArgs) -> Result<Exit> {
    let store = open_store(&args.store)?;
    let reports: Vec<report::data::RunReport> = args
        .runs
        .iter()
        .map(|&r| report::data::RunReport::load(&store, r))
        .collect::<Result<_>>()?;
    let results: Vec<runner::SuiteResult> = reports.iter().map(|r| r.result.clone()).collect();
    let any = args.html.is_some() || args.markdown.is_some() || args.csv.is_some() || args.json.is_some();
    if let Some(path) = &args.html {
        write_output(path, &report::html::html(&reports))?;
    }
    if let Some(path) = &args.markdown {
        write_output(path, &report::markdown::markdown(&results))?;
    }
    if let Some(dir) = &args.csv {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        write_output(&dir.join("cells.csv"), &report::csv::cells(&results))?;
    }
    if let Some(path) = &args.json {
        let v = serde_json::json!({
            "connbench_version": env!("CARGO_PKG_VERSION"),
            "command": "report",
            "runs": reports.iter().map(report::data::RunReport::json_value).collect::<Vec<_>>(),
        });
        write_output(path, &(serde_json::to_string_pretty(&v)? + "\n"))?;
    }
    if !any {
        emit(&report::markdown::markdown(&results));
    }
    Ok(Exit::Success)
}

fn compare_runs(a: i64, b: i64, store: &cli::StoreArgs) -> Result<Exit> {
    let store = open_store(store)?;
    let report::data::Loaded {
        suite: suite_a,
        values: values_a,
        ..
    } = report::data::load(&store, a)?;
    let report::data::Loaded {
        suite: suite_b,
        values: values_b,
        ..
    } = report::data::load(&store, b)?;
    if suite_a.figure != suite_b.figure {
        bail!(
            "run {a} measures {} and run {b} measures {}: compare runs of the same suite",
            suite_a.figure,
            suite_b.figure
        );
    }
    let fig = &suite_a.figure;
    let rule = runner::rule(&suite_a);
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let mut rows = Vec::new();
    for (i, cell) in suite_a.cells.iter().enumerate() {
        let Some(j) = suite_b.cells.iter().position(|c| c.name == cell.name) else {
            continue;
        };
        let va = values_a[i].get(fig).cloned().unwrap_or_default();
        let vb = values_b[j].get(fig).cloned().unwrap_or_default();
        let verdict = stats::compare::compare(&va, &vb, rule, &format!("run {a}"), &format!("run {b}"))
            .map(|c| c.sentence)
            .unwrap_or_else(|| "no results to compare".to_string());
        rows.push(report::suite::CompareRow {
            cell: cell.name.clone(),
            mean_a: mean(&va),
            mean_b: mean(&vb),
            verdict,
        });
    }
    let matched = rows.len();
    if matched == 0 {
        bail!("runs {a} and {b} have no cell in common; compare runs of the same suite");
    }
    emit(&report::suite::compare_text(
        a,
        b,
        &suite_a.name,
        &suite_b.name,
        fig,
        &rows,
    ));
    Ok(Exit::Success)
}

fn run_runs(cmd: RunsCommand) -> Result<Exit> {
    match cmd {
        RunsCommand::List { store } => {
            let store = open_store(&store)?;
            let runs = store.list_runs()?;
            if runs.is_empty() {
                emit(&format!(
                    "no runs in {} yet; try `connbench lab --quick`\n",
                    store.path().display()
                ));
                return Ok(Exit::Success);
            }
            let mut out = format!(
                "{:>5}  {:<20}  {:<11}  {:<12}  {:>4}  question\n",
                "run", "started", "suite", "status", "reps"
            );
            for r in runs {
                out.push_str(&format!(
                    "{:>5}  {:<20}  {:<11}  {:<12}  {:>4}  {}\n",
                    r.id, r.started_at, r.suite, r.status, r.repetitions_saved, r.question
                ));
            }
            emit(&out);
            Ok(Exit::Success)
        }
        RunsCommand::Show { run, store } => {
            let store = open_store(&store)?;
            let loaded = report::data::load(&store, run)?;
            let (stored, result) = (&loaded.stored, loaded.result());
            emit(&format!(
                "started {} · status {}\n{}",
                stored.run.started_at,
                stored.run.status,
                report::suite::text(&result, &store.path().display().to_string())
            ));
            Ok(Exit::Success)
        }
    }
}

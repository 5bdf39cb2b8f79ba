//! `connbench suites`, `run` and `lab`: experiment suites on a sandbox (started only when
//! a cell needs one of its targets) or the user's own targets, answered and stored.

use std::io::IsTerminal;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::cli::{LabArgs, RunArgs};
use crate::exit::Exit;
use crate::experiment::store::Store;
use crate::report::failures::failure_text;
use crate::sandbox::{Sandbox, SandboxOptions};
use crate::setup::tables::{init_sandbox_sysbench_tables, init_sandbox_tables};
use crate::setup::targets::target_override;
use crate::setup::{emit, stop_on_signals};

pub fn list_suites() -> Result<Exit> {
    let mut out = String::new();
    for (name, text) in crate::experiment::suite::BUILTIN {
        let s = crate::experiment::suite::Suite::parse(text, name)?;
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
pub async fn suite_context(
    suites: &[crate::experiment::suite::Suite],
    overrides: &[String],
    schema: &str,
    store: crate::experiment::store::Store,
    server: &crate::cli::ServerArgs,
) -> Result<(
    Option<std::rc::Rc<tokio::sync::Mutex<Sandbox>>>,
    crate::experiment::runner::Context,
)> {
    crate::dataset::pgbench::check_schema(schema)?;
    let used: std::collections::BTreeSet<String> = suites
        .iter()
        .flat_map(|s| s.cells.iter().filter_map(|c| c.settings.get("target").cloned()))
        .collect();
    let mut targets = target_overrides(overrides, &used)?;
    let from_sandbox = |t: &String| {
        (crate::sandbox::TARGET_NAMES.contains(&t.as_str()) || crate::sandbox::is_mariadb_target(t))
            && !targets.contains_key(t)
    };
    let needs_sandbox = used.iter().any(from_sandbox);
    let needs_mariadb = used
        .iter()
        .filter(|t| from_sandbox(t))
        .any(|t| crate::sandbox::is_mariadb_target(t));
    let mut sb = None;
    let mut sandbox_info = None;
    let mut pgbouncer_version = None;
    if needs_sandbox {
        let started = start_suite_sandbox(suites, schema, server, needs_mariadb).await?;
        for t in &started.info.targets {
            targets
                .entry(t.name.clone())
                .or_insert_with(|| t.conninfo.clone());
        }
        pgbouncer_version = Some(started.info.pgbouncer_version.clone());
        sandbox_info = Some(started.info.clone());
        sb = Some(std::rc::Rc::new(tokio::sync::Mutex::new(started)));
    }
    let ctx = crate::experiment::runner::Context {
        targets,
        schema: schema.to_string(),
        store,
        pgbouncer_version,
        sandbox: sandbox_info,
        sandbox_control: sb.as_ref().map(std::rc::Rc::downgrade),
        stop: stop_on_signals(),
        scales: Default::default(),
        routes: Default::default(),
        bridge: Default::default(),
        run_name: None,
        metrics: None,
        traces: Default::default(),
    };
    Ok((sb, ctx))
}

/// The user's `--target`s by name, each a name some cell uses (or a sandbox's), a bare
/// conninfo standing for every target the cells use.
fn target_overrides(
    overrides: &[String],
    used: &std::collections::BTreeSet<String>,
) -> Result<std::collections::BTreeMap<String, String>> {
    let mut targets = std::collections::BTreeMap::new();
    let mut replace_all = None;
    for o in overrides {
        // `NAME=CONNINFO` names one target; a bare conninfo stands for every target; a
        // running sandbox's target name stands for its conninfo.
        let (name, conninfo) = target_override(o)?;
        match name {
            Some(n) => {
                targets.insert(n, conninfo);
            }
            None => replace_all = Some(conninfo),
        }
    }
    // A name of the user's own that no cell uses is a typo; a sandbox name mapped for a
    // lab whose quick profile skips it is not.
    let sandbox_name =
        |n: &str| crate::sandbox::TARGET_NAMES.contains(&n) || crate::sandbox::is_mariadb_target(n);
    if let Some(unused) = targets.keys().find(|n| !used.contains(*n) && !sandbox_name(n)) {
        bail!(
            "--target {unused}=...: no cell uses a target named {unused:?}{}; the targets the cells use: {}",
            crate::experiment::suite::did_you_mean(unused, used.iter().map(String::as_str)),
            used.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    if let Some(all) = &replace_all {
        for name in used {
            targets.entry(name.clone()).or_insert_with(|| all.clone());
        }
    }
    Ok(targets)
}

/// The suites' sandbox, with the tables their load cells run on.
async fn start_suite_sandbox(
    suites: &[crate::experiment::suite::Suite],
    schema: &str,
    server: &crate::cli::ServerArgs,
    mariadb: bool,
) -> Result<Sandbox> {
    // A `server_cpus` axis changes the quota between cells: the servers start in their
    // cgroup, under the largest size until the first cell sets its own.
    let mut cpus = server.cpus.cpus();
    let sizes: Vec<f64> = suites
        .iter()
        .flat_map(|s| s.cells.iter())
        .filter_map(|c| crate::options::server_cpus(&c.settings).ok().flatten())
        .collect();
    if cpus.server.is_none() {
        cpus.server = sizes.iter().copied().reduce(f64::max);
    }
    let started = Sandbox::start(&SandboxOptions {
        durable: server.durable,
        mariadb,
        cpus,
        ..SandboxOptions::default()
    })
    .await?;
    eprintln!("sandbox: started in {}", started.info.dir.display());
    let needs_tables = suites.iter().any(|s| {
        s.kind == crate::experiment::suite::Kind::Load
            && s.cells.iter().any(|c| {
                !matches!(
                    c.settings.get("workload").map(String::as_str),
                    Some("connect-only")
                ) && crate::experiment::replayed::trace_of(&c.settings).is_none()
            })
    });
    if needs_tables {
        init_sandbox_tables(&started, schema, 1).await?;
    }
    let needs_sbtest = suites
        .iter()
        .flat_map(|s| &s.cells)
        .any(|c| c.settings.get("workload").is_some_and(|w| w.starts_with("oltp-")));
    if needs_sbtest {
        init_sandbox_sysbench_tables(&started).await?;
    }
    Ok(started)
}

/// Progress on stderr when it is a terminal: steps done, the cell, and an estimate of
/// the time left.
pub fn suite_progress(name: String) -> impl FnMut(usize, usize, &str) {
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

pub async fn run_suite_command(args: RunArgs) -> Result<Exit> {
    let profile = if args.quick {
        crate::experiment::suite::Lengths::Quick
    } else {
        crate::experiment::suite::Lengths::Full
    };
    let (origin, text) = crate::experiment::suite::load_text(&args.suite)?;
    let mut s = crate::experiment::suite::Suite::parse_profile(&text, &origin, profile)?;
    with_workload(&mut s, &origin, args.workload.as_deref())?;
    if let Some(r) = args.restore {
        crate::experiment::replayed::set_restore(&mut s, r)?;
    }
    let budget = args
        .adaptive
        .budget
        .or(s.run_budget_s.map(std::time::Duration::from_secs_f64));
    let s = s.adaptive(budget, args.adaptive.precision);
    crate::experiment::runner::check(&s, &args.schema)?;
    if args.dry_run {
        emit(&dry_run(&s, &args.targets));
        return Ok(Exit::Success);
    }
    crate::experiment::replayed::check_files(&s)?;
    let store = Store::open_at(args.store.store.as_deref())?;
    let store_path = store.location().to_string();
    if let Some(name) = &args.run_name {
        claim_run_name(&store, name)?;
    }
    let (sb, mut ctx) = suite_context(
        std::slice::from_ref(&s),
        &args.targets,
        &args.schema,
        store,
        &args.server,
    )
    .await?;
    ctx.run_name = args.run_name.clone();
    // The runner sees the exporter as its live sink; the linger below uses it whole.
    // `--metrics-listen`: labelled with the run's name (the suite's without one).
    let labels = crate::live::Labels {
        run: args.run_name.clone().unwrap_or_else(|| s.name.clone()),
        worker: 0,
    };
    let exporter = crate::live::start(args.metrics.listen.as_deref(), labels, None)?.map(std::rc::Rc::new);
    ctx.metrics = exporter
        .clone()
        .map(|e| e as std::rc::Rc<dyn crate::experiment::sink::Sink>);
    let result = crate::experiment::runner::run(&s, &ctx, suite_progress(s.name.clone())).await;
    drop(sb);
    let result = result?;
    emit(&if args.json {
        crate::report::suite::json(&result)
    } else {
        crate::report::suite::text(&result, &store_path)
    });
    if let (Some(e), Some(linger)) = (&exporter, args.metrics.linger) {
        if !result.interrupted {
            crate::live::linger(e, linger).await;
        }
    }
    if let Some(f) = &result.failed {
        eprint!("{}", failure_text(&result, f, args.run_name.as_deref()));
    }
    Ok(if result.interrupted {
        Exit::Interrupted
    } else if result.failed.is_some() {
        Exit::Failed
    } else {
        Exit::Success
    })
}

/// A suite file's traces found beside it, then `--workload` over every cell (its notes
/// on stderr: what the trace replaces, the cells left out).
fn with_workload(
    s: &mut crate::experiment::suite::Suite,
    origin: &str,
    workload: Option<&str>,
) -> Result<()> {
    use crate::experiment::{replayed, suite::BUILTIN};
    if !BUILTIN.iter().any(|(n, _)| *n == origin) {
        let dir = std::path::Path::new(origin)
            .parent()
            .unwrap_or(std::path::Path::new(""));
        replayed::resolve_paths(s, dir);
    }
    if let Some(w) = workload {
        for note in replayed::replace_workload(s, w)? {
            eprintln!("note: {}: {note}", s.name);
        }
    }
    Ok(())
}

/// What `run --dry-run` prints: the profile's lengths, each cell with its settings (a
/// target's password redacted) and what it is compared with, the targets given, and the
/// order of the steps.
fn dry_run(s: &crate::experiment::suite::Suite, targets: &[String]) -> String {
    let fmt = crate::units::format_duration;
    let mut out = format!("{}: {}\n", s.name, s.question);
    let lengths = match (s.duration, s.warmup) {
        (Some(d), Some(w)) if !w.is_zero() => {
            format!("each repetition {}, after {} warm-up; ", fmt(d), fmt(w))
        }
        (Some(d), _) => format!("each repetition {}; ", fmt(d)),
        _ => String::new(),
    };
    out.push_str(&format!(
        "{lengths}{}; figure {}\n{} cells:\n",
        crate::report::suite::design(s),
        s.figure,
        s.cells.len()
    ));
    for (i, c) in s.cells.iter().enumerate() {
        let versus = match c.versus {
            _ if i == s.baseline => "  (baseline)".to_string(),
            Some(v) => format!("  (versus {})", s.cells[v].name),
            None => String::new(),
        };
        out.push_str(&format!("  {i:>3}  {}{versus}\n", c.name));
        let settings: Vec<String> = c
            .settings
            .iter()
            .map(|(k, v)| match k.as_str() {
                "target" => format!("{k}={}", crate::targets::redact(v)),
                _ => format!("{k}={v}"),
            })
            .collect();
        out.push_str(&crate::report::style::wrap(
            &settings.join(" "),
            "         ",
            "         ",
            80,
        ));
    }
    for t in targets {
        let (name, conninfo) = crate::targets::split_label(t);
        out.push_str(&format!(
            "target {}: {} (--target)\n",
            name.unwrap_or("(every target)"),
            crate::targets::redact(conninfo)
        ));
    }
    out.push_str("steps in order (cell:repetition, 0 = pre-warm, discarded):\n ");
    for st in s.plan() {
        out.push_str(&format!(" {}:{}", st.cell, st.repetition));
    }
    out.push('\n');
    if let Some(d) = s.slice {
        out.push_str(&format!(
            "each round's cells run together, taking turns of {} (the order above is each round's first turns)\n",
            fmt(d)
        ));
    }
    out
}

/// Takes `--run NAME` for a new run: refused when a run holds it, unless that run failed,
/// which keeps its results under another name (nothing is lost) so the corrected run can
/// have the name a Job or a script reads it back by.
fn claim_run_name(store: &crate::experiment::store::Store, name: &str) -> Result<()> {
    if let Some((id, kept)) = store.free_failed_name(name)? {
        eprintln!("note: run {id} named {name} failed; it keeps its results as run {id} ({kept}), and this run takes the name");
        return Ok(());
    }
    if store.resolve_run(name).is_ok() {
        bail!(
            "--run {name}: {} holds a run of that name already; give another name \
             (`connbench runs` lists them; a failed run's name can be given again)",
            store.location()
        );
    }
    Ok(())
}

/// "scaling 42 s (share 48 s)": a part of the lab and the time it took since `from`.
fn took(what: &str, from: Instant, share: Option<std::time::Duration>) -> String {
    let share = share.map(|b| format!(" (share {:.0} s)", b.as_secs_f64()));
    format!(
        "{what} {:.0} s{}",
        from.elapsed().as_secs_f64(),
        share.unwrap_or_default()
    )
}

/// The quick lab's budget for its suites, from its start: 4 minutes in all with the
/// report and the sandbox's removal, and a margin.
pub const LAB_QUICK_BUDGET_S: u64 = 220;

pub async fn run_lab(args: LabArgs) -> Result<Exit> {
    let profile = if args.full {
        crate::experiment::suite::Lengths::Full
    } else {
        crate::experiment::suite::Lengths::Quick
    };
    let mut suites = lab_suites(&args.suites, profile)?;
    skip_unsupported(&mut suites);
    let store = Store::open_at(args.store.store.as_deref())?;
    let store_path = store.location().to_string();
    let started = Instant::now();
    // The quick lab ends within 4 minutes: its suites within 220 s of its start (a
    // suite's share bounds its planned rounds beyond 5 as well as the rounds it adds),
    // the rest for the report, the sandbox's removal and a batch that ran over its
    // estimate; the full lab runs each suite's repetitions.
    let budget = args
        .adaptive
        .budget
        .or((!args.full).then(|| std::time::Duration::from_secs(LAB_QUICK_BUDGET_S)));
    let precision = args.adaptive.precision.or(Some(0.05));
    let (sb, ctx) = suite_context(&suites, &[], "connbench", store, &args.server).await?;
    let lab = run_lab_suites(&suites, &ctx, &store_path, started, budget, precision).await?;
    let mut timings = lab.timings;
    let closing = Instant::now();
    drop(sb);
    let html = if args.no_html || lab.answers.is_empty() {
        None
    } else {
        Some(write_lab_html(
            args.html.as_deref(),
            &lab.answers,
            &ctx.store,
            &store_path,
        )?)
    };
    let mut out = format!(
        "lab ({} profile) answered {} question{} in {:.0} s; runs are in {store_path}\n",
        if args.full { "full" } else { "quick" },
        lab.answers.len(),
        if lab.answers.len() == 1 { "" } else { "s" },
        started.elapsed().as_secs_f64()
    );
    for (name, run, lines) in &lab.answers {
        for l in lines {
            out.push_str(&crate::report::style::wrap(
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
    timings.push(took("sandbox removal and report", closing, None));
    let budget = budget.map(|b| format!("; budget {:.0} s", b.as_secs_f64()));
    let time = format!("time: {}{}", timings.join(", "), budget.unwrap_or_default());
    out.push_str(&crate::report::style::wrap(&time, "", "      ", 80));
    emit(&out);
    Ok(if lab.interrupted {
        Exit::Interrupted
    } else if lab.failed {
        Exit::Failed
    } else {
        Exit::Success
    })
}

/// The lab's built-in suites in `profile`: those named (`--suites`), or every one with a
/// quick form (the others said) in the quick profile.
fn lab_suites(
    named: &[String],
    profile: crate::experiment::suite::Lengths,
) -> Result<Vec<crate::experiment::suite::Suite>> {
    let mut suites: Vec<crate::experiment::suite::Suite> = crate::experiment::suite::BUILTIN
        .iter()
        .map(|(name, text)| crate::experiment::suite::Suite::parse_profile(text, name, profile))
        .collect::<Result<_>>()?;
    if !named.is_empty() {
        let known: Vec<&str> = crate::experiment::suite::BUILTIN
            .iter()
            .map(|(n, _)| *n)
            .collect();
        if let Some(bad) = named.iter().find(|n| !known.contains(&n.as_str())) {
            anyhow::bail!(
                "--suites: no built-in suite {bad:?}{}; the built-in suites are {}",
                crate::experiment::suite::did_you_mean(bad, known.iter().copied()),
                known.join(", ")
            );
        }
        suites.retain(|s| named.contains(&s.name));
    }
    if profile == crate::experiment::suite::Lengths::Quick {
        suites.retain(|s| {
            if !s.quick_lab && named.is_empty() {
                eprintln!(
                    "lab: suite {} runs in `lab --full` only (it has no quick form)",
                    s.name
                );
            }
            s.quick_lab || !named.is_empty()
        });
    }
    Ok(suites)
}

/// Drops, saying why, the suites this machine cannot run: a bridge path without root, a
/// CPU quota without a writable cgroup filesystem, MariaDB not installed.
fn skip_unsupported(suites: &mut Vec<crate::experiment::suite::Suite>) {
    let skip = |suites: &mut Vec<crate::experiment::suite::Suite>,
                uses: &dyn Fn(&crate::experiment::suite::Suite) -> bool,
                why: &dyn std::fmt::Display| {
        suites.retain(|s| {
            if uses(s) {
                eprintln!("lab: skipping suite {}: {why}", s.name);
            }
            !uses(s)
        })
    };
    let uses_setting = |key: &'static str, value: Option<&'static str>| {
        move |s: &crate::experiment::suite::Suite| {
            s.cells
                .iter()
                .any(|c| c.settings.get(key).is_some_and(|v| value.is_none_or(|w| v == w)))
        }
    };
    // The bridge path creates a namespace and links: root only. Said, not silently dropped.
    if let Err(why) = crate::net::netns::check_supported() {
        skip(
            suites,
            &uses_setting("netpath", Some("bridge")),
            &format!("{why:#}"),
        );
    }
    // A server_cpus axis sets a CPU quota: root with a writable cgroup filesystem (probed
    // only when a suite asks for one).
    let sized = uses_setting("server_cpus", None);
    if suites.iter().any(sized) {
        if let Err(why) = crate::sandbox::cgroup::check_supported() {
            skip(suites, &sized, &format!("{why:#}"));
        }
    }
    // The engines suite needs MariaDB beside PostgreSQL (scripts/setup.sh installs it).
    if !crate::sandbox::mariadb::installed() {
        let uses_mariadb = |s: &crate::experiment::suite::Suite| {
            s.cells.iter().any(|c| {
                c.settings
                    .get("target")
                    .is_some_and(|t| crate::sandbox::is_mariadb_target(t))
            })
        };
        skip(
            suites,
            &uses_mariadb,
            &"MariaDB is not installed (apt-get install mariadb-server)",
        );
    }
}

/// What the lab's suites answered, and where its time went.
struct LabRuns {
    /// Each suite's name, run id and answer lines.
    answers: Vec<(String, i64, Vec<String>)>,
    interrupted: bool,
    /// A suite that failed leaves the others to run; the lab exits 1 at the end.
    failed: bool,
    timings: Vec<String>,
}

/// Runs the suites one after another, each on its share of what is left of the budget,
/// printing each one's report as it ends; Ctrl-C ends the lab after the suite it stopped.
async fn run_lab_suites(
    suites: &[crate::experiment::suite::Suite],
    ctx: &crate::experiment::runner::Context,
    store_path: &str,
    started: Instant,
    budget: Option<std::time::Duration>,
    precision: Option<f64>,
) -> Result<LabRuns> {
    let estimates: Vec<f64> = suites.iter().map(|s| s.estimated_s()).collect();
    // Where the lab's time went: the sandbox and its tables, each suite against its
    // share of the budget, the report (printed at the end).
    let mut lab = LabRuns {
        answers: Vec::new(),
        interrupted: false,
        failed: false,
        timings: vec![took("set-up", started, None)],
    };
    for (i, s) in suites.iter().enumerate() {
        let suite_started = Instant::now();
        // What is left of the budget, shared by the suites still to run in proportion to
        // their estimated minimum; a suite that needs less leaves more for the next.
        let share = budget.map(|b| {
            let left = b.saturating_sub(started.elapsed()).as_secs_f64();
            let mine = estimates[i] / estimates[i..].iter().sum::<f64>().max(1e-9);
            std::time::Duration::from_secs_f64(left * mine)
        });
        let s = s.clone().adaptive(share, precision);
        let result = crate::experiment::runner::run(&s, ctx, suite_progress(s.name.clone())).await?;
        lab.timings.push(took(&s.name, suite_started, share));
        emit(&(crate::report::suite::text(&result, store_path) + "\n"));
        if let Some(f) = &result.failed {
            eprint!("{}", failure_text(&result, f, None));
            lab.failed = true;
        }
        lab.answers.push((
            s.name.clone(),
            result.run_id,
            crate::report::suite::answer(&result),
        ));
        if result.interrupted {
            lab.interrupted = true;
            break;
        }
    }
    Ok(lab)
}

/// Writes the HTML report of the lab's runs: to `path`, or into a `reports` directory
/// beside a SQLite store (the working directory for a PostgreSQL one).
fn write_lab_html(
    path: Option<&std::path::Path>,
    answers: &[(String, i64, Vec<String>)],
    store: &crate::experiment::store::Store,
    store_path: &str,
) -> Result<std::path::PathBuf> {
    let path = match path {
        Some(p) => p.to_path_buf(),
        None => (!crate::experiment::store::is_postgres_location(store_path))
            .then(|| std::path::Path::new(store_path).parent())
            .flatten()
            .unwrap_or(std::path::Path::new("."))
            .join("reports")
            .join(format!(
                "lab-{}-runs-{}-{}.html",
                crate::experiment::store::now_utc().replace(':', ""),
                answers[0].1,
                answers[answers.len() - 1].1
            )),
    };
    let reports: Vec<crate::report::data::RunReport> = answers
        .iter()
        .map(|(_, run, _)| crate::report::data::RunReport::load(store, *run))
        .collect::<Result<_>>()?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(&path, crate::report::html::html(&reports))
        .with_context(|| format!("cannot write the HTML report to {}", path.display()))?;
    Ok(path)
}

//! `connbench runs`, `compare` and `report`: stored runs read back, compared and
//! published (HTML, Markdown, CSV, JSON).

use anyhow::{bail, Context, Result};

use crate::cli::{RunsArgs, RunsCommand};
use crate::exit::Exit;
use crate::experiment::store::Store;
use crate::setup::emit;

/// Writes `text` to `path`, or to standard output for `-`.
pub fn write_output(path: &std::path::Path, text: &str) -> Result<()> {
    if path.as_os_str() == "-" {
        emit(text);
        return Ok(());
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!("report: wrote {}", path.display());
    Ok(())
}

/// The runs `texts` name (numbers or names), and whether each is a many-worker run.
fn resolve(store: &Store, texts: &[String]) -> Result<Vec<(i64, bool)>> {
    let rows = store.list_runs()?;
    texts
        .iter()
        .map(|t| {
            let id = store.resolve_run(t)?;
            let workers = rows.iter().any(|r| r.id == id && r.workers.is_some());
            Ok((id, workers))
        })
        .collect()
}

/// `report` of many-worker runs: each merged.
fn report_merged(store: &Store, ids: &[i64], args: &crate::cli::ReportArgs) -> Result<Exit> {
    let merged: Vec<_> = ids
        .iter()
        .map(|&id| crate::experiment::workers::merge(store, id))
        .collect::<Result<_>>()?;
    if let Some(path) = &args.html {
        write_output(path, &crate::report::html::merged_html(&merged)?)?;
    }
    if let Some(dir) = &args.csv {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        write_output(&dir.join("workers.csv"), &crate::report::csv::workers(&merged)?)?;
    }
    let texts: Vec<String> = merged
        .iter()
        .map(crate::report::workers::text)
        .collect::<Result<_>>()?;
    if let Some(path) = &args.markdown {
        let md: String = merged
            .iter()
            .zip(&texts)
            .map(|(m, t)| {
                format!(
                    "## Run {}: load from {} workers\n\n```text\n{t}```\n\n",
                    m.name, m.workers
                )
            })
            .collect();
        write_output(path, &md)?;
    }
    if let Some(path) = &args.json {
        let v = crate::report::workers::WorkersReportJson::of(&merged)?;
        write_output(path, &(serde_json::to_string_pretty(&v)? + "\n"))?;
    }
    if args.markdown.is_none() && args.json.is_none() && args.html.is_none() && args.csv.is_none() {
        emit(&texts.join("\n"));
    }
    Ok(Exit::Success)
}

pub fn report_runs(args: crate::cli::ReportArgs) -> Result<Exit> {
    let store = Store::open_at(args.store.store.as_deref())?;
    let ids = resolve(&store, &args.runs)?;
    if ids.iter().any(|(_, w)| *w) {
        if !ids.iter().all(|(_, w)| *w) {
            bail!("runs of many workers and suite runs cannot share one report: report them apart");
        }
        let ids: Vec<i64> = ids.iter().map(|(id, _)| *id).collect();
        return report_merged(&store, &ids, &args);
    }
    let reports: Vec<crate::report::data::RunReport> = ids
        .iter()
        .map(|&(r, _)| crate::report::data::RunReport::load(&store, r))
        .collect::<Result<_>>()?;
    let results: Vec<crate::experiment::runner::SuiteResult> =
        reports.iter().map(|r| r.result.clone()).collect();
    let any = args.html.is_some() || args.markdown.is_some() || args.csv.is_some() || args.json.is_some();
    let rows = store.list_runs()?;
    if let Some(path) = &args.html {
        write_output(path, &crate::report::html::html(&reports))?;
    }
    if let Some(path) = &args.markdown {
        write_output(path, &crate::report::markdown::markdown(&results))?;
    }
    if let Some(dir) = &args.csv {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        write_output(&dir.join("cells.csv"), &crate::report::csv::cells(&results))?;
    }
    if let Some(path) = &args.json {
        let v = crate::report::data::ReportJson::of(&reports);
        write_output(path, &(serde_json::to_string_pretty(&v)? + "\n"))?;
    }
    if !any {
        // Each run as `connbench run` printed it: its report on stdout, and a failed
        // run's error on stderr.
        for (i, (r, (id, _))) in results.iter().zip(&ids).enumerate() {
            if i > 0 {
                emit("\n");
            }
            emit(&crate::report::suite::text(r, store.location()));
            if let Some(row) = rows.iter().find(|row| row.id == *id) {
                if let Some(note) = failure_note(row, r) {
                    eprint!("{note}");
                }
            }
        }
    }
    Ok(Exit::Success)
}

/// Why a stored run failed, as its run printed it: the cell that failed every repetition,
/// or the error that ended it.
fn failure_note(
    row: &crate::experiment::store::RunRow,
    r: &crate::experiment::runner::SuiteResult,
) -> Option<String> {
    if row.status != crate::experiment::store::Status::Failed.as_str() {
        return None;
    }
    Some(match (&r.failed, &row.error) {
        (Some(f), _) => crate::report::failures::failure_text(r, f, None),
        (None, Some(e)) => format!("error: run {} failed: {e}\n", row.id),
        (None, None) => format!("error: run {} failed\n", row.id),
    })
}

pub fn compare_runs(a: &str, b: &str, store: &crate::cli::StoreArgs) -> Result<Exit> {
    let store = Store::open_at(store.store.as_deref())?;
    let (a, b) = (store.resolve_run(a)?, store.resolve_run(b)?);
    let loaded_a = crate::report::data::load(&store, a)?;
    let loaded_b = crate::report::data::load(&store, b)?;
    let (suite_a, suite_b) = (&loaded_a.suite, &loaded_b.suite);
    if suite_a.figure != suite_b.figure {
        bail!(
            "run {a} measures {} and run {b} measures {}: compare runs of the same suite",
            suite_a.figure,
            suite_b.figure
        );
    }
    let fig = &suite_a.figure;
    // Two runs' rounds are not paired: Welch's t on the logs per cell, and Holm over the
    // matched cells, as one family.
    let rule = crate::stats::compare::Rule {
        sequential: false,
        looks: None,
        ..crate::experiment::runner::rule(suite_a)
    };
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let mut rows = Vec::new();
    let mut family = Vec::new();
    for (i, cell) in suite_a.cells.iter().enumerate() {
        let Some(j) = suite_b.cells.iter().position(|c| c.name == cell.name) else {
            continue;
        };
        let va = loaded_a.values(i, fig);
        let vb = loaded_b.values(j, fig);
        let logs = |v: &[f64]| v.iter().map(|x| x.ln()).collect::<Vec<_>>();
        let test = (va.iter().chain(&vb).all(|x| *x > 0.0))
            .then(|| crate::stats::compare::welch_logs(&logs(&va), &logs(&vb)))
            .flatten();
        if let Some(test) = test {
            family.push((
                rows.len(),
                crate::stats::compare::Candidate {
                    versus: None,
                    name: format!("run {a}"),
                    test,
                    look: 1,
                },
            ));
        }
        rows.push(crate::report::suite::CompareRow {
            cell: cell.name.clone(),
            mean_a: mean(&va),
            mean_b: mean(&vb),
            verdict: "too few results to compare (2 repetitions each are needed)".to_string(),
        });
    }
    let candidates: Vec<_> = family.iter().map(|(_, c)| c.clone()).collect();
    for ((row, _), c) in family.iter().zip(crate::stats::compare::decide(
        &candidates,
        &format!("run {b}"),
        rule,
    )) {
        rows[*row].verdict = c.sentence;
    }
    let matched = rows.len();
    if matched == 0 {
        bail!("runs {a} and {b} have no cell in common; compare runs of the same suite");
    }
    emit(&crate::report::suite::compare_text(
        a,
        b,
        &suite_a.name,
        &suite_b.name,
        fig,
        &rows,
    ));
    Ok(Exit::Success)
}

pub fn run_runs(args: RunsArgs) -> Result<Exit> {
    // `runs --store X list` and `runs list --store X` alike.
    let store_of = |s: crate::cli::StoreArgs| if s.store.is_some() { s } else { args.store.clone() };
    let cmd = match args.command {
        None => RunsCommand::List {
            store: args.store.clone(),
        },
        Some(RunsCommand::List { store }) => RunsCommand::List {
            store: store_of(store),
        },
        Some(RunsCommand::Show { run, store }) => RunsCommand::Show {
            run,
            store: store_of(store),
        },
    };
    match cmd {
        RunsCommand::List { store } => {
            let store = Store::open_at(store.store.as_deref())?;
            let runs = store.list_runs()?;
            if runs.is_empty() {
                emit(&format!(
                    "no runs in {} yet; try `connbench lab --quick`\n",
                    store.location()
                ));
                return Ok(Exit::Success);
            }
            let mut out = format!(
                "{:>5}  {:<20}  {:<11}  {:<12}  {:>4}  question\n",
                "run", "started", "suite", "status", "reps"
            );
            for r in runs {
                let question = match &r.name {
                    Some(name) => format!("{} (run {name})", r.question),
                    None => r.question.clone(),
                };
                out.push_str(&format!(
                    "{:>5}  {:<20}  {:<11}  {:<12}  {:>4}  {}\n",
                    r.id, r.started_at, r.suite, r.status, r.repetitions_saved, question
                ));
            }
            emit(&out);
            Ok(Exit::Success)
        }
        RunsCommand::Show { run, store } => {
            let store = Store::open_at(store.store.as_deref())?;
            let (run, workers) = resolve(&store, &[run])?[0];
            if workers {
                let merged = crate::experiment::workers::merge(&store, run)?;
                emit(&crate::report::workers::text(&merged)?);
                return Ok(Exit::Success);
            }
            let loaded = crate::report::data::load(&store, run)?;
            let (stored, result) = (&loaded.stored, loaded.result());
            // Laid out for 80 columns, as the report under it.
            let error = stored
                .run
                .error
                .as_ref()
                .map(|e| crate::report::style::wrap(&format!("why: {e}"), "  ", "    ", 80))
                .unwrap_or_default();
            emit(&format!(
                "started {} · status {}\n{error}{}",
                stored.run.started_at,
                stored.run.status,
                crate::report::suite::text(&result, store.location())
            ));
            Ok(Exit::Success)
        }
    }
}

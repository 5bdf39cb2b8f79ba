//! `connbench runs`, `compare` and `report`: stored runs read back, compared and
//! published (HTML, Markdown, CSV, JSON).

use anyhow::{bail, Context, Result};

use super::{emit, open_store};
use crate::cli::RunsCommand;
use crate::Exit;

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

pub fn report_runs(args: crate::cli::ReportArgs) -> Result<Exit> {
    let store = open_store(&args.store)?;
    let reports: Vec<crate::report::data::RunReport> = args
        .runs
        .iter()
        .map(|&r| crate::report::data::RunReport::load(&store, r))
        .collect::<Result<_>>()?;
    let results: Vec<crate::experiment::runner::SuiteResult> =
        reports.iter().map(|r| r.result.clone()).collect();
    let any = args.html.is_some() || args.markdown.is_some() || args.csv.is_some() || args.json.is_some();
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
        let v = serde_json::json!({
            "connbench_version": env!("CARGO_PKG_VERSION"),
            "command": "report",
            "runs": reports.iter().map(crate::report::data::RunReport::json_value).collect::<Vec<_>>(),
        });
        write_output(path, &(serde_json::to_string_pretty(&v)? + "\n"))?;
    }
    if !any {
        emit(&crate::report::markdown::markdown(&results));
    }
    Ok(Exit::Success)
}

pub fn compare_runs(a: i64, b: i64, store: &crate::cli::StoreArgs) -> Result<Exit> {
    let store = open_store(store)?;
    let crate::report::data::Loaded {
        suite: suite_a,
        values: values_a,
        ..
    } = crate::report::data::load(&store, a)?;
    let crate::report::data::Loaded {
        suite: suite_b,
        values: values_b,
        ..
    } = crate::report::data::load(&store, b)?;
    if suite_a.figure != suite_b.figure {
        bail!(
            "run {a} measures {} and run {b} measures {}: compare runs of the same suite",
            suite_a.figure,
            suite_b.figure
        );
    }
    let fig = &suite_a.figure;
    let rule = crate::experiment::runner::rule(&suite_a);
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let mut rows = Vec::new();
    for (i, cell) in suite_a.cells.iter().enumerate() {
        let Some(j) = suite_b.cells.iter().position(|c| c.name == cell.name) else {
            continue;
        };
        let va = values_a[i].get(fig).cloned().unwrap_or_default();
        let vb = values_b[j].get(fig).cloned().unwrap_or_default();
        let verdict =
            crate::stats::compare::compare(&va, &vb, rule, &format!("run {a}"), &format!("run {b}"))
                .map(|c| c.sentence)
                .unwrap_or_else(|| "no results to compare".to_string());
        rows.push(crate::report::suite::CompareRow {
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

pub fn run_runs(cmd: RunsCommand) -> Result<Exit> {
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
            let loaded = crate::report::data::load(&store, run)?;
            let (stored, result) = (&loaded.stored, loaded.result());
            emit(&format!(
                "started {} · status {}\n{}",
                stored.run.started_at,
                stored.run.status,
                crate::report::suite::text(&result, &store.path().display().to_string())
            ));
            Ok(Exit::Success)
        }
    }
}

//! A suite cell whose transactions fail names its failures where it answers: the answer
//! line, the cell table (text, Markdown, HTML) and the JSON say which SQLSTATE, how many,
//! in how many repetitions and what share of the cell's transaction time they took; a
//! stored run re-reported says the same. Against the real sandbox.

use crate::common::{check_schema, connbench, dataset, run, scratch, stderr, stdout, suite_args};

/// One client of two divides by zero in every transaction (SQLSTATE 22012): its failures
/// are as certain as its successes, whatever the machine's load, and a suite cell goes on
/// after them as `--continue-on-error` does.
const FAILING: &str = "\\if :client_id = 0\nSELECT 1/0;\n\\else\nSELECT 1;\n\\endif\n";

#[test]
fn a_cells_failed_transactions_are_named_in_its_answer_table_and_json() {
    dataset();
    let dir = scratch("failures");
    let script = dir.join("divide.sql");
    std::fs::write(&script, FAILING).unwrap();
    let suite = format!(
        r#"
name = "failing"
question = "Does a failing cell say so?"
kind = "load"
duration = "300ms"
warmup = "50ms"
repetitions = 2
prewarm = false
baseline = "clean"
[defaults]
target = "unix"
clients = 2
threads = 1
[[cells]]
name = "clean"
workload = "select-only"
[[cells]]
name = "divides"
workload = "{}"
"#,
        script.display()
    );
    let (store, args) = suite_args(&dir, &suite, &["unix"], &["--json"]);
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    check_schema("run", &v);
    let cells = v["cells"].as_array().unwrap();
    let f = &cells[1]["failures"];
    let failed = f["failed_transactions"].as_u64().unwrap();
    assert!(failed > 0, "{f:#}");
    assert_eq!(
        (f["repetitions"].as_u64(), f["failed_repetitions"].as_u64()),
        (Some(2), Some(2)),
        "{f:#}"
    );
    assert_eq!(f["codes"][0]["code"], "22012", "{f:#}");
    assert_eq!(f["codes"][0]["meaning"], "division by zero", "{f:#}");
    assert_eq!(f["codes"][0]["transactions"].as_u64(), Some(failed), "{f:#}");
    assert_eq!(f["codes"][0]["repetitions"].as_u64(), Some(2), "{f:#}");
    let share = f["failed_share"].as_f64().unwrap();
    assert!(share > 0.0 && share <= 1.0, "{f:#}");
    assert!(f["failed_time_s"].as_f64().unwrap() > 0.0, "{f:#}");
    assert!(f["not_measured"].is_null(), "{f:#}");
    // The clean cell: measured, nothing failed (a stall is the machine's to decide).
    let clean = &cells[0]["failures"];
    assert_eq!(clean["failed_transactions"].as_u64(), Some(0), "{clean:#}");
    assert!(clean["failed_share"].as_f64().is_some(), "{clean:#}");

    let answer = crate::common::answer_lines(&v);
    let line = answer
        .iter()
        .find(|a| a.starts_with("divides: "))
        .unwrap_or_else(|| panic!("no failures in the answer: {answer:#?}"));
    let wanted = format!("divides: {failed} failed transactions in 2 of 2 repetitions (22012 (division by zero) {failed} in 2), ");
    assert!(line.starts_with(&wanted), "{line}\nwanted {wanted}");
    assert!(line.contains("% of its transactions' time"), "{line}");
    assert!(
        !answer
            .iter()
            .any(|a| a.starts_with("clean: ") && a.contains("failed")),
        "{answer:#?}"
    );

    // Read back from the store: the text report's answer and cell table say the same,
    // and so do its JSON, Markdown and HTML.
    let s = store.display().to_string();
    let o = connbench(&["report", "1", "--store", &s]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(text.contains(&wanted.trim_end().to_string()), "{text}");
    let note = format!("failed {failed} in 2/2 (22012 ×{failed}), ");
    assert!(text.contains(&note), "the cell table's note {note}: {text}");
    let o = connbench(&["report", "1", "--store", &s, "--json", "-"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let stored: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    check_schema("run", &stored);
    assert_eq!(
        stored["runs"][0]["cells"][1]["failures"], *f,
        "stored as measured"
    );
    assert_eq!(stored["runs"][0]["answer"], v["answer"]);
    let o = connbench(&["report", "1", "--store", &s, "--markdown", "-"]);
    let md = stdout(&o);
    assert!(md.contains("| failed · stalled |") && md.contains(&note), "{md}");
    let html = dir.join("r.html");
    let o = connbench(&["report", "1", "--store", &s, "--html", html.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<th>failed · stalled</th>") && page.contains(&note),
        "{page}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

//! Failed and stalled transactions in words, for every format: a sentence per cell for
//! the answer (what failed, with which code, in how many repetitions, and what share of
//! the cell's transaction time it cost), and the short form the cell tables carry. A
//! comparison decided by failures is then read as one about them, not about the path.

use crate::experiment::summary::{CellResult, SuiteResult};
use crate::stats::failures::{CellFailures, CodeCount, STALL_FACTOR};

/// A share of time as a percentage, with the digits a small one needs.
fn percent(share: f64) -> String {
    let p = share * 100.0;
    match p {
        p if p >= 10.0 => format!("{p:.0}%"),
        p if p >= 1.0 => format!("{p:.1}%"),
        p if p >= 0.01 => format!("{p:.2}%"),
        p if p > 0.0 => "under 0.01%".to_string(),
        _ => "0%".to_string(),
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `40P01 (deadlock) 15 in 7`.
fn code_text(c: &CodeCount) -> String {
    format!(
        "{}{} {} in {}",
        c.code,
        c.meaning.map(|m| format!(" ({m})")).unwrap_or_default(),
        c.transactions,
        c.repetitions
    )
}

/// The answer's sentence for a cell with failed or stalled transactions; `None` for a
/// cell with neither.
pub fn sentence(name: &str, f: &CellFailures) -> Option<String> {
    if !f.any() {
        return None;
    }
    let n = f.repetitions;
    let mut parts = Vec::new();
    if f.failed_transactions > 0 {
        let mut s = format!(
            "{} in {} of {n} repetitions",
            plural(f.failed_transactions, "failed transaction", "failed transactions"),
            f.failed_repetitions
        );
        if !f.codes.is_empty() {
            let codes: Vec<String> = f.codes.iter().map(code_text).collect();
            s.push_str(&format!(" ({})", codes.join(", ")));
        }
        match f.failed_share {
            Some(share) => s.push_str(&format!(", {} of its transactions' time", percent(share))),
            None => s.push_str(&format!(
                "; codes and time not measured: {}",
                f.not_measured.as_deref().unwrap_or("not recorded")
            )),
        }
        parts.push(s);
    }
    if let (Some(k), Some(reps), Some(share)) =
        (f.stalled_transactions, f.stalled_repetitions, f.stalled_share)
    {
        if k > 0 {
            parts.push(format!(
                "{} (over {STALL_FACTOR}× its repetition's p99) in {reps} of {n}, {} of its transactions' time",
                plural(k, "stalled transaction", "stalled transactions"),
                percent(share)
            ));
        }
    }
    Some(format!("{name}: {}", parts.join("; ")))
}

/// The answer's lines: one per cell with failed or stalled transactions.
pub fn answer_lines(r: &SuiteResult) -> Vec<String> {
    r.cells
        .iter()
        .filter_map(|c| sentence(&c.name, c.failures.as_ref()?))
        .collect()
}

/// A cell's failures in a table's few words: `failed 23 in 8/8 (40P01 ×15), 4.1% of
/// time; stalled 3 in 3/8, 2.6%`; `None` for a cell with neither.
pub fn short(c: &CellResult) -> Option<String> {
    let f = c.failures.as_ref().filter(|f| f.any())?;
    let n = f.repetitions;
    let mut parts = Vec::new();
    if f.failed_transactions > 0 {
        let codes: Vec<String> = f
            .codes
            .iter()
            .map(|c| format!("{} ×{}", c.code, c.transactions))
            .collect();
        parts.push(format!(
            "failed {} in {}/{n}{}{}",
            f.failed_transactions,
            f.failed_repetitions,
            if codes.is_empty() {
                String::new()
            } else {
                format!(" ({})", codes.join(", "))
            },
            f.failed_share
                .map(|s| format!(", {} of time", percent(s)))
                .unwrap_or_else(|| ", time not measured".into())
        ));
    }
    if let (Some(k), Some(reps), Some(share)) =
        (f.stalled_transactions, f.stalled_repetitions, f.stalled_share)
    {
        if k > 0 {
            parts.push(format!("stalled {k} in {reps}/{n}, {}", percent(share)));
        }
    }
    Some(parts.join("; "))
}

/// The tables' failures column, one entry per cell (`-` for a clean one); `None` when no
/// cell had a failed or stalled transaction, so a clean run's table keeps its columns.
pub fn column(r: &SuiteResult) -> Option<Vec<String>> {
    let cells: Vec<Option<String>> = r.cells.iter().map(short).collect();
    cells.iter().any(Option::is_some).then(|| {
        cells
            .into_iter()
            .map(|c| c.unwrap_or_else(|| "-".into()))
            .collect()
    })
}

/// What the tables' column means, for the line under them.
pub const LEGEND: &str = "failed: failed transactions in k of n repetitions, by SQLSTATE (MySQL: \
     errno/SQLSTATE), and their share of the time of the cell's transactions; stalled: \
     successful transactions over 10× their repetition's p99, and their share";

/// What a failed run says after its report: which cell failed, the first error (which
/// carries the fix when it is known), and how to run it again.
pub fn failure_text(r: &SuiteResult, f: &crate::experiment::failure::Failure, name: Option<&str>) -> String {
    let again = match name {
        Some(n) => format!(
            "fix it and run again: `--run {n}` may be given again (run {} then keeps its results as {n}~failed-{})",
            r.run_id, r.run_id
        ),
        None => "fix it and run again".to_string(),
    };
    // Not wrapped: the error may end in a command to paste (`connbench init '...'`).
    format!("error: run {} failed: {}\n  {again}\n", r.run_id, f.sentence())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_with_failures_and_stalls_says_both() {
        let f = CellFailures {
            repetitions: 8,
            failed_transactions: 23,
            failed_repetitions: 8,
            codes: vec![
                CodeCount {
                    code: "40P01".into(),
                    meaning: Some("deadlock"),
                    transactions: 15,
                    repetitions: 7,
                },
                CodeCount {
                    code: "23505".into(),
                    meaning: Some("unique violation"),
                    transactions: 8,
                    repetitions: 5,
                },
            ],
            failed_time_s: Some(3.0),
            failed_share: Some(0.041),
            stalled_transactions: Some(3),
            stalled_repetitions: Some(3),
            stalled_time_s: Some(3.0),
            stalled_share: Some(0.026),
            not_measured: None,
        };
        assert_eq!(
            sentence("pg", &f).unwrap(),
            "pg: 23 failed transactions in 8 of 8 repetitions (40P01 (deadlock) 15 in 7, 23505 \
             (unique violation) 8 in 5), 4.1% of its transactions' time; 3 stalled transactions \
             (over 10× its repetition's p99) in 3 of 8, 2.6% of its transactions' time"
        );
        let clean = CellFailures {
            repetitions: 8,
            stalled_transactions: Some(0),
            ..CellFailures::default()
        };
        assert_eq!(sentence("pg", &clean), None);
        assert_eq!(percent(0.00001), "under 0.01%");
        assert_eq!(percent(0.5), "50%");
    }
}

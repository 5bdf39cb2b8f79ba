//! Suite results as CSV, one table per file, for spreadsheets: every figure of every
//! cell with its statistics, and the comparison with the baseline on the suite's figure.

use std::fmt::Write;

use crate::experiment::summary::SuiteResult;

/// Quotes a CSV field when it needs it (RFC 4180).
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn opt(v: Option<f64>) -> String {
    v.filter(|x| x.is_finite())
        .map(|x| x.to_string())
        .unwrap_or_default()
}

pub const CELLS_HEADER: &str =
    "run,suite,cell,baseline,figure,n,mean,ci_low,ci_high,stddev,median,min,max,cv,outliers,\
ratio,ratio_ci_low,ratio_ci_high,p_value,verdict";

/// The `cells` table: one row per cell and figure.
pub fn cells(results: &[SuiteResult]) -> String {
    let mut o = String::from(CELLS_HEADER);
    o.push('\n');
    for r in results {
        for c in &r.cells {
            for (figure, d) in &c.described {
                let cmp = c.comparison.as_ref().filter(|_| *figure == r.suite.figure);
                let verdict = cmp
                    .and_then(|c| serde_json::to_value(c.verdict).ok())
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                let _ = writeln!(
                    o,
                    "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                    r.run_id,
                    field(&r.suite.name),
                    field(&c.name),
                    c.baseline,
                    field(figure),
                    d.mean.n,
                    d.mean.point,
                    opt(Some(d.mean.ci_low)),
                    opt(Some(d.mean.ci_high)),
                    d.stddev,
                    d.median,
                    d.min,
                    d.max,
                    d.cv,
                    d.outliers.len(),
                    opt(cmp.map(|c| c.ratio.point)),
                    opt(cmp.map(|c| c.ratio.ci_low)),
                    opt(cmp.map(|c| c.ratio.ci_high)),
                    opt(cmp.map(|c| c.p_value)),
                    verdict,
                );
            }
        }
    }
    o
}

/// Runs of many workers: one row per worker of each run, then the merged run's row
/// (worker empty), so a spreadsheet sums or plots them as it likes.
pub fn workers(merged: &[crate::experiment::workers::Merged]) -> anyhow::Result<String> {
    let mut o = String::from(
        "run,name,worker,host,status,transactions,failed_transactions,tps,latency_p50_ms,latency_p99_ms,clock_offset_ms,clock_rtt_ms,start_after_first_ms,start_skew_ms\n",
    );
    let f = |v: Option<f64>| v.map(|v| format!("{v}")).unwrap_or_default();
    for m in merged {
        let j = super::workers::json(m)?;
        for w in &j.per_worker {
            o.push_str(&format!(
                "{},{},{},{},{},{},,,,,{},{},{},\n",
                m.id,
                field(&m.name),
                w.worker,
                field(&w.host),
                field(&w.status),
                w.transactions.map(|t| t.to_string()).unwrap_or_default(),
                f(w.clock_offset_ms),
                f(w.clock_rtt_ms),
                f(w.start_after_first_ms),
            ));
        }
        o.push_str(&format!(
            "{},{},,,{},{},{},{},{},{},,,,{}\n",
            m.id,
            field(&m.name),
            field(&j.status),
            j.transactions,
            j.failed_transactions,
            j.tps,
            f(j.latency_p50_ms),
            f(j.latency_p99_ms),
            f(j.start_skew_ms),
        ));
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_when_needed() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("pool, 5 s lifetime"), "\"pool, 5 s lifetime\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}

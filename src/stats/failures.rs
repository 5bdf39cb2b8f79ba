//! What failed transactions and stalled ones cost a suite cell: per repetition, the
//! figures a load repetition saves about them (counts by SQLSTATE or MySQL error, their
//! time, the transactions far slower than the rest); per cell, those figures read back
//! over its counted repetitions into one [`CellFailures`] for reports to name.
//!
//! Method. A failed transaction's time runs from its (intended) start to its failure
//! after its tries, summed exactly in nanoseconds in the load's measurements, as is the
//! successful transactions' latency; a cell's share is the failed (or stalled) time over the time
//! of all its measured transactions, pooled over its repetitions, so a repetition with
//! more transactions weighs more. A stalled transaction is a successful one slower than
//! [`STALL_FACTOR`] times its own repetition's p99: the repetition's, because its
//! latency histogram is at hand when it is measured (a cell's p99 would need every
//! repetition first). Counting from the HDR histogram's buckets is exact; their time is
//! each bucket's value times its count, within the histogram's 0.1%. When more than 1% of
//! a repetition's transactions stall, its p99 is itself a stall and the threshold rises
//! with it: the count is then a lower bound.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

/// A successful transaction slower than this many times its repetition's p99 is stalled.
pub const STALL_FACTOR: u64 = 10;

/// The prefix of a repetition's figure counting its failures of one kind:
/// `failed:40P01`, `failed:1213/40001` (MySQL's errno/SQLSTATE), `failed:query:io`.
pub const CODE_PREFIX: &str = "failed:";

/// The figures a load repetition saves about failures and stalls, beside
/// `failed_transactions` (which runs stored before them already have).
pub const FAILED_TIME: &str = "failed_time_ms";
pub const STALLED: &str = "stalled_transactions";
pub const STALLED_TIME: &str = "stalled_time_ms";
pub const TRANSACTION_TIME: &str = "transaction_time_s";

/// The transactions of a latency histogram (ns) slower than [`STALL_FACTOR`] times its
/// p99, and their time in ns (bucket values: within the histogram's precision).
pub fn stalled(h: &Histogram<u64>) -> (u64, u64) {
    if h.is_empty() {
        return (0, 0);
    }
    let threshold = h.value_at_quantile(0.99).saturating_mul(STALL_FACTOR);
    h.iter_recorded()
        .map(|v| (h.median_equivalent(v.value_iterated_to()), v.count_at_value()))
        .filter(|&(value, _)| value > threshold)
        .fold((0, 0), |(n, ns), (value, count)| {
            (n + count, ns + value.saturating_mul(count))
        })
}

/// One kind of failure in a cell: how many transactions, in how many repetitions.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct CodeCount {
    /// The SQLSTATE (`40P01`), MySQL's `errno/SQLSTATE` (`1213/40001`), or for a failure
    /// that is not the server's, its phase and kind (`query:io`).
    pub code: String,
    /// What the code means, for the codes a load run meets; null for the others.
    pub meaning: Option<&'static str>,
    pub transactions: u64,
    /// Counted repetitions with at least one.
    pub repetitions: usize,
}

/// A cell's failed and stalled transactions over its successful counted repetitions.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct CellFailures {
    /// Successful counted repetitions: the "of n" of every count here.
    pub repetitions: usize,
    pub failed_transactions: u64,
    /// Repetitions with at least one failed transaction.
    pub failed_repetitions: usize,
    /// By code, the most frequent first; empty where not measured (`not_measured`).
    pub codes: Vec<CodeCount>,
    /// Failed transactions' time, summed (s); null where not measured.
    pub failed_time_s: Option<f64>,
    /// That time over the time of all the cell's measured transactions; null where not
    /// measured.
    pub failed_share: Option<f64>,
    /// Successful transactions slower than 10 times their repetition's p99.
    pub stalled_transactions: Option<u64>,
    pub stalled_repetitions: Option<usize>,
    pub stalled_time_s: Option<f64>,
    pub stalled_share: Option<f64>,
    /// Why codes, times and stalls are null: the run was stored before connbench kept
    /// them.
    pub not_measured: Option<String>,
}

impl CellFailures {
    /// Whether there is anything to say: a failed or a stalled transaction.
    pub fn any(&self) -> bool {
        self.failed_transactions > 0 || self.stalled_transactions.unwrap_or(0) > 0
    }
}

/// What a code means, for those a load run meets (PostgreSQL's appendix A; MariaDB's
/// error list for errno); `None` for the others.
pub fn meaning(code: &str) -> Option<&'static str> {
    let (errno, state) = code.split_once('/').unwrap_or(("", code));
    Some(match (errno, state) {
        ("1213", _) => "deadlock",
        ("1205", _) => "lock wait timeout",
        ("1020", _) => "record changed",
        ("1062", _) => "duplicate key",
        (_, "40P01") => "deadlock",
        (_, "40001") => "serialization failure",
        (_, "23505") => "unique violation",
        (_, "22012") => "division by zero",
        (_, "57014") => "statement timeout",
        (_, "55P03") => "lock not available",
        (_, "57P01") => "server shut down",
        _ => return None,
    })
}

/// A cell's failures from its successful repetitions' figures; `None` when none of them
/// has `failed_transactions` (not a load cell, or no repetition succeeded).
pub fn of_repetitions<'a>(reps: impl IntoIterator<Item = &'a BTreeMap<String, f64>>) -> Option<CellFailures> {
    let mut f = CellFailures::default();
    let mut codes: BTreeMap<&str, (u64, usize)> = BTreeMap::new();
    let (mut failed_ms, mut stalled_ms, mut total_s) = (0.0, 0.0, 0.0);
    let (mut stalled, mut stalled_reps, mut measured, mut old) = (0u64, 0usize, false, false);
    for rep in reps {
        let Some(&failed) = rep.get("failed_transactions") else {
            continue;
        };
        f.repetitions += 1;
        f.failed_transactions += failed as u64;
        f.failed_repetitions += usize::from(failed > 0.0);
        let Some(&time_s) = rep.get(TRANSACTION_TIME) else {
            // Stored before connbench kept failures' codes and time.
            old = true;
            continue;
        };
        measured = true;
        total_s += time_s;
        failed_ms += rep.get(FAILED_TIME).copied().unwrap_or(0.0);
        stalled_ms += rep.get(STALLED_TIME).copied().unwrap_or(0.0);
        let n = rep.get(STALLED).copied().unwrap_or(0.0) as u64;
        stalled += n;
        stalled_reps += usize::from(n > 0);
        for (k, v) in rep {
            if let Some(code) = k.strip_prefix(CODE_PREFIX) {
                let e = codes.entry(code).or_default();
                e.0 += *v as u64;
                e.1 += usize::from(*v > 0.0);
            }
        }
    }
    if f.repetitions == 0 {
        return None;
    }
    f.codes = codes
        .into_iter()
        .map(|(code, (transactions, repetitions))| CodeCount {
            code: code.to_string(),
            meaning: meaning(code),
            transactions,
            repetitions,
        })
        .collect();
    f.codes.sort_by_key(|c| std::cmp::Reverse(c.transactions));
    if old {
        f.not_measured = Some(if measured {
            "some repetitions were stored before connbench kept failures' codes and time; \
             the codes, times and stalls cover the others"
                .into()
        } else {
            "stored before connbench kept failures' codes and time".into()
        });
    }
    if measured {
        let share = |ms: f64| {
            if total_s > 0.0 {
                (ms / 1e3 / total_s).min(1.0)
            } else {
                0.0
            }
        };
        f.failed_time_s = Some(failed_ms / 1e3);
        f.failed_share = Some(share(failed_ms));
        f.stalled_transactions = Some(stalled);
        f.stalled_repetitions = Some(stalled_reps);
        f.stalled_time_s = Some(stalled_ms / 1e3);
        f.stalled_share = Some(share(stalled_ms));
    }
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rep(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn stalls_are_the_transactions_over_ten_times_the_p99() {
        let mut h = crate::load::measurements::latency_histogram();
        h.record_n(1_000_000, 9_990).unwrap();
        h.record_n(2_000_000, 9).unwrap();
        // Two transactions held a second (a deadlock's wait), one 9 ms (under 10 x p99).
        h.record_n(1_002_000_000, 2).unwrap();
        h.record(9_000_000).unwrap();
        let (n, ns) = stalled(&h);
        assert_eq!(n, 2);
        assert!((ns as f64 / 2_004_000_000.0 - 1.0).abs() < 0.001, "{ns}");
        assert_eq!(stalled(&crate::load::measurements::latency_histogram()), (0, 0));
    }

    #[test]
    fn a_cells_failures_pool_its_repetitions_and_name_each_code() {
        let reps = [
            rep(&[
                ("failed_transactions", 3.0),
                ("failed:40P01", 2.0),
                ("failed:23505", 1.0),
                (FAILED_TIME, 2_000.0),
                (STALLED, 1.0),
                (STALLED_TIME, 1_000.0),
                (TRANSACTION_TIME, 10.0),
            ]),
            rep(&[
                ("failed_transactions", 0.0),
                (STALLED, 0.0),
                (TRANSACTION_TIME, 10.0),
            ]),
            rep(&[
                ("failed_transactions", 1.0),
                ("failed:40P01", 1.0),
                (FAILED_TIME, 1_000.0),
                (TRANSACTION_TIME, 10.0),
            ]),
        ];
        let f = of_repetitions(&reps).unwrap();
        assert_eq!(
            (f.repetitions, f.failed_transactions, f.failed_repetitions),
            (3, 4, 2)
        );
        assert_eq!(f.codes[0].code, "40P01");
        assert_eq!((f.codes[0].transactions, f.codes[0].repetitions), (3, 2));
        assert_eq!(f.codes[0].meaning, Some("deadlock"));
        assert_eq!((f.codes[1].code.as_str(), f.codes[1].transactions), ("23505", 1));
        assert_eq!(f.failed_share, Some(0.1), "3 s of 30");
        assert_eq!(
            (f.stalled_transactions, f.stalled_repetitions),
            (Some(1), Some(1))
        );
        assert!((f.stalled_share.unwrap() - 1.0 / 30.0).abs() < 1e-12);
        assert!(f.any() && f.not_measured.is_none());
    }

    #[test]
    fn a_run_stored_before_the_codes_says_so_rather_than_zero() {
        let f = of_repetitions(&[rep(&[("failed_transactions", 2.0), ("tps", 10.0)])]).unwrap();
        assert_eq!(f.failed_transactions, 2);
        assert_eq!((f.failed_share, f.stalled_transactions), (None, None));
        assert!(f.codes.is_empty());
        assert!(f.not_measured.unwrap().contains("stored before"));
        assert_eq!(
            of_repetitions(&[rep(&[("total_p50_us", 1.0)])]),
            None,
            "not a load cell"
        );
        assert_eq!(meaning("1213/40001"), Some("deadlock"));
        assert_eq!(meaning("42P01"), None);
    }
}

//! What a fault cost a load run, read from its interval series: the figures of the
//! faults suite.
//!
//! Every figure is measured at the series' resolution (a faults cell runs 100 ms
//! intervals) and says so: a stall is a run of intervals in which no transaction
//! completed; recovery ends with the first interval from which every interval for half a
//! second is back within 10% of the mean before the fault (a backlog caught up in a
//! burst is not yet recovered, as it is not for the application's latency; averaging
//! over longer windows would hide both, since a paced load conserves transactions); and
//! the reconnect storm is the most connections opened in any one-second window after the
//! fault. An interval's band is 10% or three Poisson standard deviations of its expected
//! count, whichever is wider, so that sampling noise alone does not read as disruption.

use super::load::IntervalSummary;

/// How close to its level before the fault throughput must be to count as recovered.
pub const RECOVERED_WITHIN: f64 = 0.10;
/// Recovery is judged over this much of the series, not one interval's noise.
pub const RECOVERY_WINDOW_S: f64 = 0.5;

/// What a fault at `at_s` (seconds into the measurement) cost.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultEffect {
    /// Mean throughput before the fault, transactions per second.
    pub tps_before: f64,
    /// The longest run of intervals with no completed transaction, in seconds (at the
    /// series' resolution); 0 when every interval completed one.
    pub longest_stall_s: f64,
    /// From the fault to the end of the first interval from which every interval for
    /// half a second is within 10% of `tps_before`; at least the rest of the interval in
    /// which the fault landed; `None` when throughput never settled before the run ended.
    pub recovery_s: Option<f64>,
    /// Connections opened per second before the fault, and the most in any one-second
    /// window after it.
    pub connects_per_s_before: f64,
    pub connects_per_s_peak: f64,
}

/// The effect of a fault at `at_s` on `series` (intervals of `interval_s` seconds), which
/// took effect at `landed_s` (no earlier: a strike can land late on a loaded machine, as
/// a terminate's login before its query does); `None` when the series has no interval
/// before the fault to compare with.
pub fn effect(series: &[IntervalSummary], interval_s: f64, at_s: f64, landed_s: f64) -> Option<FaultEffect> {
    let before: Vec<&IntervalSummary> = series.iter().filter(|i| i.end_s <= at_s + 1e-9).collect();
    let span: f64 = before.iter().map(|i| i.end_s - i.start_s).sum();
    if before.is_empty() || span <= 0.0 {
        return None;
    }
    let tps_before = before.iter().map(|i| i.transactions).sum::<u64>() as f64 / span;
    let connects_per_s_before = before.iter().map(|i| i.connects).sum::<u64>() as f64 / span;

    let mut longest = 0usize;
    let mut run = 0usize;
    for i in series {
        run = if i.transactions == 0 { run + 1 } else { 0 };
        longest = longest.max(run);
    }

    let first_after = series.iter().position(|i| i.end_s > at_s + 1e-9)?;
    let in_band = |i: &IntervalSummary| {
        let expected = tps_before * (i.end_s - i.start_s);
        let band = (RECOVERED_WITHIN * expected).max(3.0 * expected.sqrt());
        (i.transactions as f64 - expected).abs() <= band
    };
    let window = ((RECOVERY_WINDOW_S / interval_s).round() as usize).max(1);
    // Not recovered before it struck: the intervals that closed before the strike landed
    // are the level before it, whatever at_s said.
    let first_struck = series.iter().position(|i| i.end_s > landed_s.max(at_s) + 1e-9)?;
    let recovery_s = (first_struck..series.len().saturating_sub(window - 1))
        .find(|&k| series[k..k + window].iter().all(in_band))
        .map(|k| series[k].end_s - at_s);

    // Whole one-second windows only (a cut-off window at the end would inflate the
    // rate), unless less than a second follows the fault: then that remainder.
    let per_second = ((1.0 / interval_s).round() as usize).max(1);
    let after = series.len() - first_after;
    let (width, last_start) = if after >= per_second {
        (per_second, series.len() - per_second)
    } else {
        (after, first_after)
    };
    let connects_per_s_peak = (first_after..=last_start)
        .map(|k| {
            let w = &series[k..k + width];
            let span: f64 = w.iter().map(|i| i.end_s - i.start_s).sum();
            w.iter().map(|i| i.connects).sum::<u64>() as f64 / span.max(f64::MIN_POSITIVE)
        })
        .fold(0.0, f64::max);

    Some(FaultEffect {
        tps_before,
        longest_stall_s: longest as f64 * interval_s,
        recovery_s,
        connects_per_s_before,
        connects_per_s_peak,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(tx: &[u64], connects: &[u64]) -> Vec<IntervalSummary> {
        tx.iter()
            .zip(connects)
            .enumerate()
            .map(|(i, (&t, &c))| IntervalSummary {
                start_s: i as f64 * 0.1,
                end_s: (i + 1) as f64 * 0.1,
                transactions: t,
                tps: t as f64 * 10.0,
                failures: 0,
                connects: c,
                refused_connects: 0,
                mean_ms: None,
                p50_ms: None,
                p95_ms: None,
                p99_ms: None,
                max_ms: None,
            })
            .collect()
    }

    #[test]
    fn a_restart_shows_its_stall_recovery_and_storm() {
        // 1000 per interval before the fault at 1.0 s, three empty intervals, a
        // catch-up burst (too fast: not yet recovered), then steady again.
        let tx = [
            1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 0, 0, 0, 2500, 1000, 1000, 1000,
            1000, 1000, 1000, 1000, 1000,
        ];
        let mut connects = [0u64; 22];
        connects[13] = 4;
        connects[14] = 2;
        let e = effect(&series(&tx, &connects), 0.1, 1.0, 1.0).unwrap();
        assert!((e.tps_before - 10_000.0).abs() < 1e-6);
        assert!((e.longest_stall_s - 0.3).abs() < 1e-9);
        // Intervals 14 to 18 (1.4-1.9 s) are the first half second all within 10%.
        assert!((e.recovery_s.unwrap() - 0.5).abs() < 1e-9, "{e:?}");
        assert_eq!(e.connects_per_s_before, 0.0);
        assert!((e.connects_per_s_peak - 6.0).abs() < 1e-9);
    }

    #[test]
    fn a_strike_that_lands_late_is_not_recovered_before_it_landed() {
        // Due at 1.0 s, landed at 1.15 s (a terminate's login on a loaded machine); the
        // dent it makes stays in band. The intervals before the landing are the level
        // before the fault, not a recovery from it.
        let mut tx = [1000u64; 22];
        tx[11] = 950;
        let e = effect(&series(&tx, &[0; 22]), 0.1, 1.0, 1.15).unwrap();
        assert!((e.recovery_s.unwrap() - 0.2).abs() < 1e-9, "{e:?}");
        let e = effect(&series(&tx, &[0; 22]), 0.1, 1.0, 1.0).unwrap();
        assert!((e.recovery_s.unwrap() - 0.1).abs() < 1e-9, "{e:?}");
    }

    #[test]
    fn no_recovery_before_the_end_is_none_not_a_number() {
        let tx = [1000, 1000, 1000, 1000, 0, 0, 0, 0];
        let e = effect(&series(&tx, &[0; 8]), 0.1, 0.4, 0.4).unwrap();
        assert_eq!(e.recovery_s, None);
        assert!((e.longest_stall_s - 0.4).abs() < 1e-9);
        assert!(
            effect(&series(&tx, &[0; 8]), 0.1, 0.0, 0.0).is_none(),
            "nothing before the fault"
        );
    }
}

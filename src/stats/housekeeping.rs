//! Housekeeping priced: what the requests an application's driver and pool sent of their
//! own (`connbench_trace::housekeeping`) cost it at each added round trip, and what the
//! application would take without those `replay --without housekeeping` leaves out. The
//! round-trip model's (`model::at_distance`): a request costs its recorded time plus the
//! added round trip × its round trips, so each fingerprint costs `round_trips × rtt +
//! recorded time`, summed; the saving is that sum over the requests left out, the same
//! figure `replay --without housekeeping --rtt N` measures as the difference of its
//! elapsed time with and without.

use super::model::at_distance;
use connbench_trace::housekeeping::{Housekeeping, Row};

/// One row's cost at one added round trip.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Cost {
    pub extra_rtt_ms: f64,
    /// In all: recorded time + extra RTT × round trips, ms.
    pub total_ms: f64,
    /// Per application transaction, ms.
    pub per_transaction_ms: Option<f64>,
}

/// One fingerprint's costs, in `Housekeeping::rows`' order.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RowCost {
    pub fingerprint: String,
    pub kind: connbench_trace::housekeeping::Kind,
    pub costs: Vec<Cost>,
}

/// The application without what `--without housekeeping` leaves out, at one added round
/// trip.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Without {
    /// "as recorded", "+50 ms".
    pub scenario: String,
    pub extra_rtt_ms: f64,
    /// The requests left out, their round trips.
    pub requests: u64,
    pub round_trips: u64,
    /// Their cost in all, ms, summed over every session: what the replay's elapsed time
    /// loses when one connection does the work (sessions side by side save it in parallel).
    pub saved_ms: f64,
    /// Per application transaction, ms.
    pub saved_per_transaction_ms: Option<f64>,
    /// The time every request waited on the database (recorded + extra RTT × round
    /// trips) per application transaction, with the housekeeping and without it.
    pub waiting_per_transaction_ms: Option<f64>,
    pub waiting_without_per_transaction_ms: Option<f64>,
}

/// What each row costs at each of `rtts_ms` (0, as recorded, first).
pub fn costs(h: &Housekeeping, rtts_ms: &[f64]) -> Vec<RowCost> {
    h.rows
        .iter()
        .map(|r| RowCost {
            fingerprint: r.fingerprint.clone(),
            kind: r.kind,
            costs: with_recorded(rtts_ms)
                .map(|n| {
                    let total = cost(r, n);
                    Cost {
                        extra_rtt_ms: n,
                        total_ms: total,
                        per_transaction_ms: per(total, h.application_transactions),
                    }
                })
                .collect(),
        })
        .collect()
}

/// The application without the housekeeping left out by default, as recorded and at
/// each of `rtts_ms`.
pub fn predict_without(h: &Housekeeping, rtts_ms: &[f64]) -> Vec<Without> {
    let out: Vec<&Row> = h.rows.iter().filter(|r| r.left_out_by_default).collect();
    let tx = h.application_transactions;
    with_recorded(rtts_ms)
        .map(|n| {
            let saved: f64 = out.iter().map(|r| cost(r, n)).sum();
            let waiting = at_distance(h.time_ms, n, h.round_trips as f64);
            Without {
                scenario: if n == 0.0 {
                    "as recorded".into()
                } else {
                    format!("+{n} ms")
                },
                extra_rtt_ms: n,
                requests: out.iter().map(|r| r.requests).sum(),
                round_trips: out.iter().map(|r| r.round_trips).sum(),
                saved_ms: saved,
                saved_per_transaction_ms: per(saved, tx),
                waiting_per_transaction_ms: per(waiting, tx),
                waiting_without_per_transaction_ms: per(waiting - saved, tx),
            }
        })
        .collect()
}

/// 0 (as recorded), then each added round trip.
fn with_recorded(rtts_ms: &[f64]) -> impl Iterator<Item = f64> + '_ {
    std::iter::once(0.0).chain(rtts_ms.iter().copied().filter(|&n| n > 0.0))
}

/// A row at `n` ms more: its recorded time and `n` × its round trips.
fn cost(r: &Row, n: f64) -> f64 {
    at_distance(r.time_ms, n, r.round_trips as f64)
}

fn per(ms: f64, transactions: u64) -> Option<f64> {
    (transactions > 0).then(|| ms / transactions as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use connbench_trace::housekeeping::Kind;

    fn row(kind: Kind, round_trips: u64, time_ms: f64, left_out: bool) -> Row {
        Row {
            kind,
            fingerprint: format!("{:016x}", round_trips),
            text: String::new(),
            requests: round_trips,
            round_trips,
            at_connect: 0,
            time_ms,
            share: None,
            round_trips_per_transaction: None,
            left_out_by_default: left_out,
        }
    }

    /// 20 application transactions, 20 resets of 0.2 ms each (4 ms) and 2 SETs kept:
    /// at +50 ms the resets cost 4 + 50 × 20 ms, 50.2 ms a transaction, and the SETs
    /// are in neither saving.
    #[test]
    fn a_reset_per_transaction_costs_a_round_trip_each() {
        let h = Housekeeping {
            sessions: 1,
            requests: 82,
            round_trips: 82,
            time_ms: 30.0,
            transactions: 40,
            application_transactions: 20,
            rows: vec![
                row(Kind::Reset, 20, 4.0, true),
                row(Kind::SessionSetup, 2, 0.5, false),
            ],
            ..Housekeeping::default()
        };
        let w = predict_without(&h, &[50.0]);
        assert_eq!(w.len(), 2);
        assert_eq!((w[0].saved_ms, w[0].requests), (4.0, 20));
        assert_eq!(w[1].scenario, "+50 ms");
        assert_eq!(w[1].saved_ms, 4.0 + 50.0 * 20.0);
        assert_eq!(w[1].saved_per_transaction_ms, Some(50.2));
        let with = w[1].waiting_per_transaction_ms.unwrap();
        assert_eq!(with, (30.0 + 50.0 * 82.0) / 20.0);
        assert_eq!(w[1].waiting_without_per_transaction_ms, Some(with - 50.2));
        let c = costs(&h, &[50.0]);
        assert_eq!(c[1].costs[1].total_ms, 0.5 + 100.0);
        assert_eq!(c[0].costs[0].per_transaction_ms, Some(0.2));
    }
}

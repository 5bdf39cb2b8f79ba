//! The round-trip model: a connection's cost at a distance, from a local measurement and
//! the round trips counted on the wire.
//!
//! At round-trip time R, every exchange the client waits for costs R more than it did
//! locally, so `predicted = local + R × round trips`. Two variants are given, because a
//! user-space relay cannot delay TCP's handshake (the kernel completes it before the
//! relay sees the connection):
//!
//! - *through connbench's relay*: the round trips after the socket connect (TLS,
//!   startup, authentication, the query), which is what `connbench relay` and the
//!   `distance` axis emulate, and what the bench checks the model against;
//! - *on a network*: the same plus one round trip for the TCP handshake, which a real
//!   path of that RTT also pays.

use std::time::Duration;

use super::TargetSummary;
use crate::proto::Phase;

/// The predicted connect time of one target at one round-trip time.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct Prediction {
    pub rtt_ms: f64,
    /// Round trips that cross a relay: all but the socket connect's.
    pub round_trips_relayed: u32,
    /// Plus TCP's handshake.
    pub round_trips_network: u32,
    pub local_p50_ms: f64,
    pub local_mean_ms: f64,
    pub relay_p50_ms: f64,
    pub relay_mean_ms: f64,
    pub network_p50_ms: f64,
    pub network_mean_ms: f64,
}

/// The prediction for `t` at `rtt`; `None` when the target has no successful connect.
pub fn predict(t: &TargetSummary, rtt: Duration) -> Option<Prediction> {
    let total = t.total.as_ref()?;
    let socket: u32 = t
        .phases
        .iter()
        .filter(|p| p.phase == Phase::Connect)
        .map(|p| p.round_trips)
        .sum();
    let relayed = total.round_trips.saturating_sub(socket);
    let network = relayed + 1;
    let r = rtt.as_secs_f64() * 1e3;
    let (p50, mean) = (total.time.p50_ns as f64 / 1e6, total.time.mean_ns / 1e6);
    Some(Prediction {
        rtt_ms: r,
        round_trips_relayed: relayed,
        round_trips_network: network,
        local_p50_ms: p50,
        local_mean_ms: mean,
        relay_p50_ms: p50 + r * relayed as f64,
        relay_mean_ms: mean + r * relayed as f64,
        network_p50_ms: p50 + r * network as f64,
        network_mean_ms: mean + r * network as f64,
    })
}

/// A load cell at a distance, predicted from the same cell measured without distance.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct DistancePrediction {
    /// The cell measured without distance that the prediction starts from.
    pub from_cell: String,
    pub rtt_requested_ms: f64,
    /// As the route check measured it (mean over repetitions), when it ran.
    pub rtt_achieved_ms: Option<f64>,
    /// Round trips per transaction counted at distance zero (statements and connects).
    pub round_trips_per_transaction: f64,
    pub local_ms: f64,
    pub predicted_ms: f64,
    pub measured_ms: f64,
    /// measured / predicted.
    pub ratio: f64,
}

/// `local + rtt × round trips`: a transaction at distance, from its local time and the
/// round trips it waited for.
pub fn at_distance(local_ms: f64, rtt_ms: f64, round_trips: f64) -> f64 {
    local_ms + rtt_ms * round_trips
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{PhaseSummary, PhaseSummaryTotal, Summary};

    fn summary(p50_ns: u64) -> Summary {
        Summary {
            n: 10,
            mean_ns: p50_ns as f64,
            stddev_ns: 0.0,
            min_ns: p50_ns,
            p50_ns,
            p90_ns: p50_ns,
            p99_ns: p50_ns,
            max_ns: p50_ns,
        }
    }

    #[test]
    fn every_counted_round_trip_but_the_handshake_crosses_the_relay() {
        // SCRAM over TCP: connect 1, startup 1, auth 2 = 4 round trips, 3 ms locally.
        let phase = |phase, rt, ns| PhaseSummary {
            phase,
            round_trips: rt,
            time: summary(ns),
        };
        let t = TargetSummary {
            phases: vec![
                phase(Phase::Connect, 1, 100_000),
                phase(Phase::Startup, 1, 900_000),
                phase(Phase::Auth, 2, 2_000_000),
            ],
            total: Some(PhaseSummaryTotal {
                round_trips: 4,
                time: summary(3_000_000),
            }),
            ..TargetSummary::default()
        };
        let p = predict(&t, Duration::from_millis(100)).unwrap();
        assert_eq!((p.round_trips_relayed, p.round_trips_network), (3, 4));
        assert!((p.relay_p50_ms - 303.0).abs() < 1e-9);
        assert!((p.network_p50_ms - 403.0).abs() < 1e-9);
    }
}

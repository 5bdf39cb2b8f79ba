//! The round-trip model: a connection's cost at a distance, from a local measurement and
//! the round trips counted on the wire.
//!
//! At round-trip time R, every exchange the client waits for costs R more than it did
//! locally, so `predicted = local + R × round trips`. A new connection also waits for
//! TCP's handshake: one round trip before its first byte can leave, whether or not the
//! local measurement had one (over a Unix socket it did not). connbench's relay makes a
//! connection pay it as a network does (`net::relay`'s handshake), so the prediction
//! through the relay and on a network are one figure: the round trips after the socket
//! connect, plus one for TCP's handshake. A server that speaks first (MySQL) greets the
//! client a round trip after the connect; the socket counts that greeting as a turn.
//!
//! A load cell at a distance is explained from the same cell without distance: its mean
//! latency, plus the local time of any connects it made beyond that cell's, plus the RTT
//! times the round trips counted in the cell itself and one per connect for TCP's
//! handshake ([`explain`]). Connects per transaction are not a constant of the workload:
//! a pool retires a connection after a lifetime, which is a time, and at a distance fewer
//! transactions fit in it.

use std::time::Duration;

use super::TargetSummary;
use crate::proto::Phase;

/// The predicted connect time of one target at one round-trip time.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct Prediction {
    pub rtt_ms: f64,
    /// Round trips a connect pays through connbench's relay, which emulates TCP's
    /// handshake: the same as `round_trips_network` (kept for readers of older output,
    /// when the relay let the handshake through at no cost).
    pub round_trips_relayed: u32,
    /// The round trips after the socket connect, plus one for TCP's handshake.
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
    let network = total.round_trips.saturating_sub(socket) + 1;
    let relayed = network;
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

/// A load cell at a distance, explained by the same cell measured without distance.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct DistancePrediction {
    /// The cell measured without distance that the prediction starts from.
    pub from_cell: String,
    pub rtt_requested_ms: f64,
    /// As the route check measured it (mean over repetitions), when it ran.
    pub rtt_achieved_ms: Option<f64>,
    /// Round trips per transaction counted on the socket in this cell (statements and
    /// the connects it made), plus one per connect for TCP's handshake
    /// (`connects_per_transaction`): the count the prediction multiplies by the RTT.
    pub round_trips_per_transaction: f64,
    /// The same count in the cell without distance. It differs when connects per
    /// transaction do: a pool's lifetime is a time, and at a distance fewer
    /// transactions fit in it.
    pub round_trips_per_transaction_local: f64,
    /// Connects made inside the measurement per transaction, here and without distance.
    pub connects_per_transaction: f64,
    pub connects_per_transaction_local: f64,
    /// Mean latency of the cell without distance.
    pub local_ms: f64,
    /// The local time of the connects this cell made beyond the other's (their
    /// difference per transaction times the mean connect time without distance); 0 when
    /// both made as many, null when it could not be timed (no connect without distance).
    pub connect_local_ms: Option<f64>,
    /// local_ms + connect_local_ms + rtt_requested_ms × round_trips_per_transaction.
    pub predicted_ms: f64,
    pub measured_ms: f64,
    /// measured / predicted.
    pub ratio: f64,
    /// When the ratio is beyond 1 ± 10%: the term the model lacks for this cell.
    pub lacks: Option<String>,
}

/// What the model reads: the cell without distance and this one, each as means over
/// their counted repetitions.
#[derive(Debug, Clone, PartialEq)]
pub struct DistanceInputs {
    pub rtt_ms: f64,
    pub rtt_achieved_ms: Option<f64>,
    /// Without distance: mean latency, round trips and connects per transaction, and
    /// the mean time of a connect made inside the measurement (none made: `None`).
    pub local_ms: f64,
    pub round_trips_local: f64,
    pub connects_local: f64,
    pub connect_ms_local: Option<f64>,
    /// At the distance: round trips (counted on the socket, without TCP's handshake) and
    /// connects per transaction, and the mean latency.
    pub round_trips: f64,
    pub connects: f64,
    pub measured_ms: f64,
    /// The machine's cores busy during this cell (every process counted), and how many
    /// it has: a busy machine delays each wake-up, and a round trip through the relay
    /// wakes two more threads than the same query without it.
    pub busy_cores: Option<f64>,
    pub cpus: usize,
}

/// How far from 1 a ratio may be before the model says what it lacks.
pub const TOLERANCE: f64 = 0.10;

/// The share of the machine's cores busy from which a cell's extra time is put down to
/// waiting for a core.
const BUSY_SHARE: f64 = 0.9;

/// `local + rtt × round trips`: a transaction at distance, from its local time and the
/// round trips it waited for.
pub fn at_distance(local_ms: f64, rtt_ms: f64, round_trips: f64) -> f64 {
    local_ms + rtt_ms * round_trips
}

/// The model for one cell at a distance: the local time, plus the local time of the
/// connects it made beyond the cell without distance, plus the RTT times the round
/// trips counted in this cell and one per connect for TCP's handshake. Round trips are counts, not times, so taking this cell's
/// is no circle: the model says whether its time is local work plus waiting for the
/// wire, and which term is missing when it is not.
pub fn explain(from_cell: &str, i: &DistanceInputs) -> DistancePrediction {
    let extra_connects = i.connects - i.connects_local;
    let connect_local_ms = if extra_connects.abs() < 1e-9 {
        Some(0.0)
    } else {
        i.connect_ms_local.map(|c| extra_connects * c)
    };
    // Every connect made in the cell pays TCP's handshake at the distance.
    let round_trips = i.round_trips + i.connects;
    let predicted = at_distance(
        i.local_ms + connect_local_ms.unwrap_or(0.0),
        i.rtt_ms,
        round_trips,
    );
    let ratio = i.measured_ms / predicted;
    let lacks = ((ratio - 1.0).abs() > TOLERANCE).then(|| {
        if connect_local_ms.is_none() {
            return format!(
                "the local time of its {extra_connects:.2} connects per transaction (the cell without \
                 distance made none inside its measurement to time)"
            );
        }
        let with_achieved = i
            .rtt_achieved_ms
            .map(|a| at_distance(i.local_ms + connect_local_ms.unwrap_or(0.0), a, round_trips));
        let excess = i.measured_ms - predicted;
        let busy = i.busy_cores.filter(|&b| b >= BUSY_SHARE * i.cpus as f64);
        match (with_achieved, busy) {
            (Some(p), _) if (i.measured_ms / p - 1.0).abs() <= TOLERANCE => format!(
                "the route's delay beyond the requested RTT: a round trip took {:.2} ms, not {:.2} ms",
                i.rtt_achieved_ms.unwrap_or(i.rtt_ms),
                i.rtt_ms
            ),
            (_, Some(b)) if excess > 0.0 => format!(
                "waits for a core: {excess:+.2} ms per transaction ({:.2} ms per round trip) beyond the \
                 local time and the round trips, while {b:.2} of the machine's {} cores were busy (every \
                 process counted); each round trip through the relay wakes two more threads than without it",
                excess / round_trips.max(f64::MIN_POSITIVE),
                i.cpus
            ),
            _ => format!(
                "{:+.2} ms per transaction that is neither the local time nor a round trip counted on \
                 the socket",
                i.measured_ms - predicted
            ),
        }
    });
    DistancePrediction {
        from_cell: from_cell.to_string(),
        rtt_requested_ms: i.rtt_ms,
        rtt_achieved_ms: i.rtt_achieved_ms,
        round_trips_per_transaction: round_trips,
        round_trips_per_transaction_local: i.round_trips_local + i.connects_local,
        connects_per_transaction: i.connects,
        connects_per_transaction_local: i.connects_local,
        local_ms: i.local_ms,
        connect_local_ms,
        predicted_ms: predicted,
        measured_ms: i.measured_ms,
        ratio,
        lacks,
    }
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

    fn inputs() -> DistanceInputs {
        // A pool with a short lifetime: 1.3 round trips a transaction at 0 ms (a 3-round-
        // trip connect every 10 transactions), 1.75 at 50 ms (one every 4).
        DistanceInputs {
            rtt_ms: 50.0,
            rtt_achieved_ms: Some(50.5),
            local_ms: 1.0,
            round_trips_local: 1.3,
            connects_local: 0.1,
            connect_ms_local: Some(4.0),
            round_trips: 1.75,
            connects: 0.25,
            measured_ms: 101.5,
            busy_cores: Some(1.2),
            cpus: 2,
        }
    }

    #[test]
    fn a_cell_is_explained_by_its_own_round_trips_and_the_local_time_of_its_extra_connects() {
        let p = explain("pool distance=0ms", &inputs());
        // 1.0 + 0.15 × 4.0 + (1.75 + 0.25 handshakes) × 50 = 101.6
        assert!((p.connect_local_ms.unwrap() - 0.6).abs() < 1e-9, "{p:?}");
        assert!((p.predicted_ms - 101.6).abs() < 1e-9, "{p:?}");
        assert!((p.ratio - 101.5 / 101.6).abs() < 1e-12);
        assert_eq!(p.lacks, None);
        assert!((p.round_trips_per_transaction - 2.0).abs() < 1e-12);
        assert!((p.round_trips_per_transaction_local - 1.4).abs() < 1e-12);
        // The same cell as a constant count of round trips would have it (the 0 ms cell's)
        // is off by a third: what the model printed before.
        assert!(101.5 / at_distance(1.0, 50.0, 1.3) > 1.3);
        // Without the handshake the prediction is short by a round trip per connect.
        assert!((p.predicted_ms - at_distance(1.6, 50.0, 1.75) - 0.25 * 50.0).abs() < 1e-9);
    }

    #[test]
    fn a_cell_beyond_ten_percent_names_the_term_the_model_lacks() {
        // Connects here, none to time without distance.
        let none = DistanceInputs {
            connect_ms_local: None,
            connects_local: 0.0,
            measured_ms: 120.0,
            ..inputs()
        };
        let p = explain("c", &none);
        assert_eq!(p.connect_local_ms, None);
        assert!(
            p.lacks.as_deref().unwrap().contains("connects per transaction"),
            "{p:?}"
        );
        // Round trips slower than requested, and the achieved RTT explains the rest.
        let slow = DistanceInputs {
            rtt_achieved_ms: Some(60.0),
            measured_ms: 1.6 + 2.0 * 60.0,
            ..inputs()
        };
        let p = explain("c", &slow);
        assert!(p.ratio > 1.1, "{p:?}");
        assert!(
            p.lacks
                .as_deref()
                .unwrap()
                .contains("took 60.00 ms, not 50.00 ms"),
            "{p:?}"
        );
        // Neither: the time left over is named with its sign and size.
        let other = DistanceInputs {
            measured_ms: 142.5,
            ..inputs()
        };
        let p = explain("c", &other);
        assert!(
            p.lacks
                .as_deref()
                .unwrap()
                .starts_with("+40.90 ms per transaction"),
            "{p:?}"
        );
        // The same on a machine whose cores were all busy: put down to waiting for one.
        let busy = DistanceInputs {
            busy_cores: Some(1.95),
            ..other
        };
        let l = explain("c", &busy).lacks.unwrap();
        assert!(
            l.starts_with("waits for a core: +40.90 ms per transaction (20.45 ms per round trip)"),
            "{l}"
        );
        // Within 10%: nothing lacking.
        let close = DistanceInputs {
            measured_ms: 109.0,
            ..inputs()
        };
        assert_eq!(explain("c", &close).lacks, None);
    }

    #[test]
    fn a_connect_at_a_distance_pays_its_round_trips_and_tcps_handshake() {
        // SCRAM: startup 1, auth 2, 3 ms locally; over TCP the connect's 1 too.
        let scram = |connect_rt: u32| {
            let phase = |phase, rt, ns| PhaseSummary {
                phase,
                round_trips: rt,
                time: summary(ns),
            };
            TargetSummary {
                phases: vec![
                    phase(Phase::Connect, connect_rt, 100_000),
                    phase(Phase::Startup, 1, 900_000),
                    phase(Phase::Auth, 2, 2_000_000),
                ],
                total: Some(PhaseSummaryTotal {
                    round_trips: connect_rt + 3,
                    time: summary(3_000_000),
                }),
                ..TargetSummary::default()
            }
        };
        let p = predict(&scram(1), Duration::from_millis(100)).unwrap();
        assert_eq!((p.round_trips_relayed, p.round_trips_network), (4, 4));
        assert!((p.relay_p50_ms - 403.0).abs() < 1e-9);
        assert!((p.network_p50_ms - 403.0).abs() < 1e-9);
        // Over a Unix socket the local connect had no handshake; at a distance it has.
        let p = predict(&scram(0), Duration::from_millis(100)).unwrap();
        assert_eq!(p.round_trips_network, 4);
    }
}

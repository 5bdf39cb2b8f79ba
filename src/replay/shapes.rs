//! Each transaction shape's time now, beside its recorded time and `connbench trace`'s
//! prediction for the replay's distance: the answer per endpoint (a one-round-trip
//! pre-ping and a six-round-trip transfer each measured against their own prediction,
//! not one mean of both).
//!
//! The recorded figures and the predictions come from the trace's profile (the same
//! pass that built the schedule, and `stats::app::predict_shapes`, the computation
//! `trace` prints); the figures now from the replay's tally, where each transaction is
//! counted under the shape of the recorded transaction it began as.

use super::summary::{ShapeRow, Spread};
use super::tally::Tally;
use crate::stats::app::predict_shapes;
use connbench_trace::profile::Profile;

/// The profile's shapes, in its order (by share of recorded time), with the replay's
/// figures; `added_rtt_ms` is the distance the replay added (0 on the recorded path).
pub fn rows(profile: &Profile, shapes: &[String], tally: &Tally, added_rtt_ms: f64) -> Vec<ShapeRow> {
    let predictions = predict_shapes(profile, &[added_rtt_ms]);
    profile
        .shapes
        .iter()
        .map(|s| {
            let now = shapes
                .iter()
                .position(|id| *id == s.id)
                .and_then(|i| tally.shapes.get(&(i as u32)));
            let predicted_ms = predictions
                .iter()
                .find(|p| p.shape == s.id)
                .and_then(|p| p.predictions.iter().find(|p| p.extra_rtt_ms == added_rtt_ms))
                .and_then(|p| p.transaction_ms);
            ShapeRow {
                id: s.id.clone(),
                statements: s.statements.clone(),
                round_trips: s.round_trips,
                count_recorded: s.count,
                count_now: now.map_or(0, |t| t.count),
                recorded_mean_ms: s.time_ms.mean,
                predicted_ms,
                now: now.and_then(|t| Spread::of(&t.time, t.sum_ns)),
            }
        })
        .collect()
}

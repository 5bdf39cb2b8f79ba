//! The trace's own prediction for a cell's path (`stats::app`, what `connbench trace`
//! prints): the scenario a cell's path is, the figures kept with each repetition so a
//! stored run reports them as a live one does, and the prediction `summary` sets beside
//! the measured figure.

use std::collections::BTreeMap;

use anyhow::Result;

use super::check::{pooled, trace_of};
use super::traces::Trace;
use crate::options;
use crate::options::cell::Settings;

/// The trace's prediction for this cell's path, kept with each repetition (the same
/// every time: it is read from the recording).
pub(super) fn predicted_figures(f: &mut BTreeMap<String, f64>, trace: &Trace, s: &Settings) -> Result<()> {
    if let Some(r) = trace.recorded_request_ms {
        f.insert("trace_recorded_request_ms".into(), r);
    }
    if let Some(k) = trace.round_trips_per_request {
        f.insert("trace_round_trips_per_request".into(), k);
    }
    let (scenario, rtt_ms) = scenario(s)?;
    let app = crate::stats::app::predict(&trace.profile, &[rtt_ms]);
    if let Some(p) = app.iter().find(|p| p.scenario == scenario) {
        if let Some(v) = p.transaction_ms {
            f.insert("trace_predicted_transaction_ms".into(), v);
        }
        if let Some(v) = p.connect_ms {
            f.insert("trace_predicted_connect_ms".into(), v);
        }
    }
    // Each shape's, beside its measured `shape_<id>_mean_ms`.
    for sp in crate::stats::app::predict_shapes(&trace.profile, &[rtt_ms]) {
        let v = sp
            .predictions
            .iter()
            .find(|p| p.scenario == scenario)
            .and_then(|p| p.transaction_ms);
        if let Some(v) = v {
            f.insert(
                format!("trace_predicted_{}", super::check::shape_figure(&sp.shape)),
                v,
            );
        }
    }
    Ok(())
}

/// The scenario of `connbench trace`'s predictions a cell's path is ("+20 ms", "+20 ms,
/// over TLS", "+20 ms, PgBouncer near the database", "+20 ms, client-side pool", "as
/// recorded"), and its added RTT. A pool opens its connects before the work, so over TLS
/// too its prediction is the pool's.
pub fn scenario(s: &Settings) -> Result<(String, f64)> {
    let rtt_ms = options::route_spec(s)?.distance.as_secs_f64() * 1e3;
    let pgbouncer = s.get("target").is_some_and(|t| t.starts_with("pgbouncer"));
    let tls = matches!(
        s.get("sslmode").map(String::as_str),
        Some("require" | "verify-ca" | "verify-full")
    ) || s.get("target").is_some_and(|t| t == "tls");
    // Written as `stats::app` writes it, so the scenarios match.
    let n = rtt_ms;
    Ok((
        match (pgbouncer, tls) {
            (true, _) => format!("+{n} ms, PgBouncer near the database"),
            _ if pooled(s) => format!("+{n} ms, client-side pool"),
            (false, true) => format!("+{n} ms, over TLS"),
            (false, false) if rtt_ms == 0.0 => "as recorded".to_string(),
            (false, false) => format!("+{n} ms"),
        },
        rtt_ms,
    ))
}

/// A trace cell's measured figure beside the trace's own prediction for its path (the
/// round-trip model of `connbench trace`, from the recording alone).
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct TracePrediction {
    /// The prediction's scenario, as `connbench trace` names it: "as recorded", "+20 ms",
    /// "+20 ms, over TLS", "+20 ms, PgBouncer near the database".
    pub scenario: String,
    pub rtt_requested_ms: f64,
    /// As the route check measured it, when the cell has a distance.
    pub rtt_achieved_ms: Option<f64>,
    /// The recorder's mean response time of a request (its last byte to the answer's).
    pub recorded_request_ms: Option<f64>,
    /// Round trips a request waited on when recorded (pipelined requests share one).
    pub round_trips_per_request: Option<f64>,
    /// recorded_request_ms + rtt_requested_ms × round_trips_per_request; null when not
    /// predicted (`not_predicted` says why).
    pub predicted_request_ms: Option<f64>,
    /// The replay's mean response time of a request, the mean over the repetitions.
    pub measured_request_ms: f64,
    /// measured / predicted.
    pub ratio: Option<f64>,
    /// `connbench trace`'s prediction for this path: a transaction (first request to last
    /// response) and a new connection's set-up.
    pub predicted_transaction_ms: Option<f64>,
    pub predicted_connect_ms: Option<f64>,
    pub not_predicted: Option<String>,
}

/// The prediction beside a trace cell's measurement, from the means of its repetitions'
/// figures (`mean`); `None` for a cell that replays no trace or measured nothing.
pub fn prediction(s: &Settings, mean: impl Fn(&str) -> Option<f64>) -> Option<TracePrediction> {
    trace_of(s)?;
    let (scenario, rtt_ms) = scenario(s).ok()?;
    let measured = mean("latency_mean_ms")?;
    let recorded = mean("trace_recorded_request_ms");
    let k = mean("trace_round_trips_per_request");
    let pgbouncer = scenario.ends_with("PgBouncer near the database");
    let predicted = (!pgbouncer)
        .then(|| {
            recorded
                .zip(k)
                .map(|(r, k)| crate::stats::model::at_distance(r, rtt_ms, k))
        })
        .flatten();
    let not_predicted = if pgbouncer {
        Some(
            "PgBouncer's own connect and pooling costs are not in a trace of an application that did not \
             use one: the measurement is the answer"
                .to_string(),
        )
    } else if predicted.is_none() {
        Some("the trace holds no timed request to start from".to_string())
    } else {
        None
    };
    Some(TracePrediction {
        scenario,
        rtt_requested_ms: rtt_ms,
        rtt_achieved_ms: mean("rtt_achieved_ms"),
        recorded_request_ms: recorded,
        round_trips_per_request: k,
        predicted_request_ms: predicted,
        measured_request_ms: measured,
        ratio: predicted.filter(|p| *p > 0.0).map(|p| measured / p),
        predicted_transaction_ms: mean("trace_predicted_transaction_ms"),
        predicted_connect_ms: mean("trace_predicted_connect_ms"),
        not_predicted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_s_path_names_the_trace_s_scenario_and_the_prediction_adds_its_round_trips() {
        let cell = |pairs: &[(&str, &str)]| -> Settings {
            let mut s: Settings = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            s.insert("workload".into(), "trace:a".into());
            s
        };
        let scen = |pairs: &[(&str, &str)]| scenario(&cell(pairs)).unwrap().0;
        assert_eq!(scen(&[("target", "tcp")]), "as recorded");
        assert_eq!(scen(&[("target", "tcp"), ("distance", "20ms")]), "+20 ms");
        assert_eq!(scen(&[("target", "tls"), ("distance", "1ms")]), "+1 ms, over TLS");
        assert_eq!(
            scen(&[("target", "pgbouncer_tcp"), ("distance", "50ms")]),
            "+50 ms, PgBouncer near the database"
        );
        assert_eq!(
            scen(&[("target", "tcp"), ("distance", "10ms"), ("connection", "pool")]),
            "+10 ms, client-side pool"
        );
        let figures: BTreeMap<&str, f64> = [
            ("latency_mean_ms", 21.0),
            ("trace_recorded_request_ms", 0.4),
            ("trace_round_trips_per_request", 1.0),
        ]
        .into();
        let mean = |k: &str| figures.get(k).copied();
        let p = prediction(&cell(&[("target", "tcp"), ("distance", "20ms")]), mean).unwrap();
        assert_eq!(p.predicted_request_ms, Some(20.4));
        assert!((p.ratio.unwrap() - 21.0 / 20.4).abs() < 1e-9);
        let p = prediction(&cell(&[("target", "pgbouncer_tcp")]), mean).unwrap();
        assert_eq!((p.predicted_request_ms, p.ratio), (None, None));
        assert!(p.not_predicted.unwrap().contains("PgBouncer"));
    }
}

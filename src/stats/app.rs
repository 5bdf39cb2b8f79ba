//! The round-trip model applied to a recorded application: what its transactions and
//! its connects would take at another distance, with a client-side pool, or over TLS,
//! from the round trips its trace counted and the times it measured. The same model as
//! the suites' (`model::at_distance`: local time + RTT × round trips); here the "local"
//! time is the recording's own, so a prediction for +N ms is for N ms *beyond* the
//! distance the application had when it was recorded.
//!
//! Each transaction shape (`trace::shapes`) is predicted by the same computation as the
//! application's mean transaction, from the shape's own mean time and round trips: at a
//! distance a shape pays its own round trips. A client-side pool and TLS change only
//! connects, never a transaction's own time; a shape's "with connects" figure carries
//! the application's connects per transaction, as the whole's does.
//!
//! TLS: when the recorder terminated the application's TLS (`record --listen-tls`), the
//! trace holds each handshake's time and round trips, and "over TLS" (and the recorded
//! connects' own figure at a distance) uses them: its time as measured (CPU included),
//! its round trips at the server's distance. Otherwise the model assumes TLS 1.3's one
//! round trip (and PostgreSQL's SSLRequest) and says its CPU is not in the trace.
//!
//! What it cannot predict it says: a PgBouncer's own connect cost is not in a trace of
//! an application that did not use one, and TLS's local cost without a recorded
//! handshake is not either; those figures are `null` with the reason.

use super::housekeeping::Without;
use super::model::at_distance;
use connbench_trace::housekeeping::Housekeeping;
use connbench_trace::profile::Profile;
use connbench_trace::shapes::ShapeProfile;
use connbench_trace::Engine;

/// One "what if", per transaction and per connect, ms.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Prediction {
    /// What changes: "as recorded", "+50 ms", "+50 ms, client-side pool", ...
    pub scenario: String,
    pub extra_rtt_ms: f64,
    /// A transaction's mean time, first request to last response.
    pub transaction_ms: Option<f64>,
    /// A new connection's setup, the TCP connect to the server's "ready".
    pub connect_ms: Option<f64>,
    /// A transaction's mean time with its share of the connects the application made
    /// (one connect per `transactions_per_session` transactions; none with a pool).
    pub per_transaction_ms: Option<f64>,
    /// An application transaction (one that holds anything besides housekeeping) with
    /// its share of the housekeeping: every transaction's time at this scenario, plus the
    /// requests that stand in no transaction, over the application's transactions; and
    /// the same without what `replay --without housekeeping` leaves out, less
    /// `stats::housekeeping`'s saving at this added round trip. Connects apart. `null`
    /// where `transaction_ms` is, or with no application transaction; filled by
    /// [`with_housekeeping`].
    pub application_transaction_ms: Option<f64>,
    pub without_housekeeping_ms: Option<f64>,
    /// The model's terms, in words.
    pub how: String,
    /// Why a figure is `null`, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_predicted: Option<String>,
}

/// One transaction shape's scenarios.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ShapePrediction {
    /// The shape's `id`, as `profile.shapes[]` has it.
    pub shape: String,
    pub predictions: Vec<Prediction>,
}

/// The scenarios for each extra round trip in `rtts_ms`: the distance alone, with a
/// client-side pool, over TLS, and PgBouncer near the database (not predicted).
pub fn predict(p: &Profile, rtts_ms: &[f64]) -> Vec<Prediction> {
    let r = &p.requests;
    scenarios(p, r.transaction_ms.mean, r.round_trips_per_transaction, rtts_ms)
}

/// [`predict`]'s scenarios for each of the profile's transaction shapes, in its order.
pub fn predict_shapes(p: &Profile, rtts_ms: &[f64]) -> Vec<ShapePrediction> {
    p.shapes
        .iter()
        .map(|s: &ShapeProfile| ShapePrediction {
            shape: s.id.clone(),
            predictions: scenarios(p, s.time_ms.mean, Some(s.round_trips), rtts_ms),
        })
        .collect()
}

/// Fills each of [`predict`]'s scenarios' `application_transaction_ms` and
/// `without_housekeeping_ms` from the housekeeping tally `h` of the same trace and its
/// saving `without` (`stats::housekeeping::predict_without`, at the same added round
/// trips). "Without" is "with" less the saving per application transaction that the
/// housekeeping section prints, by construction: the two never disagree. A scenario's
/// transaction time covers every transaction the profile counts (the housekeeping's own
/// among them); the requests in no transaction (a MySQL COM_PING) are added at the same
/// distance, as the saving counts them too.
pub fn with_housekeeping(predictions: &mut [Prediction], p: &Profile, h: &Housekeeping, without: &[Without]) {
    let app_tx = h.application_transactions;
    for pr in predictions.iter_mut() {
        let n = pr.extra_rtt_ms;
        let saved = without.iter().find(|w| w.extra_rtt_ms == n);
        let Some((t, saved)) = pr.transaction_ms.zip(saved) else {
            continue;
        };
        if app_tx == 0 {
            continue;
        }
        let outside = at_distance(h.outside_time_ms, n, h.outside_round_trips as f64);
        let with = (t * p.requests.transactions as f64 + outside) / app_tx as f64;
        pr.application_transaction_ms = Some(with);
        pr.without_housekeeping_ms = Some(with - saved.saved_ms / app_tx as f64);
    }
}

/// The scenarios for a transaction of mean time `tx` (ms) and `rts` round trips, with
/// the connects of the profile's application.
fn scenarios(p: &Profile, tx: Option<f64>, rts: Option<f64>, rtts_ms: &[f64]) -> Vec<Prediction> {
    let r = &p.requests;
    let c = &p.connections;
    let tls = Tls::of(p);
    // The TCP connect is one round trip, then the startup and authentication's.
    let connect_rts = c.setup_round_trips.map(|s| 1.0 + s);
    // Without the TLS the recorder terminated: a connect's own time and round trips.
    let plain_local = match (c.upstream_connect_ms.p50, c.setup_ms.mean) {
        (Some(tcp), Some(setup)) => Some(tcp + setup),
        _ => None,
    };
    // As recorded: with the handshakes of the connects that had one.
    let connect_local = plain_local.map(|l| l + tls.recorded.map_or(0.0, |(h, _)| tls.share * h));
    let per_tx =
        |tx: Option<f64>, connect: Option<f64>, pooled: bool| match (tx, connect, r.transactions_per_session)
        {
            (Some(t), _, _) if pooled => Some(t),
            (Some(t), Some(c), Some(per)) if per > 0.0 => Some(t + c / per),
            _ => None,
        };
    let mut out = vec![Prediction {
        scenario: "as recorded".into(),
        extra_rtt_ms: 0.0,
        transaction_ms: tx,
        connect_ms: connect_local,
        per_transaction_ms: per_tx(tx, connect_local, false),
        application_transaction_ms: None,
        without_housekeeping_ms: None,
        how: "measured in the trace".into(),
        not_predicted: None,
    }];
    for &n in rtts_ms {
        // The recorder stood beside the application: what it answered itself (an `N`, a
        // TLS handshake) pays the whole distance to the server at +N ms.
        let rtt = n + c.upstream_connect_ms.p50.unwrap_or(0.0);
        let t = tx.zip(rts).map(|(t, k)| at_distance(t, n, k));
        let base = plain_local.zip(connect_rts).map(|(l, k)| at_distance(l, n, k));
        let recorded_tls = tls
            .recorded
            .map_or((0.0, 0.0), |(h, k)| (tls.share * h, tls.share * k * rtt));
        let connect = base.map(|b| b + tls.asked * rtt + recorded_tls.0 + recorded_tls.1);
        let terms = format!(
            "{} + {n} ms × {} round trips a transaction; a connect {} + {n} ms × {} round trips (TCP's \
             handshake, the startup and authentication)",
            opt(tx),
            opt(rts),
            opt(plain_local),
            opt(connect_rts)
        );
        let mut how = terms.clone();
        if tls.asked > 0.0 {
            how.push_str(&format!(
                "; and the SSLRequest's N from the server, for the {:.0}% of connects that asked",
                tls.asked * 100.0
            ));
        }
        if let Some((h, k)) = tls.recorded {
            how.push_str(&format!(
                "; and the recorded TLS handshake ({h:.3} ms, {k} round trips at {rtt:.3} ms) for the {:.0}% of \
                 connects that used TLS",
                tls.share * 100.0
            ));
        }
        out.push(Prediction {
            scenario: format!("+{n} ms"),
            extra_rtt_ms: n,
            transaction_ms: t,
            connect_ms: connect,
            per_transaction_ms: per_tx(t, connect, false),
            application_transaction_ms: None,
            without_housekeeping_ms: None,
            how,
            not_predicted: None,
        });
        out.push(Prediction {
            scenario: format!("+{n} ms, client-side pool"),
            extra_rtt_ms: n,
            transaction_ms: t,
            connect_ms: None,
            per_transaction_ms: per_tx(t, None, true),
            application_transaction_ms: None,
            without_housekeeping_ms: None,
            how: format!("{terms}; the pool's connects opened before the work, none a transaction"),
            not_predicted: None,
        });
        let (tls_connect, tls_how, tls_not) = tls.every_connect(base, rtt);
        out.push(Prediction {
            scenario: format!("+{n} ms, over TLS"),
            extra_rtt_ms: n,
            transaction_ms: t,
            connect_ms: tls_connect,
            per_transaction_ms: per_tx(t, tls_connect, false),
            application_transaction_ms: None,
            without_housekeeping_ms: None,
            how: format!("{terms}; {tls_how}"),
            not_predicted: tls_not,
        });
        out.push(Prediction {
            scenario: format!("+{n} ms, PgBouncer near the database"),
            extra_rtt_ms: n,
            transaction_ms: None,
            connect_ms: None,
            per_transaction_ms: None,
            application_transaction_ms: None,
            without_housekeeping_ms: None,
            how: String::new(),
            not_predicted: Some(
                "PgBouncer's own connect and pooling costs are not in a trace of an application that did \
                 not use one: measure them with `connbench connect` against a PgBouncer"
                    .into(),
            ),
        });
    }
    out
}

/// What a trace says of its connects' TLS, for the model.
struct Tls {
    postgres: bool,
    /// The share of connects whose PostgreSQL SSLRequest the recorder answered `N`: at a
    /// server N ms away the application (sslmode=prefer) pays that round trip there.
    /// MySQL's SSLRequest has no answer, so none.
    asked: f64,
    /// The share of connects whose TLS the recorder terminated (`record --listen-tls`).
    share: f64,
    /// Their handshake as recorded: mean time (ms) and round trips, PostgreSQL's
    /// SSLRequest and `S` among them.
    recorded: Option<(f64, f64)>,
}

impl Tls {
    fn of(p: &Profile) -> Tls {
        let c = &p.connections;
        let postgres = p.engine == Engine::Postgres;
        let per = |n: u64| {
            if c.sessions > 0 {
                n as f64 / c.sessions as f64
            } else {
                0.0
            }
        };
        let request = if postgres { 1.0 } else { 0.0 };
        Tls {
            postgres,
            asked: if postgres {
                per(c.tls_requested.saturating_sub(c.tls))
            } else {
                0.0
            },
            share: per(c.tls),
            recorded: c
                .tls_handshake_ms
                .mean
                .zip(c.tls_handshake_round_trips)
                .filter(|_| c.tls > 0)
                .map(|(h, k)| (h, k + request)),
        }
    }

    /// Every connect over TLS, from `base` (a plaintext connect at the distance, whose
    /// round trips cost `rtt` each beyond it): the connect, how, and what is left out.
    /// The recorded handshake when the trace has one (its time at the recorder, CPU
    /// included, and its round trips at the server's distance); else the model's
    /// assumption, TLS 1.3's one round trip (and PostgreSQL's SSLRequest), without its
    /// CPU.
    fn every_connect(&self, base: Option<f64>, rtt: f64) -> (Option<f64>, String, Option<String>) {
        if let Some((h, k)) = self.recorded {
            return (
                base.map(|b| b + h + k * rtt),
                format!(
                    "TLS: the handshake recorded (record --listen-tls, {:.0}% of connects), {h:.3} ms at the \
                     recorder and {k} round trips a connect{}",
                    self.share * 100.0,
                    if self.postgres { " (the SSLRequest's among them)" } else { "" }
                ),
                None,
            );
        }
        let (extra, what) = if self.postgres {
            (2.0 - self.asked, "SSLRequest, TLS 1.3")
        } else {
            (1.0, "TLS 1.3; MySQL's SSLRequest waits for no answer")
        };
        (
            base.map(|b| b + self.asked * rtt + extra * rtt),
            format!("TLS: {extra} more round trips a connect ({what})"),
            Some("the TLS handshake's own CPU time is not in the trace (not added)".into()),
        )
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or("(unknown)".to_string(), |v| format!("{v:.3}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use connbench_trace::profile::{Connections, Requests, Spread, TimeSplit};
    use connbench_trace::shapes::ShapeProfile;
    use connbench_trace::Engine;

    /// The profile of one session (the trace crate's profile test reads these figures
    /// from events): transactions of 3.5 ms and 2 round trips; a connect of 0.2 ms (the
    /// relay's upstream connect, the recorded round trip) and 3.1 ms of set-up in 3
    /// round trips; `asked` of its connects asked for TLS.
    fn profile(asked: u64) -> Profile {
        let spread = |p50: Option<f64>, mean: Option<f64>| Spread {
            n: 1,
            mean,
            p50,
            ..Spread::default()
        };
        Profile {
            engine: Engine::Postgres,
            recorded_at: String::new(),
            redacted: false,
            duration_s: 1.0,
            connections: Connections {
                sessions: 1,
                upstream_connect_ms: spread(Some(0.2), Some(0.2)),
                setup_ms: spread(Some(3.1), Some(3.1)),
                setup_round_trips: Some(3.0),
                tls_requested: asked,
                ..Connections::default()
            },
            requests: Requests {
                transactions: 2,
                round_trips_per_transaction: Some(2.0),
                transactions_per_session: Some(2.0),
                transaction_ms: spread(None, Some(3.5)),
                ..Requests::default()
            },
            split: TimeSplit::default(),
            statements: Vec::new(),
            shapes: Vec::new(),
            undecoded: 0,
            undecoded_reason: None,
            timeline: Default::default(),
        }
    }

    /// +50 ms adds 2 round trips a transaction and 4 a connect (the handshake's one
    /// included); TLS adds the SSLRequest's and TLS 1.3's, at the recorded round trip plus
    /// 50; a client that asked for TLS was answered locally by the recorder, and a server
    /// 50 ms away answers that round trip.
    #[test]
    fn a_recorded_transaction_and_connect_at_a_distance_and_over_tls() {
        let pr = predict(&profile(0), &[50.0]);
        assert_eq!(pr[1].transaction_ms, Some(3.5 + 50.0 * 2.0));
        assert_eq!(pr[1].connect_ms, Some(0.2 + 3.1 + 50.0 * 4.0));
        assert_eq!(pr[3].scenario, "+50 ms, over TLS");
        let tls = pr[3].connect_ms.unwrap() - pr[1].connect_ms.unwrap();
        assert!((tls - 2.0 * 50.2).abs() < 1e-9, "{tls}");

        let pr2 = predict(&profile(1), &[50.0]);
        let plain = pr2[1].connect_ms.unwrap() - pr[1].connect_ms.unwrap();
        assert!((plain - 50.2).abs() < 1e-9, "{plain}");
        let tls2 = pr2[3].connect_ms.unwrap() - pr[1].connect_ms.unwrap();
        assert!((tls2 - 2.0 * 50.2).abs() < 1e-9, "{tls2}");
    }

    /// A trace whose connects used TLS the recorder terminated: "over TLS" takes the
    /// recorded handshake (4 ms, TLS 1.3's one round trip and the SSLRequest's), not the
    /// assumption, and the recorded connects at +50 ms pay it too; the method says so.
    #[test]
    fn a_recorded_tls_handshake_replaces_the_assumption() {
        let mut p = profile(1);
        p.connections.tls = 1;
        p.connections.tls_handshake_ms = Spread {
            n: 1,
            mean: Some(4.0),
            p50: Some(4.0),
            ..Spread::default()
        };
        p.connections.tls_handshake_round_trips = Some(1.0);
        let pr = predict(&p, &[50.0]);
        assert_eq!(pr[0].connect_ms, Some(0.2 + 3.1 + 4.0));
        let plain = 0.2 + 3.1 + 50.0 * 4.0;
        let tls = plain + 4.0 + 2.0 * 50.2;
        assert!((pr[3].connect_ms.unwrap() - tls).abs() < 1e-9, "{:?}", pr[3]);
        assert!((pr[1].connect_ms.unwrap() - tls).abs() < 1e-9, "{:?}", pr[1]);
        assert!(pr[3].how.contains("the handshake recorded"), "{}", pr[3].how);
        assert_eq!(pr[3].not_predicted, None);
        // MySQL's SSLRequest waits for no answer: the assumption is TLS 1.3's one.
        let mut my = profile(0);
        my.engine = Engine::Mysql;
        let pr = predict(&my, &[50.0]);
        let extra = pr[3].connect_ms.unwrap() - pr[1].connect_ms.unwrap();
        assert!((extra - 50.2).abs() < 1e-9, "{extra}");
    }

    fn shape(id: &str, count: u64, mean: f64, round_trips: f64) -> ShapeProfile {
        ShapeProfile {
            id: id.into(),
            fingerprints: Vec::new(),
            statements: Vec::new(),
            truncated: false,
            count,
            share: None,
            requests: round_trips,
            round_trips,
            time_ms: Spread {
                n: count,
                mean: Some(mean),
                ..Spread::default()
            },
            steps: Vec::new(),
            percentiles_ms: Vec::new(),
        }
    }

    /// The application's two transactions of 3.5 ms mean as two shapes: a one-round-trip
    /// pre-ping of 1 ms and a three-round-trip transfer of 6 ms. Each is predicted from
    /// its own round trips (their mean, the whole's figure, is neither); a pool and TLS
    /// leave a transaction's own time as it is and change only its connects' share.
    #[test]
    fn each_shape_is_predicted_from_its_own_round_trips() {
        let mut p = profile(0);
        p.shapes = vec![shape("a", 1, 6.0, 3.0), shape("b", 1, 1.0, 1.0)];
        let whole = predict(&p, &[50.0]);
        let shapes = predict_shapes(&p, &[50.0]);
        assert_eq!(shapes.len(), 2);
        assert_eq!(shapes[0].shape, "a");
        let (transfer, ping) = (&shapes[0].predictions, &shapes[1].predictions);
        assert_eq!(transfer.len(), whole.len());
        assert_eq!(transfer[0].transaction_ms, Some(6.0));
        assert_eq!(transfer[1].transaction_ms, Some(6.0 + 50.0 * 3.0));
        assert_eq!(ping[1].transaction_ms, Some(1.0 + 50.0));
        for pr in [transfer, ping] {
            // Pool and TLS: the same transaction; the connect, the whole's.
            assert_eq!(pr[2].transaction_ms, pr[1].transaction_ms);
            assert_eq!(pr[3].transaction_ms, pr[1].transaction_ms);
            assert_eq!(pr[1].connect_ms, whole[1].connect_ms);
            assert_eq!(pr[3].connect_ms, whole[3].connect_ms);
            assert_eq!(pr[2].per_transaction_ms, pr[1].transaction_ms);
            // One connect per two transactions, as the application made them.
            let share = pr[1].per_transaction_ms.unwrap() - pr[1].transaction_ms.unwrap();
            assert!(
                (share - whole[1].connect_ms.unwrap() / 2.0).abs() < 1e-9,
                "{share}"
            );
        }
        assert_eq!(ping[4].transaction_ms, None);
    }

    /// Two transactions, one of them the pool's reset alone (1 ms, a round trip), and a
    /// MySQL-like ping in no transaction (0.5 ms, a round trip): one application
    /// transaction carries all three. Without the reset and the ping it loses exactly
    /// the housekeeping section's saving per application transaction.
    #[test]
    fn each_scenario_without_housekeeping_is_the_sections_saving_less() {
        use crate::stats::housekeeping::predict_without;
        use connbench_trace::housekeeping::{Kind, Row};
        let p = profile(0);
        let row = |kind, time_ms| Row {
            kind,
            fingerprint: String::new(),
            text: String::new(),
            requests: 1,
            round_trips: 1,
            at_connect: 0,
            time_ms,
            share: None,
            round_trips_per_transaction: Some(1.0),
            left_out_by_default: true,
        };
        let h = Housekeeping {
            sessions: 1,
            requests: 5,
            round_trips: 5,
            time_ms: 7.5,
            transactions: 2,
            application_transactions: 1,
            outside_round_trips: 1,
            outside_time_ms: 0.5,
            rows: vec![row(Kind::Ping, 0.5), row(Kind::Reset, 1.0)],
        };
        let without = predict_without(&h, &[50.0]);
        let mut pr = predict(&p, &[50.0]);
        with_housekeeping(&mut pr, &p, &h, &without);
        assert_eq!(pr[0].application_transaction_ms, Some(3.5 * 2.0 + 0.5));
        assert_eq!(pr[0].without_housekeeping_ms, Some(3.5 * 2.0 + 0.5 - 1.5));
        let with = (3.5 + 50.0 * 2.0) * 2.0 + 0.5 + 50.0;
        for far in &pr[1..4] {
            assert_eq!(far.application_transaction_ms, Some(with), "{}", far.scenario);
            let saving = far.application_transaction_ms.unwrap() - far.without_housekeeping_ms.unwrap();
            assert_eq!(Some(saving), without[1].saved_per_transaction_ms);
        }
        assert_eq!(pr[4].without_housekeeping_ms, None, "PgBouncer: not predicted");
    }
}

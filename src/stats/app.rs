//! The round-trip model applied to a recorded application: what its transactions and
//! its connects would take at another distance, with a client-side pool, or over TLS,
//! from the round trips its trace counted and the times it measured. The same model as
//! the suites' (`model::at_distance`: local time + RTT × round trips); here the "local"
//! time is the recording's own, so a prediction for +N ms is for N ms *beyond* the
//! distance the application had when it was recorded.
//!
//! What it cannot predict it says: a PgBouncer's own connect cost is not in a trace of
//! an application that did not use one, and TLS's local cost (the handshake's CPU) is
//! not either; those figures are `null` with the reason.

use super::model::at_distance;
use connbench_trace::profile::Profile;

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
    /// The model's terms, in words.
    pub how: String,
    /// Why a figure is `null`, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_predicted: Option<String>,
}

/// The scenarios for each extra round trip in `rtts_ms`: the distance alone, with a
/// client-side pool, over TLS, and PgBouncer near the database (not predicted).
pub fn predict(p: &Profile, rtts_ms: &[f64]) -> Vec<Prediction> {
    let r = &p.requests;
    let c = &p.connections;
    let tx = r.transaction_ms.mean;
    let rts = r.round_trips_per_transaction;
    // The TCP connect is one round trip, then the startup and authentication's.
    let connect_rts = c.setup_round_trips.map(|s| 1.0 + s);
    let connect_local = match (c.upstream_connect_ms.p50, c.setup_ms.mean) {
        (Some(tcp), Some(setup)) => Some(tcp + setup),
        _ => None,
    };
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
        how: "measured in the trace".into(),
        not_predicted: None,
    }];
    // The recorder answers a client's SSLRequest `N` itself, next to the application, so
    // that exchange is in no recorded round trip; at a server N ms away the application
    // (sslmode=prefer) pays it there: one round trip more for each connect that asked.
    let asked = if c.sessions > 0 {
        c.tls_requested as f64 / c.sessions as f64
    } else {
        0.0
    };
    for &n in rtts_ms {
        let rtt = n + c.upstream_connect_ms.p50.unwrap_or(0.0);
        let t = tx.zip(rts).map(|(t, k)| at_distance(t, n, k));
        let connect = connect_local
            .zip(connect_rts)
            .map(|(l, k)| at_distance(l, n, k) + asked * rtt);
        let terms = format!(
            "{} + {n} ms × {} round trips a transaction; a connect {} + {n} ms × {} round trips (TCP's \
             handshake, the startup and authentication)",
            opt(tx),
            opt(rts),
            opt(connect_local),
            opt(connect_rts)
        );
        out.push(Prediction {
            scenario: format!("+{n} ms"),
            extra_rtt_ms: n,
            transaction_ms: t,
            connect_ms: connect,
            per_transaction_ms: per_tx(t, connect, false),
            how: if asked > 0.0 {
                format!(
                    "{terms}; and the SSLRequest's N from the server, for the {:.0}% of connects that asked",
                    asked * 100.0
                )
            } else {
                terms.clone()
            },
            not_predicted: None,
        });
        out.push(Prediction {
            scenario: format!("+{n} ms, client-side pool"),
            extra_rtt_ms: n,
            transaction_ms: t,
            connect_ms: None,
            per_transaction_ms: per_tx(t, None, true),
            how: format!("{terms}; the pool's connects opened before the work, none a transaction"),
            not_predicted: None,
        });
        // TLS adds the SSLRequest's exchange and TLS 1.3's handshake: two round trips,
        // each the recorded one (the recorder's TCP connect) plus the added distance; the
        // SSLRequest's is already in `connect` for the connects that asked.
        let tls_extra = 2.0 - asked;
        let tls_connect = connect.map(|cn| cn + tls_extra * rtt);
        out.push(Prediction {
            scenario: format!("+{n} ms, over TLS"),
            extra_rtt_ms: n,
            transaction_ms: t,
            connect_ms: tls_connect,
            per_transaction_ms: per_tx(t, tls_connect, false),
            how: format!("{terms}; TLS: {tls_extra} more round trips a connect (SSLRequest, TLS 1.3)"),
            not_predicted: Some("the TLS handshake's own CPU time is not in the trace (not added)".into()),
        });
        out.push(Prediction {
            scenario: format!("+{n} ms, PgBouncer near the database"),
            extra_rtt_ms: n,
            transaction_ms: None,
            connect_ms: None,
            per_transaction_ms: None,
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

fn opt(v: Option<f64>) -> String {
    v.map_or("(unknown)".to_string(), |v| format!("{v:.3}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use connbench_trace::event::{Event, Header, RecordOptions};
    use connbench_trace::profile::Profiler;
    use connbench_trace::Engine;

    fn q(seq: u64, at_ms: u64, think_ms: Option<u64>, sql: &str, tx: &str) -> String {
        let think = think_ms.map_or("null".to_string(), |t| (t * 1_000_000).to_string());
        format!(
            r#"{{"type":"request","session":1,"seq":{seq},"at_ns":{},"think_ns":{think},"request_bytes":10,"op":"query","sql":"{sql}","outcome":"ok","first_byte_ns":1000000,"response_ns":1000000,"response_bytes":10,"rows":0,"tx":"{tx}"}}"#,
            at_ms * 1_000_000
        )
    }

    fn profile(lines: &[String]) -> Profile {
        let mut p = Profiler::new(&Header::new(
            Engine::Postgres,
            "connbench test".into(),
            RecordOptions::default(),
        ));
        for l in lines {
            p.add(&serde_json::from_str::<Event>(l).unwrap());
        }
        p.finish()
    }

    /// The trace crate's profile of one explicit transaction (2 round trips, 3.5 ms
    /// mean with an autocommit statement) and a connect of 3 round trips, 0.2 ms
    /// connect: +50 ms adds 2 round trips a transaction and 4 a connect (the handshake's
    /// one included); TLS adds the SSLRequest's and TLS 1.3's, at the recorded round trip
    /// plus 50; a client that asked for TLS was answered locally by the recorder, and a
    /// server 50 ms away answers that round trip.
    #[test]
    fn a_recorded_transaction_and_connect_at_a_distance_and_over_tls() {
        let open = r#"{"type":"session_open","session":1,"open_ns":5000000000,"transport":"tcp","tls_requested":false,"auth_method":"SCRAM-SHA-256","user":null,"database":null,"backend_pid":null,"protocol":null,"error":null,"phases":{"connect_ns":200000,"startup_ns":1000000,"auth_ns":2000000,"auth_round_trips":2,"ready_ns":100000,"tls_ns":null},"ready":true}"#;
        let p = profile(&[
            open.to_string(),
            q(0, 10, Some(10), "BEGIN", "transaction"),
            q(1, 12, Some(1), "UPDATE t SET v = 1 WHERE id = 7", "transaction"),
            q(2, 15, Some(2), "COMMIT", "idle"),
            q(3, 30, Some(14), "SELECT 1", "idle"),
            r#"{"type":"session_close","session":1,"at_ns":40000000,"by":"client","requests":4,"bytes_to_server":40,"bytes_to_client":40}"#.to_string(),
        ]);
        let pr = predict(&p, &[50.0]);
        assert_eq!(pr[1].transaction_ms, Some(3.5 + 50.0 * 2.0));
        assert_eq!(pr[1].connect_ms, Some(0.2 + 3.1 + 50.0 * 4.0));
        // Over TLS: the SSLRequest's exchange and TLS 1.3's handshake, at the recorded
        // round trip (0.2 ms) plus 50.
        assert_eq!(pr[3].scenario, "+50 ms, over TLS");
        let tls = pr[3].connect_ms.unwrap() - pr[1].connect_ms.unwrap();
        assert!((tls - 2.0 * 50.2).abs() < 1e-9, "{tls}");

        // A client that asked for TLS (sslmode=prefer): the recorder's local N hid one
        // round trip that a server 50 ms away answers; over TLS, the handshake's is added.
        let asked = open.replace(r#""tls_requested":false"#, r#""tls_requested":true"#);
        let p2 = profile(&[asked]);
        let pr2 = predict(&p2, &[50.0]);
        let plain = pr2[1].connect_ms.unwrap() - pr[1].connect_ms.unwrap();
        assert!((plain - 50.2).abs() < 1e-9, "{plain}");
        let tls2 = pr2[3].connect_ms.unwrap() - pr[1].connect_ms.unwrap();
        assert!((tls2 - 2.0 * 50.2).abs() < 1e-9, "{tls2}");
    }
}

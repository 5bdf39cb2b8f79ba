//! `connbench trace`'s output: an application's profile (from `trace::profile`) and the
//! round-trip model's predictions for it (from `stats::app`), as text for people and as
//! JSON for programs (docs/json.md). Reads figures; computes nothing but display units.

use crate::stats::app::{Prediction, ShapePrediction};
use connbench_trace::profile::{Profile, Spread};
use connbench_trace::CaptureSource;

/// The JSON document: the profile and the predictions under fixed keys; each shape's
/// predictions under `shape_predictions`, in `profile.shapes`' order.
pub fn json(
    p: &Profile,
    predictions: &[Prediction],
    shapes: &[ShapePrediction],
    trace: &str,
    capture: Option<&CaptureSource>,
) -> serde_json::Value {
    serde_json::json!({
        "trace": trace,
        "method": method(capture),
        "profile": p,
        "predictions": predictions,
        "shape_predictions": shapes,
    })
}

/// How the figures were made, printed with them: where they were measured (the recorder,
/// or the capture point of a trace `record --from-pcap` read), then the model.
pub fn method(capture: Option<&CaptureSource>) -> String {
    let at = match capture {
        None => "measured at the recorder, which stands beside the application: a request's time is its \
                 last byte to its response's last byte (the network to the server and back, and the \
                 server's work); think time is a response's end to the next request; the network's share \
                 is round trips × the recorder's own TCP connect to the server (an estimate)"
            .to_string(),
        Some(c) => format!(
            "measured where the capture {} was taken (the server's port {}): a request's time is its \
             last packet to its response's last packet as captured there (beside the database, the \
             network to the application is not in it; beside the application, it is); think time is \
             a response's last packet to the next request's; the network's share is round trips × \
             the connection's SYN to SYN-ACK as captured (an estimate)",
            c.file, c.server_port
        ),
    };
    format!("{at}; {MODEL}")
}

/// The round-trip model's part of [`method`].
const MODEL: &str = "predictions are the round-trip model: recorded time + added RTT × round trips \
counted; over TLS, a connect pays the TLS handshake the trace recorded when the recorder terminated \
the application's TLS (record --listen-tls: its time at the recorder and its round trips at the \
server's distance), else the round trips of TLS 1.3 (and PostgreSQL's SSLRequest) assumed, without \
their CPU";

pub(super) fn ms(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 100.0 => format!("{v:.0} ms"),
        Some(v) if v >= 1.0 => format!("{v:.2} ms"),
        Some(v) => format!("{:.0} µs", v * 1000.0),
        None => "-".to_string(),
    }
}

pub(super) fn num(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.2}"))
}

pub(super) fn spread(s: &Spread) -> String {
    if s.n == 0 {
        return "-".to_string();
    }
    format!(
        "p50 {}, mean {}, p99 {}, max {} (n={})",
        ms(s.p50),
        ms(s.mean),
        ms(s.p99),
        ms(s.max),
        s.n
    )
}

/// The text report.
pub fn text(
    p: &Profile,
    predictions: &[Prediction],
    shapes: &[ShapePrediction],
    trace: &str,
    capture: Option<&CaptureSource>,
    top: usize,
) -> String {
    let mut o = String::new();
    let c = &p.connections;
    let r = &p.requests;
    o.push_str(&format!(
        "{trace}: {:?} application, recorded {}, {:.1} s{}\n",
        p.engine,
        p.recorded_at,
        p.duration_s,
        if p.redacted { ", values redacted" } else { "" }
    ));
    o.push_str(&format!(
        "connections  {} ({} /s); lifetime {}{}\n",
        c.sessions,
        num(c.per_s),
        spread(&c.lifetime_ms),
        tls_used(c)
    ));
    o.push_str(&format!(
        "  connect    TCP to the server {}; startup and authentication {} ({} round trips){}{}\n",
        ms(c.upstream_connect_ms.p50),
        ms(c.setup_ms.mean),
        num(c.setup_round_trips),
        if c.tls_requested > 0 {
            format!("; {} asked for TLS", c.tls_requested)
        } else {
            String::new()
        },
        if c.auth_methods.is_empty() {
            String::new()
        } else {
            let m: Vec<String> = c.auth_methods.iter().map(|(k, n)| format!("{k} {n}")).collect();
            format!("; auth {}", m.join(", "))
        }
    ));
    o.push_str(&format!(
        "requests     {} ({} /s), {} per connection; {} pipelined; {} failed{}\n",
        r.requests,
        num(r.per_s),
        num(r.per_session),
        r.pipelined,
        r.errors,
        if r.errors_by_code.is_empty() {
            String::new()
        } else {
            let e: Vec<String> = r.errors_by_code.iter().map(|(k, n)| format!("{k} {n}")).collect();
            format!(" ({})", e.join(", "))
        }
    ));
    o.push_str(&format!(
        "transactions {}; {} requests and {} round trips each; {} per connection; prepared {}\n",
        r.transactions,
        num(r.requests_per_transaction),
        num(r.round_trips_per_transaction),
        num(r.transactions_per_session),
        r.prepared_share
            .map_or("-".into(), |s| format!("{:.0}% of requests", s * 100.0))
    ));
    o.push_str(&format!("  time       {}\n", spread(&r.transaction_ms)));
    o.push_str(&format!(
        "  split      server {}, network {} (estimated), client think {} per transaction\n",
        ms(p.split.server_ms),
        ms(p.split.network_ms),
        ms(p.split.client_ms)
    ));
    if p.undecoded > 0 {
        o.push_str(&format!(
            "  note       {} session(s) not decoded to their end: {}\n",
            p.undecoded,
            p.undecoded_reason.as_deref().unwrap_or("?")
        ));
    }
    o.push_str(&statements_text(p, top));
    o.push_str(&shapes_text(p, shapes, top));
    o.push_str(&predictions_text(predictions));
    o.push_str(&format!("\nmethod: {}\n", method(capture)));
    o
}

/// Whether the predictions carry a housekeeping saving to show: the two columns
/// "app transaction" and "without housekeeping" (`stats::app::with_housekeeping`) are
/// left out when nothing would be left out.
pub(super) fn shows_housekeeping(predictions: &[Prediction]) -> bool {
    predictions.iter().any(|pr| {
        pr.without_housekeeping_ms.is_some() && pr.without_housekeeping_ms != pr.application_transaction_ms
    })
}

/// The predictions table, a scenario a line; with housekeeping to leave out, an
/// application transaction with it and without it, per scenario.
fn predictions_text(predictions: &[Prediction]) -> String {
    let hk = shows_housekeeping(predictions);
    let mut o = String::from("\npredictions (the round-trip model; beyond the recording's own distance):\n");
    if hk {
        o.push_str(
            "  (app transaction: one of the application's own, with its share of the housekeeping below; \
             without housekeeping: the same\n   less what `replay --without housekeeping` leaves out, \
             as the housekeeping section prices it; connects apart)\n",
        );
    }
    let mut head = format!(
        "  {:<40} {:>12} {:>12} {:>16}",
        "scenario", "transaction", "connect", "with connects"
    );
    if hk {
        head.push_str(&format!(
            " {:>16} {:>20}",
            "app transaction", "without housekeeping"
        ));
    }
    o.push_str(head.trim_end());
    o.push('\n');
    for pr in predictions {
        match &pr.not_predicted {
            Some(why) if pr.transaction_ms.is_none() => {
                o.push_str(&format!("  {:<40} not predicted: {why}\n", pr.scenario));
            }
            _ => {
                let mut line = format!(
                    "  {:<40} {:>12} {:>12} {:>16}",
                    pr.scenario,
                    ms(pr.transaction_ms),
                    ms(pr.connect_ms),
                    ms(pr.per_transaction_ms)
                );
                if hk {
                    line.push_str(&format!(
                        " {:>16} {:>20}",
                        ms(pr.application_transaction_ms),
                        ms(pr.without_housekeeping_ms)
                    ));
                }
                o.push_str(&line);
                o.push('\n');
            }
        }
    }
    o
}

/// The transaction shapes by share of time: each one's figures, its predicted time at
/// each added round trip, and its statements (shortened).
fn shapes_text(p: &Profile, predictions: &[ShapePrediction], top: usize) -> String {
    const STATEMENTS: usize = 8;
    const CHARS: usize = 100;
    let mut o = String::new();
    if p.shapes.is_empty() {
        return o;
    }
    // The distance alone, one column per --rtt: a pool and TLS change connects only.
    let at = |prs: &[Prediction]| -> Vec<(f64, Option<f64>)> {
        prs.iter()
            .filter(|pr| pr.extra_rtt_ms > 0.0 && pr.scenario == format!("+{} ms", pr.extra_rtt_ms))
            .map(|pr| (pr.extra_rtt_ms, pr.transaction_ms))
            .collect()
    };
    let rtts: Vec<f64> = predictions
        .first()
        .map(|s| at(&s.predictions).iter().map(|(n, _)| *n).collect())
        .unwrap_or_default();
    o.push_str(&format!(
        "\ntransaction shapes by share of time (top {} of {}); at each added round trip, the shape's \
         mean + RTT × its round trips\n  (a client-side pool and TLS change connects only, never a \
         transaction's own time: see the predictions below):\n",
        top.min(p.shapes.len()),
        p.shapes.len()
    ));
    let mut head = format!(
        "  {:>6} {:>8} {:>6} {:>10} {:>10} {:>10}",
        "share", "count", "trips", "p50", "mean", "p99"
    );
    for n in &rtts {
        head.push_str(&format!(" {:>10}", format!("+{n} ms")));
    }
    o.push_str(&head);
    o.push('\n');
    for s in p.shapes.iter().take(top) {
        let t = &s.time_ms;
        let mut line = format!(
            "  {:>6} {:>8} {:>6.2} {:>10} {:>10} {:>10}",
            s.share.map_or("-".into(), |v| format!("{:.1}%", v * 100.0)),
            s.count,
            s.round_trips,
            ms(t.p50),
            ms(t.mean),
            ms(t.p99)
        );
        if let Some(pr) = predictions.iter().find(|pr| pr.shape == s.id) {
            for (_, v) in at(&pr.predictions) {
                line.push_str(&format!(" {:>10}", ms(v)));
            }
        }
        o.push_str(&line);
        o.push('\n');
        for text in s.statements.iter().take(STATEMENTS) {
            let short: String = text.chars().take(CHARS).collect();
            let more = if text.chars().nth(CHARS).is_some() {
                "…"
            } else {
                ""
            };
            o.push_str(&format!("      {short}{more}\n"));
        }
        let left = s.statements.len().saturating_sub(STATEMENTS);
        if left > 0 || s.truncated {
            o.push_str(&format!(
                "      … {left} more{}\n",
                if s.truncated {
                    ", and more the shape did not keep (it keeps the first 64 statements)"
                } else {
                    ""
                }
            ));
        }
    }
    o
}

/// The statements by total time, the first `top`.
fn statements_text(p: &Profile, top: usize) -> String {
    let mut o = String::new();
    if !p.statements.is_empty() {
        o.push_str(&format!(
            "\nstatements by total time (top {}):\n",
            top.min(p.statements.len())
        ));
        o.push_str(&format!(
            "  {:>10} {:>8} {:>10} {:>9}  {}\n",
            "total", "calls", "mean", "rows", "statement"
        ));
        for s in p.statements.iter().take(top) {
            let text: String = s.text.chars().take(100).collect();
            o.push_str(&format!(
                "  {:>10} {:>8} {:>10} {:>9}  {}\n",
                ms(Some(s.total_ms)),
                s.calls,
                ms(Some(s.mean_ms)),
                s.rows,
                text
            ));
        }
    }
    o
}

/// The connections' TLS that the recorder terminated (`record --listen-tls`), for the
/// connections line: empty when none used it.
pub fn tls_used(c: &connbench_trace::profile::Connections) -> String {
    if c.tls == 0 {
        return String::new();
    }
    format!(
        "; {} over TLS (terminated by the recorder: handshake {} mean, {} round trips)",
        c.tls,
        ms(c.tls_handshake_ms.mean),
        num(c.tls_handshake_round_trips)
    )
}

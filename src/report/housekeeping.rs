//! `connbench trace`'s housekeeping section: the requests the application's driver and
//! pool sent that its code did not write (`connbench_trace::housekeeping`), per kind and
//! fingerprint, priced at each added round trip, and the application without what
//! `replay --without housekeeping` leaves out (`stats::housekeeping`). Text for people,
//! a JSON value for programs (docs/json.md, `housekeeping`), a section for `--html`'s
//! page. Computes nothing but units.

use std::fmt::Write;

use super::chart::esc;
use super::trace::{ms, num};
use crate::stats::housekeeping::{RowCost, Without};
use connbench_trace::housekeeping::Housekeeping;

/// What a "checkout" is here, said with the figures: the wire shows none.
pub const CHECKOUT: &str = "a pool's checkout is not on the wire: figures are per application \
transaction (one that holds anything besides housekeeping), which is a checkout for a pool used \
one transaction per checkout";

/// The `housekeeping` key of `trace --json`.
pub fn json(h: &Housekeeping, costs: &[RowCost], without: &[Without]) -> serde_json::Value {
    serde_json::json!({
        "checkout": CHECKOUT,
        "tally": h,
        "costs": costs,
        "without": without,
    })
}

/// The text section; empty when the trace holds no housekeeping.
pub fn text(h: &Housekeeping, costs: &[RowCost], without: &[Without]) -> String {
    let mut o = String::new();
    if h.rows.is_empty() {
        return o;
    }
    let trips: u64 = h.rows.iter().map(|r| r.round_trips).sum();
    let time: f64 = h.rows.iter().map(|r| r.time_ms).sum();
    o.push_str(&format!(
        "\nhousekeeping (sent by the driver or pool, not the application's code): {} of {} round trips, \
         {} of the recorded time;\n  {} application transactions of {} ({CHECKOUT})\n",
        trips,
        h.round_trips,
        share(Some(time / h.time_ms.max(f64::MIN_POSITIVE))),
        h.application_transactions,
        h.transactions
    ));
    let rtts: Vec<f64> = without.iter().skip(1).map(|w| w.extra_rtt_ms).collect();
    let mut head = format!(
        "  {:<24} {:<16} {:>8} {:>6} {:>7} {:>7} {:>6} {:>10}",
        "kind", "fingerprint", "requests", "trips", "/app tx", "connect", "share", "recorded"
    );
    for n in &rtts {
        head.push_str(&format!(" {:>10}", format!("+{n} ms")));
    }
    head.push_str("  replay --without housekeeping");
    o.push_str(&head);
    o.push('\n');
    for (r, c) in h.rows.iter().zip(costs) {
        let mut line = format!(
            "  {:<24} {:<16} {:>8} {:>6} {:>7} {:>7} {:>6} {:>10}",
            r.kind.label(),
            r.fingerprint,
            r.requests,
            r.round_trips,
            num(r.round_trips_per_transaction),
            r.at_connect,
            share(r.share),
            ms(Some(r.time_ms))
        );
        for cost in c.costs.iter().skip(1) {
            line.push_str(&format!(" {:>10}", ms(Some(cost.total_ms))));
        }
        line.push_str(if r.left_out_by_default {
            "  drops it"
        } else {
            "  keeps it (a SET: it changes the session)"
        });
        o.push_str(&line);
        o.push('\n');
        let short: String = r.text.chars().take(100).collect();
        o.push_str(&format!("      {short}\n"));
    }
    o.push_str("  without what --without housekeeping leaves out (recorded time + RTT × round trips):\n");
    for w in without {
        o.push_str(&format!(
            "    {:<12} saves {} in all ({} requests, {} round trips), {} per application transaction; \
             waiting on the database {} -> {} per application transaction\n",
            w.scenario,
            ms(Some(w.saved_ms)),
            w.requests,
            w.round_trips,
            ms(w.saved_per_transaction_ms),
            ms(w.waiting_per_transaction_ms),
            ms(w.waiting_without_per_transaction_ms)
        ));
    }
    o
}

/// The section of `trace --html`, for its page to place: a table of the rows, their cost
/// at each `--rtt`, and the saving without them; empty when there is no housekeeping.
pub fn html(h: &Housekeeping, costs: &[RowCost], without: &[Without]) -> String {
    let mut o = String::new();
    if h.rows.is_empty() {
        return o;
    }
    let _ = writeln!(
        o,
        "<h2>Housekeeping: sent by the driver or pool, not the application's code</h2>\n<p>{} application \
         transactions of {}; {}</p>\n<table>\n<tr><th>kind</th><th>fingerprint</th><th>requests</th>\
         <th>round trips</th><th>per app transaction</th><th>at connect</th><th>share</th><th>recorded</th>",
        h.application_transactions,
        h.transactions,
        esc(CHECKOUT)
    );
    for w in without.iter().skip(1) {
        let _ = write!(o, "<th>{}</th>", esc(&w.scenario));
    }
    o.push_str("<th>--without housekeeping</th><th>statement</th></tr>\n");
    for (r, c) in h.rows.iter().zip(costs) {
        let _ = write!(
            o,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            esc(r.kind.label()),
            esc(&r.fingerprint),
            r.requests,
            r.round_trips,
            num(r.round_trips_per_transaction),
            r.at_connect,
            share(r.share),
            ms(Some(r.time_ms))
        );
        for cost in c.costs.iter().skip(1) {
            let _ = write!(o, "<td>{}</td>", ms(Some(cost.total_ms)));
        }
        let fate = if r.left_out_by_default {
            "drops it"
        } else {
            "keeps it (a SET)"
        };
        let _ = writeln!(o, "<td>{fate}</td><td><code>{}</code></td></tr>", esc(&r.text));
    }
    o.push_str(
        "</table>\n<table>\n<tr><th>without it</th><th>saved in all</th><th>per app transaction</th>\
                <th>waiting per app transaction, with</th><th>without</th></tr>\n",
    );
    for w in without {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&w.scenario),
            ms(Some(w.saved_ms)),
            ms(w.saved_per_transaction_ms),
            ms(w.waiting_per_transaction_ms),
            ms(w.waiting_without_per_transaction_ms)
        );
    }
    o.push_str("</table>\n");
    o
}

fn share(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.1}%", v * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::housekeeping::{costs, predict_without};
    use connbench_trace::housekeeping::{Kind, Row};

    fn row(kind: Kind, fingerprint: &str, text: &str, n: u64, time_ms: f64, left_out: bool) -> Row {
        Row {
            kind,
            fingerprint: fingerprint.into(),
            text: text.into(),
            requests: n,
            round_trips: n,
            at_connect: u64::from(kind == Kind::SessionSetup),
            time_ms,
            share: Some(time_ms / 14.0),
            round_trips_per_transaction: Some(n as f64 / 20.0),
            left_out_by_default: left_out,
        }
    }

    /// An asyncpg pool's resets and a driver's SET: the table, the costs at +50 ms, the
    /// saving without the resets (the SET kept); the page's section alike.
    #[test]
    fn housekeeping_snapshot() {
        let h = Housekeeping {
            sessions: 1,
            requests: 81,
            round_trips: 81,
            time_ms: 14.0,
            transactions: 41,
            application_transactions: 20,
            rows: vec![
                row(
                    Kind::Reset,
                    "6ab42f507ac0c2de",
                    "SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL",
                    20,
                    3.24,
                    true,
                ),
                row(
                    Kind::SessionSetup,
                    "aec97e2f40284a3f",
                    "SET NAMES utf8mb4",
                    1,
                    0.1,
                    false,
                ),
            ],
        };
        let (c, w) = (costs(&h, &[50.0]), predict_without(&h, &[50.0]));
        insta::assert_snapshot!(text(&h, &c, &w));
        let page = html(&h, &c, &w);
        assert!(
            page.contains("<td>1003 ms</td>") && page.contains("keeps it (a SET)"),
            "{page}"
        );
        assert_eq!(
            text(&Housekeeping::default(), &[], &[]),
            "",
            "no housekeeping, no section"
        );
    }
}

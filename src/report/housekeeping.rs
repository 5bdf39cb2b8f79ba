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
    let table = table(h, costs, without);
    let mut head = String::from(" ");
    for col in &table.columns {
        head.push_str(&col.pad(&col.head));
    }
    o.push_str(&head);
    o.push('\n');
    for (row, text) in table.rows.iter().zip(&h.rows) {
        let mut line = String::from(" ");
        for (col, cell) in table.columns.iter().zip(row) {
            line.push_str(&col.pad(cell));
        }
        o.push_str(&line);
        o.push('\n');
        let short: String = text.text.chars().take(100).collect();
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
         transactions of {}; {}</p>\n<table>",
        h.application_transactions,
        h.transactions,
        esc(CHECKOUT)
    );
    let table = table(h, costs, without);
    o.push_str("<tr>");
    for col in &table.columns {
        let _ = write!(o, "<th>{}</th>", esc(col.page_head()));
    }
    o.push_str("<th>statement</th></tr>\n");
    for (row, r) in table.rows.iter().zip(&h.rows) {
        o.push_str("<tr>");
        for (col, cell) in table.columns.iter().zip(row) {
            if col.code {
                let _ = write!(o, "<td><code>{}</code></td>", esc(cell));
            } else {
                let _ = write!(o, "<td>{}</td>", esc(cell));
            }
        }
        let _ = writeln!(o, "<td><code>{}</code></td></tr>", esc(&r.text));
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

/// The rows' table as both the text and the page show it: its columns and, per row, its
/// cells (kind, fingerprint, requests, round trips, per application transaction, at
/// connect, share, recorded time, its cost at each `--rtt`, what `--without
/// housekeeping` does with it); the statement apart, as each shows it its own way.
struct Table {
    columns: Vec<Column>,
    rows: Vec<Vec<String>>,
}

/// A column of [`Table`]: its header in text and on the page, its width in text
/// (`left`-aligned or right; 0, unpadded after two spaces), and whether the page sets
/// its cells as code.
struct Column {
    head: String,
    long: &'static str,
    width: usize,
    left: bool,
    code: bool,
}

impl Column {
    fn new(head: &str, long: &'static str, width: usize, left: bool) -> Column {
        Column {
            head: head.to_string(),
            long,
            width,
            left,
            code: false,
        }
    }

    /// A cell in text: a space, then the cell padded to the width.
    fn pad(&self, cell: &str) -> String {
        match (self.left, self.width) {
            (_, 0) => format!("  {cell}"),
            (true, w) => format!(" {cell:<w$}"),
            (false, w) => format!(" {cell:>w$}"),
        }
    }

    /// The header on the page.
    fn page_head(&self) -> &str {
        if self.long.is_empty() {
            &self.head
        } else {
            self.long
        }
    }
}

fn table(h: &Housekeeping, costs: &[RowCost], without: &[Without]) -> Table {
    let mut columns = vec![
        Column::new("kind", "", 24, true),
        Column {
            code: true,
            ..Column::new("fingerprint", "", 16, true)
        },
        Column::new("requests", "", 8, false),
        Column::new("trips", "round trips", 6, false),
        Column::new("/app tx", "per app transaction", 7, false),
        Column::new("connect", "at connect", 7, false),
        Column::new("share", "", 6, false),
        Column::new("recorded", "", 10, false),
    ];
    for w in without.iter().skip(1) {
        columns.push(Column::new(&w.scenario, "", 10, false));
    }
    columns.push(Column::new(
        "replay --without housekeeping",
        "--without housekeeping",
        0,
        true,
    ));
    let rows = h
        .rows
        .iter()
        .zip(costs)
        .map(|(r, c)| {
            let mut cells = vec![
                r.kind.label().to_string(),
                r.fingerprint.clone(),
                r.requests.to_string(),
                r.round_trips.to_string(),
                num(r.round_trips_per_transaction),
                r.at_connect.to_string(),
                share(r.share),
                ms(Some(r.time_ms)),
            ];
            cells.extend(c.costs.iter().skip(1).map(|cost| ms(Some(cost.total_ms))));
            cells.push(
                if r.left_out_by_default {
                    "drops it"
                } else {
                    "keeps it (a SET: it changes the session)"
                }
                .to_string(),
            );
            cells
        })
        .collect();
    Table { columns, rows }
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
            ..Housekeeping::default()
        };
        let (c, w) = (costs(&h, &[50.0]), predict_without(&h, &[50.0]));
        insta::assert_snapshot!(text(&h, &c, &w));
        let page = html(&h, &c, &w);
        assert!(
            page.contains("<td>1003 ms</td>") && page.contains("keeps it (a SET:"),
            "{page}"
        );
        assert_eq!(
            text(&Housekeeping::default(), &[], &[]),
            "",
            "no housekeeping, no section"
        );
    }
}

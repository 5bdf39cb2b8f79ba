//! The pictures of `connbench trace --html`: the transaction shapes as a table, each
//! shape's waterfall (its statements' steps as recorded, and with each added round
//! trip the model adds: step + RTT × the step's round trips), each shape's predicted
//! time against the added round trip as a line, each shape's recorded times by
//! percentile, and the connections and requests in time (the profile's bounded
//! timeline, what it left out said under it). Drawing is `chart::*`'s; the figures
//! are the profile's and the predictions `stats::app::predict_shapes`', the same
//! computation the text report prints.

use std::fmt::Write;

use super::chart::lines::{self, Line, LineChart, Point};
use super::chart::percentiles::{self, Curve};
use super::chart::timeline::{self, Lane, Span, TimelineChart};
use super::chart::waterfall::{self, Row};
use super::chart::{color, esc, shape_label};
use super::trace::ms;
use crate::stats::app::{predict_shapes, Prediction};
use connbench_trace::profile::Profile;
use connbench_trace::shapes::ShapeProfile;

/// Shapes drawn: more make the waterfall and its legend unreadable.
const SHAPES_DRAWN: usize = 5;
/// Statements a waterfall colours apart; later ones share the last colour.
const STEPS_APART: usize = 8;
/// The timeline's colour for a transaction of a shape not drawn apart.
const OTHER_SHAPES: &str = "#b4b4bc";

/// The shapes' section: table, waterfall, lines. Nothing when the trace has no
/// transaction.
pub fn shapes(o: &mut String, p: &Profile, predictions: &[Prediction], top: usize) {
    if p.shapes.is_empty() {
        return;
    }
    let rtts: Vec<f64> = predictions
        .iter()
        .map(|pr| pr.extra_rtt_ms)
        .filter(|r| *r > 0.0)
        .fold(Vec::new(), |mut v, r| {
            if !v.contains(&r) {
                v.push(r);
            }
            v
        });
    table(o, p, top);
    let drawn = &p.shapes[..p.shapes.len().min(SHAPES_DRAWN)];
    o.push_str(&waterfall_chart(drawn, &rtts));
    if !rtts.is_empty() {
        o.push_str(&lines_chart(p, drawn, &rtts));
    }
    o.push_str(&distribution_chart(drawn));
    o.push_str(
        "<p class=\"caption\">Each shape's recorded transaction times (first request to last answer) by percentile, nearest rank, \
         drawn as far into the tail as the shape's count supports (99% from 100 transactions); log scale.</p>\n",
    );
}

/// Each drawn shape's recorded times by percentile.
pub(super) fn distribution_chart(shapes: &[ShapeProfile]) -> String {
    let curves: Vec<Curve> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| Curve {
            name: shape_label(i, &s.statements),
            points: s.percentiles_ms.clone(),
        })
        .collect();
    percentiles::render(
        "Each shape's transaction time by percentile, as recorded (log scale)",
        "transaction, ms",
        &curves,
    )
}

/// The connections and requests in time: the profile's timeline, a lane per session,
/// and what it left out. Nothing when the trace has no session.
pub fn timeline(o: &mut String, p: &Profile) {
    let t = &p.timeline;
    if t.lanes.is_empty() {
        return;
    }
    let span = t.until_ms - t.from_ms;
    let (unit, per) = if span >= 2_000.0 { ("s", 1e3) } else { ("ms", 1.0) };
    let at = |ms: f64| (ms - t.from_ms) / per;
    let shape_color = |id: &str| {
        p.shapes
            .iter()
            .take(SHAPES_DRAWN)
            .position(|s| s.id == id)
            .map_or(OTHER_SHAPES, color)
    };
    let shape_name = |id: &str| match p.shapes.iter().position(|s| s.id == id) {
        Some(i) => format!("transaction of shape #{}", i + 1),
        None => "transaction of another shape".into(),
    };
    let lanes: Vec<Lane> = t
        .lanes
        .iter()
        .map(|l| Lane {
            name: format!("session {}", l.session),
            open: at(l.open_ms),
            close: at(l.close_ms.unwrap_or(t.until_ms).min(t.until_ms)),
            transactions: l
                .transactions
                .iter()
                .map(|x| Span {
                    from: at(x.from_ms),
                    to: at(x.to_ms),
                    color: shape_color(&x.shape),
                    what: shape_name(&x.shape),
                })
                .collect(),
            requests: l
                .requests
                .iter()
                .map(|m| (at(m.at_ms), at(m.at_ms + m.response_ms.unwrap_or(0.0)), m.error))
                .collect(),
        })
        .collect();
    let mut keys: Vec<(&'static str, String)> = p
        .shapes
        .iter()
        .take(SHAPES_DRAWN)
        .enumerate()
        .map(|(i, s)| (color(i), shape_label(i, &s.statements)))
        .collect();
    if p.shapes.len() > SHAPES_DRAWN {
        keys.push((OTHER_SHAPES, "other shapes".into()));
    }
    let _ = writeln!(o, "<h2>Connections and requests in time</h2>");
    o.push_str(&timeline::render(&TimelineChart {
        title: "Each connection from open to close, its transactions (by shape) and requests",
        x_label: &format!("time since the first connection opened, {unit}"),
        until: at(t.until_ms),
        lanes: &lanes,
        keys,
    }));
    let _ = writeln!(o, "<p class=\"caption\">{}</p>", esc(&timeline_caption(p)));
}

/// What the timeline shows of the recording, and what it leaves out.
fn timeline_caption(p: &Profile) -> String {
    let t = &p.timeline;
    let secs = |ms: f64| format!("{:.3} s", ms / 1e3);
    let mut c = format!(
        "The first {} of the recording's {} connection(s), from the first open to {} (the recording lasted {}).",
        t.lanes.len(),
        t.sessions,
        secs(t.until_ms - t.from_ms),
        secs(t.recording_ms),
    );
    if t.sessions > t.lanes.len() as u64 {
        c.push_str(&format!(
            " {} later connection(s) are not drawn (at most {} lanes).",
            t.sessions - t.lanes.len() as u64,
            connbench_trace::timeline::MAX_LANES
        ));
    }
    if t.cut {
        c.push_str(&format!(
            " The picture ends where a lane's first request or transaction beyond its {} was sent: {} later request(s) of these connections are not drawn.",
            connbench_trace::timeline::MAX_MARKS,
            t.requests_left_out
        ));
    }
    let drawn: usize = t.lanes.iter().map(|l| l.requests.len()).sum();
    c.push_str(&format!(
        " {drawn} of the recording's {} request(s) are drawn; marks closer than a pixel are drawn as one (hover for their count).",
        t.requests
    ));
    c
}

/// One row per shape: its figures and its statements.
fn table(o: &mut String, p: &Profile, top: usize) {
    let _ = writeln!(
        o,
        "<h2>Transaction shapes by share of time (top {} of {})</h2>\n<table>\n<tr><th>share</th><th>count</th><th>round trips</th><th>p50</th><th>mean</th><th>p99</th><th>statements</th></tr>",
        top.min(p.shapes.len()),
        p.shapes.len()
    );
    for s in p.shapes.iter().take(top) {
        let statements: Vec<String> = s
            .statements
            .iter()
            .map(|t| format!("<code>{}</code>", esc(t)))
            .collect();
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            s.share.map_or("-".into(), |v| format!("{:.1}%", v * 100.0)),
            s.count,
            s.round_trips,
            ms(s.time_ms.p50),
            ms(s.time_ms.mean),
            ms(s.time_ms.p99),
            statements.join("<br>")
        );
    }
    o.push_str("</table>\n");
}

/// Per shape, a bar of its steps as recorded and one at each added round trip.
fn waterfall_chart(shapes: &[ShapeProfile], rtts: &[f64]) -> String {
    let longest = shapes.iter().map(|s| s.steps.len()).max().unwrap_or(0);
    let phases: Vec<String> = (1..=longest.min(STEPS_APART))
        .map(|k| {
            if k == STEPS_APART && longest > STEPS_APART {
                format!("statements {k}-{longest}")
            } else {
                format!("statement {k}")
            }
        })
        .collect();
    let phase_refs: Vec<&str> = phases.iter().map(String::as_str).collect();
    let rows: Vec<Row> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let bar = |rtt: f64| -> Vec<(String, f64)> {
                let mut parts: Vec<(String, f64)> = Vec::new();
                for (k, st) in s.steps.iter().enumerate() {
                    let us = (st.mean_ms + rtt * st.round_trips) * 1e3;
                    match parts.get_mut(STEPS_APART - 1).filter(|_| k >= STEPS_APART) {
                        Some(last) => last.1 += us,
                        None => parts.push((phases[k.min(STEPS_APART - 1)].clone(), us)),
                    }
                }
                parts
            };
            let mut bars = vec![("recorded".to_string(), bar(0.0))];
            bars.extend(
                rtts.iter()
                    .map(|&r| (format!("+{} ms", super::chart::fmt_num(r)), bar(r))),
            );
            Row {
                name: shape_label(i, &s.statements),
                bars,
                missing: s.steps.is_empty().then(|| "no steps (other shapes)".to_string()),
            }
        })
        .collect();
    waterfall::render(
        "Each shape's statements: recorded, and at each added round trip (step + RTT × its round trips)",
        "µs, a transaction's mean",
        &phase_refs,
        &rows,
    )
}

/// Per shape, its predicted mean time against the added round trip.
fn lines_chart(p: &Profile, shapes: &[ShapeProfile], rtts: &[f64]) -> String {
    let predicted = predict_shapes(p, rtts);
    let lines: Vec<Line> = shapes
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let sp = predicted.iter().find(|sp| sp.shape == s.id)?;
            let mut points: Vec<Point> = Vec::new();
            for pr in &sp.predictions {
                let Some(y) = pr.transaction_ms else { continue };
                if points.iter().any(|q| q.x == pr.extra_rtt_ms) {
                    continue;
                }
                points.push(Point {
                    x: pr.extra_rtt_ms,
                    y,
                    ci: None,
                });
            }
            Some(Line {
                name: shape_label(i, &s.statements),
                color: color(i),
                dash: "",
                points,
            })
        })
        .collect();
    lines::render(&LineChart {
        title: "Each shape's predicted mean time against the added round trip",
        x_label: "added round trip, ms",
        y_label: "transaction, ms",
        lines: &lines,
        log_y: false,
    })
}

//! A run over time: throughput per interval on top, latency per interval (p50, p95 and
//! the maximum) below, and a mark at every interval in which connections were opened, so
//! the reconnect spikes of a short pool lifetime line up with their latency.

use super::{axes, color, fmt_num, legend, Area, Key, Scale, Svg};
use crate::stats::load::IntervalSummary;

const WIDTH: f64 = 720.0;

/// The chart as an SVG element. `mark_connects` draws the reconnect marks; leave it off
/// when every transaction connects (the marks would cover every interval). `fault` (its
/// name and second) draws a labelled line where a faults cell struck.
pub fn render(
    title: &str,
    intervals: &[IntervalSummary],
    mark_connects: bool,
    fault: Option<(&str, f64)>,
) -> String {
    let top = Area {
        left: 64.0,
        top: 28.0,
        right: WIDTH - 20.0,
        bottom: 128.0,
    };
    let bottom = Area {
        top: 160.0,
        bottom: 320.0,
        ..top
    };
    let mut svg = Svg::new(WIDTH, bottom.bottom + 50.0);
    svg.text(top.left, 16.0, "start", "title", title);
    let t_end = intervals.iter().map(|i| i.end_s).fold(0.0, f64::max);
    let x_top = Scale::linear_from_zero(std::iter::once(t_end), top.left, top.right);
    let mid = |i: &IntervalSummary| (i.start_s + i.end_s) / 2.0;
    let tps = Scale::linear_from_zero(intervals.iter().map(|i| i.tps), top.bottom, top.top);
    axes(&mut svg, top, &x_top, &tps, "", "tps");
    let lat_values = || {
        intervals
            .iter()
            .flat_map(|i| [i.p50_ms, i.p95_ms, i.max_ms])
            .flatten()
    };
    let (lo, hi) = lat_values().fold((f64::INFINITY, 0.0f64), |(l, h), v| (l.min(v), h.max(v)));
    let lat = if lo > 0.0 && hi / lo > 20.0 {
        Scale::log(lat_values(), bottom.bottom, bottom.top)
    } else {
        Scale::linear_from_zero(lat_values(), bottom.bottom, bottom.top)
    };
    let x = Scale::linear_from_zero(std::iter::once(t_end), bottom.left, bottom.right);
    axes(
        &mut svg,
        bottom,
        &x,
        &lat,
        "seconds into the measured run",
        "latency, ms",
    );
    marks(&mut svg, intervals, &x, (top, bottom), mark_connects, fault);
    let tps_pts: Vec<(f64, f64)> = intervals
        .iter()
        .map(|i| (x.map(mid(i)), tps.map(i.tps)))
        .collect();
    svg.polyline(&tps_pts, &format!(r#"stroke="{}" stroke-width="2""#, color(0)));
    let pts = |f: fn(&IntervalSummary) -> Option<f64>| -> Vec<(f64, f64)> {
        intervals
            .iter()
            .filter_map(|i| f(i).map(|v| (x.map(mid(i)), lat.map(v))))
            .collect()
    };
    svg.polyline(
        &pts(|i| i.p50_ms),
        &format!(r#"stroke="{}" stroke-width="2""#, color(2)),
    );
    svg.polyline(
        &pts(|i| i.p95_ms),
        &format!(r#"stroke="{}" stroke-width="2" stroke-dasharray="6 3""#, color(3)),
    );
    for (px, py) in pts(|i| i.max_ms) {
        svg.circle(px, py, 2.5, &format!(r#"fill="{}""#, color(6)), None);
    }
    let keys = keys(mark_connects);
    legend(
        &mut svg,
        bottom.left,
        bottom.bottom + 50.0,
        bottom.right - bottom.left,
        &keys,
    );
    svg.finish(title)
}

/// The reconnect marks (with `mark_connects`) and the fault's line, across both plots
/// (`top` and `bottom`), on the time scale `x`.
fn marks(
    svg: &mut Svg,
    intervals: &[IntervalSummary],
    x: &Scale,
    (top, bottom): (Area, Area),
    mark_connects: bool,
    fault: Option<(&str, f64)>,
) {
    let mid = |i: &IntervalSummary| (i.start_s + i.end_s) / 2.0;
    if mark_connects {
        for i in intervals.iter().filter(|i| i.connects > 0) {
            let px = x.map(mid(i));
            let tip = format!(
                "{}–{} s: {} connection{} opened",
                fmt_num(i.start_s),
                fmt_num(i.end_s),
                i.connects,
                if i.connects == 1 { "" } else { "s" }
            );
            svg.rect(
                px - 1.0,
                top.top,
                2.0,
                bottom.bottom - top.top,
                r#"class="reconnect""#,
                Some(&tip),
            );
        }
    }
    if let Some((kind, at_s)) = fault {
        let px = x.map(at_s);
        svg.rect(
            px - 0.75,
            top.top,
            1.5,
            bottom.bottom - top.top,
            r#"class="fault""#,
            Some(&format!("{kind} at {} s", fmt_num(at_s))),
        );
        svg.text(px + 4.0, top.top + 10.0, "start", "fault-label", kind);
    }
}

/// The legend's keys: the series drawn, and the reconnect marks when drawn.
fn keys(mark_connects: bool) -> Vec<Key<'static>> {
    let mut keys = vec![
        Key {
            color: color(0),
            dash: "",
            name: "tps".into(),
        },
        Key {
            color: color(2),
            dash: "",
            name: "p50".into(),
        },
        Key {
            color: color(3),
            dash: "6 3",
            name: "p95".into(),
        },
        Key {
            color: color(6),
            dash: "1 4",
            name: "max (dots)".into(),
        },
    ];
    if mark_connects {
        keys.push(Key {
            color: "#e69f00",
            dash: "",
            name: "connections opened in the interval".into(),
        });
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(s: f64, connects: u64, p95: f64) -> IntervalSummary {
        IntervalSummary {
            start_s: s,
            end_s: s + 1.0,
            transactions: 10,
            tps: 10.0,
            failures: 0,
            connects,
            refused_connects: 0,
            mean_ms: Some(0.2),
            p50_ms: Some(0.1),
            p95_ms: Some(p95),
            p99_ms: Some(p95),
            max_ms: Some(p95 * 1.2),
        }
    }

    #[test]
    fn reconnects_are_marked_where_they_happened() {
        let ivs = vec![
            interval(0.0, 1, 3.0),
            interval(1.0, 0, 0.2),
            interval(2.0, 1, 3.1),
        ];
        let svg = render("series", &ivs, true, None);
        assert_eq!(svg.matches(r#"class="reconnect""#).count(), 2);
        assert!(svg.contains("0–1 s: 1 connection opened"), "{svg}");
        let quiet = render("series", &ivs, false, None);
        assert_eq!(quiet.matches(r#"class="reconnect""#).count(), 0);
        assert!(!quiet.contains(r#"class="fault""#));
    }

    #[test]
    fn the_fault_is_marked_at_its_second() {
        let ivs = vec![
            interval(0.0, 0, 0.2),
            interval(1.0, 0, 0.2),
            interval(2.0, 0, 0.2),
        ];
        let svg = render("series", &ivs, false, Some(("pgbouncer-restart", 1.5)));
        assert_eq!(svg.matches(r#"class="fault""#).count(), 1);
        assert!(svg.contains("pgbouncer-restart at 1.5 s"), "{svg}");
    }
}

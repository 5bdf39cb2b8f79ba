//! Lines of points with confidence-interval error bars over a numeric x axis:
//! throughput against clients, latency percentiles against clients.

use super::{axes, legend, Area, Key, Scale, Svg};

/// A measured point: the mean and, when known, its confidence interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    pub ci: Option<(f64, f64)>,
}

/// One configuration's line.
#[derive(Debug, Clone)]
pub struct Line {
    pub name: String,
    pub color: &'static str,
    pub dash: &'static str,
    pub points: Vec<Point>,
}

/// A chart of lines.
pub struct LineChart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub lines: &'a [Line],
    /// Logarithmic y, for latencies that span decades.
    pub log_y: bool,
}

const WIDTH: f64 = 720.0;
const PLOT_H: f64 = 260.0;

/// The chart as an SVG element. The x axis is logarithmic with ticks at the x values
/// measured when they span a factor of 8 or more (client counts 1, 4, 16, 64), else linear.
pub fn render(c: &LineChart) -> String {
    let area = Area {
        left: 64.0,
        top: 28.0,
        right: WIDTH - 20.0,
        bottom: 28.0 + PLOT_H,
    };
    let mut svg = Svg::new(WIDTH, area.bottom + 50.0);
    svg.text(area.left, 16.0, "start", "title", c.title);
    let mut xs: Vec<f64> = c
        .lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.x))
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let x_lo = xs.first().copied().unwrap_or(1.0);
    let x_hi = xs.last().copied().unwrap_or(10.0);
    let pad = 0.04 * (area.right - area.left);
    let x = if x_lo > 0.0 && x_hi / x_lo >= 8.0 {
        Scale::log(xs.iter().copied(), area.left + pad, area.right - pad)
    } else {
        Scale::linear_from_zero(xs.iter().copied(), area.left, area.right - pad)
    }
    .with_ticks(xs.clone());
    // A log scale widened to round ticks would leave the data floating; pin it to the data.
    let x = if x_lo > 0.0 && x_hi / x_lo >= 8.0 {
        x.pinned(x_lo, x_hi)
    } else {
        x
    };
    let ys = c
        .lines
        .iter()
        .flat_map(|l| l.points.iter().flat_map(|p| [p.y, p.ci.map_or(p.y, |ci| ci.1)]));
    let y = if c.log_y {
        Scale::log(ys, area.bottom, area.top)
    } else {
        Scale::linear_from_zero(ys, area.bottom, area.top)
    };
    axes(&mut svg, area, &x, &y, c.x_label, c.y_label);
    for l in c.lines {
        let dash = if l.dash.is_empty() {
            String::new()
        } else {
            format!(r#" stroke-dasharray="{}""#, l.dash)
        };
        let pts: Vec<(f64, f64)> = l.points.iter().map(|p| (x.map(p.x), y.map(p.y))).collect();
        svg.polyline(&pts, &format!(r#"stroke="{}" stroke-width="2"{dash}"#, l.color));
        for p in &l.points {
            let px = x.map(p.x);
            if let Some((lo, hi)) = p.ci {
                let (a, b) = (y.map(lo), y.map(hi));
                let st = format!(r#"stroke="{}" stroke-width="1.5""#, l.color);
                svg.line(px, a, px, b, &st);
                svg.line(px - 4.0, a, px + 4.0, a, &st);
                svg.line(px - 4.0, b, px + 4.0, b, &st);
            }
            let tip = match p.ci {
                Some((lo, hi)) => format!(
                    "{}: {} at x = {} (95% CI {} to {})",
                    l.name,
                    super::fmt_num(p.y),
                    super::fmt_num(p.x),
                    super::fmt_num(lo),
                    super::fmt_num(hi)
                ),
                None => format!(
                    "{}: {} at x = {}",
                    l.name,
                    super::fmt_num(p.y),
                    super::fmt_num(p.x)
                ),
            };
            svg.circle(px, y.map(p.y), 3.5, &format!(r#"fill="{}""#, l.color), Some(&tip));
        }
    }
    let keys: Vec<Key> = c
        .lines
        .iter()
        .map(|l| Key {
            color: l.color,
            dash: l.dash,
            name: l.name.clone(),
        })
        .collect();
    legend(
        &mut svg,
        area.left,
        area.bottom + 52.0,
        area.right - area.left,
        &keys,
    );
    svg.finish(c.title)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_point_gets_a_marker_and_an_error_bar() {
        let lines = vec![Line {
            name: "tcp".into(),
            color: "#0072b2",
            dash: "",
            points: vec![
                Point {
                    x: 1.0,
                    y: 100.0,
                    ci: Some((90.0, 110.0)),
                },
                Point {
                    x: 16.0,
                    y: 900.0,
                    ci: Some((850.0, 950.0)),
                },
            ],
        }];
        let svg = render(&LineChart {
            title: "tps vs clients",
            x_label: "clients",
            y_label: "tps",
            lines: &lines,
            log_y: false,
        });
        assert_eq!(svg.matches("<circle").count(), 2);
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(svg.contains("95% CI 850 to 950"), "{svg}");
        // Ticks sit at the measured client counts.
        assert!(svg.contains(">16</text>"), "{svg}");
    }
}

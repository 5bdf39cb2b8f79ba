//! Latency percentile curves, HdrHistogram style: the x axis stretches the tail
//! (50%, 90%, 99%, 99.9%, ...) and the y axis is logarithmic, so one chart shows the
//! median and the worst cases of every configuration at once.

use super::{axes, color, legend, Area, Key, Scale, Svg, DASHES};

/// One configuration's curve: `(quantile, value)` pairs, quantiles in `[0, 1)`.
#[derive(Debug, Clone)]
pub struct Curve {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

const WIDTH: f64 = 720.0;

/// Position of a quantile on the x axis: 0 at 0%, 1 at 90%, 2 at 99%, ...
fn nines(q: f64) -> f64 {
    -(1.0 - q).max(1e-9).log10()
}

/// The chart as an SVG element.
pub fn render(title: &str, y_label: &str, curves: &[Curve]) -> String {
    let area = Area {
        left: 64.0,
        top: 28.0,
        right: WIDTH - 20.0,
        bottom: 288.0,
    };
    let mut svg = Svg::new(WIDTH, area.bottom + 50.0);
    svg.text(area.left, 16.0, "start", "title", title);
    let max_nines = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| nines(p.0)))
        .fold(1.0f64, f64::max);
    // 99.99% sits at 4.000000001 in floating point: round before taking the ceiling.
    let max_nines = (max_nines - 1e-6).ceil();
    let x = Scale::linear_from_zero(std::iter::once(max_nines), area.left, area.right).with_ticks(vec![]);
    let y = Scale::log(
        curves.iter().flat_map(|c| c.points.iter().map(|p| p.1)),
        area.bottom,
        area.top,
    );
    axes(&mut svg, area, &x, &y, "percentile", y_label);
    // Percentile ticks: 0%, 50%, 90%, 99%, ...
    let mut ticks = vec![(0.0, "0%".to_string()), (nines(0.5), "50%".to_string())];
    for k in 1..=max_nines as i32 {
        // 90%, 99%, 99.9%, 99.99%: one more nine per decade, as many decimals.
        let pct = 100.0 * (1.0 - 10f64.powi(-k));
        ticks.push((k as f64, format!("{pct:.*}%", (k - 2).max(0) as usize)));
    }
    for (v, label) in ticks {
        let px = x.map(v);
        svg.line(px, area.top, px, area.bottom, r#"class="grid""#);
        svg.text(px, area.bottom + 16.0, "middle", "tick", &label);
    }
    let mut keys = Vec::new();
    for (i, c) in curves.iter().enumerate() {
        let dash = DASHES[(i / super::PALETTE.len()) % DASHES.len()];
        let dash_attr = if dash.is_empty() {
            String::new()
        } else {
            format!(r#" stroke-dasharray="{dash}""#)
        };
        let pts: Vec<(f64, f64)> = c
            .points
            .iter()
            .map(|&(q, v)| (x.map(nines(q)), y.map(v)))
            .collect();
        svg.polyline(
            &pts,
            &format!(r#"stroke="{}" stroke-width="1.8"{dash_attr}"#, color(i)),
        );
        keys.push(Key {
            color: color(i),
            dash,
            name: c.name.clone(),
        });
    }
    legend(
        &mut svg,
        area.left,
        area.bottom + 50.0,
        area.right - area.left,
        &keys,
    );
    svg.finish(title)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_stretched_and_labelled() {
        assert!((nines(0.99) - 2.0).abs() < 1e-9);
        let c = Curve {
            name: "unix".into(),
            points: vec![
                (0.0, 0.1),
                (0.5, 0.2),
                (0.9, 0.3),
                (0.99, 1.0),
                (0.999, 4.0),
                (0.9999, 9.0),
            ],
        };
        let svg = render("latency", "ms", &[c]);
        assert!(svg.contains(">99.9%</text>"), "{svg}");
        assert!(svg.contains(">99.99%</text>"), "{svg}");
        assert!(!svg.contains(">100%</text>"), "{svg}");
        assert_eq!(svg.matches("<polyline").count(), 1);
    }
}

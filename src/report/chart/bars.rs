//! Horizontal bars with confidence-interval whiskers, one per configuration, coloured by
//! the verdict against the baseline: the A-vs-B view (transport, pooling, TLS).

use super::{axes, fmt_num, Area, Scale, Svg};

/// How a bar compares with the baseline, which sets its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    Baseline,
    Better,
    Worse,
    /// No significant difference, or inconclusive.
    Undecided,
}

impl Standing {
    fn fill(self) -> &'static str {
        match self {
            Standing::Baseline => "#6b6b6b",
            Standing::Better => "#009e73",
            Standing::Worse => "#d55e00",
            Standing::Undecided => "#56b4e9",
        }
    }
}

/// One configuration. `value` is `None` when the cell has no results.
#[derive(Debug, Clone)]
pub struct Bar {
    pub name: String,
    pub value: Option<f64>,
    pub ci: Option<(f64, f64)>,
    pub standing: Standing,
    /// Printed after the bar: the ratio and verdict, or why there is no value.
    pub note: String,
}

const WIDTH: f64 = 760.0;
const ROW: f64 = 24.0;

/// The chart as an SVG element.
pub fn render(title: &str, value_label: &str, bars: &[Bar]) -> String {
    let longest = bars.iter().map(|b| b.name.chars().count()).max().unwrap_or(4) as f64;
    let left = (longest * 6.2 + 16.0).clamp(80.0, 380.0);
    let notes = bars.iter().map(|b| b.note.chars().count()).max().unwrap_or(0) as f64;
    let right = WIDTH - (notes * 6.2 + 20.0).clamp(40.0, 260.0);
    let area = Area {
        left,
        top: 30.0,
        right,
        bottom: 30.0 + ROW * bars.len().max(1) as f64,
    };
    let mut svg = Svg::new(WIDTH, area.bottom + 44.0);
    svg.text(8.0, 16.0, "start", "title", title);
    let x = Scale::linear_from_zero(
        bars.iter()
            .flat_map(|b| [b.value.unwrap_or(0.0), b.ci.map_or(0.0, |c| c.1)]),
        area.left,
        area.right,
    );
    // Categories on y: no y ticks, labels drawn per bar below.
    let y = Scale::linear_from_zero(std::iter::once(1.0), area.bottom, area.top).with_ticks(vec![]);
    axes(&mut svg, area, &x, &y, value_label, "");
    for (i, b) in bars.iter().enumerate() {
        let top = area.top + ROW * i as f64 + 4.0;
        let mid = top + (ROW - 8.0) / 2.0;
        svg.text(area.left - 8.0, mid + 4.0, "end", "key", &b.name);
        let Some(v) = b.value else {
            svg.text(area.left + 6.0, mid + 4.0, "start", "missing", &b.note);
            continue;
        };
        let tip = match b.ci {
            Some((lo, hi)) => format!(
                "{}: {} (95% CI {} to {})",
                b.name,
                fmt_num(v),
                fmt_num(lo),
                fmt_num(hi)
            ),
            None => format!("{}: {}", b.name, fmt_num(v)),
        };
        svg.rect(
            area.left,
            top,
            x.map(v) - area.left,
            ROW - 8.0,
            &format!(r#"fill="{}""#, b.standing.fill()),
            Some(&tip),
        );
        let mut end = x.map(v);
        if let Some((lo, hi)) = b.ci {
            let (a, c) = (x.map(lo), x.map(hi));
            svg.line(a, mid, c, mid, r#"class="whisker""#);
            svg.line(a, mid - 5.0, a, mid + 5.0, r#"class="whisker""#);
            svg.line(c, mid - 5.0, c, mid + 5.0, r#"class="whisker""#);
            end = end.max(c);
        }
        svg.text(
            end + 6.0,
            mid + 4.0,
            "start",
            "key",
            &format!("{} · {}", fmt_num(v), b.note),
        );
    }
    svg.finish(&format!("{title} ({value_label})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_bar_says_why_and_draws_no_rect() {
        let bars = vec![
            Bar {
                name: "unix".into(),
                value: Some(3000.0),
                ci: Some((2900.0, 3100.0)),
                standing: Standing::Baseline,
                note: "baseline".into(),
            },
            Bar {
                name: "tls".into(),
                value: None,
                ci: None,
                standing: Standing::Undecided,
                note: "no results: 3 repetitions failed".into(),
            },
        ];
        let svg = render("connect time", "µs", &bars);
        assert_eq!(svg.matches("<rect").count(), 1);
        assert!(svg.contains("no results: 3 repetitions failed"));
        assert!(svg.contains("#6b6b6b"));
    }
}

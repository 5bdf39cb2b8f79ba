//! Stacked horizontal bars: per row, one or more bars of parts stacked in order. The
//! connection-phase waterfall uses it (per target, the phases of set-up in the order they
//! happen, once at p50 and once at p99, so where the time goes and how the tail differs
//! are both visible), and so does CPU per transaction (client, pooler, relays, server).

use super::{axes, color, fmt_num, legend, Area, Key, Scale, Svg};

/// One row: its bars, each a label and `(part, µs)` in stacking order (the waterfall's
/// p50 and p99). Empty when the row has no results.
#[derive(Debug, Clone)]
pub struct Row {
    pub name: String,
    pub bars: Vec<(String, Vec<(String, f64)>)>,
    /// Why there is nothing to draw.
    pub missing: Option<String>,
}

const WIDTH: f64 = 760.0;
const ROW: f64 = 40.0;

/// The chart as an SVG element; `phases` (the parts) fixes each part's colour across
/// rows; `x_label` names the axis, in µs.
pub fn render(title: &str, x_label: &str, phases: &[&str], rows: &[Row]) -> String {
    let per_row = rows.iter().map(|r| r.bars.len()).max().unwrap_or(1).max(1);
    let row_height = ROW.max(6.0 + 17.0 * per_row as f64);
    let longest = rows.iter().map(|r| r.name.chars().count()).max().unwrap_or(4) as f64;
    // The bars' labels (p50, +10 ms, predicted) stand between the row's name and its
    // bars: room for the longest, so a long one does not run into the name.
    let label = rows
        .iter()
        .flat_map(|r| r.bars.iter().map(|(l, _)| l.chars().count()))
        .max()
        .unwrap_or(0) as f64;
    let label_w = (10.0 + label * 5.6).max(34.0);
    let left = (longest * 6.2 + 10.0 + label_w).clamp(100.0, 400.0);
    let area = Area {
        left,
        top: 30.0,
        right: WIDTH - 70.0,
        bottom: 30.0 + row_height * rows.len().max(1) as f64,
    };
    let mut svg = Svg::new(WIDTH, area.bottom + 50.0);
    svg.text(8.0, 16.0, "start", "title", title);
    let total = |v: &[(String, f64)]| v.iter().map(|(_, t)| t).sum::<f64>();
    let x = Scale::linear_from_zero(
        rows.iter().flat_map(|r| r.bars.iter().map(|(_, b)| total(b))),
        area.left,
        area.right,
    );
    let y = Scale::linear_from_zero(std::iter::once(1.0), area.bottom, area.top).with_ticks(vec![]);
    axes(&mut svg, area, &x, &y, x_label, "");
    let phase_color = |p: &str| color(phases.iter().position(|q| *q == p).unwrap_or(phases.len()));
    for (i, r) in rows.iter().enumerate() {
        let top = area.top + row_height * i as f64 + 3.0;
        svg.text(area.left - label_w, top + 16.0, "end", "key", &r.name);
        if let Some(why) = &r.missing {
            svg.text(area.left + 6.0, top + 16.0, "start", "missing", why);
            continue;
        }
        for (j, (label, segs)) in r.bars.iter().enumerate() {
            let y0 = top + j as f64 * 17.0;
            svg.text(area.left - 6.0, y0 + 11.0, "end", "tick", label);
            let mut at = 0.0;
            for (phase, us) in segs.iter() {
                let tip = if label.is_empty() {
                    format!("{}, {phase}: {} µs", r.name, fmt_num(*us))
                } else {
                    format!("{}, {phase} ({label}): {} µs", r.name, fmt_num(*us))
                };
                svg.rect(
                    x.map(at),
                    y0,
                    x.map(at + us) - x.map(at),
                    14.0,
                    &format!(r#"fill="{}""#, phase_color(phase)),
                    Some(&tip),
                );
                at += us;
            }
            svg.text(
                x.map(at) + 5.0,
                y0 + 11.0,
                "start",
                "tick",
                &format!("{} µs", fmt_num(at)),
            );
        }
    }
    let keys: Vec<Key> = phases
        .iter()
        .map(|p| Key {
            color: phase_color(p),
            dash: "",
            name: p.to_string(),
        })
        .collect();
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
    fn phases_stack_in_order_for_p50_and_p99() {
        let seg = |v: [f64; 2]| vec![("socket".to_string(), v[0]), ("auth".to_string(), v[1])];
        let rows = vec![
            Row {
                name: "unix".into(),
                bars: vec![
                    ("p50".into(), seg([50.0, 3000.0])),
                    ("p99".into(), seg([90.0, 4000.0])),
                ],
                missing: None,
            },
            Row {
                name: "tls".into(),
                bars: vec![],
                missing: Some("no results".into()),
            },
        ];
        let svg = render("phases", "µs", &["socket", "auth"], &rows);
        assert_eq!(svg.matches("<rect").count(), 4);
        assert!(svg.contains("4090 µs"), "{svg}");
        assert!(svg.contains("unix, auth (p99): 4000 µs"));
        assert!(svg.contains("no results"));
    }
}

//! Lanes over time: one lane per connection (a bar from its open to its close), its
//! transactions above it as blocks in their shape's colour, its requests as ticks from
//! sent to answered (failed ones red). `trace --html` draws the recorded application's
//! connections and requests with it, so a pool's long-lived connections, a connection
//! per request, bursts and the think time between requests are seen, not read.
//!
//! Marks closer than a pixel are drawn as one (their tooltip counts them), so the SVG's
//! size is bounded by the plot's width per lane, however many marks it is given.

use std::fmt::Write;

use super::{axes, legend, Area, Key, Scale, Svg};

/// A lane's connection colour: found nowhere else on a page, so a browser test can
/// tell the timeline was drawn.
pub const CONNECTION: &str = "#8da0cb";
const REQUEST: &str = "#27272a";
const FAILED: &str = "#c00000";

/// Something from `from` to `to` on the time axis (the chart's unit), coloured.
#[derive(Debug, Clone)]
pub struct Span {
    pub from: f64,
    pub to: f64,
    pub color: &'static str,
    /// What one such mark is, for the tooltip ("transaction of shape #1").
    pub what: String,
}

/// One lane: its name, the connection's span (`to` is where it closed, or the plot's
/// end), and what happened on it.
#[derive(Debug, Clone)]
pub struct Lane {
    pub name: String,
    pub open: f64,
    pub close: f64,
    pub transactions: Vec<Span>,
    /// Requests: `(sent, answered, failed)`.
    pub requests: Vec<(f64, f64, bool)>,
}

/// The chart: lanes over `0..=until` (the axis' unit, named by `x_label`), and the
/// legend's entries beyond requests and connections (the shapes' colours).
pub struct TimelineChart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub until: f64,
    pub lanes: &'a [Lane],
    pub keys: Vec<(&'static str, String)>,
}

const WIDTH: f64 = 760.0;
const LANE: f64 = 22.0;

/// The chart as an SVG element.
pub fn render(c: &TimelineChart) -> String {
    let area = Area {
        left: 90.0,
        top: 28.0,
        right: WIDTH - 20.0,
        bottom: 28.0 + LANE * c.lanes.len().max(1) as f64,
    };
    let mut svg = Svg::new(WIDTH, area.bottom + 50.0);
    svg.text(8.0, 16.0, "start", "title", c.title);
    let until = if c.until > 0.0 { c.until } else { 1.0 };
    let x = Scale::linear_from_zero(std::iter::once(until), area.left, area.right).pinned(0.0, until);
    let y = Scale::linear_from_zero(std::iter::once(1.0), area.bottom, area.top).with_ticks(vec![]);
    axes(&mut svg, area, &x, &y, c.x_label, "");
    for (i, l) in c.lanes.iter().enumerate() {
        let top = (area.top + LANE * i as f64).round();
        svg.text(area.left - 6.0, top + 15.0, "end", "tick", &l.name);
        let (a, b) = (x.map(l.open), x.map(l.close.min(until)));
        let tip = format!("{}: open from {:.3} to {:.3}", l.name, l.open, l.close);
        svg.rect(
            a,
            top + 18.0,
            (b - a).max(1.0),
            3.0,
            &format!(r#"fill="{CONNECTION}""#),
            Some(&tip),
        );
        let spans = l
            .transactions
            .iter()
            .map(|s| (s.from, s.to, s.color, s.what.as_str()));
        merged(&mut svg, &x, &l.name, (top + 2.0, 8.0), spans);
        let requests = l.requests.iter().map(|&(from, to, failed)| {
            let (color, what) = if failed {
                (FAILED, "failed request")
            } else {
                (REQUEST, "request")
            };
            (from, to, color, what)
        });
        merged(&mut svg, &x, &l.name, (top + 11.0, 6.0), requests);
    }
    let mut keys: Vec<Key> = c
        .keys
        .iter()
        .map(|(color, name)| Key {
            color,
            dash: "",
            name: name.clone(),
        })
        .collect();
    keys.push(Key {
        color: REQUEST,
        dash: "",
        name: "request, sent to answered".into(),
    });
    keys.push(Key {
        color: FAILED,
        dash: "",
        name: "failed request".into(),
    });
    keys.push(Key {
        color: CONNECTION,
        dash: "",
        name: "connection, open to close".into(),
    });
    legend(
        &mut svg,
        area.left,
        area.bottom + 52.0,
        area.right - area.left,
        &keys,
    );
    svg.finish(c.title)
}

/// One colour's marks in a lane: its path, and how many marks it draws.
struct Path<'a> {
    color: &'static str,
    what: &'a str,
    d: String,
    marks: u64,
}

/// Draws marks in a row as one path per colour (a rectangle per mark, at least a
/// pixel wide, on whole pixels: crisp, and a few bytes each); a mark that begins
/// within a pixel of the previous one's end, in its colour, extends it. The path's
/// tooltip counts its marks.
fn merged<'a>(
    svg: &mut Svg,
    x: &Scale,
    lane: &str,
    (y, h): (f64, f64),
    marks: impl Iterator<Item = (f64, f64, &'static str, &'a str)>,
) {
    let mut paths: Vec<Path> = Vec::new();
    // The rectangle being drawn: its path, from and to in pixels.
    let mut run: Option<(usize, f64, f64)> = None;
    let draw = |paths: &mut Vec<Path>, (i, a, b): (usize, f64, f64)| {
        let w = (b - a).max(1.0);
        let _ = write!(paths[i].d, "M{a} {y}h{w}v{h}h-{w}z");
    };
    for (from, to, color, what) in marks {
        let (a, b) = (x.map(from).floor(), x.map(to.max(from)).ceil());
        let i = match paths.iter().position(|p| p.color == color && p.what == what) {
            Some(i) => i,
            None => {
                paths.push(Path {
                    color,
                    what,
                    d: String::new(),
                    marks: 0,
                });
                paths.len() - 1
            }
        };
        paths[i].marks += 1;
        match &mut run {
            Some(r) if r.0 == i && a <= r.2.max(r.1 + 1.0) + 1.0 => r.2 = r.2.max(b),
            _ => {
                if let Some(r) = run.replace((i, a, b)) {
                    draw(&mut paths, r);
                }
            }
        }
    }
    if let Some(r) = run {
        draw(&mut paths, r);
    }
    for p in paths {
        let tip = format!(
            "{lane}: {} {}{}",
            p.marks,
            p.what,
            if p.marks == 1 { "" } else { "s" }
        );
        svg.path(&p.d, &format!(r#"fill="{}""#, p.color), Some(&tip));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten thousand requests a pixel apart or closer are a few hundred rectangles at
    /// most; the lanes, their names and the legend are drawn.
    #[test]
    fn marks_closer_than_a_pixel_are_one() {
        let requests: Vec<(f64, f64, bool)> = (0..10_000)
            .map(|k| (k as f64 * 0.1, k as f64 * 0.1 + 0.05, k == 5_000))
            .collect();
        let lanes = vec![
            Lane {
                name: "session 1".into(),
                open: 0.0,
                close: 1_000.0,
                transactions: vec![Span {
                    from: 1.0,
                    to: 3.0,
                    color: "#0072b2",
                    what: "transaction of shape #1".into(),
                }],
                requests,
            },
            Lane {
                name: "session 2".into(),
                open: 500.0,
                close: 2_000.0,
                transactions: Vec::new(),
                requests: Vec::new(),
            },
        ];
        let svg = render(&TimelineChart {
            title: "t",
            x_label: "ms",
            until: 1_000.0,
            lanes: &lanes,
            keys: vec![("#0072b2", "#1 BEGIN …".into())],
        });
        // A path per lane and kind: session 1's transactions, requests, failed request.
        assert_eq!(svg.matches("<path").count(), 3, "{svg}");
        assert!(svg.len() < 20_000, "{} bytes", svg.len());
        assert_eq!(svg.matches(FAILED).count(), 2, "the failed request and its key");
        assert!(svg.contains(">session 2</text>"));
        assert!(svg.contains("#1 BEGIN …"));
        assert!(svg.contains("session 1: 9999 requests"), "{svg}");
        assert!(svg.contains("session 1: 1 transaction of shape #1<"), "{svg}");
    }
}

//! SVG charts for the HTML report, written by hand so the output is small, has no
//! scripts or fonts to fetch, and is the same bytes for the same data (snapshot-friendly).
//!
//! This module owns the drawing primitives every chart shares: an SVG string builder,
//! linear and logarithmic scales with readable ticks, a plot frame (axes, grid, labels,
//! legend) and the palette. Each chart kind lives in its own file and only turns report
//! data into marks on a frame; none of them computes a statistic.

pub mod bars;
pub mod lines;
pub mod percentiles;
pub mod series;
pub mod timeline;
pub mod waterfall;

use std::fmt::Write;

/// Okabe–Ito colours (distinguishable with the common colour-vision deficiencies),
/// yellow left out because it is unreadable on white.
pub const PALETTE: [&str; 8] = [
    "#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#6b6b6b", "#000000",
];

/// The colour of the `i`th series.
pub fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Dash patterns to tell series apart once colours repeat, and for p50/p95/p99.
pub const DASHES: [&str; 3] = ["", "6 3", "2 3"];

/// Escapes text for SVG/HTML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// A number for a tick or data label: at most three significant digits, `k`/`M` for
/// large values, no trailing zeros.
/// A transaction shape's short name in a chart: its rank and first statement.
pub fn shape_label(i: usize, statements: &[String]) -> String {
    let first: String = statements
        .first()
        .map_or("-".into(), |t| t.chars().take(22).collect());
    format!(
        "#{} {first}{}",
        i + 1,
        if statements.len() > 1 { " …" } else { "" }
    )
}

pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(v / 1e6, 1))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3, 1))
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        trim(v, 1)
    } else if a >= 1.0 {
        trim(v, 2)
    } else {
        // Enough decimals for three significant digits.
        let d = (-a.log10().floor()) as usize + 2;
        trim(v, d.min(9))
    }
}

fn trim(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// An SVG document being written.
pub struct Svg {
    width: f64,
    height: f64,
    body: String,
}

impl Svg {
    pub fn new(width: f64, height: f64) -> Svg {
        Svg {
            width,
            height,
            body: String::new(),
        }
    }

    pub fn height(&self) -> f64 {
        self.height
    }

    /// Grows the canvas (a legend that needs more rows).
    pub fn set_height(&mut self, h: f64) {
        self.height = h;
    }

    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, style: &str) {
        let _ = write!(
            self.body,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" {style}/>"#
        );
    }

    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, style: &str, tip: Option<&str>) {
        let _ = write!(
            self.body,
            r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" {style}>"#,
            w.max(0.0),
            h.max(0.0)
        );
        if let Some(t) = tip {
            let _ = write!(self.body, "<title>{}</title>", esc(t));
        }
        self.body.push_str("</rect>");
    }

    pub fn circle(&mut self, x: f64, y: f64, r: f64, style: &str, tip: Option<&str>) {
        let _ = write!(self.body, r#"<circle cx="{x:.1}" cy="{y:.1}" r="{r}" {style}>"#);
        if let Some(t) = tip {
            let _ = write!(self.body, "<title>{}</title>", esc(t));
        }
        self.body.push_str("</circle>");
    }

    /// A path (`d` in SVG's path syntax, already in pixels): many small marks of one
    /// colour in few bytes.
    pub fn path(&mut self, d: &str, style: &str, tip: Option<&str>) {
        let _ = write!(self.body, r#"<path d="{d}" {style}>"#);
        if let Some(t) = tip {
            let _ = write!(self.body, "<title>{}</title>", esc(t));
        }
        self.body.push_str("</path>");
    }

    /// A polyline through `points` (already in pixels).
    pub fn polyline(&mut self, points: &[(f64, f64)], style: &str) {
        if points.is_empty() {
            return;
        }
        self.body.push_str(r#"<polyline fill="none" points=""#);
        for (i, (x, y)) in points.iter().enumerate() {
            if i > 0 {
                self.body.push(' ');
            }
            let _ = write!(self.body, "{x:.1},{y:.1}");
        }
        let _ = write!(self.body, r#"" {style}/>"#);
    }

    /// Text; `anchor` is start, middle or end.
    pub fn text(&mut self, x: f64, y: f64, anchor: &str, class: &str, s: &str) {
        let _ = write!(
            self.body,
            r#"<text x="{x:.1}" y="{y:.1}" text-anchor="{anchor}" class="{class}">{}</text>"#,
            esc(s)
        );
    }

    /// Text rotated to run upwards (a y-axis label).
    pub fn vtext(&mut self, x: f64, y: f64, class: &str, s: &str) {
        let _ = write!(
            self.body,
            r#"<text transform="translate({x:.1},{y:.1}) rotate(-90)" text-anchor="middle" class="{class}">{}</text>"#,
            esc(s)
        );
    }

    /// The finished element. `label` is read by screen readers and shown as a tooltip.
    pub fn finish(self, label: &str) -> String {
        format!(
            r#"<svg class="chart" viewBox="0 0 {w:.0} {h:.0}" width="{w:.0}" height="{h:.0}" role="img" aria-label="{l}"><title>{l}</title>{body}</svg>"#,
            w = self.width,
            h = self.height,
            l = esc(label),
            body = self.body
        )
    }
}

/// A map from data values to pixels along one axis.
#[derive(Debug, Clone)]
pub struct Scale {
    lo: f64,
    hi: f64,
    px_lo: f64,
    px_hi: f64,
    log: bool,
    /// Ticks to draw instead of computed ones (e.g. the client counts measured).
    fixed_ticks: Option<Vec<f64>>,
}

impl Scale {
    /// A scale over the data `values`, padded to include zero for linear scales whose data
    /// is all positive (bars and rates read wrongly from a cut axis).
    pub fn linear_from_zero(values: impl Iterator<Item = f64>, px_lo: f64, px_hi: f64) -> Scale {
        let hi = values.filter(|v| v.is_finite()).fold(0.0f64, f64::max);
        let hi = if hi <= 0.0 { 1.0 } else { nice_ceil(hi) };
        Scale {
            lo: 0.0,
            hi,
            px_lo,
            px_hi,
            log: false,
            fixed_ticks: None,
        }
    }

    /// A logarithmic scale spanning the positive `values`, widened to whole ticks.
    pub fn log(values: impl Iterator<Item = f64>, px_lo: f64, px_hi: f64) -> Scale {
        let (mut lo, mut hi) = values
            .filter(|v| v.is_finite() && *v > 0.0)
            .fold((f64::INFINITY, 0.0f64), |(l, h), v| (l.min(v), h.max(v)));
        if !lo.is_finite() {
            (lo, hi) = (1.0, 10.0);
        }
        if hi <= lo {
            hi = lo * 10.0;
        }
        Scale {
            lo: nice_log_floor(lo),
            hi: nice_log_ceil(hi),
            px_lo,
            px_hi,
            log: true,
            fixed_ticks: None,
        }
    }

    /// Draw ticks at these values only.
    pub fn with_ticks(mut self, ticks: Vec<f64>) -> Scale {
        self.fixed_ticks = Some(ticks);
        self
    }

    /// Spans exactly `lo..=hi` (the data), not the round ticks around it.
    pub fn pinned(mut self, lo: f64, hi: f64) -> Scale {
        if hi > lo {
            self.lo = lo;
            self.hi = hi;
        }
        self
    }

    /// Data value to pixel.
    pub fn map(&self, v: f64) -> f64 {
        let f = if self.log {
            (v.max(self.lo * 1e-3).ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        // Whatever falls outside (an interval's low end below zero or below a log axis)
        // is drawn to the axis rather than over the labels.
        self.px_lo + f.clamp(0.0, 1.0) * (self.px_hi - self.px_lo)
    }

    pub fn ticks(&self) -> Vec<f64> {
        if let Some(t) = &self.fixed_ticks {
            return t.clone();
        }
        if self.log {
            let decades = (self.hi / self.lo).log10();
            let mults: &[f64] = if decades <= 1.5 {
                &[1.0, 2.0, 5.0]
            } else if decades <= 3.5 {
                &[1.0, 3.0]
            } else {
                &[1.0]
            };
            let mut t = Vec::new();
            let mut p = 10f64.powf(self.lo.log10().floor());
            while p <= self.hi * 1.0001 {
                for m in mults {
                    let v = p * m;
                    if v >= self.lo * 0.9999 && v <= self.hi * 1.0001 {
                        t.push(v);
                    }
                }
                p *= 10.0;
            }
            t
        } else {
            let step = nice_step((self.hi - self.lo) / 5.0);
            let mut t = Vec::new();
            let mut v = (self.lo / step).ceil() * step;
            while v <= self.hi + step * 1e-9 {
                t.push(v);
                v += step;
            }
            t
        }
    }
}

fn nice_step(raw: f64) -> f64 {
    let p = 10f64.powf(raw.log10().floor());
    let f = raw / p;
    p * if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    }
}

fn nice_ceil(v: f64) -> f64 {
    let step = nice_step(v / 5.0);
    (v / step).ceil() * step
}

fn nice_log_floor(v: f64) -> f64 {
    let p = 10f64.powf(v.log10().floor());
    [5.0, 2.0, 1.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&t| t <= v)
        .unwrap_or(p)
}

fn nice_log_ceil(v: f64) -> f64 {
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&t| t >= v * 0.9999)
        .unwrap_or(10.0 * p)
}

/// Where a plot's data area sits inside its SVG.
#[derive(Debug, Clone, Copy)]
pub struct Area {
    pub left: f64,
    pub top: f64,
    pub right: f64,
    pub bottom: f64,
}

/// Draws the grid, the axes, their ticks and labels for a data area.
pub fn axes(svg: &mut Svg, a: Area, x: &Scale, y: &Scale, x_label: &str, y_label: &str) {
    for t in y.ticks() {
        let py = y.map(t);
        svg.line(a.left, py, a.right, py, r#"class="grid""#);
        svg.text(a.left - 6.0, py + 4.0, "end", "tick", &fmt_num(t));
    }
    for t in x.ticks() {
        let px = x.map(t);
        svg.line(px, a.top, px, a.bottom, r#"class="grid""#);
        svg.text(px, a.bottom + 16.0, "middle", "tick", &fmt_num(t));
    }
    svg.line(a.left, a.bottom, a.right, a.bottom, r#"class="axis""#);
    svg.line(a.left, a.top, a.left, a.bottom, r#"class="axis""#);
    svg.text(
        (a.left + a.right) / 2.0,
        a.bottom + 34.0,
        "middle",
        "label",
        x_label,
    );
    svg.vtext(14.0, (a.top + a.bottom) / 2.0, "label", y_label);
}

/// One legend entry: a colour, a dash pattern and a name.
pub struct Key<'a> {
    pub color: &'a str,
    pub dash: &'a str,
    pub name: String,
}

/// A legend under the plot, as many entries per row as fit; grows the SVG to fit.
pub fn legend(svg: &mut Svg, left: f64, top: f64, width: f64, keys: &[Key]) {
    let mut x = left;
    let mut y = top;
    for k in keys {
        // 6.2 px per character approximates the 11 px sans-serif the CSS sets.
        let w = 34.0 + 6.2 * k.name.chars().count() as f64;
        if x > left && x + w > left + width {
            x = left;
            y += 18.0;
        }
        let dash = if k.dash.is_empty() {
            String::new()
        } else {
            format!(r#" stroke-dasharray="{}""#, k.dash)
        };
        svg.line(
            x,
            y,
            x + 22.0,
            y,
            &format!(r#"stroke="{}" stroke-width="2.5"{dash}"#, k.color),
        );
        svg.text(x + 28.0, y + 4.0, "start", "key", &k.name);
        x += w + 12.0;
    }
    let needed = y + 14.0;
    if needed > svg.height() {
        svg.set_height(needed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_short_and_exact_enough() {
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(2500.0), "2500");
        assert_eq!(fmt_num(25_000.0), "25k");
        assert_eq!(fmt_num(1_260_000.0), "1.3M");
        assert_eq!(fmt_num(12.5), "12.5");
        assert_eq!(fmt_num(1.25), "1.25");
        assert_eq!(fmt_num(0.05), "0.05");
        assert_eq!(fmt_num(0.0123), "0.0123");
    }

    #[test]
    fn linear_ticks_are_round_and_cover_the_data() {
        let s = Scale::linear_from_zero([0.3, 7.2].into_iter(), 0.0, 100.0);
        assert_eq!(s.ticks(), vec![0.0, 2.0, 4.0, 6.0, 8.0]);
        assert_eq!(s.map(4.0), 50.0);
    }

    #[test]
    fn log_ticks_fall_on_decades_and_map_evenly() {
        let s = Scale::log([3.0, 4000.0].into_iter(), 0.0, 300.0);
        assert_eq!(s.ticks(), vec![3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0]);
        let even = Scale::log([1.0, 1000.0].into_iter(), 0.0, 300.0);
        assert!((even.map(10.0) - 100.0).abs() < 1e-9);
        let narrow = Scale::log([1.2, 8.0].into_iter(), 0.0, 100.0);
        assert_eq!(narrow.ticks(), vec![1.0, 2.0, 5.0, 10.0]);
    }

    #[test]
    fn text_is_escaped() {
        let mut s = Svg::new(10.0, 10.0);
        s.text(0.0, 0.0, "start", "k", "a<b & \"c\"");
        let out = s.finish("x<y");
        assert!(out.contains("a&lt;b &amp; &quot;c&quot;"), "{out}");
        assert!(out.contains(r#"aria-label="x&lt;y""#));
    }
}

//! Reports: turn statistics into what people read (terminal tables, Markdown, an HTML
//! page with charts) and what programs read (JSON with stable keys, CSV). Reports only
//! read `stats` values and stored runs; they measure and compute nothing of their own
//! beyond unit conversion and ratios for display.
//!
//! `data` rebuilds a stored run's statistics and chart inputs; `text`, `load` and `suite`
//! are the terminal and JSON output of live commands; `markdown`, `csv` and `html` (with
//! `chart`, one file per chart kind) are the published forms; `style` holds colour and
//! wrapping for the terminal.

pub mod data;
pub mod style;
pub mod text;
pub mod json;
pub mod load;
pub mod suite;
pub mod markdown;
pub mod csv;
pub mod chart;
pub mod html;

use std::time::Duration;

/// A duration in nanoseconds for people: units chosen per value so that three or four
/// significant digits show (`850 ns`, `21.4 µs`, `2.41 ms`, `1.20 s`).
pub fn format_ns(ns: f64) -> String {
    if ns < 1_000.0 {
        format!("{ns:.0} ns")
    } else if ns < 10_000.0 {
        format!("{:.2} µs", ns / 1e3)
    } else if ns < 1_000_000.0 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 10_000_000.0 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns < 1_000_000_000.0 {
        format!("{:.1} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// A [`Duration`] for people, as [`format_ns`].
pub fn format_duration(d: Duration) -> String {
    format_ns(d.as_nanos() as f64)
}

/// A byte count for people.
pub fn format_bytes(b: f64) -> String {
    if b < 1024.0 {
        format!("{b:.0} B")
    } else if b < 1024.0 * 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{:.1} MiB", b / 1024.0 / 1024.0)
    }
}

/// Serialises a duration as seconds (for `*_s` keys).
pub fn ser_duration_s<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Serialises an optional duration as seconds.
pub fn ser_opt_duration_s<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// Reads an optional duration written by [`ser_opt_duration_s`].
pub fn de_opt_duration_s<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let secs: Option<f64> = serde::Deserialize::deserialize(d)?;
    Ok(secs
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64))
}

/// Serialises a duration as milliseconds (for `*_ms` keys).
pub fn ser_duration_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_pick_readable_units() {
        assert_eq!(format_ns(850.0), "850 ns");
        assert_eq!(format_ns(1_234.0), "1.23 µs");
        assert_eq!(format_ns(21_400.0), "21.4 µs");
        assert_eq!(format_ns(2_412_000.0), "2.41 ms");
        assert_eq!(format_ns(24_120_000.0), "24.1 ms");
        assert_eq!(format_ns(1_200_000_000.0), "1.20 s");
        assert_eq!(format_duration(Duration::from_secs(2)), "2.00 s");
        assert_eq!(format_bytes(412.0), "412 B");
        assert_eq!(format_bytes(1536.0), "1.5 KiB");
    }
}

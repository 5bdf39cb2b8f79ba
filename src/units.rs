//! Units: the leaf every layer may use and that uses nothing of connbench's. Parsing the
//! durations people type (`250ms`, `1.5s`, `2m`; humantime's grammar), formatting
//! measured times, byte counts and timestamps for people, and the serde helpers that
//! write durations under `_s` and `_ms` keys. Measurement, experiments and reports all
//! read these; none of them is imported here.

use std::time::Duration;

/// Parses a duration as people type it: `250ms`, `1.5s`, `20us`, `2m`, `1h 30m`, or `0`.
/// A bare number has no unit and is refused (is `10` seconds or milliseconds?), except 0.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(format!("{s:?} has no unit; write e.g. 10ms, 1s, 500us"));
    }
    // humantime has no `µ`; people type it.
    let normal = s.replace("µs", "us");
    humantime::parse_duration(&normal).map_err(|e| match e {
        humantime::DurationError::NumberOverflow => {
            format!("{s:?} is too long a duration (the limit is about 584 years)")
        }
        humantime::DurationError::UnknownUnit { unit, .. } => {
            format!("unknown unit {unit:?} in {s:?}; use ns, us, ms, s, m or h")
        }
        _ => format!("{s:?} is not a duration ({e}); write e.g. 10ms, 1s, 500us"),
    })
}

/// A setting's duration written back the way people type it (`5s`, `250ms`, `1m 30s`).
pub fn duration_setting(d: Duration) -> String {
    if d.is_zero() {
        return "0".into();
    }
    humantime::format_duration(d).to_string().replace(' ', "")
}

/// Seconds given as a number (`-T 2.5`, `-P 5`) as a duration, refusing what is not a
/// positive finite number of seconds a `Duration` can hold.
pub fn positive_seconds(secs: f64) -> Option<Duration> {
    if secs > 0.0 && secs.is_finite() {
        Duration::try_from_secs_f64(secs).ok()
    } else {
        None
    }
}

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

/// Now, as seconds-precision UTC in RFC 3339 (`2026-11-22T08:23:03Z`).
pub fn now_utc() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Serialises a duration as seconds (for `*_s` keys).
pub fn ser_duration_s<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Reads a duration written by [`ser_duration_s`].
pub fn de_duration_s<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = <f64 as serde::Deserialize>::deserialize(d)?;
    Duration::try_from_secs_f64(s).map_err(serde::de::Error::custom)
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
    Ok(secs.and_then(|s| Duration::try_from_secs_f64(s).ok()))
}

/// Serialises a duration as milliseconds (for `*_ms` keys).
pub fn ser_duration_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

/// The JSON Schema of a type as connbench writes it (the serialising contract: keys that
/// are skipped when empty are optional), in draft 2020-12.
pub fn output_schema<T: schemars::JsonSchema>() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    serde_json::to_value(generator.into_root_schema_for::<T>()).expect("a schema is JSON")
}

/// `n`'s decimal digits, written into the end of `buf` (20 bytes hold any u64), with
/// no allocation and no formatting machinery: the sandbox writes a pid with it between
/// fork and exec. (A script's parameters are written with `itoa`, which also hands back
/// a `str` without a UTF-8 check.)
#[inline]
pub fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_writes_every_u64() {
        let mut buf = [0u8; 20];
        assert_eq!(decimal(0, &mut buf), b"0");
        assert_eq!(decimal(4194304, &mut buf), b"4194304");
        assert_eq!(decimal(u64::MAX, &mut buf), u64::MAX.to_string().as_bytes());
    }

    #[test]
    fn durations_parse_as_typed() {
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("20us"), Ok(Duration::from_micros(20)));
        assert_eq!(parse_duration("20µs"), Ok(Duration::from_micros(20)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("10").unwrap_err().contains("no unit"));
        assert!(parse_duration("10 parsecs").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("100000000000000000000000s")
            .unwrap_err()
            .contains("too long"));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn settings_round_trip() {
        for s in ["5s", "250ms", "1m30s", "0"] {
            assert_eq!(duration_setting(parse_duration(s).unwrap()), s);
        }
    }

    #[test]
    fn seconds_must_fit() {
        assert_eq!(positive_seconds(2.5), Some(Duration::from_millis(2500)));
        assert_eq!(positive_seconds(0.0), None);
        assert_eq!(positive_seconds(1e20), None);
        assert_eq!(positive_seconds(f64::NAN), None);
    }

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

    #[test]
    fn timestamps_are_rfc3339_utc() {
        let t = now_utc();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.ends_with('Z') && t.as_bytes()[10] == b'T', "{t}");
    }
}

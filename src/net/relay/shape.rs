//! What the relay does to the bytes it carries: a [`Shape`] per direction (delay, jitter,
//! bandwidth) and the [`Faults`] it injects, with the bandwidth parser. Plain values,
//! apart from the relay's sockets and loops that act on them.

use std::time::{Duration, Instant};

/// What the relay does to each direction of every connection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// Added to each direction: half the requested round trip.
    pub one_way: Duration,
    /// Each chunk's delay varies uniformly within ± this (never below zero).
    pub jitter: Duration,
    /// A cap in bytes per second, per direction.
    pub bandwidth: Option<f64>,
    /// Faults to inject; none by default.
    pub faults: Faults,
}

/// Faults the relay injects into the connections it carries.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Faults {
    /// Reset a connection (both sides) once this many bytes have crossed it, both
    /// directions counted; the chunk that would cross the limit is not forwarded.
    pub reset_after: Option<u64>,
    /// The share of new connections refused with a reset, 0 to 1.
    pub refuse: f64,
    /// Accept connections but never open the upstream or answer: a hung proxy.
    pub stall: bool,
    /// Pass a side's EOF on this much later.
    pub slow_close: Duration,
    /// Cut the bandwidth mid-run: this long after the relay starts, every direction of
    /// every connection is capped at this many bytes per second (a link degrading under
    /// a running application).
    pub cut_bandwidth: Option<(Duration, f64)>,
    /// When the relay started (set by the relay itself; the cut counts from it).
    pub started: Option<Instant>,
}

impl Faults {
    pub fn any(&self) -> bool {
        Faults {
            started: None,
            ..*self
        } != Faults::default()
    }

    /// The bandwidth cap at `now`: the cut's once it has struck, else `normal`.
    pub(super) fn bandwidth_at(&self, now: Instant, normal: Option<f64>) -> Option<f64> {
        match (self.cut_bandwidth, self.started) {
            (Some((after, bw)), Some(start)) if now >= start + after => {
                Some(normal.map_or(bw, |n| n.min(bw)))
            }
            _ => normal,
        }
    }
}

impl Shape {
    /// A shape adding `rtt` to the round trip.
    pub fn rtt(rtt: Duration) -> Shape {
        Shape {
            one_way: rtt / 2,
            jitter: Duration::ZERO,
            bandwidth: None,
            faults: Faults::default(),
        }
    }

    pub(super) fn is_passthrough(&self) -> bool {
        self.one_way.is_zero()
            && self.jitter.is_zero()
            && self.bandwidth.is_none()
            && self.faults.cut_bandwidth.is_none()
    }
}

/// Parses a bandwidth: `100Mbit`, `1Gbit`, `500kbit` (bits per second) or `10MB`, `512KB`
/// (bytes per second, decimal units). Returns bytes per second.
pub fn parse_bandwidth(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("bandwidth {s:?}: expected a number and a unit, e.g. 100Mbit or 10MB"))?;
    let bytes_per_s = match unit.trim().to_ascii_lowercase().trim_end_matches("/s").trim_end_matches("ps") {
        "bit" => v / 8.0,
        "kbit" => v * 1e3 / 8.0,
        "mbit" => v * 1e6 / 8.0,
        "gbit" => v * 1e9 / 8.0,
        "b" => v,
        "kb" => v * 1e3,
        "mb" => v * 1e6,
        "gb" => v * 1e9,
        _ => {
            return Err(format!(
                "bandwidth {s:?}: unknown unit {unit:?}; use bit, kbit, Mbit, Gbit (bits per second) or B, KB, MB, GB (bytes per second)"
            ))
        }
    };
    if !(bytes_per_s.is_finite() && bytes_per_s > 0.0) {
        return Err(format!("bandwidth {s:?} must be more than zero"));
    }
    Ok(bytes_per_s)
}

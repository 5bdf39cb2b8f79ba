//! The connect report as JSON. Keys are stable (documented in docs/json.md and
//! docs/schema/connect.schema.json); every duration key carries its unit (`_us`).

use serde::Serialize;

use crate::connect::ConnectSettings;
use crate::net::transport::TlsInfo;
use crate::stats::{Summary, TargetSummary};

#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ConnectReport<'a> {
    pub connbench_version: &'static str,
    pub command: &'static str,
    /// How the figures were measured, in words.
    pub method: &'static str,
    pub settings: &'a ConnectSettings,
    pub interrupted: bool,
    pub wall_s: f64,
    pub targets: Vec<TargetJson<'a>>,
}

/// The JSON Schema of `connect --json`, generated from the types above (committed as
/// docs/schema/connect.schema.json; a test keeps the file equal to this).
pub fn schema() -> serde_json::Value {
    crate::units::output_schema::<ConnectReport<'static>>()
}

/// The method statement printed with every connect report.
pub const METHOD: &str = "Connections are opened one after another, targets interleaved with a rotating start. \
Each phase is timed on the wire with CLOCK_MONOTONIC from the client's first byte of the phase to the message that ends it; \
the phases add up to the total. round_trips are counted on the socket (a read that follows a write), except TCP's handshake, which the kernel completes out of the socket's sight: its one round trip is assumed, not counted; a server that speaks first (MySQL's greeting) answers the connect, a round trip. \
Warm-up connections are reported apart and not counted. Percentiles are nearest-rank over all samples.";

#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct TargetJson<'a> {
    pub name: &'a str,
    pub conninfo: &'a str,
    pub transport: &'a str,
    pub description: Option<&'a str>,
    pub server_version: Option<&'a str>,
    pub tls: Option<&'a TlsInfo>,
    pub samples: usize,
    pub failures: u64,
    pub failures_by_kind: Vec<FailureJson<'a>>,
    pub gave_up: Option<&'a str>,
    pub phases: Vec<PhaseJson>,
    pub total: Option<PhaseJson>,
    pub relative_to_first: Option<f64>,
    pub warmup: Vec<WarmupJson>,
    pub bytes_sent_per_connect: f64,
    pub bytes_received_per_connect: f64,
    /// Present only with `--predict-rtt`.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub predictions: &'a [crate::stats::model::Prediction],
}

#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct FailureJson<'a> {
    pub kind: &'a str,
    pub count: u64,
    pub example: &'a str,
}

#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct PhaseJson {
    pub name: &'static str,
    pub round_trips: u32,
    pub n: usize,
    pub mean_us: f64,
    pub stddev_us: f64,
    pub min_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct WarmupJson {
    pub total_us: f64,
    pub phases: Vec<WarmupPhaseJson>,
}

#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct WarmupPhaseJson {
    pub name: &'static str,
    pub us: f64,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

fn phase_json(name: &'static str, round_trips: u32, s: &Summary) -> PhaseJson {
    PhaseJson {
        name,
        round_trips,
        n: s.n,
        mean_us: s.mean_ns / 1e3,
        stddev_us: s.stddev_ns / 1e3,
        min_us: us(s.min_ns),
        p50_us: us(s.p50_ns),
        p90_us: us(s.p90_ns),
        p99_us: us(s.p99_ns),
        max_us: us(s.max_ns),
    }
}

pub fn connect_report<'a>(
    settings: &'a ConnectSettings,
    targets: &'a [TargetSummary],
    interrupted: bool,
    wall_s: f64,
) -> ConnectReport<'a> {
    ConnectReport {
        connbench_version: env!("CARGO_PKG_VERSION"),
        command: "connect",
        method: METHOD,
        settings,
        interrupted,
        wall_s,
        targets: targets
            .iter()
            .map(|t| TargetJson {
                name: &t.name,
                conninfo: &t.conninfo,
                transport: t.transport,
                description: t.description.as_deref(),
                server_version: t.server_version.as_deref(),
                tls: t.tls.as_ref(),
                samples: t.samples,
                failures: t.failures,
                failures_by_kind: t
                    .failures_by_kind
                    .iter()
                    .map(|(k, f)| FailureJson {
                        kind: k,
                        count: f.count,
                        example: &f.example,
                    })
                    .collect(),
                gave_up: t.gave_up.as_deref(),
                phases: t
                    .phases
                    .iter()
                    .map(|p| phase_json(p.phase.as_str(), p.round_trips, &p.time))
                    .collect(),
                total: t
                    .total
                    .as_ref()
                    .map(|tt| phase_json("total", tt.round_trips, &tt.time)),
                relative_to_first: t.relative_to_first,
                warmup: t
                    .warmup
                    .iter()
                    .map(|w| WarmupJson {
                        total_us: us(w.total_ns),
                        phases: w
                            .phases
                            .iter()
                            .map(|(p, ns)| WarmupPhaseJson {
                                name: p.as_str(),
                                us: us(*ns),
                            })
                            .collect(),
                    })
                    .collect(),
                bytes_sent_per_connect: t.bytes_sent_per_connect,
                bytes_received_per_connect: t.bytes_received_per_connect,
                predictions: &t.predictions,
            })
            .collect(),
    }
}

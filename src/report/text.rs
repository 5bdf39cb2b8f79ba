//! The connect report for the terminal: one phase table per target, then a summary of
//! totals relative to the first target. Fits 80 columns; no colour is used.

use std::fmt::Write;

use super::{format_bytes, format_ns};
use crate::connect::ConnectSettings;
use crate::stats::{Summary, TargetSummary};

/// Renders the whole connect report.
pub fn connect_report(settings: &ConnectSettings, targets: &[TargetSummary], interrupted: bool) -> String {
    let mut out = String::new();
    let query = match &settings.query {
        Some(q) => format!(", then {q:?} as the query phase"),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "connbench connect: {} connections per target after {} warm-up{}, targets interleaved{query}",
        settings.samples,
        settings.warmup,
        if settings.warmup == 1 { "" } else { "s" },
    );
    if interrupted {
        let _ = writeln!(
            out,
            "interrupted: the figures below cover the connections made before Ctrl-C"
        );
    }
    for t in targets {
        out.push('\n');
        target_block(&mut out, t);
    }
    if targets.len() > 1 {
        out.push('\n');
        summary_block(&mut out, targets);
    }
    let _ = writeln!(
        out,
        "\nphases are timed on the wire and add up to total; rt = network round trips counted on the socket,\nexcept TCP's handshake: the kernel completes it out of the socket's sight, so its 1 is assumed;\na server that speaks first (MySQL) answers the connect, so its greeting is one"
    );
    out
}

fn target_block(out: &mut String, t: &TargetSummary) {
    let _ = writeln!(out, "{}  {}", t.name, t.conninfo);
    let mut about = Vec::new();
    if let Some(d) = &t.description {
        about.push(d.clone());
    }
    if let Some(v) = &t.server_version {
        about.push(format!("server {v}"));
    }
    if let Some(tls) = &t.tls {
        about.push(format!("{} {}", tls.version, tls.cipher));
    }
    if !about.is_empty() {
        let _ = writeln!(out, "  {}", about.join(" · "));
    }
    if let Some(total) = &t.total {
        let _ = writeln!(
            out,
            "  {:<9}{:>3}  {:<21}{:>9}  {:>9}  {:>9}  {:>9}",
            "phase", "rt", "mean ± sd", "p50", "p90", "p99", "max"
        );
        for p in &t.phases {
            row(out, p.phase.as_str(), p.round_trips, &p.time);
        }
        row(out, "total", total.round_trips, &total.time);
    }
    if let Some(cold) = t.warmup.first() {
        let _ = writeln!(
            out,
            "  first connection of this run (warm-up, not counted): {}",
            format_ns(cold.total_ns as f64)
        );
    }
    let _ = write!(out, "  {} samples, {} failures", t.samples, t.failures);
    if t.samples > 0 {
        let _ = write!(
            out,
            "; {} sent, {} received per connection",
            format_bytes(t.bytes_sent_per_connect),
            format_bytes(t.bytes_received_per_connect)
        );
    }
    out.push('\n');
    for (kind, f) in &t.failures_by_kind {
        let _ = writeln!(out, "  failed {}x ({kind}): {}", f.count, f.example);
    }
    if let Some(why) = &t.gave_up {
        let _ = writeln!(out, "  gave up on this target: {why}");
    }
    for p in &t.predictions {
        let _ = writeln!(
            out,
            "  predicted at {} RTT (p50): {} ({} round trips × RTT + {} local; TCP's handshake is one \
             of them, paid on a network and through connbench's relay alike)",
            format_ns(p.rtt_ms * 1e6),
            format_ns(p.network_p50_ms * 1e6),
            p.round_trips_network,
            format_ns(p.local_p50_ms * 1e6),
        );
    }
}

fn row(out: &mut String, name: &str, rt: u32, s: &Summary) {
    let mean = format!("{} ± {}", format_ns(s.mean_ns), format_ns(s.stddev_ns));
    let _ = writeln!(
        out,
        "  {:<9}{:>3}  {:<21}{:>9}  {:>9}  {:>9}  {:>9}",
        name,
        rt,
        mean,
        format_ns(s.p50_ns as f64),
        format_ns(s.p90_ns as f64),
        format_ns(s.p99_ns as f64),
        format_ns(s.max_ns as f64),
    );
}

fn summary_block(out: &mut String, targets: &[TargetSummary]) {
    let first = &targets[0].name;
    let width = targets.iter().map(|t| t.name.len()).max().unwrap_or(6).max(6);
    let _ = writeln!(out, "total connect time, relative to {first} (mean / mean)");
    let _ = writeln!(
        out,
        "  {:<width$}  {:<21}{:>9}  {:>9}  {:>8}",
        "target", "mean ± sd", "p50", "p99", "vs first"
    );
    for t in targets {
        match &t.total {
            Some(total) => {
                let s = &total.time;
                let rel = t
                    .relative_to_first
                    .map(|r| format!("{r:.2}x"))
                    .unwrap_or_else(|| "-".into());
                let _ = writeln!(
                    out,
                    "  {:<width$}  {:<21}{:>9}  {:>9}  {:>8}",
                    t.name,
                    format!("{} ± {}", format_ns(s.mean_ns), format_ns(s.stddev_ns)),
                    format_ns(s.p50_ns as f64),
                    format_ns(s.p99_ns as f64),
                    rel
                );
            }
            None => {
                let _ = writeln!(out, "  {:<width$}  no successful connection", t.name);
            }
        }
    }
}

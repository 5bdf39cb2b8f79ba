//! `connbench relay`: the user-space hop as a standalone process, until Ctrl-C.

use anyhow::{Context, Result};

use crate::exit::Exit;
use crate::setup::targets::{upstream_addr, upstream_tls};
use crate::setup::{emit, stop_on_signals};

pub async fn run_relay(args: crate::cli::RelayArgs) -> Result<Exit> {
    let listen: crate::net::relay::Addr = args.listen.parse().context("--listen")?;
    let upstream = upstream_addr(&args.upstream)?;
    let shape = crate::net::relay::Shape {
        one_way: args.rtt / 2,
        jitter: args.jitter,
        bandwidth: args.bandwidth,
        faults: crate::net::relay::Faults {
            reset_after: args.reset_after,
            refuse: args.refuse,
            stall: args.stall,
            slow_close: args.slow_close,
            cut_bandwidth: args.cut_bandwidth,
            started: None,
        },
    };
    let tls = upstream_tls(&upstream, args.upstream_tls)?;
    let r = crate::net::relay::Relay::start_with(&listen, &upstream, shape, tls)?;
    eprintln!(
        "relay: {} -> {}, adding {} each way (round trip +{}){}{}{}; Ctrl-C stops",
        r.addr(),
        upstream,
        crate::report::format_duration(shape.one_way),
        crate::report::format_duration(args.rtt),
        if args.jitter.is_zero() {
            String::new()
        } else {
            format!(", jitter ±{}", crate::report::format_duration(args.jitter))
        },
        match args.bandwidth {
            Some(b) => format!(", capped at {:.1} Mbit/s", b * 8.0 / 1e6),
            None => String::new(),
        },
        faults_said(&shape.faults)
    );
    let mut stop = stop_on_signals();
    let _ = stop.wait_for(|s| *s).await;
    let st = &r.stats;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    let by_faults = if shape.faults.any() {
        format!(
            ", {} refused and {} reset by faults",
            load(&st.refused),
            load(&st.reset)
        )
    } else {
        String::new()
    };
    emit(&format!(
        "relay: {} connection{} ({} refused upstream{by_faults}), {} up, {} down\n",
        load(&st.connections),
        if load(&st.connections) == 1 { "" } else { "s" },
        load(&st.upstream_failures),
        crate::report::format_bytes(load(&st.bytes_up) as f64),
        crate::report::format_bytes(load(&st.bytes_down) as f64)
    ));
    drop(r);
    Ok(Exit::Interrupted)
}

/// The faults in force, for the relay's first line ("" when none).
fn faults_said(f: &crate::net::relay::Faults) -> String {
    let mut parts = Vec::new();
    if let Some(n) = f.reset_after {
        parts.push(format!("reset after {n} bytes"));
    }
    if f.refuse > 0.0 {
        parts.push(format!("refuse {:.0}% of connections", f.refuse * 100.0));
    }
    if f.stall {
        parts.push("stall every connection".to_string());
    }
    if !f.slow_close.is_zero() {
        parts.push(format!(
            "close {} late",
            crate::report::format_duration(f.slow_close)
        ));
    }
    if let Some((after, bw)) = f.cut_bandwidth {
        parts.push(format!(
            "bandwidth cut to {} after {}",
            crate::report::format_bytes(bw) + "/s",
            crate::report::format_duration(after)
        ));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("; faults: {}", parts.join(", "))
    }
}

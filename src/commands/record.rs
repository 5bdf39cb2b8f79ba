//! `connbench record`: the recorder in front of an application's database until Ctrl-C,
//! then what the trace holds; or, with `--from-pcap`, a capture read into a trace.

use anyhow::Result;

use crate::cli::record::{EngineArg, RecordArgs};
use crate::exit::Exit;
use crate::recorder::{Recorder, Settings};
use crate::setup::targets::{sandbox_target, upstream_addr, upstream_tls};
use crate::setup::{emit, stop_on_signals};
use crate::targets::Engine;
use connbench_trace::DecodeOptions;

pub async fn run_record(args: RecordArgs) -> Result<Exit> {
    if let Some(file) = &args.from_pcap {
        return from_pcap(&args, file);
    }
    let settings = settings(&args)?;
    let out = settings.out.clone();
    let (upstream, engine) = (settings.upstream.to_string(), settings.engine);
    let stop = stop_on_signals();
    let r = Recorder::start(settings, stop.clone()).await?;
    eprintln!(
        "record: {} -> {upstream} ({}), writing {}; point the application at {}; Ctrl-C ends the recording",
        r.addr,
        match engine {
            Engine::Postgres => "PostgreSQL's protocol",
            Engine::Mysql => "MySQL's protocol",
        },
        out.display(),
        r.addr
    );
    let counts = r.counts.clone();
    let done = r.finish().await?;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    let mut notes = Vec::new();
    for (n, what) in [
        (load(&counts.upstream_failures), "could not reach the upstream"),
        (
            load(&counts.tls_refused),
            "asked for TLS and went on in plaintext",
        ),
        (
            load(&counts.tls_insisted),
            "required TLS and closed after the recorder's N: the recorder reads plaintext \
             only; connect the application to it with sslmode=prefer or disable, and record \
             with --upstream-tls for a server that requires TLS",
        ),
        (
            load(&counts.undecoded),
            "were not decoded to their end (see session_close's decode_error)",
        ),
    ] {
        if n > 0 {
            notes.push(format!("{n} session(s) {what}"));
        }
    }
    emit(&format!(
        "record: {} session(s), {} request(s) in {:.1} s; {} up, {} down; {} events ({} uncompressed) in {}{}\n",
        load(&counts.sessions),
        load(&counts.requests),
        done.duration.as_secs_f64(),
        crate::units::format_bytes(load(&counts.bytes_up) as f64),
        crate::units::format_bytes(load(&counts.bytes_down) as f64),
        done.events,
        crate::units::format_bytes(done.trace_bytes as f64),
        out.display(),
        if notes.is_empty() { String::new() } else { format!("\n  {}", notes.join("\n  ")) }
    ));
    Ok(Exit::Interrupted)
}

/// `--from-pcap FILE`: the capture read into the trace, then what it holds, its gaps
/// and the sessions it could not decode from their start.
fn from_pcap(args: &RecordArgs, file: &std::path::Path) -> Result<Exit> {
    let engine = engine_flag(args.engine);
    let c = crate::capture::from_pcap(&crate::capture::Settings {
        file: file.to_path_buf(),
        out: args.out.clone(),
        engine,
        port: args.port,
        decode: DecodeOptions {
            redact_values: args.redact_values,
            ..DecodeOptions::default()
        },
    })?;
    let t = &c.tally;
    let mut notes = Vec::new();
    for (n, what) in [
        (t.gaps, "gap(s): bytes missing from the capture; each such session is closed in the trace as undecodable from its gap on (decode_error), the others are whole"),
        (c.cut, "packet(s) cut short by the snap length (capture with tcpdump -s 0): their bytes count as missing"),
        (t.joined - t.joined_undecoded, "session(s) already open when the capture began: decoded from their first whole message, their startup unknown (session_open.joined)"),
        (t.joined_undecoded, match engine {
            Engine::Postgres => "session(s) already open when the capture began showed no whole client message to start from and are not in the trace",
            Engine::Mysql => "session(s) already open when the capture began are not in the trace: MySQL's decoder needs the connection's handshake (start the capture before the application connects)",
        }),
        (t.undecoded, "session(s) were not decoded to their end (see session_close's decode_error)"),
    ] {
        if n > 0 {
            notes.push(format!("{n} {what}"));
        }
    }
    notes.extend(t.gap_notes.iter().map(|g| format!("  {g}")));
    emit(&format!(
        "record: {} ({} packet(s) over {:.1} s), server port {}{}: {} session(s), {} request(s); {} up, {} down; {} events ({} uncompressed) in {}{}\n",
        file.display(),
        c.packets,
        c.duration.as_secs_f64(),
        c.port,
        if c.port_guessed { " (guessed; --port sets it)" } else { "" },
        t.sessions,
        t.requests,
        crate::units::format_bytes(t.bytes_up as f64),
        crate::units::format_bytes(t.bytes_down as f64),
        c.events,
        crate::units::format_bytes(c.trace_bytes as f64),
        args.out.display(),
        if notes.is_empty() { String::new() } else { format!("\n  {}", notes.join("\n  ")) }
    ));
    Ok(Exit::Success)
}

fn engine_flag(e: EngineArg) -> Engine {
    match e {
        EngineArg::Postgres => Engine::Postgres,
        EngineArg::Mysql => Engine::Mysql,
    }
}

/// The validated settings: addresses parsed, the engine from the flag or the sandbox
/// target named as the upstream.
fn settings(args: &RecordArgs) -> Result<Settings> {
    // clap requires both without --from-pcap.
    let (Some(listen), Some(upstream)) = (&args.listen, &args.upstream) else {
        anyhow::bail!("record: --listen and --upstream, or --from-pcap FILE");
    };
    if let Some(p) = args.port {
        anyhow::bail!("--port {p}: the server's port in a capture, for --from-pcap only (the recorder's upstream is --upstream)");
    }
    let listen: crate::net::relay::Addr = listen
        .parse()
        .map_err(|e| anyhow::anyhow!("--listen {listen:?}: {e}"))?;
    let (upstream, named) = (upstream_addr(upstream)?, upstream);
    let engine = match sandbox_target(named)? {
        Some(t) => t.engine,
        None => engine_flag(args.engine),
    };
    if args.upstream_tls && engine == Engine::Mysql {
        anyhow::bail!("--upstream-tls: the recorder opens TLS to PostgreSQL only; record a MySQL application with the server's TLS optional");
    }
    let upstream_tls = upstream_tls(&upstream, args.upstream_tls)?;
    Ok(Settings {
        listen,
        upstream,
        upstream_tls,
        engine,
        out: args.out.clone(),
        decode: DecodeOptions {
            redact_values: args.redact_values,
            ..DecodeOptions::default()
        },
    })
}

//! `connbench record`: the recorder in front of an application's database until Ctrl-C,
//! then what the trace holds.

use anyhow::Result;

use crate::cli::record::{EngineArg, RecordArgs};
use crate::exit::Exit;
use crate::recorder::{Recorder, Settings};
use crate::setup::targets::{sandbox_target, upstream_addr, upstream_tls};
use crate::setup::{emit, stop_on_signals};
use crate::targets::Engine;
use connbench_trace::DecodeOptions;

pub async fn run_record(args: RecordArgs) -> Result<Exit> {
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

/// The validated settings: addresses parsed, the engine from the flag or the sandbox
/// target named as the upstream.
fn settings(args: &RecordArgs) -> Result<Settings> {
    let listen: crate::net::relay::Addr = args
        .listen
        .parse()
        .map_err(|e| anyhow::anyhow!("--listen {:?}: {e}", args.listen))?;
    let upstream = upstream_addr(&args.upstream)?;
    let engine = match sandbox_target(&args.upstream)? {
        Some(t) => t.engine,
        None => match args.engine {
            EngineArg::Postgres => Engine::Postgres,
            EngineArg::Mysql => Engine::Mysql,
        },
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

//! `connbench record`: the recorder in front of an application's database until Ctrl-C,
//! then what the trace holds; or, with `--from-pcap`, a capture read into a trace.

use anyhow::Result;

use crate::cli::record::{EngineArg, RecordArgs};
use crate::exit::Exit;
use crate::recorder::tls::ListenTls;
use crate::recorder::{Counts, Recorder, Settings};
use crate::setup::targets::{onward_tls, sandbox_target, upstream_addr, upstream_tls};
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
    let names = settings.listen_tls.as_ref().map(|t| t.names.join(", "));
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
    // Not eprintln!: a caller that read the first line and closed the pipe (a test's
    // spawn, `| head -1`) must not take the recording down with a panic on EPIPE.
    let tls_line = match (&r.ca_file, &names, &args.listen_cert) {
        (Some(ca), Some(names), _) => Some(format!(
            "record: --listen-tls: the recorder's certificate names {names}, signed by a CA of its own written \
             to {}: an application that verifies trusts that file (sslrootcert=, mariadb --ssl-ca=)",
            ca.display()
        )),
        (_, _, Some(cert)) => Some(format!("record: --listen-tls with {}", cert.display())),
        _ => None,
    };
    if let Some(line) = tls_line {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "{line}");
    }
    let counts = r.counts.clone();
    let ca_file = r.ca_file.clone();
    let done = r.finish().await?;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    let notes = notes(&counts, ca_file.as_deref());
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

/// What the summary says of the sessions besides their count: TLS answered or
/// terminated, upstreams not reached, sessions not decoded to their end.
fn notes(counts: &Counts, ca_file: Option<&std::path::Path>) -> Vec<String> {
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    let trust = match ca_file {
        Some(ca) => format!("an application that verifies must trust {}", ca.display()),
        None => "an application that verifies must trust --listen-cert's issuer".to_string(),
    };
    let failed = format!("failed the TLS handshake with the recorder ({trust})");
    let mut notes = Vec::new();
    for (n, what) in [
        (load(&counts.upstream_failures), "could not reach the upstream"),
        (
            load(&counts.tls_refused),
            "asked for TLS and went on in plaintext",
        ),
        (
            load(&counts.tls_insisted),
            "required TLS and closed after the recorder's N: record with --listen-tls (the recorder \
             terminates the application's TLS with a certificate of its own), or connect the \
             application with sslmode=prefer or disable",
        ),
        (
            load(&counts.tls_accepted),
            "used TLS, terminated by the recorder (--listen-tls) and decoded inside",
        ),
        (load(&counts.tls_failed), failed.as_str()),
        (
            load(&counts.tls_onward_failed),
            "asked for TLS, and the server's TLS handshake with the recorder failed",
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
    notes
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
    let listen_tls = listen_tls(args, &listen)?;
    let onward_tls = match (&listen_tls, engine) {
        (Some(_), Engine::Mysql) => Some(onward_tls(&upstream)?),
        _ => None,
    };
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
        listen_tls,
        onward_tls,
    })
}

/// `--listen-tls`, `--listen-cert`, `--listen-key`: the recorder's TLS identity toward
/// the application, generated for the --listen host or read from the user's files.
fn listen_tls(args: &RecordArgs, listen: &crate::net::relay::Addr) -> Result<Option<ListenTls>> {
    let on = args.listen_tls || args.listen_cert.is_some() || args.listen_key.is_some();
    if !on {
        return Ok(None);
    }
    let host = match listen {
        crate::net::relay::Addr::Tcp(a) => a.rsplit_once(':').map_or(a.as_str(), |(h, _)| h),
        crate::net::relay::Addr::Unix(p) => anyhow::bail!(
            "--listen-tls with --listen {}: a Unix socket carries no TLS (libpq never asks for it there, nor \
             do MySQL's clients); listen on host:port for the application's TLS",
            p.display()
        ),
    };
    match (&args.listen_cert, &args.listen_key) {
        (None, None) => ListenTls::generate(host).map(Some),
        (Some(c), Some(k)) => ListenTls::from_files(c, k).map(Some),
        (Some(c), None) => anyhow::bail!(
            "--listen-cert {} needs --listen-key, the certificate's private key (PEM): give both, or \
             neither to let the recorder generate its own",
            c.display()
        ),
        (None, Some(k)) => anyhow::bail!(
            "--listen-key {} needs --listen-cert, the certificate it goes with (PEM): give both, or neither \
             to let the recorder generate its own",
            k.display()
        ),
    }
}

//! `connbench record --from-pcap`: a packet capture (tcpdump's pcap or pcapng) read as
//! the recorder would have recorded it: the same decoders, fed the same way, writing the
//! same trace, but with the capture's own timestamps, so request times are the wire's at
//! the point of capture. Stage 5, beside the recorder, whose decoders and writer (the
//! trace crate's) it shares; it has no sockets and runs on the caller's thread.
//!
//! Two passes over the file, each in bounded memory: [`port`] finds what the capture
//! holds and the server's port (checked or guessed) before anything is written; then
//! [`file`] reads each TCP segment, [`tcp`] puts each direction back in order and
//! [`sessions`] feeds the decoders and writes the events. A gap (a segment the capture
//! lacks) is said in the trace and in [`Captured`], never guessed over.

mod file;
mod port;
mod sessions;
mod tcp;

use std::path::PathBuf;

use anyhow::{Context, Result};
use connbench_trace::{CaptureSource, Compression, DecodeOptions, Header, RecordOptions, TraceWriter};

pub use sessions::Tally;

use crate::targets::Engine;

/// What to read and where to write it.
#[derive(Debug, Clone)]
pub struct Settings {
    pub file: PathBuf,
    pub out: PathBuf,
    pub engine: Engine,
    /// The server's TCP port; guessed when `None`.
    pub port: Option<u16>,
    pub decode: DecodeOptions,
}

/// A capture read into a trace.
#[derive(Debug)]
pub struct Captured {
    pub port: u16,
    pub port_guessed: bool,
    pub packets: u64,
    /// Packets cut short by the capture's snap length (their bytes count as missing).
    pub cut: u64,
    /// The capture's span, first packet to last.
    pub duration: std::time::Duration,
    pub tally: Tally,
    /// Events written, the header included, and their uncompressed bytes.
    pub events: u64,
    pub trace_bytes: u64,
}

/// Reads `s.file` into the trace `s.out` (created new, never overwritten).
pub fn from_pcap(s: &Settings) -> Result<Captured> {
    let (info, port) = port::scan(&s.file, s.engine, s.port)?;
    let first = info.first_ns.unwrap_or(0);
    let mut header = Header::new(
        s.engine,
        format!("connbench {}", crate::exit::VERSION),
        RecordOptions {
            redact_values: s.decode.redact_values,
            listen: None,
            upstream: None,
            upstream_tls: false,
            listen_tls: false,
        },
    );
    header.start_time =
        humantime::format_rfc3339_micros(std::time::UNIX_EPOCH + std::time::Duration::from_nanos(first))
            .to_string();
    header.capture = Some(CaptureSource {
        file: s.file.display().to_string(),
        server_port: port,
        link: info.link.clone(),
        interface: info.interface.clone(),
    });
    let out = s.out.display();
    let file = std::fs::File::options()
        .write(true)
        .create_new(true)
        .open(&s.out)
        .with_context(|| {
            format!("--out {out}: cannot create the trace (an existing file is never overwritten)")
        })?;
    let writer = TraceWriter::new(file, Compression::from_path(&s.out), &header)
        .with_context(|| format!("--out {out}: writing the trace's header"))?;
    let mut sessions = sessions::Sessions::new((s.engine, s.decode), port, first, writer);
    file::segments(&s.file, |seg| {
        sessions
            .segment(seg)
            .with_context(|| format!("--out {out}: writing the trace"))
    })?;
    let (file, tally, events, trace_bytes) = sessions
        .finish(info.last_ns.saturating_sub(first))
        .and_then(|(f, t, e, b)| f.sync_all().map(|_| (f, t, e, b)))
        .with_context(|| format!("--out {out}: finishing the trace"))?;
    drop(file);
    Ok(Captured {
        port,
        port_guessed: s.port.is_none(),
        packets: info.packets,
        cut: info.cut,
        duration: std::time::Duration::from_nanos(info.last_ns.saturating_sub(first)),
        tally,
        events,
        trace_bytes,
    })
}

//! Writing a trace as it is recorded: one JSON object per line, optionally gzip.
//!
//! Memory stays flat however long the recording: each event is serialised into one
//! reused line buffer and handed to a 64 KiB `BufWriter` (under the gzip encoder when
//! compressing), so nothing accumulates. What a crash can lose is bounded by the flush
//! policy: whenever an event is written and more than [`FLUSH_EVERY`] has passed since
//! the last flush, the buffers are pushed to the operating system (for gzip a sync
//! flush, so everything written before it decompresses even if the file is cut after
//! it); a recorder that may sit idle calls [`TraceWriter::flush_if_due`] on a timer too.
//! A killed recorder so loses at most the last second of events, and the reader keeps
//! everything before a cut line. [`TraceWriter::finish`] ends the gzip stream and syncs
//! the file.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use flate2::write::GzEncoder;

use super::event::{Event, Header};

/// The longest a written event waits in the recorder's buffers.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);
const BUFFER: usize = 64 * 1024;

/// Plain JSON Lines, or gzip-compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
}

impl Compression {
    /// Gzip when the file name ends in `.gz`.
    pub fn from_path(path: &Path) -> Compression {
        match path.extension() {
            Some(e) if e == "gz" => Compression::Gzip,
            _ => Compression::None,
        }
    }
}

/// Deflate's level 3, not its default 6: the recorder compresses on a thread beside the
/// application's traffic, and on 2 cores level 6 added about 8 µs to each request of
/// pgbench -S -c 1 through `connbench record` (+45 µs over direct against the relay's
/// +35; level 3 +37.5, level 1 +36.5) for a trace 13% smaller than level 3's (level 1:
/// 35% larger than 6's).
const GZIP_LEVEL: u32 = 3;

enum Sink<W: Write> {
    Plain(BufWriter<W>),
    Gzip(GzEncoder<BufWriter<W>>),
}

/// A trace being written.
pub struct TraceWriter<W: Write> {
    sink: Sink<W>,
    line: Vec<u8>,
    last_flush: Instant,
    events: u64,
    bytes: u64,
}

impl TraceWriter<File> {
    /// Creates `path` (compressed if it ends in `.gz`) and writes the header. An existing
    /// file is not overwritten: a trace is a recording that cannot be made again.
    pub fn create(path: &Path, header: &Header) -> io::Result<TraceWriter<File>> {
        let file = File::options().write(true).create_new(true).open(path)?;
        TraceWriter::new(file, Compression::from_path(path), header)
    }
}

impl<W: Write> TraceWriter<W> {
    /// Starts a trace on `w` with its header line.
    pub fn new(w: W, compression: Compression, header: &Header) -> io::Result<TraceWriter<W>> {
        let buffered = BufWriter::with_capacity(BUFFER, w);
        let sink = match compression {
            Compression::None => Sink::Plain(buffered),
            Compression::Gzip => Sink::Gzip(GzEncoder::new(buffered, flate2::Compression::new(GZIP_LEVEL))),
        };
        let mut t = TraceWriter {
            sink,
            line: Vec::with_capacity(1024),
            last_flush: Instant::now(),
            events: 0,
            bytes: 0,
        };
        t.write(&Event::Header(header.clone()))?;
        t.flush()?;
        Ok(t)
    }

    /// Appends one event, and flushes if the last flush is [`FLUSH_EVERY`] old.
    pub fn write(&mut self, event: &Event) -> io::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, event).map_err(io::Error::other)?;
        self.line.push(b'\n');
        match &mut self.sink {
            Sink::Plain(w) => w.write_all(&self.line)?,
            Sink::Gzip(w) => w.write_all(&self.line)?,
        }
        self.events += 1;
        self.bytes += self.line.len() as u64;
        self.flush_if_due(Instant::now())
    }

    /// Flushes when the last flush is [`FLUSH_EVERY`] old at `now`.
    pub fn flush_if_due(&mut self, now: Instant) -> io::Result<()> {
        if now.saturating_duration_since(self.last_flush) >= FLUSH_EVERY {
            self.flush()?;
        }
        Ok(())
    }

    /// Pushes everything written so far to the operating system.
    pub fn flush(&mut self) -> io::Result<()> {
        match &mut self.sink {
            Sink::Plain(w) => w.flush()?,
            Sink::Gzip(w) => w.flush()?,
        }
        self.last_flush = Instant::now();
        Ok(())
    }

    /// Events written, the header included.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Uncompressed bytes written.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Ends the trace (the gzip trailer) and returns the underlying writer, flushed.
    pub fn finish(self) -> io::Result<W> {
        let buffered = match self.sink {
            Sink::Plain(w) => w,
            Sink::Gzip(w) => w.finish()?,
        };
        buffered.into_inner().map_err(|e| e.into_error())
    }
}

impl TraceWriter<File> {
    /// [`TraceWriter::finish`], then the file synced to disk.
    pub fn finish_file(self) -> io::Result<()> {
        self.finish()?.sync_all()
    }
}

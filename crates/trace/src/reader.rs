//! Reading a trace back, one event at a time, in bounded memory: plain or gzip (told by
//! the file's first bytes, not its name), line by line, each line capped.
//!
//! The header is read and checked when the reader opens: the format's name, and a
//! version no newer than this connbench reads. Then the reader is an iterator of events
//! that yields everything it can read and, at the first thing it cannot, one error that
//! names the line and what is wrong, and stops. So a caller keeps what was recorded
//! before the damage, and can tell a recording cut short ([`ReadError::Truncated`]:
//! killed mid-line, or a gzip stream without its end) from a damaged or foreign file.
//!
//! Within a version the set of event types is closed: a type this version does not know
//! is an error, not something to skip, because a writer that adds a type raises the
//! version (docs/trace.md, "Versions"). New keys in a known event are ignored.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use flate2::read::MultiGzDecoder;

use super::event::{Event, Header, EVENT_TYPES, FORMAT, VERSION};

/// The longest line read: far above any event the decoders write (their messages are
/// capped at 1 MiB), and a bound on what a foreign file can make the reader hold.
pub const MAX_LINE: usize = 64 << 20;

/// Why a trace, or part of it, could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot open the trace: {0}")]
    Open(#[source] io::Error),
    #[error("cannot read the trace at line {line}: {source}")]
    Io {
        line: u64,
        #[source]
        source: io::Error,
    },
    #[error("not a connbench trace: {0}")]
    NotATrace(String),
    #[error("trace version {version} is newer than this connbench reads ({supported}); upgrade connbench")]
    Newer { version: u64, supported: u32 },
    #[error(
        "the trace is cut short at line {line} ({detail}); the {events} events before it \
         ({bytes} bytes) were read: the recording was probably stopped without finishing"
    )]
    Truncated {
        line: u64,
        events: u64,
        bytes: u64,
        detail: String,
    },
    #[error("line {line} is not valid JSON: {message}")]
    BadJson { line: u64, message: String },
    #[error("line {line}: a {event_type} event that version {version} cannot read: {message}")]
    BadEvent {
        line: u64,
        event_type: String,
        version: u32,
        message: String,
    },
    #[error(
        "line {line}: unknown event type {event_type:?} (version {version} has {}); \
         the {events} events before it were read",
        EVENT_TYPES.join(", ")
    )]
    UnknownType {
        line: u64,
        event_type: String,
        version: u32,
        events: u64,
    },
    #[error("line {line} is longer than {limit} bytes: not a trace connbench wrote")]
    LineTooLong { line: u64, limit: usize },
}

impl ReadError {
    /// The recording was cut short (killed mid-write): what came before is whole.
    pub fn is_truncation(&self) -> bool {
        matches!(self, ReadError::Truncated { .. })
    }
}

/// A trace being read.
pub struct TraceReader {
    input: Box<dyn BufRead>,
    compressed: bool,
    header: Header,
    line: u64,
    events: u64,
    bytes: u64,
    buf: Vec<u8>,
    done: bool,
}

impl TraceReader {
    /// Opens `path` and reads its header.
    pub fn open(path: &Path) -> Result<TraceReader, ReadError> {
        TraceReader::new(File::open(path).map_err(ReadError::Open)?)
    }

    /// Reads a trace from `r` (plain or gzip), starting with its header.
    pub fn new(r: impl Read + 'static) -> Result<TraceReader, ReadError> {
        let mut raw = BufReader::with_capacity(64 * 1024, r);
        let magic = raw.fill_buf().map_err(ReadError::Open)?;
        let compressed = magic.starts_with(&[0x1f, 0x8b]);
        let input: Box<dyn BufRead> = if compressed {
            Box::new(BufReader::with_capacity(64 * 1024, MultiGzDecoder::new(raw)))
        } else {
            Box::new(raw)
        };
        let mut t = TraceReader {
            input,
            compressed,
            header: Header::new(crate::Engine::Postgres, String::new(), Default::default()),
            line: 0,
            events: 0,
            bytes: 0,
            buf: Vec::new(),
            done: false,
        };
        t.header = t.read_header()?;
        Ok(t)
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Lines read so far (the header is line 1).
    pub fn lines_read(&self) -> u64 {
        self.line
    }

    /// Uncompressed bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes
    }

    fn read_header(&mut self) -> Result<Header, ReadError> {
        let Some(terminated) = self.read_line()? else {
            return Err(ReadError::NotATrace("the file is empty".into()));
        };
        let v: serde_json::Value = serde_json::from_slice(&self.buf).map_err(|e| {
            if terminated {
                ReadError::NotATrace(format!("line 1 is not JSON ({e})"))
            } else {
                self.truncated("the header line is incomplete".into())
            }
        })?;
        if v.get("type").and_then(|t| t.as_str()) != Some("header")
            || v.get("format").and_then(|f| f.as_str()) != Some(FORMAT)
        {
            return Err(ReadError::NotATrace(format!(
                "line 1 is not a header with \"format\": \"{FORMAT}\""
            )));
        }
        let version = v.get("version").and_then(|n| n.as_u64()).unwrap_or(0);
        if version > VERSION as u64 {
            return Err(ReadError::Newer {
                version,
                supported: VERSION,
            });
        }
        if version == 0 {
            return Err(ReadError::NotATrace("the header has no version".into()));
        }
        match serde_json::from_value::<Event>(v) {
            Ok(Event::Header(h)) => Ok(h),
            Ok(_) => Err(ReadError::NotATrace("line 1 is not a header".into())),
            Err(e) => Err(ReadError::BadEvent {
                line: 1,
                event_type: "header".into(),
                version: version as u32,
                message: e.to_string(),
            }),
        }
    }

    /// The next line into `buf` (newline removed): whether it ended with a newline, or
    /// `None` at the end.
    fn read_line(&mut self) -> Result<Option<bool>, ReadError> {
        self.buf.clear();
        let line = self.line + 1;
        let read = (&mut self.input)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut self.buf);
        match read {
            Ok(0) => return Ok(None),
            Ok(n) if n > MAX_LINE => {
                return Err(ReadError::LineTooLong {
                    line,
                    limit: MAX_LINE,
                })
            }
            Ok(_) => {}
            // A gzip stream cut before its end (or damaged after a point): what was
            // decompressed before is whole.
            Err(e) if self.compressed => {
                return Err(self.truncated(format!("the compressed stream stops: {e}")));
            }
            Err(source) => return Err(ReadError::Io { line, source }),
        }
        self.line = line;
        self.bytes += self.buf.len() as u64;
        let terminated = self.buf.last() == Some(&b'\n');
        if terminated {
            self.buf.pop();
        }
        Ok(Some(terminated))
    }

    fn truncated(&self, detail: String) -> ReadError {
        ReadError::Truncated {
            line: self.line + u64::from(self.buf.is_empty()),
            events: self.events,
            bytes: self.bytes - self.buf.len() as u64,
            detail,
        }
    }

    fn next_event(&mut self) -> Result<Option<Event>, ReadError> {
        loop {
            let Some(terminated) = self.read_line()? else {
                return Ok(None);
            };
            if self.buf.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return match serde_json::from_slice::<Event>(&self.buf) {
                Ok(Event::Header(_)) => Err(ReadError::BadJson {
                    line: self.line,
                    message: "a second header (two traces joined into one file?)".into(),
                }),
                Ok(e) => {
                    self.events += 1;
                    Ok(Some(e))
                }
                Err(_) if !terminated => Err(self.truncated(format!("line {} has no end", self.line))),
                Err(e) => Err(self.classify(e)),
            };
        }
    }

    /// Why a whole line did not read as an event.
    fn classify(&self, e: serde_json::Error) -> ReadError {
        let line = self.line;
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&self.buf) else {
            return ReadError::BadJson {
                line,
                message: e.to_string(),
            };
        };
        match v.get("type").and_then(|t| t.as_str()) {
            Some(t) if !EVENT_TYPES.contains(&t) => ReadError::UnknownType {
                line,
                event_type: t.to_string(),
                version: self.header.version,
                events: self.events,
            },
            t => ReadError::BadEvent {
                line,
                event_type: t.unwrap_or("untyped").to_string(),
                version: self.header.version,
                message: e.to_string(),
            },
        }
    }
}

impl Iterator for TraceReader {
    type Item = Result<Event, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.next_event() {
            Ok(Some(e)) => Some(Ok(e)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::io::Write;
    use std::rc::Rc;
    use std::time::{Duration, Instant};

    use super::super::event::{ClosedBy, RecordOptions, SessionClose};
    use super::super::writer::{Compression, TraceWriter};
    use super::*;
    use crate::Engine;

    /// A writer whose bytes the test can look at while the trace is still open.
    #[derive(Clone, Default)]
    struct Shared(Rc<RefCell<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn close(session: u64) -> Event {
        Event::SessionClose(SessionClose {
            session,
            at_ns: 5,
            by: ClosedBy::Client,
            requests: 0,
            bytes_to_server: 1,
            bytes_to_client: 2,
            error: None,
            decode_error: None,
            undecoded_bytes: 0,
        })
    }

    fn header() -> Header {
        Header::new(
            Engine::Postgres,
            "connbench test".into(),
            RecordOptions::default(),
        )
    }

    fn trace(compression: Compression, n: u64) -> Vec<u8> {
        let mut w = TraceWriter::new(Vec::new(), compression, &header()).unwrap();
        for i in 0..n {
            w.write(&close(i)).unwrap();
        }
        w.finish().unwrap()
    }

    fn read_all(bytes: Vec<u8>) -> (Vec<Event>, Option<ReadError>) {
        let r = TraceReader::new(io::Cursor::new(bytes)).unwrap();
        let mut events = Vec::new();
        for e in r {
            match e {
                Ok(e) => events.push(e),
                Err(e) => return (events, Some(e)),
            }
        }
        (events, None)
    }

    #[test]
    fn plain_and_gzip_traces_read_back_whole() {
        for c in [Compression::None, Compression::Gzip] {
            let (events, err) = read_all(trace(c, 1000));
            assert!(err.is_none(), "{c:?}: {err:?}");
            assert_eq!(events.len(), 1000);
            assert_eq!(events[999], close(999));
        }
        assert!(trace(Compression::Gzip, 1000).len() * 5 < trace(Compression::None, 1000).len());
    }

    #[test]
    fn a_cut_recording_keeps_every_whole_event_before_the_cut() {
        let plain = trace(Compression::None, 10);
        let (events, err) = read_all(plain[..plain.len() - 7].to_vec());
        assert_eq!(events.len(), 9);
        let err = err.unwrap();
        assert!(err.is_truncation(), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("cut short at line 11") && msg.contains("the 9 events before it"),
            "{msg}"
        );
        // A gzip stream cut anywhere after its first flush: everything flushed reads.
        let gz = trace(Compression::Gzip, 2000);
        let (events, err) = read_all(gz[..gz.len() * 2 / 3].to_vec());
        assert!(err.unwrap().is_truncation());
        assert!(!events.is_empty());
        assert_eq!(
            events.last(),
            Some(&close(events.len() as u64 - 1)),
            "the last whole event is whole"
        );
    }

    #[test]
    fn the_writer_flushes_within_a_second_so_a_crash_loses_at_most_that() {
        for c in [Compression::None, Compression::Gzip] {
            let sink = Shared::default();
            let mut w = TraceWriter::new(sink.clone(), c, &header()).unwrap();
            let after_header = sink.0.borrow().len();
            w.write(&close(1)).unwrap();
            assert_eq!(
                sink.0.borrow().len(),
                after_header,
                "{c:?}: buffered, not yet due"
            );
            w.flush_if_due(Instant::now() + Duration::from_secs(2)).unwrap();
            // Everything written so far reads back from what reached the sink, with the
            // trace not finished (no gzip trailer): what a killed recorder leaves.
            let (events, err) = read_all(sink.0.borrow().clone());
            assert_eq!(events, [close(1)], "{c:?}");
            assert!(err.is_none_or(|e| e.is_truncation()), "{c:?}");
            drop(w);
        }
    }

    #[test]
    fn foreign_newer_and_damaged_traces_say_which_line_and_why() {
        let msg = |bytes: &[u8]| match TraceReader::new(io::Cursor::new(bytes.to_vec())) {
            Ok(r) => match r.filter_map(Result::err).next() {
                Some(e) => e.to_string(),
                None => "no error".into(),
            },
            Err(e) => e.to_string(),
        };
        assert!(msg(b"").contains("the file is empty"));
        assert!(msg(b"id,name\n1,x\n").contains("not a connbench trace"));
        assert!(msg(b"{\"type\":\"header\",\"format\":\"other\"}\n").contains("not a connbench trace"));
        let newer = br#"{"type":"header","format":"connbench-trace","version":3,"engine":"postgres"}"#;
        assert_eq!(
            msg(newer),
            "trace version 3 is newer than this connbench reads (1); upgrade connbench"
        );
        let mut t = trace(Compression::None, 2);
        t.extend_from_slice(b"{\"type\":\"session_merge\",\"session\":1}\n");
        let m = msg(&t);
        assert!(
            m.starts_with("line 4: unknown event type \"session_merge\""),
            "{m}"
        );
        assert!(m.contains("the 2 events before it were read"), "{m}");
        let mut t = trace(Compression::None, 2);
        t.extend_from_slice(b"{\"type\":\"session_close\",\"session\":\n{}\n");
        assert!(msg(&t).starts_with("line 4 is not valid JSON"), "{}", msg(&t));
        let mut t = trace(Compression::None, 1);
        t.extend_from_slice(b"{\"type\":\"session_close\",\"session\":1}\n");
        let m = msg(&t);
        assert!(
            m.starts_with("line 3: a session_close event that version 1 cannot read: missing field"),
            "{m}"
        );
        let mut t = trace(Compression::None, 1);
        t.extend(trace(Compression::None, 1));
        assert!(msg(&t).contains("a second header"));
    }
}

//! `connbench record`'s engine: a hop between the application and its database that
//! decodes both directions of every connection as it passes (a `trace::Decoder` each)
//! and streams the events to a trace file.
//!
//! Why not the relay (`net::relay`): the relay shapes traffic (delay, jitter, faults)
//! and must not look inside it; the recorder adds no delay and must see every byte in
//! order, answer a PostgreSQL client's TLS request itself (with `N`: a recorder cannot
//! read TLS) and withdraw MySQL's TLS offer from the server's greeting. So its copy loop
//! is its own and small.
//!
//! Out of the application's way: a chunk is passed on first and decoded after, with the
//! time it was read (so the trace's times are the wire's, not the decoder's), and the
//! writer thread takes the events in batches, napping between them, so a request costs
//! the recorder a copy and a decode but no thread wake-up (bench/recorder.sh measures
//! the latency it adds against the relay's). Order is kept: each chunk read goes into
//! the session's backlog before it is passed on, and the decoder takes the backlog in
//! the order the chunks were read, so a request is decoded before the response it got
//! even when its write waited.
//!
//! Bounded memory, whatever the recording's length: the decoders hold at most their caps
//! (`DecodeOptions`), a backlog holds at most the chunks in flight (two reads), events go
//! to the writer thread through a bounded channel (a slow disk slows the application's
//! traffic, it does not grow a queue), and the writer flushes every second. A session
//! still open when the recording stops is closed in the trace as `recorder`.

use std::collections::VecDeque;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{mpsc, watch};

use crate::net::relay::{strip_channel_binding, Addr};
use crate::net::transport::TlsSetup;
use crate::target::Engine;
use crate::trace::{
    ClosedBy, DecodeOptions, Decoder, Direction, Event, Header, RecordOptions, SessionMeta, TraceWriter,
    Transport,
};

/// PostgreSQL's SSLRequest and GSSENCRequest: the recorder answers both `N`.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];
const GSSENC_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x30];

/// Batches of events in flight to the writer, at most (a batch is a chunk's events).
const QUEUE: usize = 4096;
/// The writer's nap between batches: a sender finds it asleep, not parked on the
/// channel, so sending wakes no thread. At 100k requests a second a nap leaves 500
/// batches queued, well under [`QUEUE`].
const WRITER_NAP: Duration = Duration::from_millis(5);

/// What to record and where.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: Addr,
    pub upstream: Addr,
    /// TLS to the upstream (PostgreSQL): the app's plaintext carried inside.
    pub upstream_tls: Option<TlsSetup>,
    pub engine: Engine,
    pub out: PathBuf,
    pub decode: DecodeOptions,
}

/// What a recording counted, read live (for progress) and at its end.
#[derive(Debug, Default)]
pub struct Counts {
    pub sessions: AtomicU64,
    pub open: AtomicU64,
    pub requests: AtomicU64,
    pub bytes_up: AtomicU64,
    pub bytes_down: AtomicU64,
    pub upstream_failures: AtomicU64,
    /// Clients that asked for TLS and were answered `N`.
    pub tls_refused: AtomicU64,
    /// Sessions that closed after the recorder's `N` without going on: the application
    /// requires TLS (sslmode=require or stricter).
    pub tls_insisted: AtomicU64,
    pub undecoded: AtomicU64,
}

/// A finished recording.
#[derive(Debug)]
pub struct Recorded {
    pub events: u64,
    /// Uncompressed trace bytes.
    pub trace_bytes: u64,
    pub duration: Duration,
}

/// A recording in progress: its address (with the port picked) and its counts.
pub struct Recorder {
    pub addr: String,
    pub counts: Arc<Counts>,
    done: tokio::task::JoinHandle<Result<Recorded>>,
}

impl Recorder {
    /// Creates the trace file (refusing one that exists), listens, and records until
    /// `stop` turns true.
    pub async fn start(s: Settings, stop: watch::Receiver<bool>) -> Result<Recorder> {
        let header = Header::new(
            s.engine,
            RecordOptions {
                redact_values: s.decode.redact_values,
                listen: Some(s.listen.to_string()),
                upstream: Some(s.upstream.to_string()),
                upstream_tls: s.upstream_tls.is_some(),
            },
        );
        let writer = TraceWriter::create(&s.out, &header).with_context(|| {
            format!(
                "--out {}: cannot create the trace (an existing file is never overwritten)",
                s.out.display()
            )
        })?;
        let listener = Listener::bind(&s.listen).await?;
        let addr = listener.addr();
        let counts = Arc::new(Counts::default());
        let (tx, rx) = mpsc::channel::<Vec<Event>>(QUEUE);
        let started = Instant::now();
        let write = std::thread::spawn(move || write_events(writer, rx));
        let c = counts.clone();
        let done = tokio::spawn(async move {
            accept(listener, s, c, tx, started, stop).await;
            let (events, trace_bytes) = tokio::task::spawn_blocking(move || write.join())
                .await
                .context("the trace writer")?
                .map_err(|_| anyhow::anyhow!("the trace writer panicked"))?
                .context("writing the trace")?;
            Ok(Recorded {
                events,
                trace_bytes,
                duration: started.elapsed(),
            })
        });
        Ok(Recorder { addr, counts, done })
    }

    /// Waits for the recording to end (after `stop`), every session closed in the trace
    /// and the file synced.
    pub async fn finish(self) -> Result<Recorded> {
        self.done.await.context("the recorder")?
    }
}

/// The writer thread: events to the file as they come, flushed every second; returns
/// the events and bytes written once every sender is gone.
fn write_events(
    mut w: TraceWriter<std::fs::File>,
    mut rx: mpsc::Receiver<Vec<Event>>,
) -> io::Result<(u64, u64)> {
    while let Some(batch) = rx.blocking_recv() {
        for e in &batch {
            w.write(e)?;
        }
        while let Ok(batch) = rx.try_recv() {
            for e in &batch {
                w.write(e)?;
            }
        }
        w.flush_if_due(Instant::now())?;
        std::thread::sleep(WRITER_NAP);
    }
    let out = (w.events(), w.bytes());
    w.finish_file()?;
    Ok(out)
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

impl Listener {
    async fn bind(a: &Addr) -> Result<Listener> {
        match a {
            Addr::Tcp(t) => Ok(Listener::Tcp(
                TcpListener::bind(t)
                    .await
                    .with_context(|| format!("--listen {t}: cannot listen"))?,
            )),
            Addr::Unix(p) => {
                let l = UnixListener::bind(p).with_context(|| {
                    format!(
                        "--listen {}: cannot listen (make its folder first: mkdir -p)",
                        p.display()
                    )
                })?;
                Ok(Listener::Unix(l, p.clone()))
            }
        }
    }

    fn addr(&self) -> String {
        match self {
            Listener::Tcp(l) => l.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            Listener::Unix(_, p) => p.display().to_string(),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, p) = self {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A byte stream either way: the client's or the server's socket.
trait Conn: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Conn for T {}

async fn accept(
    listener: Listener,
    s: Settings,
    counts: Arc<Counts>,
    tx: mpsc::Sender<Vec<Event>>,
    started: Instant,
    mut stop: watch::Receiver<bool>,
) {
    let mut tasks = tokio::task::JoinSet::new();
    let mut next = 0u64;
    loop {
        let client: (Box<dyn Conn>, Transport) = tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            c = async {
                match &listener {
                    Listener::Tcp(l) => l.accept().await.map(|(c, _)| {
                        let _ = c.set_nodelay(true);
                        (Box::new(c) as Box<dyn Conn>, Transport::Tcp)
                    }),
                    Listener::Unix(l, _) => l.accept().await.map(|(c, _)| (Box::new(c) as Box<dyn Conn>, Transport::Unix)),
                }
            } => match c {
                Ok(c) => c,
                Err(_) => continue,
            },
        };
        next += 1;
        let (s, counts, tx, stop) = (s.clone(), counts.clone(), tx.clone(), stop.clone());
        tasks.spawn(session(client, next, s, counts, tx, started, stop));
    }
    drop(listener);
    while tasks.join_next().await.is_some() {}
}

fn since(started: Instant) -> u64 {
    started.elapsed().as_nanos() as u64
}

async fn connect(upstream: &Addr, tls: Option<&TlsSetup>) -> io::Result<Box<dyn Conn>> {
    Ok(match (upstream, tls) {
        (Addr::Tcp(a), tls) => {
            let mut c = TcpStream::connect(a).await?;
            let _ = c.set_nodelay(true);
            let Some(tls) = tls else { return Ok(Box::new(c)) };
            c.write_all(&SSL_REQUEST).await?;
            let mut answer = [0u8; 1];
            c.read_exact(&mut answer).await?;
            if answer[0] != b'S' {
                return Err(io::Error::other("the server refused TLS"));
            }
            let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
            Box::new(connector.connect(tls.server_name.clone(), c).await?)
        }
        (Addr::Unix(p), _) => Box::new(UnixStream::connect(p).await?),
    })
}

/// One connection, from the client's accept to both ends' close.
async fn session(
    (mut client, transport): (Box<dyn Conn>, Transport),
    id: u64,
    s: Settings,
    counts: Arc<Counts>,
    tx: mpsc::Sender<Vec<Event>>,
    started: Instant,
    stop: watch::Receiver<bool>,
) {
    let open_ns = since(started);
    counts.sessions.fetch_add(1, Ordering::Relaxed);
    let Ok(server) = connect(&s.upstream, s.upstream_tls.as_ref()).await else {
        // The client sees its connection close, as from a server that is down.
        counts.upstream_failures.fetch_add(1, Ordering::Relaxed);
        return;
    };
    counts.open.fetch_add(1, Ordering::Relaxed);
    let meta = SessionMeta {
        session: id,
        open_ns,
        transport,
        connect_ns: Some(since(started) - open_ns),
    };
    let tap = Tap {
        decoder: Mutex::new(Decoder::new(s.engine, meta, s.decode)),
        backlog: Mutex::new(VecDeque::new()),
        started,
        tx,
        counts: counts.clone(),
    };
    let by = relay(
        &mut client,
        server,
        &tap,
        (s.engine, s.upstream_tls.is_some()),
        stop,
    )
    .await;
    // A chunk read when the recording stopped, its write cut short, is still the trace's.
    tap.decode().await;
    let mut out = Vec::new();
    tap.decoder
        .lock()
        .unwrap()
        .close(since(tap.started), by, &mut out);
    tap.send(out).await;
    counts.open.fetch_sub(1, Ordering::Relaxed);
}

/// A session's decoder and where its events go.
struct Tap {
    decoder: Mutex<Decoder>,
    /// Chunks read and not yet decoded, both directions, in the order they were read,
    /// each with its direction and the time it was read.
    backlog: Mutex<VecDeque<(Direction, u64, Vec<u8>)>>,
    /// The trace's start: the decoder takes times from it (and counts a session's
    /// events from the session's open itself).
    started: Instant,
    tx: mpsc::Sender<Vec<Event>>,
    counts: Arc<Counts>,
}

impl Tap {
    /// A chunk read going `dir`, before it is passed on: into the backlog with the time
    /// it was read.
    fn read(&self, dir: Direction, bytes: &[u8]) {
        let at = since(self.started);
        self.backlog.lock().unwrap().push_back((dir, at, bytes.to_vec()));
    }

    /// After a chunk was passed on: the backlog to the decoder, in the order it was read,
    /// and what it made to the writer.
    async fn decode(&self) {
        let mut out = Vec::new();
        {
            let mut backlog = self.backlog.lock().unwrap();
            let mut decoder = self.decoder.lock().unwrap();
            while let Some((dir, at, bytes)) = backlog.pop_front() {
                decoder.feed(dir, at, &bytes, &mut out);
                self.count(dir, bytes.len());
            }
        }
        self.send(out).await;
    }

    fn count(&self, dir: Direction, n: usize) {
        let counter = match dir {
            Direction::ToServer => &self.counts.bytes_up,
            Direction::ToClient => &self.counts.bytes_down,
        };
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Feeds `bytes` (going `dir`) to the decoder at once and sends what it made: the
    /// connection's first messages, which the recorder answers or rewrites itself.
    async fn feed(&self, dir: Direction, bytes: &[u8]) {
        let mut out = Vec::new();
        self.decoder
            .lock()
            .unwrap()
            .feed(dir, since(self.started), bytes, &mut out);
        self.count(dir, bytes.len());
        self.send(out).await;
    }

    async fn send(&self, out: Vec<Event>) {
        if out.is_empty() {
            return;
        }
        for e in &out {
            match e {
                Event::Request(_) => {
                    self.counts.requests.fetch_add(1, Ordering::Relaxed);
                }
                Event::SessionClose(c) if c.decode_error.is_some() => {
                    self.counts.undecoded.fetch_add(1, Ordering::Relaxed);
                }
                _ => {}
            }
        }
        // The writer ends only after every sender is gone: a send cannot fail before.
        let _ = self.tx.send(out).await;
    }
}

/// Copies both ways through the tap until both ends are done (or the recording stops);
/// who closed first.
async fn relay(
    client: &mut Box<dyn Conn>,
    mut server: Box<dyn Conn>,
    tap: &Tap,
    (engine, upstream_tls): (Engine, bool),
    mut stop: watch::Receiver<bool>,
) -> ClosedBy {
    if engine == Engine::Postgres && answer_tls_request(client, &mut server, tap).await.is_err() {
        return ClosedBy::Client;
    }
    if upstream_tls && first_answer(&mut server, client, tap).await.is_err() {
        return ClosedBy::Server;
    }
    let (mut cr, mut cw) = tokio::io::split(client);
    let (mut sr, mut sw) = tokio::io::split(server);
    let first: Mutex<Option<ClosedBy>> = Mutex::new(None);
    let up = pipe(&mut cr, &mut sw, Direction::ToServer, tap, false, &first);
    let down = pipe(
        &mut sr,
        &mut cw,
        Direction::ToClient,
        tap,
        engine == Engine::Mysql,
        &first,
    );
    tokio::select! {
        _ = async { tokio::join!(up, down) } => {}
        _ = stop.wait_for(|s| *s) => return ClosedBy::Recorder,
    }
    let by = first.lock().unwrap().unwrap_or(ClosedBy::Client);
    by
}

/// PostgreSQL: a client's SSLRequest or GSSENCRequest is answered `N` here (the
/// recorder reads only plaintext; libpq's sslmode=prefer then goes on in plaintext),
/// and both the request and the answer are fed to the decoder as the sides saw them.
async fn answer_tls_request(
    client: &mut Box<dyn Conn>,
    server: &mut Box<dyn Conn>,
    tap: &Tap,
) -> io::Result<()> {
    let mut refused = false;
    loop {
        let mut head = [0u8; 8];
        if let Err(e) = client.read_exact(&mut head).await {
            if refused && e.kind() == io::ErrorKind::UnexpectedEof {
                tap.counts.tls_insisted.fetch_add(1, Ordering::Relaxed);
            }
            return Err(e);
        }
        if head == SSL_REQUEST || head == GSSENC_REQUEST {
            tap.feed(Direction::ToServer, &head).await;
            tap.feed(Direction::ToClient, b"N").await;
            tap.counts.tls_refused.fetch_add(1, Ordering::Relaxed);
            refused = true;
            client.write_all(b"N").await?;
            continue;
        }
        // The startup message whole (a TLS upstream answers it before the pipes run).
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let mut msg = head.to_vec();
        if (8..=10_000).contains(&len) {
            msg.resize(len, 0);
            client.read_exact(&mut msg[8..]).await?;
        }
        tap.feed(Direction::ToServer, &msg).await;
        return server.write_all(&msg).await;
    }
}

/// With TLS upstream, the server's first answer. Over TLS PostgreSQL offers
/// SCRAM-SHA-256-PLUS, a binding to the recorder's TLS session that the app, speaking
/// plaintext to the recorder, cannot make; it is withdrawn as the relay's sidecar does,
/// and the app sees (and the trace records) the offer without it.
async fn first_answer(server: &mut Box<dyn Conn>, client: &mut Box<dyn Conn>, tap: &Tap) -> io::Result<()> {
    let mut head = [0u8; 5];
    server.read_exact(&mut head).await?;
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if !(4..=1 << 20).contains(&len) {
        return Err(io::Error::other("unexpected first message from the server"));
    }
    let mut body = vec![0u8; len - 4];
    server.read_exact(&mut body).await?;
    let first = strip_channel_binding(head[0], &body).unwrap_or_else(|| [&head[..], &body[..]].concat());
    tap.feed(Direction::ToClient, &first).await;
    client.write_all(&first).await
}

/// One direction: each chunk into the backlog, on, then decoded; EOF passed on as a
/// half-close.
async fn pipe(
    from: &mut (impl AsyncRead + Unpin),
    to: &mut (impl AsyncWrite + Unpin),
    dir: Direction,
    tap: &Tap,
    mut greeting: bool,
    first: &Mutex<Option<ClosedBy>>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = from.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            first.lock().unwrap().get_or_insert(match dir {
                Direction::ToServer => ClosedBy::Client,
                Direction::ToClient => ClosedBy::Server,
            });
            let _ = to.shutdown().await;
            return;
        }
        if std::mem::take(&mut greeting) {
            crate::trace::mysql::withdraw_tls_offer(&mut buf[..n]);
        }
        tap.read(dir, &buf[..n]);
        let written = to.write_all(&buf[..n]).await;
        tap.decode().await;
        if written.is_err() {
            return;
        }
    }
}

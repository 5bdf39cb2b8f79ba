//! `connbench record`'s hop between the application and its database that
//! decodes both directions of every connection as it passes (a `connbench_trace::Decoder` each)
//! and streams the events to a trace file.
//!
//! Why not the relay (`net::relay`): the relay shapes traffic (delay, jitter, faults)
//! and must not look inside it; the recorder adds no delay and must see every byte in
//! order, so it answers a PostgreSQL client's TLS request itself: `N` (and withdraws
//! MySQL's TLS offer from the server's greeting), or with `--listen-tls` `S` and a TLS
//! handshake of its own ([`tls`]), decoding the plaintext inside. So its copy loop is
//! its own and small.
//!
//! Out of the application's way: the hop copies each chunk it reads, with the time it
//! was read (so the trace's times are the wire's, not the decoder's), to the writer
//! thread and passes it on; the writer thread decodes, serializes and compresses, in
//! batches, napping between them. So a request costs the application's path a copy and
//! a channel push but no decode and no thread wake-up: the decoding that used to follow
//! each chunk on the hop's own thread kept the other direction's next chunk waiting
//! (bench/recorder.sh measures the latency the recorder adds against the relay's).
//! Order is kept: a session's chunks go to the channel in the order they were read, so
//! a request is decoded before the response it got even when its write waited.
//!
//! Bounded memory, whatever the recording's length: the decoders hold at most their caps
//! (`DecodeOptions`), the chunks in flight to the writer at most [`IN_FLIGHT`] bytes (a
//! slow disk slows the application's traffic, it does not grow a queue), and the writer
//! flushes every second. A session still open when the recording stops is closed in the
//! trace as `recorder`.

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{mpsc, watch, Semaphore};

use crate::net::relay::{strip_channel_binding, Addr};
use crate::net::transport::TlsSetup;
use crate::targets::Engine;
use connbench_trace::{
    ClosedBy, DecodeOptions, Decoder, Direction, Event, Header, RecordOptions, SessionMeta, TlsAccepted,
    TraceWriter, Transport,
};

pub mod tls;
use tls::ListenTls;

/// PostgreSQL's SSLRequest and GSSENCRequest: the recorder answers both `N`, or an
/// SSLRequest `S` with `--listen-tls`.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];
const GSSENC_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x30];

/// Bytes of chunks in flight to the writer, at most: past it the hop waits for the
/// writer (as a full socket buffer makes a sender wait). At 100k requests a second a
/// nap leaves about a thousand small chunks queued, far under it.
const IN_FLIGHT: usize = 32 << 20;
/// The writer's nap between batches: a sender finds it asleep, not parked on the
/// channel, so sending wakes no thread.
const WRITER_NAP: Duration = Duration::from_millis(5);

/// What a session's hop sends the writer thread, in the order it happened.
enum Msg {
    /// A connection was accepted and its upstream connected: a decoder for it.
    Open(SessionMeta),
    /// Bytes that passed going `dir`, read at `at_ns` since the trace's start.
    Chunk {
        session: u64,
        dir: Direction,
        at_ns: u64,
        bytes: Vec<u8>,
    },
    /// The recorder's TLS handshake with the client (`--listen-tls`), after its request.
    Tls {
        session: u64,
        result: Result<TlsAccepted, String>,
    },
    /// The connection ended.
    Close { session: u64, at_ns: u64, by: ClosedBy },
}

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
    /// `--listen-tls`: the recorder's own TLS toward the application.
    pub listen_tls: Option<ListenTls>,
    /// MySQL with `--listen-tls`: the TLS the recorder opens to the server when the
    /// application asks for TLS (its SSLRequest passed on).
    pub onward_tls: Option<TlsSetup>,
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
    /// `--listen-tls`: handshakes with applications done and failed; MySQL's onward
    /// handshakes with the server that failed.
    pub tls_accepted: AtomicU64,
    pub tls_failed: AtomicU64,
    pub tls_onward_failed: AtomicU64,
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
    /// `--listen-tls` with a generated certificate: where its CA's certificate was written.
    pub ca_file: Option<PathBuf>,
    pub counts: Arc<Counts>,
    done: tokio::task::JoinHandle<Result<Recorded>>,
}

impl Recorder {
    /// Creates the trace file (refusing one that exists), listens, and records until
    /// `stop` turns true.
    pub async fn start(s: Settings, stop: watch::Receiver<bool>) -> Result<Recorder> {
        let header = Header::new(
            s.engine,
            format!("connbench {}", crate::exit::VERSION),
            RecordOptions {
                redact_values: s.decode.redact_values,
                listen: Some(s.listen.to_string()),
                upstream: Some(s.upstream.to_string()),
                upstream_tls: s.upstream_tls.is_some(),
                listen_tls: s.listen_tls.is_some(),
            },
        );
        // Listening first: a port in use leaves no file behind.
        let listener = Listener::bind(&s.listen).await?;
        let writer = TraceWriter::create(&s.out, &header).with_context(|| {
            format!(
                "--out {}: cannot create the trace (an existing file is never overwritten)",
                s.out.display()
            )
        })?;
        let ca_file = match s.listen_tls.as_ref().filter(|t| t.ca_pem.is_some()) {
            Some(t) => {
                let path = tls::ca_path(&s.out);
                if let Err(e) = t.write_ca(&path) {
                    // The trace was made a moment ago, by this run: it goes with the run.
                    drop(writer);
                    let _ = std::fs::remove_file(&s.out);
                    return Err(e);
                }
                Some(path)
            }
            None => None,
        };
        let addr = listener.addr();
        let counts = Arc::new(Counts::default());
        let (tx, rx) = mpsc::unbounded_channel::<Msg>();
        let budget = Arc::new(Semaphore::new(IN_FLIGHT));
        let started = Instant::now();
        let hub = Hub {
            tx,
            budget: budget.clone(),
            counts: counts.clone(),
            started,
        };
        let (engine, options) = (s.engine, s.decode);
        let c = counts.clone();
        let write = std::thread::spawn(move || {
            let written = write_events(writer, rx, (engine, options), (&c, &budget));
            // A writer that failed takes no more chunks: the hops must not wait for it.
            budget.close();
            written
        });
        let done = tokio::spawn(async move {
            accept(listener, s, hub, stop).await;
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
        Ok(Recorder {
            addr,
            ca_file,
            counts,
            done,
        })
    }

    /// Waits for the recording to end (after `stop`), every session closed in the trace
    /// and the file synced.
    pub async fn finish(self) -> Result<Recorded> {
        self.done.await.context("the recorder")?
    }
}

/// The writer thread: each session's chunks decoded in the order they were read, the
/// events written as they come, flushed every second; returns the events and bytes
/// written once every sender is gone.
fn write_events(
    mut w: TraceWriter<std::fs::File>,
    mut rx: mpsc::UnboundedReceiver<Msg>,
    (engine, options): (Engine, DecodeOptions),
    (counts, budget): (&Counts, &Semaphore),
) -> io::Result<(u64, u64)> {
    let mut decoders: HashMap<u64, Decoder> = HashMap::new();
    let mut out = Vec::new();
    while let Some(first) = rx.blocking_recv() {
        let mut next = Some(first);
        while let Some(msg) = next {
            match msg {
                Msg::Open(meta) => {
                    decoders.insert(meta.session, Decoder::new(engine, meta, options));
                }
                Msg::Chunk {
                    session,
                    dir,
                    at_ns,
                    bytes,
                } => {
                    if let Some(d) = decoders.get_mut(&session) {
                        d.feed(dir, at_ns, &bytes, &mut out);
                    }
                    budget.add_permits(bytes.len().min(IN_FLIGHT));
                }
                Msg::Tls { session, result } => {
                    if let Some(d) = decoders.get_mut(&session) {
                        d.tls_accepted(result, &mut out);
                    }
                }
                Msg::Close { session, at_ns, by } => {
                    if let Some(mut d) = decoders.remove(&session) {
                        d.close(at_ns, by, &mut out);
                    }
                }
            }
            for e in out.drain(..) {
                match &e {
                    Event::Request(_) => {
                        counts.requests.fetch_add(1, Ordering::Relaxed);
                    }
                    Event::SessionClose(c) if c.decode_error.is_some() => {
                        counts.undecoded.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {}
                }
                w.write(&e)?;
            }
            next = rx.try_recv().ok();
        }
        w.flush_if_due(Instant::now())?;
        std::thread::sleep(WRITER_NAP);
    }
    let out = (w.events(), w.bytes());
    w.finish_file()?;
    Ok(out)
}

/// What every session's hop shares: the way to the writer thread and its budget.
#[derive(Clone)]
struct Hub {
    tx: mpsc::UnboundedSender<Msg>,
    budget: Arc<Semaphore>,
    counts: Arc<Counts>,
    started: Instant,
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

async fn accept(listener: Listener, s: Settings, hub: Hub, mut stop: watch::Receiver<bool>) {
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
        tasks.spawn(session(client, next, s.clone(), hub.clone(), stop.clone()));
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
    (client, transport): (Box<dyn Conn>, Transport),
    id: u64,
    s: Settings,
    hub: Hub,
    mut stop: watch::Receiver<bool>,
) {
    let counts = hub.counts.clone();
    let open_ns = since(hub.started);
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
        connect_ns: Some(since(hub.started) - open_ns),
        tls_terminated: s.listen_tls.is_some(),
    };
    // The writer ends only after every sender is gone: a send cannot fail before.
    let _ = hub.tx.send(Msg::Open(meta));
    let tap = Tap { session: id, hub };
    // The set-up under the stop too: a client that connects and never sends its first
    // bytes (or stalls in its handshake) must not hold the recording's end.
    let set_up = tokio::select! {
        r = preamble(client, server, &tap, &s) => r,
        _ = stop.wait_for(|s| *s) => Err(ClosedBy::Recorder),
    };
    let by = match set_up {
        Ok((client, server)) => relay(client, server, &tap, &s, stop).await,
        Err(by) => by,
    };
    let _ = tap.hub.tx.send(Msg::Close {
        session: id,
        at_ns: since(tap.hub.started),
        by,
    });
    counts.open.fetch_sub(1, Ordering::Relaxed);
}

/// A session's way to the writer thread, which decodes what the tap sees.
struct Tap {
    session: u64,
    hub: Hub,
}

impl Tap {
    /// A chunk read going `dir`, before it is passed on: to the writer with the time it
    /// was read, once the budget of chunks in flight has room for it.
    async fn read(&self, dir: Direction, bytes: &[u8]) {
        let at_ns = since(self.hub.started);
        let n = bytes.len().min(IN_FLIGHT) as u32;
        if let Ok(p) = self.hub.budget.acquire_many(n).await {
            p.forget();
        }
        let counter = match dir {
            Direction::ToServer => &self.hub.counts.bytes_up,
            Direction::ToClient => &self.hub.counts.bytes_down,
        };
        counter.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let _ = self.hub.tx.send(Msg::Chunk {
            session: self.session,
            dir,
            at_ns,
            bytes: bytes.to_vec(),
        });
    }

    /// The recorder's handshake with the client, `--listen-tls`: held with `listen`,
    /// begun at `began`, told to the decoder and counted; the encrypted stream.
    async fn accept_tls(
        &self,
        listen: &ListenTls,
        client: Box<dyn Conn>,
        began: Instant,
    ) -> io::Result<Box<dyn Conn>> {
        let counts = &self.hub.counts;
        let (result, stream) = match listen.accept(client, began).await {
            Ok((stream, accepted)) => {
                counts.tls_accepted.fetch_add(1, Ordering::Relaxed);
                (Ok(accepted), Ok(Box::new(stream) as Box<dyn Conn>))
            }
            Err(e) => {
                counts.tls_failed.fetch_add(1, Ordering::Relaxed);
                (Err(e.to_string()), Err(e))
            }
        };
        let _ = self.hub.tx.send(Msg::Tls {
            session: self.session,
            result,
        });
        stream
    }
}

/// What comes before the copy loop: PostgreSQL's encryption requests answered (and the
/// app's TLS terminated with `--listen-tls`), the server's first answer over
/// `--upstream-tls`; MySQL's TLS with `--listen-tls`. The two ends to copy between, or
/// who ended the session first.
async fn preamble(
    client: Box<dyn Conn>,
    mut server: Box<dyn Conn>,
    tap: &Tap,
    s: &Settings,
) -> Result<(Box<dyn Conn>, Box<dyn Conn>), ClosedBy> {
    match s.engine {
        Engine::Postgres => {
            let mut client = answer_tls_request(client, &mut server, tap, s.listen_tls.as_ref())
                .await
                .map_err(|_| ClosedBy::Client)?;
            if s.upstream_tls.is_some() {
                first_answer(&mut server, &mut client, tap)
                    .await
                    .map_err(|_| ClosedBy::Server)?;
            }
            Ok((client, server))
        }
        Engine::Mysql => match (&s.listen_tls, &s.onward_tls) {
            (Some(listen), Some(onward)) => mysql_tls(client, server, tap, (listen, onward)).await,
            _ => Ok((client, server)),
        },
    }
}

/// Copies both ways through the tap until both ends are done (or the recording stops);
/// who closed first.
async fn relay(
    client: Box<dyn Conn>,
    server: Box<dyn Conn>,
    tap: &Tap,
    s: &Settings,
    mut stop: watch::Receiver<bool>,
) -> ClosedBy {
    let (mut cr, mut cw) = tokio::io::split(client);
    let (mut sr, mut sw) = tokio::io::split(server);
    let first: Mutex<Option<ClosedBy>> = Mutex::new(None);
    // Without --listen-tls a MySQL server's TLS offer is withdrawn from its greeting: the
    // recorder could not read past a client's TLS. With it, `mysql_tls` passed it on.
    let withdraw = s.engine == Engine::Mysql && s.listen_tls.is_none();
    let up = pipe(&mut cr, &mut sw, Direction::ToServer, tap, false, &first);
    let down = pipe(&mut sr, &mut cw, Direction::ToClient, tap, withdraw, &first);
    tokio::select! {
        _ = async { tokio::join!(up, down) } => {}
        _ = stop.wait_for(|s| *s) => return ClosedBy::Recorder,
    }
    let by = first.lock().unwrap().unwrap_or(ClosedBy::Client);
    by
}

/// PostgreSQL: a client's SSLRequest is answered `S` and its TLS terminated here with
/// `--listen-tls` (the StartupMessage then read inside), else `N`, as is a GSSENCRequest
/// (the recorder reads only plaintext; libpq's sslmode=prefer then goes on in
/// plaintext); both the request and the answer are fed to the decoder as the sides saw
/// them. The client's stream from then on: encrypted or not.
async fn answer_tls_request(
    mut client: Box<dyn Conn>,
    server: &mut Box<dyn Conn>,
    tap: &Tap,
    listen: Option<&ListenTls>,
) -> io::Result<Box<dyn Conn>> {
    let (mut refused, mut encrypted) = (false, false);
    loop {
        let mut head = [0u8; 8];
        if let Err(e) = client.read_exact(&mut head).await {
            if refused && e.kind() == io::ErrorKind::UnexpectedEof {
                tap.hub.counts.tls_insisted.fetch_add(1, Ordering::Relaxed);
            }
            return Err(e);
        }
        if let (true, false, Some(listen)) = (head == SSL_REQUEST, encrypted, listen) {
            tap.read(Direction::ToServer, &head).await;
            tap.read(Direction::ToClient, b"S").await;
            client.write_all(b"S").await?;
            client = tap.accept_tls(listen, client, Instant::now()).await?;
            encrypted = true;
            continue;
        }
        if head == SSL_REQUEST || head == GSSENC_REQUEST {
            tap.read(Direction::ToServer, &head).await;
            tap.read(Direction::ToClient, b"N").await;
            tap.hub.counts.tls_refused.fetch_add(1, Ordering::Relaxed);
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
        tap.read(Direction::ToServer, &msg).await;
        server.write_all(&msg).await?;
        return Ok(client);
    }
}

/// MySQL with `--listen-tls`: the server's greeting passes with its TLS offer kept; a
/// client's SSLRequest (sequence 1) is passed on to the server, and the recorder holds
/// two handshakes at once, the application's (its certificate) and its own with the
/// server (a TLS client, sslmode=require's checks: encrypted, not verified), then copies
/// the plaintext between them.
///
/// Why TLS onward rather than plaintext to the server with the handshake's sequence
/// numbers rewritten (the client's response inside TLS is 2, a server that saw no
/// SSLRequest expects 1, and every auth packet after it one less): the server then sees
/// the session the application meant, a TLS one. caching_sha2_password's full
/// authentication sends the password in clear only over a connection the server knows
/// is secure (over plaintext it wants RSA, which a client on TLS will not do),
/// mysql_clear_password and `REQUIRE SSL` accounts likewise; and a password the
/// application sent encrypted never crosses the network in clear. The cost: a server
/// that offers no TLS gets no TLS from the recorder either; its greeting passes as it
/// is, and the application decides, as it would without the recorder.
async fn mysql_tls(
    mut client: Box<dyn Conn>,
    mut server: Box<dyn Conn>,
    tap: &Tap,
    (listen, onward): (&ListenTls, &TlsSetup),
) -> Result<(Box<dyn Conn>, Box<dyn Conn>), ClosedBy> {
    let greeting = read_packet(&mut server).await.map_err(|_| ClosedBy::Server)?;
    tap.read(Direction::ToClient, &greeting).await;
    client.write_all(&greeting).await.map_err(|_| ClosedBy::Client)?;
    if !connbench_trace::mysql::offers_tls(&greeting) {
        return Ok((client, server));
    }
    let first = read_packet(&mut client).await.map_err(|_| ClosedBy::Client)?;
    let began = Instant::now();
    tap.read(Direction::ToServer, &first).await;
    server.write_all(&first).await.map_err(|_| ClosedBy::Server)?;
    if !connbench_trace::mysql::is_ssl_request(&first) {
        return Ok((client, server));
    }
    let connector = tokio_rustls::TlsConnector::from(onward.config.clone());
    let (client, server) = tokio::join!(
        tap.accept_tls(listen, client, began),
        connector.connect(onward.server_name.clone(), server)
    );
    let Ok(server) = server else {
        tap.hub.counts.tls_onward_failed.fetch_add(1, Ordering::Relaxed);
        return Err(ClosedBy::Server);
    };
    let client = client.map_err(|_| ClosedBy::Client)?;
    Ok((client, Box::new(server)))
}

/// One whole MySQL packet, header included (a greeting or a client's first packet: far
/// under the cap, which keeps a peer from making the recorder hold more).
async fn read_packet(from: &mut Box<dyn Conn>) -> io::Result<Vec<u8>> {
    let mut head = [0u8; 4];
    from.read_exact(&mut head).await?;
    let len = u32::from_le_bytes([head[0], head[1], head[2], 0]) as usize;
    if len > 1 << 20 {
        return Err(io::Error::other("a handshake packet over 1 MiB"));
    }
    let mut packet = head.to_vec();
    packet.resize(4 + len, 0);
    from.read_exact(&mut packet[4..]).await?;
    Ok(packet)
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
    tap.read(Direction::ToClient, &first).await;
    client.write_all(&first).await
}

/// One direction: each chunk to the writer, then on; EOF passed on as a half-close.
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
            connbench_trace::mysql::withdraw_tls_offer(&mut buf[..n]);
        }
        tap.read(dir, &buf[..n]).await;
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

//! The relay: a user-space hop between a client and a server that adds network distance.
//!
//! It listens on a Unix socket or a TCP address and, for every accepted connection,
//! opens its own connection to the upstream (TCP or Unix) at that moment, then copies
//! bytes both ways. Each direction can be given a one-way delay (half the requested round
//! trip), jitter and a bandwidth cap, so a path through it behaves like a sidecar proxy
//! (zero delay) or a database some distance away. The kernel here has no netem, so the
//! emulation is done on the bytes:
//!
//! - a reader stamps each chunk with the instant it may leave: arrival + delay ± jitter,
//!   never before the previous chunk (byte order is kept) and, under a bandwidth cap, not
//!   before the link has finished sending what came earlier;
//! - a writer sleeps until that instant on a `timerfd` ([`crate::net::timer::PreciseTimer`];
//!   tokio's 1 ms timer wheel would add up to a millisecond to every hop) and writes;
//! - the bytes in flight per direction are capped (a window of at least 4 MiB or twice
//!   the bandwidth-delay product), so a fast sender cannot make the relay buffer without
//!   bound.
//!
//! - a new connection pays TCP's handshake as on a real network ([`handshake`]): the
//!   upstream is opened when the client's ACK would reach the server (1.5 round trips
//!   after the connect) and the client's first bytes leave no earlier than its `connect`
//!   would have returned (one round trip), so a server that speaks first (MySQL) greets
//!   two round trips after the connect began, as it would over the network.
//!
//! With no delay and no cap, each direction is a plain read/write loop with no queue in
//! between, which is what a sidecar proxy costs. Half-close is passed on (EOF from one
//! side shuts down the other side's write half after the delayed bytes have gone), and a
//! reset on one side resets the other. When the upstream refuses, the client's connection
//! is reset at once rather than left hanging.
//!
//! With upstream TLS (PostgreSQL only), the relay is a sidecar like a cloud SQL auth
//! proxy: the app speaks plaintext to it (an SSLRequest from the app is answered `N`), and
//! the relay opens TLS to the server itself (SSLRequest, `S`, then the handshake) and
//! carries the app's bytes inside.
//!
//! Faults, in the manner of Toxiproxy's toxics ([`Faults`]): reset a connection after N
//! bytes, refuse a share of new connections, stall (accept and never answer), and a
//! slow close (EOF passed on late). They are decided per connection, so the relayed
//! bytes of a healthy connection take the same path as without them.
//!
//! The relay runs on a thread of its own with a current-thread runtime, so it never
//! competes with the measuring threads' runtimes for a scheduler slot.
//!
//! `shape` holds the [`Shape`] and [`Faults`] values, `tls` the TLS sidecar's path.

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{mpsc, watch, Semaphore};

mod arrival;
mod handshake;
mod shape;
mod tls;

use arrival::Reader;
use handshake::Handshake;

pub use shape::{parse_bandwidth, Faults, Shape};
use tls::relay_tls;
pub use tls::strip_channel_binding;

use crate::net::timer::PreciseTimer;
use crate::net::transport::TlsSetup;
use crate::rng::Rng;

/// Where the relay listens or connects: `host:port` or a Unix socket path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addr {
    Tcp(String),
    Unix(PathBuf),
}

impl FromStr for Addr {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Addr> {
        if s.contains('/') {
            return Ok(Addr::Unix(PathBuf::from(s)));
        }
        let (host, port) = s.rsplit_once(':').ok_or_else(|| {
            anyhow!("address {s:?} is neither host:port nor a socket path (a path contains '/')")
        })?;
        if host.is_empty() {
            bail!("address {s:?} has no host: write 127.0.0.1:{port}");
        }
        port.parse::<u16>()
            .map_err(|_| anyhow!("address {s:?}: port {port:?} is not a number from 0 to 65535"))?;
        Ok(Addr::Tcp(s.to_string()))
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Addr::Tcp(a) => f.write_str(a),
            Addr::Unix(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Counters of a running relay.
#[derive(Debug, Default)]
pub struct RelayStats {
    pub connections: AtomicU64,
    pub upstream_failures: AtomicU64,
    pub bytes_up: AtomicU64,
    pub bytes_down: AtomicU64,
    /// Connections the relay refused or reset on purpose (faults).
    pub refused: AtomicU64,
    pub reset: AtomicU64,
}

/// A relay running on its own thread; dropping it stops it and removes its socket file.
pub struct Relay {
    addr: Addr,
    /// The relay thread's id, for reading its CPU time apart from the clients'.
    thread_id: i32,
    stop: Option<watch::Sender<bool>>,
    thread: Option<std::thread::JoinHandle<()>>,
    pub stats: Arc<RelayStats>,
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl Relay {
    /// Binds `listen` (port 0 picks a free port) and starts relaying to `upstream`.
    /// Callable from inside or outside an async runtime: the socket is bound here with
    /// std, and handed to the relay's own runtime on its thread.
    pub fn start(listen: &Addr, upstream: &Addr, shape: Shape) -> Result<Relay> {
        Relay::start_with(listen, upstream, shape, None)
    }

    /// As [`Relay::start`], opening TLS to a PostgreSQL upstream when `upstream_tls` is
    /// given (the app side stays plaintext).
    pub fn start_with(
        listen: &Addr,
        upstream: &Addr,
        mut shape: Shape,
        upstream_tls: Option<TlsSetup>,
    ) -> Result<Relay> {
        shape.faults.started = Some(Instant::now());
        let upstream_tls = upstream_tls.map(Arc::new);
        let (listener, addr) = bind(listen)?;
        let (stop_tx, stop_rx) = watch::channel(false);
        let stats = Arc::new(RelayStats::default());
        let thread_stats = stats.clone();
        let upstream = upstream.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<io::Result<i32>>();
        let thread = std::thread::Builder::new()
            .name("connbench-relay".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let local = tokio::task::LocalSet::new();
                local.block_on(&runtime, async move {
                    let listener = match listener.into_tokio() {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok(crate::host::current_thread_id()));
                    serve(listener, upstream, shape, upstream_tls, stop_rx, thread_stats).await
                });
            })
            .context("relay: cannot start its thread")?;
        let thread_id = ready_rx
            .recv()
            .map_err(|_| anyhow!("relay: its thread ended before it was ready"))?
            .context("relay: cannot start its runtime")?;
        Ok(Relay {
            addr,
            thread_id,
            stop: Some(stop_tx),
            thread: Some(thread),
            stats,
        })
    }

    /// The address clients connect to (with the port the system chose for port 0).
    pub fn addr(&self) -> &Addr {
        &self.addr
    }

    /// The id of the thread all of this relay's work runs on (see [`crate::host`]).
    pub fn thread_id(&self) -> i32 {
        self.thread_id
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Addr::Unix(p) = &self.addr {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A bound listening socket, before it is handed to the relay's runtime.
enum StdListener {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener),
}

impl StdListener {
    fn into_tokio(self) -> io::Result<Listener> {
        match self {
            StdListener::Tcp(l) => {
                l.set_nonblocking(true)?;
                TcpListener::from_std(l).map(Listener::Tcp)
            }
            StdListener::Unix(l) => {
                l.set_nonblocking(true)?;
                UnixListener::from_std(l).map(Listener::Unix)
            }
        }
    }
}

fn bind(listen: &Addr) -> Result<(StdListener, Addr)> {
    match listen {
        Addr::Tcp(a) => {
            let l = std::net::TcpListener::bind(a).with_context(|| format!("relay: cannot listen on {a}"))?;
            let bound = l.local_addr()?.to_string();
            Ok((StdListener::Tcp(l), Addr::Tcp(bound)))
        }
        Addr::Unix(p) => {
            let l = std::os::unix::net::UnixListener::bind(p).with_context(|| {
                format!(
                    "relay: cannot listen on {}{}",
                    p.display(),
                    match p.parent().filter(|d| !d.as_os_str().is_empty()) {
                        _ if p.exists() => " (the file exists: remove it if no relay uses it)".to_string(),
                        Some(d) if !d.exists() => {
                            format!(
                                " (its folder does not exist: create it first, `mkdir -p {}`)",
                                d.display()
                            )
                        }
                        _ => String::new(),
                    }
                )
            })?;
            Ok((StdListener::Unix(l), Addr::Unix(p.clone())))
        }
    }
}

/// A relayed socket, TCP or Unix.
///
/// Unix sockets here stay tokio's, registered for reads and writes, unlike the
/// measuring client's (`transport::UnixConn`): the relay stands for a sidecar proxy, and
/// the common ones register both too (Go's netpoller, as in cloud-sql-proxy; Envoy's
/// libevent), so they also wake each time their Unix-socket peer reads. A sidecar over a
/// Unix socket pays that here as it does in production.
enum Sock {
    Tcp(TcpStream),
    Unix(UnixStream),
}

type Halves<'a> = (Reader<'a>, Box<dyn AsyncWrite + Unpin + 'a>);

impl Sock {
    fn fd(&self) -> RawFd {
        match self {
            Sock::Tcp(s) => s.as_raw_fd(),
            Sock::Unix(s) => s.as_raw_fd(),
        }
    }

    /// Borrowed halves: unlike owned halves, dropping them does not shut the socket
    /// down, so a reset can still leave as a reset rather than after a FIN.
    fn split(&mut self) -> Halves<'_> {
        match self {
            Sock::Tcp(s) => {
                let (r, w) = s.split();
                (Reader::Tcp(r), Box::new(w))
            }
            Sock::Unix(s) => {
                let (r, w) = s.split();
                (Reader::Unix(r), Box::new(w))
            }
        }
    }
}

async fn connect(a: &Addr) -> io::Result<Sock> {
    match a {
        Addr::Tcp(s) => {
            let t = TcpStream::connect(s).await?;
            let _ = t.set_nodelay(true);
            Ok(Sock::Tcp(t))
        }
        Addr::Unix(p) => UnixStream::connect(p).await.map(Sock::Unix),
    }
}

/// Makes the socket's close send a reset (SO_LINGER with a zero timeout) instead of a
/// FIN: how a reset is passed on, and how a refused upstream reaches the client.
fn reset_on_close(fd: RawFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a descriptor we hold, with a correctly sized option. On a Unix
    // socket it is a harmless no-op.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// Accepts until `stop`, relaying each connection in a task of its own.
async fn serve(
    listener: Listener,
    upstream: Addr,
    shape: Shape,
    tls: Option<Arc<TlsSetup>>,
    mut stop: watch::Receiver<bool>,
    stats: Arc<RelayStats>,
) {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    loop {
        let accepted = tokio::select! {
            _ = stop.changed() => return,
            a = async {
                match &listener {
                    Listener::Tcp(l) => l.accept().await.map(|(s, _)| {
                        let _ = s.set_nodelay(true);
                        Sock::Tcp(s)
                    }),
                    Listener::Unix(l) => l.accept().await.map(|(s, _)| Sock::Unix(s)),
                }
            } => a,
        };
        let at = Instant::now();
        let Ok(client) = accepted else {
            // EMFILE and the like: back off briefly rather than spin.
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        stats.connections.fetch_add(1, Ordering::Relaxed);
        seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let (upstream, stats, stop, tls) = (upstream.clone(), stats.clone(), stop.clone(), tls.clone());
        tokio::task::spawn_local(async move {
            let mut stop = stop;
            tokio::select! {
                _ = stop.changed() => {}
                _ = relay_one(client, at, &upstream, shape, tls.as_deref(), seed, &stats) => {}
            }
        });
    }
}

async fn relay_one(
    mut client: Sock,
    accepted: Instant,
    upstream: &Addr,
    shape: Shape,
    tls: Option<&TlsSetup>,
    seed: u64,
    stats: &RelayStats,
) {
    let f = shape.faults;
    if f.refuse > 0.0 && Rng::new(seed | 1).unit() < f.refuse {
        stats.refused.fetch_add(1, Ordering::Relaxed);
        reset_on_close(client.fd());
        return;
    }
    if f.stall {
        // Held open and silent until the relay stops.
        std::future::pending::<()>().await;
    }
    let handshake = Handshake::at(&shape, seed, accepted);
    if handshake.is_some() {
        // The client's first bytes arrive while the connection is held: date them by the
        // kernel's stamp, not by when the hold ends.
        arrival::stamp_arrivals(client.fd());
    }
    if let Some(tls) = tls {
        if relay_tls(client, accepted, upstream, shape, tls, seed, stats)
            .await
            .is_err()
        {
            stats.upstream_failures.fetch_add(1, Ordering::Relaxed);
        }
        return;
    }
    // The upstream is opened when the client connects, as a proxy does; at a distance,
    // when the client's ACK would have reached the server.
    let hold = match handshake {
        Some(h) => {
            wait_until(h.server_accepts).await;
            Leg {
                not_before: Some(h.client_sends),
                // Bytes queued now came during the hold.
                held_since: (arrival::queued(client.fd()) > 0).then_some(accepted),
                max_age: arrival::MAX_AGE + h.hold(accepted),
            }
        }
        None => Leg::NOW,
    };
    let mut server = match connect(upstream).await {
        Ok(s) => s,
        Err(_) => {
            stats.upstream_failures.fetch_add(1, Ordering::Relaxed);
            // Closing with a zero linger sends a reset: the client learns at once.
            reset_on_close(client.fd());
            return;
        }
    };
    let (client_fd, server_fd) = (client.fd(), server.fd());
    let (cr, cw) = client.split();
    let (sr, sw) = server.split();
    let crossed = AtomicU64::new(0);
    let shaped = Shaped {
        shape,
        seed,
        stats,
        crossed: &crossed,
    };
    if shaped.both_ways((cr, cw), (sr, sw), hold).await {
        if f.reset_after
            .is_some_and(|limit| crossed.load(Ordering::Relaxed) > limit)
        {
            stats.reset.fetch_add(1, Ordering::Relaxed);
        }
        reset_on_close(client_fd);
        reset_on_close(server_fd);
    }
}

/// Counts `n` more bytes on a connection; an error (a reset) once a `reset_after` fault's
/// limit is crossed.
fn cross(crossed: &AtomicU64, n: usize, limit: Option<u64>) -> io::Result<()> {
    let Some(limit) = limit else { return Ok(()) };
    if crossed.fetch_add(n as u64, Ordering::Relaxed) + n as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::ConnectionReset,
            "relay fault: reset after N bytes",
        ));
    }
    Ok(())
}

/// One connection's shaping: what both directions' pipes share.
struct Shaped<'a> {
    shape: Shape,
    seed: u64,
    stats: &'a RelayStats,
    crossed: &'a AtomicU64,
}

impl Shaped<'_> {
    /// Copies the client's side to the server's and back, the client's first bytes held
    /// by `hold` (its handshake); returns whether one direction failed ([`both_ways`]).
    async fn both_ways(&self, client: Halves<'_>, server: Halves<'_>, hold: Leg) -> bool {
        let s = self;
        let up = pipe(
            client.0,
            server.1,
            s.shape,
            hold,
            s.seed,
            &s.stats.bytes_up,
            s.crossed,
        );
        let down = pipe(
            server.0,
            client.1,
            s.shape,
            Leg::NOW,
            s.seed ^ 0x5555,
            &s.stats.bytes_down,
            s.crossed,
        );
        both_ways(up, down).await
    }
}

/// Runs both directions. Each ends on its own (half-close); an error in either (a reset,
/// or a failed write) ends both. Returns whether one failed: both sockets should then
/// close with a reset.
async fn both_ways(
    up: impl std::future::Future<Output = io::Result<()>>,
    down: impl std::future::Future<Output = io::Result<()>>,
) -> bool {
    tokio::pin!(up, down);
    let (mut up_done, mut down_done) = (false, false);
    loop {
        let r = tokio::select! {
            r = &mut up, if !up_done => { up_done = true; r }
            r = &mut down, if !down_done => { down_done = true; r }
        };
        if r.is_err() {
            return true;
        }
        if up_done && down_done {
            return false;
        }
    }
}

/// Sleeps until each chunk's departure, compensating for wake-up lateness.
///
/// A thread woken after a long sleep is late by more than the kernel timer's own slack
/// (idle CPUs sit in deeper power states; on this VM, ~0.2 ms after 100 ms idle against
/// ~0.05 ms after 1 ms). Measured without compensation, that put the achieved round trip
/// 0.16 ms over at 1 ms and 0.39 ms over at 100 ms. So the writer learns its lateness (an
/// exponentially weighted mean), asks to be woken that much early, and spins the rest of
/// the way. The spin is short (the lateness's spread, not its size), and back-to-back
/// chunks, already due, never sleep or spin.
struct Departures {
    timer: PreciseTimer,
    lateness_ns: f64,
    /// The lateness's mean absolute deviation (exponentially weighted): the lead is the
    /// mean plus two of these, so a wake-up later than the mean still leaves on time.
    spread_ns: f64,
}

/// The most the writer wakes early; bounds the spin if the estimate runs away.
const MAX_LEAD_NS: f64 = 1_000_000.0;

impl Departures {
    fn new() -> io::Result<Departures> {
        Ok(Departures {
            timer: PreciseTimer::new()?,
            lateness_ns: 50_000.0,
            spread_ns: 0.0,
        })
    }

    async fn sleep_until(&mut self, due: Instant) -> io::Result<()> {
        let now = Instant::now();
        if due <= now {
            return Ok(());
        }
        let lead_ns = self.lateness_ns + 2.0 * self.spread_ns;
        let lead = Duration::from_nanos(lead_ns.clamp(0.0, MAX_LEAD_NS) as u64);
        if due - now > lead {
            let target = due - lead;
            self.timer.sleep_until(target).await?;
            let late = Instant::now().saturating_duration_since(target).as_nanos() as f64;
            self.spread_ns = 0.8 * self.spread_ns + 0.2 * (late - self.lateness_ns).abs();
            self.lateness_ns = 0.8 * self.lateness_ns + 0.2 * late;
        }
        while Instant::now() < due {
            std::hint::spin_loop();
        }
        Ok(())
    }
}

/// Sleeps until `due` on a `timerfd` (tokio's timer would add up to a millisecond);
/// tokio's timer when no `timerfd` can be had.
async fn wait_until(due: Instant) {
    let timed = match Departures::new() {
        Ok(mut d) => d.sleep_until(due).await.is_ok(),
        Err(_) => false,
    };
    if !timed {
        tokio::time::sleep_until(due.into()).await;
    }
}

/// When one direction's bytes may first leave, and how old a kernel stamp may be and
/// still be believed (a connection held for its handshake reads its first bytes late).
#[derive(Debug, Clone, Copy)]
struct Leg {
    not_before: Option<Instant>,
    /// When the hold began, if bytes were queued when it ended: the date of a first read
    /// that carries no stamp. A client sends its first message as its connect returns,
    /// which can be before the relay asked the kernel to stamp the socket; dated when
    /// read, after the hold, it would leave half a round trip late.
    held_since: Option<Instant>,
    max_age: Duration,
}

impl Leg {
    const NOW: Leg = Leg {
        not_before: None,
        held_since: None,
        max_age: arrival::MAX_AGE,
    };
}

/// What the reader hands the writer.
enum Item {
    Data(Instant, Vec<u8>),
    Eof(Instant),
}

const CHUNK: usize = 64 * 1024;

/// Copies one direction until EOF (then shuts down the write side: half-close passed on)
/// or an error.
async fn pipe(
    mut r: Reader<'_>,
    mut w: Box<dyn AsyncWrite + Unpin + '_>,
    shape: Shape,
    leg: Leg,
    seed: u64,
    bytes: &AtomicU64,
    crossed: &AtomicU64,
) -> io::Result<()> {
    let (limit, slow_close) = (shape.faults.reset_after, shape.faults.slow_close);
    if shape.is_passthrough() {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = r.read(&mut buf).await?;
            if n == 0 {
                if !slow_close.is_zero() {
                    tokio::time::sleep(slow_close).await;
                }
                let _ = w.shutdown().await;
                return Ok(());
            }
            cross(crossed, n, limit)?;
            bytes.fetch_add(n as u64, Ordering::Relaxed);
            w.write_all(&buf[..n]).await?;
        }
    }
    // The window: at least 4 MiB, or twice the bandwidth-delay product.
    let bdp = shape
        .bandwidth
        .map(|b| b * (shape.one_way + shape.jitter).as_secs_f64() * 2.0)
        .unwrap_or(0.0);
    let window = (bdp as usize).max(4 << 20);
    let credit = Arc::new(Semaphore::new(window));
    r.stamp_arrivals();
    let (tx, mut rx) = mpsc::unbounded_channel::<Item>();
    let reader_credit = credit.clone();
    let reader = async move {
        let mut rng = Rng::new(seed | 1);
        let mut last_due = Instant::now();
        let mut link_free = Instant::now();
        let mut held_since = leg.held_since;
        loop {
            let permit = reader_credit
                .clone()
                .acquire_many_owned(CHUNK as u32)
                .await
                .map_err(|_| io::Error::other("relay window closed"))?;
            let mut buf = vec![0u8; CHUNK];
            // Dated from the kernel's stamp, not from this thread's wake-up (arrival.rs).
            let (n, stamped) = r.read_stamped(&mut buf, leg.max_age).await?;
            let first_held = held_since.take();
            let arrival = stamped.or(first_held).unwrap_or_else(Instant::now);
            // Bytes sent before the handshake let them leave wait for it.
            let arrival = leg.not_before.map_or(arrival, |t| arrival.max(t));
            let delay = handshake::leg(&shape, &mut rng);
            if n == 0 {
                let _ = tx.send(Item::Eof(last_due.max(arrival + delay) + slow_close));
                return Ok::<(), io::Error>(());
            }
            cross(crossed, n, limit)?;
            // Hand back the credit the chunk did not use; the writer returns the rest.
            drop(permit);
            reader_credit.forget_permits(n);
            if let Some(bw) = shape.faults.bandwidth_at(arrival, shape.bandwidth) {
                link_free = link_free.max(arrival) + Duration::from_secs_f64(n as f64 / bw);
            } else {
                link_free = arrival;
            }
            let due = (link_free + delay).max(last_due);
            last_due = due;
            buf.truncate(n);
            bytes.fetch_add(n as u64, Ordering::Relaxed);
            if tx.send(Item::Data(due, buf)).is_err() {
                return Ok(());
            }
        }
    };
    let writer = async move {
        let mut timer = Departures::new()?;
        while let Some(item) = rx.recv().await {
            match item {
                Item::Data(due, buf) => {
                    timer.sleep_until(due).await?;
                    w.write_all(&buf).await?;
                    credit.add_permits(buf.len());
                }
                Item::Eof(due) => {
                    timer.sleep_until(due).await?;
                    let _ = w.shutdown().await;
                    return Ok::<(), io::Error>(());
                }
            }
        }
        Ok(())
    };
    // The first error ends both halves (a reader blocked on a silent peer must not keep
    // a failed direction alive).
    tokio::try_join!(reader, writer).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_bandwidths_parse_or_say_why_not() {
        assert_eq!(
            "127.0.0.1:5432".parse::<Addr>().unwrap(),
            Addr::Tcp("127.0.0.1:5432".into())
        );
        assert_eq!(
            "/tmp/x/.s.PGSQL.5432".parse::<Addr>().unwrap(),
            Addr::Unix("/tmp/x/.s.PGSQL.5432".into())
        );
        let e = "localhost".parse::<Addr>().unwrap_err().to_string();
        assert!(e.contains("neither host:port nor a socket path"), "{e}");
        let e = "db:99999".parse::<Addr>().unwrap_err().to_string();
        assert!(e.contains("port \"99999\""), "{e}");
        assert_eq!(parse_bandwidth("100Mbit").unwrap(), 12.5e6);
        assert_eq!(parse_bandwidth("10MB").unwrap(), 10e6);
        assert_eq!(parse_bandwidth("1 Gbit/s").unwrap(), 125e6);
        assert!(parse_bandwidth("100 furlongs")
            .unwrap_err()
            .contains("unknown unit"));
        assert!(parse_bandwidth("0Mbit").unwrap_err().contains("more than zero"));
    }
}

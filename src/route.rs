//! Routes: the path a cell's client takes to its server. `direct`, or through relays
//! started in-process ([`crate::net::relay`]): a sidecar hop the app reaches over a Unix
//! socket or TCP (`path = "sidecar-unix" | "sidecar-tcp"`), and network distance
//! (`distance = "50ms"`, a round trip added on the long hop).
//!
//! ```text
//! direct:        client ───────────────────────────────────────────────> server
//! distance:      client ──> relay(+RTT) ───────────────────────────────> server
//! sidecar-unix:  client ──unix──> sidecar(0) ──tcp──> [relay(+RTT)] ───> server
//! sidecar-tcp:   client ──tcp───> sidecar(0) ──tcp──> [relay(+RTT)] ───> server
//! ```
//!
//! A route rewrites the target's host and port to the outermost relay; everything else
//! (user, database, password) is kept. With a TLS target, a sidecar opens TLS to the
//! server itself and the app speaks plaintext to it (the cloud SQL proxy arrangement);
//! without a sidecar, TLS runs end to end through the distance relay. The sidecar's own
//! TLS is PostgreSQL's (SSLRequest); a MySQL target with TLS is refused a sidecar, since
//! MySQL negotiates TLS inside its handshake. Before a distance is measured, [`verify`]
//! measures the round trip the route actually adds (the engine's cheapest request,
//! [`proto::Session::ping`], on one connection through it and one direct, p50 against
//! p50), so results carry requested and achieved RTT side by side.
//!
//! The kernel completes a TCP handshake to the relay itself, so the distance relay makes
//! a new connection pay it after the fact (`net::relay`'s handshake): the `connect` phase
//! stays local and the next phase holds the handshake's round trip, so a connect's total
//! is what a network of that RTT gives.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::net::relay::{Addr, Relay, Shape};
use crate::proto::PhaseCursor;
use crate::proto::{self, Endpoint};
use crate::targets::{Engine, Host, Target};

/// How the client reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathKind {
    Direct,
    SidecarUnix,
    SidecarTcp,
}

impl PathKind {
    /// The name `--path` and a cell's `path` take.
    pub fn as_str(self) -> &'static str {
        match self {
            PathKind::Direct => "direct",
            PathKind::SidecarUnix => "sidecar-unix",
            PathKind::SidecarTcp => "sidecar-tcp",
        }
    }

    pub fn parse(s: &str) -> Result<PathKind> {
        match s {
            "direct" => Ok(PathKind::Direct),
            "sidecar-unix" => Ok(PathKind::SidecarUnix),
            "sidecar-tcp" => Ok(PathKind::SidecarTcp),
            other => bail!("setting path = {other:?}: use direct, sidecar-unix or sidecar-tcp"),
        }
    }
}

/// A cell's route: its path and the round trip added on the long hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RouteSpec {
    pub path: PathKind,
    pub distance: Duration,
}

impl RouteSpec {
    pub const DIRECT: RouteSpec = RouteSpec {
        path: PathKind::Direct,
        distance: Duration::ZERO,
    };

    pub fn is_direct(&self) -> bool {
        *self == RouteSpec::DIRECT
    }
}

/// Relays started for a route, and the target that goes through them. Dropping it stops
/// the relays and removes their socket directory.
pub struct Route {
    pub spec: RouteSpec,
    pub target: Target,
    /// The relays, outermost (the client's side) first.
    relays: Vec<Relay>,
    dir: Option<PathBuf>,
}

impl Drop for Route {
    fn drop(&mut self) {
        // Relays first: each removes its socket file, then the directory is empty.
        self.relays.clear();
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

impl Route {
    /// The threads of this route's relays, whose CPU a run reports apart from the
    /// client's (a sidecar costs CPU on the application's machine too).
    pub fn relay_threads(&self) -> Vec<i32> {
        self.relays.iter().map(Relay::thread_id).collect()
    }
}

/// The server's address as a relay's upstream.
pub fn upstream_of(t: &Target) -> Addr {
    match &t.host {
        Host::Unix(_) => Addr::Unix(t.socket_path().expect("a Unix target has a socket path")),
        Host::Tcp(h) => {
            let host = t.hostaddr.map(|a| a.to_string()).unwrap_or_else(|| h.clone());
            if host.contains(':') {
                Addr::Tcp(format!("[{host}]:{}", t.port))
            } else {
                Addr::Tcp(format!("{host}:{}", t.port))
            }
        }
    }
}

/// Whether a MySQL target asks for TLS over TCP (any ssl-mode but DISABLED), where a
/// sidecar would have to speak TLS to the server itself.
fn uses_tls_mysql(t: &Target) -> bool {
    matches!(t.host, Host::Tcp(_)) && t.sslmode != crate::targets::SslMode::Disable
}

/// Starts the relays of `spec` in front of `target`.
pub fn build(target: &Target, spec: RouteSpec) -> Result<Route> {
    let sidecar = spec.path != PathKind::Direct;
    if sidecar && target.engine == Engine::Mysql && uses_tls_mysql(target) {
        // The sidecar's own TLS to the server speaks PostgreSQL's SSLRequest; MySQL asks
        // for TLS inside its handshake (the client's SSLRequest packet after the greeting),
        // which the relay does not take part in.
        bail!(
            "route: path = {} with {} (ssl-mode={}): a sidecar's TLS to the server is PostgreSQL-only; \
             MySQL and MariaDB take a sidecar in plaintext (ssl-mode=DISABLED, the sandbox's mariadb_tcp), \
             or TLS end to end on path = direct (with or without a distance)",
            spec.path.as_str(),
            target.name(),
            target.sslmode.as_mysql_str(),
        );
    }
    // A sidecar in front of a TLS target speaks TLS to the server itself and plaintext to
    // the app, as a cloud SQL proxy does.
    let upstream_tls = if sidecar && crate::proto::postgres::uses_tls(target) {
        crate::net::transport::TlsSetup::for_target(target)
            .map_err(|e| anyhow!("route: the sidecar's TLS to the server: {e}"))?
    } else {
        None
    };
    if upstream_tls.is_some() && matches!(target.host, Host::Unix(_)) {
        bail!(
            "route: a sidecar with TLS needs a TCP target, not {}",
            target.name()
        );
    }
    let mut relays = Vec::new();
    let mut dir = None;
    let mut upstream = upstream_of(target);
    // Unix listeners need a short directory (socket paths are capped near 107 bytes).
    let mut socket_in = |port: u16| -> Result<Addr> {
        if dir.is_none() {
            dir = Some(crate::scratch::make_temp_dir().context("route: cannot create a socket directory")?);
        }
        Ok(Addr::Unix(dir.as_ref().unwrap().join(format!(".s.PGSQL.{port}"))))
    };
    // The distance relay listens the way the client would have reached the server, unless a
    // sidecar stands in front of it (the long hop is then TCP).
    if !spec.distance.is_zero() {
        let listen = match (&target.host, spec.path) {
            (Host::Unix(_), PathKind::Direct) => socket_in(target.port)?,
            _ => Addr::Tcp("127.0.0.1:0".into()),
        };
        let r = Relay::start(&listen, &upstream, Shape::rtt(spec.distance))
            .context("route: cannot start the distance relay")?;
        upstream = r.addr().clone();
        relays.push(r);
    }
    match spec.path {
        PathKind::Direct => {}
        PathKind::SidecarUnix | PathKind::SidecarTcp => {
            let listen = if spec.path == PathKind::SidecarUnix {
                socket_in(target.port.wrapping_add(1).max(1))?
            } else {
                Addr::Tcp("127.0.0.1:0".into())
            };
            let r = Relay::start_with(
                &listen,
                &upstream,
                Shape::rtt(Duration::ZERO),
                upstream_tls.clone(),
            )
            .context("route: cannot start the sidecar relay")?;
            relays.push(r);
        }
    }
    relays.reverse();
    let mut t = target.clone();
    if upstream_tls.is_some() {
        // The app's side of the sidecar is plaintext; TLS runs from the sidecar on.
        t.sslmode = crate::targets::SslMode::Disable;
    }
    if let Some(outer) = relays.first() {
        match outer.addr() {
            // A MySQL target names its socket file; PostgreSQL's, the directory and port.
            Addr::Unix(p) if t.engine == Engine::Mysql => t.host = Host::Unix(p.clone()),
            Addr::Unix(p) => {
                let port = p
                    .extension()
                    .and_then(|e| e.to_str())
                    .and_then(|e| e.parse().ok())
                    .ok_or_else(|| anyhow!("route: unexpected socket name {}", p.display()))?;
                t.host = Host::Unix(p.parent().unwrap().to_path_buf());
                t.port = port;
            }
            Addr::Tcp(a) => {
                let (h, p) = a.rsplit_once(':').unwrap();
                t.host = Host::Tcp(h.to_string());
                t.hostaddr = None;
                t.port = p.parse().context("route: relay port")?;
            }
        }
    }
    Ok(Route {
        spec,
        target: t,
        relays,
        dir,
    })
}

/// Requested and achieved added round trip of a route.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Verified {
    pub requested_ms: f64,
    pub achieved_ms: f64,
    /// p50 of a ping's round trip (the engine's cheapest), direct and through the route.
    pub direct_p50_ms: f64,
    pub route_p50_ms: f64,
}

impl Verified {
    /// Whether achieved is within max(0.2 ms, 3%) of requested: the relay's bar.
    pub fn within_tolerance(&self) -> bool {
        (self.achieved_ms - self.requested_ms).abs() <= (0.03 * self.requested_ms).max(0.2)
    }
}

async fn query_p50(ep: &Endpoint, n: usize) -> Result<f64> {
    let (mut session, _) = proto::connect(ep, &PhaseCursor::default())
        .await
        .map_err(|e| anyhow!("{e}"))?;
    let mut times = Vec::with_capacity(n);
    // The first exchange warms the backend's caches; it is not counted.
    for i in 0..=n {
        let t0 = Instant::now();
        session.ping().await.map_err(|e| anyhow!("{e}"))?;
        if i > 0 {
            times.push(t0.elapsed().as_secs_f64() * 1e3);
        }
    }
    session.close().await;
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// Measures the round trip `route` adds over `direct`: p50 of pings on one
/// connection each way, about 2 s worth (10 to 200 of them) at the requested distance.
pub async fn verify(direct: &Endpoint, route: &Endpoint, requested: Duration) -> Result<Verified> {
    let n = (2000.0f64 / (requested.as_secs_f64() * 1e3 + 1.0)).clamp(10.0, 200.0) as usize;
    let d = query_p50(direct, n).await.context("route check, direct")?;
    let r = query_p50(route, n)
        .await
        .context("route check, through the relays")?;
    Ok(Verified {
        requested_ms: requested.as_secs_f64() * 1e3,
        achieved_ms: r - d,
        direct_p50_ms: d,
        route_p50_ms: r,
    })
}

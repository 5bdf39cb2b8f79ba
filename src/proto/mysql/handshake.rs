//! The MySQL/MariaDB handshake: the server's greeting, TLS (SSLRequest), and
//! authentication with its plugin exchanges, up to the OK packet: the phases of a
//! connect after the socket's. Apart from the session's queries because it runs once per
//! connection and holds all the authentication plugins' state.

use std::future::Future;

use mysql_common::auth::plugins::{AuthProc, ChallengeResponsePlugin, Context};
use mysql_common::constants::{CapabilityFlags, MariadbCapabilities};
use mysql_common::io::ParseBuf;
use mysql_common::packets::{AuthPlugin, AuthSwitchRequest, HandshakePacket, HandshakeResponse, SslRequest};
use mysql_common::proto::MySerialize;

use super::codec::{ok_packet, server_error};
use super::{protocol, Session};
use crate::net::transport::{self, Stream};
use crate::proto::socket::{open_socket, tls_cause};
use crate::proto::{ConnectError, Endpoint, ErrorKind, Phase, PhaseCursor, QueryOutcome, Stopwatch};
use crate::targets::{Host, Target};

/// What we tell the server we accept, as the `mysql` client does.
const MAX_PACKET: u32 = 16 << 20;
/// utf8mb4_general_ci.
const COLLATION: u8 = 45;
/// A bound on auth exchanges: each plugin needs at most three.
const MAX_AUTH_STEPS: usize = 8;

/// What the authentication plugins need to know about the connection.
struct AuthContext<'a> {
    pass: &'a [u8],
    ipc: bool,
    tls: bool,
    scramble: &'a [u8],
}

impl Context for AuthContext<'_> {
    fn pass(&self) -> &[u8] {
        self.pass
    }
    fn is_ipc_transport(&self) -> bool {
        self.ipc
    }
    fn is_tls_transport(&self) -> bool {
        self.tls
    }
    fn scramble(&self) -> &[u8] {
        self.scramble
    }
    fn server_key_pem(&self) -> Option<&[u8]> {
        None
    }
}

impl crate::proto::Wire for Session {
    /// The greeting, TLS when the endpoint has it, and authentication, each marked on `sw`.
    async fn open(ep: &Endpoint, cursor: &PhaseCursor, sw: &mut Stopwatch) -> Result<Session, ConnectError> {
        let t = &ep.target;
        let stream = open_socket(t, cursor, sw).await?;
        let mut s = Session::on(stream);
        cursor.set(Phase::Startup);
        let greeting = s.greeting().await?;
        sw.mark(Phase::Startup, s.round_trips());
        if ep.tls.is_some() {
            cursor.set(Phase::Tls);
            s = s.negotiate_tls(ep, &greeting).await?;
            sw.mark(Phase::Tls, s.round_trips());
        }
        cursor.set(Phase::Auth);
        s.authenticate(t, &greeting).await?;
        sw.mark(Phase::Auth, s.round_trips());
        Ok(s)
    }

    fn first_query(&mut self, sql: &str) -> impl Future<Output = Result<QueryOutcome, ConnectError>> + Send {
        self.simple_query(sql)
    }

    fn stream(&self) -> &Stream {
        &self.stream
    }
}

/// What the greeting told us, owned.
struct Greeting {
    caps: CapabilityFlags,
    /// MariaDB's extended capabilities (empty from MySQL).
    mariadb: MariadbCapabilities,
    nonce: Vec<u8>,
    plugin: AuthPlugin<'static>,
    version: (u16, u16, u16),
}

impl Session {
    /// The server's greeting (Protocol::HandshakeV10), or its error (too many
    /// connections, host not allowed).
    async fn greeting(&mut self) -> Result<Greeting, ConnectError> {
        let p = Phase::Startup;
        let pkt = self.packet(p).await?;
        if pkt.first() == Some(&0xff) {
            return Err(server_error(p, &pkt));
        }
        if pkt.first() != Some(&10) {
            self.broken = true;
            return Err(protocol(
                p,
                format!(
                    "the server's greeting has protocol version {:?}, not 10 (is this a MySQL or MariaDB server?)",
                    pkt.first()
                ),
            ));
        }
        let hs: HandshakePacket = ParseBuf(&pkt)
            .parse(())
            .map_err(|e| protocol(p, format!("malformed greeting: {e}")))?;
        self.connection_id = hs.connection_id();
        // MariaDB prefixes its version with "5.5.5-" for clients that predate it.
        let version = hs.server_version_str();
        self.server_version = Some(version.strip_prefix("5.5.5-").unwrap_or(&version).to_string());
        let caps = hs.capabilities();
        if !caps.contains(CapabilityFlags::CLIENT_PROTOCOL_41) {
            return Err(protocol(p, "the server does not speak protocol 4.1".into()));
        }
        // MariaDB clears CLIENT_MYSQL (CLIENT_LONG_PASSWORD's bit) when it offers
        // extended capabilities in the greeting's filler.
        let mariadb = if caps.contains(CapabilityFlags::CLIENT_LONG_PASSWORD) {
            MariadbCapabilities::empty()
        } else {
            hs.mariadb_ext_capabilities()
        };
        Ok(Greeting {
            caps,
            mariadb,
            nonce: hs.nonce(),
            plugin: hs
                .auth_plugin()
                .map(|a| a.into_owned())
                .unwrap_or(AuthPlugin::MysqlNativePassword),
            version: hs.server_version_parsed().unwrap_or((5, 5, 0)),
        })
    }

    fn client_caps(&self, g: &Greeting, tls: bool) -> CapabilityFlags {
        let mut want = CapabilityFlags::CLIENT_PROTOCOL_41
            | CapabilityFlags::CLIENT_LONG_PASSWORD
            | CapabilityFlags::CLIENT_SECURE_CONNECTION
            | CapabilityFlags::CLIENT_PLUGIN_AUTH
            | CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
            | CapabilityFlags::CLIENT_TRANSACTIONS
            | CapabilityFlags::CLIENT_MULTI_RESULTS
            | CapabilityFlags::CLIENT_CONNECT_WITH_DB;
        if tls {
            want |= CapabilityFlags::CLIENT_SSL;
        }
        want & g.caps
    }

    /// The MariaDB extended capabilities we ask for: only the metadata cache.
    fn client_mariadb_caps(g: &Greeting) -> MariadbCapabilities {
        MariadbCapabilities::MARIADB_CLIENT_CACHE_METADATA & g.mariadb
    }

    /// SSLRequest (the first half of a handshake response), then the TLS handshake.
    async fn negotiate_tls(mut self, ep: &Endpoint, g: &Greeting) -> Result<Session, ConnectError> {
        let p = Phase::Tls;
        let t = &ep.target;
        if !g.caps.contains(CapabilityFlags::CLIENT_SSL) {
            if t.sslmode.requires_tls() {
                return Err(ConnectError::new(
                    p,
                    ErrorKind::Tls(
                        "the server does not support TLS, but the target's ssl-mode requires it".into(),
                    ),
                ));
            }
            return Ok(self);
        }
        if !self.rbuf.is_empty() {
            // Bytes after the greeting and before TLS were not sent by a server that
            // waits for us: a man in the middle could inject them.
            return Err(protocol(
                p,
                "the server sent data before the TLS handshake".into(),
            ));
        }
        let tls = ep.tls.as_ref().expect("negotiate_tls is called with a TLS setup");
        SslRequest::new(self.client_caps(g, true), MAX_PACKET, COLLATION)
            .with_mariadb_capabilities(Self::client_mariadb_caps(g))
            .serialize(&mut self.wbuf);
        self.send(p).await?;
        let Session { stream, .. } = self;
        match transport::handshake_tls(stream, tls).await {
            Ok(stream) => Ok(Session {
                stream,
                caps: self.caps | CapabilityFlags::CLIENT_SSL,
                ..self
            }),
            Err(e) => Err(ConnectError::new(
                p,
                ErrorKind::Tls(format!("handshake failed: {}", tls_cause(&e))),
            )),
        }
    }

    /// The handshake response, then every plugin exchange and auth switch, up to OK.
    async fn authenticate(&mut self, t: &Target, g: &Greeting) -> Result<(), ConnectError> {
        let p = Phase::Auth;
        let tls = self.caps.contains(CapabilityFlags::CLIENT_SSL);
        let ipc = matches!(t.host, Host::Unix(_));
        let pass = t.password().unwrap_or_default().as_bytes();
        let mut plugin = g.plugin.clone();
        let mut nonce = g.nonce.clone();
        let mut proc = init_plugin(&plugin)?;
        fn ctx<'a>(pass: &'a [u8], ipc: bool, tls: bool, scramble: &'a [u8]) -> AuthContext<'a> {
            AuthContext {
                pass,
                ipc,
                tls,
                scramble,
            }
        }
        let first = run_plugin(&mut proc, &plugin, ctx(pass, ipc, tls, &nonce), &nonce)?;
        self.caps = self.client_caps(g, tls);
        let db = (!t.dbname.is_empty()).then_some(t.dbname.as_bytes());
        HandshakeResponse::new(
            Some(first.data().unwrap_or_default()),
            g.version,
            Some(t.user.as_bytes()),
            db,
            Some(plugin.clone()),
            self.caps,
            None,
            MAX_PACKET,
        )
        .with_mariadb_ext_capabilities(Self::client_mariadb_caps(g))
        .serialize(&mut self.wbuf);
        self.cache_metadata = !Self::client_mariadb_caps(g).is_empty();
        self.send(p).await?;
        for _ in 0..MAX_AUTH_STEPS {
            let pkt = self.packet(p).await?;
            match pkt.first() {
                Some(0x00) => {
                    self.status = ok_packet(&pkt).1;
                    return Ok(());
                }
                Some(0xff) => return Err(server_error(p, &pkt)),
                Some(0xfe) => {
                    let switch: AuthSwitchRequest = ParseBuf(&pkt)
                        .parse(())
                        .map_err(|e| protocol(p, format!("malformed auth switch request: {e}")))?;
                    plugin = switch.auth_plugin().into_owned();
                    nonce = switch.plugin_data().to_vec();
                    proc = init_plugin(&plugin)?;
                    let r = run_plugin(&mut proc, &plugin, ctx(pass, ipc, tls, &nonce), &nonce)?;
                    self.wbuf.extend_from_slice(r.data().unwrap_or_default());
                    self.send(p).await?;
                }
                Some(0x01) => {
                    let r = run_plugin(&mut proc, &plugin, ctx(pass, ipc, tls, &nonce), &pkt[1..])?;
                    if let Some(data) = r.data() {
                        self.wbuf.extend_from_slice(data);
                        self.send(p).await?;
                    }
                }
                _ => {
                    self.broken = true;
                    return Err(protocol(p, "unexpected packet during authentication".into()));
                }
            }
        }
        self.broken = true;
        Err(protocol(
            p,
            format!("authentication did not finish after {MAX_AUTH_STEPS} exchanges"),
        ))
    }
}

fn init_plugin(plugin: &AuthPlugin<'_>) -> Result<AuthProc, ConnectError> {
    AuthProc::init(plugin).map_err(|_| {
        ConnectError::new(
            Phase::Auth,
            ErrorKind::Protocol(format!(
                "the server asks for authentication plugin {:?}, which connbench does not support",
                String::from_utf8_lossy(plugin.as_bytes())
            )),
        )
    })
}

/// One step of a plugin. The server's data (a nonce, an RSA key) goes into third-party
/// arithmetic that panics on some malformed inputs (an RSA key too short for the
/// password), so a panic is caught and becomes this connect's protocol error.
fn run_plugin(
    proc: &mut AuthProc,
    plugin: &AuthPlugin<'_>,
    ctx: AuthContext<'_>,
    challenge: &[u8],
) -> Result<mysql_common::auth::plugins::Response, ConnectError> {
    let name = String::from_utf8_lossy(plugin.as_bytes()).into_owned();
    let err = |why: String| {
        ConnectError::new(
            Phase::Auth,
            ErrorKind::Protocol(format!("authentication plugin {name}: {why}")),
        )
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| proc.run(ctx, challenge))) {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(err(e.to_string())),
        Err(_) => Err(err(
            "the server's data made the plugin fail (e.g. an RSA key too short for the password)".into(),
        )),
    }
}

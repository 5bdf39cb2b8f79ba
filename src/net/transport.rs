//! Transport: the byte stream under a database session (Unix socket, TCP, or TLS over
//! TCP), with counters that every measurement reads.
//!
//! [`Stream`] is an enum rather than a trait object so the hot path stays monomorphic.
//! Every variant wraps its socket in [`Counted`], which counts bytes both ways and the
//! round trips the client waited for: a read that returns data after the client last
//! wrote is one turn of the conversation. For TLS the counter sits *under* rustls, so it
//! sees the handshake's flights as they cross the wire. The counts are measured, never
//! assumed from the protocol.
//!
//! TLS configuration ([`TlsSetup`]) is built once per target and shared, so no
//! measurement pays for building a TLS context (a flaw of the per-connect tools our
//! users compare against). Session resumption is off: PostgreSQL's server disables it,
//! and libpq never resumes, so every handshake here is a full one, as for applications.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::targets::{Host, SslMode, Target};

/// Bytes and round trips seen on one connection.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Reads that returned data after a write: the turns the client waited for. The
    /// connect counts as the client's first move, so a server that speaks first (MySQL's
    /// greeting, which a server far away sends only when the client's ACK arrives) is a
    /// turn too.
    pub round_trips: u32,
}

/// A socket with [`Counters`].
#[derive(Debug)]
pub struct Counted<S> {
    inner: S,
    counters: Counters,
    wrote_last: bool,
}

impl<S> Counted<S> {
    pub fn new(inner: S) -> Self {
        Counted {
            inner,
            counters: Counters::default(),
            wrote_last: true,
        }
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }

    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        if n > 0 {
            self.counters.bytes_received += n;
            if self.wrote_last {
                self.counters.round_trips += 1;
                self.wrote_last = false;
            }
        }
        poll
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, data);
        if let Poll::Ready(Ok(n)) = &poll {
            if *n > 0 {
                self.counters.bytes_sent += *n as u64;
                self.wrote_last = true;
            }
        }
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The stream a session talks over.
#[derive(Debug)]
pub enum Stream {
    Unix(Counted<UnixConn>),
    Tcp(Counted<TcpStream>),
    Tls(Box<TlsStream<Counted<TcpStream>>>),
}

impl Stream {
    pub fn counters(&self) -> Counters {
        match self {
            Stream::Unix(s) => s.counters(),
            Stream::Tcp(s) => s.counters(),
            Stream::Tls(s) => s.get_ref().0.counters(),
        }
    }

    /// What TLS negotiated, when TLS is in use.
    pub fn tls_info(&self) -> Option<TlsInfo> {
        let Stream::Tls(s) = self else { return None };
        let conn = s.get_ref().1;
        Some(TlsInfo {
            version: conn
                .protocol_version()
                .and_then(|v| v.as_str())
                .unwrap_or("unknown")
                .replace('_', "."),
            cipher: conn
                .negotiated_cipher_suite()
                .and_then(|c| c.suite().as_str())
                .unwrap_or("unknown")
                .to_string(),
        })
    }

    /// The DER of the server's certificate, for SCRAM channel binding.
    pub fn peer_certificate(&self) -> Option<&[u8]> {
        let Stream::Tls(s) = self else { return None };
        s.get_ref().1.peer_certificates()?.first().map(|c| c.as_ref())
    }
}

/// The negotiated TLS protocol version and cipher suite.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct TlsInfo {
    pub version: String,
    pub cipher: String,
}

macro_rules! each_variant {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            Stream::Unix($s) => $e,
            Stream::Tcp($s) => $e,
            Stream::Tls($s) => $e,
        }
    };
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        each_variant!(self, s => Pin::new(s).poll_read(cx, buf))
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        each_variant!(self, s => Pin::new(s).poll_write(cx, data))
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each_variant!(self, s => Pin::new(s).poll_flush(cx))
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each_variant!(self, s => Pin::new(s).poll_shutdown(cx))
    }
}

/// Opens a Unix socket connection.
pub async fn connect_unix(path: &Path) -> io::Result<Stream> {
    Ok(Stream::Unix(Counted::new(UnixConn::connect(path)?)))
}

/// A Unix stream socket that the runtime watches for readability only.
///
/// Why not tokio's `UnixStream`: it registers every socket for reads and writes, and on a
/// Unix socket the kernel signals "writable" each time the peer *reads* (it frees the
/// sent data: `unix_write_space`, unlike TCP, which signals only after a write found the
/// buffer full). In a request/response loop that is a second wake-up per query, as the
/// server picks up the request, while the client sleeps waiting for the answer: measured
/// with one client per thread on MariaDB, 1.49 `epoll_wait` sleeps per transaction
/// instead of 1.00. A client that blocks in `recv` or `poll(POLLIN)` (libpq, libmariadb)
/// never sees those wake-ups, so connbench should not pay for them either. Writes go
/// straight to the socket; only a write that finds the buffer full (a statement larger
/// than the socket buffer) registers a duplicate descriptor for writability, for as long
/// as it waits.
#[derive(Debug)]
pub struct UnixConn {
    fd: AsyncFd<std::os::unix::net::UnixStream>,
    write_wait: Option<AsyncFd<std::os::fd::OwnedFd>>,
}

impl UnixConn {
    /// Connects without blocking the thread: a Unix socket's connect completes at once
    /// or fails (a full listen queue gives `WouldBlock`, as with tokio's own connect).
    pub fn connect(path: &Path) -> io::Result<UnixConn> {
        let sock = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM.nonblocking(), None)?;
        sock.connect(&socket2::SockAddr::unix(path)?)?;
        // Created non-blocking: no second fcntl inside the timed connect phase.
        UnixConn::register(sock.into())
    }

    /// Wraps a connected socket (made non-blocking here).
    pub fn from_std(s: std::os::unix::net::UnixStream) -> io::Result<UnixConn> {
        s.set_nonblocking(true)?;
        UnixConn::register(s)
    }

    /// Registers a non-blocking socket with the runtime, for readability.
    fn register(s: std::os::unix::net::UnixStream) -> io::Result<UnixConn> {
        Ok(UnixConn {
            // SAFETY: the UnixStream owns its descriptor and keeps it open, unchanged,
            // for as long as the AsyncFd owns the stream.
            fd: unsafe { AsyncFd::register_with_interest(s, Interest::READABLE)? },
            write_wait: None,
        })
    }
}

impl AsyncRead for UnixConn {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        loop {
            let mut guard = std::task::ready!(self.fd.poll_read_ready(cx))?;
            // SAFETY: only recv writes into the unfilled part (it never de-initialises a
            // byte), at most `want` bytes, and only the bytes it reports are marked filled.
            let unfilled = unsafe { buf.unfilled_mut() };
            let want = unfilled.len();
            let n = unsafe { libc::recv(self.fd.as_raw_fd(), unfilled.as_mut_ptr().cast(), want, 0) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::WouldBlock {
                    guard.clear_ready();
                    continue;
                }
                return Poll::Ready(Err(e));
            }
            let n = n as usize;
            // SAFETY: the kernel initialised these n bytes.
            unsafe { buf.assume_init(n) };
            buf.advance(n);
            // A short read drained the socket: wait for the next edge rather than pay
            // for a read that would only say EAGAIN (what tokio's own streams do).
            if n > 0 && n < want {
                guard.clear_ready();
            }
            return Poll::Ready(Ok(()));
        }
    }
}

impl AsyncWrite for UnixConn {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            // MSG_NOSIGNAL: a server that closed its end gives EPIPE here, never SIGPIPE.
            // SAFETY: send reads at most data.len() bytes from a live slice.
            let n = unsafe {
                libc::send(
                    self.fd.as_raw_fd(),
                    data.as_ptr().cast(),
                    data.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            if n >= 0 {
                self.write_wait = None;
                return Poll::Ready(Ok(n as usize));
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::WouldBlock {
                return Poll::Ready(Err(e));
            }
            if self.write_wait.is_none() {
                let dup = self.fd.get_ref().as_fd().try_clone_to_owned()?;
                // SAFETY: as above, the OwnedFd owns the duplicate for its whole life.
                self.write_wait = Some(unsafe { AsyncFd::register_with_interest(dup, Interest::WRITABLE)? });
            }
            let wait = self.write_wait.as_ref().expect("set above");
            let mut guard = std::task::ready!(wait.poll_write_ready(cx))?;
            guard.clear_ready();
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.fd.get_ref().shutdown(std::net::Shutdown::Write))
    }
}

/// Opens a TCP connection, with Nagle off as libpq does.
pub async fn connect_tcp(addr: SocketAddr) -> io::Result<Stream> {
    let s = TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    Ok(Stream::Tcp(Counted::new(s)))
}

/// Runs the TLS handshake over an open TCP stream.
pub async fn handshake_tls(stream: Stream, tls: &TlsSetup) -> io::Result<Stream> {
    let Stream::Tcp(tcp) = stream else {
        return Err(io::Error::other("TLS is only negotiated over TCP"));
    };
    let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
    let s = connector.connect(tls.server_name.clone(), tcp).await?;
    Ok(Stream::Tls(Box::new(s)))
}

/// A target's TLS configuration, built once and shared by every connection to it.
#[derive(Clone)]
pub struct TlsSetup {
    pub config: Arc<ClientConfig>,
    pub server_name: ServerName<'static>,
}

impl std::fmt::Debug for TlsSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSetup")
            .field("server_name", &self.server_name)
            .finish()
    }
}

impl TlsSetup {
    /// The TLS configuration a target asks for, or `None` when it never uses TLS
    /// (`sslmode=disable`, or a Unix socket: libpq never negotiates TLS there).
    pub fn for_target(t: &Target) -> Result<Option<TlsSetup>, String> {
        let host = match &t.host {
            Host::Unix(_) => return Ok(None),
            Host::Tcp(h) => h,
        };
        if t.sslmode == SslMode::Disable {
            return Ok(None);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        // libpq: with a root certificate file present, sslmode=require verifies the
        // chain like verify-ca.
        let roots = match (&t.sslrootcert, t.sslmode) {
            (Some(p), _) if p.exists() => Some(load_roots(p)?),
            (Some(p), SslMode::VerifyCa | SslMode::VerifyFull) => {
                return Err(format!("sslrootcert {} not found", p.display()))
            }
            _ => None,
        };
        let verifier: Arc<dyn ServerCertVerifier> = match (t.sslmode, roots) {
            (SslMode::VerifyFull, Some(roots)) => {
                WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                    .build()
                    .map_err(|e| e.to_string())?
            }
            (SslMode::VerifyCa | SslMode::Require, Some(roots)) => Arc::new(NoHostCheck {
                provider: provider.clone(),
                chain: Some(
                    WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                        .build()
                        .map_err(|e| e.to_string())?,
                ),
            }),
            (SslMode::VerifyCa | SslMode::VerifyFull, None) => {
                return Err(format!("sslmode={} needs sslrootcert", t.sslmode.as_str()))
            }
            _ => Arc::new(NoHostCheck {
                provider: provider.clone(),
                chain: None,
            }),
        };
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        config.resumption = rustls::client::Resumption::disabled();
        // libpq sends SNI only for host names, never for IP addresses; rustls does the same.
        config.enable_sni = t.sslsni;
        let server_name = ServerName::try_from(host.as_str())
            .map_err(|e| format!("host {host:?} is not a valid TLS server name: {e}"))?
            .to_owned();
        Ok(Some(TlsSetup {
            config: Arc::new(config),
            server_name,
        }))
    }
}

fn load_roots(path: &Path) -> Result<Arc<RootCertStore>, String> {
    let mut roots = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read sslrootcert {}: {e}", path.display()))?;
    for cert in certs {
        let cert = cert.map_err(|e| format!("cannot parse sslrootcert {}: {e}", path.display()))?;
        roots
            .add(cert)
            .map_err(|e| format!("bad certificate in sslrootcert {}: {e}", path.display()))?;
    }
    if roots.is_empty() {
        return Err(format!("sslrootcert {} holds no certificate", path.display()));
    }
    Ok(Arc::new(roots))
}

/// The certificate check of every sslmode short of verify-full (which is WebPki's own).
/// sslmode=verify-ca, and require with a root certificate file (`chain` set): the chain
/// must lead to the root, the host name is not checked. sslmode=prefer/require without a
/// root certificate (`chain` empty): encrypt, verify nothing (libpq's behaviour).
/// Handshake signatures are checked either way, so the session is well-formed.
#[derive(Debug)]
struct NoHostCheck {
    provider: Arc<CryptoProvider>,
    chain: Option<Arc<WebPkiServerVerifier>>,
}

impl ServerCertVerifier for NoHostCheck {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The hash for SCRAM's `tls-server-end-point` channel binding (RFC 5929 §4.1): the
/// certificate's own signature hash, with MD5 and SHA-1 raised to SHA-256. We recognise
/// SHA-384 and SHA-512 signatures by their algorithm OIDs and use SHA-256 otherwise.
pub fn server_end_point_hash(cert_der: &[u8]) -> Vec<u8> {
    use sha2::Digest;
    // DER of the OIDs: sha384WithRSAEncryption, ecdsa-with-SHA384, sha512WithRSAEncryption,
    // ecdsa-with-SHA512.
    const SHA384: [&[u8]; 2] = [
        &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0c],
        &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03],
    ];
    const SHA512: [&[u8]; 2] = [
        &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0d],
        &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x04],
    ];
    let has = |oid: &[u8]| cert_der.windows(oid.len()).any(|w| w == oid);
    if SHA512.iter().any(|o| has(o)) {
        sha2::Sha512::digest(cert_der).to_vec()
    } else if SHA384.iter().any(|o| has(o)) {
        sha2::Sha384::digest(cert_der).to_vec()
    } else {
        sha2::Sha256::digest(cert_der).to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn counts_bytes_and_turns() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        b.set_nonblocking(true).unwrap();
        let mut b = tokio::net::UnixStream::from_std(b).unwrap();
        let mut s = Stream::Unix(Counted::new(UnixConn::from_std(a).unwrap()));
        s.write_all(b"ping").await.unwrap();
        s.write_all(b"ping").await.unwrap();
        b.write_all(b"pong").await.unwrap();
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).await.unwrap();
        // Unprompted data arriving in pieces is still one turn.
        b.write_all(b"xy").await.unwrap();
        s.read_exact(&mut buf[..2]).await.unwrap();
        s.write_all(b"again").await.unwrap();
        b.write_all(b"z").await.unwrap();
        s.read_exact(&mut buf[..1]).await.unwrap();
        let c = s.counters();
        assert_eq!(c.bytes_sent, 13);
        assert_eq!(c.bytes_received, 7);
        assert_eq!(c.round_trips, 2);
    }

    /// The one path where a Unix connection registers for writability: a write larger
    /// than the socket buffer, which must wait for the reader and then finish.
    #[tokio::test]
    async fn a_write_larger_than_the_socket_buffer_waits_for_the_reader() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        b.set_nonblocking(true).unwrap();
        let mut b = tokio::net::UnixStream::from_std(b).unwrap();
        let mut s = UnixConn::from_std(a).unwrap();
        let big: Vec<u8> = (0..4usize << 20).map(|i| i as u8).collect();
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            b.read_to_end(&mut got).await.unwrap();
            got
        });
        s.write_all(&big).await.unwrap();
        assert!(
            s.write_wait.is_none(),
            "the writability registration is dropped after the write"
        );
        s.shutdown().await.unwrap();
        assert!(reader.await.unwrap() == big, "every byte arrives, in order");
    }
}

//! `record --listen-tls`: the recorder's own TLS toward the application, so that an
//! application that requires TLS (`sslmode=require` or `verify-full`, MySQL's
//! `ssl-mode=REQUIRED`) is recorded as it runs. This module owns the recorder's identity
//! (a certificate it generates, signed by a CA it generates, or the user's own files) and
//! one measured handshake with a client; the recorder decides when to hold one.
//!
//! Why a CA of its own rather than a self-signed certificate: a `verify-full`
//! application needs a root to trust, and a CA file beside the trace is what libpq's
//! `sslrootcert` and MariaDB's `--ssl-ca` take; the leaf's private key stays in memory,
//! and neither key is ever written (only the CA's certificate is).
//!
//! The handshake is measured where the recorder stands: its time from when it began (the
//! caller says when: PostgreSQL's `S` written, MySQL's SSLRequest read) to the client's
//! Finished read, and its round trips as the flights the recorder wrote that the client
//! waited for ([`Flights`]). TLS 1.3 session tickets are not sent: they would be one more
//! flight after the handshake, which no client waits for, and no driver here resumes.

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::server::TlsStream;

use connbench_trace::TlsAccepted;

/// A client that starts a handshake and stalls is given up on after this: its session
/// closes, the recorder goes on.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The recorder's TLS identity toward applications.
#[derive(Clone)]
pub struct ListenTls {
    config: Arc<ServerConfig>,
    /// The generated CA's certificate (PEM), for the file beside the trace; `None` with
    /// the user's own certificate.
    pub ca_pem: Option<String>,
    /// The names the generated certificate covers, for the message.
    pub names: Vec<String>,
}

impl std::fmt::Debug for ListenTls {
    // The key stays out of every debug print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenTls").field("names", &self.names).finish()
    }
}

impl ListenTls {
    /// A CA and a server certificate signed by it, both made now, for `host` (the
    /// --listen host: an IP address SAN for an address, a DNS name for a name; a
    /// wildcard address gives the machine's host name instead) and localhost.
    pub fn generate(host: &str) -> Result<ListenTls> {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
            KeyPair, KeyUsagePurpose,
        };
        let mut names = Vec::new();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        match host.parse::<std::net::IpAddr>() {
            Ok(ip) if ip.is_unspecified() => {
                if let Some(h) = host_name() {
                    names.push(h);
                }
            }
            _ => names.push(host.to_string()),
        }
        for n in ["localhost", "127.0.0.1", "::1"] {
            if !names.iter().any(|m| m == n) {
                names.push(n.to_string());
            }
        }
        let phase = "--listen-tls: generating the recorder's certificate";
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).context(phase)?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "connbench record CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let ca =
            CertifiedIssuer::self_signed(ca_params, KeyPair::generate().context(phase)?).context(phase)?;
        let mut params = CertificateParams::new(names.clone())
            .with_context(|| format!("--listen-tls: {host:?} cannot be a certificate's name"))?;
        params
            .distinguished_name
            .push(DnType::CommonName, names[0].clone());
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().context(phase)?;
        let cert = params.signed_by(&key, &ca).context(phase)?;
        let chain = vec![cert.der().clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        Ok(ListenTls {
            config: server_config(chain, key).context(phase)?,
            ca_pem: Some(ca.pem()),
            names,
        })
    }

    /// The user's own certificate chain and key (PEM files), checked to match.
    pub fn from_files(cert: &Path, key: &Path) -> Result<ListenTls> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .map_err(|e| anyhow::anyhow!("--listen-cert {}: cannot read it: {e}", cert.display()))?
            .collect::<Result<_, _>>()
            .map_err(|e| anyhow::anyhow!("--listen-cert {}: not a PEM certificate: {e}", cert.display()))?;
        if chain.is_empty() {
            bail!(
                "--listen-cert {}: no certificate in it (a PEM file with -----BEGIN CERTIFICATE-----, the \
                 server's certificate first, then its chain)",
                cert.display()
            );
        }
        let k = PrivateKeyDer::from_pem_file(key).map_err(|e| {
            anyhow::anyhow!(
                "--listen-key {}: no private key read from it ({e}); give the PEM key (PKCS#8, PKCS#1 or \
                 SEC1) of --listen-cert's certificate",
                key.display()
            )
        })?;
        let config = server_config(chain, k).map_err(|e| {
            anyhow::anyhow!(
                "--listen-key {} does not go with --listen-cert {}: {e}; give the key the certificate was \
                 made for",
                key.display(),
                cert.display()
            )
        })?;
        Ok(ListenTls {
            config,
            ca_pem: None,
            names: Vec::new(),
        })
    }

    /// Writes the generated CA's certificate to `path`, never over an existing file.
    pub fn write_ca(&self, path: &Path) -> Result<()> {
        use std::io::Write;
        let Some(pem) = &self.ca_pem else { return Ok(()) };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .with_context(|| {
                format!(
                    "--listen-tls: cannot write the recorder's CA certificate to {} (an existing file is \
                     never overwritten: move it, or choose another --out)",
                    path.display()
                )
            })?;
        f.write_all(pem.as_bytes())
            .with_context(|| format!("--listen-tls: writing {}", path.display()))
    }

    /// One handshake with `conn`, begun at `began`: the encrypted stream and what it
    /// took, or why it failed (a timeout included).
    pub async fn accept<S>(&self, conn: S, began: Instant) -> io::Result<(TlsStream<Flights<S>>, TlsAccepted)>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let acceptor = tokio_rustls::TlsAcceptor::from(self.config.clone());
        let stream = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(Flights::new(conn)))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "the client's handshake stalled"))??;
        let (io, session) = stream.get_ref();
        let accepted = TlsAccepted {
            version: session.protocol_version().map(|v| match v {
                rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3".to_string(),
                rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2".to_string(),
                other => format!("{other:?}"),
            }),
            handshake_ns: began.elapsed().as_nanos() as u64,
            round_trips: io.flights,
        };
        Ok((stream, accepted))
    }
}

/// The CA file beside a trace: `<out>.ca.crt`.
pub fn ca_path(out: &Path) -> PathBuf {
    let mut p = out.as_os_str().to_owned();
    p.push(".ca.crt");
    PathBuf::from(p)
}

fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.send_tls13_tickets = 0;
    Ok(Arc::new(config))
}

fn host_name() -> Option<String> {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let h = h.trim();
    (!h.is_empty()).then(|| h.to_string())
}

/// A stream that counts the flights written to it: each run of writes after a read (or
/// at the start) is one, a flight the client waits for in a handshake.
pub struct Flights<S> {
    inner: S,
    writing: bool,
    pub flights: u32,
}

impl<S> Flights<S> {
    fn new(inner: S) -> Flights<S> {
        Flights {
            inner,
            writing: false,
            flights: 0,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Flights<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.writing = false;
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Flights<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) && !self.writing {
            self.writing = true;
            self.flights = self.flights.saturating_add(1);
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A generated identity names the listen host and localhost; the user's files are
    /// refused with the flag, the file and the fix when they are missing or do not match.
    #[test]
    fn identities_are_generated_or_read_and_bad_files_are_named() {
        let g = ListenTls::generate("127.0.0.1").unwrap();
        assert_eq!(g.names, ["127.0.0.1", "localhost", "::1"]);
        assert!(g.ca_pem.as_deref().unwrap().contains("BEGIN CERTIFICATE"));
        assert!(!format!("{g:?}").contains("PRIVATE"));
        let named = ListenTls::generate("db.internal").unwrap();
        assert_eq!(named.names[0], "db.internal");
        let dir = std::env::temp_dir().join(format!("cb-listen-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = ListenTls::from_files(&dir.join("none.crt"), &dir.join("none.key")).unwrap_err();
        assert!(format!("{missing:#}").contains("--listen-cert"), "{missing:#}");
        // Two generated pairs, crossed: the key is not the certificate's.
        let pair = |name: &str| {
            let key = rcgen::KeyPair::generate().unwrap();
            let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
                .unwrap()
                .self_signed(&key)
                .unwrap();
            let (c, k) = (dir.join(format!("{name}.crt")), dir.join(format!("{name}.key")));
            std::fs::write(&c, cert.pem()).unwrap();
            std::fs::write(&k, key.serialize_pem()).unwrap();
            (c, k)
        };
        let ((c1, k1), (_, k2)) = (pair("a"), pair("b"));
        ListenTls::from_files(&c1, &k1).unwrap();
        let crossed = format!("{:#}", ListenTls::from_files(&c1, &k2).unwrap_err());
        assert!(crossed.contains("does not go with --listen-cert"), "{crossed}");
        let no_key = format!("{:#}", ListenTls::from_files(&c1, &c1).unwrap_err());
        assert!(
            no_key.contains("--listen-key") && no_key.contains("no private key"),
            "{no_key}"
        );
        // The CA beside a trace is never written over.
        let ca = ca_path(&dir.join("app.trace.gz"));
        assert!(ca.ends_with("app.trace.gz.ca.crt"));
        g.write_ca(&ca).unwrap();
        let again = format!("{:#}", g.write_ca(&ca).unwrap_err());
        assert!(again.contains("never overwritten"), "{again}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}

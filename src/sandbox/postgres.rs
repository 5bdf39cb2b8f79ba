//! The sandbox's PostgreSQL: its cluster (`initdb`, the run's certificates, pg_hba.conf,
//! the passfile), its roles and database, its process (start, restart, stop) and the
//! superuser session the sandbox itself uses. Apart from PgBouncer's and MariaDB's
//! lifecycles, which it feeds (PgBouncer reads the superuser's SCRAM secret from here).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::{
    find_binaries, log_file, random_token, run_as_user, run_helper, server_command, stop_child, tail,
    write_file, write_owned, Binaries, RunAs, Sandbox, Server, BRIDGE_NET, DATABASE, QUIET, SUPERUSER,
    TRUST_ROLE,
};
use crate::proto::{postgres, PhaseCursor};
use crate::targets::Target;

impl Sandbox {
    /// `initdb`, the certificates, pg_hba.conf and the passfile.
    pub(super) async fn init_cluster(&mut self, bins: &Binaries, run_as: &RunAs) -> Result<()> {
        let dir = &self.info.dir;
        let password = random_token(24);
        write_owned(&dir.join("pwfile"), &format!("{password}\n"), 0o600, run_as)?;
        // The passfile belongs to whoever runs connbench (and psql, pgbench next to it).
        write_file(
            &self.info.passfile,
            &format!("*:*:*:{SUPERUSER}:{password}\n"),
            0o600,
        )?;
        let data = dir.join("data");
        let log = dir.join("initdb.log");
        let mut initdb = server_command(&bins.initdb, run_as, dir);
        initdb
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                SUPERUSER,
                "--auth-local=scram-sha-256",
                "--auth-host=scram-sha-256",
            ])
            .arg(format!("--pwfile={}", dir.join("pwfile").display()))
            .args(["-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"])
            .stdout(log_file(&log, run_as)?)
            .stderr(log_file(&log, run_as)?);
        let status = run_helper(initdb, dir)
            .await
            .with_context(|| format!("cannot start sandbox: cannot run {}", bins.initdb.display()))?;
        if !status.success() {
            bail!(
                "cannot start sandbox: initdb failed ({status}); its log ends:\n{}",
                tail(&log, 20)
            );
        }
        write_certificates(dir, run_as)?;
        let hba = format!(
            "# connbench sandbox: SCRAM for {SUPERUSER}, trust for {TRUST_ROLE}\n\
             local all {TRUST_ROLE} trust\n\
             host  all {TRUST_ROLE} 127.0.0.1/32 trust\n\
             host  all {TRUST_ROLE} ::1/128 trust\n\
             host  all {TRUST_ROLE} {BRIDGE_NET} trust\n\
             local all all scram-sha-256\n\
             host  all all 127.0.0.1/32 scram-sha-256\n\
             host  all all ::1/128 scram-sha-256\n\
             host  all all {BRIDGE_NET} scram-sha-256\n"
        );
        write_owned(&data.join("pg_hba.conf"), &hba, 0o600, run_as)?;
        Ok(())
    }

    /// Starts the postgres process on `port` (not waiting for it).
    pub(super) fn spawn_postgres(
        &mut self,
        bins: &Binaries,
        run_as: &RunAs,
        port: u16,
        durable: bool,
    ) -> Result<()> {
        let dir = self.info.dir.clone();
        let quiet = if durable { &[][..] } else { QUIET };
        let child = self.spawn_server(Server::Postgres, &bins.postgres, run_as, |c| {
            c.arg("-D")
                .arg(dir.join("data"))
                .args(["-c", &format!("port={port}")])
                .args(["-c", "listen_addresses=127.0.0.1"])
                .args(["-c", &format!("unix_socket_directories={}", dir.display())])
                .args(["-c", "ssl=on"])
                .args([
                    "-c",
                    &format!("ssl_cert_file={}", dir.join("server.crt").display()),
                ])
                .args([
                    "-c",
                    &format!("ssl_key_file={}", dir.join("server.key").display()),
                ])
                .args(["-c", "max_connections=300"])
                .args(["-c", "logging_collector=off"])
                .args(quiet.iter().flat_map(|q| ["-c", q]))
        })?;
        self.info.postgres_pid = child.id();
        self.info.postgres_port = port;
        self.postgres = Some(child);
        self.durable = durable;
        Ok(())
    }

    /// Restarts PostgreSQL as an operator would: fast shutdown (clients disconnected, a
    /// checkpoint), then a start on the same port; returns once it accepts connections
    /// again. Its CPU, read by pid, is not measured across the restart.
    pub async fn restart_postgres(&mut self) -> Result<super::Downtime> {
        let (bins, run_as) = (find_binaries()?, run_as_user()?);
        // When its connections were gone: its client backends exit before the shutdown
        // checkpoint, which the postmaster's own exit waits for.
        let backends = client_backends(self.info.postgres_pid);
        let signalled = Instant::now();
        let watch = std::thread::spawn(move || {
            while !backends.iter().all(|&p| exited(p)) {
                std::thread::sleep(Duration::from_millis(1));
            }
            Instant::now()
        });
        self.stop_postgres();
        let stopped = Instant::now();
        let dropped = watch.join().unwrap_or(stopped).min(stopped);
        self.spawn_postgres(&bins, &run_as, self.info.postgres_port, self.durable)?;
        let spawned = Instant::now();
        let refused = self
            .ready(Server::Postgres)
            .await
            .context("the sandbox's PostgreSQL did not come back after its restart")?;
        Ok(super::Downtime {
            signalled,
            dropped,
            stopped,
            refused_until: refused.unwrap_or(spawned),
            ready: Instant::now(),
        })
    }

    /// Terminates every client backend in the targets' database (PgBouncer's server
    /// connections included), as `pg_terminate_backend` does for an operator; returns
    /// how many, and when the query was sent (the strike took effect from then).
    pub async fn terminate_backends(&self) -> Result<(usize, Instant)> {
        let t = self.superuser_target(&format!(
            "host={} port={}",
            self.info.dir.display(),
            self.info.postgres_port
        ))?;
        let ep = crate::proto::Endpoint::new(t)?;
        let (mut s, _) =
            crate::proto::connect_and_query_as::<postgres::Session>(&ep, "SELECT 1", &PhaseCursor::default())
                .await?;
        let sent = Instant::now();
        let rows = s
            .query_column(&format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = '{DATABASE}' AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
            ))
            .await;
        s.close().await;
        Ok((rows?.len(), sent))
    }

    /// The superuser at `conn` (host and port), in database `postgres` unless `conn`
    /// names another.
    pub(super) fn superuser_target(&self, conn: &str) -> Result<Target> {
        Ok(Target::parse(&format!(
            "dbname=postgres {conn} user={SUPERUSER} passfile={} sslmode=disable",
            self.info.passfile.display()
        ))?)
    }

    /// The trust role and the database the targets use; returns the superuser's SCRAM
    /// secret for PgBouncer's userlist (read in the same session).
    pub(super) async fn prepare_roles(&mut self) -> Result<String> {
        let t = self.superuser_target(&format!(
            "host={} port={}",
            self.info.dir.display(),
            self.info.postgres_port
        ))?;
        let ep = crate::proto::Endpoint::new(t)?;
        let (mut s, _) = crate::proto::connect_as::<postgres::Session>(&ep, &PhaseCursor::default()).await?;
        for sql in [
            format!("CREATE ROLE {TRUST_ROLE} LOGIN"),
            format!("CREATE DATABASE {DATABASE} OWNER {SUPERUSER}"),
            format!("GRANT ALL ON DATABASE {DATABASE} TO {TRUST_ROLE}"),
        ] {
            s.simple_query(&sql)
                .await
                .with_context(|| format!("cannot start sandbox: {sql}"))?;
        }
        let out = s
            .simple_query(&format!(
                "SELECT rolpassword FROM pg_authid WHERE rolname = '{SUPERUSER}'"
            ))
            .await
            .context("cannot start sandbox: cannot read the SCRAM secret for PgBouncer")?;
        s.close().await;
        match out.first_value {
            Some(v) if v.starts_with("SCRAM-SHA-256$") => Ok(v),
            _ => {
                bail!("cannot start sandbox: the server did not store a SCRAM-SHA-256 secret for {SUPERUSER}")
            }
        }
    }

    pub(super) fn stop_postgres(&mut self) {
        if let Some(mut child) = self.postgres.take() {
            // SIGINT is PostgreSQL's fast shutdown: disconnect clients, checkpoint, exit.
            // If that hangs, SIGQUIT (immediate) and then SIGKILL; the backends notice
            // their postmaster's death and exit on their own.
            if !stop_child(&mut child, libc::SIGINT, Duration::from_secs(10)) {
                stop_child(&mut child, libc::SIGQUIT, Duration::from_secs(3));
            }
        }
    }
}

/// The client backends in the targets' database of the postmaster `pid`, by their
/// process titles ("postgres: user database host state").
fn client_backends(postmaster: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| {
            let parent = std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit_once(')')?
                        .1
                        .split_whitespace()
                        .nth(1)?
                        .parse::<u32>()
                        .ok()
                });
            parent == Some(postmaster)
                && std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).split_whitespace().nth(2) == Some(DATABASE))
        })
        .collect()
}

/// Whether process `pid` has exited (gone, or a zombie not yet reaped).
fn exited(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')?
                .1
                .split_whitespace()
                .next()
                .map(|st| st == "Z")
        })
        .unwrap_or(true)
}

/// A CA and a server certificate for localhost, 127.0.0.1 and ::1, made for this run.
pub(super) fn write_certificates(dir: &Path, run_as: &RunAs) -> Result<()> {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
    };
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "connbench sandbox CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
    let mut params = CertificateParams::new(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ])?;
    params.distinguished_name.push(DnType::CommonName, "localhost");
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &ca)?;
    write_file(&dir.join("ca.crt"), &ca.pem(), 0o644)?;
    write_owned(&dir.join("server.crt"), &cert.pem(), 0o644, run_as)?;
    // PostgreSQL refuses a key file that others can read.
    write_owned(&dir.join("server.key"), &key.serialize_pem(), 0o600, run_as)?;
    Ok(())
}

//! The sandbox's PgBouncer: its configuration (the userlist with the server's SCRAM
//! secret, its hba file, the ini naming a session-mode and a transaction-mode database)
//! and its process (start, restart, stop). Apart from PostgreSQL's lifecycle, which it
//! follows.

use std::fs;
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// Client connections the sandbox's PgBouncer accepts: 10,000 clients (the most a
/// 2-core machine drives through it, issue 56) and a fifth more for a second run's
/// stragglers and the tools' own logins. Fixed rather than sized per run: an unused
/// slot costs PgBouncer nothing, and one number holds however the sandbox was started.
pub const MAX_CLIENT_CONN: u64 = 12_000;
/// Server connections it opens at most (`max_db_connections`).
const MAX_DB_CONNECTIONS: u64 = 200;
/// The open files PgBouncer needs: one per client and per server connection, and a
/// margin for its listening sockets, log and DNS.
const PGBOUNCER_FILES: u64 = MAX_CLIENT_CONN + MAX_DB_CONNECTIONS + 100;

use super::{
    find_binaries, run_as_user, stop_child, write_owned, Binaries, RunAs, Sandbox, Server, BRIDGE_NET,
    DATABASE, DATABASE_TX, SUPERUSER, TRUST_ROLE,
};

impl super::SandboxInfo {
    /// PgBouncer's admin console (the `pgbouncer` database, where the superuser is an
    /// admin user): PAUSE and RESUME for a restore of [`DATABASE`].
    pub fn pgbouncer_admin(&self) -> Result<crate::targets::Target> {
        crate::targets::Target::parse(&format!(
            "host={} port={} dbname=pgbouncer user={SUPERUSER} passfile={}",
            self.dir.display(),
            self.pgbouncer_port,
            self.passfile.display()
        ))
        .context("the sandbox's PgBouncer admin console")
    }

    /// The names PgBouncer serves the server's database `db` under (none for a database
    /// it does not serve): its session-mode and transaction-mode aliases of [`DATABASE`].
    pub fn pgbouncer_aliases(&self, db: &str) -> Vec<String> {
        match db == DATABASE {
            true => vec![DATABASE.to_string(), DATABASE_TX.to_string()],
            false => Vec::new(),
        }
    }
}

impl Sandbox {
    /// Writes the userlist (with the superuser's SCRAM `secret`) and the hba file: what
    /// stays the same from one start attempt, and one restart, to the next.
    pub(super) fn configure_pgbouncer(&self, run_as: &RunAs, secret: &str) -> Result<()> {
        let dir = &self.info.dir;
        // The server's SCRAM secret, not the plaintext password, as production set-ups
        // keep it: PgBouncer then verifies clients without redoing PBKDF2 on each login,
        // and passes the client's proof through to the server (SCRAM pass-through).
        write_owned(
            &dir.join("userlist.txt"),
            &format!("\"{SUPERUSER}\" \"{secret}\"\n\"{TRUST_ROLE}\" \"\"\n"),
            0o600,
            run_as,
        )?;
        let hba = format!(
            "local all {TRUST_ROLE} trust\n\
             host  all {TRUST_ROLE} 127.0.0.1/32 trust\n\
             host  all {TRUST_ROLE} {BRIDGE_NET} trust\n\
             local all all scram-sha-256\n\
             host  all all 127.0.0.1/32 scram-sha-256\n\
             host  all all {BRIDGE_NET} scram-sha-256\n"
        );
        write_owned(&dir.join("pgbouncer_hba.conf"), &hba, 0o600, run_as)
    }

    /// Writes the ini for `port` and starts PgBouncer on it (not waiting for it).
    pub(super) fn spawn_pgbouncer_on(&mut self, bins: &Binaries, run_as: &RunAs, port: u16) -> Result<()> {
        let dir = self.info.dir.clone();
        let ini = format!(
            "[databases]\n\
             {DATABASE} = host={d} port={pg} dbname={DATABASE} pool_mode=session\n\
             {DATABASE_TX} = host={d} port={pg} dbname={DATABASE} pool_mode=transaction\n\
             \n[pgbouncer]\n\
             listen_addr = 127.0.0.1\n\
             listen_port = {port}\n\
             unix_socket_dir = {d}\n\
             auth_type = hba\n\
             auth_hba_file = {d}/pgbouncer_hba.conf\n\
             auth_file = {d}/userlist.txt\n\
             admin_users = {SUPERUSER}\n\
             pool_mode = session\n\
             max_client_conn = {MAX_CLIENT_CONN}\n\
             listen_backlog = 4096\n\
             default_pool_size = 100\n\
             max_db_connections = {MAX_DB_CONNECTIONS}\n\
             ignore_startup_parameters = extra_float_digits,options\n",
            d = dir.display(),
            pg = self.info.postgres_port,
        );
        write_owned(&dir.join("pgbouncer.ini"), &ini, 0o600, run_as)?;
        self.info.pgbouncer_port = port;
        self.spawn_pgbouncer(bins, run_as)
    }

    /// Starts PgBouncer with the configuration already written (not waiting for it).
    pub(super) fn spawn_pgbouncer(&mut self, bins: &Binaries, run_as: &RunAs) -> Result<()> {
        let dir = self.info.dir.clone();
        let child = self.spawn_server(Server::PgBouncer, &bins.pgbouncer, run_as, |c| {
            // Its open-file limit raised before it starts, or it refuses clients (EMFILE
            // on accept) long before max_client_conn: the soft limit up to the hard one,
            // which needs no privilege (this runs as the servers' user).
            // SAFETY: the closure makes two system calls and allocates nothing.
            unsafe {
                c.pre_exec(|| {
                    raise_open_files(PGBOUNCER_FILES);
                    Ok(())
                });
            }
            c.arg(dir.join("pgbouncer.ini"))
        })?;
        self.info.pgbouncer_pid = child.id();
        // The watchdog stops what this file names.
        fs::write(dir.join("pgbouncer.pid"), format!("{}\n", child.id()))?;
        self.pgbouncer = Some(child);
        Ok(())
    }

    /// Restarts PgBouncer: its immediate shutdown (every client connection dropped), then
    /// a start on the same port with the same configuration.
    pub async fn restart_pgbouncer(&mut self) -> Result<super::Downtime> {
        let (bins, run_as) = (find_binaries()?, run_as_user()?);
        let signalled = Instant::now();
        self.stop_pgbouncer();
        let stopped = Instant::now();
        self.spawn_pgbouncer(&bins, &run_as)?;
        let spawned = Instant::now();
        let refused = self
            .ready(Server::PgBouncer)
            .await
            .context("the sandbox's PgBouncer did not come back after its restart")?;
        Ok(super::Downtime {
            signalled,
            dropped: stopped,
            stopped,
            refused_until: refused.unwrap_or(spawned),
            ready: Instant::now(),
        })
    }

    pub(super) fn stop_pgbouncer(&mut self) {
        if let Some(mut child) = self.pgbouncer.take() {
            // PgBouncer: SIGTERM is its immediate shutdown; SIGINT would wait for clients.
            stop_child(&mut child, libc::SIGTERM, Duration::from_secs(5));
        }
    }
}

/// Raises this process's open-file soft limit to `wanted`, or to the hard limit when
/// that is lower (PgBouncer then says in its log how many clients it can take). Only
/// system calls: it runs between fork and exec.
fn raise_open_files(wanted: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct they are given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < wanted {
            lim.rlim_cur = wanted.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

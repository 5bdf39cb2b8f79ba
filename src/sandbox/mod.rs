//! The sandbox: a throwaway PostgreSQL cluster with PgBouncer in front, started for a run
//! and removed after it, so every measurement can be tried without a database of one's own.
//!
//! What it owns: one short temp directory (`/tmp/cb-XXXXXX`: Unix socket paths are capped
//! near 107 bytes), a cluster made by `initdb` with SCRAM-SHA-256 on socket and TCP and a
//! second role with trust (to compare the cost of authentication), TLS with a CA and a
//! server certificate generated for the run (so `verify-full` can be tried), and one
//! PgBouncer process with a session-mode and a transaction-mode database. It hands on
//! [`SandboxTarget`]s: libpq conninfo strings that work unchanged with psql and pgbench
//! (the password sits in a passfile, so it never appears in output).
//!
//! PostgreSQL and PgBouncer refuse to run as root, so as root they run as the `postgres`
//! system user and the directory is theirs. "Ready" means a real connection succeeded.
//! Stop is a signal, a bounded wait, then a kill; any failure to start shows the tail of
//! the server's log.
//!
//! Nothing is left behind: [`Sandbox`] stops everything on drop (normal end, error, panic,
//! and a start cancelled by Ctrl-C or SIGTERM, whose half-made sandbox is dropped), Ctrl-C
//! reaches only connbench (the servers run in their own process groups), and a watchdog
//! (`sh`, holding the read end of a pipe whose write end only this process has) wakes
//! when this process dies for any reason, SIGKILL included, and removes what is left. A
//! detached start has the watchdog too until its sandbox is whole, then tells it to keep
//! the sandbox. Every sandbox is listed in the [`registry`] from before its start, so one
//! whose process and watchdog were both killed is still found and removed.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{chown, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::proto::{postgres, PhaseCursor};
use crate::target::Target;

pub mod cgroup;
pub mod mariadb;
pub mod registry;
mod reap;

pub(crate) use reap::stop_in_dir;
use reap::{kill_recorded, record_pid, run_helper};

/// The superuser connbench creates (SCRAM-SHA-256 password, kept in the passfile).
pub const SUPERUSER: &str = "connbench";
/// A role the server and PgBouncer trust without a password.
pub const TRUST_ROLE: &str = "connbench_trust";
/// The database every sandbox target uses.
pub const DATABASE: &str = "connbench";
/// PgBouncer's alias for [`DATABASE`] in transaction pooling mode.
pub const DATABASE_TX: &str = "connbench_tx";

/// The sandbox's target names, in the order `sandbox start` prints them.
pub const TARGET_NAMES: [&str; 10] = [
    "unix",
    "tcp",
    "tls",
    "pgbouncer_unix",
    "pgbouncer_tcp",
    "pgbouncer_tx_unix",
    "pgbouncer_tx_tcp",
    "unix_trust",
    "tcp_trust",
    "pgbouncer_unix_trust",
];

/// One way into the sandbox, with a stable name.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct SandboxTarget {
    pub name: String,
    pub conninfo: String,
    pub description: String,
    /// A MySQL/MariaDB target's parts (host, port, socket, user, database, option file
    /// and the `mariadb` command), for tools that take them apart.
    #[serde(default, flatten, skip_serializing_if = "Option::is_none")]
    pub mysql: Option<mariadb::MysqlParts>,
}

impl SandboxTarget {
    /// The target as connbench uses it (labelled with its name).
    pub fn target(&self) -> Result<Target> {
        let mut t = Target::parse(&self.conninfo).with_context(|| format!("sandbox target {}", self.name))?;
        t.label = Some(self.name.clone());
        Ok(t)
    }
}

/// What a running sandbox is: where, which processes, which targets, which versions.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SandboxInfo {
    pub dir: PathBuf,
    pub postgres_port: u16,
    pub pgbouncer_port: u16,
    pub postgres_pid: u32,
    pub pgbouncer_pid: u32,
    pub postgres_version: String,
    pub pgbouncer_version: String,
    /// The OS user the servers run as.
    pub run_as: String,
    pub ca_cert: PathBuf,
    pub passfile: PathBuf,
    /// The MariaDB beside PostgreSQL, when the sandbox runs one (`--engines`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mariadb: Option<mariadb::MariaDbInfo>,
    /// The CPU quotas' cgroups, when the sandbox was started with one (`--server-cpus`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroups: Option<cgroup::Cgroups>,
    pub targets: Vec<SandboxTarget>,
}

impl SandboxInfo {
    pub fn target(&self, name: &str) -> Result<&SandboxTarget> {
        self.targets.iter().find(|t| t.name == name).ok_or_else(|| {
            let names: Vec<&str> = self.targets.iter().map(|t| t.name.as_str()).collect();
            anyhow!(
                "no sandbox target named {name:?}; the sandbox has: {}",
                names.join(", ")
            )
        })
    }
}

/// Whether a sandbox target name is one of MariaDB's (`mariadb_unix`, ...), so that a
/// command naming one starts MariaDB beside PostgreSQL.
pub fn is_mariadb_target(name: &str) -> bool {
    name.starts_with("mariadb_")
}

/// How to start a sandbox.
#[derive(Debug, Clone, Default)]
pub struct SandboxOptions {
    /// Leave the servers running when this process ends (`connbench sandbox start`).
    pub detached: bool,
    /// Keep PostgreSQL's durable defaults instead of the quiet settings (see [`QUIET`]).
    pub durable: bool,
    /// Also start MariaDB (see [`mariadb`]).
    pub mariadb: bool,
    /// CPU quotas for the servers and PgBouncer (see [`cgroup`]).
    pub cpus: cgroup::Cpus,
    /// The name a detached sandbox is listed under ([`registry::DEFAULT_NAME`] when
    /// none); a sandbox that is not detached is listed under its directory's name.
    pub name: Option<String>,
}

/// The sandbox's PostgreSQL settings for measuring connection paths: commits do not wait
/// for the disk flush, checkpoints and autovacuum do not land inside short repetitions.
/// On a VM's shared disk those are the largest sources of noise between repetitions, and
/// none of them is what a connection-path question asks about. Every report's
/// environment lists the settings the server ran with; `--durable` keeps the defaults.
pub const QUIET: &[&str] = &[
    "synchronous_commit=off",
    "checkpoint_timeout=1h",
    "max_wal_size=8GB",
    "autovacuum=off",
];

/// A running sandbox. Dropping it stops the servers and removes the directory, unless it
/// was started detached.
#[derive(Debug)]
pub struct Sandbox {
    pub info: SandboxInfo,
    postgres: Option<Child>,
    pgbouncer: Option<Child>,
    mariadb: Option<mariadb::MariaDb>,
    watchdog: Option<(Child, ChildStdin)>,
    detached: bool,
    /// Started with PostgreSQL's durable defaults (kept across a restart).
    durable: bool,
    /// Its state file in the registry (none when the registry could not be written for
    /// a sandbox that is not detached: it still has its watchdog).
    entry: Option<registry::Entry>,
}

/// The binaries a sandbox needs.
#[derive(Debug, Clone)]
struct Binaries {
    initdb: PathBuf,
    postgres: PathBuf,
    pgbouncer: PathBuf,
}

/// The OS account the servers run as.
#[derive(Debug, Clone)]
struct RunAs {
    name: String,
    /// Set when connbench runs as root and must drop to this account.
    ids: Option<(u32, u32)>,
}

impl Sandbox {
    /// Starts PostgreSQL and PgBouncer and waits until both accept connections.
    pub async fn start(opts: &SandboxOptions) -> Result<Sandbox> {
        let bins = find_binaries()?;
        let run_as = run_as_user()?;
        // What a SIGKILLed connbench whose watchdog died too left behind.
        cgroup::sweep();
        let layout = if opts.cpus.any() {
            Some(cgroup::Layout::detect().with_context(|| quota_flags(opts.cpus))?)
        } else {
            None
        };
        // A detached sandbox's name is taken before anything is made: a second start of
        // the name is refused at once, and this start is listed from now on.
        let claimed = match opts.detached {
            true => Some(registry::claim(
                opts.name.as_deref().unwrap_or(registry::DEFAULT_NAME),
            )?),
            false => None,
        };
        let dir = match crate::scratch::make_temp_dir() {
            Ok(d) => d,
            Err(e) => {
                if let Some(c) = &claimed {
                    registry::forget(c);
                }
                return Err(anyhow!("cannot start sandbox: cannot create its directory: {e}"));
            }
        };
        let mut sandbox = Sandbox {
            info: SandboxInfo {
                dir: dir.clone(),
                postgres_port: 0,
                pgbouncer_port: 0,
                postgres_pid: 0,
                pgbouncer_pid: 0,
                postgres_version: version_of(&bins.postgres),
                pgbouncer_version: version_of(&bins.pgbouncer),
                run_as: run_as.name.clone(),
                ca_cert: dir.join("ca.crt"),
                passfile: dir.join("pgpass"),
                mariadb: None,
                cgroups: layout.as_ref().map(|l| cgroup::Cgroups::plan(l, &dir, opts.cpus)),
                targets: Vec::new(),
            },
            postgres: None,
            pgbouncer: None,
            mariadb: None,
            watchdog: None,
            // Detached only once everything has started: a start that fails halfway
            // stops what it started rather than leave it running with no pointer to it.
            detached: false,
            durable: opts.durable,
            entry: None,
        };
        // From here on, dropping `sandbox` cleans up whatever was made so far.
        let cgroup_dirs = sandbox
            .info
            .cgroups
            .as_ref()
            .map(|c| c.dirs_to_remove())
            .unwrap_or_default();
        let leaf = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        let mut entry =
            claimed.unwrap_or_else(|| registry::Entry::new(leaf.as_deref().unwrap_or("cb"), false));
        entry.dir = Some(dir.clone());
        entry.cgroups = cgroup_dirs.clone();
        match registry::save(&entry) {
            Ok(()) => sandbox.entry = Some(entry),
            // A command's own sandbox still has its watchdog; a detached one needs its
            // state file to be found again.
            Err(e) if !opts.detached => {
                eprintln!("warning: the sandbox is not listed for `sandbox status`: {e:#}")
            }
            Err(e) => {
                sandbox.entry = Some(entry);
                return Err(e);
            }
        }
        // The servers create their sockets and data directory in it.
        give_to(&dir, &run_as)?;
        let entry_file = sandbox.entry.as_ref().map(|e| registry::path(&e.name));
        sandbox.watchdog = Some(spawn_watchdog(&dir, entry_file.as_deref(), &cgroup_dirs)?);
        // Made first, so that a refusal (not root) comes before any server starts.
        if let Some(c) = &sandbox.info.cgroups {
            c.create(&quota_flags(opts.cpus))?;
        }
        sandbox.init_cluster(&bins, &run_as).await?;
        sandbox.start_postgres(&bins, &run_as, opts.durable).await?;
        let secret = sandbox.prepare_roles().await?;
        sandbox.start_pgbouncer(&bins, &run_as, &secret).await?;
        if opts.mariadb {
            let bins = mariadb::find_binaries()?;
            let group = sandbox.info.cgroups.as_ref().map(|c| &c.server);
            let m = mariadb::start(&dir, &bins, &mariadb::run_as()?, opts.durable, group).await?;
            sandbox.info.mariadb = Some(m.info.clone());
            sandbox.mariadb = Some(m);
        }
        sandbox.info.targets = targets(&sandbox.info);
        fs::write(
            dir.join("sandbox.json"),
            serde_json::to_string_pretty(&sandbox.info)?,
        )?;
        if let Some(e) = sandbox.entry.as_mut() {
            e.info = Some(sandbox.info.clone());
            if let Err(err) = registry::save(e) {
                if opts.detached {
                    return Err(err);
                }
            }
        }
        if opts.detached {
            sandbox.detach();
        }
        Ok(sandbox)
    }

    /// Leaves the servers running when this process ends: the watchdog is told to keep
    /// them (and exits), and nothing stops them on drop. The registry lists the sandbox.
    fn detach(&mut self) {
        if let Some((mut child, mut stdin)) = self.watchdog.take() {
            let _ = stdin.write_all(b"keep\n");
            drop(stdin);
            let _ = child.wait();
        }
        if let Some(m) = self.mariadb.as_mut() {
            // Dropped without a stop: the server runs on.
            m.child.take();
        }
        self.detached = true;
    }

    /// `initdb`, the certificates, pg_hba.conf and the passfile.
    async fn init_cluster(&mut self, bins: &Binaries, run_as: &RunAs) -> Result<()> {
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

    async fn start_postgres(&mut self, bins: &Binaries, run_as: &RunAs, durable: bool) -> Result<()> {
        let dir = self.info.dir.clone();
        let log = dir.join("postgres.log");
        // A port picked free can be taken before the server binds it: try a few.
        for attempt in 1..=START_ATTEMPTS {
            let port = free_port()?;
            self.spawn_postgres(bins, run_as, port, durable)?;
            match self.postgres_ready().await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    self.stop_postgres();
                    retry_or_fail("PostgreSQL", e, &log, "could not bind", attempt)?;
                }
            }
        }
        unreachable!("the loop returns or bails")
    }

    /// Starts the postgres process on `port` (not waiting for it).
    fn spawn_postgres(&mut self, bins: &Binaries, run_as: &RunAs, port: u16, durable: bool) -> Result<()> {
        let dir = self.info.dir.clone();
        let log = dir.join("postgres.log");
        let quiet = if durable { &[][..] } else { QUIET };
        if let Some(c) = &self.info.cgroups {
            c.ensure()?;
        }
        let group = self.info.cgroups.as_ref().map(|c| &c.server);
        let child = server_command_in(&bins.postgres, run_as, &dir, group)
            .arg("-D")
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
            .stdin(Stdio::null())
            .stdout(log_file(&log, run_as)?)
            .stderr(log_file(&log, run_as)?)
            .spawn()
            .with_context(|| format!("cannot start sandbox: cannot run {}", bins.postgres.display()))?;
        record_pid(&dir, child.id());
        self.info.postgres_pid = child.id();
        self.info.postgres_port = port;
        self.postgres = Some(child);
        self.durable = durable;
        Ok(())
    }

    async fn postgres_ready(&mut self) -> Result<()> {
        let conn = format!(
            "host={} port={}",
            self.info.dir.display(),
            self.info.postgres_port
        );
        self.ready(&conn, false).await
    }

    /// Waits until the superuser can connect at `conn`, through PgBouncer when
    /// `pgbouncer`, while the server's process lives.
    async fn ready(&mut self, conn: &str, pgbouncer: bool) -> Result<()> {
        let probe = self.superuser_target(conn)?;
        let (child, what, limit) = if pgbouncer {
            (&mut self.pgbouncer, "PgBouncer", 30)
        } else {
            (&mut self.postgres, "PostgreSQL", 60)
        };
        let child = child.as_mut().with_context(|| format!("{what} is not running"))?;
        wait_ready(&probe, child, Duration::from_secs(limit)).await
    }

    /// Restarts PostgreSQL as an operator would: fast shutdown (clients disconnected, a
    /// checkpoint), then a start on the same port; returns once it accepts connections
    /// again. Its CPU, read by pid, is not measured across the restart.
    pub async fn restart_postgres(&mut self) -> Result<()> {
        let (bins, run_as) = (find_binaries()?, run_as_user()?);
        self.stop_postgres();
        self.spawn_postgres(&bins, &run_as, self.info.postgres_port, self.durable)?;
        self.postgres_ready()
            .await
            .context("the sandbox's PostgreSQL did not come back after its restart")
    }

    /// Restarts PgBouncer: its immediate shutdown (every client connection dropped), then
    /// a start on the same port with the same configuration.
    pub async fn restart_pgbouncer(&mut self) -> Result<()> {
        let (bins, run_as) = (find_binaries()?, run_as_user()?);
        self.stop_pgbouncer();
        self.spawn_pgbouncer(&bins, &run_as)?;
        self.pgbouncer_ready()
            .await
            .context("the sandbox's PgBouncer did not come back after its restart")
    }

    /// Terminates every client backend in the targets' database (PgBouncer's server
    /// connections included), as `pg_terminate_backend` does for an operator; returns
    /// how many.
    pub async fn terminate_backends(&self) -> Result<usize> {
        let t = self.superuser_target(&format!(
            "host={} port={}",
            self.info.dir.display(),
            self.info.postgres_port
        ))?;
        let ep = crate::proto::Endpoint::new(t)?;
        let (mut s, _) =
            crate::proto::connect_and_query_as::<postgres::Session>(&ep, "SELECT 1", &PhaseCursor::default())
                .await?;
        let rows = s
            .query_column(&format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = '{DATABASE}' AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
            ))
            .await;
        s.close().await;
        Ok(rows?.len())
    }

    /// The superuser at `conn` (host and port), in database `postgres` unless `conn`
    /// names another.
    fn superuser_target(&self, conn: &str) -> Result<Target> {
        Ok(Target::parse(&format!(
            "dbname=postgres {conn} user={SUPERUSER} passfile={} sslmode=disable",
            self.info.passfile.display()
        ))?)
    }

    /// The trust role and the database the targets use; returns the superuser's SCRAM
    /// secret for PgBouncer's userlist (read in the same session).
    async fn prepare_roles(&mut self) -> Result<String> {
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

    async fn start_pgbouncer(&mut self, bins: &Binaries, run_as: &RunAs, secret: &str) -> Result<()> {
        let dir = self.info.dir.clone();
        let log = dir.join("pgbouncer.log");
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
        write_owned(&dir.join("pgbouncer_hba.conf"), &hba, 0o600, run_as)?;
        for attempt in 1..=START_ATTEMPTS {
            let port = free_port()?;
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
                 max_client_conn = 5000\n\
                 listen_backlog = 4096\n\
                 default_pool_size = 100\n\
                 max_db_connections = 200\n\
                 ignore_startup_parameters = extra_float_digits,options\n",
                d = dir.display(),
                pg = self.info.postgres_port,
            );
            write_owned(&dir.join("pgbouncer.ini"), &ini, 0o600, run_as)?;
            self.info.pgbouncer_port = port;
            self.spawn_pgbouncer(bins, run_as)?;
            match self.pgbouncer_ready().await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    self.stop_pgbouncer();
                    retry_or_fail("PgBouncer", e, &log, "Address already in use", attempt)?;
                }
            }
        }
        unreachable!("the loop returns or bails")
    }

    /// Starts PgBouncer with the configuration already written (not waiting for it).
    fn spawn_pgbouncer(&mut self, bins: &Binaries, run_as: &RunAs) -> Result<()> {
        let dir = self.info.dir.clone();
        let log = dir.join("pgbouncer.log");
        if let Some(c) = &self.info.cgroups {
            c.ensure()?;
        }
        let group = self.info.cgroups.as_ref().map(|c| &c.pooler);
        let child = server_command_in(&bins.pgbouncer, run_as, &dir, group)
            .arg(dir.join("pgbouncer.ini"))
            .stdin(Stdio::null())
            .stdout(log_file(&log, run_as)?)
            .stderr(log_file(&log, run_as)?)
            .spawn()
            .with_context(|| format!("cannot start sandbox: cannot run {}", bins.pgbouncer.display()))?;
        record_pid(&dir, child.id());
        self.info.pgbouncer_pid = child.id();
        // The watchdog stops what this file names.
        fs::write(dir.join("pgbouncer.pid"), format!("{}\n", child.id()))?;
        self.pgbouncer = Some(child);
        Ok(())
    }

    async fn pgbouncer_ready(&mut self) -> Result<()> {
        let conn = format!(
            "host={} port={} dbname={DATABASE}",
            self.info.dir.display(),
            self.info.pgbouncer_port
        );
        self.ready(&conn, true).await
    }

    /// Stops both servers and removes the directory.
    pub fn stop(mut self) -> Result<()> {
        self.shutdown()
    }

    /// Changes the CPU quota of the database servers (`pooler`: of PgBouncer) now, without
    /// a restart; `None` lifts it. The sandbox must have been started with a quota (its
    /// cgroups exist only then).
    pub fn set_cpus(&mut self, pooler: bool, cpus: Option<f64>) -> Result<()> {
        let what = if pooler { "pooler" } else { "server" };
        let Some(c) = self.info.cgroups.as_mut() else {
            bail!(
                "cannot set the sandbox's {what} CPU quota to {cpus:?}: the sandbox was started without \
                 one, so its servers are in no cgroup of connbench's; start it with --{what}-cpus"
            );
        };
        c.set_cpus(pooler, cpus)
    }

    fn stop_pgbouncer(&mut self) {
        if let Some(mut child) = self.pgbouncer.take() {
            // PgBouncer: SIGTERM is its immediate shutdown; SIGINT would wait for clients.
            stop_child(&mut child, libc::SIGTERM, Duration::from_secs(5));
        }
    }

    fn stop_postgres(&mut self) {
        if let Some(mut child) = self.postgres.take() {
            // SIGINT is PostgreSQL's fast shutdown: disconnect clients, checkpoint, exit.
            // If that hangs, SIGQUIT (immediate) and then SIGKILL; the backends notice
            // their postmaster's death and exit on their own.
            if !stop_child(&mut child, libc::SIGINT, Duration::from_secs(10)) {
                stop_child(&mut child, libc::SIGQUIT, Duration::from_secs(3));
            }
        }
    }

    fn shutdown(&mut self) -> Result<()> {
        if self.detached {
            return Ok(());
        }
        if let Some(m) = self.mariadb.as_mut() {
            mariadb::stop(m);
        }
        self.stop_pgbouncer();
        self.stop_postgres();
        // Anything else it started (a helper a cancelled start left) goes too.
        kill_recorded(&self.info.dir);
        // The backends exit just after their postmaster: a group is empty a moment later.
        let groups = match &self.info.cgroups {
            Some(c) => c.remove(Duration::from_secs(5)),
            None => Ok(()),
        };
        let removed = remove_dir(&self.info.dir).and(groups);
        if let Some(e) = self.entry.take() {
            registry::forget(&e);
        }
        if let Some((mut child, stdin)) = self.watchdog.take() {
            drop(stdin); // the watchdog wakes, finds nothing left, exits
            let _ = child.wait();
        }
        removed
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            eprintln!("warning: sandbox clean-up: {e:#}");
        }
    }
}

/// Whether a process is alive and its command line mentions `dir` (so a reused pid of
/// some other process is never signalled).
pub fn pid_alive_in(pid: u32, dir: &Path) -> bool {
    let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let needle = dir.as_os_str().as_encoded_bytes();
    cmdline.windows(needle.len()).any(|w| w == needle)
}

fn stop_pid(pid: u32, signal: i32, dir: &Path, wait: Duration) -> bool {
    if pid == 0 || !pid_alive_in(pid, dir) {
        return true;
    }
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(pid as i32, signal) };
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        if !pid_alive_in(pid, dir) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    false
}

/// Signals a child, waits up to `wait`, kills it if needed. True when it ended in time.
fn stop_child(child: &mut Child, signal: i32, wait: Duration) -> bool {
    if let Ok(Some(_)) = child.try_wait() {
        return true;
    }
    // SAFETY: kill has no memory-safety preconditions; the pid is our own unreaped child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

/// Tries to start each server this many times, each on a new free port.
const START_ATTEMPTS: u32 = 3;

/// After a server failed to become ready: Ok (try again) when its log says the port was
/// taken (a port found free can be grabbed before the server binds it), else the error
/// with the tail of the log.
fn retry_or_fail(what: &str, e: anyhow::Error, log: &Path, port_taken: &str, attempt: u32) -> Result<()> {
    let text = fs::read_to_string(log).unwrap_or_default();
    if attempt < START_ATTEMPTS && text.contains(port_taken) {
        return Ok(());
    }
    bail!(
        "cannot start sandbox: {what} is not ready: {e}; its log ends:\n{}",
        tail(log, 20)
    )
}

/// Connects (and authenticates) until it works, the process dies, or time runs out.
async fn wait_ready(t: &Target, child: &mut Child, limit: Duration) -> Result<()> {
    let ep = crate::proto::Endpoint::new(t.clone())?;
    let deadline = Instant::now() + limit;
    loop {
        let cursor = PhaseCursor::default();
        let err =
            match crate::proto::connect_and_query_as::<postgres::Session>(&ep, "SELECT 1", &cursor).await {
                Ok((s, _)) => {
                    s.close().await;
                    return Ok(());
                }
                Err(e) => e,
            };
        if let Ok(Some(status)) = child.try_wait() {
            bail!("the server exited ({status})");
        }
        if Instant::now() > deadline {
            bail!("no successful connection within {limit:?}; last error: {err}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A command for a server binary: as the unprivileged user, in its own process group (so
/// a Ctrl-C at the terminal reaches connbench, which then stops the servers in order).
fn server_command(bin: &Path, run_as: &RunAs, cwd: &Path) -> Command {
    server_command_in(bin, run_as, cwd, None)
}

/// The same, the process joining `group` (its CPU quota) before `exec`, so that every
/// process it forks is in the group too.
fn server_command_in(bin: &Path, run_as: &RunAs, cwd: &Path, group: Option<&cgroup::Group>) -> Command {
    let mut cmd = Command::new(bin);
    cmd.current_dir(cwd).process_group(0);
    match (group, run_as.ids) {
        // std drops supplementary groups when it changes the uid as root.
        (None, Some((uid, gid))) => {
            cmd.uid(uid).gid(gid);
        }
        (Some(group), ids) => {
            let join = group.join();
            // std would change the user before this closure runs, and the servers' user
            // may not write cgroup.procs: so the child joins as root, then drops to the
            // user itself, as std would (supplementary groups, group, user).
            // SAFETY: the closure only makes system calls (open, write, close, setgroups,
            // setgid, setuid); it allocates nothing and takes no lock.
            unsafe {
                cmd.pre_exec(move || {
                    join.enter_self()?;
                    if let Some((uid, gid)) = ids {
                        if libc::setgroups(0, std::ptr::null()) != 0
                            || libc::setgid(gid) != 0
                            || libc::setuid(uid) != 0
                        {
                            return Err(io::Error::last_os_error());
                        }
                    }
                    Ok(())
                });
            }
        }
        (None, None) => {}
    }
    if run_as.ids.is_some() {
        cmd.env("HOME", cwd)
            .env("USER", &run_as.name)
            .env("LOGNAME", &run_as.name);
    }
    // The servers must not pick up the caller's libpq settings.
    for var in [
        "PGHOST",
        "PGPORT",
        "PGUSER",
        "PGDATABASE",
        "PGPASSWORD",
        "PGSSLMODE",
        "PGOPTIONS",
        "MYSQL_PWD",
        "MYSQL_HOST",
        "MYSQL_TCP_PORT",
        "MYSQL_UNIX_PORT",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// The watchdog: a shell that blocks reading a pipe only this process can write to.
/// When this process ends, however it ends, the pipe closes and the shell stops the
/// servers it finds in the directory (checking that each pid really is ours), kills
/// every process group recorded in `DIR/pids` that is still ours (initdb during a start,
/// a server that has not written its pid file yet) and whatever is left in the cgroups
/// named after the directory, removes those groups (children first), the directory, and
/// the sandbox's registry entry if it still names this directory. After a normal stop it
/// finds nothing and exits; a detached start that finished writes `keep` first, and the
/// watchdog leaves its sandbox running.
fn spawn_watchdog(dir: &Path, entry: Option<&Path>, cgroups: &[PathBuf]) -> Result<(Child, ChildStdin)> {
    const SCRIPT: &str = r#"
dir="$1"
entry="$2"
shift 2
trap '' INT TERM HUP
word=
read -r word
[ "$word" = keep ] && exit 0
forget() {
  [ -n "$entry" ] && [ -f "$entry" ] && grep -qF "\"$dir\"" "$entry" && rm -f "$entry"
  [ -n "$entry" ] && rmdir "${entry%/*}" 2>/dev/null
  return 0
}
[ -d "$dir" ] || { forget; exit 0; }
ours() { [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF "$dir"; }
stop() {
  [ -f "$1" ] || return 0
  pid=$(head -n 1 "$1")
  case "$pid" in ''|*[!0-9]*) return 0;; esac
  ours "$pid" || return 0
  kill -"$2" "$pid" 2>/dev/null
  i=0
  while ours "$pid" && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
  ours "$pid" && kill -KILL "$pid" 2>/dev/null
  return 0
}
stop "$dir/mariadb/mariadbd.pid" TERM
stop "$dir/pgbouncer.pid" TERM
stop "$dir/data/postmaster.pid" QUIT
if [ -f "$dir/pids" ]; then
  while read -r pid; do
    case "$pid" in ''|*[!0-9]*) continue;; esac
    ours "$pid" && kill -KILL -- "-$pid" 2>/dev/null
  done <"$dir/pids"
fi
for cg in "$@"; do
  if [ -f "$cg/cgroup.procs" ]; then
    for pid in $(cat "$cg/cgroup.procs"); do kill -KILL "$pid" 2>/dev/null; done
  fi
  i=0
  while [ -d "$cg" ] && ! rmdir "$cg" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
done
rm -rf "$dir"
forget
"#;
    let mut child = Command::new("sh")
        .args(["-c", SCRIPT, "connbench-watchdog"])
        .arg(dir)
        .arg(entry.unwrap_or(Path::new("")))
        .args(cgroups)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .context("cannot start sandbox: cannot start its clean-up watchdog (sh)")?;
    let stdin = child.stdin.take().expect("piped stdin");
    Ok((child, stdin))
}

fn targets(info: &SandboxInfo) -> Vec<SandboxTarget> {
    let d = info.dir.display();
    let pass = info.passfile.display();
    let ca = info.ca_cert.display();
    let (pg, pgb) = (info.postgres_port, info.pgbouncer_port);
    let su = format!("user={SUPERUSER} passfile={pass}");
    let tr = format!("user={TRUST_ROLE}");
    let t = |name: &str, conninfo: String, description: &str| SandboxTarget {
        name: name.to_string(),
        conninfo,
        description: description.to_string(),
        mysql: None,
    };
    let mut all = vec![
        t(
            "unix",
            format!("host={d} port={pg} dbname={DATABASE} {su}"),
            "PostgreSQL over its Unix socket, SCRAM-SHA-256",
        ),
        t(
            "tcp",
            format!("host=127.0.0.1 port={pg} dbname={DATABASE} {su} sslmode=disable"),
            "PostgreSQL over TCP on loopback, SCRAM-SHA-256",
        ),
        t(
            "tls",
            format!("host=127.0.0.1 port={pg} dbname={DATABASE} {su} sslmode=verify-full sslrootcert={ca}"),
            "PostgreSQL over TCP with TLS (verify-full), SCRAM-SHA-256",
        ),
        t(
            "pgbouncer_unix",
            format!("host={d} port={pgb} dbname={DATABASE} {su}"),
            "PgBouncer session mode over its Unix socket, SCRAM-SHA-256",
        ),
        t(
            "pgbouncer_tcp",
            format!("host=127.0.0.1 port={pgb} dbname={DATABASE} {su} sslmode=disable"),
            "PgBouncer session mode over TCP, SCRAM-SHA-256",
        ),
        t(
            "pgbouncer_tx_unix",
            format!("host={d} port={pgb} dbname={DATABASE_TX} {su}"),
            "PgBouncer transaction mode over its Unix socket, SCRAM-SHA-256",
        ),
        t(
            "pgbouncer_tx_tcp",
            format!("host=127.0.0.1 port={pgb} dbname={DATABASE_TX} {su} sslmode=disable"),
            "PgBouncer transaction mode over TCP, SCRAM-SHA-256",
        ),
        t(
            "unix_trust",
            format!("host={d} port={pg} dbname={DATABASE} {tr}"),
            "PostgreSQL over its Unix socket, trust (no authentication exchange)",
        ),
        t(
            "tcp_trust",
            format!("host=127.0.0.1 port={pg} dbname={DATABASE} {tr} sslmode=disable"),
            "PostgreSQL over TCP, trust",
        ),
        t(
            "pgbouncer_unix_trust",
            format!("host={d} port={pgb} dbname={DATABASE} {tr}"),
            "PgBouncer session mode over its Unix socket, trust",
        ),
    ];
    if let Some(m) = &info.mariadb {
        all.extend(mariadb::targets(m, &info.ca_cert));
    }
    all
}

/// A CA and a server certificate for localhost, 127.0.0.1 and ::1, made for this run.
fn write_certificates(dir: &Path, run_as: &RunAs) -> Result<()> {
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

fn find_binaries() -> Result<Binaries> {
    let bindir_env = std::env::var_os("CONNBENCH_PG_BINDIR").map(PathBuf::from);
    let mut pg_dirs: Vec<PathBuf> = bindir_env.into_iter().collect();
    // Debian and Ubuntu install each major version under /usr/lib/postgresql/N/bin; take
    // the newest.
    if let Ok(entries) = fs::read_dir("/usr/lib/postgresql") {
        let mut versions: Vec<(u32, PathBuf)> = entries
            .flatten()
            .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
            .collect();
        versions.sort();
        pg_dirs.extend(versions.into_iter().rev().map(|(_, p)| p));
    }
    let path_dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    pg_dirs.extend(path_dirs.iter().cloned());
    let initdb = pg_dirs
        .iter()
        .map(|d| d.join("initdb"))
        .find(|p| p.is_file())
        .ok_or_else(|| anyhow!("cannot start sandbox: initdb not found in CONNBENCH_PG_BINDIR, /usr/lib/postgresql/*/bin or PATH; install the postgresql package"))?;
    // postgres from the same directory, so the versions match.
    let postgres = initdb.with_file_name("postgres");
    if !postgres.is_file() {
        bail!(
            "cannot start sandbox: {} has no postgres binary beside it; install the postgresql package",
            initdb.display()
        );
    }
    let mut bouncer_dirs = path_dirs;
    bouncer_dirs.extend(["/usr/sbin", "/usr/local/sbin", "/usr/bin"].map(PathBuf::from));
    let pgbouncer = bouncer_dirs
        .iter()
        .map(|d| d.join("pgbouncer"))
        .find(|p| p.is_file())
        .ok_or_else(|| anyhow!("cannot start sandbox: pgbouncer not found in PATH or /usr/sbin; install the pgbouncer package"))?;
    Ok(Binaries {
        initdb,
        postgres,
        pgbouncer,
    })
}

fn run_as_user() -> Result<RunAs> {
    run_as_named(
        &std::env::var("CONNBENCH_SANDBOX_USER").unwrap_or_else(|_| "postgres".to_string()),
        "install the postgresql package (it creates the postgres user) or set CONNBENCH_SANDBOX_USER",
    )
    .context("cannot start sandbox")
}

/// The account a server runs as: this process's own, or as root the named one (the
/// servers refuse to run as root).
fn run_as_named(name: &str, fix: &str) -> Result<RunAs> {
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        let name = std::env::var("USER").unwrap_or_else(|_| euid.to_string());
        return Ok(RunAs { name, ids: None });
    }
    let cname = std::ffi::CString::new(name)?;
    // SAFETY: getpwnam returns null or a pointer to static storage we read at once.
    let pw = unsafe { libc::getpwnam(cname.as_ptr()) };
    if pw.is_null() {
        bail!("running as root, and the servers refuse to run as root, but there is no user {name:?} to run them as; {fix}");
    }
    let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
    Ok(RunAs {
        name: name.to_string(),
        ids: Some((uid, gid)),
    })
}

/// The flags that asked for a quota, for an error message (`--server-cpus 0.5`).
fn quota_flags(cpus: cgroup::Cpus) -> String {
    [("--server-cpus", cpus.server), ("--pooler-cpus", cpus.pooler)]
        .iter()
        .filter_map(|(f, v)| v.map(|v| format!("{f} {v}")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Clients in connbench's bridge namespaces (`netpath = "bridge"`) reach the servers from
/// this subnet, which only connbench's own bridges use (see `netns`).
const BRIDGE_NET: &str = crate::net::netns::SUBNET;

fn remove_dir(dir: &Path) -> Result<()> {
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(anyhow!("cannot remove sandbox directory {}: {e}", dir.display())),
    }
}

fn write_file(path: &Path, text: &str, mode: u32) -> Result<()> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    f.set_permissions(fs::Permissions::from_mode(mode))?;
    f.write_all(text.as_bytes())?;
    Ok(())
}

fn write_owned(path: &Path, text: &str, mode: u32, run_as: &RunAs) -> Result<()> {
    write_file(path, text, mode)?;
    give_to(path, run_as)
}

fn give_to(path: &Path, run_as: &RunAs) -> Result<()> {
    if let Some((uid, gid)) = run_as.ids {
        chown(path, Some(uid), Some(gid)).with_context(|| format!("cannot chown {}", path.display()))?;
    }
    Ok(())
}

/// A log file the server's user may append to.
fn log_file(path: &Path, run_as: &RunAs) -> Result<fs::File> {
    let f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    give_to(path, run_as)?;
    Ok(f)
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("cannot find a free TCP port on 127.0.0.1")?;
    Ok(l.local_addr()?.port())
}

fn version_of(bin: &Path) -> String {
    Command::new(bin)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".to_string())
}

fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_else(|e| format!("(cannot read {}: {e})", path.display()));
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn random_token(len: usize) -> String {
    use rand::RngExt;
    const CHARS: &[u8] = b"abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut rng = rand::rng();
    (0..len)
        .map(|_| CHARS[rng.random_range(0..CHARS.len())] as char)
        .collect()
}

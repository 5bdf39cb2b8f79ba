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
//!
//! This file holds the sandbox's shape and its start and stop, with what the PostgreSQL
//! and PgBouncer lifecycles share (a free port with retries, spawning into a cgroup, the
//! ready probe); `postgres` and `pgbouncer` hold each server's own set-up, `mariadb` the
//! optional MariaDB, `process` the process and file tools.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::proto::PhaseCursor;
use crate::targets::Target;

pub mod cgroup;
pub mod mariadb;
mod pgbouncer;
mod postgres;
mod process;
mod reap;
pub mod registry;

pub use process::pid_alive_in;

/// When a restarted server was down, as its restart measured it.
#[derive(Debug, Clone, Copy)]
pub struct Downtime {
    /// The stop signal was sent: the strike took effect from here.
    pub signalled: Instant,
    /// Every connection of the old server was gone: PostgreSQL's client backends had
    /// exited (polled every millisecond), a PgBouncer had exited.
    pub dropped: Instant,
    /// The old server had exited (reaped; polled every 10 ms): none of its connections
    /// was left, and nothing accepted a new one.
    pub stopped: Instant,
    /// Until when the new server was measured not to accept logins: the start of the last
    /// readiness probe it failed, or its start when the first probe succeeded.
    pub refused_until: Instant,
    /// When the readiness probe (a login and `SELECT 1`, polled every 25 ms) succeeded.
    pub ready: Instant,
}
use process::{
    find_binaries, free_port, give_to, log_file, random_token, remove_dir, run_as_named, run_as_user,
    server_command, server_command_in, spawn_watchdog, stop_child, stop_pid, tail, version_of, write_file,
    write_owned,
};
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

/// The sandbox's own servers (MariaDB's lifecycle is its own module's).
#[derive(Debug, Clone, Copy)]
enum Server {
    Postgres,
    PgBouncer,
}

impl Server {
    fn name(self) -> &'static str {
        match self {
            Server::Postgres => "PostgreSQL",
            Server::PgBouncer => "PgBouncer",
        }
    }

    fn log(self) -> &'static str {
        match self {
            Server::Postgres => "postgres.log",
            Server::PgBouncer => "pgbouncer.log",
        }
    }

    /// What its log says when the port it was given was taken before it bound it.
    fn port_taken(self) -> &'static str {
        match self {
            Server::Postgres => "could not bind",
            Server::PgBouncer => "Address already in use",
        }
    }
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
        sandbox.start_server(Server::Postgres, &bins, &run_as).await?;
        let secret = sandbox.prepare_roles().await?;
        sandbox.configure_pgbouncer(&run_as, &secret)?;
        sandbox.start_server(Server::PgBouncer, &bins, &run_as).await?;
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

    /// Starts `server` on a free port and waits until it accepts connections. A port
    /// picked free can be taken before the server binds it: then it tries a new one.
    async fn start_server(&mut self, server: Server, bins: &Binaries, run_as: &RunAs) -> Result<()> {
        let log = self.info.dir.join(server.log());
        for attempt in 1..=START_ATTEMPTS {
            let port = free_port()?;
            match server {
                Server::Postgres => self.spawn_postgres(bins, run_as, port, self.durable)?,
                Server::PgBouncer => self.spawn_pgbouncer_on(bins, run_as, port)?,
            }
            match self.ready(server).await {
                Ok(_) => return Ok(()),
                Err(e) => {
                    match server {
                        Server::Postgres => self.stop_postgres(),
                        Server::PgBouncer => self.stop_pgbouncer(),
                    }
                    retry_or_fail(server.name(), e, &log, server.port_taken(), attempt)?;
                }
            }
        }
        unreachable!("the loop returns or bails")
    }

    /// Spawns one of the sandbox's own servers from `bin` with the arguments `args` adds:
    /// in its cgroup when the sandbox has CPU quotas, its output to its log, its pid
    /// recorded for the clean-up. Does not wait for it.
    fn spawn_server(
        &self,
        server: Server,
        bin: &Path,
        run_as: &RunAs,
        args: impl FnOnce(&mut Command) -> &mut Command,
    ) -> Result<Child> {
        let dir = &self.info.dir;
        let log = dir.join(server.log());
        if let Some(c) = &self.info.cgroups {
            c.ensure()?;
        }
        let group = self.info.cgroups.as_ref().map(|c| match server {
            Server::Postgres => &c.server,
            Server::PgBouncer => &c.pooler,
        });
        let child = args(&mut server_command_in(bin, run_as, dir, group))
            .stdin(Stdio::null())
            .stdout(log_file(&log, run_as)?)
            .stderr(log_file(&log, run_as)?)
            .spawn()
            .with_context(|| format!("cannot start sandbox: cannot run {}", bin.display()))?;
        record_pid(dir, child.id());
        Ok(child)
    }

    /// Waits until the superuser can connect to `server`, while its process lives.
    /// Returns when the last probe that failed began (`None`: the first one succeeded).
    async fn ready(&mut self, server: Server) -> Result<Option<Instant>> {
        let conn = match server {
            Server::Postgres => format!(
                "host={} port={}",
                self.info.dir.display(),
                self.info.postgres_port
            ),
            Server::PgBouncer => format!(
                "host={} port={} dbname={DATABASE}",
                self.info.dir.display(),
                self.info.pgbouncer_port
            ),
        };
        let probe = self.superuser_target(&conn)?;
        let (child, limit) = match server {
            Server::Postgres => (&mut self.postgres, 60),
            Server::PgBouncer => (&mut self.pgbouncer, 30),
        };
        let child = child
            .as_mut()
            .with_context(|| format!("{} is not running", server.name()))?;
        wait_ready(&probe, child, Duration::from_secs(limit)).await
    }

    /// Stops both servers and removes the directory.
    pub fn stop(mut self) -> Result<()> {
        self.shutdown()
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
async fn wait_ready(t: &Target, child: &mut Child, limit: Duration) -> Result<Option<Instant>> {
    let ep = crate::proto::Endpoint::new(t.clone())?;
    let deadline = Instant::now() + limit;
    let mut refused = None;
    loop {
        let cursor = PhaseCursor::default();
        let began = Instant::now();
        let err = match crate::proto::connect_and_query_as::<crate::proto::postgres::Session>(
            &ep, "SELECT 1", &cursor,
        )
        .await
        {
            Ok((s, _)) => {
                s.close().await;
                return Ok(refused);
            }
            Err(e) => e,
        };
        refused = Some(began);
        if let Ok(Some(status)) = child.try_wait() {
            bail!("the server exited ({status})");
        }
        if Instant::now() > deadline {
            bail!("no successful connection within {limit:?}; last error: {err}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
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

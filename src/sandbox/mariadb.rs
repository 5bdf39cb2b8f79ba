//! MariaDB in the sandbox (experiment 4's second engine): Debian's `mariadb-server`
//! started in the sandbox's directory, beside PostgreSQL.
//!
//! What it owns: `DIR/mariadb/` (data directory, Unix socket, pid file, error log, a copy
//! of the sandbox's TLS certificate and key it may read), made by `mariadb-install-db`
//! and served by one `mariadbd` on the socket and on loopback TCP with TLS. Two roles in
//! database `connbench`: `connbench` with `mysql_native_password` (MariaDB's default)
//! and `connbench_ed25519` with `ed25519`. Their passwords are written once, into MySQL
//! option files in the sandbox directory (`[client]` user and password, mode 0600), and
//! appear on no command line and in no output; the `mariadb` client and sysbench read
//! them with `--defaults-extra-file`. The roles are made by an `--init-file` the server
//! runs before it accepts connections; the file is removed once it is ready.
//!
//! As root it runs as the `mysql` user (`CONNBENCH_MARIADB_USER` to change); the quiet
//! setting for connection-path questions is `innodb_flush_log_at_trx_commit=2` (the log
//! is flushed once a second, not at every commit), and `--durable` keeps 1. "Ready" is
//! the server's greeting on a real TCP connection. Stop is SIGTERM (MariaDB's normal
//! shutdown), a bounded wait, then SIGKILL; the sandbox's watchdog knows its pid file.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::{
    free_port, give_to, log_file, random_token, server_command, stop_child, tail, write_file, write_owned,
    RunAs, SandboxTarget, DATABASE, START_ATTEMPTS, SUPERUSER,
};

/// The role with MariaDB's default authentication, `mysql_native_password`.
pub const NATIVE_ROLE: &str = SUPERUSER;
/// The role with `ed25519` authentication.
pub const ED25519_ROLE: &str = "connbench_ed25519";

/// The sandbox's MariaDB target names, in the order `sandbox start` prints them.
pub const TARGET_NAMES: [&str; 4] = [
    "mariadb_unix",
    "mariadb_tcp",
    "mariadb_tls",
    "mariadb_ed25519_unix",
];

/// What a running sandbox MariaDB is.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct MariaDbInfo {
    pub version: String,
    pub port: u16,
    pub pid: u32,
    pub socket: PathBuf,
    /// The pid file the server writes (the watchdog reads it).
    pub pid_file: PathBuf,
    /// MySQL option files with each role's user and password (`--defaults-extra-file`).
    pub defaults_file: PathBuf,
    pub ed25519_defaults_file: PathBuf,
    /// The settings chosen for measuring (`innodb_flush_log_at_trx_commit=...`).
    pub settings: Vec<String>,
}

/// A running MariaDB; stopping it is the sandbox's job (see [`stop`]). Dropped while it
/// holds the server (a start cancelled while waiting for it), it stops it; a detached
/// sandbox takes the child out first.
#[derive(Debug)]
pub struct MariaDb {
    pub info: MariaDbInfo,
    pub child: Option<Child>,
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        stop(self);
    }
}

/// The binaries: `mariadbd` and `mariadb-install-db`, when the package is installed.
pub(super) struct Binaries {
    server: PathBuf,
    install_db: PathBuf,
}

/// Finds MariaDB's binaries, or says which package has them.
pub(super) fn find_binaries() -> Result<Binaries> {
    let find = |names: &[&str], dirs: &[&str]| -> Option<PathBuf> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut all: Vec<PathBuf> = std::env::split_paths(&path).collect();
        all.extend(dirs.iter().map(PathBuf::from));
        all.iter()
            .flat_map(|d| names.iter().map(move |n| d.join(n)))
            .find(|p| p.is_file())
    };
    let server = find(&["mariadbd", "mysqld"], &["/usr/sbin", "/usr/libexec"]);
    let install_db = find(&["mariadb-install-db", "mysql_install_db"], &["/usr/bin"]);
    match (server, install_db) {
        (Some(server), Some(install_db)) => Ok(Binaries { server, install_db }),
        _ => bail!(
            "cannot start the sandbox's MariaDB: mariadbd and mariadb-install-db not found; \
             install Debian's mariadb-server package (scripts/setup.sh does), or leave mariadb out of --engines"
        ),
    }
}

/// Whether MariaDB is installed (the default engines include it only then).
pub fn installed() -> bool {
    find_binaries().is_ok()
}

/// Initialises and starts MariaDB in `dir/mariadb`, with TLS from `dir`'s certificates.
/// With `group`, mariadbd runs in it (the servers' CPU quota).
pub(super) async fn start(
    dir: &Path,
    bins: &Binaries,
    run_as: &RunAs,
    durable: bool,
    group: Option<&super::cgroup::Group>,
) -> Result<MariaDb> {
    let home = dir.join("mariadb");
    fs::create_dir(&home).with_context(|| format!("cannot create {}", home.display()))?;
    give_to(&home, run_as)?;
    // The server reads its own copies: the sandbox's key belongs to PostgreSQL's user.
    for f in ["server.crt", "server.key", "ca.crt"] {
        let text = fs::read_to_string(dir.join(f)).with_context(|| format!("cannot read {f}"))?;
        write_owned(&home.join(f), &text, 0o600, run_as)?;
    }
    let data = home.join("data");
    install_db(dir, &home, &data, bins, run_as).await?;

    // The roles, made by the server itself before it accepts connections; each may also
    // make and drop the snapshot schemas of a restore (`dataset::snapshot`,
    // `connbench_restore_*`), and nothing else beyond its database.
    let (native_pw, ed_pw) = (random_token(24), random_token(24));
    let mut sql = format!("CREATE DATABASE IF NOT EXISTS {DATABASE};\n");
    for host in ["%", "localhost"] {
        sql += &format!(
            "CREATE USER '{NATIVE_ROLE}'@'{host}' IDENTIFIED BY '{native_pw}';\n\
             GRANT ALL ON {DATABASE}.* TO '{NATIVE_ROLE}'@'{host}';\n\
             CREATE USER '{ED25519_ROLE}'@'{host}' IDENTIFIED VIA ed25519 USING PASSWORD('{ed_pw}');\n\
             GRANT ALL ON {DATABASE}.* TO '{ED25519_ROLE}'@'{host}';\n\
             GRANT ALL ON `connbench\\_restore\\_%`.* TO '{NATIVE_ROLE}'@'{host}';\n\
             GRANT ALL ON `connbench\\_restore\\_%`.* TO '{ED25519_ROLE}'@'{host}';\n"
        );
    }
    let init = home.join("init.sql");
    write_owned(&init, &sql, 0o600, run_as)?;
    // The option files belong to whoever runs connbench (and the mariadb client).
    let defaults_file = dir.join("mariadb-connbench.cnf");
    let ed25519_defaults_file = dir.join("mariadb-ed25519.cnf");
    write_file(
        &defaults_file,
        &format!("[client]\nuser={NATIVE_ROLE}\npassword={native_pw}\n"),
        0o600,
    )?;
    write_file(
        &ed25519_defaults_file,
        &format!("[client]\nuser={ED25519_ROLE}\npassword={ed_pw}\n"),
        0o600,
    )?;

    let socket = home.join("mysqld.sock");
    let pid_file = home.join("mariadbd.pid");
    let log = home.join("error.log");
    let settings = vec![format!(
        "innodb_flush_log_at_trx_commit={}",
        if durable { 1 } else { 2 }
    )];
    for attempt in 1..=START_ATTEMPTS {
        let port = free_port()?;
        let child = super::server_command_in(&bins.server, run_as, &home, group)
            .env("TMPDIR", &home)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", home.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--port={port}"))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--pid-file={}", pid_file.display()))
            .arg(format!("--log-error={}", log.display()))
            .arg(format!("--init-file={}", init.display()))
            .arg(format!("--ssl-cert={}", home.join("server.crt").display()))
            .arg(format!("--ssl-key={}", home.join("server.key").display()))
            .arg(format!("--ssl-ca={}", home.join("ca.crt").display()))
            .args([
                "--plugin-load-add=auth_ed25519",
                "--skip-log-bin",
                "--skip-name-resolve",
                "--max-connections=300",
                "--innodb-buffer-pool-size=128M",
            ])
            .args(settings.iter().map(|s| format!("--{}", s.replace('_', "-"))))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file(&home.join("stderr.log"), run_as)?)
            .spawn()
            .with_context(|| format!("cannot run {}", bins.server.display()))?;
        super::record_pid(dir, child.id());
        let mut m = MariaDb {
            info: MariaDbInfo {
                version: super::version_of(&bins.server),
                port,
                pid: child.id(),
                socket: socket.clone(),
                pid_file: pid_file.clone(),
                defaults_file: defaults_file.clone(),
                ed25519_defaults_file: ed25519_defaults_file.clone(),
                settings: settings.clone(),
            },
            child: Some(child),
        };
        match wait_ready(port, m.child.as_mut().unwrap(), Duration::from_secs(60)).await {
            Ok(()) => {
                // The roles exist now; their passwords stay only in the option files.
                let _ = fs::remove_file(&init);
                return Ok(m);
            }
            Err(e) => {
                stop(&mut m);
                super::retry_or_fail("MariaDB", e, &log, "Address already in use", attempt)?;
            }
        }
    }
    unreachable!("the loop returns or bails")
}

/// `mariadb-install-db` into `data`, its log in `home`.
async fn install_db(dir: &Path, home: &Path, data: &Path, bins: &Binaries, run_as: &RunAs) -> Result<()> {
    let log = home.join("install.log");
    // Temporary files go to its own directory: the caller's TMPDIR may be one the
    // server's user cannot write.
    let mut install = server_command(&bins.install_db, run_as, home);
    install
        .env("TMPDIR", home)
        .arg("--no-defaults")
        .arg(format!("--datadir={}", data.display()))
        .args(["--auth-root-authentication-method=socket", "--skip-test-db"])
        .stdout(log_file(&log, run_as)?)
        .stderr(log_file(&log, run_as)?);
    let status = super::run_helper(install, dir)
        .await
        .with_context(|| format!("cannot run {}", bins.install_db.display()))?;
    if !status.success() {
        bail!(
            "cannot start the sandbox's MariaDB: mariadb-install-db failed ({status}); its log ends:\n{}",
            tail(&log, 20)
        );
    }
    Ok(())
}

/// Waits for the server's greeting (protocol version 10) on a real TCP connection.
async fn wait_ready(port: u16, child: &mut Child, limit: Duration) -> Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait()? {
            bail!("mariadbd exited ({status})");
        }
        let attempt = tokio::task::spawn_blocking(move || -> std::io::Result<u8> {
            let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
            s.set_read_timeout(Some(Duration::from_secs(2)))?;
            let mut head = [0u8; 5];
            s.read_exact(&mut head)?;
            Ok(head[4])
        })
        .await?;
        let last = match attempt {
            Ok(10) => return Ok(()),
            // 0xff: an error packet (e.g. still starting); anything else is not MariaDB.
            Ok(b) => format!("the first packet's first byte was {b:#04x}, not the greeting's 10"),
            Err(e) => e.to_string(),
        };
        if Instant::now() > deadline {
            bail!("no greeting within {limit:?}; last: {last}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Stops the server: SIGTERM is its normal shutdown; SIGKILL if that hangs.
pub(super) fn stop(m: &mut MariaDb) {
    if let Some(mut child) = m.child.take() {
        if !stop_child(&mut child, libc::SIGTERM, Duration::from_secs(15)) {
            stop_child(&mut child, libc::SIGKILL, Duration::from_secs(3));
        }
    }
}

/// The MySQL-side parts of a target, for tools that take them apart (`sandbox start
/// --json`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct MysqlParts {
    pub host: String,
    pub port: u16,
    /// The Unix socket, for a socket target.
    pub socket: Option<PathBuf>,
    pub user: String,
    pub database: String,
    /// The option file with the user's password (`mariadb --defaults-extra-file=...`).
    pub defaults_file: PathBuf,
    /// The same connection with the `mariadb` command-line client.
    pub command: String,
}

/// The sandbox's MariaDB targets: a URI (the password stays in the option file) and its
/// parts.
pub fn targets(m: &MariaDbInfo, ca: &Path) -> Vec<SandboxTarget> {
    let socket = m.socket.display().to_string();
    let make = |name: &str, description: &str, user: &str, file: &Path, unix: bool, tls: bool| {
        let f = file.display();
        let (host, mode) = if unix {
            ("localhost".to_string(), "DISABLED")
        } else if tls {
            ("127.0.0.1".to_string(), "VERIFY_IDENTITY")
        } else {
            ("127.0.0.1".to_string(), "DISABLED")
        };
        let mut conninfo = format!("mariadb://{user}@{host}:{}/{DATABASE}?ssl-mode={mode}", m.port);
        let mut command = format!("mariadb --defaults-extra-file={f}");
        if unix {
            conninfo += &format!("&socket={socket}");
            command += &format!(" --socket={socket}");
        } else {
            command += &format!(" --host=127.0.0.1 --port={} --protocol=TCP", m.port);
        }
        if tls {
            conninfo += &format!("&ssl-ca={}", ca.display());
            command += &format!(" --ssl --ssl-ca={} --ssl-verify-server-cert", ca.display());
        } else {
            // The 10.11 client turns TLS on by itself when the server offers it, even
            // over the socket.
            command += " --skip-ssl";
        }
        conninfo += &format!("&defaults-file={f}");
        command += &format!(" {DATABASE}");
        SandboxTarget {
            name: name.to_string(),
            conninfo,
            description: description.to_string(),
            mysql: Some(MysqlParts {
                host,
                port: m.port,
                socket: unix.then(|| m.socket.clone()),
                user: user.to_string(),
                database: DATABASE.to_string(),
                defaults_file: file.to_path_buf(),
                command,
            }),
        }
    };
    vec![
        make(
            "mariadb_unix",
            "MariaDB over its Unix socket, mysql_native_password",
            NATIVE_ROLE,
            &m.defaults_file,
            true,
            false,
        ),
        make(
            "mariadb_tcp",
            "MariaDB over TCP on loopback, mysql_native_password",
            NATIVE_ROLE,
            &m.defaults_file,
            false,
            false,
        ),
        make(
            "mariadb_tls",
            "MariaDB over TCP with TLS (server certificate verified), mysql_native_password",
            NATIVE_ROLE,
            &m.defaults_file,
            false,
            true,
        ),
        make(
            "mariadb_ed25519_unix",
            "MariaDB over its Unix socket, ed25519",
            ED25519_ROLE,
            &m.ed25519_defaults_file,
            true,
            false,
        ),
    ]
}

/// The account MariaDB runs as when connbench is root.
pub(super) fn run_as() -> Result<RunAs> {
    super::run_as_named(
        &std::env::var("CONNBENCH_MARIADB_USER").unwrap_or_else(|_| "mysql".to_string()),
        "install the mariadb-server package (it creates the mysql user) or set CONNBENCH_MARIADB_USER",
    )
    .context("cannot start the sandbox's MariaDB")
}

//! A suite cell's settings and what each becomes: the text a suite file gives per cell
//! ([`Settings`]), read into the connect settings, the network path, the route, the
//! fault and the CPU accounting of the cell. Apart from `load` because a cell has knobs
//! a command line has not (netpath, fault, server_cpus), and here rather than in
//! `experiment` so the options layer reads cells without importing the stage above it.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};

use super::parse::*;
use crate::connect::ConnectSettings;
use crate::host::{Accounting, Source};
use crate::route::{PathKind, RouteSpec};
use crate::sandbox::SandboxInfo;
use crate::targets::{Host, SslMode, Target};

/// A setting's value, as text (validated when the cell is turned into a run).
pub type Settings = BTreeMap<String, String>;

/// One setting of a cell through its parser; the error names the setting.
pub fn get<T>(s: &Settings, key: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Option<T>> {
    s.get(key)
        .map(|v| parse(v).map_err(|e| anyhow!("setting {key}: {e}")))
        .transpose()
}

/// The schema of connbench's tables at `scale` for a suite cell that asks for one:
/// beside the run's `schema`, so the scale-1 tables other cells use stay as they are.
pub fn scaled_schema(schema: &str, scale: u32) -> String {
    format!("{schema}_scale{scale}")
}

/// A cell's `scale`, when it asks for one.
pub fn dataset_scale(s: &Settings) -> Result<Option<u32>> {
    get(s, "scale", parse_scale)
}

/// A connect cell's settings: samples and the query; one warm-up connection.
pub fn connect_settings(s: &Settings) -> Result<ConnectSettings> {
    Ok(ConnectSettings {
        samples: get(s, "samples", parse_samples)?.unwrap_or(100),
        warmup: 1,
        query: s.get("query").cloned(),
        interval: Duration::ZERO,
    })
}

/// Where a cell's client runs: the host's network, or a namespace behind a bridge and NAT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetPath {
    Host,
    Bridge,
}

pub fn netpath(s: &Settings) -> Result<NetPath> {
    get(s, "netpath", |v| match v {
        "host" => Ok(NetPath::Host),
        "bridge" => Ok(NetPath::Bridge),
        other => Err(format!("invalid netpath {other:?}: use host or bridge")),
    })
    .map(|n| n.unwrap_or(NetPath::Host))
}

/// Whose CPU a run on `target` reads besides the client's: the sandbox's PostgreSQL (and
/// PgBouncer when the target is the pooler) or MariaDB when the target is the sandbox's; else the
/// server the user named (`--server-pid`, `--server-cgroup`); else none, with the reason
/// the output gives instead of a number.
pub fn accounting(
    target: &Target,
    sandbox: Option<&SandboxInfo>,
    user: Option<Source>,
) -> Result<Accounting> {
    if let Some(source) = user {
        source.check().map_err(|e| anyhow!("{e}"))?;
        return Ok(Accounting {
            server: Some(source),
            ..Default::default()
        });
    }
    if let Some(m) = sandbox
        .and_then(|sb| sb.mariadb.as_ref())
        .filter(|m| target.engine == crate::targets::Engine::Mysql && m.port == target.port)
    {
        // mariadbd is one process with a thread per connection: its own times are all.
        return Ok(Accounting {
            server: Some(Source::Tree(m.pid)),
            ..Default::default()
        });
    }
    if let Some(sb) = sandbox.filter(|sb| [sb.postgres_port, sb.pgbouncer_port].contains(&target.port)) {
        if let Some(c) = &sb.cgroups {
            // Under a quota the servers are in cgroups of their own: their counters are
            // exact (every backend, forked and exited, in the kernel's own sum) and are
            // what the quota is measured against. A MariaDB beside PostgreSQL shares the
            // server group; idle, it adds next to nothing.
            return Ok(Accounting {
                server: Some(Source::Cgroup(c.server.cpu_dir.clone())),
                pooler: (target.port == sb.pgbouncer_port).then(|| Source::Cgroup(c.pooler.cpu_dir.clone())),
                ..Default::default()
            });
        }
        return Ok(Accounting {
            server: Some(Source::Tree(sb.postgres_pid)),
            pooler: (target.port == sb.pgbouncer_port).then_some(Source::Tree(sb.pgbouncer_pid)),
            ..Default::default()
        });
    }
    let local = match &target.host {
        Host::Unix(_) => true,
        Host::Tcp(h) => {
            h == "localhost"
                || target
                    .hostaddr
                    .or_else(|| h.parse().ok())
                    .is_some_and(|a: std::net::IpAddr| a.is_loopback())
        }
    };
    let main_process = match target.engine {
        crate::targets::Engine::Postgres => "the postmaster's pid: `head -1 $PGDATA/postmaster.pid`",
        crate::targets::Engine::Mysql => "the server's pid: `pidof mariadbd mysqld`",
    };
    Ok(Accounting {
        server_not_measured: Some(if local {
            format!(
                "not measured: a local server connbench did not start; give --server-pid ({main_process}) \
                 or --server-cgroup"
            )
        } else {
            "not measured (remote)".into()
        }),
        ..Default::default()
    })
}

/// A cell's route from its `path` and `distance` settings.
pub fn route_spec(s: &Settings) -> Result<RouteSpec> {
    Ok(RouteSpec {
        path: get(s, "path", |v| PathKind::parse(v).map_err(|e| format!("{e:#}")))?
            .unwrap_or(PathKind::Direct),
        distance: get(s, "distance", parse_pause)?.unwrap_or(Duration::ZERO),
    })
}

/// A fault a load cell injects into the sandbox mid-measurement (`fault`, `fault_at`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// PgBouncer's immediate shutdown, then a start on the same port.
    PgbouncerRestart,
    /// PostgreSQL's fast shutdown, then a start on the same port.
    PostgresRestart,
    /// `pg_terminate_backend` on every client backend: dropped connections.
    TerminateBackends,
}

impl FaultKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::PgbouncerRestart => "pgbouncer-restart",
            FaultKind::PostgresRestart => "postgres-restart",
            FaultKind::TerminateBackends => "terminate-backends",
        }
    }
}

/// A cell's fault and when it strikes, after the measurement starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultSpec {
    pub kind: FaultKind,
    pub at: Duration,
}

/// A cell's `fault` (none by default, or `none`) and `fault_at` (default 3 s).
pub fn fault(s: &Settings) -> Result<Option<FaultSpec>> {
    let kind = get(s, "fault", |v| match v {
        "none" => Ok(None),
        "pgbouncer-restart" => Ok(Some(FaultKind::PgbouncerRestart)),
        "postgres-restart" => Ok(Some(FaultKind::PostgresRestart)),
        "terminate-backends" => Ok(Some(FaultKind::TerminateBackends)),
        other => Err(format!(
            "invalid fault {other:?}: use none, pgbouncer-restart, postgres-restart or terminate-backends"
        )),
    })?
    .flatten();
    let at = get(s, "fault_at", parse_period)?;
    match (kind, at) {
        (Some(kind), at) => Ok(Some(FaultSpec {
            kind,
            at: at.unwrap_or(Duration::from_secs(3)),
        })),
        (None, Some(_)) => bail!("setting fault_at: there is no fault to time; add fault = \"...\""),
        (None, None) => Ok(None),
    }
}

/// A cell's `server_cpus`: the CPU quota, in cores, of the sandbox's servers while the
/// cell runs (see `sandbox::cgroup`).
pub fn server_cpus(s: &Settings) -> Result<Option<f64>> {
    get(s, "server_cpus", crate::sandbox::cgroup::parse_cpus)
}

/// A cell's `sslmode` override, if it has one.
pub fn sslmode(s: &Settings) -> Result<Option<SslMode>> {
    get(s, "sslmode", parse_sslmode)
}

/// How a trace cell's repetitions start (`restore`): each from the same data, a copy
/// taken before the first (`template`), or from what the one before left (`none`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restore {
    Template,
    None,
}

impl Restore {
    pub fn as_str(self) -> &'static str {
        match self {
            Restore::Template => "template",
            Restore::None => "none",
        }
    }
}

/// `restore`'s value, for a suite cell and `run --restore` alike.
pub fn parse_restore(v: &str) -> Result<Restore, String> {
    match v {
        "template" => Ok(Restore::Template),
        "none" => Ok(Restore::None),
        other => Err(format!(
            "invalid restore {other:?}: use template (each repetition from a copy of the database taken \
             before the first) or none (each on what the one before left)"
        )),
    }
}

/// A cell's `restore`, when it sets one (a trace cell's on connbench's sandbox defaults
/// to `template` when the trace writes, elsewhere to `none`).
pub fn restore(s: &Settings) -> Result<Option<Restore>> {
    get(s, "restore", parse_restore)
}

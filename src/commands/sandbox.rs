//! `connbench sandbox start|stop|status`: a detached sandbox for other tools to use.

use anyhow::{bail, Result};

use super::emit;
use crate::cli::SandboxCommand;
use crate::proto::Endpoint;
use crate::sandbox::{Sandbox, SandboxOptions};
use crate::Exit;

pub async fn run_sandbox(cmd: SandboxCommand) -> Result<Exit> {
    match cmd {
        SandboxCommand::Start { json, engines, cpus } => {
            if let Some(info) = crate::sandbox::detached_info()? {
                bail!(
                    "a sandbox is already running in {}; stop it with `connbench sandbox stop`",
                    info.dir.display()
                );
            }
            // PostgreSQL is the sandbox's core (PgBouncer, the built-in suites); MariaDB
            // is added by default where it is installed.
            let mariadb = if engines.is_empty() {
                let installed = crate::sandbox::mariadb::installed();
                if !installed {
                    eprintln!("note: MariaDB is not installed, so the sandbox runs PostgreSQL only (Debian: apt-get install mariadb-server)");
                }
                installed
            } else {
                if !engines.iter().any(|e| e == "postgres") {
                    bail!("--engines {}: postgres is always started (PgBouncer and the built-in suites use it); give postgres,mariadb", engines.join(","));
                }
                engines.iter().any(|e| e == "mariadb")
            };
            let sb = Sandbox::start(&SandboxOptions {
                detached: true,
                durable: false,
                mariadb,
                cpus: cpus.cpus(),
            })
            .await?;
            if json {
                emit(&(serde_json::to_string_pretty(&sb.info)? + "\n"));
            } else {
                emit(&describe_sandbox(&sb.info));
                emit("stop it with: connbench sandbox stop\n");
            }
            Ok(Exit::Success)
        }
        SandboxCommand::Stop => {
            match crate::sandbox::stop_detached()? {
                Some(dir) => eprintln!("sandbox: stopped and removed {}", dir.display()),
                None => eprintln!("no sandbox is running (nothing to stop)"),
            }
            Ok(Exit::Success)
        }
        SandboxCommand::Status { json } => {
            let Some(info) = crate::sandbox::detached_info()? else {
                if json {
                    emit("{\"running\": false}\n");
                } else {
                    emit("no sandbox is running; start one with `connbench sandbox start`\n");
                }
                return Ok(Exit::Success);
            };
            let alive = crate::sandbox::pid_alive_in(info.postgres_pid, &info.dir)
                && crate::sandbox::pid_alive_in(info.pgbouncer_pid, &info.dir)
                && info
                    .mariadb
                    .as_ref()
                    .is_none_or(|m| crate::sandbox::pid_alive_in(m.pid, &info.dir));
            let check = match info.target("unix").and_then(|t| t.target()) {
                Ok(t) => match Endpoint::new(t) {
                    Ok(ep) => crate::connect::connect_once(&ep, Some("SELECT 1"))
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                },
                Err(e) => Err(e.to_string()),
            };
            let ok = alive && check.is_ok();
            if json {
                let v = serde_json::json!({
                    "running": alive,
                    "accepts_connections": check.is_ok(),
                    "sandbox": info,
                });
                emit(&(serde_json::to_string_pretty(&v)? + "\n"));
            } else {
                emit(&describe_sandbox(&info));
                match check {
                    Ok(()) => emit("status: running, accepts connections\n"),
                    Err(e) => emit(&format!(
                        "status: processes alive: {alive}; connection check failed: {e}\n"
                    )),
                }
            }
            Ok(if ok { Exit::Success } else { Exit::Failed })
        }
    }
}

pub fn describe_sandbox(info: &crate::sandbox::SandboxInfo) -> String {
    let mut s = format!(
        "sandbox in {} (servers run as {})\n  {} on port {}, pid {}\n  {} on port {}, pid {}\n\
         targets (libpq conninfo strings; they work unchanged with psql and pgbench):\n",
        info.dir.display(),
        info.run_as,
        info.postgres_version,
        info.postgres_port,
        info.postgres_pid,
        info.pgbouncer_version,
        info.pgbouncer_port,
        info.pgbouncer_pid,
    );
    if let Some(c) = &info.cgroups {
        let cores = |v: Option<f64>| v.map_or("no limit".to_string(), |v| format!("{v} cores"));
        s.push_str(&format!(
            "  CPU quota: servers {} (cgroup {}), PgBouncer {} (cgroup {})\n",
            cores(c.server.cpus),
            c.server.quota_dir.display(),
            cores(c.pooler.cpus),
            c.pooler.quota_dir.display(),
        ));
    }
    let width = info.targets.iter().map(|t| t.name.len()).max().unwrap_or(0);
    for t in info.targets.iter().filter(|t| t.mysql.is_none()) {
        s.push_str(&format!("  {:<width$}  {}\n", t.name, t.conninfo));
    }
    if let Some(m) = &info.mariadb {
        s.push_str(&format!(
            "  {} on port {}, pid {}, socket {}\n\
             MariaDB targets (the `mariadb` client; the passwords are in the option files, mode 0600):\n",
            m.version,
            m.port,
            m.pid,
            m.socket.display()
        ));
        for t in &info.targets {
            if let Some(p) = &t.mysql {
                s.push_str(&format!("  {:<width$}  {}\n", t.name, p.command));
            }
        }
    }
    s
}

//! `connbench sandbox start|stop|status`: a detached sandbox for other tools to use.

use anyhow::{bail, Result};

use super::emit;
use crate::cli::SandboxCommand;
use crate::proto::Endpoint;
use crate::sandbox::{Sandbox, SandboxOptions};
use crate::Exit;

pub async fn run_sandbox(cmd: SandboxCommand) -> Result<Exit> {
    match cmd {
        SandboxCommand::Start { json } => {
            if let Some(info) = crate::sandbox::detached_info()? {
                bail!(
                    "a sandbox is already running in {}; stop it with `connbench sandbox stop`",
                    info.dir.display()
                );
            }
            let sb = Sandbox::start(&SandboxOptions {
                detached: true,
                durable: false,
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
                && crate::sandbox::pid_alive_in(info.pgbouncer_pid, &info.dir);
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
    let width = info.targets.iter().map(|t| t.name.len()).max().unwrap_or(0);
    for t in &info.targets {
        s.push_str(&format!("  {:<width$}  {}\n", t.name, t.conninfo));
    }
    s
}

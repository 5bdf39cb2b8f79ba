//! `connbench sandbox start|stop|status`: detached sandboxes for other tools to use, side
//! by side by name (the registry, `sandbox::registry`, lists them).
//!
//! A start is cancelled by Ctrl-C or SIGTERM at any moment (what `timeout`, CI runners,
//! systemd and Kubernetes send): the half-made sandbox is dropped, and its drop stops what
//! it started and removes its directory and cgroups; the exit is 130, as for a load.

use anyhow::{bail, Context, Result};
use tokio::signal::unix::{signal, SignalKind};

use crate::cli::SandboxCommand;
use crate::exit::Exit;
use crate::proto::Endpoint;
use crate::sandbox::registry::{self, Condition, Entry};
use crate::sandbox::{Sandbox, SandboxInfo, SandboxOptions};
use crate::setup::emit;

pub async fn run_sandbox(cmd: SandboxCommand) -> Result<Exit> {
    match cmd {
        SandboxCommand::Start {
            json,
            engines,
            cpus,
            name,
        } => {
            let opts = SandboxOptions {
                detached: true,
                durable: false,
                mariadb: engines_to_start(&engines)?,
                cpus: cpus.cpus(),
                name: Some(name),
            };
            start(opts, json).await
        }
        SandboxCommand::Stop { name, all } => stop(name, all),
        SandboxCommand::Status { name, json } => status(name, json).await,
    }
}

/// Whether to start MariaDB: PostgreSQL is the sandbox's core (PgBouncer, the built-in
/// suites); MariaDB is added by default where it is installed.
fn engines_to_start(engines: &[String]) -> Result<bool> {
    if engines.is_empty() {
        let installed = crate::sandbox::mariadb::installed();
        if !installed {
            eprintln!("note: MariaDB is not installed, so the sandbox runs PostgreSQL only (Debian: apt-get install mariadb-server)");
        }
        return Ok(installed);
    }
    if !engines.iter().any(|e| e == "postgres") {
        bail!("--engines {}: postgres is always started (PgBouncer and the built-in suites use it); give postgres,mariadb", engines.join(","));
    }
    Ok(engines.iter().any(|e| e == "mariadb"))
}

async fn start(opts: SandboxOptions, json: bool) -> Result<Exit> {
    let name = opts.name.clone().unwrap_or_else(|| registry::DEFAULT_NAME.into());
    registry::check_name(&name)?;
    // Registered before anything is made, so that no moment of the start is without them
    // (before this, a signal's default action ends the process with nothing made).
    let mut term = signal(SignalKind::terminate()).context("cannot watch for SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot watch for Ctrl-C")?;
    let interrupted = || {
        eprintln!(
            "sandbox start: interrupted; stopped what it had started and removed its directory and cgroups"
        );
        Ok(Exit::Interrupted)
    };
    // Dropping the start future drops the half-made `Sandbox`, whose drop stops it.
    let sb = tokio::select! {
        biased;
        _ = term.recv() => return interrupted(),
        _ = int.recv() => return interrupted(),
        r = Sandbox::start(&opts) => r?,
    };
    // A signal that came as the start finished: the sandbox was no longer wanted.
    let late = tokio::select! {
        biased;
        _ = term.recv() => true,
        _ = int.recv() => true,
        _ = std::future::ready(()) => false,
    };
    if late {
        if let Some(e) = registry::read(&name) {
            registry::stop(&e)?;
        }
        return interrupted();
    }
    if json {
        emit(&(serde_json::to_string_pretty(&sb.info)? + "\n"));
    } else {
        emit(&describe_sandbox(&sb.info, &name, true));
    }
    Ok(Exit::Success)
}

fn stop(name: Option<String>, all: bool) -> Result<Exit> {
    let entries = registry::list();
    if all {
        let mut stopped = 0;
        for (e, c) in &entries {
            if matches!(c, Condition::Starting | Condition::InUse) {
                eprintln!(
                    "sandbox {}: {} (connbench pid {}): left to that command",
                    e.name,
                    c.as_str(),
                    e.owner_pid
                );
                continue;
            }
            stop_one(e, *c)?;
            stopped += 1;
        }
        if stopped == 0 {
            eprintln!("no sandbox to stop");
        }
        return Ok(Exit::Success);
    }
    let name = name.unwrap_or_else(registry::current_name);
    let Some((e, c)) = entries.iter().find(|(e, _)| e.name == name) else {
        let others: Vec<&str> = entries.iter().map(|(e, _)| e.name.as_str()).collect();
        if others.is_empty() {
            eprintln!("no sandbox is running (nothing to stop)");
        } else {
            eprintln!(
                "no sandbox named {name:?} (nothing to stop); there are: {} (`connbench sandbox stop NAME`, or --all)",
                others.join(", ")
            );
        }
        return Ok(Exit::Success);
    };
    match c {
        Condition::Starting => bail!(
            "sandbox {name:?} is still starting (connbench pid {}): interrupt that command (Ctrl-C or \
             SIGTERM stops what it started), or stop the sandbox once it has started",
            e.owner_pid
        ),
        Condition::InUse => bail!(
            "sandbox {name:?} is connbench pid {}'s own, for its run: it goes when that command ends \
             (interrupt it to end it sooner)",
            e.owner_pid
        ),
        _ => stop_one(e, *c)?,
    }
    Ok(Exit::Success)
}

fn stop_one(e: &Entry, c: Condition) -> Result<()> {
    let dir = registry::stop(e)?;
    let what = if c == Condition::Running {
        "stopped and removed".to_string()
    } else {
        format!("{}; removed what it left:", c.as_str())
    };
    match dir {
        Some(d) => eprintln!("sandbox {}: {what} {}", e.name, d.display()),
        None => eprintln!("sandbox {}: {}; it had made nothing yet", e.name, c.as_str()),
    }
    Ok(())
}

async fn status(name: Option<String>, json: bool) -> Result<Exit> {
    let all = registry::list();
    let chosen: Vec<(Entry, Condition)> = match &name {
        Some(n) => all.into_iter().filter(|(e, _)| &e.name == n).collect(),
        None => all,
    };
    if chosen.is_empty() {
        if json {
            emit("{\"running\": false, \"sandboxes\": []}\n");
        } else {
            match &name {
                Some(n) => emit(&format!("no sandbox named {n:?} is running\n")),
                None => emit("no sandbox is running; start one with `connbench sandbox start`\n"),
            }
        }
        return Ok(Exit::Success);
    }
    let mut ok = true;
    let (mut text, mut values) = (Vec::new(), Vec::new());
    for (e, c) in &chosen {
        let check = match (&e.info, c) {
            (Some(info), Condition::Running | Condition::InUse) => Some(check_connection(info).await),
            _ => None,
        };
        ok &= !c.left_over() && check.as_ref().is_none_or(|r| r.is_ok());
        values.push(serde_json::json!({
            "name": e.name,
            "condition": c,
            "owner_pid": e.owner_pid,
            "dir": e.dir,
            "running": matches!(c, Condition::Running | Condition::InUse),
            "accepts_connections": check.as_ref().is_some_and(|r| r.is_ok()),
            "sandbox": e.info,
        }));
        text.push(describe_entry(e, *c, check, name.is_some()));
    }
    if json {
        let v = match (&name, values.len()) {
            (Some(_), 1) => values.remove(0),
            _ => serde_json::json!({ "sandboxes": values }),
        };
        emit(&(serde_json::to_string_pretty(&v)? + "\n"));
    } else {
        emit(&text.join("\n"));
    }
    Ok(if ok { Exit::Success } else { Exit::Failed })
}

/// A real connection to the sandbox's PostgreSQL, over its socket.
async fn check_connection(info: &SandboxInfo) -> Result<(), String> {
    let t = info
        .target("unix")
        .and_then(|t| t.target())
        .map_err(|e| e.to_string())?;
    let ep = Endpoint::new(t).map_err(|e| e.to_string())?;
    crate::connect::connect_once(&ep, Some("SELECT 1"))
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// One sandbox in `status`: a running one described (in full, targets too, when it was
/// named), any other in one line that says what to do.
fn describe_entry(e: &Entry, c: Condition, check: Option<Result<(), String>>, full: bool) -> String {
    let dir = e
        .dir
        .as_ref()
        .map(|d| format!(" in {}", d.display()))
        .unwrap_or_default();
    let pid = e.owner_pid;
    match (&e.info, c) {
        (Some(info), Condition::Running | Condition::InUse) => {
            let mut s = describe_sandbox(info, &e.name, full && c == Condition::Running);
            if c == Condition::InUse {
                s += &format!(
                    "  a command's own sandbox (connbench pid {pid}): it goes when that command ends\n"
                );
            }
            match check {
                Some(Ok(())) => s += "status: running, accepts connections\n",
                Some(Err(err)) => {
                    s += &format!("status: processes alive: true; connection check failed: {err}\n")
                }
                None => {}
            }
            s
        }
        (_, Condition::Starting) => format!("sandbox {}{dir}: starting (connbench pid {pid})\n", e.name),
        _ => format!(
            "sandbox {}{dir}: {} (connbench pid {pid}); `connbench sandbox stop {}` removes what it left\n",
            e.name,
            c.as_str(),
            e.name
        ),
    }
}

/// A sandbox's servers and, with `full`, its targets by name with their text, one line
/// each for psql, pgbench, mariadb and sysbench, and how to stop it.
pub fn describe_sandbox(info: &SandboxInfo, name: &str, full: bool) -> String {
    let mut s = format!(
        "sandbox {name} in {} (servers run as {})\n  {} on port {}, pid {}\n  {} on port {}, pid {}\n",
        info.dir.display(),
        info.run_as,
        info.postgres_version,
        info.postgres_port,
        info.postgres_pid,
        info.pgbouncer_version,
        info.pgbouncer_port,
        info.pgbouncer_pid,
    );
    if let Some(m) = &info.mariadb {
        s += &format!(
            "  {} on port {}, pid {}, socket {}\n",
            m.version,
            m.port,
            m.pid,
            m.socket.display()
        );
    }
    if let Some(c) = &info.cgroups {
        let cores = |v: Option<f64>| v.map_or("no limit".to_string(), |v| format!("{v} cores"));
        s += &format!(
            "  CPU quota: servers {} (cgroup {}), PgBouncer {} (cgroup {})\n",
            cores(c.server.cpus),
            c.server.quota_dir.display(),
            cores(c.pooler.cpus),
            c.pooler.quota_dir.display(),
        );
    }
    if !full {
        return s;
    }
    let at = if name == registry::DEFAULT_NAME {
        String::new()
    } else {
        format!("@{name}")
    };
    s += &format!(
        "targets: connbench takes the name (`connbench load unix{at} -S -T 10`, `connbench init mariadb_unix{at}`); \
         other tools take the text (quote it in a shell):\n"
    );
    let width = info.targets.iter().map(|t| t.name.len()).max().unwrap_or(0);
    for t in &info.targets {
        s += &format!("  {:<width$}  {}\n", t.name, t.conninfo);
    }
    s += "other tools (paste as they are; the passwords stay in the passfile and the option files):\n";
    if let Ok(t) = info.target("unix") {
        let c = &t.conninfo;
        s += &format!("  psql      psql '{c}'\n");
        s += &format!("  pgbench   pgbench -i '{c}' && pgbench -S -T 10 '{c}'\n");
    }
    if let Some(p) = info.target("mariadb_unix").ok().and_then(|t| t.mysql.as_ref()) {
        s += &format!("  mariadb   {}\n", p.command);
        s += &format!(
            "  sysbench  sysbench oltp_point_select --db-driver=mysql --mysql-socket={} --mysql-user={} \
             --mysql-password=\"$(sed -n 's/^password=//p' {})\" --mysql-db={} prepare   # then the same with run\n",
            p.socket.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
            p.user,
            p.defaults_file.display(),
            p.database
        );
    }
    let arg = if name == registry::DEFAULT_NAME {
        String::new()
    } else {
        format!(" {name}")
    };
    s += &format!("stop it with: connbench sandbox stop{arg}\n");
    s
}

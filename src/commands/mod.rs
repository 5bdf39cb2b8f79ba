//! Command handlers: one file per command, each turning its validated arguments into
//! plans, running them and printing the report. What they share lives here: stdout with
//! a quiet broken pipe, the Ctrl-C channel, the results store, targets from the command
//! line and their routes.

pub mod connect;
pub mod init;
pub mod load;
pub mod suite;
pub mod runs;
pub mod sandbox;
pub mod relay;
pub mod record;
pub mod trace;
pub mod replay;
pub mod kubernetes;
pub mod completions;
pub mod man;

use std::io::Write;

use anyhow::{bail, Context, Result};
use tokio::sync::watch;

use crate::connect::Subject;
use crate::proto::Endpoint;
use crate::sandbox::Sandbox;
use crate::targets::Target;

/// A target from the command line (or the PG* environment when none is given).
/// Puts each subject behind the relays of `--path` and `--distance`; the routes returned
/// keep the relays running. A distance is measured first and printed, requested against
/// achieved.
pub async fn routed(
    subjects: Vec<Subject>,
    path: &str,
    distance: Option<std::time::Duration>,
) -> Result<(Vec<Subject>, Vec<crate::route::Route>)> {
    let spec = crate::route::RouteSpec {
        path: crate::route::PathKind::parse(path).context("--path")?,
        distance: distance.unwrap_or_default(),
    };
    if spec.is_direct() {
        return Ok((subjects, Vec::new()));
    }
    let mut out = Vec::new();
    let mut routes = Vec::new();
    for s in subjects {
        let r = crate::route::build(&s.endpoint.target, spec)?;
        let mut ep = Endpoint::new(r.target.clone())?;
        ep.target.label = Some(format!("{}+{path}", s.endpoint.target.name()));
        if !spec.distance.is_zero() {
            let v = crate::route::verify(&s.endpoint, &ep, spec.distance).await?;
            eprintln!(
                "route: {}: round trip requested +{:.2} ms, achieved +{:.3} ms{}",
                s.endpoint.target.name(),
                v.requested_ms,
                v.achieved_ms,
                if v.within_tolerance() {
                    ""
                } else {
                    " (outside max(0.2 ms, 3%): the machine may be overloaded)"
                }
            );
            ep.target.label = Some(format!(
                "{}+{}",
                s.endpoint.target.name(),
                crate::report::format_duration(spec.distance)
            ));
        }
        out.push(Subject {
            endpoint: ep,
            description: s.description,
        });
        routes.push(r);
    }
    Ok((out, routes))
}

/// A target from the command line: a running sandbox's target by name, or a conninfo
/// (the PG* environment when empty).
pub fn parse_target(text: Option<&str>) -> Result<Target> {
    resolve_target(text.unwrap_or(""))
}

/// A sandbox target name as typed: `unix`, `mariadb_tcp`, ... (the sandbox named by
/// CONNBENCH_SANDBOX, else `default`), `unix@NAME` (the sandbox NAME), either behind
/// `LABEL=` and followed by conninfo keys that override the target's (`tcp host=/tmp/sc
/// port=5432`: its database, user and passfile at another address, a relay's). Returns
/// the label, the target's name, the sandbox's name and the overriding keys ("" if none).
fn sandbox_target_name(text: &str) -> Option<(Option<&str>, &str, String, &str)> {
    let (label, rest) = match text.trim().split_once('=') {
        Some((l, r)) if crate::targets::is_target_name(l) => (Some(l), r),
        _ => (None, text.trim()),
    };
    let (rest, keys) = match rest.trim().split_once(char::is_whitespace) {
        Some((name, keys)) => (name, keys.trim()),
        None => (rest.trim(), ""),
    };
    let (target, sandbox) = match rest.split_once('@') {
        Some((t, n)) => (t, n.to_string()),
        None => (rest, crate::sandbox::registry::current_name()),
    };
    let known = crate::sandbox::TARGET_NAMES.contains(&target)
        || crate::sandbox::mariadb::TARGET_NAMES.contains(&target);
    known.then_some((label, target, sandbox, keys))
}

/// The conninfo of the running sandbox's target `name` with `keys` after it (a
/// conninfo's later keys override its earlier ones); MariaDB's URIs take none.
fn sandbox_conninfo(info: &crate::sandbox::SandboxInfo, name: &str, keys: &str) -> Result<String> {
    let conninfo = info.target(name)?.conninfo.clone();
    if keys.is_empty() {
        return Ok(conninfo);
    }
    if !keys.split_whitespace().all(|k| k.contains('=')) {
        bail!(
            "after the target name {name}, {:?} is not key=value: give keys to override, as in \
             `tcp host=/tmp/sc port=5432`",
            crate::targets::redact(keys)
        );
    }
    if crate::sandbox::mariadb::TARGET_NAMES.contains(&name) {
        bail!("{name} is a MariaDB URI: keys after its name cannot override it; give the URI itself");
    }
    Ok(format!("{conninfo} {keys}"))
}

/// The running sandbox's target `text` names (see [`sandbox_target_name`]), labelled as
/// typed; `None` when `text` is no sandbox target name.
pub fn sandbox_target(text: &str) -> Result<Option<Target>> {
    let Some((label, name, sandbox, keys)) = sandbox_target_name(text) else {
        return Ok(None);
    };
    let redacted = crate::targets::redact(text.trim());
    let info = crate::sandbox::registry::running(&sandbox)
        .with_context(|| format!("target {redacted:?} is a target of connbench's sandbox"))?;
    let conninfo = sandbox_conninfo(&info, name, keys).with_context(|| format!("target {redacted:?}"))?;
    let mut t = Target::parse(&conninfo).with_context(|| format!("target {redacted:?}"))?;
    t.label = Some(label.map(str::to_string).unwrap_or(redacted));
    Ok(Some(t))
}

/// A target as typed: a running sandbox's by name, else a conninfo or URI. A text that is
/// neither, while sandboxes run, is refused with their target names.
pub fn resolve_target(text: &str) -> Result<Target> {
    if let Some(t) = sandbox_target(text)? {
        return Ok(t);
    }
    Target::parse(text).with_context(|| {
        let running: Vec<String> = crate::sandbox::registry::list()
            .into_iter()
            .filter(|(e, c)| e.detached && *c == crate::sandbox::registry::Condition::Running)
            .map(|(e, _)| e.name)
            .collect();
        let hint = match running.first() {
            None => String::new(),
            Some(first) => format!(
                " (not a sandbox target either: with a sandbox running ({}), give a name such as \
                 unix, tcp, tls, pgbouncer_unix or mariadb_unix, or unix@{first} for one by name)",
                running.join(", ")
            ),
        };
        format!("target {:?}{hint}", crate::targets::redact(text))
    })
}

/// The running detached sandbox `target` points at (its name, or its conninfo pasted),
/// so its servers' CPU is measured from the pids it recorded.
pub fn own_sandbox(target: &Target) -> Option<crate::sandbox::SandboxInfo> {
    crate::sandbox::registry::owning(target)
}

/// `--target` of `run`: `NAME=CONNINFO` or a bare CONNINFO, where CONNINFO may be a
/// running sandbox's target name; returns the name and the conninfo text.
pub fn target_override(text: &str) -> Result<(Option<String>, String)> {
    if let Some((label, name, sandbox, keys)) = sandbox_target_name(text) {
        let info = crate::sandbox::registry::running(&sandbox).with_context(|| {
            format!(
                "--target {:?}: {name} is a target of connbench's sandbox",
                crate::targets::redact(text)
            )
        })?;
        let conninfo = sandbox_conninfo(&info, name, keys).with_context(|| format!("--target {name}"))?;
        resolve_target(&conninfo).with_context(|| format!("--target {:?}", crate::targets::redact(text)))?;
        return Ok((label.map(str::to_string), conninfo));
    }
    let (name, conninfo) = crate::targets::split_label(text);
    resolve_target(conninfo).with_context(|| format!("--target {:?}", crate::targets::redact(text)))?;
    Ok((name.map(str::to_string), conninfo.to_string()))
}

/// Creates the tables in a fresh sandbox and lets every sandbox role use them.
pub async fn init_sandbox_tables(sb: &Sandbox, schema: &str, scale: u32) -> Result<()> {
    let ep = Endpoint::new(sb.info.target("unix")?.target()?)?;
    let report = crate::dataset::pgbench::init(&ep, schema, scale).await?;
    eprintln!(
        "sandbox: {} rows at scale {scale} in schema {schema} ({:.2} s)",
        report.rows,
        report.elapsed.as_secs_f64()
    );
    crate::dataset::pgbench::grant(&ep, schema, crate::sandbox::TRUST_ROLE).await?;
    // MariaDB, when the sandbox runs it: the same tables in the database of that name,
    // which every MariaDB role of the sandbox is granted.
    if let Ok(t) = sb.info.target("mariadb_unix") {
        let ep = Endpoint::new(t.target()?)?;
        let report = crate::dataset::pgbench::init(&ep, schema, scale).await?;
        eprintln!(
            "sandbox: {} rows at scale {scale} in MariaDB database {schema} ({:.2} s)",
            report.rows,
            report.elapsed.as_secs_f64()
        );
    }
    Ok(())
}

/// sysbench's tables (sbtest1, 10,000 rows: sysbench's defaults) in a fresh sandbox,
/// on PostgreSQL and on MariaDB when it runs, for the oltp-* workloads.
pub async fn init_sandbox_sysbench_tables(sb: &Sandbox) -> Result<()> {
    let o = crate::workload::sysbench::SysbenchOptions::default();
    let ep = Endpoint::new(sb.info.target("unix")?.target()?)?;
    let report = crate::dataset::sysbench::init(&ep, &o).await?;
    crate::dataset::sysbench::grant(&ep, crate::sandbox::TRUST_ROLE).await?;
    if let Ok(t) = sb.info.target("mariadb_unix") {
        crate::dataset::sysbench::init(&Endpoint::new(t.target()?)?, &o).await?;
    }
    eprintln!(
        "sandbox: sysbench's sbtest1 of {} rows ({:.2} s on PostgreSQL)",
        report.table_size,
        report.elapsed.as_secs_f64()
    );
    Ok(())
}

/// A channel that turns true on the first Ctrl-C (or SIGTERM), so a run can stop cleanly
/// and still report.
pub fn stop_on_signals() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let term_fut = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok();
        let first = async {
            match interrupt.as_mut() {
                Some(i) => {
                    i.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = first => {}
            _ = term_fut => {}
        }
        eprintln!("\nstopping: reporting what was measured so far (Ctrl-C again to quit at once)");
        let _ = tx.send(true);
        // Once a handler is installed the default action is gone, and tokio's handler is
        // only read when the runtime is polled: a teardown that blocks the runtime (a
        // sandbox waiting for its servers to stop) would never see a second Ctrl-C. So
        // the second one goes to a plain handler that quits at once: finished
        // repetitions are already in the store, and a sandbox's watchdog removes its
        // servers and directory when this process ends.
        // SAFETY: `quit_now` only calls the async-signal-safe write(2) and _exit(2).
        unsafe { libc::signal(libc::SIGINT, quit_now as *const () as libc::sighandler_t) };
    });
    rx
}

/// The second Ctrl-C: says so and ends the process with 130, from signal context.
extern "C" fn quit_now(_: libc::c_int) {
    const MSG: &[u8] = b"\nsecond Ctrl-C: quitting now; the sandbox's watchdog removes what is left\n";
    // SAFETY: write(2) and _exit(2) are async-signal-safe.
    unsafe {
        libc::write(2, MSG.as_ptr().cast(), MSG.len());
        libc::_exit(130);
    }
}

/// Writes to stdout; a closed pipe (`connbench ... | head`) ends the program quietly.
pub fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
    }
}

pub fn open_store(args: &crate::cli::StoreArgs) -> Result<crate::experiment::store::Store> {
    open_store_at(args.store.as_deref())
}

/// The store at `location` (a SQLite file, or a PostgreSQL URL or conninfo), or the
/// default SQLite file.
pub fn open_store_at(location: Option<&str>) -> Result<crate::experiment::store::Store> {
    match location {
        Some(location) => crate::experiment::store::Store::open_location(location),
        None => crate::experiment::store::Store::open(&crate::experiment::store::default_path()?),
    }
}

/// Keeps the metrics endpoint serving a run's final figures for `linger`, for a last
/// scrape; Ctrl-C ends it early.
pub async fn linger_metrics(e: &crate::live::Exporter, linger: std::time::Duration) {
    eprintln!(
        "metrics: serving the final figures at http://{}/metrics for {} (Ctrl-C ends it)",
        e.addr,
        crate::report::format_duration(linger)
    );
    tokio::select! {
        _ = tokio::time::sleep(linger) => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::sandbox_target_name;

    #[test]
    fn sandbox_target_names_are_told_from_conninfo_strings() {
        // `default`, unless CONNBENCH_SANDBOX names another.
        let d = &crate::sandbox::registry::current_name();
        let name = |t: &str| {
            sandbox_target_name(t)
                .map(|(l, t, s, k)| (l.map(str::to_string), t.to_string(), s, k.to_string()))
        };
        let some = |l: Option<&str>, t: &str, s: &str, k: &str| {
            Some((l.map(str::to_string), t.to_string(), s.to_string(), k.to_string()))
        };
        assert_eq!(name("unix"), some(None, "unix", d, ""));
        assert_eq!(name("mariadb_tls@b"), some(None, "mariadb_tls", "b", ""));
        assert_eq!(name("sidecar_unix=tcp"), some(Some("sidecar_unix"), "tcp", d, ""));
        assert_eq!(
            name(" pgbouncer_tx_unix "),
            some(None, "pgbouncer_tx_unix", d, "")
        );
        // Keys after the name override the target's: a relay's address, say.
        assert_eq!(
            name("sidecar_unix=tcp host=/tmp/sc port=5432"),
            some(Some("sidecar_unix"), "tcp", d, "host=/tmp/sc port=5432")
        );
        assert_eq!(name("tcp@b  port=6543 "), some(None, "tcp", "b", "port=6543"));
        // A conninfo key is no label, and a word that is no target name is no target.
        for not in [
            "dbname=unix",
            "host=/tmp port=5432",
            "postgres://u@h/db",
            "mariadb://u@h/db?socket=/tmp/s",
            "unx",
            "mydb",
            "",
        ] {
            assert_eq!(name(not), None, "{not}");
        }
    }
}

//! Targets as typed on the command line: a running sandbox's target by name (with keys
//! that override its own), else a conninfo or URI; `run`'s `--target`; the upstream of
//! `relay` and `record`.

use anyhow::{bail, Context, Result};

use crate::targets::Target;

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

/// `--upstream-tls`: the TLS set-up to the upstream's host (sslmode=require: encrypted,
/// the certificate not verified, as libpq's require), or `None` without the flag.
pub fn upstream_tls(
    upstream: &crate::net::relay::Addr,
    on: bool,
) -> Result<Option<crate::net::transport::TlsSetup>> {
    match (upstream, on) {
        (_, false) => Ok(None),
        (crate::net::relay::Addr::Tcp(a), true) => {
            let (host, port) = a.rsplit_once(':').context("--upstream")?;
            let t = Target::parse(&format!(
                "host={} port={port} sslmode=require",
                host.trim_start_matches('[').trim_end_matches(']')
            ))
            .context("--upstream-tls")?;
            crate::net::transport::TlsSetup::for_target(&t)
                .map_err(|e| anyhow::anyhow!("--upstream-tls: {e}"))
        }
        (crate::net::relay::Addr::Unix(_), true) => {
            bail!("--upstream-tls needs a host:port upstream: PostgreSQL has no TLS on a Unix socket")
        }
    }
}

/// MySQL with `record --listen-tls`: the TLS the recorder opens to the server when an
/// application asks for TLS (sslmode=require's checks: encrypted, the server's
/// certificate not verified, as `--upstream-tls`; the name sent is the upstream's host,
/// localhost for a Unix socket).
pub fn onward_tls(upstream: &crate::net::relay::Addr) -> Result<crate::net::transport::TlsSetup> {
    let host = match upstream {
        crate::net::relay::Addr::Tcp(a) => a
            .rsplit_once(':')
            .map_or(a.as_str(), |(h, _)| h)
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        crate::net::relay::Addr::Unix(_) => "localhost".to_string(),
    };
    let t = Target::parse(&format!("host={host} port=3306 sslmode=require")).context("--listen-tls")?;
    crate::net::transport::TlsSetup::for_target(&t)
        .map_err(|e| anyhow::anyhow!("--listen-tls: TLS to the server {host}: {e}"))?
        .context("--listen-tls: no TLS set-up to the server")
}

/// `--upstream`: host:port, a socket path, or a running sandbox's target by name (`tcp`,
/// `unix@b`): the address of that target's server.
pub fn upstream_addr(text: &str) -> Result<crate::net::relay::Addr> {
    match sandbox_target(text).context("--upstream")? {
        Some(t) => Ok(crate::route::upstream_of(&t)),
        None => text.parse().context("--upstream"),
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

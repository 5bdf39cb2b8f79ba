//! The sandboxes of this user, by name, so several run side by side and none is lost.
//!
//! What it owns: one state file per sandbox, `$TMPDIR/connbench-sandboxes-UID/NAME.json`,
//! written before anything of the sandbox is made and rewritten as its start goes on
//! (its directory and cgroups, then what it is once every server is ready). A detached
//! sandbox (`sandbox start`) has the name it was given (`default` unless `--name` or
//! `CONNBENCH_SANDBOX` say otherwise), claimed before anything starts, so a second start
//! of the same name is refused before it makes anything. A sandbox a command starts for
//! its own run (`load --sandbox`, `connect --sandbox`, `run`) is listed under its
//! directory's name (`cb-XXXXXX`) while that command runs.
//!
//! Each file names the connbench process that made it, by pid and start time (so a pid
//! reused by another process is not taken for it). A sandbox whose start never finished,
//! or a command's sandbox, whose process is gone is a left-over: however its process
//! died (SIGKILL included, and its watchdog with it), the file says where its directory,
//! processes and cgroups are, and [`stop`] removes them. It hands on [`Entry`]s with their
//! [`Condition`], the running sandboxes' [`SandboxInfo`] by name, and the detached
//! sandbox a target points at ([`owning`]).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use super::{cgroup, SandboxInfo};
use crate::targets::{Host, Target};

/// The name of a detached sandbox when none is given.
pub const DEFAULT_NAME: &str = "default";

/// The environment variable that names the sandbox commands mean (`sandbox start`,
/// `stop`, and the target names `unix`, `tcp`, ...).
pub const NAME_ENV: &str = "CONNBENCH_SANDBOX";

/// One sandbox's state file.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    pub name: String,
    /// The connbench process that started it (and, unless detached, holds it).
    pub owner_pid: u32,
    /// That process's start time (clock ticks after boot, `/proc/PID/stat`'s 22nd field).
    pub owner_start: u64,
    /// Kept running after its owner ends (`sandbox start`).
    pub detached: bool,
    /// Its directory, once made.
    #[serde(default)]
    pub dir: Option<PathBuf>,
    /// Its cgroup directories, children before parents, once planned.
    #[serde(default)]
    pub cgroups: Vec<PathBuf>,
    /// What it is, once every server is ready.
    #[serde(default)]
    pub info: Option<SandboxInfo>,
}

/// Where a sandbox stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// Its start is under way (its process lives).
    Starting,
    /// Its process ended before the start finished: a left-over.
    StartDied,
    /// Detached and its servers run.
    Running,
    /// Detached, but a server of it is not running any more: a left-over.
    ServersGone,
    /// A command's own sandbox, and that command runs.
    InUse,
    /// A command's own sandbox whose command is gone: a left-over.
    OwnerGone,
}

impl Condition {
    /// Whatever is left of it is for `sandbox stop` to remove.
    pub fn left_over(self) -> bool {
        matches!(
            self,
            Condition::StartDied | Condition::ServersGone | Condition::OwnerGone
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Condition::Starting => "starting",
            Condition::StartDied => "its start died",
            Condition::Running => "running",
            Condition::ServersGone => "its servers are gone",
            Condition::InUse => "in use",
            Condition::OwnerGone => "its command is gone",
        }
    }
}

impl Entry {
    /// A new entry owned by this process.
    pub fn new(name: &str, detached: bool) -> Entry {
        let pid = std::process::id();
        Entry {
            name: name.to_string(),
            owner_pid: pid,
            owner_start: start_time(pid).unwrap_or(0),
            detached,
            dir: None,
            cgroups: Vec::new(),
            info: None,
        }
    }

    pub fn condition(&self) -> Condition {
        let owner = start_time(self.owner_pid).is_some_and(|t| t == self.owner_start);
        match (&self.info, self.detached) {
            (None, _) if owner => Condition::Starting,
            (None, _) => Condition::StartDied,
            (Some(_), false) if owner => Condition::InUse,
            (Some(_), false) => Condition::OwnerGone,
            (Some(info), true) if servers_alive(info) => Condition::Running,
            (Some(_), true) => Condition::ServersGone,
        }
    }

    /// Whether anything of it is left on the machine: its directory or a cgroup.
    fn leaves_anything(&self) -> bool {
        self.dir.as_ref().is_some_and(|d| d.exists()) || self.cgroups.iter().any(|c| c.exists())
    }
}

/// Whether every server a started sandbox recorded still runs.
pub fn servers_alive(info: &SandboxInfo) -> bool {
    super::pid_alive_in(info.postgres_pid, &info.dir)
        && super::pid_alive_in(info.pgbouncer_pid, &info.dir)
        && info
            .mariadb
            .as_ref()
            .is_none_or(|m| super::pid_alive_in(m.pid, &info.dir))
}

/// The sandbox name commands mean when none is given: `CONNBENCH_SANDBOX`, else `default`.
pub fn current_name() -> String {
    std::env::var(NAME_ENV)
        .ok()
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_NAME.to_string())
}

/// A name a user may give a sandbox: short, and safe in a file name and a shell.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && !name.starts_with("cb-");
    if !ok {
        bail!(
            "sandbox name {name:?}: use 1 to 32 letters, digits, '-' or '_', not starting with \"cb-\" \
             (a command's own sandbox is listed under its directory's name, cb-XXXXXX)"
        );
    }
    Ok(())
}

/// The registry's directory for this user.
fn base() -> PathBuf {
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    std::env::temp_dir().join(format!("connbench-sandboxes-{uid}"))
}

/// The state file of the sandbox `name` (the watchdog removes it after a SIGKILL).
pub fn path(name: &str) -> PathBuf {
    base().join(format!("{name}.json"))
}

fn make_base() -> Result<PathBuf> {
    let dir = base();
    match fs::create_dir(&dir) {
        Ok(()) => {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))?;
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => bail!("cannot create the sandbox registry {}: {e}", dir.display()),
    }
    Ok(dir)
}

/// Writes `entry` to a temporary file of its own in the registry, for a rename or a link.
fn write_temp(entry: &Entry) -> Result<PathBuf> {
    let dir = make_base()?;
    let tmp = dir.join(format!(".{}.{}.tmp", entry.name, std::process::id()));
    fs::write(&tmp, serde_json::to_vec_pretty(entry)?)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    Ok(tmp)
}

/// Saves `entry` whole (a reader sees the old file or the new one, never half of one).
pub fn save(entry: &Entry) -> Result<()> {
    // The directory may vanish between making it and writing (the last sandbox of
    // another process removing it as it goes): try again.
    let mut last = None;
    for _ in 0..3 {
        let tmp = match write_temp(entry) {
            Ok(t) => t,
            Err(e) => {
                last = Some(e);
                continue;
            }
        };
        match fs::rename(&tmp, path(&entry.name)) {
            Ok(()) => return Ok(()),
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                last = Some(anyhow!("cannot save {}: {e}", path(&entry.name).display()));
            }
        }
    }
    Err(last.unwrap_or_else(|| anyhow!("cannot save the sandbox registry")))
}

/// Takes the name `name` for a detached sandbox this process starts. A left-over of that
/// name is removed first; a sandbox of that name that runs or is starting is a refusal.
pub fn claim(name: &str) -> Result<Entry> {
    check_name(name)?;
    let entry = Entry::new(name, true);
    for _ in 0..4 {
        let tmp = write_temp(&entry)?;
        // A hard link is created whole or not at all, and never over an existing file:
        // of two starts of one name, one wins.
        let linked = fs::hard_link(&tmp, path(name));
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => return Ok(entry),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => bail!(
                "cannot claim the sandbox name {name:?} in {}: {e}",
                base().display()
            ),
        }
        let Some(old) = read(name) else {
            // Unreadable (not written by connbench): the name is free again.
            let _ = fs::remove_file(path(name));
            continue;
        };
        let c = old.condition();
        if !c.left_over() {
            let where_ = old
                .dir
                .as_ref()
                .map(|d| format!(" in {}", d.display()))
                .unwrap_or_default();
            bail!(
                "a sandbox named {name:?} is {}{where_} (connbench pid {}); stop it with \
                 `connbench sandbox stop {name}`, or start another beside it with `--name OTHER`",
                if c == Condition::Starting {
                    "starting"
                } else {
                    "already running"
                },
                old.owner_pid
            );
        }
        eprintln!(
            "sandbox: removing the left-over sandbox {name:?} ({}) before starting a new one",
            c.as_str()
        );
        stop(&old)?;
    }
    bail!("cannot claim the sandbox name {name:?}: other starts of that name keep taking it")
}

/// The state file of `name`, when there is a readable one.
pub fn read(name: &str) -> Option<Entry> {
    let text = fs::read_to_string(path(name)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Removes `entry`'s state file, if it is still that entry's (not a new sandbox's that
/// took the name since), and the registry's directory once it is empty.
pub fn forget(entry: &Entry) {
    if let Some(now) = read(&entry.name) {
        if now.owner_pid == entry.owner_pid && now.owner_start == entry.owner_start {
            let _ = fs::remove_file(path(&entry.name));
        }
    }
    // Fails, as it should, while another sandbox is listed.
    let _ = fs::remove_dir(base());
}

/// Every sandbox of this user with its condition, by name. A command's own sandbox whose
/// command is gone and that left nothing (its watchdog cleaned up) is forgotten here.
pub fn list() -> Vec<(Entry, Condition)> {
    let Ok(dir) = fs::read_dir(base()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        let Some(name) = file.strip_suffix(".json").filter(|_| !file.starts_with('.')) else {
            continue;
        };
        let Some(entry) = read(name) else { continue };
        let c = entry.condition();
        if c == Condition::OwnerGone && !entry.leaves_anything() {
            forget(&entry);
            continue;
        }
        out.push((entry, c));
    }
    out.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    out
}

/// The running detached sandbox `name`'s description, or why there is none.
pub fn running(name: &str) -> Result<SandboxInfo> {
    let all = list();
    if let Some((e, c)) = all.iter().find(|(e, _)| e.name == name) {
        return match (&e.info, c) {
            (Some(info), Condition::Running) => Ok(info.clone()),
            _ => bail!(
                "the sandbox named {name:?} is not running ({}); see `connbench sandbox status`",
                c.as_str()
            ),
        };
    }
    let others: Vec<&str> = all
        .iter()
        .filter(|(e, c)| e.detached && *c == Condition::Running)
        .map(|(e, _)| e.name.as_str())
        .collect();
    if others.is_empty() {
        bail!(
            "no sandbox named {name:?} is running; start one with `connbench sandbox start{}`",
            if name == DEFAULT_NAME {
                String::new()
            } else {
                format!(" --name {name}")
            }
        );
    }
    let first = others[0];
    bail!(
        "no sandbox named {name:?} is running; running: {}: name one in the target \
         (`unix@{first}`) or with {NAME_ENV}={first}",
        others.join(", ")
    )
}

/// The running detached sandbox whose sockets or loopback ports `target` names, so a
/// conninfo pasted from `sandbox start` is known as connbench's own.
pub fn owning(target: &Target) -> Option<SandboxInfo> {
    list()
        .into_iter()
        .filter(|(e, c)| e.detached && *c == Condition::Running)
        .filter_map(|(e, _)| e.info)
        .find(|info| serves(info, target))
}

/// Whether `t` names one of the sandbox's servers (its sockets, or its loopback ports).
pub fn serves(info: &SandboxInfo, t: &Target) -> bool {
    let mariadb_port = info.mariadb.as_ref().map(|m| m.port);
    match &t.host {
        Host::Unix(p) => {
            (p == &info.dir && [info.postgres_port, info.pgbouncer_port].contains(&t.port))
                || info.mariadb.as_ref().is_some_and(|m| &m.socket == p)
        }
        Host::Tcp(h) => {
            let loopback = h == "localhost"
                || t.hostaddr
                    .or_else(|| h.parse().ok())
                    .is_some_and(|a: std::net::IpAddr| a.is_loopback());
            loopback
                && (t.port == info.postgres_port
                    || t.port == info.pgbouncer_port
                    || Some(t.port) == mariadb_port)
        }
    }
}

/// Removes what `entry` names: its servers (each as its own stop asks, then anything
/// else started in its directory), its cgroups (after killing what is still in them:
/// a group named after its directory holds only its processes), its directory, and its
/// state file. Returns the directory removed, if there was one.
pub fn stop(entry: &Entry) -> Result<Option<PathBuf>> {
    let mut removed = None;
    if let Some(dir) = &entry.dir {
        super::stop_in_dir(dir);
        for g in &entry.cgroups {
            for pid in cgroup_members(g) {
                // SAFETY: kill has no memory-safety preconditions.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
        cgroup::remove_dirs(&entry.cgroups, Duration::from_secs(5))?;
        super::remove_dir(dir)?;
        removed = Some(dir.clone());
    }
    forget(entry);
    Ok(removed)
}

fn cgroup_members(dir: &Path) -> Vec<u32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// A process's start time in clock ticks after boot; `None` when it does not exist (or
/// is a zombie: it has ended).
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the parenthesised command name: state is the 3rd field overall,
    // starttime the 22nd.
    let rest: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    if matches!(rest.first(), Some(&"Z") | Some(&"X")) {
        return None;
    }
    rest.get(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_words_apart_from_the_directories() {
        for ok in ["default", "b", "load-2", "A_1"] {
            check_name(ok).unwrap();
        }
        for bad in ["", "a b", "../x", "cb-AbC123", "x/y", &"n".repeat(33)] {
            let e = check_name(bad).unwrap_err().to_string();
            assert!(e.contains("letters, digits"), "{e}");
        }
    }

    #[test]
    fn this_process_is_alive_and_its_start_time_is_stable() {
        let me = std::process::id();
        let t = start_time(me).unwrap();
        assert_eq!(start_time(me), Some(t));
        let e = Entry::new("x", true);
        assert_eq!(e.condition(), Condition::Starting);
        let dead = Entry {
            owner_start: t + 1,
            ..e.clone()
        };
        assert_eq!(
            dead.condition(),
            Condition::StartDied,
            "a pid reused by another process is not the owner"
        );
        assert!(dead.condition().left_over());
        assert!(!e.condition().left_over());
    }
}

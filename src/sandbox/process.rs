//! Process and file tools of the sandbox: finding the server binaries, the account the
//! servers run as, their commands (own process group, cgroup), the clean-up watchdog,
//! stopping a process by signal then kill, and files owned by the servers' user. Shared
//! by the PostgreSQL, PgBouncer and MariaDB lifecycles and the registry.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{chown, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::{cgroup, Binaries, RunAs};

/// Whether a process is alive and its command line mentions `dir` (so a reused pid of
/// some other process is never signalled).
pub fn pid_alive_in(pid: u32, dir: &Path) -> bool {
    let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let needle = dir.as_os_str().as_encoded_bytes();
    cmdline.windows(needle.len()).any(|w| w == needle)
}

pub(super) fn stop_pid(pid: u32, signal: i32, dir: &Path, wait: Duration) -> bool {
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
pub(super) fn stop_child(child: &mut Child, signal: i32, wait: Duration) -> bool {
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

/// A command for a server binary: as the unprivileged user, in its own process group (so
/// a Ctrl-C at the terminal reaches connbench, which then stops the servers in order).
pub(super) fn server_command(bin: &Path, run_as: &RunAs, cwd: &Path) -> Command {
    server_command_in(bin, run_as, cwd, None)
}

/// The same, the process joining `group` (its CPU quota) before `exec`, so that every
/// process it forks is in the group too.
pub(super) fn server_command_in(
    bin: &Path,
    run_as: &RunAs,
    cwd: &Path,
    group: Option<&cgroup::Group>,
) -> Command {
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
pub(super) fn spawn_watchdog(
    dir: &Path,
    entry: Option<&Path>,
    cgroups: &[PathBuf],
) -> Result<(Child, ChildStdin)> {
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

pub(super) fn find_binaries() -> Result<Binaries> {
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

pub(super) fn run_as_user() -> Result<RunAs> {
    run_as_named(
        &std::env::var("CONNBENCH_SANDBOX_USER").unwrap_or_else(|_| "postgres".to_string()),
        "install the postgresql package (it creates the postgres user) or set CONNBENCH_SANDBOX_USER",
    )
    .context("cannot start sandbox")
}

/// The account a server runs as: this process's own, or as root the named one (the
/// servers refuse to run as root).
pub(super) fn run_as_named(name: &str, fix: &str) -> Result<RunAs> {
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

pub(super) fn remove_dir(dir: &Path) -> Result<()> {
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(anyhow!("cannot remove sandbox directory {}: {e}", dir.display())),
    }
}

pub(super) fn write_file(path: &Path, text: &str, mode: u32) -> Result<()> {
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

pub(super) fn write_owned(path: &Path, text: &str, mode: u32, run_as: &RunAs) -> Result<()> {
    write_file(path, text, mode)?;
    give_to(path, run_as)
}

pub(super) fn give_to(path: &Path, run_as: &RunAs) -> Result<()> {
    if let Some((uid, gid)) = run_as.ids {
        chown(path, Some(uid), Some(gid)).with_context(|| format!("cannot chown {}", path.display()))?;
    }
    Ok(())
}

/// A log file the server's user may append to.
pub(super) fn log_file(path: &Path, run_as: &RunAs) -> Result<fs::File> {
    let f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    give_to(path, run_as)?;
    Ok(f)
}

pub(super) fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("cannot find a free TCP port on 127.0.0.1")?;
    Ok(l.local_addr()?.port())
}

pub(super) fn version_of(bin: &Path) -> String {
    Command::new(bin)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".to_string())
}

pub(super) fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_else(|e| format!("(cannot read {}: {e})", path.display()));
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

pub(super) fn random_token(len: usize) -> String {
    use rand::RngExt;
    const CHARS: &[u8] = b"abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut rng = rand::rng();
    (0..len)
        .map(|_| CHARS[rng.random_range(0..CHARS.len())] as char)
        .collect()
}

//! What a sandbox started, kept track of so it can be stopped without a handle on it:
//! every process the sandbox spawns leads its own process group and is recorded in
//! `DIR/pids` ([`record_pid`]); helpers that run to their end (initdb,
//! mariadb-install-db) are awaited rather than blocked on, so a cancelled start sees its
//! Ctrl-C or SIGTERM at once, and are killed with their group when dropped
//! ([`run_helper`]); what no `Sandbox` holds any more (a detached sandbox, one whose
//! process died) is stopped from its pid files and recorded groups ([`stop_in_dir`]).

use std::fs;
use std::io::{self, Write};
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use super::{pid_alive_in, stop_pid};

/// Stops what was started in a sandbox directory, from the pid files there (no
/// `Sandbox` holds the processes: a detached sandbox, or one whose process died): MariaDB
/// and PgBouncer with SIGTERM, PostgreSQL with SIGINT then SIGQUIT, each then killed if
/// it hangs, and then every process group it recorded ([`kill_recorded`]).
pub(crate) fn stop_in_dir(dir: &Path) {
    let pid_in = |file: &Path| -> u32 {
        fs::read_to_string(file)
            .ok()
            .and_then(|t| t.lines().next().and_then(|l| l.trim().parse().ok()))
            .unwrap_or(0)
    };
    let mariadb = pid_in(&dir.join("mariadb").join("mariadbd.pid"));
    if !stop_pid(mariadb, libc::SIGTERM, dir, Duration::from_secs(15)) {
        stop_pid(mariadb, libc::SIGKILL, dir, Duration::from_secs(3));
    }
    stop_pid(
        pid_in(&dir.join("pgbouncer.pid")),
        libc::SIGTERM,
        dir,
        Duration::from_secs(5),
    );
    let postgres = pid_in(&dir.join("data").join("postmaster.pid"));
    if !stop_pid(postgres, libc::SIGINT, dir, Duration::from_secs(10)) {
        stop_pid(postgres, libc::SIGQUIT, dir, Duration::from_secs(3));
    }
    kill_recorded(dir);
}

/// Records a process started in the sandbox directory (each is its own process group's
/// leader), so whatever stops the sandbox without a handle on it finds it: `DIR/pids`.
pub(super) fn record_pid(dir: &Path, pid: u32) {
    let line = format!("{pid}\n");
    let _ = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("pids"))
        .and_then(|mut f| f.write_all(line.as_bytes()));
}

/// Kills, with SIGKILL, every process group recorded in `DIR/pids` that still has a
/// process whose command line names the directory (so a group id reused by some other
/// program is never touched): helpers such as initdb with their children, and servers
/// a stop by signal did not end.
pub(super) fn kill_recorded(dir: &Path) {
    let Ok(text) = fs::read_to_string(dir.join("pids")) else {
        return;
    };
    let groups: Vec<i32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    if groups.is_empty() {
        return;
    }
    let Ok(procs) = fs::read_dir("/proc") else { return };
    let mut ours = std::collections::BTreeSet::new();
    for p in procs.flatten() {
        let Ok(pid) = p.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        // SAFETY: getpgid has no memory-safety preconditions.
        let pgid = unsafe { libc::getpgid(pid as i32) };
        if groups.contains(&pgid) && pid_alive_in(pid, dir) {
            ours.insert(pgid);
        }
    }
    for &g in &ours {
        // SAFETY: kill has no memory-safety preconditions; -g is a group of ours.
        unsafe { libc::kill(-g, libc::SIGKILL) };
    }
    // Reaped by their parent (init, for a sandbox whose process is gone): wait until
    // they are, so the cgroups they were in can be removed.
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline
        && ours
            .iter()
            // SAFETY: as above; signal 0 only asks whether the group exists.
            .any(|&g| unsafe { libc::kill(-g, 0) } == 0)
    {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs a helper (initdb, mariadb-install-db) to its end without blocking the runtime,
/// so a Ctrl-C or SIGTERM during it is seen at once. Dropped unfinished (the start was
/// cancelled), it kills the helper's process group, children included.
pub(super) async fn run_helper(mut cmd: Command, dir: &Path) -> io::Result<std::process::ExitStatus> {
    struct KillGroupOnDrop(Option<Child>);
    impl Drop for KillGroupOnDrop {
        fn drop(&mut self) {
            if let Some(mut c) = self.0.take() {
                // SAFETY: kill has no memory-safety preconditions; the helper leads its
                // own process group (`server_command`).
                unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
                let _ = c.wait();
            }
        }
    }
    let child = cmd.spawn()?;
    record_pid(dir, child.id());
    let mut guard = KillGroupOnDrop(Some(child));
    loop {
        if let Some(status) = guard.0.as_mut().expect("held until it ends").try_wait()? {
            guard.0 = None;
            return Ok(status);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

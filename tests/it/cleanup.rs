//! Nothing is left behind: after a stop, a panic, Ctrl-C or a SIGKILL of connbench, no
//! postgres or pgbouncer process of the sandbox and no directory remains.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{alive, assert_gone, children, start_sandbox};

/// Every process of a running sandbox: postmaster, its helpers and backends, PgBouncer.
fn sandbox_pids(postgres: u32, pgbouncer: u32) -> Vec<u32> {
    // The postmaster starts some helpers (autovacuum and logical replication launchers)
    // only after it accepts connections; on a loaded machine that takes a moment.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut pids = vec![postgres, pgbouncer];
    loop {
        pids.truncate(2);
        pids.extend(children(postgres));
        if pids.len() >= 5 || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(pids.len() >= 5, "postmaster helpers found: {pids:?}");
    assert!(pids.iter().all(|&p| alive(p)));
    pids
}

#[test]
fn stop_removes_processes_and_directory() {
    let sb = start_sandbox();
    let pids = sandbox_pids(sb.info.postgres_pid, sb.info.pgbouncer_pid);
    let dir = sb.info.dir.clone();
    assert!(dir.join("data").is_dir());
    sb.stop().unwrap();
    assert_gone(&pids, &dir, Duration::from_secs(10));
}

#[test]
fn a_panic_in_the_parent_still_cleans_up() {
    let mut seen = None;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let sb = start_sandbox();
        seen = Some((
            sandbox_pids(sb.info.postgres_pid, sb.info.pgbouncer_pid),
            sb.info.dir.clone(),
        ));
        panic!("boom while the sandbox runs");
    }));
    assert!(result.is_err());
    let (pids, dir) = seen.unwrap();
    assert_gone(&pids, &dir, Duration::from_secs(10));
}

/// Starts `connbench connect --sandbox` for a long run and reads its sandbox line.
fn start_long_connect() -> (std::process::Child, PathBuf, Vec<u32>) {
    let (child, dir, pids, _) = start_long_connect_keeping_stderr();
    (child, dir, pids)
}

/// As [`start_long_connect`], and what the child prints on stderr from then on.
fn start_long_connect_keeping_stderr() -> (
    std::process::Child,
    PathBuf,
    Vec<u32>,
    std::sync::Arc<std::sync::Mutex<String>>,
) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_connbench"))
        .args([
            "connect",
            "--sandbox",
            "unix",
            "pgbouncer_unix",
            "-n",
            "1000000",
            "--interval",
            "5ms",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    // "sandbox: started in DIR (postgres pid N, pgbouncer pid M; ...)"
    let rest = line
        .strip_prefix("sandbox: started in ")
        .unwrap_or_else(|| panic!("unexpected: {line}"));
    let dir = PathBuf::from(rest.split(' ').next().unwrap());
    let num = |key: &str| -> u32 {
        let i = rest.find(key).unwrap() + key.len();
        rest[i..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (pg, bouncer) = (num("postgres pid "), num("pgbouncer pid "));
    // A failed check must not leave the long run behind: kill it before failing.
    let pids = match std::panic::catch_unwind(|| sandbox_pids(pg, bouncer)) {
        Ok(p) => p,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            std::panic::resume_unwind(e);
        }
    };
    // Keep draining stderr so the child never blocks on a full pipe.
    let kept = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let sink = kept.clone();
    std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            let mut s = sink.lock().unwrap();
            s.push_str(&line);
            s.push('\n');
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    (child, dir, pids, kept)
}

#[test]
fn a_second_ctrl_c_quits_at_once_and_the_watchdog_cleans_up() {
    let (child, dir, pids, stderr) = start_long_connect_keeping_stderr();
    // SAFETY: signalling our own child, twice: the second lands during the teardown
    // (reporting, then stopping the sandbox's servers).
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    std::thread::sleep(Duration::from_millis(30));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    std::thread::sleep(Duration::from_millis(200));
    let err = stderr.lock().unwrap().clone();
    assert!(err.contains("second Ctrl-C: quitting now"), "{err}");
    assert_gone(&pids, &dir, Duration::from_secs(15));
}

#[test]
fn ctrl_c_during_connect_reports_and_cleans_up() {
    let (child, dir, pids) = start_long_connect();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "Ctrl-C exits 130");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("interrupted: the figures below cover"), "{text}");
    assert!(
        text.contains("  total "),
        "the results so far are still printed:\n{text}"
    );
    assert_gone(&pids, &dir, Duration::from_secs(15));
}

#[test]
fn sigkill_of_connbench_is_cleaned_up_by_the_watchdog() {
    let (mut child, dir, pids) = start_long_connect();
    child.kill().unwrap(); // SIGKILL: no destructor runs
    child.wait().unwrap();
    assert_gone(&pids, &dir, Duration::from_secs(20));
}

#[test]
fn detached_sandbox_start_status_stop() {
    // A TMPDIR of its own keeps this test's sandbox pointer apart from a developer's.
    let tmp = std::env::temp_dir().join(format!("cbt-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_connbench"))
            .args(args)
            .env("TMPDIR", &tmp)
            .output()
            .unwrap()
    };
    // A failed check must not leave the detached sandbox running: stop it on the way
    // out, whatever happens (stopping twice is harmless).
    struct StopOnDrop(PathBuf);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            let _ = Command::new(env!("CARGO_BIN_EXE_connbench"))
                .args(["sandbox", "stop"])
                .env("TMPDIR", &self.0)
                .output();
        }
    }
    let _stop = StopOnDrop(tmp.clone());
    let o = run(&["sandbox", "start", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let info: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let dir = PathBuf::from(info["dir"].as_str().unwrap());
    let names: Vec<&str> = info["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    // MariaDB is started beside PostgreSQL by default (scripts/setup.sh installs it).
    let mut expected = connbench::sandbox::TARGET_NAMES.to_vec();
    expected.extend(connbench::sandbox::mariadb::TARGET_NAMES);
    assert_eq!(names, expected);

    // No password in any form ("mysql_native_password" names a method, not a secret).
    let text = String::from_utf8_lossy(&o.stdout).replace("mysql_native_password", "");
    assert!(!text.contains("password"), "{text}");
    let mut pids = sandbox_pids(
        info["postgres_pid"].as_u64().unwrap() as u32,
        info["pgbouncer_pid"].as_u64().unwrap() as u32,
    );
    pids.push(info["mariadb"]["pid"].as_u64().unwrap() as u32);
    // Each MariaDB target works unchanged with the `mariadb` client, as the role it
    // names, over the path it names; its password is only in its option file (0600).
    for t in info["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t.get("command").is_some())
    {
        let name = t["name"].as_str().unwrap();
        let file = t["defaults_file"].as_str().unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(file).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o600, "{name}: {file}");
        let password = crate::common::option_file_password(std::path::Path::new(file));
        assert!(!t.to_string().contains(&password), "{name}: {t}");
        let command = t["command"].as_str().unwrap();
        let mut words = command.split(' ');
        let o = Command::new(words.next().unwrap())
            .args(words)
            .args([
                "-N",
                "-e",
                "SELECT current_user(); SHOW SESSION STATUS LIKE 'Ssl_cipher'",
            ])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(
            o.status.success(),
            "{name}: {command}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let user = t["user"].as_str().unwrap();
        assert!(out.starts_with(&format!("{user}@")), "{name}: {out}");
        let cipher = out
            .lines()
            .nth(1)
            .unwrap()
            .trim_start_matches("Ssl_cipher")
            .trim();
        assert_eq!(
            !cipher.is_empty(),
            name == "mariadb_tls",
            "{name}: cipher {cipher:?}"
        );
        assert_eq!(t["socket"].is_string(), name.ends_with("unix"), "{name}: {t}");
    }
    // The sandbox outlives the command that started it.
    let o = run(&["sandbox", "status"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(String::from_utf8_lossy(&o.stdout).contains("status: running, accepts connections"));
    let o = run(&["sandbox", "start"]);
    assert_eq!(o.status.code(), Some(2), "a second start is refused");
    assert!(String::from_utf8_lossy(&o.stderr).contains("a sandbox named \"default\" is already running"));
    let o = run(&["sandbox", "stop"]);
    assert!(o.status.success());
    assert_gone(&pids, &dir, Duration::from_secs(15));
    let o = run(&["sandbox", "status"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("no sandbox is running"));
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn a_detached_start_that_fails_halfway_stops_what_it_started() {
    // As root, MariaDB runs as CONNBENCH_MARIADB_USER; a user that does not exist makes
    // the start fail after PostgreSQL and PgBouncer are up. They must not stay behind.
    if !crate::common::root_or_skip("the servers' user is only chosen when running as root") {
        return;
    }
    let tmp = std::env::temp_dir().join(format!("cbt-half-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_connbench"))
        .args(["sandbox", "start", "--engines", "postgres,mariadb"])
        .env("TMPDIR", &tmp)
        .env("CONNBENCH_MARIADB_USER", "connbench-no-such-user")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no user \"connbench-no-such-user\""), "{err}");
    std::thread::sleep(Duration::from_millis(300));
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let tag = tmp.display().to_string();
    let procs = std::process::Command::new("ps")
        .args(["-eo", "args"])
        .output()
        .unwrap();
    let procs = String::from_utf8_lossy(&procs.stdout);
    assert!(
        !procs.lines().any(|l| l.contains(&tag)),
        "processes left: {procs}"
    );
    std::fs::remove_dir_all(&tmp).unwrap();
}

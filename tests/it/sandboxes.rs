//! Detached sandboxes as a user keeps them: by name and side by side, their targets by
//! name in connbench's commands (server CPU measured from the pids they recorded), and
//! nothing left when a start is stopped by SIGTERM at any moment, or killed with its
//! watchdog (then `sandbox status` lists it and `sandbox stop` removes it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use connbench::sandbox::cgroup;

use crate::common::{alive, assert_gone, root_or_skip, stderr, stdout};

/// A TMPDIR of a test's own (its sandboxes' registry, and their directories), whose
/// sandboxes are all stopped and which is removed when the guard drops, whatever failed.
struct Tmp(PathBuf);

impl Tmp {
    fn new(tag: &str) -> Tmp {
        let dir = std::env::temp_dir().join(format!("cbt-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Tmp(dir)
    }

    /// `connbench ARGS` with this TMPDIR (and no sandbox name from the environment).
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_connbench"));
        c.args(args)
            .env("TMPDIR", &self.0)
            .env_remove("CONNBENCH_SANDBOX")
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// What is in this TMPDIR now.
    fn contents(&self) -> Vec<PathBuf> {
        std::fs::read_dir(&self.0)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    }

    /// The sandbox directory made here, if there is one.
    fn sandbox_dir(&self) -> Option<PathBuf> {
        self.contents().into_iter().find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("cb-"))
        })
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = self.run(&["sandbox", "stop", "--all"]);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Processes whose command line names `dir` (a sandbox's servers and helpers).
fn processes_in(dir: &Path) -> Vec<String> {
    let tag = dir.display().to_string();
    let ps = Command::new("ps").args(["-eo", "pid,args"]).output().unwrap();
    String::from_utf8_lossy(&ps.stdout)
        .lines()
        .filter(|l| l.contains(&tag))
        .map(str::to_string)
        .collect()
}

/// Waits until `done` holds, or `child` ends; panics after `limit`. True when `done` held.
fn wait_for(child: &mut std::process::Child, limit: Duration, done: &dyn Fn() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("waited {limit:?} for a moment of the start that never came");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// SIGTERM (what `timeout`, CI runners, systemd and Kubernetes send) at ten moments of a
/// start under a CPU quota, each an event of the start seen on disk rather than a delay:
/// from before the start could do anything to MariaDB's server starting, its last step.
/// After each, with nothing waited for, no process, directory, registry entry or cgroup
/// of it is left: the start stopped what it had started before it exited (130).
#[test]
fn sigterm_at_any_moment_of_a_start_under_a_quota_leaves_nothing() {
    if !root_or_skip("a CPU quota needs root") {
        return;
    }
    let tmp = Tmp::new("term");
    let before = crate::cgroups::connbench_groups();
    let registry = tmp.0.join("connbench-sandboxes-0").join("default.json");
    let sandbox = |f: &str| {
        let t = &tmp;
        let f = f.to_string();
        move || t.sandbox_dir().is_some_and(|d| d.join(&f).exists())
    };
    type Moment<'a> = (&'a str, Box<dyn Fn() -> bool + 'a>);
    let moments: Vec<Moment> = vec![
        ("at once", Box::new(|| true)),
        ("its name is claimed", Box::new(|| registry.exists())),
        ("its directory exists", Box::new(|| tmp.sandbox_dir().is_some())),
        (
            "its cgroups exist",
            Box::new(|| {
                tmp.sandbox_dir()
                    .is_some_and(|d| !cgroup::existing_for(&d).is_empty())
            }),
        ),
        ("initdb runs", Box::new(sandbox("data"))),
        ("PostgreSQL starts", Box::new(sandbox("postgres.log"))),
        (
            "PostgreSQL is up (PgBouncer's files)",
            Box::new(sandbox("userlist.txt")),
        ),
        ("PgBouncer starts", Box::new(sandbox("pgbouncer.pid"))),
        ("mariadb-install-db runs", Box::new(sandbox("mariadb/data"))),
        ("mariadbd starts", Box::new(sandbox("mariadb/stderr.log"))),
    ];
    let mut interrupted = 0;
    for (i, (moment, reached)) in moments.iter().enumerate() {
        let mut child = tmp
            .command(&[
                "sandbox",
                "start",
                "--server-cpus",
                "1",
                "--engines",
                "postgres,mariadb",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Every sandbox directory seen, for its cgroups' names after it is gone.
        let seen = std::cell::RefCell::new(None);
        let watched = || {
            if let Some(d) = tmp.sandbox_dir() {
                seen.borrow_mut().get_or_insert(d);
            }
            reached()
        };
        let hit = wait_for(&mut child, Duration::from_secs(120), &watched);
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let out = child.wait_with_output().unwrap();
        let err = stderr(&out);
        assert!(hit, "moment {i} ({moment}): the start ended before it: {err}");
        let code = out.status.code();
        match code {
            Some(130) => {
                interrupted += 1;
                assert!(err.contains("sandbox start: interrupted"), "{moment}: {err}");
            }
            // Before the handler was set: nothing can have been made yet.
            None if i == 0 => {}
            // The start had just finished: it is stopped as a whole below.
            Some(0) if i == moments.len() - 1 => {
                eprintln!("{moment}: the start finished before the signal");
                let o = tmp.run(&["sandbox", "stop"]);
                assert!(o.status.success(), "{}", stderr(&o));
            }
            _ => panic!("moment {i} ({moment}): exit {:?}: {err}", out.status),
        }
        // Nothing waited for: a start that exited has already removed what it made.
        assert_eq!(
            tmp.contents(),
            Vec::<PathBuf>::new(),
            "{moment}: left in TMPDIR; {err}"
        );
        let left = processes_in(&tmp.0);
        assert!(left.is_empty(), "{moment}: processes left: {left:#?}");
        if let Some(d) = seen.borrow().as_ref() {
            let groups = cgroup::existing_for(d);
            assert!(groups.is_empty(), "{moment}: cgroups left: {groups:?}");
        }
        eprintln!("{moment}: exit {:?}, nothing left", out.status);
    }
    crate::cgroups::assert_no_new_orphans(&before);
    assert!(
        interrupted >= moments.len() - 2,
        "only {interrupted} of {} starts were interrupted midway",
        moments.len()
    );
}

/// The pid in a pid file's first line.
fn pid_in(file: &Path) -> Option<u32> {
    std::fs::read_to_string(file)
        .ok()?
        .lines()
        .next()?
        .trim()
        .parse()
        .ok()
}

/// Kills the watchdog of the sandbox in `dir`, then `victim`: as when a whole process
/// tree is killed (systemd, a container's end), so nothing of connbench's cleans up.
fn kill_with_watchdog(victim: &mut std::process::Child, dir: &Path) {
    let tag = dir.display().to_string();
    let ps = Command::new("ps").args(["-eo", "pid,args"]).output().unwrap();
    let watchdog: Vec<u32> = String::from_utf8_lossy(&ps.stdout)
        .lines()
        .filter(|l| l.contains("connbench-watchdog") && l.contains(&tag))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    assert_eq!(watchdog.len(), 1, "one watchdog for {tag}");
    // SAFETY: SIGKILL to the watchdog found above.
    unsafe { libc::kill(watchdog[0] as i32, libc::SIGKILL) };
    victim.kill().unwrap();
    victim.wait().unwrap();
}

/// A start killed with its watchdog once PostgreSQL and PgBouncer run (under a quota as
/// root) is listed as a start that died, and `sandbox stop NAME` removes its servers,
/// directory and cgroups.
#[test]
fn a_start_killed_with_its_watchdog_is_listed_and_stop_removes_it() {
    let tmp = Tmp::new("killed");
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut args = vec!["sandbox", "start", "--name", "k", "--engines", "postgres,mariadb"];
    if root {
        args.extend(["--server-cpus", "1"]);
    }
    let mut child = tmp
        .command(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let up = wait_for(&mut child, Duration::from_secs(120), &|| {
        tmp.sandbox_dir().is_some_and(|d| d.join("mariadb").exists())
    });
    assert!(up, "the start ended before MariaDB's turn");
    let dir = tmp.sandbox_dir().unwrap();
    let groups = cgroup::existing_for(&dir);
    assert_eq!(!groups.is_empty(), root);
    kill_with_watchdog(&mut child, &dir);
    let servers: Vec<u32> = [dir.join("data/postmaster.pid"), dir.join("pgbouncer.pid")]
        .iter()
        .filter_map(|f| pid_in(f))
        .collect();
    assert_eq!(servers.len(), 2);
    assert!(servers.iter().all(|&p| alive(p)), "left running by the kill");

    let o = tmp.run(&["sandbox", "status"]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "a left-over is a failed status: {text}");
    assert!(
        text.contains(&format!(
            "sandbox k in {}: its start died (connbench pid",
            dir.display()
        )) && text.contains("`connbench sandbox stop k` removes what it left"),
        "{text}"
    );
    let o = tmp.run(&["sandbox", "status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["sandboxes"][0]["condition"], "start_died", "{v}");

    let o = tmp.run(&["sandbox", "stop", "k"]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("its start died; removed what it left"), "{err}");
    assert_gone(&servers, &dir, Duration::ZERO);
    assert!(processes_in(&dir).is_empty(), "{:#?}", processes_in(&dir));
    assert!(cgroup::existing_for(&dir).is_empty());
    assert_eq!(tmp.contents(), Vec::<PathBuf>::new(), "the registry is empty");
    assert!(stdout(&tmp.run(&["sandbox", "status"])).contains("no sandbox is running"));
}

/// A command's own sandbox (`connect --sandbox`) whose command and watchdog were killed
/// is listed as such, and `sandbox stop --all` removes it.
#[test]
fn a_commands_sandbox_whose_command_is_gone_is_listed_and_removed() {
    let tmp = Tmp::new("owner");
    let mut child = tmp
        .command(&[
            "connect",
            "--sandbox",
            "unix",
            "-n",
            "1000000",
            "--interval",
            "5ms",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stderr.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    let dir = PathBuf::from(
        line.strip_prefix("sandbox: started in ")
            .unwrap_or_else(|| panic!("{line}"))
            .split(' ')
            .next()
            .unwrap(),
    );
    let o = tmp.run(&["sandbox", "status"]);
    let text = stdout(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("a command's own sandbox (connbench pid"), "{text}");
    let o = tmp.run(&["sandbox", "stop", "--all"]);
    assert!(stderr(&o).contains("in use (connbench pid"), "{}", stderr(&o));
    assert!(dir.exists(), "a running command's sandbox is left to it");

    kill_with_watchdog(&mut child, &dir);
    let postgres = pid_in(&dir.join("data/postmaster.pid")).unwrap();
    assert!(alive(postgres));
    let text = stdout(&tmp.run(&["sandbox", "status"]));
    let leaf = dir.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        text.contains(&format!(
            "sandbox {leaf} in {}: its command is gone",
            dir.display()
        )),
        "{text}"
    );
    let o = tmp.run(&["sandbox", "stop", "--all"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_gone(&[postgres], &dir, Duration::ZERO);
    assert_eq!(tmp.contents(), Vec::<PathBuf>::new());
}

/// Two named sandboxes run at once, as from two shells; `status` lists both, the target
/// names reach the one named, and stopping one leaves the other running.
#[test]
fn two_named_sandboxes_run_side_by_side_and_stop_apart() {
    let tmp = Tmp::new("two");
    let start = |name: &str| -> serde_json::Value {
        let o = tmp.run(&[
            "sandbox",
            "start",
            "--name",
            name,
            "--engines",
            "postgres",
            "--json",
        ]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    // Started at once, from two processes.
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| start("a"));
        let b = s.spawn(|| start("b"));
        (a.join().unwrap(), b.join().unwrap())
    });
    let pid = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap() as u32;
    let (a_pids, b_pids) = (
        [pid(&a, "postgres_pid"), pid(&a, "pgbouncer_pid")],
        [pid(&b, "postgres_pid"), pid(&b, "pgbouncer_pid")],
    );
    let o = tmp.run(&["sandbox", "status"]);
    let text = stdout(&o);
    assert!(o.status.success(), "{text}");
    assert!(
        text.contains("sandbox a in ") && text.contains("sandbox b in "),
        "{text}"
    );
    assert_eq!(
        text.matches("status: running, accepts connections").count(),
        2,
        "{text}"
    );
    let o = tmp.run(&["sandbox", "status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = v["sandboxes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
    // The same name again is refused before anything is made.
    let o = tmp.run(&["sandbox", "start", "--name", "a", "--engines", "postgres"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("a sandbox named \"a\" is already running"),
        "{}",
        stderr(&o)
    );

    // Target names reach the sandbox named: in the text or by CONNBENCH_SANDBOX.
    let reach = |args: &[&str], env: Option<&str>| -> (String, String) {
        let mut c = tmp.command(args);
        if let Some(n) = env {
            c.env("CONNBENCH_SANDBOX", n);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let t = &v["targets"][0];
        (
            t["name"].as_str().unwrap().into(),
            t["conninfo"].as_str().unwrap().into(),
        )
    };
    let connect = ["connect", "-n", "3", "--warmup", "0", "--json"];
    let port = |v: &serde_json::Value| format!("port={} ", v["postgres_port"]);
    let (name, conninfo) = reach(&[&connect[..], &["tcp@b"]].concat(), None);
    assert_eq!(name, "tcp@b");
    assert!(conninfo.contains(&port(&b)), "{conninfo}");
    let (name, conninfo) = reach(&[&connect[..], &["tcp"]].concat(), Some("a"));
    assert_eq!(name, "tcp");
    assert!(conninfo.contains(&port(&a)), "{conninfo}");
    // `run --target NAME=TARGET`: a cell's target mapped onto sandbox b's by name, so no
    // sandbox of the run's own starts.
    let suite = tmp.0.join("s.toml");
    std::fs::write(
        &suite,
        "name = \"named\"\nquestion = \"Does run take a sandbox's names?\"\nkind = \"connect\"\n\
         repetitions = 2\nprewarm = false\n[defaults]\nsamples = 3\n[axes]\ntarget = [\"app\"]\n",
    )
    .unwrap();
    let store = tmp.0.join("r.sqlite");
    let o = tmp.run(&[
        "run",
        suite.to_str().unwrap(),
        "--target",
        "app=tcp@b",
        "--store",
        store.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("sandbox: started"), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["cells"][0]["values"]["total_p50_us"].as_array().map(Vec::len),
        Some(2),
        "{v}"
    );
    std::fs::remove_file(&suite).unwrap();
    std::fs::remove_file(&store).unwrap();
    // Without a name, `default`, which is not running: the error says which are.
    let o = tmp.run(&[&connect[..], &["tcp"]].concat());
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no sandbox named \"default\" is running; running: a, b"),
        "{err}"
    );

    let o = tmp.run(&["sandbox", "stop", "a"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_gone(&a_pids, Path::new(a["dir"].as_str().unwrap()), Duration::ZERO);
    assert!(b_pids.iter().all(|&p| alive(p)), "b runs on");
    let o = tmp.run(&["sandbox", "status"]);
    let text = stdout(&o);
    assert!(
        o.status.success() && !text.contains("sandbox a ") && text.contains("sandbox b in "),
        "{text}"
    );
    let o = tmp.run(&["sandbox", "stop", "b"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_gone(&b_pids, Path::new(b["dir"].as_str().unwrap()), Duration::ZERO);
    assert_eq!(tmp.contents(), Vec::<PathBuf>::new());
}

/// With a sandbox running, its target names work in `init` and `load` on both engines,
/// the server's CPU is measured from the pids the sandbox recorded (and for a conninfo
/// pasted from it), and the lines `sandbox start` prints for psql, mariadb and sysbench
/// work as pasted.
#[test]
fn a_running_sandboxs_targets_work_by_name_and_its_server_cpu_is_measured() {
    let tmp = Tmp::new("names");
    let o = tmp.run(&["sandbox", "start", "--engines", "postgres,mariadb"]);
    let text = stdout(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    // Every target by name with its text, MariaDB's as URIs with the socket and the
    // option file; a line per tool.
    let line = |name: &str| -> String {
        text.lines()
            .find_map(|l| l.trim_start().strip_prefix(name).filter(|r| r.starts_with(' ')))
            .unwrap_or_else(|| panic!("no {name} line:\n{text}"))
            .trim()
            .to_string()
    };
    let uri = line("mariadb_unix");
    assert!(
        uri.starts_with("mariadb://") && uri.contains("&socket=") && uri.contains("&defaults-file="),
        "{uri}"
    );
    let shell = |cmd: &str| -> Output { Command::new("sh").args(["-c", cmd]).output().unwrap() };
    let o = shell(&format!("{} -Atc 'SELECT 41 + 1'", line("psql")));
    assert_eq!(stdout(&o).trim(), "42", "{}", stderr(&o));
    let o = shell(&format!("{} -N -e 'SELECT 41 + 1'", line("mariadb")));
    assert_eq!(stdout(&o).trim(), "42", "{}", stderr(&o));
    if Command::new("sysbench").arg("--version").output().is_ok() {
        // `prepare` would make sbtest1 as sysbench's; `cleanup` on the empty database
        // connects and authenticates as the line says, and changes nothing.
        let sysbench = line("sysbench").replace(" prepare   # then the same with run", " cleanup");
        let o = shell(&sysbench);
        assert!(o.status.success(), "{sysbench}: {}{}", stdout(&o), stderr(&o));
    } else {
        crate::common::skip(
            false,
            "sysbench is not installed: its line of `sandbox start` is not run",
        );
    }

    let o = tmp.run(&["init", "mariadb_unix", "--tables", "sysbench"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let load = |args: &[&str]| -> serde_json::Value {
        let o = tmp.run(&[&["load"][..], args, &["-T", "2", "--json"]].concat());
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let v = load(&["mariadb_unix", "-b", "oltp-point-select"]);
    let s = &v["summary"];
    assert!(s["transactions"].as_u64().unwrap() > 0, "{s}");
    assert!(s["server_cpu_s"].as_f64().is_some_and(|c| c > 0.0), "{s}");
    assert_eq!(v["settings"]["target"], "mariadb_unix", "{v}");

    let o = tmp.run(&["init", "unix", "-s", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = load(&["unix", "-S"]);
    let s = &v["summary"];
    assert!(s["server_cpu_s"].as_f64().is_some_and(|c| c > 0.0), "{s}");
    assert!(s["server_cpu_not_measured"].is_null(), "{s}");
    // Pasted as text, the same sandbox is known.
    let v = load(&[&line("tcp"), "-S"]);
    assert!(
        v["summary"]["server_cpu_s"].as_f64().is_some_and(|c| c > 0.0),
        "{v}"
    );
    // A text that is neither a target nor a name: the error gives the names.
    let o = tmp.run(&["connect", "unx"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("give a name such as unix, tcp, tls"), "{err}");
}

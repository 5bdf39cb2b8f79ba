//! The server's size: `--server-cpus` puts the sandbox's servers under a CPU quota in a
//! cgroup, the server's CPU is measured from that cgroup, and no cgroup outlives the
//! sandbox, whichever way it ends. These need root (the quota is a cgroup write); not
//! root, the refusal is tested instead.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use connbench::sandbox::cgroup;

use crate::common::{connbench, root_or_skip, skip, stderr};

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Waits until none of a sandbox directory's cgroups exists; panics after `limit`.
fn assert_no_cgroups(dir: &Path, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let left = cgroup::existing_for(dir);
        if left.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            panic!("cgroups left behind after {limit:?}: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The sandbox directory from a run's "sandbox: started in DIR" line.
fn started_in(err: &str) -> PathBuf {
    let line = err
        .lines()
        .find_map(|l| l.strip_prefix("sandbox: started in "))
        .unwrap_or_else(|| panic!("no sandbox line in: {err}"));
    PathBuf::from(line.split(' ').next().unwrap())
}

#[test]
fn a_half_core_quota_caps_the_servers_cpu_and_its_cgroups_go_with_the_sandbox() {
    if !root_or_skip("a CPU quota needs root (the refusal is tested apart)") {
        return;
    }
    // Select-only with 4 clients on one thread keeps the server busy beyond half a core
    // and leaves the machine's other core to the other tests; a quota is a ceiling, so
    // the bound holds on a busy machine too.
    let o = connbench(&[
        "load",
        "--sandbox",
        "--server-cpus",
        "0.5",
        "-S",
        "-c",
        "4",
        "-j",
        "1",
        "-T",
        "5",
        "--warmup",
        "1s",
        "--json",
    ]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let s = &v["summary"];
    let server = s["server_cpu_s"].as_f64().unwrap_or_else(|| panic!("{s}"));
    let measured = s["measured_s"].as_f64().unwrap();
    let cores = server / measured;
    // 10% over the quota, and 10 ms ticks at either end of the window.
    assert!(
        cores <= 0.5 * 1.1 + 0.02 / measured,
        "the server used {cores:.3} cores under a 0.5 core quota: {s}"
    );
    assert!(cores > 0.05, "the server's CPU was read from its cgroup: {s}");
    eprintln!("server under --server-cpus 0.5: {cores:.3} cores");
    assert_no_cgroups(&started_in(&err), Duration::from_secs(5));
}

#[test]
fn a_detached_sandbox_has_its_quotas_live_and_stop_removes_its_cgroups() {
    if !root_or_skip("a CPU quota needs root") {
        return;
    }
    let tmp = std::env::temp_dir().join(format!("cbt-cg-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_connbench"))
            .args(args)
            .env("TMPDIR", &tmp)
            .output()
            .unwrap()
    };
    struct StopOnDrop(PathBuf);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            let _ = Command::new(env!("CARGO_BIN_EXE_connbench"))
                .args(["sandbox", "stop"])
                .env("TMPDIR", &self.0)
                .output();
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _stop = StopOnDrop(tmp.clone());
    let o = run(&[
        "sandbox",
        "start",
        "--engines",
        "postgres",
        "--server-cpus",
        "0.5",
        "--pooler-cpus",
        "0.25",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let info: connbench::sandbox::SandboxInfo = serde_json::from_slice(&o.stdout).unwrap();
    let c = info.cgroups.clone().expect("the cgroups are described");
    assert_eq!((c.server.cpus, c.pooler.cpus), (Some(0.5), Some(0.25)));
    // The cores a group may use: its quota over its period, as the kernel holds them.
    let cores = |g: &cgroup::Group| -> f64 {
        let read = |f: &str| std::fs::read_to_string(g.quota_dir.join(f)).unwrap();
        let (quota, period) = if c.v2 {
            let max = read("cpu.max");
            let mut w = max.split_whitespace();
            (w.next().unwrap().to_string(), w.next().unwrap().to_string())
        } else {
            (read("cpu.cfs_quota_us"), read("cpu.cfs_period_us"))
        };
        quota.trim().parse::<f64>().unwrap() / period.trim().parse::<f64>().unwrap()
    };
    assert_eq!((cores(&c.server), cores(&c.pooler)), (0.5, 0.25));
    // The postmaster and every process it forked are in the server group (they joined
    // before exec); PgBouncer is in its own.
    let procs = |d: &Path| -> Vec<u32> {
        std::fs::read_to_string(d.join("cgroup.procs"))
            .unwrap()
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect()
    };
    let server = procs(&c.server.quota_dir);
    assert!(server.contains(&info.postgres_pid), "{server:?}");
    let helpers = crate::common::children(info.postgres_pid);
    assert!(!helpers.is_empty());
    for h in &helpers {
        assert!(
            server.contains(h),
            "postmaster child {h} outside the group: {server:?}"
        );
    }
    assert_eq!(procs(&c.pooler.quota_dir), vec![info.pgbouncer_pid]);
    assert!(
        procs(&c.server.cpu_dir).contains(&info.postgres_pid),
        "the counters' group too"
    );
    let text = crate::common::stdout(&run(&["sandbox", "status"]));
    assert!(text.contains("CPU quota: servers 0.5 cores"), "{text}");
    let o = run(&["sandbox", "stop"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_no_cgroups(&info.dir, Duration::from_secs(1));
}

/// Starts a long `load --sandbox` under quotas; returns it and its sandbox directory once
/// the sandbox has started.
fn start_long_load() -> (std::process::Child, PathBuf) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_connbench"))
        .args([
            "load",
            "--sandbox",
            "--server-cpus",
            "0.5",
            "--pooler-cpus",
            "0.5",
            "-S",
            "-c",
            "4",
            "-T",
            "120",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("sandbox: started in ") {
        line.clear();
        if err.read_line(&mut line).unwrap() == 0 {
            let _ = child.kill();
            panic!("connbench ended before its sandbox started");
        }
    }
    let dir = started_in(&line);
    // Keep draining stderr so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in err.lines() {});
    let made = cgroup::existing_for(&dir);
    if made.is_empty() {
        let _ = child.kill();
        panic!("the sandbox's cgroups exist while it runs");
    }
    // The load runs once its 4 clients' backends are in the server's group (beside the
    // postmaster and its 5 helpers): the tables are made and the Ctrl-C handler is set.
    let procs = made[0].join("server").join("cgroup.procs");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&procs).map_or(0, |t| t.lines().count()) < 10 {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the load did not start within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, dir)
}

#[test]
fn sigkill_of_connbench_under_a_quota_leaves_no_cgroup() {
    if !root_or_skip("a CPU quota needs root") {
        return;
    }
    let (mut child, dir) = start_long_load();
    child.kill().unwrap(); // SIGKILL: no destructor runs; the watchdog does the rest
    child.wait().unwrap();
    assert_no_cgroups(&dir, Duration::from_secs(20));
    crate::common::assert_gone(&[], &dir, Duration::from_secs(10));
}

#[test]
fn ctrl_c_under_a_quota_leaves_no_cgroup() {
    if !root_or_skip("a CPU quota needs root") {
        return;
    }
    let (child, dir) = start_long_load();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "Ctrl-C exits 130");
    // Drop stopped the servers and removed the groups before the process ended.
    assert_no_cgroups(&dir, Duration::ZERO);
    assert!(!dir.exists());
}

#[test]
fn a_start_under_a_quota_that_fails_halfway_leaves_no_cgroup() {
    if !root_or_skip("a CPU quota needs root") {
        return;
    }
    // MariaDB's user does not exist: the start fails after PostgreSQL and PgBouncer run
    // in their groups.
    let tmp = std::env::temp_dir().join(format!("cbt-cghalf-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let before = connbench_groups();
    let o = Command::new(env!("CARGO_BIN_EXE_connbench"))
        .args([
            "sandbox",
            "start",
            "--engines",
            "postgres,mariadb",
            "--server-cpus",
            "1",
        ])
        .env("TMPDIR", &tmp)
        .env("CONNBENCH_MARIADB_USER", "connbench-no-such-user")
        .output()
        .unwrap();
    let err = stderr(&o);
    let left: Vec<PathBuf> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    std::fs::remove_dir_all(&tmp).unwrap();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no user \"connbench-no-such-user\""), "{err}");
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_no_new_orphans(&before);
}

/// No `connbench-*` group appeared since `before` whose sandbox directory is gone. A
/// sandbox makes its directory before its groups and removes it after them, so such a
/// group is one a start or stop left; groups that were there before (another run's
/// orphans) are not this test's to blame, and other sandboxes running beside it
/// (other tests', other users') have their directories.
pub fn assert_no_new_orphans(before: &[(PathBuf, String)]) {
    let left = connbench_groups()
        .into_iter()
        .filter(|g| !before.contains(g) && !sandbox_dir_exists(&g.1))
        .collect::<Vec<_>>();
    assert!(left.is_empty(), "cgroups left behind: {left:?}");
}

/// Every `connbench-*` cgroup on this machine, with its sandbox directory's name.
pub fn connbench_groups() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for root in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup"] {
        let Ok(entries) = std::fs::read_dir(root) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(leaf) = name.strip_prefix("connbench-") {
                out.push((e.path(), leaf.to_string()));
            }
        }
    }
    out
}

/// Whether a sandbox directory of that name exists in /tmp or up to two levels below it
/// (a test's TMPDIR inside a helper's).
fn sandbox_dir_exists(leaf: &str) -> bool {
    let below = |d: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(d)
            .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect())
            .unwrap_or_default()
    };
    let one = below(Path::new("/tmp"));
    Path::new("/tmp").join(leaf).exists()
        || one.iter().any(|d| d.join(leaf).exists())
        || one.iter().flat_map(|d| below(d)).any(|d| d.join(leaf).exists())
}

#[test]
fn the_next_start_removes_a_stale_empty_group_whose_sandbox_is_gone() {
    if !root_or_skip("making a cgroup needs root") {
        return;
    }
    let Ok(layout) = cgroup::Layout::detect() else {
        skip(true, "no cgroup filesystem with the cpu controller");
        return;
    };
    // As a SIGKILL of both connbench and its watchdog would leave it.
    let gone = PathBuf::from(format!("/tmp/cb-gone{}", std::process::id()));
    let c = cgroup::Cgroups::plan(
        &layout,
        &gone,
        cgroup::Cpus {
            server: Some(1.0),
            pooler: None,
        },
    );
    c.create("test").unwrap();
    assert!(!cgroup::existing_for(&gone).is_empty());
    // A live sandbox's groups are kept: its directory exists.
    let live = std::env::temp_dir().join(format!("cb-live{}", std::process::id()));
    std::fs::create_dir_all(&live).unwrap();
    let l = cgroup::Cgroups::plan(&layout, &live, cgroup::Cpus::default());
    l.create("test").unwrap();
    cgroup::sweep_older_than(Duration::ZERO);
    assert!(
        cgroup::existing_for(&gone).is_empty(),
        "the stale group was removed"
    );
    assert!(
        !cgroup::existing_for(&live).is_empty(),
        "a live sandbox's group stays"
    );
    l.remove(Duration::ZERO).unwrap();
    std::fs::remove_dir(&live).unwrap();
    assert!(cgroup::existing_for(&live).is_empty());
}

#[test]
fn without_the_right_to_write_cgroups_the_quota_is_refused_in_one_line() {
    // As root, the refusal is seen by dropping to nobody; not root, as we are.
    let mut cmd = if root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(env!("CARGO_BIN_EXE_connbench"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_connbench"))
    };
    let tmp = std::env::temp_dir().join(format!("cbt-cgno-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    let o = cmd
        .args([
            "sandbox",
            "start",
            "--engines",
            "postgres",
            "--server-cpus",
            "0.5",
        ])
        .env("TMPDIR", &tmp)
        .env("USER", "nobody")
        .output()
        .unwrap();
    let err = stderr(&o);
    let left: Vec<PathBuf> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    if o.status.success() {
        // A delegated subtree (or a root with the right): then nothing to refuse.
        let _ = Command::new(env!("CARGO_BIN_EXE_connbench"))
            .args(["sandbox", "stop"])
            .env("TMPDIR", &tmp)
            .output();
        let _ = std::fs::remove_dir_all(&tmp);
        panic!("started without the right to write cgroups? {err}");
    }
    let _ = std::fs::remove_dir_all(&tmp);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--server-cpus 0.5"), "{err}");
    assert!(err.contains("needs root"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(left.is_empty(), "the failed start left {left:?}");
}

#[test]
fn a_server_cpus_axis_changes_the_quota_between_cells_and_reports_the_server_against_it() {
    if !root_or_skip("a CPU quota needs root") {
        return;
    }
    let dir = crate::common::scratch("cgaxis");
    let suite = dir.join("size.toml");
    std::fs::write(
        &suite,
        r#"
name = "size"
question = "How does select-only throughput grow with the server's cores?"
kind = "load"
duration = "2s"
warmup = "500ms"
repetitions = 2
prewarm = false
baseline = "server_cpus=2"

[defaults]
target = "unix"
workload = "select-only"
clients = 4
threads = 1

[axes]
server_cpus = [0.5, 2]
"#,
    )
    .unwrap();
    let store = dir.join("results.sqlite");
    let o = connbench(&["run", suite.to_str().unwrap(), "--store", store.to_str().unwrap()]);
    let (out, err) = (crate::common::stdout(&o), stderr(&o));
    assert!(o.status.success(), "{err}\n{out}");
    eprintln!("{out}");
    // "  server_cpus=0.5  0.47 of 0.5 (94%)  server-bound"
    let used = |cell: &str| -> (f64, f64) {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(cell) && l.contains(" of "))
            .unwrap_or_else(|| panic!("no quota line for {cell}:\n{out}"));
        let mut w = line.split_whitespace().skip(1);
        let used: f64 = w.next().unwrap().parse().unwrap();
        assert_eq!(w.next(), Some("of"), "{line}");
        (used, w.next().unwrap().parse().unwrap())
    };
    let (small, q) = used("server_cpus=0.5");
    assert_eq!(q, 0.5);
    assert!(
        small <= 0.5 * 1.1 + 0.02,
        "{small} cores under a 0.5 quota:\n{out}"
    );
    assert_eq!(used("server_cpus=2").1, 2.0);
    assert!(out.contains("the server's CPU against its quota"), "{out}");
}

/// A sliced suite with two sizes far apart (0.25 and 2 cores) and two targets: each size
/// is one measurement whose cells take turns, each 2-core cell is read against the same
/// target at 0.25 core, and the text, JSON and HTML reports carry the size curve: per
/// size tps, p50 and p99, the ratio with its interval, the share of linear computed from
/// that ratio, and server-bound per cell (or why not). No speed is asserted: with 4
/// clients on a busy 2-core machine a 2-core server's tps wandered by 30-46% (CV) while
/// the 0.25-core one sat at its quota.
#[test]
fn a_size_axis_answers_how_close_to_linear_with_intervals_in_text_json_and_html() {
    if !root_or_skip("a CPU quota needs root") {
        return;
    }
    let dir = crate::common::scratch("cgcurve");
    let suite = dir.join("curve.toml");
    std::fs::write(
        &suite,
        r#"
name = "curve"
question = "How close to linear does select-only throughput grow with the server's cores?"
kind = "load"
duration = "600ms"
warmup = "200ms"
slices = "100ms"
repetitions = 4
baseline = "server_cpus=0.25 target=unix"

[defaults]
workload = "select-only"
clients = 4
threads = 1

[axes]
server_cpus = [0.25, 2]
target = ["unix", "tcp"]
"#,
    )
    .unwrap();
    let store = dir.join("results.sqlite");
    let store = store.to_str().unwrap();
    let o = connbench(&["run", suite.to_str().unwrap(), "--store", store, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    crate::common::check_schema("run", &v);
    let answer = crate::common::answer_lines(&v);
    for target in ["unix", "tcp"] {
        let line = answer
            .iter()
            .find(|a| a.starts_with(&format!("target={target}, 2 cores: ")))
            .unwrap_or_else(|| panic!("no size answer for {target}: {answer:#?}"));
        assert!(
            line.contains("x the tps of 0.25 core (") && line.contains("% of linear ("),
            "{line}"
        );
    }
    assert!(answer.iter().any(|a| a.contains("CPU time only")), "{answer:#?}");
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    for c in cells {
        let size = &c["size"];
        let cpus = size["cpus"].as_f64().unwrap();
        // Every cell ran under a quota and the sandbox's server CPU is read from its
        // cgroup: the field is there, with the quota it ran under.
        assert_eq!(c["server_bound"]["quota_cores"].as_f64(), Some(cpus), "{c:#}");
        assert!(c["server_bound"]["bound"].is_boolean(), "{c:#}");
        assert!(c["server_bound_missing"].is_null(), "{c:#}");
        if cpus == 0.25 {
            assert!(size["versus_smallest"].is_null(), "{c:#}");
            continue;
        }
        let s = &size["versus_smallest"];
        let (ratio, lo, hi) = (
            s["ratio"].as_f64().unwrap(),
            s["ratio_low"].as_f64().unwrap(),
            s["ratio_high"].as_f64().unwrap(),
        );
        assert!(lo < ratio && ratio < hi, "an interval around the ratio: {s:#}");
        assert_eq!(s["size_ratio"].as_f64(), Some(8.0));
        // The share of linear is the measured ratio over the cores' ratio.
        let e = s["efficiency"].as_f64().unwrap();
        assert!((e - ratio / 8.0).abs() < 1e-9, "{s:#}");
        assert!(
            (s["efficiency_low"].as_f64().unwrap() - lo / 8.0).abs() < 1e-9,
            "{s:#}"
        );
        // Its comparison is with the same target at 0.25 core, not with the baseline.
        assert_eq!(
            c["comparison"]["versus"]
                .as_str()
                .map(|n| n.starts_with("server_cpus=0.25")),
            if c["name"].as_str().unwrap().contains("target=unix") {
                None
            } else {
                Some(true)
            },
            "{c:#}"
        );
    }
    // Each size was one measurement: a cell's turns are counted in its figures.
    assert!(
        cells.iter().all(|c| c["values"]["slice_turns"].is_array()),
        "{v:#}"
    );
    let run_id = v["run_id"].as_i64().unwrap().to_string();
    let html = dir.join("curve.html");
    let o = connbench(&[
        "report",
        &run_id,
        "--store",
        store,
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    for wanted in [
        "The server&#39;s size",
        "of linear",
        "The server&#39;s CPU against its quota",
        "Throughput against the server",
        "CPU time only",
    ] {
        let found = page.contains(wanted) || page.contains(&wanted.replace("&#39;", "'"));
        assert!(found, "no {wanted:?} in the HTML report");
    }
    // The Markdown report has the table too.
    let o = connbench(&["report", &run_id, "--markdown", "--store", store]);
    let text = crate::common::stdout(&o);
    assert!(
        text.contains("ratio to the smallest") && text.contains("(smallest)"),
        "{text}"
    );
}

//! Many clients (issue 56): connects refused at a pooler's limit are counted once per
//! attempt and backed off, never as failed transactions; `--connect-rate` paces the
//! connections opened before the clock; a run that needs more open files than the hard
//! limit is refused before it starts; the sandbox's PgBouncer gets the files it needs.

use std::os::unix::process::CommandExt;
use std::process::Command;

use connbench::proto::Endpoint;
use connbench::targets::Target;

use crate::common::{connbench, conninfo, dataset, runtime, start_sandbox, stderr};

/// A database of the shared sandbox that takes at most `limit` connections (its
/// CONNECTION LIMIT: a connect past it is refused with 53300, as at a server's
/// max_connections, without a sandbox of its own), made afresh; its conninfo as the
/// sandbox's role that is no superuser (a superuser passes any limit), and a script
/// that needs no tables there.
pub fn limited_target(name: &str, limit: u32) -> (String, crate::common::TempFile) {
    let db = format!("cbt_{name}_{}", std::process::id());
    crate::load::sql(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"));
    crate::load::sql(&format!("CREATE DATABASE {db} CONNECTION LIMIT {limit}"));
    let script = crate::common::TempFile::new(&format!("{name}.sql"), "SELECT 1;\n");
    (crate::common::with_dbname(&conninfo("unix_trust"), &db), script)
}

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(out)))
}

/// The soft and hard open-file limits of process `pid`.
fn open_files(pid: u32) -> (u64, u64) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    let n: Vec<u64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    (n[0], n[1])
}

/// Ten clients at a PgBouncer that takes four (its own sandbox, max_client_conn set to 4
/// and reloaded): the six it refuses are counted once per attempt, by PgBouncer's 08P01,
/// in the ramp and in the run, never as a failed transaction; and they back off. A
/// client's attempts are bounded by what the back-off allows: pauses of at least 10 ms
/// doubling to at least 0.5 s, so at most 7 attempts for the doubling and 2 a second after,
/// for the ramp's patience (5 s) and again for the run (its back-off starts over). A
/// build that retries on a fixed 20 ms pause makes 50 a second per client, and one that
/// counts them as transactions reports failed transactions: both fail here.
#[test]
fn refused_connects_are_counted_once_each_and_backed_off() {
    let sb = start_sandbox();
    // The sandbox's PgBouncer starts with the files 12,000 clients need (or the hard limit).
    let (soft, hard) = open_files(sb.info.pgbouncer_pid);
    assert!(
        soft >= 12_300.min(hard),
        "PgBouncer's open-file limit {soft} (hard {hard})"
    );
    let direct = sb.info.target("unix").unwrap().conninfo.clone();
    let ep = Endpoint::new(Target::parse(&direct).unwrap()).unwrap();
    std::thread::spawn(move || {
        runtime().block_on(async {
            connbench::dataset::pgbench::init(&ep, "connbench", 1)
                .await
                .unwrap()
        })
    })
    .join()
    .unwrap();
    let ini = sb.info.dir.join("pgbouncer.ini");
    let text = std::fs::read_to_string(&ini).unwrap();
    assert!(text.contains("max_client_conn = 12000"), "{text}");
    std::fs::write(
        &ini,
        text.replace("max_client_conn = 12000", "max_client_conn = 4"),
    )
    .unwrap();
    // SIGHUP: PgBouncer reloads its ini, max_client_conn included.
    unsafe { libc::kill(sb.info.pgbouncer_pid as i32, libc::SIGHUP) };
    std::thread::sleep(std::time::Duration::from_millis(300));
    let target = sb.info.target("pgbouncer_tx_unix").unwrap().conninfo.clone();
    let secs = 3.0;
    let started = std::time::Instant::now();
    let out = connbench(&["load", &target, "-S", "-c", "10", "-j", "2", "-T", "3", "--json"]);
    let took = started.elapsed().as_secs_f64();
    sb.stop().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out);
    crate::common::check_schema("load", &v);
    let s = &v["summary"];
    let c = &s["connections"];
    let ramp = &c["ramp"];
    let connected = ramp["connected"].as_u64().unwrap();
    assert_eq!(ramp["wanted"], 10, "{ramp}");
    assert!((1..=4).contains(&connected), "PgBouncer takes 4: {ramp}");
    assert!(
        stderr(&out).contains("connections were not made before the measurement"),
        "{}",
        stderr(&out)
    );
    // Never a failed transaction, and the connected clients ran.
    assert_eq!(s["failed_transactions"], 0, "{s}");
    assert_eq!(s["failures"].as_array().unwrap().len(), 0, "{s}");
    assert!(s["transactions"].as_u64().unwrap() > 0, "{s}");
    // Counted by PgBouncer's reason, in the ramp and during the run (and per interval).
    let (in_ramp, in_run) = (
        ramp["failed_attempts"].as_u64().unwrap(),
        c["failed_attempts"].as_u64().unwrap(),
    );
    let kinds = |a: &serde_json::Value| -> Vec<String> {
        a.as_array()
            .unwrap()
            .iter()
            .map(|f| f["kind"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(kinds(&ramp["failures"]), ["08P01"], "{ramp}");
    assert_eq!(kinds(&c["refused"]), ["08P01"], "{c}");
    assert!(in_ramp > 0 && in_run > 0, "{c}");
    let per_interval: u64 = v["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["refused_connects"].as_u64().unwrap())
        .sum();
    assert_eq!(per_interval, in_run, "{}", v["series"]);
    // Backed off: the attempts a refused client can make in the ramp's patience and the run.
    let refused_clients = 10 - connected;
    let bound = |window_s: f64| 7.0 + 2.0 * window_s + 1.0;
    let most = refused_clients as f64 * (bound(5.0 + 0.5) + bound(secs + 0.5));
    assert!(
        ((in_ramp + in_run) as f64) <= most,
        "{in_ramp} + {in_run} attempts by {refused_clients} refused clients: more than back-off allows ({most:.0})"
    );
    // The ramp waited its patience for them (5 s), no more: the run is not held open.
    assert!(took < secs + 5.0 + 10.0, "the run took {took:.1} s");
}

/// `--connect-rate 20` with 20 clients: an even schedule puts the last client's first
/// attempt 19/20 s after the first's, so the ramp takes at least 0.95 s however busy the
/// machine (a slow one only takes longer). Connected at once (no pacing), the ramp takes
/// a few milliseconds: that build fails here.
#[test]
fn connect_rate_paces_the_ramp() {
    dataset();
    let out = connbench(&[
        "load",
        &conninfo("unix"),
        "-S",
        "-c",
        "20",
        "-j",
        "2",
        "-T",
        "1",
        "--connect-rate",
        "20/s",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out);
    let ramp = &v["summary"]["connections"]["ramp"];
    assert_eq!(ramp["connected"], 20, "{ramp}");
    assert_eq!(ramp["rate_per_s"], 20.0, "{ramp}");
    let took = ramp["took_s"].as_f64().unwrap();
    assert!(took >= 0.95 - 1e-3, "20 connects at 20/s in {took} s: {ramp}");
    assert!(ramp["achieved_per_s"].as_f64().unwrap() <= 20.0 * 1.01, "{ramp}");
    // The text report says it.
    let text = connbench(&[
        "load",
        &conninfo("unix"),
        "-S",
        "-c",
        "2",
        "-T",
        "1",
        "--connect-rate",
        "4",
    ]);
    assert!(text.status.success(), "{}", stderr(&text));
    let printed = String::from_utf8_lossy(&text.stdout);
    assert!(printed.contains("connect ramp  2 of 2 connected in"), "{printed}");
}

/// A suite cell's `connect_rate` paces its ramp as `--connect-rate` does: 20 clients at
/// 20/s put the last first attempt 19/20 s after the first, so the cell's
/// `connect_ramp_s` is at least 0.95 s however busy the machine, while the cell beside it
/// (no rate, 20 clients: all at once) keeps its own default. A build that reads the key
/// but leaves the cell's plan unpaced gives the paced cell a ramp of milliseconds, and
/// one without the key refuses the suite: both fail here.
#[test]
fn a_suite_cell_s_connect_rate_paces_its_ramp() {
    dataset();
    let dir = crate::common::scratch("connect-rate");
    let suite = r#"
name = "ramp"
question = "Does a cell's connect_rate pace its ramp?"
kind = "load"
duration = "300ms"
repetitions = 1
prewarm = false
[defaults]
workload = "select-only"
target = "unix"
clients = 20
threads = 2
[[cells]]
name = "paced"
connect_rate = "20/s"
[[cells]]
name = "at-once"
"#;
    let (_, args) = crate::common::suite_args(&dir, suite, &["unix"], &["--json"]);
    let o = crate::common::run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let cell = |name: &str| {
        v["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no cell {name}: {}", v["cells"]))
            .clone()
    };
    let ramp_s = |name: &str| cell(name)["values"]["connect_ramp_s"][0].as_f64().unwrap();
    let (paced, at_once) = (ramp_s("paced"), ramp_s("at-once"));
    assert!(paced >= 0.95 - 1e-3, "20 connects at 20/s in {paced} s");
    assert!(at_once < paced, "unpaced {at_once} s against paced {paced} s");
    for name in ["paced", "at-once"] {
        let values = &cell(name)["values"];
        assert_eq!(values["connect_ramp_failed_attempts"][0], 0.0, "{values}");
        assert_eq!(values["refused_connects"][0], 0.0, "{values}");
    }
    let settings: Vec<&serde_json::Value> = v["suite"]["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["settings"])
        .collect();
    assert!(
        settings.iter().any(|s| s["connect_rate"] == "20/s"),
        "{settings:?}"
    );
}

/// A run that needs more open files than the hard limit is refused before it starts,
/// naming the limit, its value and the fix; one over the soft limit but under the hard
/// one runs (connbench raises its own soft limit). Without the check, the clients past
/// the limit would fail to connect (EMFILE) inside the run.
#[test]
fn open_files_over_the_hard_limit_refuse_the_run_and_over_the_soft_one_are_raised() {
    dataset();
    let run = |soft: u64, hard: u64, clients: &str| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_connbench"));
        cmd.args([
            "load",
            &conninfo("unix"),
            "-S",
            "-c",
            clients,
            "-j",
            "2",
            "-T",
            "1",
            "--json",
        ]);
        // SAFETY: setrlimit only, between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: soft,
                    rlim_max: hard,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd.output().unwrap()
    };
    let out = run(256, 256, "400");
    assert!(!out.status.success());
    let err = stderr(&out);
    for said in [
        "400 clients",
        "RLIMIT_NOFILE",
        "is 256 (hard limit 256)",
        "ulimit -n",
    ] {
        assert!(err.contains(said), "{said:?} not in: {err}");
    }
    // Under the hard limit: raised, and every client connects.
    let out = run(64, 1024, "100");
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(
        v["summary"]["connections"]["ramp"]["connected"], 100,
        "{}",
        v["summary"]
    );
    assert_eq!(v["summary"]["failed_transactions"], 0);
}

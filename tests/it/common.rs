//! Shared fixtures: one sandbox for the tests that only read from it, helpers to run the
//! binary and to look for processes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use connbench::sandbox::{Sandbox, SandboxInfo, SandboxOptions};

/// One sandbox for the whole test binary. It is never dropped (statics are not): when the
/// test process exits, its watchdog stops the servers and removes the directory.
pub fn sandbox() -> &'static SandboxInfo {
    static HOLD: OnceLock<Mutex<Sandbox>> = OnceLock::new();
    static INFO: OnceLock<SandboxInfo> = OnceLock::new();
    INFO.get_or_init(|| {
        let sb = start_sandbox();
        let info = sb.info.clone();
        let _ = HOLD.set(Mutex::new(sb));
        info
    })
}

/// Starts a sandbox of its own from any context (a fresh runtime on a fresh thread, so
/// this works inside `#[tokio::test]` too).
pub fn start_sandbox() -> Sandbox {
    std::thread::spawn(|| runtime().block_on(Sandbox::start(&SandboxOptions::default())))
        .join()
        .expect("sandbox thread")
        .unwrap_or_else(|e| panic!("sandbox did not start: {e:#}"))
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

pub fn conninfo(name: &str) -> String {
    sandbox().target(name).unwrap().conninfo.clone()
}

/// Runs the connbench binary with `args`.
pub fn connbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_connbench"))
        .args(args)
        .output()
        .expect("run connbench")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Whether a process exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // state is the field after the parenthesised command name
            let state = stat.rsplit(')').next().and_then(|r| r.split_whitespace().next());
            state != Some("Z") && state != Some("X")
        }
        Err(_) => false,
    }
}

/// The direct children of `pid` (PostgreSQL's backends and helpers).
pub fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) {
            let ppid = stat.rsplit(')').next().and_then(|r| r.split_whitespace().nth(1));
            if ppid == Some(&pid.to_string()) {
                out.push(child);
            }
        }
    }
    out
}

/// Waits until none of `pids` is alive and `dir` is gone; panics after `limit`.
pub fn assert_gone(pids: &[u32], dir: &Path, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() && !dir.exists() {
            return;
        }
        if Instant::now() > deadline {
            panic!(
                "left behind after {limit:?}: processes {left:?}, directory exists: {}",
                dir.exists()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Validates `v` against the JSON Schema `docs/schema/NAME.schema.json`.
pub fn check_schema(name: &str, v: &serde_json::Value) {
    let path = format!("{}/docs/schema/{name}.schema.json", env!("CARGO_MANIFEST_DIR"));
    let schema: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    compiler.add_resource(&path, schema).unwrap();
    let idx = compiler.compile(&path, &mut schemas).unwrap();
    if let Err(e) = schemas.validate(v, idx) {
        panic!("JSON does not match {path}: {e:#}\n{v:#}");
    }
}

/// The shared sandbox with connbench's tables at scale 1, usable by every role.
pub fn dataset() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let ep =
            connbench::proto::Endpoint::new(connbench::targets::Target::parse(&conninfo("unix")).unwrap())
                .unwrap();
        std::thread::spawn(move || {
            runtime().block_on(async {
                connbench::dataset::pgbench::init(&ep, "connbench", 1)
                    .await
                    .unwrap();
                connbench::dataset::pgbench::grant(&ep, "connbench", connbench::sandbox::TRUST_ROLE)
                    .await
                    .unwrap();
            })
        })
        .join()
        .unwrap();
    });
}

/// A scratch directory for one test's suite file and store, removed when the guard drops,
/// so a test that fails half-way leaves nothing behind either.
pub fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("cbt-suite-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// See [`scratch`]: a directory path that removes its directory on drop.
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A file a test writes (a script, mostly), removed when the guard drops, so a test that
/// fails half-way leaves nothing in the temporary directory either.
pub struct TempFile(PathBuf);

impl TempFile {
    pub fn new(tag: &str, contents: &str) -> TempFile {
        let path = std::env::temp_dir().join(format!("cbt-{tag}-{}", std::process::id()));
        std::fs::write(&path, contents).unwrap();
        TempFile(path)
    }

    pub fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `--target NAME=conninfo` for each name, pointing at the shared test sandbox.
pub fn map(names: &[&str]) -> Vec<String> {
    names
        .iter()
        .flat_map(|n| ["--target".to_string(), format!("{n}={}", conninfo(n))])
        .collect()
}

/// Writes `suite` into `dir` and returns the store path and the arguments of
/// `connbench run` for it, with `names` mapped onto the shared test sandbox.
pub fn suite_args(
    dir: &std::path::Path,
    suite: &str,
    names: &[&str],
    extra: &[&str],
) -> (PathBuf, Vec<String>) {
    let file = dir.join("s.toml");
    std::fs::write(&file, suite).unwrap();
    let store = dir.join("r.sqlite");
    let mut args = vec!["run".to_string(), file.display().to_string()];
    args.extend(extra.iter().map(|a| a.to_string()));
    args.extend(["--store".to_string(), store.display().to_string()]);
    args.extend(map(names));
    (store, args)
}

pub fn run(args: &[String]) -> std::process::Output {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    connbench(&refs)
}

/// A child process (a relay, Prometheus, a lingering run) killed when the guard drops,
/// so a failed assertion leaves nothing running.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `conninfo` with its dbname replaced.
pub fn with_dbname(conninfo: &str, db: &str) -> String {
    conninfo
        .split_whitespace()
        .map(|kv| {
            if kv.starts_with("dbname=") {
                format!("dbname={db}")
            } else {
                kv.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Starts a sandbox with MariaDB, kept in `hold` for the test process's life (never
/// dropped: its watchdog removes it when the process ends); its info.
pub fn mariadb_sandbox(
    hold: &'static std::sync::OnceLock<std::sync::Mutex<connbench::sandbox::Sandbox>>,
) -> connbench::sandbox::SandboxInfo {
    let sb = std::thread::spawn(|| {
        runtime().block_on(connbench::sandbox::Sandbox::start(
            &connbench::sandbox::SandboxOptions {
                mariadb: true,
                ..connbench::sandbox::SandboxOptions::default()
            },
        ))
    })
    .join()
    .unwrap()
    .unwrap_or_else(|e| panic!("sandbox with MariaDB did not start: {e:#}"));
    let info = sb.info.clone();
    let _ = hold.set(std::sync::Mutex::new(sb));
    info
}

/// A sandbox with MariaDB of one test module's own, so the server-wide counters its
/// tests read count only theirs: `static MARIA: OwnMariadb = OwnMariadb::new();` in the
/// module, started on first use and never dropped (its watchdog removes it when the test
/// process ends).
pub struct OwnMariadb {
    hold: OnceLock<Mutex<Sandbox>>,
    info: OnceLock<SandboxInfo>,
}

impl OwnMariadb {
    pub const fn new() -> OwnMariadb {
        OwnMariadb {
            hold: OnceLock::new(),
            info: OnceLock::new(),
        }
    }

    /// The sandbox, started on the first call.
    pub fn info(&'static self) -> &'static SandboxInfo {
        self.info.get_or_init(|| mariadb_sandbox(&self.hold))
    }

    /// Its MariaDB password, from its option file.
    pub fn password(&'static self) -> String {
        option_file_password(&self.info().mariadb.as_ref().unwrap().defaults_file)
    }
}

/// The password in a client option file (a sandbox's `defaults_file`).
pub fn option_file_password(file: &Path) -> String {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("password="))
        .expect("a password in the option file")
        .to_string()
}

/// `connbench relay --upstream UPSTREAM --rtt 50ms`, killed when the guard drops: the
/// guard and the port it listens on.
pub fn relay_50ms(upstream: &str) -> (Killed, String) {
    let words = ["--upstream", upstream, "--rtt", "50ms"];
    let args: Vec<&std::ffi::OsStr> = words.iter().map(std::ffi::OsStr::new).collect();
    let (relay, at, _) = spawn_hop("relay", &args);
    let port = at.rsplit(':').next().unwrap().to_string();
    (Killed(relay), port)
}

/// The venv's Python with the applications' drivers (tests/apps); `None` (the test
/// skipped, and named by scripts/test.sh) outside scripts/test.sh, which installs them
/// and sets CONNBENCH_APPS_PYTHON.
pub fn apps_python() -> Option<PathBuf> {
    let p = std::env::var_os("CONNBENCH_APPS_PYTHON").map(PathBuf::from);
    if p.is_none() {
        skip(
            false,
            "CONNBENCH_APPS_PYTHON unset: scripts/test.sh installs the drivers and sets it",
        );
    }
    p
}

/// `tests/apps/NAME` run with `args`: its one JSON line.
pub fn app(python: &Path, name: &str, args: &[&str]) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/apps")
        .join(name);
    let o = Command::new(python).arg(&script).args(args).output().unwrap();
    assert!(o.status.success(), "{name} {args:?}: {}", stderr(&o));
    serde_json::from_str(stdout(&o).trim()).unwrap_or_else(|e| panic!("{name}: {e}: {}", stdout(&o)))
}

/// A suite run's answer lines, from its `--json` report.
pub fn answer_lines(v: &serde_json::Value) -> Vec<&str> {
    v["answer"]
        .as_array()
        .expect("a suite report has answer lines")
        .iter()
        .map(|a| a.as_str().expect("an answer line is text"))
        .collect()
}

/// Records the running test as skipped and why: the test harness shows a test that
/// returns early as passed, so each skip is printed and appended (name, whether the test
/// needs root, why) to the file CONNBENCH_SKIPPED names. scripts/test.sh sets it, lists
/// the skips when the run ends, and fails a root run that skipped a root-only test.
pub fn skip(root_only: bool, why: &str) {
    use std::io::Write;
    // The harness names each test's thread after the test.
    let name = std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .unwrap_or("(a test on the main thread)")
        .to_string();
    eprintln!("skipped: {why}");
    if let Some(path) = std::env::var_os("CONNBENCH_SKIPPED") {
        let kind = if root_only { "root-only" } else { "-" };
        // One write per line, in append mode: lines of tests running at once never mix.
        let line = format!("{name}\t{kind}\t{why}\n");
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
    }
}

/// Whether this process is root; if not, records the test as skipped (it needs root).
pub fn root_or_skip(why: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        skip(true, why);
    }
    root
}

/// Starts `connbench SUBCOMMAND --listen 127.0.0.1:0 ARGS...` (a relay or a recorder):
/// the process, the address it listens on and its first line on stderr
/// ("SUBCOMMAND: 127.0.0.1:PORT ...").
pub fn spawn_hop(subcommand: &str, args: &[&std::ffi::OsStr]) -> (std::process::Child, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_connbench"))
        .args([subcommand, "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut err, &mut line).unwrap();
    let at = line
        .strip_prefix(&format!("{subcommand}: "))
        .and_then(|r| r.split(' ').next())
        .unwrap_or_else(|| panic!("unexpected: {line}"))
        .to_string();
    (child, at, line)
}

/// `connbench record --upstream UPSTREAM` with `extra` flags, writing `out`: the recorder
/// and the port it listens on.
pub fn start_recorder(upstream: &str, extra: &[&str], out: &Path) -> (std::process::Child, String) {
    let mut args: Vec<&std::ffi::OsStr> = vec!["--upstream".as_ref(), upstream.as_ref()];
    args.extend(extra.iter().map(|a| std::ffi::OsStr::new(*a)));
    args.extend(["--out".as_ref(), out.as_os_str()]);
    let (child, at, _) = spawn_hop("record", &args);
    let port = at.rsplit(':').next().unwrap().to_string();
    (child, port)
}

/// Ends a recording with Ctrl-C, as a user does: exit 130.
pub fn stop_recorder(child: std::process::Child) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let done = child.wait_with_output().unwrap();
    assert_eq!(done.status.code(), Some(130), "{}", stderr(&done));
}

/// The shared sandbox's `tcp` conninfo turned to reach database `db` through a hop on
/// 127.0.0.1:`port`, with `sslmode`.
pub fn through_port(port: &str, db: &str, sslmode: &str) -> String {
    conninfo("tcp")
        .split_whitespace()
        .map(|kv| match kv.split_once('=') {
            Some(("port", _)) => format!("port={port}"),
            Some(("dbname", _)) => format!("dbname={db}"),
            Some(("sslmode", _)) => format!("sslmode={sslmode}"),
            _ => kv.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

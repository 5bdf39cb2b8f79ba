//! pgbench 15's own regression suite (its TAP tests' cases, tests/it/data/pgbench_tap.toml)
//! run through the installed pgbench and through `connbench load`, same arguments, same
//! scripts, same database: both must run or both must not, run the same number of
//! transactions, and where pgbench refuses before running (options, script syntax),
//! connbench must refuse too. Where connbench differs on purpose (docs/pgbench.md), the
//! case says so and connbench must do what the documentation says.
//!
//! Agreement is checked, not assumed from an exit code. A refusal is connbench's exit 2,
//! no report, and a message naming the cause pgbench's TAP expects (its stderr patterns,
//! or the case's own connbench patterns where connbench words it differently on
//! purpose); pgbench's stderr must match the TAP's patterns too. A client-abort case
//! (pgbench exits 2) runs with [`ABORT_CLIENTS`] clients of [`ABORT_TRANSACTIONS`]
//! transactions instead of the TAP's one of one, where aborting a client and going on
//! differ: both tools must process the same transactions, abort the same number of
//! clients, and name the cause. A panic, a signal, a timeout or any other exit is never
//! agreement.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use regex::Regex;
use serde::Deserialize;

use crate::common::{conninfo, with_dbname, Scratch};
use crate::load::sql;

#[derive(Deserialize)]
struct Data {
    case: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    #[allow(dead_code)] // for the reader and the failure table's context
    source: String,
    pgbench_status: i32,
    args: Vec<String>,
    /// The TAP's patterns for pgbench's stdout, kept for the reader: the two tools'
    /// processed counts are compared with each other instead.
    #[serde(default)]
    #[allow(dead_code)]
    stdout: Vec<String>,
    /// The TAP's patterns for pgbench's stderr: the cause of a refusal or an abort.
    #[serde(default)]
    stderr: Vec<String>,
    /// Where connbench names the same cause in other words (its messages name the flag,
    /// the value and the fix): the patterns its stderr must match instead, and why.
    connbench_stderr: Option<Vec<String>>,
    wording: Option<String>,
    #[serde(default)]
    file: Vec<ScriptFile>,
    database: Option<String>,
    setup: Option<String>,
    pgoptions: Option<String>,
    differs: Option<Differs>,
    processed_may_differ: Option<String>,
    /// The server itself may fail a transaction here, at random (why): either tool then
    /// aborts that client and exits 2, so only "each ran or aborted a client, never
    /// refused or crashed" is compared.
    server_race: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    name: String,
    text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Differs {
    /// connbench's documented outcome: "refused", "failed" or "ran".
    connbench: String,
    reason: String,
}

/// A client-abort case's clients and transactions per client, instead of the TAP's one
/// of one: enough that a tool which went on after the error would process or fail
/// transactions that one which aborted never runs.
const ABORT_CLIENTS: usize = 4;
const ABORT_TRANSACTIONS: usize = 20;

/// What a tool did with a case.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// Exit 0; the transactions processed, when it ran any (`--help` runs none).
    Ran(Option<u64>),
    /// It ran and a client aborted (pgbench 2, connbench 1 with a report): the
    /// transactions processed.
    Failed(u64),
    /// It stopped before running: options, script syntax, the connection (pgbench 1,
    /// connbench 2 without a report).
    Refused,
    /// Anything else: a panic (101), a signal or the time limit (no code), an exit code
    /// the tool does not document for this. Never agreement.
    Crashed(Option<i32>),
}

impl Outcome {
    fn kind(&self) -> &'static str {
        match self {
            Outcome::Ran(_) => "ran",
            Outcome::Failed(_) => "failed",
            Outcome::Refused => "refused",
            Outcome::Crashed(_) => "crashed",
        }
    }

    fn processed(&self) -> Option<u64> {
        match self {
            Outcome::Ran(p) => *p,
            Outcome::Failed(p) => Some(*p),
            Outcome::Refused | Outcome::Crashed(_) => None,
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self, self.processed()) {
            (Outcome::Crashed(code), _) => write!(f, "crashed ({code:?})"),
            (_, Some(p)) => write!(f, "{} ({p})", self.kind()),
            (_, None) => f.write_str(self.kind()),
        }
    }
}

/// One tool's run: its outcome, exit code and stderr.
struct Run {
    outcome: Outcome,
    code: Option<i32>,
    stderr: String,
}

impl Run {
    /// The clients the run says it aborted: "client N aborted ..." (both tools),
    /// pgbench's "client N script S aborted in command ...", or its "client N script S
    /// command C query Q: expected one row, got 2" (a `\gset` that fails aborts the client
    /// without the word).
    fn aborted_clients(&self) -> BTreeSet<u64> {
        let re = Regex::new(r"client (\d+) (?:script \d+ )?(?:aborted|command \d+ query \d+: )").unwrap();
        re.captures_iter(&self.stderr)
            .map(|c| c[1].parse().unwrap())
            .collect()
    }
}

/// Checks that `stderr` matches each pattern (Perl's syntax, as the TAP writes them);
/// the first that does not match, if any. A pattern that opens with a negative look-ahead
/// (`(?!...)`) matches any text in Perl (at its end, if nowhere else), so it checks
/// nothing and is passed over.
fn unmatched<'a>(stderr: &str, patterns: &'a [String]) -> Option<&'a str> {
    patterns
        .iter()
        .filter(|p| !p.starts_with("(?!"))
        .find(|p| !Regex::new(p).unwrap().is_match(stderr))
        .map(String::as_str)
}

/// Runs `cmd`, killing it (its own process, by pid) after `limit`: a hung case fails with
/// its name instead of hanging the suite.
fn run_limited(mut cmd: Command, limit: Duration) -> (Option<i32>, String, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Drain both pipes on threads so a chatty child cannot block on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        std::io::Read::read_to_end(&mut out, &mut s).ok();
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        std::io::Read::read_to_end(&mut err, &mut s).ok();
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = String::from_utf8_lossy(&t_out.join().unwrap()).into_owned();
    let mut err = String::from_utf8_lossy(&t_err.join().unwrap()).into_owned();
    if status.is_none() {
        err.push_str(&format!("\n(killed after {limit:?})"));
    }
    (status.and_then(|s| s.code()), out, err)
}

/// The last few lines of `s`, on one line, for the table.
fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(2);
    let t = lines[start..].join(" | ");
    if t.chars().count() > 160 {
        t.chars().take(160).collect::<String>() + "..."
    } else {
        t
    }
}

/// The case's arguments with each `-f NAME[@W]` pointing at its file in `dir` and `{dir}`
/// replaced by `dir`.
fn arguments(case: &Case, dir: &Path) -> Vec<String> {
    let names: BTreeSet<&str> = case.file.iter().map(|f| f.name.as_str()).collect();
    let mut out = Vec::new();
    let mut after_f = false;
    for a in &case.args {
        let (base, weight) = match a.rsplit_once('@') {
            Some((b, w)) if w.chars().all(|c| c.is_ascii_digit()) => (b, format!("@{w}")),
            _ => (a.as_str(), String::new()),
        };
        if after_f && names.contains(base) {
            out.push(format!("{}{weight}", dir.join(base).display()));
        } else {
            out.push(a.replace("{dir}", &dir.display().to_string()));
        }
        after_f = a == "-f";
    }
    out
}

fn pgbench(case: &Case, args: &[String], db: &str, dir: &Path) -> Run {
    let mut cmd = Command::new("pgbench");
    cmd.args(args).arg(db).current_dir(dir);
    if let Some(o) = &case.pgoptions {
        cmd.env("PGOPTIONS", o);
    }
    let (code, out, err) = run_limited(cmd, Duration::from_secs(60));
    let processed = out.lines().find_map(|l| {
        l.strip_prefix("number of transactions actually processed: ")?
            .split('/')
            .next()?
            .parse::<u64>()
            .ok()
    });
    let outcome = match code {
        Some(0) => Outcome::Ran(processed),
        // pgbench exits 2 when a client aborted during the run, 1 when it stopped before
        // (bad options or script, no connection).
        Some(2) => Outcome::Failed(processed.unwrap_or(0)),
        Some(1) => Outcome::Refused,
        other => Outcome::Crashed(other),
    };
    Run {
        outcome,
        code,
        stderr: err,
    }
}

fn connbench(case: &Case, args: &[String], db: &str, dir: &Path) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_connbench"));
    cmd.arg("load").args(args).arg("--json").arg(db).current_dir(dir);
    if let Some(o) = &case.pgoptions {
        cmd.env("PGOPTIONS", o);
    }
    let (code, out, err) = run_limited(cmd, Duration::from_secs(60));
    // A report on stdout means it ran; none, that it stopped before (or only printed, as
    // --help and -b list do, exiting 0).
    let report: Option<serde_json::Value> = serde_json::from_str(&out).ok();
    let processed = report
        .as_ref()
        .and_then(|v| v["summary"]["transactions"].as_u64());
    // connbench's documented exits: 0 ran, 1 ran and failed (a report), 2 refused
    // before running (no report).
    let outcome = match (code, report.is_some()) {
        (Some(0), _) => Outcome::Ran(processed),
        (Some(1), true) => Outcome::Failed(processed.unwrap_or(0)),
        (Some(2), false) => Outcome::Refused,
        (other, _) => Outcome::Crashed(other),
    };
    Run {
        outcome,
        code,
        stderr: err,
    }
}

/// The test's databases: one filled as the TAP's node is (`pgbench -i`, scale 1), one
/// empty (the node before -i). Both are this test's own; dropped at the end.
struct Databases {
    main: String,
    empty: String,
    names: [String; 2],
}

impl Databases {
    fn create() -> Databases {
        let pid = std::process::id();
        let names = [format!("cbt_tap_{pid}"), format!("cbt_tap_empty_{pid}")];
        for n in &names {
            sql(&format!("CREATE DATABASE {n}"));
        }
        let main = with_dbname(&conninfo("unix"), &names[0]);
        let o = Command::new("pgbench")
            .args(["-i", "-q", "-s", "1", &main])
            .output()
            .expect("pgbench 15 is installed");
        assert!(
            o.status.success(),
            "pgbench -i: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let empty = with_dbname(&conninfo("unix"), &names[1]);
        Databases { main, empty, names }
    }
}

impl Drop for Databases {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = std::panic::catch_unwind(|| sql(&format!("DROP DATABASE IF EXISTS {n} WITH (FORCE)")));
        }
    }
}

fn psql(db: &str, q: &str) {
    let o = Command::new("psql")
        .args([db, "-v", "ON_ERROR_STOP=1", "-qAtc", q])
        .output()
        .unwrap();
    assert!(o.status.success(), "{q}: {}", String::from_utf8_lossy(&o.stderr));
}

fn load_cases() -> Vec<Case> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/data/pgbench_tap.toml");
    let data: Data = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    data.case
}

#[test]
fn the_data_file_holds_pgbench_s_cases_each_named_once() {
    let cases = load_cases();
    let names: BTreeSet<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names.len(), cases.len(), "case names are unique");
    for c in &cases {
        assert!([0, 1, 2].contains(&c.pgbench_status), "{}", c.name);
        if let Some(d) = &c.differs {
            assert!(
                ["refused", "failed", "ran"].contains(&d.connbench.as_str()),
                "{}",
                c.name
            );
            assert!(!d.reason.is_empty(), "{}", c.name);
        }
        // A refusal or an abort is compared by its cause: the TAP names one, and
        // connbench's own wording comes with the reason it differs.
        if c.pgbench_status != 0 {
            assert!(!c.stderr.is_empty(), "{}: no cause to compare", c.name);
        }
        assert_eq!(
            c.connbench_stderr.is_some(),
            c.wording.as_deref().is_some_and(|w| !w.is_empty()),
            "{}: connbench_stderr and wording go together",
            c.name
        );
        let checked = if c.pgbench_status == 0 {
            &[][..]
        } else {
            &c.stderr[..]
        };
        for p in checked.iter().chain(c.connbench_stderr.iter().flatten()) {
            assert!(
                p.starts_with("(?!") || Regex::new(p).is_ok(),
                "{}: /{p}/ does not compile",
                c.name
            );
        }
        // every file is named by a -f, and every -f NAME that is not a path is a file
        for f in &c.file {
            assert!(
                c.args
                    .windows(2)
                    .any(|w| w[0] == "-f" && w[1].split('@').next() == Some(f.name.as_str())),
                "{}: {} is not given to -f",
                c.name,
                f.name
            );
        }
    }
}

#[test]
fn pgbench_s_tap_cases_run_alike_in_pgbench_and_connbench() {
    let started = Instant::now();
    let cases = load_cases();
    let dbs = Databases::create();
    let dir = crate::common::scratch("pgbench-tap");
    let mut rows = Vec::new();
    let mut bad = 0;
    for (i, case) in cases.iter().enumerate() {
        let (row, ok) = run_case(i, case, &dbs, &dir);
        bad += usize::from(!ok);
        rows.push(row);
    }
    let table = format!(
        "{:<3} {:<62} {:<14} {:<14} {}\n{}",
        "",
        "case",
        "pgbench",
        "connbench",
        "why / stderr",
        rows.join("\n")
    );
    // The table is shown with --nocapture even when every case agrees.
    eprintln!("{table}\n{} cases in {:.1?}", cases.len(), started.elapsed());
    assert!(bad == 0, "{bad} of {} cases disagree:\n{table}", cases.len());
}

/// A client-abort case's arguments: its own, with [`ABORT_CLIENTS`] clients of
/// [`ABORT_TRANSACTIONS`] transactions in place of its -c and -t.
fn widened(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for a in args {
        if std::mem::take(&mut skip) {
            continue;
        }
        match a.as_str() {
            "-c" | "-t" | "--client" | "--transactions" => skip = true,
            a if a.starts_with("--client=") || a.starts_with("--transactions=") => {}
            a if (a.starts_with("-c") || a.starts_with("-t")) && a[2..].parse::<u64>().is_ok() => {}
            _ => out.push(a.to_string()),
        }
    }
    out.extend(
        [
            "-c",
            &ABORT_CLIENTS.to_string(),
            "-t",
            &ABORT_TRANSACTIONS.to_string(),
        ]
        .map(String::from),
    );
    out
}

/// Runs one case with both tools; its line of the table and whether it passed.
fn run_case(i: usize, case: &Case, dbs: &Databases, dir: &Scratch) -> (String, bool) {
    // Each case's files and logs in a directory of its own.
    let cdir = dir.join(format!("case{i}"));
    std::fs::create_dir_all(&cdir).unwrap();
    for f in &case.file {
        std::fs::write(cdir.join(&f.name), &f.text).unwrap();
    }
    let db = match case.database.as_deref() {
        None => dbs.main.clone(),
        Some("empty") => dbs.empty.clone(),
        Some(name) => with_dbname(&dbs.main, name),
    };
    let mut args = arguments(case, &cdir);
    if case.pgbench_status == 2 && case.server_race.is_none() {
        args = widened(&args);
    }
    let setup = || {
        if let Some(q) = &case.setup {
            psql(&dbs.main, q);
        }
    };
    setup();
    let p = pgbench(case, &args, &db, &cdir);
    setup();
    let c = connbench(case, &args, &db, &cdir);
    let _ = std::fs::remove_dir_all(&cdir);
    let verdict = judge(case, &p, &c);
    let ok = verdict.is_ok();
    let why = verdict.unwrap_or_else(|e| e);
    let row = format!(
        "{:<3} {:<62} {:<14} {:<14} {}",
        if ok { "" } else { "XX" },
        case.name.chars().take(62).collect::<String>(),
        p.outcome.to_string(),
        c.outcome.to_string(),
        why
    );
    (row, ok)
}

/// Whether the two runs agree: Ok with a note for the table, or Err with the reason.
fn judge(case: &Case, p: &Run, c: &Run) -> Result<String, String> {
    if let Outcome::Crashed(code) = c.outcome {
        return Err(format!("connbench crashed (exit {code:?}): {}", tail(&c.stderr)));
    }
    if let Some(race) = &case.server_race {
        let ran = |o: &Outcome| matches!(o, Outcome::Ran(_) | Outcome::Failed(_));
        return if ran(&c.outcome) && ran(&p.outcome) {
            Ok(format!("server race: {race}"))
        } else {
            Err(format!(
                "server race, and connbench exited {:?}: {}",
                c.code,
                tail(&c.stderr)
            ))
        };
    }
    // pgbench must do what its own suite expects of it, for the reason the suite expects,
    // or the comparison means nothing.
    let expected_pg = match case.pgbench_status {
        0 => "ran",
        1 => "refused",
        _ => "failed",
    };
    if p.outcome.kind() != expected_pg {
        return Err(format!(
            "pgbench exited {:?}, its TAP expects {}: {}",
            p.code,
            case.pgbench_status,
            tail(&p.stderr)
        ));
    }
    if case.pgbench_status != 0 {
        if let Some(pattern) = unmatched(&p.stderr, &case.stderr) {
            return Err(format!("pgbench's stderr lacks /{pattern}/: {}", tail(&p.stderr)));
        }
    }
    if let Some(d) = &case.differs {
        // A documented difference: connbench must do what the documentation says.
        return if c.outcome.kind() == d.connbench {
            Ok(format!("differs ({}): {}", d.connbench, d.reason))
        } else {
            Err(format!("differs ({}): {}", d.connbench, tail(&c.stderr)))
        };
    }
    if p.outcome.kind() != c.outcome.kind() {
        return Err(format!("connbench exited {:?}: {}", c.code, tail(&c.stderr)));
    }
    if case.pgbench_status != 0 {
        let patterns = case.connbench_stderr.as_ref().unwrap_or(&case.stderr);
        if let Some(pattern) = unmatched(&c.stderr, patterns) {
            return Err(format!(
                "connbench's stderr names another cause (lacks /{pattern}/): {}",
                tail(&c.stderr)
            ));
        }
    }
    if p.outcome.processed() != c.outcome.processed() && case.processed_may_differ.is_none() {
        return Err(format!("processed differ; connbench: {}", tail(&c.stderr)));
    }
    if case.pgbench_status == 2 {
        let (pa, ca) = (p.aborted_clients(), c.aborted_clients());
        if pa.is_empty() {
            return Err(format!(
                "pgbench exited 2 naming no aborted client: {}",
                tail(&p.stderr)
            ));
        }
        if pa != ca {
            return Err(format!(
                "aborted clients differ: pgbench {pa:?}, connbench {ca:?}: {}",
                tail(&c.stderr)
            ));
        }
        return Ok(format!("{} of {ABORT_CLIENTS} clients aborted in both", pa.len()));
    }
    Ok(case.wording.clone().unwrap_or_default())
}

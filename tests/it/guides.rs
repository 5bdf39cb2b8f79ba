//! The guides run as written. Each guide in docs/guide/*.md is a recipe: its `sh` blocks,
//! in order, are pasted into one shell as a reader pastes them (bash, `connbench` on the
//! PATH, the repository as the working directory), on a sandbox the guide itself starts
//! with `connbench sandbox start`, under a TMPDIR, HOME and XDG_DATA_HOME of the test's
//! own, so the sandbox, the relays' sockets and the results store are this test's alone.
//! Every command must succeed (`set -e -o pipefail`), and the recipe must leave nothing
//! behind: no process of its shell, nothing in its TMPDIR.
//!
//! What the test changes, and nothing else:
//! - lengths, shortened by [`SHORTER`] (a suite's `--quick` is kept as written);
//! - the sidecar relay's TCP port [`SIDECAR_PORT`] (`127.0.0.1:6543`, `port=6543`,
//!   `-p 6543`), replaced by a free one, so two checkouts testing at once on one machine
//!   do not take each other's port;
//! - blocks for the reader's own infrastructure, which open with the comment line
//!   [`OWN`] for the reader to see, are skipped and counted.
//!
//! If a block fails, the shell is killed with everything it started (its process group:
//! relays in the background too) and the sandbox is stopped, before the test fails with
//! the block and the end of the output.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::scratch;

/// The comment line that marks a block for the reader's own infrastructure.
const OWN: &str = "# On your own infrastructure";

/// Lengths shortened for the test: (as the guide writes it, as the test runs it).
const SHORTER: &[(&str, &str)] = &[(" -n 200", " -n 20")];

/// The port the sidecar guide's TCP relay listens on.
const SIDECAR_PORT: &str = "6543";

/// The guides, each run by a test below; a guide without one fails
/// [`every_guide_has_a_recipe_test`].
const GUIDES: &[&str] = &[
    "connect.md",
    "distance.md",
    "engines.md",
    "scaling.md",
    "sidecar.md",
    "your-app.md",
];

/// A fenced `sh` block of a guide.
#[derive(Debug, Clone, PartialEq)]
struct Block {
    /// The line its fence opens on (1-based), for messages.
    line: usize,
    text: String,
    /// For the reader's own infrastructure: shown, not run.
    own: bool,
}

/// The `sh` blocks of a Markdown text, in order.
fn shell_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, bool, String)> = None;
    for (i, line) in markdown.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(lang)) => open = Some((i + 1, lang.trim() == "sh", String::new())),
            (Some((start, shell, text)), Some(_)) => {
                if *shell {
                    blocks.push(Block {
                        line: *start,
                        own: text.lines().next().is_some_and(|l| l.starts_with(OWN)),
                        text: std::mem::take(text),
                    });
                }
                open = None;
            }
            (Some((_, _, text)), None) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "a code block is never closed");
    blocks
}

/// A free TCP port on loopback (the kernel's pick, released for the relay to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// What a guide's recipe printed, and how many blocks ran and were skipped.
struct Recipe {
    output: String,
    ran: usize,
    skipped: usize,
}

/// The environment a recipe's shell and its clean-up run in.
struct Shell {
    dir: PathBuf,
    tmp: PathBuf,
}

impl Shell {
    fn command(&self, program: &str) -> Command {
        let bin = Path::new(env!("CARGO_BIN_EXE_connbench")).parent().unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        let mut c = Command::new(program);
        c.env("PATH", path)
            .env("TMPDIR", &self.tmp)
            .env("HOME", self.dir.join("home"))
            .env("XDG_DATA_HOME", self.dir.join("data"))
            // `unix`, `tcp`, ... mean the sandbox the guide starts (`default`), whatever
            // the test's own environment names.
            .env_remove("CONNBENCH_SANDBOX")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdin(Stdio::null());
        c
    }
}

/// Kills the recipe's shell and all it started, and stops its sandbox, however the test
/// ends.
struct Cleanup<'a> {
    shell: &'a Shell,
    pgid: i32,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the shell's own process group, which the test created.
        unsafe { libc::kill(-self.pgid, libc::SIGKILL) };
        let _ = self.shell.command("connbench").args(["sandbox", "stop"]).output();
    }
}

/// The processes still in process group `pgid`.
fn group_members(pgid: i32) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(2) == Some(&pgid.to_string().as_str()) && fields.first() != Some(&"Z") {
            out.push(format!("{head})"));
        }
    }
    out
}

/// Runs docs/guide/`guide`'s recipe as a reader pastes it; panics naming the block that
/// failed.
fn run_recipe(guide: &str) -> Recipe {
    let path = format!("{}/docs/guide/{guide}", env!("CARGO_MANIFEST_DIR"));
    let blocks = shell_blocks(&std::fs::read_to_string(&path).unwrap());
    let dir = scratch(&format!("recipe-{}", guide.trim_end_matches(".md")));
    let shell = Shell {
        dir: dir.to_path_buf(),
        tmp: dir.join("t"),
    };
    for d in [&shell.tmp, &dir.join("home"), &dir.join("data")] {
        std::fs::create_dir_all(d).unwrap();
    }
    let port = free_port().to_string();
    let mut script = String::from("set -e -x -o pipefail\n");
    let (mut ran, mut skipped) = (0, 0);
    for b in &blocks {
        if b.own {
            skipped += 1;
            continue;
        }
        let mut text = b.text.clone();
        for (long, short) in SHORTER {
            text = text.replace(long, short);
        }
        text = text
            .replace(&format!("127.0.0.1:{SIDECAR_PORT}"), &format!("127.0.0.1:{port}"))
            .replace(&format!("port={SIDECAR_PORT}"), &format!("port={port}"))
            .replace(&format!("-p {SIDECAR_PORT}"), &format!("-p {port}"));
        script.push_str(&format!(": '### {guide}, the block at line {}'\n{text}", b.line));
        ran += 1;
    }
    script.push_str(": '### the end of the recipe'\n");
    let script_path = dir.join("recipe.sh");
    std::fs::write(&script_path, &script).unwrap();
    let log_path = dir.join("recipe.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = {
        use std::os::unix::process::CommandExt;
        shell
            .command("bash")
            .arg(&script_path)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap()
    };
    let pgid = child.id() as i32;
    let _cleanup = Cleanup { shell: &shell, pgid };
    // A backstop for a recipe that hangs, far beyond what the guides' quick runs take
    // on a busy machine; the test waits for the shell's exit, not for a time.
    let deadline = Instant::now() + Duration::from_secs(40 * 60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let output = std::fs::read_to_string(&log_path).unwrap_or_default();
    let block = output
        .lines()
        .rev()
        .find(|l| l.contains("### "))
        .unwrap_or("before the first block")
        .to_string();
    let tail: Vec<&str> = output
        .lines()
        .rev()
        .take(60)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let tail = tail.join("\n");
    match status {
        None => panic!("{guide}: still running after 40 minutes, at {block}:\n{tail}"),
        Some(s) if !s.success() => panic!("{guide}: failed ({s}) at {block}:\n{tail}"),
        Some(_) => {}
    }
    // Nothing left behind: no relay or server of the shell's (a relay the guide stopped
    // prints what it carried and ends: waited for, up to a backstop), nothing in its
    // TMPDIR.
    let stopped_by = Instant::now() + Duration::from_secs(60);
    let left = loop {
        let left = group_members(pgid);
        if left.is_empty() || Instant::now() > stopped_by {
            break left;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        left.is_empty(),
        "{guide} leaves processes running: {left:?}\n{tail}"
    );
    let files: Vec<_> = std::fs::read_dir(&shell.tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(files.is_empty(), "{guide} leaves {files:?} in its TMPDIR\n{tail}");
    eprintln!("{guide}: {ran} blocks run, {skipped} for your own infrastructure skipped");
    Recipe { output, ran, skipped }
}

/// The recipe's output with its lines joined (answers wrap at 80 columns).
fn joined(r: &Recipe) -> String {
    r.output.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn the_sidecar_guide_runs_as_written() {
    let r = run_recipe("sidecar.md");
    assert_eq!((r.ran, r.skipped), (5, 2), "{}", r.output);
    let out = joined(&r);
    // The built-in suite, then the guide's file through the two relays, answered and read
    // back by its name.
    assert!(out.contains("transport: Through a sidecar proxy"), "{out}");
    assert!(out.contains("my-sidecar: Through my sidecar"), "{out}");
    assert_eq!(
        // The comparison's answer only ("... unix is ..." or "... unix vs ..."): a cell
        // with a stalled transaction has an answer line of its own naming it ("answer:
        // sidecar via unix: 1 stalled ...").
        out.matches("answer: sidecar via unix ").count(),
        3,
        "the built-in suite's answer, the file's, and its report by name: {out}"
    );
    assert_eq!(
        out.matches("my-sidecar: Through my sidecar").count(),
        2,
        "the run and its report by name: {out}"
    );
}

#[test]
fn the_your_app_guide_records_traces_and_replays_as_written() {
    let r = run_recipe("your-app.md");
    assert_eq!((r.ran, r.skipped), (10, 1), "{}", r.output);
    let out = joined(&r);
    pipelines_and_kills(&out);
    tls_and_capture(&out);
    // The recorder's summary, the profile and its prediction, both replays.
    assert!(out.contains("asked for TLS and went on in plaintext"), "{out}");
    assert!(
        out.contains("transactions") && out.contains("round trips each"),
        "{out}"
    );
    assert!(out.contains("+50 ms"), "{out}");
    assert!(out.contains("at the recorded pace"), "{out}");
    assert!(out.contains("fidelity"), "{out}");
    assert!(
        out.contains("round trip requested +50.00 ms") || out.contains("achieved"),
        "{out}"
    );
    // The stand-in's shapes, its pre-ping named as housekeeping and priced in the
    // predictions, the replay without it, and psql's cancel replayed.
    assert!(out.contains("transaction shapes by share of time"), "{out}");
    assert!(
        out.contains("transaction shapes by recorded share of time"),
        "{out}"
    );
    assert!(out.contains("pre-ping"), "{out}");
    assert!(out.contains("without housekeeping"), "{out}");
    assert!(out.contains("(--without housekeeping;"), "{out}");
    // Every recorded cancel replayed: psql sends one per SIGINT it handles (the guide's
    // `timeout --foreground` sends one; without `--foreground` GNU timeout signals its
    // process group too, and psql has cancelled twice).
    let cancels = out
        .split("cancels ")
        .filter_map(|rest| rest.split(" recorded replayed").next())
        .filter_map(|n| n.split_once(" of "))
        .find_map(|(a, b)| Some((a.trim().parse::<u32>().ok()?, b.trim().parse::<u32>().ok()?)));
    assert!(
        matches!(cancels, Some((sent, recorded)) if sent == recorded && sent >= 1),
        "every recorded cancel replayed: {cancels:?} in {out}"
    );
    // The distance suite asked of the trace: the pool cells kept (a pool in front of the
    // application), an answer with its interval, and the trace's prediction beside the far
    // cells' measurements.
    assert!(!out.contains("left out:"), "{out}");
    assert!(
        out.contains("4 cells with a pool are compared on latency_mean_ms"),
        "the note that a response time leaves a pool's saving out: {out}"
    );
    assert!(
        out.contains("pool, 5 min lifetime distance=50ms (+50 ms, client-side pool): predicted"),
        "{out}"
    );
    assert!(out.contains("(workload: trace:app.trace.gz)"), "{out}");
    assert!(
        out.contains("answer: no pool distance=0ms is") && out.contains("than no pool distance=50ms"),
        "{out}"
    );
    assert!(out.contains("no pool distance=50ms (+50 ms): predicted"), "{out}");
}

/// The your-app guide's pipelined stand-in and the `mariadb` client's KILL, as recorded
/// and replayed.
fn pipelines_and_kills(out: &str) {
    // Recorded: the teller's update pipelined behind each transfer, each Execute a call,
    // each shape one round trip.
    let batch = out
        .split("batch.trace.gz: Postgres application")
        .nth(1)
        .expect("the pipelined stand-in's trace");
    assert!(batch.contains("40 pipelined"), "{batch}");
    assert!(
        batch.contains("40 1.00") && batch.contains("BEGIN UPDATE pgbench_accounts"),
        "the transfer's shape, 40 of one round trip: {batch}"
    );
    // Replayed pipelined: one group at a time, each session's 40 groups would take 40
    // round trips of 50 ms, 2.0 s at the least; pipelined, 20 and a connect.
    let took = seconds_after(
        batch,
        "replay of batch.trace.gz on tcp+50.0 ms, at the recorded pace: ",
    );
    assert!(took < 2.0, "the pipelined replay took {took} s: {batch}");
    // The MySQL client's KILL replayed: the interrupted SLEEP(5) stopped again, failing
    // as recorded.
    let kill = out
        .split("replay of report.trace.gz on mariadb_tcp")
        .nth(1)
        .expect("the KILL's replay");
    assert!(kill.contains("cancels 1 of 1 recorded replayed"), "{kill}");
    assert!(kill.contains("failed now but not when recorded 0"), "{kill}");
    let took = seconds_after(kill, ", at the recorded pace: ");
    assert!(
        took < 2.5,
        "the KILL's replay took {took} s, not the SLEEP's 5: {kill}"
    );
}

/// The your-app guide's psql with `sslmode=verify-full` recorded through `--listen-tls`,
/// and pgbench's run read from a tcpdump capture.
fn tls_and_capture(out: &str) {
    assert!(
        out.contains("1 session(s) used TLS, terminated by the recorder (--listen-tls)"),
        "{out}"
    );
    assert!(
        out.contains("1 over TLS (terminated by the recorder: handshake"),
        "{out}"
    );
    let capture = out
        .split("capture.trace.gz: Postgres application")
        .nth(1)
        .expect("the capture's trace");
    assert!(out.contains("record: app.pcap ("), "{out}");
    assert!(
        !out.contains("gap(s)"),
        "a capture of loopback loses nothing: {out}"
    );
    // Every one of pgbench's 100 select-only transactions, a call each: the statement
    // table's row is total (2 tokens), calls, mean (2), rows, then the statement.
    let before = capture
        .split("SELECT abalance FROM pgbench_accounts WHERE aid = $1")
        .next()
        .unwrap_or_default();
    let row: Vec<&str> = before.split_whitespace().rev().take(6).collect();
    assert_eq!(row.get(3), Some(&"100"), "calls of pgbench's select: {capture}");
}

/// The seconds printed after `prefix` in `text` (`1.28 s`).
fn seconds_after(text: &str, prefix: &str) -> f64 {
    let rest = text
        .split(prefix)
        .nth(1)
        .unwrap_or_else(|| panic!("{prefix:?} in {text}"));
    let n = rest.split_whitespace().next().unwrap_or_default();
    n.parse()
        .unwrap_or_else(|_| panic!("seconds after {prefix:?}: {rest}"))
}

#[test]
fn the_connect_guide_runs_as_written() {
    let r = run_recipe("connect.md");
    assert_eq!((r.ran, r.skipped), (2, 1), "{}", r.output);
    let out = joined(&r);
    assert!(out.contains("total connect time, relative to"), "{out}");
    assert!(out.contains("answer: target=pgbouncer"), "{out}");
}

#[test]
fn the_distance_guide_runs_as_written() {
    let r = run_recipe("distance.md");
    assert_eq!((r.ran, r.skipped), (2, 1), "{}", r.output);
    let out = joined(&r);
    assert!(out.contains("than pool, 5 min lifetime"), "{out}");
    assert!(out.contains("PgBouncer near the database"), "{out}");
    assert!(out.contains("my-distance:"), "{out}");
    // The quick profile's short lifetime says so in its name.
    assert!(out.contains("pool, 250 ms lifetime"), "{out}");
    assert!(!out.contains("pool, 5 s lifetime"), "{out}");
}

#[test]
fn the_scaling_guide_runs_as_written() {
    let r = run_recipe("scaling.md");
    assert_eq!((r.ran, r.skipped), (2, 1), "{}", r.output);
    let out = joined(&r);
    // The file's large instance against its small one, at each client count, by labels.
    for clients in [1, 4] {
        let wanted = format!("answer: clients={clients}, 16 vCPU: ");
        assert!(out.contains(&wanted), "{wanted}: {out}");
    }
    assert!(
        out.contains("x the tps of 2 vCPU (") && out.contains("of linear"),
        "{out}"
    );
}

#[test]
fn the_engines_guide_runs_as_written() {
    let r = run_recipe("engines.md");
    assert_eq!((r.ran, r.skipped), (2, 1), "{}", r.output);
    let out = joined(&r);
    assert!(out.contains("engines:") && out.contains("netpath:"), "{out}");
    // The guide's own file on the sandbox's two engines, by their target names.
    assert!(out.contains("my-engines: PostgreSQL or MySQL"), "{out}");
    assert!(out.contains("answer: mysql"), "{out}");
}

#[test]
fn every_guide_has_a_recipe_test() {
    let mut found: Vec<String> = std::fs::read_dir(format!("{}/docs/guide", env!("CARGO_MANIFEST_DIR")))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".md") && n != "README.md")
        .collect();
    found.sort();
    assert_eq!(
        found, GUIDES,
        "a guide without a recipe test, or a test without its guide"
    );
    // Each guide's recipe starts what it uses and marks the blocks it does not run.
    for g in GUIDES {
        let md = std::fs::read_to_string(format!("{}/docs/guide/{g}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let blocks = shell_blocks(&md);
        assert!(blocks.iter().any(|b| !b.own), "{g}: no block runs");
        for b in blocks.iter().filter(|b| b.own) {
            assert!(
                b.text.contains("connbench"),
                "{g}, line {}: {OWN} block without connbench",
                b.line
            );
        }
    }
}

#[test]
fn shell_blocks_are_read_in_order_and_own_blocks_marked() {
    let md = "text\n```sh\na\nb\n```\n```\noutput\n```\n```sh\n# On your own infrastructure: x\nc\n```\n";
    assert_eq!(
        shell_blocks(md),
        [
            Block {
                line: 2,
                text: "a\nb\n".into(),
                own: false
            },
            Block {
                line: 9,
                text: "# On your own infrastructure: x\nc\n".into(),
                own: true
            },
        ]
    );
}

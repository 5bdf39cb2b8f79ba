//! pgbench's transaction logs (`-l` and its options): pgbench 15 and `connbench load` run
//! with the same flags on the same tables, each in a scratch directory of its own, and
//! their logs must read the same way: the same file names, the same columns and column
//! types per line, and counts that agree with the run's own report.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::{scratch, stderr, TempFile};
use crate::pgbench_cli::pgbench_db;

/// What one field of a log line is: a number, or a word (`failed`, `skipped`, ...).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Field {
    Int,
    Word(String),
}

/// A line's shape: its fields' kinds, in order.
type Shape = Vec<Field>;

fn shape(line: &str) -> Shape {
    line.split(' ')
        .map(|f| match f.parse::<u64>() {
            Ok(_) => Field::Int,
            Err(_) => Field::Word(f.to_string()),
        })
        .collect()
}

/// A run's logs: each file's name with the process id replaced by `PID`, and its lines.
struct Logs {
    files: Vec<(String, Vec<String>)>,
}

impl Logs {
    fn read(dir: &Path, prefix: &str) -> Logs {
        let mut files: Vec<(String, Vec<String>)> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let text = std::fs::read_to_string(e.path()).unwrap();
                (name, text.lines().map(str::to_string).collect())
            })
            .collect();
        files.sort();
        for (name, _) in &mut files {
            // PREFIX.PID or PREFIX.PID.N: the pid is all digits.
            let rest = name
                .strip_prefix(&format!("{prefix}."))
                .unwrap_or_else(|| panic!("{name:?} does not start with {prefix}."));
            let mut parts = rest.splitn(2, '.');
            let pid = parts.next().unwrap();
            assert!(
                !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()),
                "{name:?}"
            );
            *name = match parts.next() {
                Some(n) => format!("{prefix}.PID.{n}"),
                None => format!("{prefix}.PID"),
            };
        }
        Logs { files }
    }

    fn names(&self) -> Vec<&str> {
        self.files.iter().map(|(n, _)| n.as_str()).collect()
    }

    fn lines(&self) -> impl Iterator<Item = &str> {
        self.files.iter().flat_map(|(_, l)| l.iter().map(String::as_str))
    }

    fn shapes(&self) -> std::collections::BTreeSet<Shape> {
        self.lines().map(shape).collect()
    }
}

/// Runs `program` with `args` in `dir`.
fn run_in(dir: &Path, program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"))
}

/// The same flags through pgbench 15 and `connbench load --json`, each in a scratch
/// directory: both tools' logs, and connbench's report.
fn both(tag: &str, flags: &[&str], prefix: &str) -> (Logs, Logs, serde_json::Value) {
    let db = pgbench_db();
    let (pg_dir, cb_dir) = (
        scratch(&format!("log-pg-{tag}")),
        scratch(&format!("log-cb-{tag}")),
    );
    let mut args = vec!["-n"];
    args.extend_from_slice(flags);
    args.push(db);
    let o = run_in(&pg_dir, "pgbench", &args);
    assert!(o.status.success(), "pgbench {args:?}: {}", stderr(&o));
    let mut args = vec!["load", db, "--json"];
    args.extend_from_slice(flags);
    let o = run_in(&cb_dir, env!("CARGO_BIN_EXE_connbench"), &args);
    assert!(o.status.success(), "connbench {args:?}: {}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    (
        Logs::read(&pg_dir, prefix),
        Logs::read(&cb_dir, prefix),
        report["summary"].clone(),
    )
}

fn count(summary: &serde_json::Value, key: &str) -> usize {
    summary[key].as_u64().unwrap_or(0) as usize
}

fn ints(n: usize) -> Shape {
    vec![Field::Int; n]
}

#[test]
fn per_transaction_logs_match_pgbench_s_names_and_columns() {
    // Two threads: PREFIX.PID and PREFIX.PID.1; six numbers per line.
    let (pg, cb, summary) = both(
        "plain",
        &["-S", "-c", "2", "-j", "2", "-T", "1", "-l"],
        "pgbench_log",
    );
    assert_eq!(pg.names(), ["pgbench_log.PID", "pgbench_log.PID.1"]);
    assert_eq!(cb.names(), pg.names());
    assert_eq!(pg.shapes(), [ints(6)].into());
    assert_eq!(cb.shapes(), pg.shapes());
    let n = count(&summary, "transactions");
    assert!(n > 0);
    assert_eq!(cb.lines().count(), n, "one line per measured transaction");
    // Each client's transaction_no counts 1, 2, ... in its file; time_epoch is now.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    for (name, lines) in &cb.files {
        let mut next = std::collections::HashMap::new();
        for l in lines {
            let f: Vec<u64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
            let want = next.entry(f[0]).or_insert(1);
            assert_eq!(f[1], *want, "{name}: {l}");
            *want += 1;
            assert!(f[4] + 120 > now && f[4] <= now, "{name}: time_epoch of {l}");
            assert!(f[5] < 1_000_000, "{name}: time_us of {l}");
        }
    }

    // A prefix with a directory, a script of its own, -R (schedule_lag) and --max-tries
    // (retries): eight numbers.
    let script = TempFile::new("log-select1.sql", "SELECT 1;\n");
    let (pg, cb, summary) = both(
        "rate",
        &[
            "-f",
            script.path(),
            "-c",
            "2",
            "-T",
            "1",
            "-R",
            "200",
            "--max-tries",
            "3",
            "-l",
            "--log-prefix",
            "tx",
        ],
        "tx",
    );
    assert_eq!(pg.names(), ["tx.PID"]);
    assert_eq!(cb.names(), pg.names());
    assert_eq!(pg.shapes(), [ints(8)].into());
    assert_eq!(cb.shapes(), pg.shapes());
    assert_eq!(cb.lines().count(), count(&summary, "transactions"));
    // -R alone: seven; --max-tries alone: seven too.
    for (tag, extra) in [("lag", ["-R", "200"]), ("tries", ["--max-tries", "3"])] {
        let mut flags = vec!["-S", "-c", "2", "-T", "1", "-l"];
        flags.extend_from_slice(&extra);
        let (pg, cb, _) = both(tag, &flags, "pgbench_log");
        assert_eq!(pg.shapes(), [ints(7)].into(), "{extra:?}");
        assert_eq!(cb.shapes(), pg.shapes(), "{extra:?}");
    }
}

#[test]
fn sampled_logs_keep_about_their_fraction() {
    let (pg, cb, summary) = both(
        "sample",
        &[
            "-S",
            "-c",
            "2",
            "-j",
            "2",
            "-T",
            "2",
            "-l",
            "--sampling-rate",
            "0.5",
        ],
        "pgbench_log",
    );
    assert_eq!(cb.names(), pg.names());
    assert_eq!(cb.shapes(), pg.shapes());
    let (n, logged) = (count(&summary, "transactions"), cb.lines().count());
    // Thousands of transactions at 0.5: far inside 0.4 to 0.6 of them.
    assert!(n > 500, "{n} transactions");
    assert!(
        logged * 10 > n * 4 && logged * 10 < n * 6,
        "{logged} logged of {n} at 0.5"
    );
}

#[test]
fn aggregated_logs_have_pgbench_15_s_columns_and_add_up_to_the_run() {
    let (pg, cb, summary) = both(
        "agg",
        &[
            "-S",
            "-c",
            "2",
            "-j",
            "2",
            "-T",
            "2",
            "-l",
            "--aggregate-interval",
            "1",
        ],
        "pgbench_log",
    );
    assert_eq!(cb.names(), pg.names());
    assert_eq!(pg.shapes(), [ints(15)].into());
    assert_eq!(cb.shapes(), pg.shapes());
    let column = |logs: &Logs, i: usize| -> Vec<u64> {
        logs.lines()
            .map(|l| l.split(' ').nth(i).unwrap().parse().unwrap())
            .collect()
    };
    let n = count(&summary, "transactions") as u64;
    assert_eq!(column(&cb, 1).iter().sum::<u64>(), n, "num_transactions add up");
    // Per file, the intervals follow each other a second apart, and the run's 2 s fit
    // in 3 of them (the first starts at a whole second; a transaction in flight at the
    // end may end in a fourth on a busy machine).
    for (name, lines) in &cb.files {
        let starts: Vec<u64> = lines
            .iter()
            .map(|l| l.split(' ').next().unwrap().parse().unwrap())
            .collect();
        assert!((2..=4).contains(&starts.len()), "{name}: {lines:?}");
        assert!(starts.windows(2).all(|w| w[1] == w[0] + 1), "{name}: {starts:?}");
    }
    // min <= max, and the sum lies between count * min and count * max.
    for l in cb.lines() {
        let f: Vec<u64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
        if f[1] > 0 {
            assert!(f[4] <= f[5] && f[1] * f[4] <= f[2] && f[2] <= f[1] * f[5], "{l}");
        }
    }
}

#[test]
fn failures_are_logged_with_pgbench_s_words() {
    let db = pgbench_db();
    crate::pgbench_cli::psql(
        db,
        "CREATE TABLE IF NOT EXISTS cbt_log_retry (id int PRIMARY KEY, v bigint); \
         INSERT INTO cbt_log_retry VALUES (1, 0) ON CONFLICT DO NOTHING",
    );
    // Four clients updating one row under REPEATABLE READ: some fail with 40001.
    let script = TempFile::new(
        "log-retry.sql",
        "BEGIN ISOLATION LEVEL REPEATABLE READ;\nSELECT v FROM cbt_log_retry WHERE id = 1;\n\\sleep 1 ms\n\
         UPDATE cbt_log_retry SET v = v + 1 WHERE id = 1;\nEND;\n",
    );
    let (pg, cb, summary) = both(
        "fail",
        &[
            "-f",
            script.path(),
            "-c",
            "4",
            "-T",
            "2",
            "-l",
            "--failures-detailed",
        ],
        "pgbench_log",
    );
    let failed = count(&summary, "failed_transactions");
    assert!(failed > 0, "{summary:#}");
    let serialization = [
        Field::Int,
        Field::Int,
        Field::Word("serialization".into()),
        Field::Int,
        Field::Int,
        Field::Int,
    ];
    for logs in [&pg, &cb] {
        assert_eq!(
            logs.shapes(),
            [ints(6), serialization.to_vec()].into(),
            "{:?}",
            logs.names()
        );
    }
    let words = cb.lines().filter(|l| l.contains(" serialization ")).count();
    assert_eq!(words, failed);
    assert_eq!(cb.lines().count(), count(&summary, "transactions") + failed);
}

#[test]
fn warm_up_is_not_logged_and_bad_logs_are_refused_before_the_run() {
    let db = pgbench_db();
    let dir = scratch("log-warmup");
    let o = run_in(
        &dir,
        env!("CARGO_BIN_EXE_connbench"),
        &["load", db, "-S", "-T", "1", "--warmup", "1s", "-l", "--json"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let logs = Logs::read(&dir, "pgbench_log");
    assert_eq!(
        logs.lines().count(),
        count(&v["summary"], "transactions"),
        "only the measured transactions"
    );
    assert!(logs.lines().all(|l| l.split(' ').nth(1) != Some("0")));

    // A prefix in a directory that does not exist: refused, naming the file and why.
    let missing = dir.join("no/such/dir/x");
    let missing = missing.to_str().unwrap();
    for (args, want) in [
        (
            vec!["-l", "--log-prefix", missing, "-S", "-t", "1"],
            vec![missing, "No such file or directory"],
        ),
        (
            vec!["-l", "--aggregate-interval", "2", "-S", "-T", "3"],
            vec!["-T 3s", "multiple of 2 s"],
        ),
        (
            vec!["-l", "--aggregate-interval", "5", "-S", "-T", "2"],
            vec!["--aggregate-interval 5", "longer than the run"],
        ),
        (
            vec!["-l", "--aggregate-interval", "1", "--sampling-rate", "0.5"],
            vec!["--sampling-rate", "--aggregate-interval"],
        ),
    ] {
        let mut all = vec!["load", db];
        all.extend_from_slice(&args);
        let o = run_in(&dir, env!("CARGO_BIN_EXE_connbench"), &all);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        for w in want {
            assert!(stderr(&o).contains(w), "{args:?}: wanted {w:?} in {}", stderr(&o));
        }
    }
}

#[test]
fn skipped_transactions_are_logged_as_pgbench_logs_them() {
    // 4 ms transactions asked for at 1000 tps by one client: behind at once, so with
    // -L 10 what is already 10 ms late is skipped, and the log says `skipped`.
    let script = TempFile::new("log-skip.sql", "SELECT pg_sleep(0.004);\n");
    let (pg, cb, summary) = both(
        "skip",
        &[
            "-f",
            script.path(),
            "-c",
            "1",
            "-T",
            "1",
            "-R",
            "1000",
            "-L",
            "10",
            "-l",
        ],
        "pgbench_log",
    );
    let skipped = [
        Field::Int,
        Field::Int,
        Field::Word("skipped".into()),
        Field::Int,
        Field::Int,
        Field::Int,
        Field::Int,
    ];
    for logs in [&pg, &cb] {
        assert_eq!(
            logs.shapes(),
            [ints(7), skipped.to_vec()].into(),
            "{:?}",
            logs.names()
        );
    }
    let n = count(&summary, "skipped_transactions");
    assert!(n > 0, "{summary:#}");
    assert_eq!(cb.lines().filter(|l| l.contains(" skipped ")).count(), n);
    assert_eq!(cb.lines().count(), count(&summary, "transactions") + n);
}

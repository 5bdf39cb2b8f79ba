//! pgbench's script language, checked against pgbench itself: each script runs through
//! the installed `pgbench` (15) and through `connbench load` on the same sandbox, and
//! the two must both run or both refuse, print the same `debug()` lines (with the same
//! `--random-seed`, even the random functions' values agree: connbench draws from
//! pgbench's generator), and process the same transactions.
//!
//! A run-time error aborts the client in both (pgbench exits 2, connbench 1 with the
//! failing transaction counted by its cause); with --continue-on-error (pgbench 19's)
//! connbench counts an SQL error and goes on. Where connbench deliberately differs, the
//! test says so: a few mistakes pgbench only finds while running (a variable nothing
//! sets, unbalanced pipelines) connbench also warns of before the run.

use std::process::{Command, Output};

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common::{connbench, conninfo, stderr, stdout, TempFile};

/// A script file of its own: the tests run in parallel, and TempFile's path is its tag
/// and the process id.
fn script_file(text: &str) -> TempFile {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    TempFile::new(
        &format!("pgbench-script-{}.sql", NEXT.fetch_add(1, Ordering::Relaxed)),
        text,
    )
}

/// What one tool did with a script.
#[derive(Debug)]
struct Ran {
    code: Option<i32>,
    stderr: String,
    processed: u64,
    failed: u64,
    /// The `debug(...)` lines, sorted (clients interleave).
    debug: Vec<String>,
}

fn debug_lines(err: &str) -> Vec<String> {
    let mut d: Vec<String> = err
        .lines()
        .filter(|l| l.starts_with("debug("))
        .map(str::to_string)
        .collect();
    d.sort();
    d
}

fn pgbench(script: &TempFile, args: &[&str]) -> Ran {
    let o: Output = Command::new("pgbench")
        .args(["-n", "-f", script.path()])
        .args(args)
        .arg(conninfo("unix"))
        .output()
        .expect("pgbench (15) is installed");
    let out = stdout(&o);
    let number = |prefix: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .and_then(|r| r.split(['/', ' ']).next()?.parse().ok())
            .unwrap_or(0)
    };
    Ran {
        code: o.status.code(),
        stderr: stderr(&o),
        processed: number("number of transactions actually processed: "),
        failed: number("number of failed transactions: "),
        debug: debug_lines(&stderr(&o)),
    }
}

fn load(script: &TempFile, args: &[&str]) -> Ran {
    let mut all = vec!["load", "-f", script.path(), "--json"];
    all.extend_from_slice(args);
    let target = conninfo("unix");
    all.push(&target);
    let o = connbench(&all);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
    let s = &v["summary"];
    Ran {
        code: o.status.code(),
        stderr: stderr(&o),
        processed: s["transactions"].as_u64().unwrap_or(0),
        failed: s["failed_transactions"].as_u64().unwrap_or(0),
        debug: debug_lines(&stderr(&o)),
    }
}

/// Runs `text` through both with `args`; both must succeed with the same debug lines
/// and counts. Returns connbench's run.
fn agree(text: &str, args: &[&str]) -> Ran {
    let f = script_file(text);
    let (p, c) = (pgbench(&f, args), load(&f, args));
    assert_eq!(p.code, Some(0), "pgbench refused {text:?} {args:?}: {}", p.stderr);
    assert_eq!(
        c.code,
        Some(0),
        "connbench refused {text:?} {args:?}: {}",
        c.stderr
    );
    assert_eq!(c.debug, p.debug, "debug() output of {text:?} {args:?}");
    assert_eq!(
        (c.processed, c.failed),
        (p.processed, p.failed),
        "{text:?} {args:?}"
    );
    c
}

/// Both refuse `text` before running anything: pgbench exits 1, connbench 2 (a set-up
/// error), and connbench's message contains `want` and the line.
fn both_refuse(text: &str, args: &[&str], want: &str) {
    let f = script_file(text);
    let (p, c) = (pgbench(&f, args), load(&f, args));
    assert_ne!(p.code, Some(0), "pgbench ran {text:?}");
    assert_eq!(p.processed, 0, "pgbench ran {text:?}: {}", p.stderr);
    assert_eq!(c.code, Some(2), "connbench did not refuse {text:?}: {}", c.stderr);
    assert!(c.stderr.contains(want), "{text:?}: want {want:?} in {}", c.stderr);
    assert!(c.stderr.contains("line "), "{text:?}: no line in {}", c.stderr);
    assert!(c.debug.is_empty(), "connbench ran part of {text:?}");
}

#[test]
fn values_operators_and_every_function_print_what_pgbench_prints() {
    let expressions = [
        "1 + 2 * 3 - 4 / 3 % 2",
        "1.0 / 3",
        "true",
        "false AND NULL",
        "NULL OR true",
        "NULL",
        ":one * 1e15",
        "123456789012345678.0",
        "1e-5",
        "1 < 2",
        "2 <= 2",
        "3 > 2",
        "2 >= 3",
        "1 = 1.0",
        "1 <> 2",
        "1 != 1",
        "NOT true",
        "true AND false",
        "true OR false",
        "1 IS NULL",
        "NULL ISNULL",
        "1 NOTNULL",
        "true IS TRUE",
        "1 IS NOT TRUE",
        "NULL IS NOT NULL",
        "5 & 3",
        "5 | 3",
        "5 # 3",
        "~5",
        "~1 + 2",
        "1 << 10",
        "-1024 >> 3",
        "CASE WHEN 1 > 2 THEN 1 WHEN 2 > 1 THEN 2.5 ELSE 0 END",
        "CASE WHEN false THEN 1 END",
        "abs(-5)",
        "abs(-2.5)",
        "double(3)",
        "exp(1)",
        "ln(10)",
        "sqrt(2)",
        "pi()",
        "greatest(1, 3.5, 2)",
        "least(4, 2, 8)",
        "int(2.5)",
        "int(3.5)",
        "int(-7.7)",
        "mod(7, 3)",
        "-7 % 3",
        "5.5 % 2",
        "pow(2, 10)",
        "power(2, 0.5)",
        "hash(5, 42)",
        "hash_murmur2(-7, 0)",
        "hash_fnv1a(5, 42)",
        "hash_fnv1a(123456789, -1)",
        "permute(3, 10, 42)",
        "permute(0, 1000000, 7)",
        "permute(-5, 17, 1)",
        "permute(12345, 9223372036854775807, 99)",
        "hash(1000)",
        "hash_fnv1a(1000)",
        "permute(7, 100)",
        ":default_seed",
        ":random_seed",
        "random(1, 1000000)",
        "random_exponential(1, 1000, 2.5)",
        "random_gaussian(1, 1000, 3)",
        "random_zipfian(1, 1000, 1.5)",
        "-9223372036854775808",
        "9223372036854775807",
        "sqrt(-1)",
        "ln(0)",
        "1.0 / 0",
        ":client_id",
        ":scale",
        "debug(1) > debug(2)",
    ];
    let script: String = std::iter::once("\\set one 1.0\n".to_string())
        .chain(expressions.iter().map(|e| format!("\\set v debug({e})\n")))
        .collect();
    let script = script.as_str();
    let c = agree(script, &["-t", "3", "--random-seed", "5"]);
    assert_eq!(c.debug.len(), 3 * (expressions.len() + 2), "{:?}", c.debug);
    // Several clients: each has its own generator and all share :default_seed.
    agree(
        "\\set r debug(random(1, 1000000))\n\\set s debug(:default_seed)\n\\set t debug(hash(:client_id))\n",
        &["-t", "4", "-c", "3", "--random-seed", "77"],
    );
}

#[test]
fn conditionals_branch_and_nest_as_pgbench() {
    let script = r"\set x random(0, 3)
\if :x = 0
\set a debug(0)
\elif :x = 1
\set a debug(1)
\if :x * 2 = 2
\set b debug(11)
\else
\set b debug(12)
\endif
\elif debug(:x) = 2
\set a debug(2)
\else
\set a debug(3)
\if false
\set never debug(-1)
\elif NULL
\set never debug(-2)
\endif
\endif
\if 0.0
\set z debug(-3)
\elif :x IS NOT NULL
SELECT :x AS x;
\endif
";
    let c = agree(script, &["-t", "40", "--random-seed", "11"]);
    assert!(c.debug.iter().any(|l| l.ends_with("int 3")), "{:?}", c.debug);
}

#[test]
fn gset_aset_and_compound_commands_store_columns() {
    let script = r"SELECT 1 AS a, 2.5 AS b, NULL AS c, true AS d, 'txt' AS e \gset p_
\set x debug(:p_a)
\set x debug(:p_b)
\set y debug(:p_d)
SELECT ':p_e' = 'txt' AS ok, ':p_c' = '' AS empty \gset
\set z debug(:ok)
\set z debug(:empty)
SELECT 10 AS u \; SELECT 20 AS v \gset
\set w debug(:v)
SELECT 1 AS s \; SELECT 2 AS s WHERE false \; SELECT 3 AS t \aset
\set q debug(:s)
\set q debug(:t)
SELECT g AS last FROM generate_series(1, 3) AS g \aset
\set l debug(:last)
SELECT 4 AS fin;
\gset
\set f debug(:fin)
";
    for mode in ["simple", "extended", "prepared"] {
        if mode == "simple" {
            agree(script, &["-t", "2", "-M", mode]);
        } else {
            // A compound is several statements, which the extended protocol refuses,
            // and a variable inside quotes becomes a `$n` there that no parameter
            // fills (in pgbench too): keep the rest.
            let single: String = script
                .lines()
                .filter(|l| {
                    !["\\;", "(:s)", "(:t)", "(:v)", "':p_", "(:ok)", "(:empty)"]
                        .iter()
                        .any(|x| l.contains(x))
                })
                .map(|l| format!("{l}\n"))
                .collect();
            agree(&single, &["-t", "2", "-M", mode]);
        }
    }
}

#[test]
fn gset_without_exactly_one_row_aborts_the_client() {
    for text in [
        "SELECT 1 AS a FROM generate_series(1, 2) \\gset\n",
        "SELECT 1 AS a WHERE false \\gset\n",
        "CREATE TEMP TABLE IF NOT EXISTS t_gset (x int) \\gset\n",
    ] {
        let f = script_file(text);
        let (p, c) = (pgbench(&f, &["-t", "3"]), load(&f, &["-t", "3"]));
        // Both abort the client at the first, even with --continue-on-error (a
        // meta-command's error, as pgbench 19 says).
        assert_eq!((p.code, p.processed), (Some(2), 0), "{}", p.stderr);
        assert!(p.stderr.contains("expected one row"), "{}", p.stderr);
        assert_eq!(
            (c.code, c.processed, c.failed),
            (Some(1), 0, 1),
            "{text}: {}",
            c.stderr
        );
        let c = load(&f, &["-t", "3", "--continue-on-error"]);
        assert_eq!((c.code, c.failed), (Some(1), 1), "{text}: {}", c.stderr);
        assert!(c.stderr.contains("\\gset expected one row, got"), "{}", c.stderr);
    }
}

#[test]
fn sleep_units_variables_and_defines() {
    let c = agree(
        "\\sleep 2ms\n\\sleep 1 us\n\\sleep 0\n\\set n 3\n\\sleep :n ms\n\\sleep :d us\n\\set v debug(:d * 2) + debug(:k)\nSELECT :d + :k;\n",
        &["-t", "3", "-D", "d=7", "-D", "k=-4"],
    );
    assert_eq!(c.processed, 3);
    // -D scale=N wins over the scale connbench reads, as in pgbench.
    agree("\\set s debug(:scale)\n", &["-t", "1", "-D", "scale=42"]);
}

#[test]
fn shell_and_setshell_run_through_sh() {
    agree(
        "\\set a 7\n\\setshell v echo :a\n\\set x debug(:v + 1)\n\\shell true\n\\setshell w printf '  -12  '\n\\set y debug(:w)\n",
        &["-t", "2"],
    );
    for (text, want) in [
        ("\\setshell v echo abc\n", "must return an integer"),
        ("\\shell false\n", "\\shell"),
        ("\\setshell v true\n", "could not read result"),
    ] {
        let f = script_file(text);
        let (p, c) = (pgbench(&f, &["-t", "2"]), load(&f, &["-t", "2"]));
        assert_eq!((p.code, p.processed), (Some(2), 0), "{text}: {}", p.stderr);
        assert_eq!(
            (c.code, c.processed, c.failed),
            (Some(1), 0, 1),
            "{text}: {}",
            c.stderr
        );
        assert!(c.stderr.contains(want), "{text}: {}", c.stderr);
    }
}

#[test]
fn pipelines_run_in_extended_and_prepared_modes_and_abort_in_simple() {
    let script =
        "\\startpipeline\nSELECT 1;\nSELECT 2;\nSELECT :client_id;\n\\endpipeline\n\\set x debug(1)\n";
    for mode in ["extended", "prepared"] {
        let c = agree(script, &["-t", "5", "-M", mode]);
        assert_eq!(c.processed, 5);
    }
    // A failing statement fails the pipeline's transaction and aborts the client, as in
    // pgbench; with --continue-on-error each transaction fails and the client goes on.
    let f = script_file("\\startpipeline\nSELECT 1;\nSELECT 1/0;\nSELECT 2;\n\\endpipeline\n");
    let (p, c) = (
        pgbench(&f, &["-t", "3", "-M", "extended"]),
        load(&f, &["-t", "3", "-M", "extended"]),
    );
    assert_eq!((p.code, p.processed), (Some(2), 0), "{}", p.stderr);
    assert_eq!((c.code, c.failed), (Some(1), 1), "{}", c.stderr);
    assert!(c.stderr.contains("division by zero"), "{}", c.stderr);
    let c = load(&f, &["-t", "3", "-M", "extended", "--continue-on-error"]);
    assert_eq!((c.code, c.failed), (Some(1), 3), "{}", c.stderr);
    // Simple mode: both abort the client at \startpipeline (connbench warns first).
    let f = script_file(script);
    let (p, c) = (pgbench(&f, &["-t", "1"]), load(&f, &["-t", "1"]));
    assert_eq!((p.code, p.processed), (Some(2), 0), "{}", p.stderr);
    assert!(p
        .stderr
        .contains("cannot use pipeline mode with the simple query protocol"));
    assert_eq!((c.code, c.processed, c.failed), (Some(1), 0, 1), "{}", c.stderr);
    for want in [
        "warning: ",
        "line 1: \\startpipeline: cannot use pipeline mode with the simple query protocol",
        "aborted in command 1",
        "run with -M extended or -M prepared",
    ] {
        assert!(c.stderr.contains(want), "{want}: {}", c.stderr);
    }
    // \if blocks inside a pipeline run as in pgbench.
    let branches = "\\startpipeline\n\\if :client_id = 0\nSELECT 1;\n\\else\nSELECT 2;\n\\endif\n\
                    SELECT 3;\n\\endpipeline\n\\set x debug(:client_id)\n";
    let c = agree(branches, &["-t", "4", "-c", "2", "-M", "extended"]);
    assert_eq!(c.processed, 8);
    // \syncpipeline (pgbench 17's) works in connbench.
    let f = script_file("\\startpipeline\nSELECT 1;\n\\syncpipeline\nSELECT 2;\n\\endpipeline\n");
    let c = load(&f, &["-t", "3", "-M", "extended"]);
    assert_eq!((c.code, c.processed), (Some(0), 3), "{}", c.stderr);
}

#[test]
fn run_time_errors_abort_the_client_as_in_pgbench() {
    for (text, want) in [
        ("\\set x 1 / 0\n", "division by zero"),
        ("\\set x 5 % 0\n", "division by zero"),
        ("\\set x 9223372036854775807 + 1\n", "bigint add out of range"),
        ("\\set x -9223372036854775807 - 2\n", "bigint sub out of range"),
        ("\\set x 4611686018427387904 * 2\n", "bigint mul out of range"),
        (
            "\\set x (-9223372036854775807 - 1) / -1\n",
            "bigint div out of range",
        ),
        ("\\set x int(1e30)\n", "double to int overflow"),
        ("\\set x true + 1\n", "cannot coerce boolean to int"),
        ("\\set x random(5, 1)\n", "empty range given to random"),
        (
            "\\set x random_gaussian(1, 10, 1.5)\n",
            "gaussian parameter must be at least",
        ),
        (
            "\\set x permute(1, 0, 1)\n",
            "permute size parameter must be greater than zero",
        ),
        ("\\set x debug(:y)\n\\set y 1\n", "undefined variable \"y\""),
        ("SELECT 1 \\gset\n", "\"?column?\": not a valid variable name"),
    ] {
        let f = script_file(text);
        let (p, c) = (pgbench(&f, &["-t", "3"]), load(&f, &["-t", "3"]));
        assert_eq!((p.code, p.processed), (Some(2), 0), "{text}: {}", p.stderr);
        // pgbench's words, where connbench adds the name or the fix.
        let pgbench_words = match want {
            w if w.contains("not a valid variable name") => "invalid variable name: \"?column?\"",
            w => w.split(" \"").next().unwrap(),
        };
        assert!(p.stderr.contains(pgbench_words), "{text}: {}", p.stderr);
        // connbench aborts the client too, the transaction counted by its cause.
        assert_eq!(
            (c.code, c.processed, c.failed),
            (Some(1), 0, 1),
            "{text}: {}",
            c.stderr
        );
        assert!(c.stderr.contains(want), "{text}: want {want:?} in {}", c.stderr);
        assert!(c.stderr.contains("client 0 aborted"), "{text}: {}", c.stderr);
    }
}

/// A script that fails in one client of four, at its 5th transaction of 20 (division
/// by zero in SQL): pgbench aborts that client and the three others run on; connbench
/// does the same by default, processing the same transactions, and with
/// --continue-on-error (pgbench 19's) it counts the failure and the client goes on.
#[test]
fn an_sql_error_aborts_its_client_unless_continue_on_error() {
    let f =
        script_file("\\set n :n + 1\nSELECT 1 / CASE WHEN :client_id = 0 AND :n = 5 THEN 0 ELSE 1 END;\n");
    let args = ["-c", "4", "-t", "20", "-D", "n=0"];
    let (p, c) = (pgbench(&f, &args), load(&f, &args));
    // 3 clients x 20 + client 0's first 4.
    assert_eq!((p.code, p.processed), (Some(2), 64), "{}", p.stderr);
    assert!(p.stderr.contains("client 0 script 0 aborted"), "{}", p.stderr);
    assert_eq!((c.code, c.processed, c.failed), (Some(1), 64, 1), "{}", c.stderr);
    assert!(c.stderr.contains("client 0 aborted"), "{}", c.stderr);
    assert!(c.stderr.contains("division by zero (22012)"), "{}", c.stderr);
    assert!(c.stderr.contains("1 client(s) aborted"), "{}", c.stderr);

    let mut on = args.to_vec();
    on.push("--continue-on-error");
    let c = load(&f, &on);
    assert_eq!((c.code, c.processed, c.failed), (Some(0), 79, 1), "{}", c.stderr);
    assert!(!c.stderr.contains("aborted"), "{}", c.stderr);
}

#[test]
fn a_script_that_leaves_a_transaction_open_aborts_its_client() {
    let f = script_file("BEGIN;\nSELECT 1;\n");
    let (p, c) = (pgbench(&f, &["-t", "3"]), load(&f, &["-t", "3"]));
    let why = "client 0 aborted: end of script reached without completing the last transaction";
    assert_eq!((p.code, p.processed), (Some(2), 1), "{}", p.stderr);
    assert!(p.stderr.contains(why), "{}", p.stderr);
    assert_eq!((c.code, c.processed, c.failed), (Some(1), 1, 0), "{}", c.stderr);
    assert!(c.stderr.contains(why), "{}", c.stderr);
    // Closed properly, the same script runs.
    agree("BEGIN;\nSELECT 1;\nEND;\n", &["-t", "3"]);
}

#[test]
fn scripts_pgbench_refuses_are_refused_before_anything_runs() {
    for (text, want) in [
        ("\\set x 1 +\n", "the expression ends"),
        ("\\set x foo(1)\n", "unknown function \"foo\""),
        ("\\set x random(1)\n", "random() takes 2 arguments"),
        ("\\set x least()\n", "least() takes at least 1 argument"),
        ("\\set x pi(1)\n", "pi() takes no arguments"),
        ("\\set x 1 < 2 < 3\n", "comparisons do not chain"),
        ("\\set x 9223372036854775808\n", "bigint constant overflow"),
        ("\\set x 1 $ 2\n", "unexpected character"),
        ("\\set\n", "\\set needs a variable"),
        ("\\set x\n", "needs an expression"),
        ("\\sleep\n", "missing argument"),
        ("\\sleep 1 hours\n", "unrecognized time unit"),
        ("\\sleep abc\n", "invalid sleep time"),
        ("\\sleep 1 2 3\n", "too many arguments"),
        ("\\foo\n", "invalid command \\foo"),
        ("\\if true\nSELECT 1;\n", "\\if without matching \\endif"),
        ("\\endif\n", "\\endif without matching \\if"),
        ("\\else\n", "\\else without matching \\if"),
        ("\\elif true\n\\endif\n", "\\elif without matching \\if"),
        ("\\if true\n\\else\n\\else\n\\endif\n", "\\else after \\else"),
        (
            "\\if true\n\\else\n\\elif false\n\\endif\n",
            "\\elif after \\else",
        ),
        ("\\if\n\\endif\n", "\\if needs a condition"),
        ("\\gset\n", "\\gset must follow an SQL command"),
        ("SELECT 1 \\gset a b\n", "too many arguments"),
        ("\\shell\n", "\\shell needs a command"),
        ("\\setshell v\n", "\\setshell needs a variable and a command"),
    ] {
        both_refuse(text, &["-t", "1"], want);
    }
    // pgbench finds these only while running and aborts the client; connbench runs
    // them too and fails there, having said before the run what will fail.
    for (text, warning, failure) in [
        (
            "\\set x :nope + 1\n",
            Some("variable :nope is never set"),
            "undefined variable \"nope\"",
        ),
        (
            "\\set 1x 1\n",
            Some("invalid variable name"),
            "invalid variable name",
        ),
        (
            "\\startpipeline\nSELECT 1;\n",
            Some("ends with the pipeline open"),
            "end of script reached with pipeline open",
        ),
        (
            "\\endpipeline\n",
            Some("not in pipeline mode"),
            "not in pipeline mode",
        ),
        (
            "\\set x least(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)\n",
            None,
            "too many function arguments, maximum is 16",
        ),
    ] {
        let f = script_file(text);
        let (p, c) = (
            pgbench(&f, &["-t", "1", "-M", "extended"]),
            load(&f, &["-t", "1", "-M", "extended"]),
        );
        assert_eq!((p.code, p.processed), (Some(2), 0), "{text}: {}", p.stderr);
        assert_eq!(
            (c.code, c.processed, c.failed),
            (Some(1), 0, 1),
            "{text}: {}",
            c.stderr
        );
        if let Some(w) = warning {
            let line = c
                .stderr
                .lines()
                .find(|l| l.starts_with("warning: "))
                .unwrap_or("");
            assert!(line.contains(w) && line.contains("line "), "{text}: {}", c.stderr);
        }
        assert!(c.stderr.contains(failure), "{text}: {}", c.stderr);
    }
}

/// An expression nested 10,000 deep, or 300,000 unary minus signs: pgbench refuses the
/// file ("memory exhausted in command \"set\""), and so does connbench, in one line
/// naming the file, the line and its limit, exit 2 (once a stack overflow, exit 134).
/// Below the limit, deep expressions run in both alike.
#[test]
fn expressions_nested_past_the_limit_are_refused_in_one_line() {
    let deep = format!("\\set x {}1{}\n", "(".repeat(10_000), ")".repeat(10_000));
    let minus = format!("\\set x {}1\n", "-".repeat(300_000));
    for text in [deep, minus] {
        let f = script_file(&text);
        let (p, c) = (pgbench(&f, &["-t", "1"]), load(&f, &["-t", "1"]));
        assert_eq!(p.code, Some(1), "{}", p.stderr);
        assert!(
            p.stderr.contains("memory exhausted in command \"set\""),
            "{}",
            p.stderr
        );
        assert_eq!(c.code, Some(2), "{}", c.stderr);
        let lines: Vec<&str> = c.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "one line: {}", c.stderr);
        let want = format!(
            "error: {} line 1: \\set: the expression nests deeper than 256 levels",
            f.path()
        );
        assert!(lines[0].starts_with(&want), "{}", lines[0]);
        assert!(lines[0].len() < 400, "{}", lines[0]);
    }
    // 200 parentheses and a tree 250 deep (evaluated on a client's thread) run as in
    // pgbench.
    agree(
        &format!("\\set x {}debug(7){}\n", "(".repeat(200), ")".repeat(200)),
        &["-t", "1"],
    );
    agree(&format!("\\set x {}debug(7)\n", "- ".repeat(250)), &["-t", "2"]);
}

/// A pgbench client's scripts share its variables: what one script sets, another reads.
/// Script 0 counts its own runs in :n, script 1 prints it. The order of the two differs
/// between the tools (each draws it from its own generator), so the test checks what
/// sharing implies in both: script 1 prints the runs of script 0 so far, so its values
/// never go down, reach above 0, and stay within script 0's runs.
#[test]
fn a_client_s_scripts_share_its_variables() {
    let (count, print) = (
        script_file("\\set n :n + 1\n"),
        script_file("\\set p debug(:n)\n"),
    );
    let args = ["-c", "1", "-t", "40", "--random-seed", "7", "-D", "n=0"];
    let p = Command::new("pgbench")
        .args(["-n", "-f", count.path(), "-f", print.path()])
        .args(args)
        .arg(conninfo("unix"))
        .output()
        .unwrap();
    let mut all = vec!["load", "-f", count.path(), "-f", print.path()];
    all.extend_from_slice(&args);
    let target = conninfo("unix");
    all.push(&target);
    let c = connbench(&all);
    for (tool, o) in [("pgbench", &p), ("connbench", &c)] {
        assert!(o.status.success(), "{tool}: {}", stderr(o));
        // In run order: "debug(script=1,command=1): int 3".
        let printed: Vec<i64> = stderr(o)
            .lines()
            .filter_map(|l| l.strip_prefix("debug(script=1,command=1): int "))
            .map(|v| v.parse().unwrap())
            .collect();
        assert!(!printed.is_empty(), "{tool}: script 1 never ran: {}", stderr(o));
        let runs_of_0 = 40 - printed.len() as i64;
        assert!(printed.windows(2).all(|w| w[0] <= w[1]), "{tool}: {printed:?}");
        assert!(
            printed.iter().any(|&v| v > 0) && printed.iter().all(|&v| v <= runs_of_0),
            "{tool}: {printed:?} with {runs_of_0} runs of script 0"
        );
    }
}

//! The README's commands stay true. Every `connbench` command line in its code blocks
//! (and in the other documents', docs/*.md and docs/guide/*.md) is split as a shell
//! splits it and must parse
//! as connbench's own command line, so a renamed flag fails here; and the README's
//! sandbox commands, which need nothing but this machine, are run as written and must
//! succeed and print what the README shows. Commands against the reader's own database
//! (`app`, `/var/run/postgresql`) are checked for parsing only; the tests of their
//! subjects (pgbench_cli, suites, report) run the same commands on the sandbox.

use clap::Parser;

use crate::common::{connbench, stderr, stdout};

/// The `connbench ...` command lines in the fenced code blocks of `text`, with their
/// continuation lines joined, comments cut and `cmd && connbench ...` taken apart.
fn command_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    // None outside a block; Some(true) in a block of commands (```sh), Some(false) in one
    // of output, where only `$ ` lines are commands.
    let mut block: Option<bool> = None;
    let mut pending = String::new();
    for line in text.lines() {
        if let Some(lang) = line.trim_start().strip_prefix("```") {
            block = match block {
                Some(_) => None,
                None => Some(matches!(lang.trim(), "sh" | "bash" | "console" | "shell")),
            };
            continue;
        }
        let line = match block {
            None => continue,
            Some(true) => line,
            Some(false) => match line.strip_prefix("$ ") {
                Some(l) => l,
                None if !pending.is_empty() => line,
                None => continue,
            },
        };
        let line = line.strip_prefix("$ ").unwrap_or(line);
        let (line, joined) = match line.trim_end().strip_suffix('\\') {
            Some(l) => (l, true),
            None => (line, false),
        };
        pending.push_str(line);
        pending.push(' ');
        if joined {
            continue;
        }
        let whole = std::mem::take(&mut pending);
        // A comment starts at ` #` outside quotes; the README's are after two spaces.
        let whole = match whole.find("  #") {
            Some(i) => &whole[..i],
            None => &whole,
        };
        // What the shell does with the output is not connbench's command line.
        let whole = whole.split(" > ").next().unwrap_or(whole);
        let whole = whole.split(" 2> ").next().unwrap_or(whole);
        let whole = whole.split(" | ").next().unwrap_or(whole);
        for part in whole.split("&&") {
            let part = part.trim().trim_end_matches('&').trim();
            if part.starts_with("connbench ") {
                out.push(part.to_string());
            }
        }
    }
    out
}

fn doc(path: &str) -> String {
    std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn every_connbench_command_in_the_readme_and_guides_parses() {
    let mut files = vec!["README.md".to_string()];
    for folder in ["docs", "docs/guide"] {
        let dir = format!("{}/{folder}", env!("CARGO_MANIFEST_DIR"));
        for e in std::fs::read_dir(dir).unwrap() {
            let name = e.unwrap().file_name().into_string().unwrap();
            if name.ends_with(".md") {
                files.push(format!("{folder}/{name}"));
            }
        }
    }
    let mut seen = 0;
    let mut wrong = Vec::new();
    for file in &files {
        for line in command_lines(&doc(file)) {
            // `...` stands for arguments left out: such a line is an outline.
            if line.split_whitespace().any(|w| w == "...") {
                continue;
            }
            let words = shlex::split(&line).unwrap_or_else(|| panic!("{file}: cannot split {line:?}"));
            if let Err(e) = connbench::cli::Cli::try_parse_from(&words) {
                // --help and --version end parsing on purpose.
                if !matches!(
                    e.kind(),
                    clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
                ) {
                    wrong.push(format!("{file}: `{line}` does not parse:\n{}", e.render()));
                }
            }
            seen += 1;
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The README alone has nine; a parser that found none would pass vacuously.
    assert!(seen >= 20, "only {seen} command lines found in {files:?}");
}

/// The tour's sandbox commands, as written, print what the README shows of them.
#[test]
fn the_readme_tour_runs_on_the_sandbox() {
    let readme = doc("README.md");
    let lines = command_lines(&readme);
    for (line, shows) in [
        (
            "connbench connect --sandbox unix tcp tls pgbouncer_unix -n 200",
            vec!["total connect time, relative to unix", "200 samples"],
        ),
        (
            "connbench load --sandbox -c 8 -j 2 -T 5 --warmup 1s",
            vec![
                "8 clients on 2 threads, 5 s, after 1 s warm-up",
                "client CPU",
                "server CPU",
            ],
        ),
    ] {
        assert!(
            lines.iter().any(|l| l == line),
            "the README no longer has `{line}`: {lines:?}"
        );
        for s in &shows {
            assert!(readme.contains(s), "the README does not show {s:?}");
        }
        let words = shlex::split(line).unwrap();
        let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
        let o = connbench(&args);
        assert!(o.status.success(), "`{line}`: {}", stderr(&o));
        for s in shows {
            assert!(
                stdout(&o).contains(s),
                "`{line}` did not print {s:?}:\n{}",
                stdout(&o)
            );
        }
    }
}

//! What an installation ships beside the binary, tested as a user meets it: the bash
//! completion script run by a real bash, the manual pages rendered by man (or groff), the
//! zsh and fish scripts, and `--version`'s commit, with the build script's own logic
//! (the commit of a checkout, `-dirty`, the fallback without git) tested on scratch
//! repositories.

use std::path::Path;
use std::process::{Command, Stdio};

use clap::CommandFactory;

use crate::common::{connbench, scratch, stderr, stdout};

/// The build script itself, so its commit and date logic is tested here, not copied.
#[path = "../../build.rs"]
#[allow(dead_code)]
mod build_script;

/// Every command and subcommand users can type, as `["runs", "list"]` paths.
fn command_paths() -> Vec<Vec<String>> {
    fn walk(cmd: &clap::Command, prefix: &[String], out: &mut Vec<Vec<String>>) {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            let mut path = prefix.to_vec();
            path.push(sub.get_name().to_string());
            walk(sub, &path, out);
            out.push(path);
        }
    }
    let mut out = Vec::new();
    walk(&connbench::cli::Cli::command(), &[], &mut out);
    out
}

/// Completes the words of `line` (the last one being typed) with the bash script
/// `connbench completions bash` prints, sourced into a real bash and called the way
/// bash's `complete -F` calls it: COMP_WORDS, COMP_CWORD and the arguments (command,
/// word, previous word).
fn bash_complete(line: &[&str]) -> Vec<String> {
    let script = r#"
        source <("$CB" completions bash) || exit 3
        spec=$(complete -p connbench) || exit 4
        fn=$(sed -E 's/.*-F ([^ ]+).*/\1/' <<<"$spec")
        read -r -a COMP_WORDS <<<"$WORDS"
        [ "${WORDS: -1}" = " " ] && COMP_WORDS+=("")
        COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
        COMP_LINE="$WORDS"; COMP_POINT=${#COMP_LINE}
        "$fn" connbench "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
        printf '%s\n' "${COMPREPLY[@]}"
    "#;
    let o = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", script])
        .env("CB", env!("CARGO_BIN_EXE_connbench"))
        .env("WORDS", line.join(" "))
        .output()
        .expect("run bash");
    assert!(o.status.success(), "bash: {:?}\n{}", o.status, stderr(&o));
    stdout(&o).lines().map(str::to_string).collect()
}

#[test]
fn bash_completes_commands_subcommands_and_flags() {
    assert_eq!(bash_complete(&["connbench", "lo"]), ["load"]);
    assert_eq!(bash_complete(&["connbench", "load", "--pool-s"]), ["--pool-size"]);
    assert!(bash_complete(&["connbench", "kubernetes", ""]).contains(&"job".to_string()));
    let shells = bash_complete(&["connbench", "completions", ""]);
    for s in ["bash", "zsh", "fish"] {
        assert!(shells.contains(&s.to_string()), "{shells:?}");
    }
    // Every top-level command is offered after `connbench `.
    let all = bash_complete(&["connbench", ""]);
    for path in command_paths().iter().filter(|p| p.len() == 1) {
        assert!(all.contains(&path[0]), "{} not offered: {all:?}", path[0]);
    }
}

#[test]
fn zsh_and_fish_scripts_name_every_command() {
    for shell in ["zsh", "fish"] {
        let o = connbench(&["completions", shell]);
        assert!(o.status.success(), "{}", stderr(&o));
        let script = stdout(&o);
        assert!(script.len() > 1000, "{shell}: {script}");
        for path in command_paths() {
            let name = path.last().unwrap();
            let named = match shell {
                "zsh" => script.contains(&format!("'{name}:")),
                _ => script.contains(&format!("-a \"{name}\"")),
            };
            assert!(named, "{shell} script does not name {path:?}");
        }
        // When the shell is installed, it must parse its script.
        if let Ok(mut child) = Command::new(shell)
            .arg("-n")
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
        {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{shell} -n: {}", stderr(&out));
        }
    }
}

/// `roff` rendered as man shows it: by `man -l -`, else by groff, else None (neither is
/// installed). Asserts that the renderer accepted it without a warning.
fn render_man(roff: &[u8]) -> Option<String> {
    let renderers: [(&str, &[&str]); 2] = [
        ("man", &["-l", "-"]),
        // -k: through preconv, as man does, for the UTF-8 (±, µ) in the help.
        ("groff", &["-k", "-man", "-Tutf8", "-ww"]),
    ];
    for (program, args) in renderers {
        let Ok(mut child) = Command::new(program)
            .args(args)
            .env("MANWIDTH", "100")
            .env("MANPAGER", "cat")
            .env("PAGER", "cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
        else {
            continue;
        };
        use std::io::Write;
        child.stdin.take().unwrap().write_all(roff).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{program}: {}", stderr(&out));
        assert!(out.stderr.is_empty(), "{program} warns: {}", stderr(&out));
        return Some(stdout(&out));
    }
    None
}

#[test]
fn the_man_page_renders_and_lists_every_command() {
    let o = connbench(&["man"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let roff = stdout(&o);
    assert!(roff.contains(".TH CONNBENCH 1 "), "{roff}");
    for path in command_paths().iter().filter(|p| p.len() == 1) {
        assert!(
            roff.contains(&format!("connbench\\-{}(1)", path[0])),
            "{path:?} missing"
        );
    }
    assert!(
        roff.contains("Exit codes:"),
        "the exit codes are part of the page"
    );
    if let Some(text) = render_man(&o.stdout) {
        for needle in [
            "CONNBENCH(1)",
            "SYNOPSIS",
            "connbench-load(1)",
            "130  interrupted",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
        }
    }
}

#[test]
fn man_dir_writes_a_page_per_command() {
    let dir = scratch("man-dir");
    let pages = dir.join("man1");
    let o = connbench(&["man", "--dir", pages.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let paths = command_paths();
    assert!(stderr(&o).contains(&format!("wrote {} manual pages", paths.len() + 1)));
    for path in paths {
        let file = pages.join(format!("connbench-{}.1", path.join("-")));
        let roff = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let title = format!(".TH CONNBENCH-{} 1 ", path.join("-").to_uppercase());
        assert!(
            String::from_utf8_lossy(&roff).contains(&title),
            "{}",
            file.display()
        );
        if path == ["load"] {
            let text = render_man(&roff).unwrap_or_default();
            assert!(text.is_empty() || text.contains("--pool-max-lifetime"), "{text}");
        }
    }
    assert!(pages.join("connbench.1").exists());
}

#[test]
fn version_names_the_commit_and_the_build_date() {
    let o = connbench(&["--version"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = stdout(&o);
    // connbench 0.1.0 (3f2a9c1-dirty, built 2026-11-25)
    let rest = v
        .strip_prefix(&format!("connbench {} (", env!("CARGO_PKG_VERSION")))
        .unwrap_or_else(|| panic!("{v:?}"));
    let (commit, date) = rest
        .strip_suffix(")\n")
        .and_then(|r| r.split_once(", built "))
        .unwrap_or_else(|| panic!("{v:?}"));
    assert!(is_date(date), "{v:?}");
    let hash = commit.strip_suffix("-dirty").unwrap_or(commit);
    assert!(
        commit == "unknown commit" || (hash.len() >= 7 && hash.chars().all(|c| c.is_ascii_hexdigit())),
        "{v:?}"
    );
    // Built from this checkout (and not told a commit): git's own short hash.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Each way out of the comparison is a skip, counted (tests/it/common.rs `skip`).
    let skip = |why: &str| crate::common::skip(false, why);
    if option_env!("CONNBENCH_COMMIT").is_some() {
        skip("built with CONNBENCH_COMMIT set: the hash is the one given, not compared with git's");
    } else if !root.join(".git").exists() {
        skip("not built from a git checkout: the hash is not compared with git's");
    } else {
        match git(root, &["rev-parse", "--short", "HEAD"]) {
            Some(head) => assert_eq!(hash, head.trim(), "{v:?}"),
            None => skip("git cannot read this checkout: the hash is not compared with git's"),
        }
    }
    assert_eq!(stdout(&connbench(&["-V"])), v);
}

fn is_date(s: &str) -> bool {
    s.len() == 10
        && s.char_indices().all(|(i, c)| {
            if i == 4 || i == 7 {
                c == '-'
            } else {
                c.is_ascii_digit()
            }
        })
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let o = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .output()
        .ok()?;
    o.status.success().then(|| stdout(&o))
}

#[test]
fn the_build_script_stamps_a_checkout_and_falls_back_without_git() {
    let dir = scratch("build-stamp");
    // A tarball's unpacked tree: no .git, so no commit (and no git asked).
    assert_eq!(build_script::commit(&dir), "unknown commit");
    // A `.git` git cannot read (a worktree whose main checkout is gone): no failure.
    std::fs::write(dir.join(".git"), "gitdir: /nonexistent/worktrees/x\n").unwrap();
    assert_eq!(build_script::commit(&dir), "unknown commit");
    std::fs::remove_file(dir.join(".git")).unwrap();
    if git(&dir, &["init", "-q"]).is_none() {
        crate::common::skip(false, "git is not installed: the checkout half of this test");
        return;
    }
    std::fs::write(dir.join("a.txt"), "a\n").unwrap();
    git(&dir, &["add", "a.txt"]).unwrap();
    git(&dir, &["commit", "-q", "-m", "a"]).unwrap();
    let head = git(&dir, &["rev-parse", "--short", "HEAD"]).unwrap();
    assert_eq!(build_script::commit(&dir), head.trim());
    std::fs::write(dir.join("a.txt"), "b\n").unwrap();
    assert_eq!(build_script::commit(&dir), format!("{}-dirty", head.trim()));
    git(&dir, &["checkout", "-q", "a.txt"]).unwrap();
    std::fs::write(dir.join("new.rs"), "\n").unwrap();
    assert_eq!(
        build_script::commit(&dir),
        format!("{}-dirty", head.trim()),
        "an untracked file is a change"
    );
}

#[test]
fn the_build_date_is_a_utc_calendar_date() {
    assert_eq!(build_script::date(0), "1970-01-01");
    assert_eq!(build_script::date(951_782_400), "2000-02-29");
    assert_eq!(build_script::date(1_700_000_000), "2023-11-14");
    assert_eq!(build_script::date(4_107_542_399), "2100-02-28");
    assert_eq!(build_script::date(-1), "1969-12-31");
}

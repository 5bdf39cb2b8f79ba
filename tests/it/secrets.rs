//! The secret itself, not the word "password": the sandbox's real SCRAM password, given
//! inline in a target, goes through connect, load, a suite run and every report format,
//! and must not appear in any output, file or the store's bytes.

use crate::common::{connbench, dataset, sandbox, scratch, stderr, stdout};

#[test]
fn an_inline_password_never_leaves_the_process() {
    dataset();
    let info = sandbox();
    let passfile = std::fs::read_to_string(&info.passfile).unwrap();
    let secret = passfile.trim().rsplit(':').next().unwrap().to_string();
    assert!(secret.len() >= 16, "a real secret to look for");
    let target = format!(
        "host={} port={} user=connbench dbname=connbench password={secret}",
        info.dir.display(),
        info.postgres_port
    );
    let dir = scratch("secrets");
    let store = dir.join("s.sqlite");
    let store_s = store.to_str().unwrap();
    let mut seen = Vec::new();
    let mut check = |what: &str, args: &[&str]| {
        let o = connbench(args);
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        seen.push((format!("{what} stdout"), stdout(&o)));
        seen.push((format!("{what} stderr"), stderr(&o)));
    };
    check("connect", &["connect", &target, "-n", "3"]);
    check("connect --json", &["connect", &target, "-n", "3", "--json"]);
    check("load", &["load", &target, "-S", "-T", "1"]);
    check("load --json", &["load", &target, "-S", "-T", "1", "--json"]);
    let suite_file = dir.join("s2.toml");
    std::fs::write(
        &suite_file,
        format!(
            "name = \"secrets\"\nquestion = \"q\"\nkind = \"connect\"\nrepetitions = 2\n\
             baseline = \"target=unix\"\n[defaults]\nsamples = 5\n[axes]\ntarget = [\"unix\", {target:?}]\n"
        ),
    )
    .unwrap();
    let unix = format!("unix={target}");
    let suite_path = suite_file.to_str().unwrap();
    let run_args = ["run", suite_path, "--target", &unix, "--store", store_s];
    check("run", &run_args);
    check("run --json", &[&run_args[..], &["--json"]].concat());
    let (html, json, csv, md) = (
        dir.join("r.html"),
        dir.join("r.json"),
        dir.join("csv"),
        dir.join("r.md"),
    );
    check(
        "report",
        &[
            "report",
            "1",
            "2",
            "--store",
            store_s,
            "--html",
            html.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
            "--markdown",
            md.to_str().unwrap(),
        ],
    );
    check("runs show", &["runs", "show", "1", "--store", store_s]);
    for f in [&html, &json, &csv.join("cells.csv"), &md] {
        seen.push((f.display().to_string(), std::fs::read_to_string(f).unwrap()));
    }
    // The store's bytes, WAL included, as they sit on disk.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if p.file_name().unwrap().to_string_lossy().starts_with("s.sqlite") {
            seen.push((
                p.display().to_string(),
                String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned(),
            ));
        }
    }
    assert!(seen.len() >= 20, "every output was read");
    for (what, text) in &seen {
        assert!(!text.contains(&secret), "{what} holds the password");
    }
    // And the test can see a leak: the same secret is in the target text it passed.
    assert!(target.contains(&secret));
    std::fs::remove_dir_all(&dir).unwrap();
}

//! Reports of real stored runs: the HTML opens in headless Chromium with no console
//! errors and no network requests and draws its charts; the JSON matches its schema; a
//! cell whose repetitions all failed fails its run and still renders, marked.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{check_schema, connbench, dataset, run, scratch, stderr, suite_args};

const CONNECT_SUITE: &str = r#"
name = "connect-report"
question = "Which path connects fastest?"
kind = "connect"
repetitions = 2
baseline = "target=unix_trust"
[defaults]
samples = 15
[axes]
target = ["unix_trust", "pgbouncer_unix_trust", "broken"]
"#;

const LOAD_SUITE: &str = r#"
name = "load-report"
question = "How does a short pool lifetime compare with a persistent connection?"
kind = "load"
duration = "2s"
repetitions = 2
prewarm = false
baseline = "clients=1 connection=persistent"
[defaults]
workload = "select-only"
target = "unix_trust"
think = "20ms"
pool_max_lifetime = "300ms"
[axes]
clients = [1, 2]
connection = ["persistent", "pool"]
"#;

/// Runs `suite` into `store` and returns its run id. A suite with a cell whose every
/// repetition failed exits 1, names the cell, and is stored as failed.
fn stored_run(dir: &Path, suite: &str, extra_targets: &[&str], failing_cell: Option<&str>) -> i64 {
    let (store, mut args) = suite_args(dir, suite, &["unix_trust", "pgbouncer_unix_trust"], &["--json"]);
    for t in extra_targets {
        args.extend(["--target".to_string(), t.to_string()]);
    }
    let o = run(&args);
    match failing_cell {
        None => assert!(o.status.success(), "{}", stderr(&o)),
        Some(cell) => {
            assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
            let wanted = format!("failed: every repetition of cell \"{cell}\" failed (all ");
            assert!(stderr(&o).contains(&wanted), "{}", stderr(&o));
            let listed = crate::common::stdout(&connbench(&["runs", "--store", store.to_str().unwrap()]));
            assert!(listed.contains(" failed "), "{listed}");
        }
    }
    assert_eq!(store.file_name().unwrap(), "r.sqlite");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    check_schema("run", &v);
    v["run_id"].as_i64().unwrap()
}

#[test]
fn html_json_markdown_and_csv_of_real_runs() {
    dataset();
    let dir = scratch("report");
    let connect_dir = dir.join("c");
    let load_dir = dir.join("l");
    std::fs::create_dir_all(&connect_dir).unwrap();
    std::fs::create_dir_all(&load_dir).unwrap();
    let broken = format!(
        "broken=host={} port=1 dbname=connbench user=connbench_trust connect_timeout=2",
        dir.join("nowhere").display()
    );
    let c = stored_run(&connect_dir, CONNECT_SUITE, &[&broken], Some("target=broken"));
    let l = stored_run(&load_dir, LOAD_SUITE, &[], None);
    let stores = [connect_dir.join("r.sqlite"), load_dir.join("r.sqlite")];

    // Each suite has a store of its own, so both runs may have the same id.
    for (is_connect, (store, run)) in [true, false].into_iter().zip(stores.iter().zip([c, l])) {
        let tag = if is_connect { "connect" } else { "load" };
        let html = dir.join(format!("{tag}.html"));
        let json = dir.join(format!("{tag}.json"));
        let md = dir.join(format!("{tag}.md"));
        let csv = dir.join(format!("csv-{tag}"));
        let o = connbench(&[
            "report",
            &run.to_string(),
            "--store",
            store.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
            "--markdown",
            md.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        check_schema("run", &v);
        assert!(
            std::fs::read_to_string(csv.join("cells.csv"))
                .unwrap()
                .lines()
                .count()
                > 2
        );
        assert!(std::fs::read_to_string(&md)
            .unwrap()
            .contains("| configuration |"));
        let page = std::fs::read_to_string(&html).unwrap();
        assert!(
            !page.contains("http://") && !page.contains("https://"),
            "the page references the network"
        );
        assert!(!page.contains("<script"), "the page needs no script");
        let cells = &v["runs"][0]["cells"];
        if is_connect {
            // The broken target: every repetition failed, and the page says so.
            let broken = &cells[2];
            assert_eq!(broken["repetitions"]["failed"], 2, "{broken}");
            assert!(broken["described"].as_object().unwrap().is_empty());
            assert!(page.contains("target=broken</b>: 2 repetitions failed"), "{page}");
            assert!(page.contains("no results"), "the missing bar is marked");
            // Bars, the phase waterfall and the percentile curves.
            assert_eq!(page.matches("<svg").count(), 3, "{page}");
            assert!(page.contains("Connection set-up phases"));
            let phases = cells[0]["values"].as_object().unwrap();
            assert!(phases.contains_key("auth_p50_us") && phases.contains_key("auth_p99_us"));
        } else {
            // Bars, tps, three latency percentiles and the machine's context switches
            // against clients, percentile curves, and one series per cell. The server
            // here is not the run's own sandbox, so no CPU chart: its CPU is unmeasured.
            assert_eq!(page.matches("<svg").count(), 1 + 5 + 1 + 4, "{page}");
            assert!(page.contains("Throughput against clients"));
            assert!(page.contains("Context switches per transaction against clients"));
            assert!(!page.contains("Where the CPU goes"));
            let named = |n: &str| {
                cells
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|c| c["name"] == n)
                    .unwrap_or_else(|| panic!("no cell {n}: {cells}"))
            };
            let pool = named("clients=1 connection=pool");
            let series = &pool["series"];
            assert_eq!(series["mark_connects"], true, "{series}");
            let reconnects: u64 = series["intervals"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["connects"].as_u64().unwrap())
                .sum();
            assert!(reconnects >= 3, "a 300 ms lifetime over 2 s reconnects: {series}");
            assert!(page.contains(r#"class="reconnect""#), "reconnects are marked");
            assert_eq!(
                named("clients=1 connection=persistent")["series"]["mark_connects"],
                false,
                "a persistent connection"
            );
        }
        // The terminal summary of the same run reads at 80 columns, with the verdict
        // phrasing the answers use.
        let o = connbench(&[
            "runs",
            "show",
            &run.to_string(),
            "--store",
            store.to_str().unwrap(),
        ]);
        let text = crate::common::stdout(&o);
        let wide: Vec<&str> = text.lines().filter(|l| l.chars().count() > 80).collect();
        assert!(wide.is_empty(), "lines over 80 columns: {wide:#?}");
        assert!(!text.contains('\x1b'), "no colour into a pipe");
        assert!(
            [
                "times faster",
                "times slower",
                "no difference beyond",
                "inconclusive ("
            ]
            .iter()
            .any(|v| text.contains(v)),
            "{text}"
        );
        chromium_renders(&html, &dir);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Opens the page in headless Chromium: no console message (a blocked fetch or a CSP
/// violation is one), every SVG in the DOM, and a screenshot with the charts' colours.
fn chromium_renders(html: &Path, dir: &Path) {
    // The baseline's bar is filled with #6b6b6b; a run with charts shows a block of it.
    let white = chromium_shows(html, dir, [0x6b, 0x6b, 0x6b], "the baseline's bar");
    // A suite's page fills the 4,000-pixel window with its charts and tables.
    assert!(
        white < 0.97,
        "the screenshot is nearly blank: {:.1}% white",
        white * 100.0
    );
}

/// As [`chromium_renders`], the screenshot holding more than 250 pixels of `rgb` (`what`);
/// returns the share of white pixels.
pub fn chromium_shows(html: &Path, dir: &Path, rgb: [u8; 3], what: &str) -> f64 {
    let chromium = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| {
            Command::new("sh")
                .args(["-c", &format!("command -v {c}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("chromium is not installed; scripts/setup.sh installs it (apt-get install chromium)");
    let profile = dir.join("chromium-profile");
    let url = format!("file://{}", html.display());
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
    ];
    let shot = html.with_extension("png");
    let mut args: Vec<String> = common.iter().map(|s| s.to_string()).collect();
    args.push(format!("--user-data-dir={}", profile.display()));
    let (_, log) = run_chromium(
        chromium,
        &[
            args.clone(),
            vec![
                format!("--screenshot={}", shot.display()),
                "--window-size=1280,4000".into(),
                url.clone(),
            ],
        ]
        .concat(),
    );
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:#?}");
    let (dom, _) = run_chromium(chromium, &[args, vec!["--dump-dom".into(), url]].concat());
    let file_svgs = std::fs::read_to_string(html).unwrap().matches("<svg").count();
    assert_eq!(
        dom.matches("<svg").count(),
        file_svgs,
        "every chart is in the rendered DOM"
    );

    let (w, h, rgba) = decode_png(&std::fs::read(&shot).unwrap());
    assert_eq!((w, h), (1280, 4000));
    let count = |rgb: [u8; 3]| rgba.chunks_exact(4).filter(|p| p[..3] == rgb).count();
    // Near the colour: a thin curve is drawn anti-aliased, few of its pixels exact.
    let near = rgba
        .chunks_exact(4)
        .filter(|p| p[..3].iter().zip(rgb).all(|(a, b)| a.abs_diff(b) <= 24))
        .count();
    // A bar or a curve of a few intervals; 387 pixels were seen for a merged curve of a
    // short run under `scripts/test.sh --stress`, none where nothing is drawn.
    assert!(
        near > 250,
        "no {what} in the screenshot ({near} pixels near its colour)"
    );
    count([255, 255, 255]) as f64 / (rgba.len() / 4) as f64
}

/// Runs Chromium with a time limit; returns its standard output and error.
fn run_chromium(bin: &str, args: &[String]) -> (String, String) {
    let mut child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let (o, e) = (reader.join().unwrap(), err_reader.join().unwrap());
            assert!(status.success(), "chromium failed: {e}");
            return (o, e);
        }
        if t0.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            panic!("chromium did not finish in 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Decodes a PNG (Chromium's screenshot) to 8-bit RGBA with the png crate.
fn decode_png(bytes: &[u8]) -> (usize, usize, Vec<u8>) {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::ALPHA);
    let mut reader = decoder.read_info().expect("a PNG header");
    let mut buf = vec![0; reader.output_buffer_size().expect("an image that fits in memory")];
    let frame = reader.next_frame(&mut buf).expect("a PNG frame");
    assert_eq!(frame.bit_depth, png::BitDepth::Eight, "8-bit channels");
    let rgba = match frame.color_type {
        png::ColorType::Rgba => buf[..frame.buffer_size()].to_vec(),
        png::ColorType::GrayscaleAlpha => buf[..frame.buffer_size()]
            .chunks_exact(2)
            .flat_map(|p| [p[0], p[0], p[0], p[1]])
            .collect(),
        other => panic!("PNG colour type {other:?} after expansion"),
    };
    (frame.width as usize, frame.height as usize, rgba)
}

//! The live metrics endpoint (`--metrics-listen`): what a run has measured so far, in the
//! Prometheus text exposition format (0.0.4, which OpenMetrics scrapers also read), for a
//! Prometheus that scrapes a long run or the workers of a Kubernetes Job.
//!
//! It owns a [`Live`] state fed by load's threads' progress periods (the same merged
//! per-period data `-P` prints, so the hot path pays nothing more than `-P` already
//! costs), set to the run's exact totals when the run ends, and a server thread that
//! renders the state on each scrape. The server is ours because all it needs is one GET
//! route with a text body: hyper or axum would bring a full HTTP stack (dozens of crates
//! for a 2-core build). It answers `GET /metrics` (and HEAD) and nothing else: any other
//! path is a 404, a request head over 8 KiB or slower than 2 s is dropped, and one
//! connection is served at a time, so a scraper (or anything else) cannot hold the run up.
//!
//! Latency is a classic histogram with bucket bounds 2^(k/16) µs from 16 µs to 67 s (353
//! buckets): consecutive bounds differ by 4.4%, so `histogram_quantile`'s linear
//! interpolation inside a bucket is within 4.4% of the run's own percentile.
//!
//! The connect ramp comes before the clock, so before any progress period: its counts
//! are read at each scrape from a [`RampProgress`] the run counts into as it connects
//! (handed to the plan by [`Exporter::ramp`]), so a scrape during a long ramp sees the
//! connections made so far.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;

use crate::load::measurements::{Interval, Measurements};
use crate::load::plan::RampProgress;

/// Bucket bounds per doubling of the latency histogram.
const PER_DOUBLING: u32 = 16;
/// The first bound, 2^4 = 16 µs, and the last, 2^26 µs ≈ 67 s.
const FIRST_LOG2: u32 = 4;
const LAST_LOG2: u32 = 26;

/// The latency histogram's bucket upper bounds, in microseconds.
pub fn bucket_bounds_us() -> Vec<f64> {
    (0..=(LAST_LOG2 - FIRST_LOG2) * PER_DOUBLING)
        .map(|k| 2f64.powf(FIRST_LOG2 as f64 + k as f64 / PER_DOUBLING as f64))
        .collect()
}

/// Who the series are about: the run and the worker, so a Job's pods sum and merge in
/// PromQL (each cell adds its own name, and its target by its redacted name).
#[derive(Debug, Clone)]
pub struct Labels {
    pub run: String,
    pub worker: u32,
}

/// A repetition's connect ramp: the connections it is to open and has opened (gauges:
/// the latest repetition's), and its failed attempts (a counter over repetitions).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveRamp {
    pub wanted: u64,
    pub connected: u64,
    pub failed_attempts: u64,
}

impl LiveRamp {
    fn of(p: &RampProgress) -> LiveRamp {
        let (wanted, connected, failed_attempts) = p.read();
        LiveRamp {
            wanted,
            connected,
            failed_attempts,
        }
    }

    /// An earlier ramp and a later one: the later's gauges, the failed attempts of both.
    fn then(earlier: Option<LiveRamp>, later: Option<LiveRamp>) -> Option<LiveRamp> {
        match (earlier, later) {
            (Some(a), Some(b)) => Some(LiveRamp {
                failed_attempts: a.failed_attempts + b.failed_attempts,
                ..b
            }),
            (a, b) => b.or(a),
        }
    }
}

/// What a cell has measured so far (warm-up excluded, as in every report).
#[derive(Debug, Clone)]
pub struct Live {
    pub clients: u64,
    pub transactions: u64,
    /// Failed transactions and connects, by kind (SQLSTATE, or phase and I/O error).
    pub failures: BTreeMap<String, u64>,
    /// Connect attempts refused during the measurement (never a failure above).
    pub refused: u64,
    /// The connect ramp, for a run that told its plan to count it ([`Exporter::ramp`]).
    pub ramp: Option<LiveRamp>,
    pub connects: u64,
    pub connect_ns: u64,
    /// The largest schedule lag of the last period (-R), µs.
    pub lag_max_us: Option<u64>,
    /// Every measured latency so far, µs.
    pub latency_us: Histogram<u64>,
    /// The figures are a finished repetition's, exact (no repetition in progress).
    pub finished: bool,
}

impl Live {
    fn new(clients: u64) -> Live {
        Live {
            clients,
            transactions: 0,
            failures: BTreeMap::new(),
            refused: 0,
            ramp: None,
            connects: 0,
            connect_ns: 0,
            lag_max_us: None,
            latency_us: crate::load::measurements::interval_histogram(),
            finished: false,
        }
    }

    /// `self` and `o` together: counts and histograms added, the newest lag and ramp
    /// (its failed attempts added).
    fn plus(&self, o: &Live) -> Live {
        let mut sum = self.clone();
        sum.clients = sum.clients.max(o.clients);
        sum.transactions += o.transactions;
        for (k, n) in &o.failures {
            *sum.failures.entry(k.clone()).or_default() += n;
        }
        sum.refused += o.refused;
        sum.ramp = LiveRamp::then(self.ramp, o.ramp);
        sum.connects += o.connects;
        sum.connect_ns += o.connect_ns;
        sum.lag_max_us = o.lag_max_us.or(sum.lag_max_us);
        let _ = sum.latency_us.add(&o.latency_us);
        sum
    }
}

/// One cell's figures: its finished repetitions' exact totals, and the repetition in
/// progress as its periods arrive.
#[derive(Debug, Clone)]
struct Cell {
    target: String,
    done: Live,
    current: Live,
    running: bool,
    /// The repetition in progress's ramp, counted into by its run.
    ramp: Option<Arc<RampProgress>>,
}

type Cells = Mutex<BTreeMap<String, Cell>>;

/// The endpoint: the state and the thread serving it, stopped on drop.
pub struct Exporter {
    cells: Arc<Cells>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    pub addr: SocketAddr,
}

/// `HOST:PORT`, or `:PORT` for every interface (the exporters' convention, as in a pod).
pub fn parse_listen(text: &str) -> Result<SocketAddr> {
    let full = match text.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => text.to_string(),
    };
    let mut addrs = full.to_socket_addrs().with_context(|| {
        format!("--metrics-listen {text:?}: give HOST:PORT, or :PORT for every interface")
    })?;
    match addrs.next() {
        Some(a) => Ok(a),
        None => bail!("--metrics-listen {text:?}: the host has no address"),
    }
}

/// `--metrics-listen`'s endpoint, when `listen` asks for one: labelled `labels`, its
/// first cell begun when `first` gives one (`(cell, target, clients)`), its address said
/// on stderr. The one place a command starts the exporter.
pub fn start(
    listen: Option<&str>,
    labels: Labels,
    first: Option<(&str, &str, u64)>,
) -> Result<Option<Exporter>> {
    let Some(listen) = listen else {
        return Ok(None);
    };
    let e = Exporter::start(listen, labels)?;
    if let Some((cell, target, clients)) = first {
        e.begin(cell, target, clients);
    }
    eprintln!("metrics: serving http://{}/metrics", e.addr);
    Ok(Some(e))
}

/// Keeps the metrics endpoint serving a run's final figures for `linger`, for a last
/// scrape; Ctrl-C ends it early.
pub async fn linger(e: &Exporter, linger: Duration) {
    eprintln!(
        "metrics: serving the final figures at http://{}/metrics for {} (Ctrl-C ends it)",
        e.addr,
        crate::units::format_duration(linger)
    );
    tokio::select! {
        _ = tokio::time::sleep(linger) => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

impl Exporter {
    /// Listens on `listen` and serves until dropped.
    fn start(listen: &str, labels: Labels) -> Result<Exporter> {
        let addr = parse_listen(listen)?;
        let listener = TcpListener::bind(addr)
            .with_context(|| format!("--metrics-listen {listen}: cannot listen on {addr}"))?;
        let addr = listener.local_addr()?;
        // Non-blocking accepts, polled, so that drop can stop the thread promptly.
        listener.set_nonblocking(true)?;
        let cells: Arc<Cells> = Arc::new(Mutex::new(BTreeMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (cells, stop) = (cells.clone(), stop.clone());
            std::thread::Builder::new()
                .name("connbench-metrics".into())
                .spawn(move || serve(listener, &cells, &labels, &stop))
                .context("cannot start the metrics endpoint's thread")?
        };
        Ok(Exporter {
            cells,
            stop,
            thread: Some(thread),
            addr,
        })
    }

    fn cells(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Cell>> {
        self.cells.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A repetition of `cell` (on `target`, with `clients`) begins.
    pub fn begin(&self, cell: &str, target: &str, clients: u64) {
        let mut cells = self.cells();
        let c = cells.entry(cell.to_string()).or_insert_with(|| Cell {
            target: target.to_string(),
            done: Live::new(clients),
            current: Live::new(clients),
            running: false,
            ramp: None,
        });
        c.current = Live::new(clients);
        c.running = true;
        c.ramp = None;
    }

    /// What the run of `cell`'s repetition in progress counts its connect ramp into
    /// (its plan's `ramp_progress`); `None` before [`Exporter::begin`].
    pub fn ramp(&self, cell: &str) -> Option<Arc<RampProgress>> {
        let mut cells = self.cells();
        let c = cells.get_mut(cell)?;
        let p = Arc::new(RampProgress::default());
        c.ramp = Some(p.clone());
        Some(p)
    }

    /// Adds one merged progress period of `cell`'s repetition in progress.
    pub fn add_period(&self, cell: &str, period: &Interval) {
        let mut cells = self.cells();
        let Some(c) = cells.get_mut(cell) else {
            return;
        };
        let l = &mut c.current;
        l.transactions += period.transactions;
        for (kind, n) in &period.failure_kinds {
            *l.failures.entry(kind.clone()).or_default() += n;
        }
        l.refused += period.refused;
        l.connects += period.connects;
        l.connect_ns += period.connect_ns;
        l.lag_max_us = period.lag_max_us;
        let _ = l.latency_us.add(&period.latency_us);
    }

    /// Ends `cell`'s repetition with its exact figures in place of its periods (which
    /// miss the last, partial one), so the last scrape agrees with the report exactly.
    pub fn finish(&self, cell: &str, rec: &Measurements) {
        let mut cells = self.cells();
        let Some(c) = cells.get_mut(cell) else {
            return;
        };
        let mut l = Live::new(c.current.clients);
        l.transactions = rec.transactions;
        l.failures = rec.failures.iter().map(|(k, f)| (k.clone(), f.count)).collect();
        l.refused = rec.refused_attempts;
        // Counted where the ramp's own record is: its figures exactly.
        l.ramp = c.ramp.take().map(|p| LiveRamp::of(&p));
        l.connects = rec.connects;
        l.connect_ns = rec.connect_ns;
        l.lag_max_us = c.current.lag_max_us;
        for v in rec.latency.iter_recorded() {
            l.latency_us
                .saturating_record_n((v.value_iterated_to() / 1_000).max(1), v.count_at_value());
        }
        c.done = c.done.plus(&l);
        c.current = Live::new(c.current.clients);
        c.running = false;
    }

    /// Every cell's figures now: `(cell, target, figures)`.
    fn snapshot(cells: &Cells) -> Vec<(String, String, Live)> {
        cells
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(name, c)| {
                let mut l = c.done.plus(&c.current);
                // The repetition in progress's ramp, as far as its run has counted.
                l.ramp = LiveRamp::then(l.ramp, c.ramp.as_deref().map(LiveRamp::of));
                l.finished = !c.running;
                (name.clone(), c.target.clone(), l)
            })
            .collect()
    }
}

/// The runner's live view is this endpoint.
impl crate::experiment::sink::Sink for Exporter {
    fn begin(&self, cell: &str, target: &str, clients: u64) {
        Exporter::begin(self, cell, target, clients)
    }

    fn add_period(&self, cell: &str, period: &Interval) {
        Exporter::add_period(self, cell, period)
    }

    fn finish(&self, cell: &str, rec: &Measurements) {
        Exporter::finish(self, cell, rec)
    }

    fn ramp(&self, cell: &str) -> Option<Arc<RampProgress>> {
        Exporter::ramp(self, cell)
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(listener: TcpListener, cells: &Cells, labels: &Labels, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let _ = answer(stream, cells, labels);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Reads one request head and answers it; the connection is closed after.
fn answer(mut s: TcpStream, cells: &Cells, labels: &Labels) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf)?;
        if n == 0 || head.len() + n > 8192 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let (status, body) = match (method, path) {
        ("GET" | "HEAD", "/metrics") => ("200 OK", render(&Exporter::snapshot(cells), labels)),
        ("GET" | "HEAD", _) => ("404 Not Found", "connbench serves only /metrics\n".to_string()),
        _ => ("405 Method Not Allowed", "GET /metrics\n".to_string()),
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if method != "HEAD" {
        out.push_str(&body);
    }
    s.write_all(out.as_bytes())
}

/// A label value as the text format writes it.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The cells' figures, `(cell, target, figures)`, as Prometheus' text exposition format:
/// each family once, a sample per cell.
pub fn render(cells: &[(String, String, Live)], labels: &Labels) -> String {
    let base = |cell: &str| {
        format!(
            "run=\"{}\",cell=\"{}\",worker=\"{}\"",
            escape(&labels.run),
            escape(cell),
            labels.worker
        )
    };
    let one =
        |name: &str, cell: &str, extra: &str, v: String| format!("{name}{{{}{extra}}} {v}\n", base(cell));
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, samples: &Samples| {
        out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
        for (cell, target, l) in cells {
            out.push_str(&samples(cell, target, l));
        }
    };
    family(
        "connbench_info",
        "gauge",
        "The cell's target (redacted), and whether its figures are final (no repetition running).",
        &|c, t, l| {
            let extra = format!(",target=\"{}\",finished=\"{}\"", escape(t), l.finished);
            one("connbench_info", c, &extra, "1".into())
        },
    );
    family(
        "connbench_clients",
        "gauge",
        "Clients of this process.",
        &|c, _, l| one("connbench_clients", c, "", l.clients.to_string()),
    );
    family(
        "connbench_transactions_total",
        "counter",
        "Measured transactions that succeeded (warm-up excluded).",
        &|c, _, l| one("connbench_transactions_total", c, "", l.transactions.to_string()),
    );
    family(
        "connbench_failures_total",
        "counter",
        "Failed transactions and connects, by kind (SQLSTATE, or phase and I/O error).",
        &|c, _, l| {
            l.failures
                .iter()
                .map(|(k, n)| {
                    one(
                        "connbench_failures_total",
                        c,
                        &format!(",kind=\"{}\"", escape(k)),
                        n.to_string(),
                    )
                })
                .collect()
        },
    );
    family(
        "connbench_refused_connects_total",
        "counter",
        "Connect attempts refused during the measurement (too many connections, starting up, nothing \
         listening): each counted once and backed off, never a failed transaction.",
        &|c, _, l| one("connbench_refused_connects_total", c, "", l.refused.to_string()),
    );
    if cells.iter().any(|(_, _, l)| l.ramp.is_some()) {
        ramp_families(&mut family, &one);
    }
    family(
        "connbench_connections_total",
        "counter",
        "Connections opened during the measurement.",
        &|c, _, l| one("connbench_connections_total", c, "", l.connects.to_string()),
    );
    family(
        "connbench_connect_seconds_total",
        "counter",
        "Time spent opening those connections, every phase.",
        &|c, _, l| {
            one(
                "connbench_connect_seconds_total",
                c,
                "",
                format!("{}", l.connect_ns as f64 / 1e9),
            )
        },
    );
    if cells.iter().any(|(_, _, l)| l.lag_max_us.is_some()) {
        family(
            "connbench_schedule_lag_max_seconds",
            "gauge",
            "Under -R: the largest lag of a transaction's start behind its schedule in the last period.",
            &|c, _, l| match l.lag_max_us {
                Some(lag) => one(
                    "connbench_schedule_lag_max_seconds",
                    c,
                    "",
                    format!("{}", lag as f64 / 1e6),
                ),
                None => String::new(),
            },
        );
    }
    let bounds = bucket_bounds_us();
    family(
        "connbench_transaction_duration_seconds",
        "histogram",
        "Latency of measured transactions that succeeded (from the intended start under -R).",
        &|c, _, l| latency_samples(&bounds, l, &|name, extra, v| one(name, c, extra, v)),
    );
    out
}

/// A family's samples: every cell's lines, from `(cell, target, figures)`.
type Samples<'a> = dyn Fn(&str, &str, &Live) -> String + 'a;

/// The connect ramp's families, for the cells whose run counted it (a sample each):
/// `family(name, type, help, samples)` writes one, `one(name, cell, extra labels,
/// value)` a sample line.
fn ramp_families(
    family: &mut dyn FnMut(&str, &str, &str, &Samples),
    one: &dyn Fn(&str, &str, &str, String) -> String,
) {
    let sample = |name: &'static str, figure: fn(&LiveRamp) -> u64| {
        move |c: &str, _: &str, l: &Live| {
            l.ramp
                .map(|r| one(name, c, "", figure(&r).to_string()))
                .unwrap_or_default()
        }
    };
    family(
        "connbench_ramp_connections",
        "gauge",
        "Connections the connect ramp before the measurement has opened (a persistent client's each, \
         a pool's), so far.",
        &sample("connbench_ramp_connections", |r| r.connected),
    );
    family(
        "connbench_ramp_connections_wanted",
        "gauge",
        "Connections the connect ramp before the measurement is to open.",
        &sample("connbench_ramp_connections_wanted", |r| r.wanted),
    );
    family(
        "connbench_ramp_failed_connects_total",
        "counter",
        "Connect attempts that failed during the connect ramp (a refused one is counted, backed off \
         and tried again).",
        &sample("connbench_ramp_failed_connects_total", |r| r.failed_attempts),
    );
}

/// One cell's latency histogram samples: cumulative buckets at `bounds` (µs), `+Inf`,
/// the sum and the count; `one(name, extra labels, value)` writes a sample line.
fn latency_samples(bounds: &[f64], l: &Live, one: &dyn Fn(&str, &str, String) -> String) -> String {
    let name = "connbench_transaction_duration_seconds";
    let mut o = String::new();
    let mut sum_us = 0f64;
    for v in l.latency_us.iter_recorded() {
        sum_us += v.value_iterated_to() as f64 * v.count_at_value() as f64;
    }
    for le in bounds {
        let n = l.latency_us.count_between(0, le.floor() as u64);
        o.push_str(&one(
            &format!("{name}_bucket"),
            &format!(",le=\"{}\"", le / 1e6),
            n.to_string(),
        ));
    }
    let total = l.latency_us.len();
    o.push_str(&one(&format!("{name}_bucket"), ",le=\"+Inf\"", total.to_string()));
    o.push_str(&one(&format!("{name}_sum"), "", format!("{}", sum_us / 1e6)));
    o.push_str(&one(&format!("{name}_count"), "", total.to_string()));
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_fine_enough_for_a_percentile_within_a_few_percent() {
        let b = bucket_bounds_us();
        assert_eq!(b.len(), 353);
        assert!((b[0] - 16.0).abs() < 1e-9 && b[b.len() - 1] > 60e6);
        assert!(b.windows(2).all(|w| w[1] / w[0] < 1.045));
    }

    #[test]
    fn the_text_format_has_cumulative_buckets_and_escaped_labels() {
        let mut l = Live::new(4);
        l.transactions = 3;
        for us in [100, 200, 5_000] {
            l.latency_us.record(us).unwrap();
        }
        l.failures.insert("57P01".into(), 2);
        let labels = Labels {
            run: "r\"1".into(),
            worker: 2,
        };
        let t = render(&[("c".into(), "unix".into(), l)], &labels);
        assert!(
            t.contains("connbench_transactions_total{run=\"r\\\"1\",cell=\"c\",worker=\"2\"} 3\n"),
            "{t}"
        );
        assert!(
            t.contains("connbench_failures_total{run=\"r\\\"1\",cell=\"c\",worker=\"2\",kind=\"57P01\"} 2\n")
        );
        assert!(t.contains("le=\"+Inf\"} 3\n"));
        // Cumulative: never decreasing, and 2 at or under 1 ms.
        let counts: Vec<u64> = t
            .lines()
            .filter(|x| x.starts_with("connbench_transaction_duration_seconds_bucket"))
            .map(|x| x.rsplit(' ').next().unwrap().parse().unwrap())
            .collect();
        assert!(counts.windows(2).all(|w| w[0] <= w[1]));
        assert!(
            t.lines().any(|x| x.contains("le=\"0.001") && x.ends_with(" 2")),
            "{t}"
        );
    }

    /// The ramp is seen as it goes (a scrape reads what the run counted so far), the
    /// refused connects as periods arrive, and both exactly at a repetition's end; the
    /// next repetition's ramp replaces the gauges and adds to the counters.
    #[test]
    fn refused_connects_and_the_ramp_are_served_as_they_go_and_exactly_at_the_end() {
        use std::sync::atomic::Ordering::Relaxed;
        let labels = Labels {
            run: "r".into(),
            worker: 0,
        };
        let e = Exporter::start("127.0.0.1:0", labels.clone()).unwrap();
        let text = || render(&Exporter::snapshot(&e.cells), &labels);
        let sample = |t: &str, name: &str| -> Option<u64> {
            let line = t.lines().find(|l| l.starts_with(&format!("{name}{{")))?;
            line.rsplit(' ').next()?.parse().ok()
        };
        e.begin("c", "unix", 3);
        let t = text();
        assert_eq!(sample(&t, "connbench_refused_connects_total"), Some(0), "{t}");
        assert!(
            !t.contains("connbench_ramp_"),
            "no ramp counted, none served: {t}"
        );
        let p = e.ramp("c").unwrap();
        p.wanted.fetch_add(3, Relaxed);
        p.connected.fetch_add(2, Relaxed);
        p.failed_attempts.fetch_add(5, Relaxed);
        let t = text();
        for (name, kind, v) in [
            ("connbench_ramp_connections", "gauge", 2),
            ("connbench_ramp_connections_wanted", "gauge", 3),
            ("connbench_ramp_failed_connects_total", "counter", 5),
        ] {
            assert!(t.contains(&format!("# TYPE {name} {kind}\n")), "{t}");
            assert!(t.contains(&format!("# HELP {name} ")), "{t}");
            assert_eq!(sample(&t, name), Some(v), "{name}: {t}");
        }
        let mut period = Interval::new();
        period.refused = 4;
        e.add_period("c", &period);
        assert_eq!(sample(&text(), "connbench_refused_connects_total"), Some(4));
        // The end: the record's exact count, and the ramp as last counted.
        p.connected.fetch_add(1, Relaxed);
        let mut rec = Measurements::new();
        rec.refused_attempts = 6;
        e.finish("c", &rec);
        let t = text();
        assert_eq!(sample(&t, "connbench_refused_connects_total"), Some(6), "{t}");
        assert_eq!(sample(&t, "connbench_ramp_connections"), Some(3), "{t}");
        // A second repetition: its own ramp's gauges, the counters added to.
        e.begin("c", "unix", 3);
        let p = e.ramp("c").unwrap();
        p.wanted.fetch_add(3, Relaxed);
        p.connected.fetch_add(1, Relaxed);
        p.failed_attempts.fetch_add(2, Relaxed);
        let t = text();
        assert_eq!(sample(&t, "connbench_ramp_connections"), Some(1), "{t}");
        assert_eq!(sample(&t, "connbench_ramp_failed_connects_total"), Some(7), "{t}");
        assert_eq!(sample(&t, "connbench_refused_connects_total"), Some(6), "{t}");
    }

    #[test]
    fn listen_addresses_follow_the_exporters_convention() {
        assert_eq!(parse_listen(":9187").unwrap().to_string(), "0.0.0.0:9187");
        assert_eq!(parse_listen("127.0.0.1:0").unwrap().port(), 0);
        let e = parse_listen("9187").unwrap_err().to_string();
        assert!(e.contains("HOST:PORT"), "{e}");
    }
}

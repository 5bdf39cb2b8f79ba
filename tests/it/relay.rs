//! The relay with real sockets: byte-exact forwarding of large random payloads in both
//! directions at once (plain, delayed with jitter, bandwidth-capped; TCP and Unix
//! listeners), half-close, a refused upstream turned into a prompt client error, and a
//! PostgreSQL connection through it.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use connbench::net::relay::{Addr, Relay, Shape};

use crate::common::{connbench, conninfo, sandbox, stderr, stdout};

/// Deterministic pseudo-random bytes (xorshift), different per seed.
fn payload(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A server that reads everything the client sends until EOF, *then* sends its own
/// payload and closes: the client's half-close must reach it while the other direction
/// stays open. Returns the listener's address and a handle yielding what it received.
fn upload_then_download_server(reply: Vec<u8>) -> (String, std::thread::JoinHandle<Vec<u8>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        s.write_all(&reply).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        got
    });
    (addr, h)
}

/// Sends `up` through a client stream, half-closes, reads the reply to EOF.
fn exchange<S: Read + Write>(mut s: S, up: &[u8], half_close: impl FnOnce(&S)) -> Vec<u8> {
    s.write_all(up).unwrap();
    half_close(&s);
    let mut down = Vec::new();
    s.read_to_end(&mut down).unwrap();
    down
}

#[test]
fn forwards_large_payloads_byte_exact_with_half_close() {
    let shapes = [
        ("plain", Shape::rtt(Duration::ZERO)),
        (
            "2 ms with jitter",
            Shape {
                one_way: Duration::from_millis(1),
                jitter: Duration::from_micros(500),
                bandwidth: None,
                faults: Default::default(),
            },
        ),
        (
            "800 Mbit/s",
            Shape {
                one_way: Duration::from_micros(200),
                jitter: Duration::ZERO,
                bandwidth: Some(100e6),
                faults: Default::default(),
            },
        ),
    ];
    for (i, (name, shape)) in shapes.into_iter().enumerate() {
        let up = payload(24 << 20, 11 + i as u64);
        let down = payload(16 << 20, 99 + i as u64);
        // A TCP listener...
        let (server, got) = upload_then_download_server(down.clone());
        let relay = Relay::start(&"127.0.0.1:0".parse().unwrap(), &server.parse().unwrap(), shape).unwrap();
        let Addr::Tcp(at) = relay.addr().clone() else {
            unreachable!()
        };
        let received = exchange(TcpStream::connect(&at).unwrap(), &up, |s| {
            s.shutdown(Shutdown::Write).unwrap()
        });
        assert!(received == down, "{name}: the download differs");
        assert!(got.join().unwrap() == up, "{name}: the upload differs");
        drop(relay);
        // ...and a Unix socket listener.
        let (server, got) = upload_then_download_server(down.clone());
        let dir = std::env::temp_dir().join(format!("cbt-relay-{}-{i}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("r.sock");
        let relay = Relay::start(&Addr::Unix(sock.clone()), &server.parse().unwrap(), shape).unwrap();
        let received = exchange(UnixStream::connect(&sock).unwrap(), &up, |s| {
            s.shutdown(Shutdown::Write).unwrap()
        });
        assert!(received == down, "{name} (unix): the download differs");
        assert!(got.join().unwrap() == up, "{name} (unix): the upload differs");
        drop(relay);
        assert!(!sock.exists(), "the relay removes its socket file");
        std::fs::remove_dir_all(dir).unwrap();
    }
}

/// `n` one-byte round trips through a TCP relay to an echo server, one after another.
fn pings(relay: &Relay, n: usize) -> Vec<Duration> {
    let Addr::Tcp(at) = relay.addr().clone() else {
        unreachable!()
    };
    let mut s = TcpStream::connect(at).unwrap();
    s.set_nodelay(true).unwrap();
    (0..n)
        .map(|_| {
            let t0 = Instant::now();
            s.write_all(b"x").unwrap();
            let mut b = [0u8; 1];
            s.read_exact(&mut b).unwrap();
            t0.elapsed()
        })
        .collect()
}

#[test]
fn delay_is_added_to_each_round_trip_and_never_early() {
    // An echo server; 30 one-byte pings through a 30 ms relay.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut b = [0u8; 1];
        while s.read_exact(&mut b).is_ok() {
            s.write_all(&b).unwrap();
        }
    });
    let rtt = Duration::from_millis(30);
    let relay = Relay::start(
        &"127.0.0.1:0".parse().unwrap(),
        &server.parse().unwrap(),
        Shape::rtt(rtt),
    )
    .unwrap();
    let mut rtts = pings(&relay, 30);
    rtts.sort();
    // Never early: a relay that held one direction only (or each for a quarter of the
    // round trip) would come back under it in every ping.
    assert!(rtts[0] >= rtt, "a round trip came back early: {:?}", rtts[0]);
    // Accuracy is the bench script's job (bench/relay.sh). A relay that held each
    // direction for the whole round trip (the delay paid twice) would take 60 ms or more
    // in every ping; the median stays under that as long as what the scheduler adds to
    // the relay's wake-ups does (5 to 22 ms at the median with every core busy), which is
    // why the round trip is 30 ms and not less.
    assert!(rtts[15] < rtt * 2, "median {:?}: {rtts:?}", rtts[15]);
}

/// An echo server on loopback; returns its address.
fn echo_server() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        while let Ok((mut s, _)) = l.accept() {
            std::thread::spawn(move || {
                let mut b = vec![0u8; 64 * 1024];
                while let Ok(n) = s.read(&mut b) {
                    if n == 0 || s.write_all(&b[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    server
}

/// Jitter has its effect: one-byte round trips through a 100 ms relay with ±40 ms
/// jitter per direction (the sum of two uniform delays, between 20 and 180 ms, an
/// interquartile range of about 47 ms) spread within the band jitter allows, both ways.
/// Judged on the low side, which a busy machine leaves alone (it only adds delay), with
/// a jitter much wider than what load adds: with two busy loops beside other builds on
/// the 2 cores, the relay's wake-ups waited for the scheduler's 4 ms ticks and most round
/// trips came back 8-16 ms late (a 40 ms relay with ±10 ms then had 2 of 60 under 40 ms,
/// where a quiet machine has half).
#[test]
fn jitter_spreads_the_round_trip_within_its_band() {
    let server = echo_server();
    let relay = Relay::start(
        &"127.0.0.1:0".parse().unwrap(),
        &server.parse().unwrap(),
        Shape {
            jitter: Duration::from_millis(40),
            ..Shape::rtt(Duration::from_millis(100))
        },
    )
    .unwrap();
    let mut ms: Vec<f64> = pings(&relay, 40).iter().map(|d| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    let q = |f: f64| ms[((ms.len() - 1) as f64 * f).round() as usize];
    let (iqr, median) = (q(0.75) - q(0.25), q(0.5));
    // Without jitter the spread is the machine's (1-2 ms quiet, 6.5 ms seen with every
    // core busy); half the jitter would give about 23 ms.
    assert!(
        iqr >= 30.0,
        "±40 ms per direction: round-trip IQR {iqr:.2} ms: {ms:?}"
    );
    // Never below 100 - 80 ms: a jitter twice as wide would go under 20 ms in one round
    // trip of eight.
    assert!(ms[0] >= 20.0, "never below 100 - 80 ms: {ms:?}");
    // Below 100 ms in half the round trips, under 84 ms in a third: a relay without
    // jitter, or with jitter that only adds, never comes back under 100 ms, whatever the
    // load.
    let quick = ms.iter().filter(|&&x| x < 100.0).count();
    assert!(
        quick >= 3,
        "jitter takes round trips below the 100 ms: {quick} of 40: {ms:?}"
    );
    // Centred on 100 ms, whatever the load adds above it (the median of 40 moves by about
    // 6.5 ms from run to run): jitter that only subtracts would centre it on 60 ms.
    assert!(median >= 80.0, "centred on 100 ms: {median:.2} ms: {ms:?}");
}

/// The bandwidth cap has its effect: 8 MiB each way through a 10 MB/s cap takes about
/// 0.84 s (throughput within 10% of the cap in the best of three runs), where the same
/// bytes uncapped take far less.
#[test]
fn the_bandwidth_cap_holds_throughput_near_the_cap() {
    const BYTES: usize = 8 << 20;
    let server = echo_server();
    let run = |bandwidth: Option<f64>| {
        let relay = Relay::start(
            &"127.0.0.1:0".parse().unwrap(),
            &server.parse().unwrap(),
            Shape {
                bandwidth,
                ..Shape::rtt(Duration::ZERO)
            },
        )
        .unwrap();
        let Addr::Tcp(at) = relay.addr().clone() else {
            unreachable!()
        };
        let s = TcpStream::connect(at).unwrap();
        let data = payload(BYTES, 5);
        let mut reader = s.try_clone().unwrap();
        let t0 = Instant::now();
        let echo = std::thread::spawn(move || {
            let mut got = vec![0u8; BYTES];
            reader.read_exact(&mut got).unwrap();
            got
        });
        (&s).write_all(&data).unwrap();
        let got = echo.join().unwrap();
        assert!(got == data, "the bytes came back intact");
        BYTES as f64 / t0.elapsed().as_secs_f64()
    };
    let cap = 10e6;
    // Never over the cap in any run (the physics), and within the stated 10% under it in
    // the best of three. The relay dates each chunk's departure from the link's own clock
    // (the previous chunk's end, or the chunk's kernel arrival stamp), never from when
    // its thread woke; but the echo server and the client are threads too, and a
    // receiver that falls behind holds the link idle as it would a real one (the relay's
    // window fills, and it stops reading). One run under `scripts/test.sh --stress` was
    // held to 8.96 MB/s that way. Lateness only ever slows a run, so the best of three is
    // the least disturbed, while a shaper that wastes link time is slow in every run: one
    // that spends 15% more link time on each chunk than its bytes take fails (8.52 MB/s;
    // the old floor of half the cap let it pass).
    let runs: Vec<f64> = (0..3).map(|_| run(Some(cap))).collect();
    let best = runs.iter().cloned().fold(0.0, f64::max);
    assert!(
        runs.iter().all(|&r| r <= cap * 1.05) && best >= cap * 0.9,
        "throughput {:?} MB/s against a cap of {:.0} MB/s",
        runs.iter().map(|r| (r / 1e5).round() / 10.0).collect::<Vec<_>>(),
        cap / 1e6
    );
    let free = run(None);
    assert!(free > 3.0 * cap, "uncapped {:.1} MB/s", free / 1e6);
}

#[test]
fn a_refused_upstream_resets_the_client_promptly() {
    // A port nothing listens on: bind, note the port, close.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let relay = Relay::start(
        &"127.0.0.1:0".parse().unwrap(),
        &format!("127.0.0.1:{port}").parse().unwrap(),
        Shape::rtt(Duration::ZERO),
    )
    .unwrap();
    let Addr::Tcp(at) = relay.addr().clone() else {
        unreachable!()
    };
    let t0 = Instant::now();
    let mut s = TcpStream::connect(&at).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut b = [0u8; 1];
    match s.read(&mut b) {
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
        Ok(n) => panic!("expected a reset, read {n} bytes"),
    }
    assert!(t0.elapsed() < Duration::from_secs(1));
    assert_eq!(
        relay
            .stats
            .upstream_failures
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );

    // What a PostgreSQL client makes of it: a clear error naming the phase, at once.
    let (host, port) = at.rsplit_once(':').unwrap();
    let t0 = Instant::now();
    let o = connbench(&[
        "connect",
        &format!("host={host} port={port} user=connbench dbname=connbench sslmode=disable"),
        "-n",
        "3",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = stdout(&o) + &stderr(&o);
    // The relay resets as soon as its upstream refuses. On a busy machine that reset can
    // land before the client's connect() has returned (the kernel then reports it as the
    // connect's error), so either phase is the honest one; what matters is that it is named.
    assert!(
        text.contains("startup: connection reset by the server")
            || text.contains("connect: connection reset by the server"),
        "the error names the phase: {text}"
    );
    assert!(t0.elapsed() < Duration::from_secs(5));
}

#[test]
fn postgres_through_a_relay_pays_the_added_round_trips() {
    // The sandbox's TCP target behind a 50 ms relay: a trust connect takes 1 round trip
    // for TCP (not relayed: the relay accepts locally), then startup and auth (one round
    // trip each, through the relay).
    let info = sandbox();
    let tcp = info.target("tcp_trust").unwrap();
    let port = tcp
        .conninfo
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("port="))
        .unwrap()
        .to_string();
    let relay = Relay::start(
        &"127.0.0.1:0".parse().unwrap(),
        &format!("127.0.0.1:{port}").parse().unwrap(),
        Shape::rtt(Duration::from_millis(50)),
    )
    .unwrap();
    let Addr::Tcp(at) = relay.addr().clone() else {
        unreachable!()
    };
    let relay_port = at.rsplit_once(':').unwrap().1;
    let target = conninfo("tcp_trust").replace(&format!("port={port}"), &format!("port={relay_port}"));
    let o = connbench(&["connect", &target, "-n", "10", "-q", "select 1", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let t = &v["targets"][0];
    let phase = |name: &str| {
        t["phases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no phase {name}: {t}"))
            .clone()
    };
    let q = phase("query");
    assert_eq!(q["round_trips"], 1);
    let (q_min, q50) = (
        q["min_us"].as_f64().unwrap() / 1e3,
        q["p50_us"].as_f64().unwrap() / 1e3,
    );
    // Never under the added round trip: a relay that held one direction only would be.
    assert!(q_min >= 50.0, "a query through a 50 ms relay: min {q_min} ms");
    // Over it by what a busy machine adds to the relay's wake-ups (up to 22 ms at the
    // median with every core busy), but under twice it: a relay that paid the delay
    // twice would take 100 ms or more for every query.
    assert!(q50 < 100.0, "a query through a 50 ms relay: p50 {q50} ms");
    assert!(relay.stats.connections.load(std::sync::atomic::Ordering::Relaxed) >= 10);
}

#[test]
fn connect_predicts_its_time_at_a_distance() {
    let o = connbench(&[
        "connect",
        &conninfo("tcp_trust"),
        "-n",
        "20",
        "--predict-rtt",
        "4ms",
        "--predict-rtt",
        "100ms",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    crate::common::check_schema("connect", &v);
    let t = &v["targets"][0];
    let p = &t["predictions"][1];
    assert_eq!(p["rtt_ms"], 100.0);
    // Trust over TCP: connect 1 (TCP's handshake, which the relay makes a connection pay
    // as a network does), startup 1.
    assert_eq!(p["round_trips_relayed"], 2, "{t}");
    assert_eq!(p["round_trips_network"], 2);
    let f = |k: &str| p[k].as_f64().unwrap();
    assert!((f("relay_p50_ms") - f("local_p50_ms") - 200.0).abs() < 1e-6);
    assert!((f("network_p50_ms") - f("local_p50_ms") - 200.0).abs() < 1e-6);
    let o = connbench(&[
        "connect",
        &conninfo("tcp_trust"),
        "-n",
        "5",
        "--predict-rtt",
        "50ms",
    ]);
    assert!(
        stdout(&o).contains("predicted at 50.0 ms RTT (p50)"),
        "{}",
        stdout(&o)
    );
}

/// A relay process that is killed if the test fails before stopping it.
pub struct RelayProcess(Option<std::process::Child>);

impl RelayProcess {
    /// Ctrl-C, then its exit status and standard output.
    fn interrupt(mut self) -> std::process::Output {
        let child = self.0.take().unwrap();
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        child.wait_with_output().unwrap()
    }
}

impl RelayProcess {
    pub fn pid(&self) -> u32 {
        self.0.as_ref().expect("running").id()
    }
}

impl Drop for RelayProcess {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts `connbench relay --listen 127.0.0.1:0 ARGS...`; returns the process, the address
/// it listens on and its first line: "relay: 127.0.0.1:PORT -> UPSTREAM, ...".
pub fn spawn_relay(args: &[&str]) -> (RelayProcess, String, String) {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| std::ffi::OsStr::new(*a)).collect();
    let (child, at, line) = crate::common::spawn_hop("relay", &args);
    (RelayProcess(Some(child)), at, line)
}

#[test]
fn the_relay_command_forwards_and_reports_on_ctrl_c() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut b = [0u8; 5];
        s.read_exact(&mut b).unwrap();
        s.write_all(&b).unwrap();
    });
    let (child, at, line) = spawn_relay(&["--upstream", &server, "--rtt", "2ms"]);
    assert!(line.contains("round trip +2.00 ms"), "{line}");
    let mut s = TcpStream::connect(&at).unwrap();
    s.write_all(b"hello").unwrap();
    let mut b = [0u8; 5];
    s.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"hello");
    drop(s);
    let out = child.interrupt();
    assert_eq!(out.status.code(), Some(130));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("relay: 1 connection (0 refused upstream), 5 B up, 5 B down"),
        "{text}"
    );
}

/// Whether a mean latency holds `round_trips` round trips of the suite's 4 ms: the relay
/// never delivers a byte before its due time, so no transaction takes less.
fn measured_ms_ok(measured: f64, round_trips: f64) -> bool {
    measured >= 4.0 * round_trips
}

#[test]
fn a_suite_with_distance_and_a_sidecar_verifies_and_predicts() {
    crate::common::dataset();
    let dir = crate::common::scratch("distance");
    let suite = r#"
name = "distance-test"
question = "What does distance cost a connection per transaction?"
kind = "load"
duration = "1500ms"
repetitions = 2
prewarm = false
figure = "latency_mean_ms"
[defaults]
workload = "select-only"
target = "tcp"
connection = "per-transaction"
clients = 1
[axes]
distance = ["0ms", "4ms"]
path = ["direct", "sidecar-tcp"]
"#;
    let (_, args) = crate::common::suite_args(&dir, suite, &["tcp"], &["--json"]);
    let o = crate::common::run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    crate::common::check_schema("run", &v);
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    for c in cells {
        let name = c["name"].as_str().unwrap();
        let values = &c["values"];
        assert_eq!(
            values["latency_mean_ms"].as_array().unwrap().len(),
            2,
            "{name}: {c}"
        );
        if name.contains("distance=4ms") {
            let achieved = values["rtt_achieved_ms"][0].as_f64().unwrap();
            // Never under the requested 4 ms: the relay holds every byte for half of it
            // each way, and load only adds (achieved is a median of round trips through
            // the route less one of direct ones, so a little under it is the noise of
            // two medians). Over it by what the scheduler adds to the relay's wake-ups:
            // 0.4 ms with other builds on the 2 cores, 7.8 to 15.9 ms more with two busy
            // loops beside them, so no bound near twice the request holds here (that the
            // delay is paid once is checked at 50 ms, where it stands out from the load:
            // `connect_and_load_take_a_distance_...`). The figure in the wrong unit (µs
            // for ms: 4,000 and more) fails.
            assert!(
                (3.5..40.0).contains(&achieved),
                "{name}: achieved RTT {achieved} ms for a requested 4 ms"
            );
            let p = &c["prediction"];
            // The model starts from this very cell without distance: the same path.
            let from = name.replace("distance=4ms", "distance=0ms");
            assert_eq!(
                p["from_cell"].as_str(),
                Some(from.as_str()),
                "{name}: the model starts from {from}: {p}"
            );
            let zero = cells
                .iter()
                .find(|z| z["name"] == from.as_str())
                .unwrap_or_else(|| panic!("no cell {from}"));
            // Its terms are the figures measured in the suite's rounds, the local term
            // the 0 ms cell's mean latency over the same rounds as this cell's: exact,
            // whatever the machine's load, so a local term of 0 or read from another cell
            // (the other path's, this one's) or another figure fails here.
            let mean_of = |cell: &serde_json::Value, figure: &str| {
                let v: Vec<f64> = cell["values"][figure]
                    .as_array()
                    .unwrap_or_else(|| panic!("{figure}: {cell}"))
                    .iter()
                    .map(|x| x.as_f64().unwrap())
                    .collect();
                v.iter().sum::<f64>() / v.len() as f64
            };
            let f = |k: &str| p[k].as_f64().unwrap_or_else(|| panic!("{k}: {p}"));
            let (local, rts, predicted, measured) = (
                f("local_ms"),
                f("round_trips_per_transaction"),
                f("predicted_ms"),
                f("measured_ms"),
            );
            let same = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
            let local0 = mean_of(zero, "latency_mean_ms");
            assert!(
                same(local, local0),
                "{name}: local term {local} ms against {from}'s mean latency {local0} ms in the same rounds: {p}"
            );
            // The round-trip term is this cell's own count (not the 0 ms cell's, which a
            // pool's lifetime would make differ), plus TCP's handshake once per connect
            // the cell made: its connects over its transactions, from its own values.
            let counted = mean_of(c, "round_trips_per_transaction");
            let connects = mean_of(c, "connects") / mean_of(c, "transactions");
            assert!(
                same(rts, counted + connects),
                "{name}: {rts} round trips, not the cell's {counted} counted + {connects} handshakes: {p}"
            );
            assert!(
                (connects - 1.0).abs() < 0.02,
                "{name}: a connect per transaction: {connects}"
            );
            assert!(
                measured_ms_ok(measured, rts),
                "{name}: measured {measured} ms is under {rts} round trips of 4 ms: {p}"
            );
            assert!(
                same(measured, mean_of(c, "latency_mean_ms")),
                "{name}: measured {measured} ms is not this cell's mean latency: {p}"
            );
            // SCRAM over TCP per transaction: TCP's handshake 1 + startup 1 + auth 2 + the
            // query 1.
            assert!(
                (5.0 - rts).abs() < 1e-9,
                "{name}: {rts} round trips per transaction"
            );
            // The model's arithmetic: local + RTT × round trips, and the ratio printed.
            assert!(same(predicted, local + 4.0 * rts), "{p}");
            assert!(same(f("ratio"), measured / predicted), "{p}");
            // The local time (a SCRAM connect and a query) is a sixth or more of the whole
            // (3.4 ms on a quiet machine, 5 to 23 ms on a busy one, against 4 × 4 ms), so
            // the local term checked above matters to the prediction.
            assert!(
                measured / (4.0 * rts) > 1.15,
                "{name}: the local term must matter in this test: {p}"
            );
            // How close the model comes is bench/relay.sh's bar (within 10% at p50, on a
            // quiet machine); here the local time moves with the load from one step to the
            // next (19.4 ms in the 0 ms cell against about 8 ms inside the 4 ms cell was
            // seen under `scripts/test.sh --stress`), so a band on the ratio would only
            // bound the machine: the model's inputs are checked exactly, and the
            // measurement against what physics sets (every round trip the model counts
            // costs at least the RTT: `measured_ms_ok`). That a connect pays all of its
            // round trips, the handshake's too, is checked at 50 ms, where it stands out
            // from the load (`connect_and_load_take_a_distance_...`).
        } else {
            assert!(c["prediction"].is_null());
            assert!(values.get("rtt_achieved_ms").is_none());
        }
        // Every repetition carries the machine's steal and how often it was retaken; a
        // cell with relays (a sidecar or a distance), their CPU apart from the client's.
        assert_eq!(values["steal_percent"].as_array().unwrap().len(), 2, "{name}");
        assert_eq!(values["steal_retakes"].as_array().unwrap().len(), 2, "{name}");
        let relayed = name.contains("sidecar") || name.contains("distance=4ms");
        assert_eq!(
            values.get("relay_cpu_per_transaction_us").is_some(),
            relayed,
            "{name}: {values}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_sidecar_with_upstream_tls_carries_plaintext_inside_tls() {
    // The relay as a cloud SQL proxy: psql speaks plaintext to it, the server sees TLS.
    let tls = sandbox().target("tls").unwrap();
    let port = tls
        .conninfo
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("port="))
        .unwrap()
        .to_string();
    let upstream = format!("127.0.0.1:{port}");
    let (child, at, _) = spawn_relay(&["--upstream", &upstream, "--upstream-tls"]);
    let relay_port = at.rsplit_once(':').unwrap().1;
    // The same user, database and passfile, through the relay, TLS off on the app side.
    let base: Vec<String> = tls
        .conninfo
        .split_whitespace()
        .filter(|kv| !kv.starts_with("sslmode=") && !kv.starts_with("sslrootcert="))
        .map(|kv| kv.replace(&format!("port={port}"), &format!("port={relay_port}")))
        .collect();
    let through = format!("{} sslmode=disable", base.join(" "));
    for sslmode in ["disable", "prefer"] {
        let ci = through.replace("sslmode=disable", &format!("sslmode={sslmode}"));
        let o = std::process::Command::new("psql")
            .args([
                &ci,
                "-XAtc",
                "select ssl from pg_stat_ssl where pid = pg_backend_pid()",
            ])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{sslmode}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            "t",
            "{sslmode}: the server's side of the sidecar is TLS"
        );
    }
    // connbench through the same sidecar: plaintext on its side.
    let o = connbench(&["connect", &through, "-n", "5", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["targets"][0]["tls"].is_null());
    child.interrupt();
}

#[test]
fn connect_and_load_take_a_distance_and_a_sidecar_from_the_command_line() {
    crate::common::dataset();
    // A distance behind a sidecar: the route's two relays, the long hop's delayed once.
    let o = connbench(&[
        "connect",
        &conninfo("tcp_trust"),
        "--distance",
        "50ms",
        "--path",
        "sidecar-tcp",
        "-n",
        "5",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("round trip requested +50.00 ms, achieved +"),
        "{}",
        stderr(&o)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // Trust over TCP: TCP's handshake and the startup are the two round trips a network
    // 50 ms away makes a connect wait for. Never under them (a relay that lets the
    // handshake through at no cost takes 50 ms and fails here); under three, which a
    // route that delayed both hops, or gave its relay the round trip as the one-way
    // delay, would pay on every connect (a busy machine adds up to about 22 ms to a
    // relayed round trip at the median).
    let total = &v["targets"][0]["total"];
    let (min, p50) = (
        total["min_us"].as_f64().unwrap() / 1e3,
        total["p50_us"].as_f64().unwrap() / 1e3,
    );
    assert!(min >= 100.0, "a connect through a 50 ms distance took {min} ms");
    assert!(p50 < 150.0, "a connect through a 50 ms distance: p50 {p50} ms");
    let o = connbench(&[
        "load",
        &conninfo("tcp_trust"),
        "-S",
        // A count, not a time: the relay's CPU is read in /proc's 10 ms ticks, and 2,000
        // transactions give it several ticks however slowly a busy machine runs them.
        "-t",
        "2000",
        "--path",
        "sidecar-unix",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    crate::common::check_schema("load", &v);
    let s = &v["summary"];
    assert!(s["transactions"].as_u64().unwrap() > 0);
    assert!(
        v["settings"]["conninfo"].as_str().unwrap().contains("host=/"),
        "{v}"
    );
    // The sidecar's CPU is its own figure: positive, and no more than one thread can use
    // in the window (the relay runs on one thread).
    let relay_s = s["relay_cpu_s"].as_f64().unwrap();
    assert!(
        relay_s > 0.0 && relay_s <= s["measured_s"].as_f64().unwrap() * 1.05,
        "{s}"
    );
    let per = s["relay_cpu_per_transaction_us"].as_f64().unwrap();
    assert!((1.0..10_000.0).contains(&per), "{s}");
    // The machine's window: some cores busy, steal a share.
    let m = &s["machine"];
    assert!(m["busy_cores"].as_f64().unwrap() > 0.0, "{m}");
    assert!(
        (0.0..=100.0).contains(&m["steal_percent"].as_f64().unwrap()),
        "{m}"
    );
    // Direct, there is no relay, and its CPU is null rather than zero.
    let o = connbench(&["load", &conninfo("tcp_trust"), "-S", "-T", "1", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["summary"]["relay_cpu_s"].is_null(), "{}", v["summary"]);
    assert!(v["summary"]["machine"]["cores"].as_u64().unwrap() >= 1);
}

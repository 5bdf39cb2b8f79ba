//! `connbench record --from-pcap`: a tcpdump capture read into a trace. Against real
//! servers: tcpdump on the loopback interface watches both legs of `connbench record`
//! (the application's leg and the recorder's upstream leg) while pgbench or the mariadb
//! client runs through it, and each leg's capture must hold the recorder's requests, one
//! for one, with request times that bracket the recorder's (it stands between the two
//! capture points). A copy of a capture with one packet taken out must name its gap and
//! keep every other session whole. Hand-made captures check the link types, a
//! connection the capture joined mid-stream, and the errors for bad files.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{
    connbench, root_or_skip, skip, start_recorder, stderr, stdout, stop_recorder, OwnMariadb,
};

static SB: OwnMariadb = OwnMariadb::new();

/// The tests that capture this sandbox's traffic, one at a time: tcpdump sees every
/// connection to a port, another test's too.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// pgbench's tables in the sandbox, made once.
fn pgbench_tables() {
    static MADE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    MADE.get_or_init(|| {
        let unix = SB.info().target("unix").unwrap().conninfo.clone();
        let o = Command::new("pgbench")
            .args(["-i", "-q", "-s", "1", &unix])
            .output()
            .unwrap();
        assert!(o.status.success(), "pgbench -i: {}", stderr(&o));
    });
}

/// tcpdump on `lo` writing `file`, for the TCP ports given.
struct Tcpdump {
    child: std::process::Child,
    file: PathBuf,
    stderr: Option<std::thread::JoinHandle<String>>,
}

/// Starts tcpdump and waits for it to say it listens (its own event, on stderr); `None`
/// (skipped) where it cannot run.
fn tcpdump(ports: &[u16], file: &Path) -> Option<Tcpdump> {
    if !root_or_skip("tcpdump captures as root") {
        return None;
    }
    if Command::new("tcpdump").arg("--version").output().is_err() {
        skip(false, "tcpdump is not installed (scripts/setup.sh installs it)");
        return None;
    }
    let filter: Vec<String> = ports.iter().map(|p| format!("tcp port {p}")).collect();
    // -U: each packet written as it is captured, so the file shows when the last
    // traffic is in; -s 0: whole packets.
    let mut child = Command::new("tcpdump")
        .args([
            "-i",
            "lo",
            "-n",
            "-s",
            "0",
            "-U",
            "--time-stamp-precision=nano",
            "-w",
        ])
        .arg(file)
        .arg(filter.join(" or "))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tcpdump");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            let _ = child.wait();
            panic!("tcpdump ended before listening: {said}");
        }
        said.push_str(&line);
        if line.contains("listening on") {
            break;
        }
    }
    // Drained on a thread: a full pipe would stall tcpdump.
    let stderr = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = err.read_to_string(&mut rest);
        rest
    });
    Some(Tcpdump {
        child,
        file: file.to_path_buf(),
        stderr: Some(stderr),
    })
}

impl Tcpdump {
    /// Stops the capture once `marker` is in the file `times` times (the last traffic's
    /// packets are written), with SIGINT, as a user does, and waits for its exit.
    fn stop(mut self, marker: &str, times: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let data = std::fs::read(&self.file).unwrap_or_default();
            let n = data
                .windows(marker.len())
                .filter(|w| *w == marker.as_bytes())
                .count();
            if n >= times {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the capture holds {n} of {times} {marker:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let status = self.child.wait().unwrap();
        let said = self.stderr.take().unwrap().join().unwrap();
        assert!(status.success(), "tcpdump: {said}");
        assert!(
            said.lines().any(|l| l == "0 packets dropped by kernel"),
            "tcpdump dropped packets: {said}"
        );
    }
}

impl Drop for Tcpdump {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A trace's events.
fn events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A request as decoded, without its times: what two views of one run must agree on.
fn what(r: &Value) -> Value {
    let mut r = r.clone();
    for k in ["session", "at_ns", "think_ns", "first_byte_ns", "response_ns"] {
        r.as_object_mut().unwrap().remove(k);
    }
    r
}

/// Each session's requests (in order), the sessions sorted by what they hold, so two
/// views of a run pair up whatever their session numbers.
fn sessions(events: &[Value]) -> Vec<Vec<Value>> {
    let mut by: BTreeMap<u64, Vec<Value>> = BTreeMap::new();
    for e in events.iter().filter(|e| e["type"] == "request") {
        by.entry(e["session"].as_u64().unwrap())
            .or_default()
            .push(e.clone());
    }
    let mut v: Vec<Vec<Value>> = by.into_values().collect();
    v.sort_by_key(|s| s.iter().map(|r| what(r).to_string()).collect::<Vec<_>>());
    v
}

/// `connbench record --from-pcap FILE --port PORT` (more flags in `extra`) into `out`;
/// its stdout.
fn from_pcap(file: &Path, port: Option<u16>, extra: &[&str], out: &Path) -> String {
    let mut args = vec![
        "record",
        "--from-pcap",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    let port = port.map(|p| p.to_string());
    if let Some(p) = &port {
        args.extend(["--port", p]);
    }
    args.extend(extra);
    let o = connbench(&args);
    assert!(o.status.success(), "record --from-pcap: {}", stderr(&o));
    stdout(&o)
}

/// The transactions `trace` counts; its method says where the figures were measured:
/// the recorder, or the capture's point (a trace read from a capture has `capture` in its
/// header).
fn transactions(trace: &Path) -> u64 {
    let o = connbench(&["trace", trace.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "trace: {}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let method = v["method"].as_str().unwrap_or_default();
    let captured = events(trace)[0].get("capture").is_some_and(|c| !c.is_null());
    let at = if captured {
        "measured where the capture "
    } else {
        "measured at the recorder"
    };
    assert!(method.starts_with(at), "{}: {method}", trace.display());
    v["profile"]["requests"]["transactions"].as_u64().unwrap()
}

/// The recorder's trace against a capture of one leg: the same sessions and requests
/// (times apart) and the same transactions; the total and median request times of
/// the matched requests, recorder's then capture's, in ms.
fn compare(recorded: &Path, captured: &Path) -> [(f64, f64); 2] {
    let (r, c) = (sessions(&events(recorded)), sessions(&events(captured)));
    assert_eq!(r.len(), c.len(), "sessions");
    let mut times = (Vec::new(), Vec::new());
    for (rs, cs) in r.iter().zip(&c) {
        let (rw, cw): (Vec<Value>, Vec<Value>) =
            (rs.iter().map(what).collect(), cs.iter().map(what).collect());
        assert_eq!(rw, cw, "a session's requests as recorded and as captured");
        for (a, b) in rs.iter().zip(cs) {
            // A goodbye (COM_QUIT) has no answer in either.
            if let (Some(a), Some(b)) = (a["response_ns"].as_f64(), b["response_ns"].as_f64()) {
                times.0.push(a / 1e6);
                times.1.push(b / 1e6);
            }
        }
    }
    assert_eq!(transactions(recorded), transactions(captured), "transactions");
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let total = (times.0.iter().sum(), times.1.iter().sum());
    [total, (median(&mut times.0), median(&mut times.1))]
}

/// What the three views of a run say of its request times. The recorder times a
/// request from its read of the request's last byte to its read of the answer's last;
/// the upstream leg's capture sees the request later (once the recorder passed it on)
/// and the answer earlier (before the recorder read it), the application's leg the
/// other way round. So the recorder's total lies between the legs', each leg is off by
/// one crossing of the hop per request (tens of µs in a debug build: 6% of a pgbench
/// total here), and like with like is the legs' mean, which crosses the hop as the
/// recorder does: its total within 5% of the recorder's.
fn check_times(recorded: &Path, up: &Path, app: &Path) {
    let [(rec, up_total), (rec_median, up_median)] = compare(recorded, up);
    let [(_, app_total), (_, app_median)] = compare(recorded, app);
    let (mean_total, mean_median) = ((up_total + app_total) / 2.0, (up_median + app_median) / 2.0);
    eprintln!(
        "request times, total ms (median): recorder {rec:.2} ({rec_median:.3}), upstream leg \
         {up_total:.2} ({up_median:.3}), application leg {app_total:.2} ({app_median:.3}); \
         to the recorder's: upstream {:.3} ({:.3}), application {:.3} ({:.3}), their mean \
         {:.3} ({:.3})",
        up_total / rec,
        up_median / rec_median,
        app_total / rec,
        app_median / rec_median,
        mean_total / rec,
        mean_median / rec_median
    );
    assert!(
        up_total <= rec && rec <= app_total,
        "the recorder's times between the legs'"
    );
    assert!(
        (mean_total / rec - 1.0).abs() <= 0.05,
        "total: the legs' mean {mean_total:.2} ms, the recorder's {rec:.2}"
    );
    // Medians are printed, not held to 5%: a fast request's median moves by more than
    // that between runs (a few µs of scheduling on 2 shared cores).
}

/// pgbench (tpcb-like, and a transaction the server takes 10 ms over) through
/// `connbench record`, both legs captured by tcpdump at once: each leg read by
/// `--from-pcap` holds the recorder's statements and transactions; its header says it
/// came from the capture.
#[test]
fn pgbench_captured_beside_the_recorder_is_traced_as_recorded() {
    let info = SB.info();
    let dir = crate::common::scratch("capture-pg");
    pgbench_tables();
    let recorded = dir.join("recorded.trace");
    let upstream = format!("127.0.0.1:{}", info.postgres_port);
    let (recorder, port) = start_recorder(&upstream, &[], &recorded);
    let app_port: u16 = port.parse().unwrap();
    let pcap = dir.join("both.pcap");
    let _one = one_at_a_time();
    let Some(dump) = tcpdump(&[info.postgres_port, app_port], &pcap) else {
        return;
    };
    let through = info.target("tcp").unwrap().conninfo.replace(
        &format!("port={}", info.postgres_port),
        &format!("port={app_port}"),
    );
    let slow = dir.join("slow.sql");
    std::fs::write(&slow, "BEGIN;\nSELECT pg_sleep(0.01);\nEND;\n").unwrap();
    let o = Command::new("pgbench")
        .args(["-n", "-c", "2", "-t", "30", "-b", "tpcb-like@1"])
        .arg("-f")
        .arg(format!("{}@1", slow.display()))
        .arg(&through)
        .output()
        .unwrap();
    assert!(o.status.success(), "pgbench: {}", stderr(&o));
    let marker = format!("capture-end-{}", std::process::id());
    let o = Command::new("psql")
        .args([&through, "-Atc", &format!("SELECT '{marker}'")])
        .output()
        .unwrap();
    assert!(o.status.success(), "psql: {}", stderr(&o));
    // On each leg, the request and the answer.
    dump.stop(&marker, 4);
    stop_recorder(recorder);
    let (up, app) = (dir.join("up.trace"), dir.join("app.trace"));
    let said = from_pcap(&pcap, Some(info.postgres_port), &[], &up);
    assert!(!said.contains("gap"), "{said}");
    from_pcap(&pcap, Some(app_port), &[], &app);
    check_times(&recorded, &up, &app);
    let header = &events(&up)[0];
    assert_eq!(header["capture"]["server_port"], info.postgres_port, "{header}");
    assert_eq!(header["capture"]["link"], "ethernet", "{header}");
    assert!(header["options"]["listen"].is_null(), "{header}");
    // Without --port, the port is the one answering startups: the server's, not the
    // recorder's (which also answers them, so the busier is taken; both had 4).
    let guessed = dir.join("guessed.trace");
    let said = from_pcap(&pcap, None, &[], &guessed);
    assert!(said.contains("(guessed"), "{said}");
}

/// The mariadb client's statements (a transaction, a statement the server sleeps in)
/// through `connbench record --engine mysql`, both legs captured: as recorded.
#[test]
fn the_mariadb_client_captured_beside_the_recorder_is_traced_as_recorded() {
    let info = SB.info();
    let m = info.mariadb.as_ref().unwrap();
    let dir = crate::common::scratch("capture-my");
    let recorded = dir.join("recorded.trace");
    let upstream = format!("127.0.0.1:{}", m.port);
    let (recorder, port) = start_recorder(&upstream, &["--engine", "mysql"], &recorded);
    let app_port: u16 = port.parse().unwrap();
    let pcap = dir.join("both.pcap");
    let _one = one_at_a_time();
    let Some(dump) = tcpdump(&[m.port, app_port], &pcap) else {
        return;
    };
    let password = SB.password();
    let client = |sql: &str| {
        let o = Command::new("mariadb")
            .args(["--skip-ssl", "-h", "127.0.0.1", "-P", &port, "-u", "connbench"])
            .arg(format!("-p{password}"))
            .args(["connbench", "-e", sql])
            .output()
            .unwrap();
        assert!(o.status.success(), "mariadb: {}", stderr(&o));
    };
    for i in 0..3 {
        client(&format!(
            "SELECT {i}; BEGIN; SELECT SLEEP(0.01); SELECT {i} + 1; COMMIT; DO SLEEP(0.01)"
        ));
    }
    let marker = format!("capture-end-{}", std::process::id());
    client(&format!("SELECT '{marker}'"));
    dump.stop(&marker, 4);
    stop_recorder(recorder);
    let (up, app) = (dir.join("up.trace"), dir.join("app.trace"));
    let said = from_pcap(&pcap, Some(m.port), &["--engine", "mysql"], &up);
    assert!(said.contains("4 session(s)") && !said.contains("gap"), "{said}");
    from_pcap(&pcap, Some(app_port), &["--engine", "mysql"], &app);
    check_times(&recorded, &up, &app);
}

/// The records of a legacy pcap file: its header, then each record's bytes whole.
fn records(pcap: &[u8]) -> (&[u8], Vec<&[u8]>) {
    let mut at = 24;
    let mut out = Vec::new();
    while at + 16 <= pcap.len() {
        let len = u32::from_le_bytes(pcap[at + 8..at + 12].try_into().unwrap()) as usize;
        out.push(&pcap[at..at + 16 + len]);
        at += 16 + len;
    }
    (&pcap[..24], out)
}

/// pgbench's three connections captured, then a copy of the capture without one of the
/// second connection's requests: the gap is said (output and the session's
/// decode_error), and the other two sessions are exactly as in the whole capture.
#[test]
fn a_segment_missing_from_the_capture_is_a_gap_and_the_rest_is_kept() {
    let info = SB.info();
    let dir = crate::common::scratch("capture-gap");
    let pcap = dir.join("whole.pcap");
    let _one = one_at_a_time();
    let Some(dump) = tcpdump(&[info.postgres_port], &pcap) else {
        return;
    };
    let tcp = info.target("tcp").unwrap().conninfo.clone();
    pgbench_tables();
    let o = Command::new("pgbench")
        .args(["-n", "-S", "-c", "3", "-t", "40", &tcp])
        .output()
        .unwrap();
    assert!(o.status.success(), "pgbench: {}", stderr(&o));
    let marker = format!("capture-end-{}", std::process::id());
    let o = Command::new("psql")
        .args([&tcp, "-Atc", &format!("SELECT '{marker}'")])
        .output()
        .unwrap();
    assert!(o.status.success(), "psql: {}", stderr(&o));
    dump.stop(&marker, 2);
    let bytes = std::fs::read(&pcap).unwrap();
    let (header, recs) = records(&bytes);
    // The second connection (by its SYN) and its 10th query.
    let tcp_of = |r: &[u8]| match etherparse::SlicedPacket::from_ethernet(&r[16..])
        .ok()?
        .transport?
    {
        etherparse::TransportSlice::Tcp(t) => Some((t.source_port(), t.syn(), t.ack(), t.payload().to_vec())),
        _ => None,
    };
    let client_ports: Vec<u16> = recs
        .iter()
        .filter_map(|r| tcp_of(r))
        .filter(|(_, syn, ack, _)| *syn && !*ack)
        .map(|(p, ..)| p)
        .collect();
    let second = client_ports[1];
    let drop = recs
        .iter()
        .enumerate()
        .filter(|(_, r)| tcp_of(r).is_some_and(|(p, _, _, pl)| p == second && pl.first() == Some(&b'Q')))
        .nth(10)
        .map(|(i, _)| i)
        .expect("the second connection's queries");
    let mut copy = header.to_vec();
    for (i, r) in recs.iter().enumerate() {
        if i != drop {
            copy.extend_from_slice(r);
        }
    }
    let cut = dir.join("cut.pcap");
    std::fs::write(&cut, copy).unwrap();
    let (whole, holed) = (dir.join("whole.trace"), dir.join("cut.trace"));
    from_pcap(&pcap, None, &[], &whole);
    let said = from_pcap(&cut, None, &[], &holed);
    assert!(
        said.contains("1 gap(s)") && said.contains("going to the server"),
        "{said}"
    );
    let (w, h) = (events(&whole), events(&holed));
    let close = h
        .iter()
        .find(|e| e["type"] == "session_close" && e["session"] == 2)
        .expect("session 2 closed");
    assert!(
        close["decode_error"]
            .as_str()
            .unwrap_or("")
            .contains("the capture misses"),
        "{close}"
    );
    let reqs = |ev: &[Value], s: u64| -> Vec<Value> {
        ev.iter()
            .filter(|e| e["type"] == "request" && e["session"] == s)
            .cloned()
            .collect()
    };
    for s in [1, 3, 4] {
        assert_eq!(reqs(&w, s), reqs(&h, s), "session {s} untouched by another's gap");
    }
    // Session 2 is whole up to its gap, then ends there.
    let (before, after) = (reqs(&w, 2), reqs(&h, 2));
    assert!(
        after.len() >= 10 && after.len() < before.len(),
        "{} of {}",
        after.len(),
        before.len()
    );
}

/// A hand-made capture: a pcap file of link type `link` holding `packets`, each
/// (microseconds, bytes).
fn pcap_file(link: u32, packets: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let mut f = Vec::new();
    for v in [
        0xa1b2c3d4u32.to_le_bytes(),
        [2, 0, 4, 0],
        [0; 4],
        [0; 4],
        262144u32.to_le_bytes(),
        link.to_le_bytes(),
    ] {
        f.extend_from_slice(&v);
    }
    for (us, p) in packets {
        for v in [1_700_000_000u32, *us, p.len() as u32, p.len() as u32] {
            f.extend_from_slice(&v.to_le_bytes());
        }
        f.extend_from_slice(p);
    }
    f
}

/// A TCP segment over IPv4 between 10.0.0.1:`from` and 10.0.0.2:`to` (the ports say
/// which way), framed for `link`.
fn segment(link: u32, (from, to): (u16, u16), seq: u32, ack: u32, payload: &[u8]) -> Vec<u8> {
    let (a, b) = if from < to {
        ([10, 0, 0, 2], [10, 0, 0, 1])
    } else {
        ([10, 0, 0, 1], [10, 0, 0, 2])
    };
    let ip = etherparse::PacketBuilder::ipv4(a, b, 64)
        .tcp(from, to, seq, 65535)
        .ack(ack)
        .psh();
    let mut out = match link {
        // BSD loopback: AF_INET in the capturing host's order.
        0 => 2u32.to_le_bytes().to_vec(),
        // SLL2: protocol, reserved, interface, ARPHRD, packet type, address length, address.
        276 => [&[8u8, 0, 0, 0, 0, 0, 0, 1, 3, 4, 0, 6][..], &[0; 8]].concat(),
        _ => Vec::new(),
    };
    if link == 1 {
        etherparse::PacketBuilder::ethernet2([0; 6], [0; 6])
            .ipv4(a, b, 64)
            .tcp(from, to, seq, 65535)
            .ack(ack)
            .psh()
            .write(&mut out, payload)
            .unwrap();
    } else {
        ip.write(&mut out, payload).unwrap();
    }
    out
}

/// A PostgreSQL connection the capture joined (no SYN, no startup): a simple query and
/// its answer on port 5432, then another, each direction in one segment.
fn joined_postgres(link: u32) -> Vec<u8> {
    let q = |sql: &str| {
        let mut m = vec![b'Q'];
        m.extend_from_slice(&(4 + sql.len() as u32 + 1).to_be_bytes());
        m.extend_from_slice(sql.as_bytes());
        m.push(0);
        m
    };
    let answer = [&b"C\0\0\0\x0dSELECT 1\0"[..], &b"Z\0\0\0\x05I"[..]].concat();
    let (c, s) = ((40000, 5432), (5432, 40000));
    let (q1, q2) = (q("SELECT 1"), q("SELECT 2"));
    // The tail of an answer to a request the capture did not see, first: skipped.
    let stale = b"Z\0\0\0\x05I".to_vec();
    let packets = vec![
        (10, segment(link, s, 500, 100, &stale)),
        (20, segment(link, c, 100, 506, &q1)),
        (150, segment(link, s, 506, 100 + q1.len() as u32, &answer)),
        (
            400,
            segment(link, c, 100 + q1.len() as u32, 506 + answer.len() as u32, &q2),
        ),
        (
            600,
            segment(
                link,
                s,
                506 + answer.len() as u32,
                100 + (q1.len() + q2.len()) as u32,
                &answer,
            ),
        ),
    ];
    pcap_file(link, &packets)
}

/// Hand-made captures of each link type read by `--from-pcap` (the port guessed as
/// PostgreSQL's usual one): the joined connection decoded from its first whole query,
/// marked `joined`, its times the capture's; a MySQL connection joined mid-stream is
/// counted, not guessed at; a file cut inside a packet is read up to the cut.
#[test]
fn hand_made_captures_of_each_link_type_are_read() {
    let dir = crate::common::scratch("capture-links");
    for link in [1u32, 0, 276, 101] {
        let pcap = dir.join(format!("link{link}.pcap"));
        std::fs::write(&pcap, joined_postgres(link)).unwrap();
        let out = dir.join(format!("link{link}.trace"));
        let said = from_pcap(&pcap, None, &[], &out);
        assert!(
            said.contains("server port 5432 (guessed") && said.contains("2 request(s)"),
            "{link}: {said}"
        );
        assert!(
            said.contains("1 session(s) already open when the capture began: decoded"),
            "{said}"
        );
        let ev = events(&out);
        let open = ev.iter().find(|e| e["type"] == "session_open").unwrap();
        assert_eq!(open["joined"], true, "{open}");
        assert!(open["user"].is_null(), "{open}");
        let rs: Vec<&Value> = ev.iter().filter(|e| e["type"] == "request").collect();
        assert_eq!(rs[0]["sql"], "SELECT 1");
        assert_eq!(rs[1]["sql"], "SELECT 2");
        // Times are the capture's: the answer 130 µs after the query, the second query
        // 250 µs after the first answer.
        assert_eq!(rs[0]["response_ns"], 130_000, "{}", rs[0]);
        assert_eq!(rs[1]["think_ns"], 250_000, "{}", rs[1]);
        assert!(
            rs[0]["think_ns"].is_null(),
            "unknown before the capture: {}",
            rs[0]
        );
    }
    // A cut inside the last packet: the rest is read, the cut said.
    let whole = joined_postgres(1);
    let pcap = dir.join("cut.pcap");
    std::fs::write(&pcap, &whole[..whole.len() - 5]).unwrap();
    let out = dir.join("cut.trace");
    let o = connbench(&[
        "record",
        "--from-pcap",
        pcap.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the file ends inside packet 5 (cut short)"),
        "{}",
        stderr(&o)
    );
    // The second query's answer was in the cut packet: it is written unanswered.
    assert!(stdout(&o).contains("2 request(s)"), "{}", stdout(&o));
    let last = events(&out)
        .into_iter()
        .rfind(|e| e["type"] == "request")
        .unwrap();
    assert_eq!(last["outcome"], "unanswered", "{last}");
    // MySQL, joined mid-stream: not decodable without the handshake, and said.
    let (c, s) = ((40000, 3306), (3306, 40000));
    let ping = [1u8, 0, 0, 0, 14];
    let ok = [7u8, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0];
    let pcap = dir.join("mysql.pcap");
    std::fs::write(
        &pcap,
        pcap_file(
            1,
            &[(1, segment(1, c, 1, 1, &ping)), (2, segment(1, s, 1, 6, &ok))],
        ),
    )
    .unwrap();
    let said = from_pcap(&pcap, None, &["--engine", "mysql"], &dir.join("mysql.trace"));
    assert!(
        said.contains("MySQL's decoder needs the connection's handshake"),
        "{said}"
    );
}

/// Bad input: each error names the file, what was being read and what to do, and
/// leaves no trace file behind; nothing panics.
#[test]
fn bad_captures_are_refused_with_the_file_the_phase_and_the_fix() {
    let dir = crate::common::scratch("capture-bad");
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let good = joined_postgres(1);
    let mut unknown_link = good.clone();
    unknown_link[20..24].copy_from_slice(&147u32.to_le_bytes());
    let cases: Vec<(PathBuf, Vec<&str>, Vec<&str>)> = vec![
        (
            write("text.pcap", b"SELECT 1;\nthis is not a capture\n"),
            vec![],
            vec![
                "reading the file's header",
                "not a pcap or pcapng capture",
                "tcpdump -w",
            ],
        ),
        (
            write("empty.pcap", b""),
            vec![],
            vec!["reading the file's header", "empty"],
        ),
        (
            write("header.pcap", &good[..10]),
            vec![],
            vec!["reading the file's header"],
        ),
        (
            write("link.pcap", &unknown_link),
            vec![],
            vec!["link type 147 is not read", "tcpdump -i any"],
        ),
        (
            write("port.pcap", &good),
            vec!["--port", "6000"],
            vec![
                "finding the connections",
                "no TCP to or from port 6000",
                "5432 (5)",
                "--port",
            ],
        ),
        (
            write("mysql.pcap", &good),
            vec!["--engine", "mysql"],
            vec!["no MySQL server port found", "--engine postgres --port 5432"],
        ),
        (dir.join("missing.pcap"), vec![], vec!["cannot open the capture"]),
    ];
    for (file, extra, expect) in cases {
        let out = dir.join("out.trace");
        let mut args = vec![
            "record",
            "--from-pcap",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(extra);
        let o = connbench(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{file:?}: {err}");
        assert!(err.contains(file.to_str().unwrap()), "names the file: {err}");
        for e in expect {
            assert!(err.contains(e), "{file:?}: {e:?} in {err}");
        }
        assert!(!err.contains("panicked"), "{err}");
        assert!(!out.exists(), "{file:?}: no trace written");
    }
    // --from-pcap takes no --listen, and --port only with it (nothing written).
    let x = dir.join("x");
    let x = x.to_str().unwrap();
    let o = connbench(&[
        "record",
        "--from-pcap",
        "x.pcap",
        "--listen",
        "127.0.0.1:0",
        "--out",
        x,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = connbench(&[
        "record",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        "x:1",
        "--port",
        "5",
        "--out",
        x,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("for --from-pcap only"), "{}", stderr(&o));
    assert!(!dir.join("x").exists(), "nothing recorded");
}

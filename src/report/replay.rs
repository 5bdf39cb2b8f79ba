//! `connbench replay`'s output: a replay's figures beside the recording's (from
//! `replay::summary`), as text for people and JSON for programs (docs/json.md). Reads
//! figures; computes nothing but display units.

use crate::replay::summary::{Spread, Summary, Times};
use crate::units::format_ns;

/// The JSON document.
pub fn json(s: &Summary, trace: &str, target: &str) -> serde_json::Value {
    serde_json::json!({
        "trace": trace,
        "target": target,
        "summary": s,
    })
}

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else if v >= 1.0 {
        format!("{v:.2} ms")
    } else {
        format!("{:.0} µs", v * 1000.0)
    }
}

fn times(t: Option<Times>) -> String {
    t.map_or("-".to_string(), |t| {
        format!("p50 {}, p99 {}, max {}", ms(t.p50_ms), ms(t.p99_ms), ms(t.max_ms))
    })
}

fn spread(t: Option<Spread>) -> String {
    t.map_or("-".to_string(), |t| {
        format!(
            "mean {}, p50 {}, p99 {}, max {}",
            ms(t.mean_ms),
            ms(t.p50_ms),
            ms(t.p99_ms),
            ms(t.max_ms)
        )
    })
}

fn cell(t: Option<Times>, f: fn(&Times) -> f64) -> String {
    t.map_or("-".to_string(), |t| ms(f(&t)))
}

/// The sessions' line: how many connected, or were served by the pool and what it did.
fn sessions(s: &Summary) -> String {
    let mut o = String::new();
    let r = &s.replayed;
    let skipped = if s.sessions_skipped > 0 {
        format!(
            "; {} recorded session(s) not replayed (refused when recorded)",
            s.sessions_skipped
        )
    } else {
        String::new()
    };
    match &s.pool {
        None => o.push_str(&format!(
            "sessions     {} of {} connected{skipped}\n",
            r.connected, r.sessions
        )),
        Some(p) => o.push_str(&format!(
            "sessions     {} of {} served by a pool of {} ({} per thread){skipped}\npool         {} connect(s), mean {}; {} statement(s) prepared again on another connection; {} left in a transaction and rolled back\n",
            r.connected,
            r.sessions,
            p.size,
            p.per_thread.iter().map(|n| n.to_string()).collect::<Vec<_>>().join("+"),
            p.connects,
            p.connect_mean_ms.map_or("-".to_string(), ms),
            p.prepared_again,
            p.rolled_back
        )),
    }
    o.push_str(&cancels(&s.cancels));
    o
}

/// The recorded CancelRequests' line, when there were any: sent again, and why not.
fn cancels(c: &crate::replay::cancel::Counts) -> String {
    if c.recorded == 0 {
        return String::new();
    }
    let why: String = c
        .not_replayed
        .iter()
        .map(|(reason, n)| format!("; {n} not: {reason}"))
        .collect();
    format!(
        "cancels      {} of {} recorded replayed{why}\n",
        c.replayed, c.recorded
    )
}

/// `--pool`: one warning per kind of session state the pool does not keep.
fn state_warnings(s: &Summary) -> String {
    let mut o = String::new();
    for (kind, n) in s.pool.iter().flat_map(|p| &p.session_state) {
        o.push_str(&format!(
            "\nwarning: {n} request(s) set session state a pool does not keep between borrows ({kind}); \
             they were replayed on whichever connection was borrowed, so later transactions may not see it \
             as the application did (pin such sessions, or keep them off the pool)\n"
        ));
    }
    o
}

/// The transaction shapes (`top` of them, by recorded share of time): each one's mean
/// now beside recorded and predicted, with its statements under it.
fn shapes(s: &Summary, top: usize) -> String {
    if s.shapes.is_empty() {
        return String::new();
    }
    let mut o = format!(
        "\ntransaction shapes by recorded share of time (top {} of {}); predicted: trace's model at this replay's added round trip\n",
        top.min(s.shapes.len()),
        s.shapes.len()
    );
    o.push_str("    count (rec)  trips    mean now   predicted  now/pred    mean rec\n");
    for r in s.shapes.iter().take(top) {
        let now = r.now.map(|n| n.mean_ms);
        let ratio = match (now, r.predicted_ms) {
            (Some(n), Some(p)) if p > 0.0 => format!("{:.2}x", n / p),
            _ => "-".into(),
        };
        o.push_str(&format!(
            "{:>9} {:>5} {:>6.2} {:>11} {:>11} {:>9} {:>11}\n",
            r.count_now,
            format!("({})", r.count_recorded),
            r.round_trips,
            now.map_or("-".into(), ms),
            r.predicted_ms.map_or("-".into(), ms),
            ratio,
            r.recorded_mean_ms.map_or("-".into(), ms),
        ));
        for st in &r.statements {
            o.push_str(&format!("      {st}\n"));
        }
    }
    o
}

/// The text report; `top` statements listed.
pub fn text(s: &Summary, trace: &str, target: &str, top: usize) -> String {
    let mut o = String::new();
    let speed = if s.speed == "max" {
        "as fast as the server answers (--speed max)".to_string()
    } else if s.speed == "1" {
        "at the recorded pace".to_string()
    } else {
        format!("at {}x the recorded pace", s.speed)
    };
    o.push_str(&format!(
        "replay of {trace} on {target}, {speed}: {:.2} s{}\n",
        s.elapsed_s,
        if s.interrupted { " (stopped by Ctrl-C)" } else { "" }
    ));
    let (r, n) = (&s.replayed, &s.recorded);
    if let Some(l) = &s.left_out {
        o.push_str(&left_out(l));
    }
    o.push_str(&sessions(s));
    o.push_str(&format!(
        "requests     {} answered (recorded {}); {} not sent\n",
        r.requests, n.requests, s.fidelity.requests_not_sent
    ));
    o.push_str(&format!(
        "transactions {} (recorded {})\n",
        r.transactions, n.transactions
    ));
    let tt = &s.transaction_times;
    if tt.now.is_some() || tt.recorded.is_some() {
        o.push_str(&format!(
            "             each {}\n             recorded {}\n             with the connects' share (mean connect {}): {} a transaction\n",
            spread(tt.now),
            spread(tt.recorded),
            tt.connect_mean_ms.map_or("-".to_string(), ms),
            tt.per_transaction_ms.map_or("-".to_string(), ms)
        ));
    }
    o.push_str(&format!("response     {}\n", times(s.response)));
    let per = s
        .cpu_per_request_us
        .map(|us| format!(": {} per request", format_ns(us * 1e3)))
        .unwrap_or_default();
    o.push_str(&format!(
        "client CPU   {:.2} s (user {:.2} s, system {:.2} s){per}\n",
        s.cpu_user_s + s.cpu_system_s,
        s.cpu_user_s,
        s.cpu_system_s
    ));
    let f = &s.fidelity;
    let on_time = f
        .on_time_share
        .map_or("-".to_string(), |v| format!("{:.1}%", v * 100.0));
    let lag = match (&f.lag, &f.lag_note) {
        (_, Some(note)) => note.clone(),
        (l, None) => format!("lag {}", times(*l)),
    };
    o.push_str(&format!("fidelity     on time (lag ≤ 1 ms) {on_time}; {lag}\n"));
    if f.lag_note.is_none() {
        let late = f
            .send_delay_late_share
            .map_or("-".to_string(), |v| format!("{:.2}%", v * 100.0));
        o.push_str(&format!(
            "             of which waiting for the server {}\n",
            times(f.waiting_for_server)
        ));
        if s.pool.is_some() {
            o.push_str(&format!(
                "             waiting for the pool {}\n",
                times(f.waiting_for_pool)
            ));
        }
        o.push_str(&format!(
            "             and connbench's own send delay {}; over 1 ms {late}\n",
            times(f.send_delay)
        ));
    }
    o.push_str(&format!(
        "             failed now but not when recorded {}; failed when recorded but not now {}; sessions not connected {}\n",
        f.failed_now_not_then, f.failed_then_not_now, f.sessions_not_connected
    ));
    for e in &f.failed_now_examples {
        o.push_str(&format!("             e.g. {e}\n"));
    }
    for (e, k) in f.connect_errors.iter().chain(&f.connections_lost) {
        o.push_str(&format!("             {k} x {e}\n"));
    }
    o.push_str(&shapes(s, top));
    o.push_str(&format!("\nstatements by recorded calls (top {top}):\n"));
    o.push_str("    calls (rec)     p50 now     p50 rec     p99 now     p99 rec  fail (rec)  statement\n");
    for st in s.statements.iter().take(top) {
        o.push_str(&format!(
            "{:>9} {:>5} {:>11} {:>11} {:>11} {:>11} {:>5} {:>4}  {}\n",
            st.calls,
            format!("({})", st.calls_recorded),
            cell(st.now, |t| t.p50_ms),
            cell(st.recorded, |t| t.p50_ms),
            cell(st.now, |t| t.p99_ms),
            cell(st.recorded, |t| t.p99_ms),
            st.failures,
            format!("({})", st.failures_recorded),
            st.text
        ));
    }
    if !s.failures.is_empty() {
        o.push_str("\nfailures by SQLSTATE:\n      now  recorded  sqlstate\n");
        for f in &s.failures {
            o.push_str(&format!("{:>9} {:>9}  {}\n", f.now, f.recorded, f.sqlstate));
        }
    }
    o.push_str(&state_warnings(s));
    if let Some(cut) = &s.trace_cut {
        o.push_str(&format!("\nwarning: {cut}; what came before was replayed\n"));
    }
    o.push_str(&format!("\nmethod: {}\n", s.method));
    o
}

/// `--without`'s line: what was left out, by fingerprint, and the housekeeping kept.
fn left_out(l: &crate::replay::without::LeftOut) -> String {
    let mut o = format!(
        "left out     {} request(s) (--without {}; the recorded counts below are of the rest)\n",
        l.requests,
        l.without.join(", --without ")
    );
    let kind = |k: Option<connbench_trace::housekeeping::Kind>| k.map_or("statement", |k| k.label());
    for r in &l.rows {
        let text: String = r.text.chars().take(80).collect();
        o.push_str(&format!(
            "             {:>6} {} {} ({}, {:.2} ms recorded): {text}\n",
            r.requests,
            kind(r.kind),
            r.fingerprint,
            "left out",
            r.recorded_ms
        ));
    }
    for r in &l.kept {
        let text: String = r.text.chars().take(80).collect();
        o.push_str(&format!(
            "             {:>6} {} {} kept (a SET changes the session): {text}\n",
            r.requests,
            kind(r.kind),
            r.fingerprint
        ));
    }
    o
}

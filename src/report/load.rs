//! The load report: text for the terminal, JSON with stable keys (schema in
//! docs/schema/load.schema.json). Both read `stats::load` values only.

use std::fmt::Write;

use serde::Serialize;

use super::{format_bytes, format_ns};
use crate::host::MachineUse;
use crate::load::plan::{End, Policy};
use crate::net::transport::TlsInfo;
use crate::stats::load::{
    CommandSummary, FailureSummary, IntervalSummary, Latency, LoadSummary, STEAL_LIMIT_PERCENT,
};
use crate::workload::QueryMode;

/// What was run, as the report states it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct LoadSettings {
    pub target: String,
    pub conninfo: String,
    pub workload: String,
    pub mode: QueryMode,
    pub clients: usize,
    pub threads: usize,
    pub end: End,
    pub warmup_s: f64,
    pub rate_tps: Option<f64>,
    /// -L, in milliseconds; null without.
    #[serde(default)]
    pub latency_limit_ms: Option<f64>,
    /// The base seed of the clients' random generators (give it to --random-seed to
    /// repeat the run's random choices); in a many-worker run's settings, as given
    /// (null when each worker drew its own from the clock).
    #[serde(default)]
    pub random_seed: Option<u64>,
    /// Script variables given with -D, by name: an integer as a number, anything else
    /// as the string given.
    #[serde(default)]
    pub defines: std::collections::BTreeMap<String, DefineValue>,
    pub think_ms: f64,
    pub connection: Policy,
    pub interval_s: f64,
    pub scale: i64,
    /// The tables the built-in scripts ran on and `:scale` was read from: `pgbench_*`
    /// (pgbench -i's) or `SCHEMA.*` (connbench init's); null where not recorded.
    #[serde(default)]
    pub tables: Option<String>,
    /// The scripts, numbered from 1 in this order (the log's script_no counts from 0),
    /// each drawn per transaction with probability weight / total weight.
    #[serde(default)]
    pub scripts: Vec<ScriptSetting>,
    /// --max-tries: tries in all of a transaction failing with a serialization failure
    /// or a deadlock (1: none retried; 0: no limit but -T or -L).
    #[serde(default = "one")]
    pub max_tries: u32,
    /// --failures-detailed: the text report splits failures by type.
    #[serde(default)]
    pub failures_detailed: bool,
}

fn one() -> u32 {
    1
}

/// One script of the run as given.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ScriptSetting {
    pub name: String,
    pub weight: u32,
}

/// One script's measured transactions.
#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
struct ScriptFigures<'a> {
    name: &'a str,
    weight: u32,
    transactions: u64,
    failed_transactions: u64,
}

/// A -D value as reported: an integer, or the text given.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum DefineValue {
    Integer(i64),
    Text(String),
}

impl DefineValue {
    pub fn of(v: &str) -> DefineValue {
        match v.trim().parse() {
            Ok(i) => DefineValue::Integer(i),
            Err(_) => DefineValue::Text(v.to_string()),
        }
    }
}

/// The method statement printed with every load report.
pub const METHOD: &str = "Each client runs the workload's transaction in a loop on its own connection handling \
(persistent, per-transaction or pooled). Latency runs from a transaction's start (its intended start under a \
target rate) to its last ReadyForQuery, including any connect or pool wait it needed; warm-up transactions are \
not recorded. Percentiles come from HDR histograms with 3 significant digits. tps is measured transactions over \
the measured time; tps_excluding_connect subtracts the average time per client spent connecting during the \
measurement. Client CPU is the worker threads' user+system time during the measurement.";

#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
struct LatencyMs {
    n: u64,
    mean_ms: f64,
    stddev_ms: f64,
    min_ms: f64,
    p50_ms: f64,
    p90_ms: f64,
    p95_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    max_ms: f64,
}

fn ms(l: &Latency) -> LatencyMs {
    let f = |ns: u64| ns as f64 / 1e6;
    LatencyMs {
        n: l.n,
        mean_ms: l.mean_ns / 1e6,
        stddev_ms: l.stddev_ns / 1e6,
        min_ms: f(l.min_ns),
        p50_ms: f(l.p50_ns),
        p90_ms: f(l.p90_ns),
        p95_ms: f(l.p95_ns),
        p99_ms: f(l.p99_ns),
        p999_ms: f(l.p999_ns),
        max_ms: f(l.max_ns),
    }
}

#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
struct PhaseLatency {
    name: &'static str,
    #[serde(flatten)]
    latency: LatencyMs,
}

#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
struct Connections<'a> {
    opened_before_measurement: u64,
    setup_connect_mean_ms: Option<f64>,
    /// How the connections opened before the measurement came up.
    ramp: Ramp,
    /// Connect attempts refused during the measurement (the server's or pooler's "too
    /// many connections", nothing listening, a full backlog): each counted once, then
    /// backed off; never a failed transaction. By kind in `refused`.
    failed_attempts: u64,
    refused: &'a [FailureSummary],
    opened_during_measurement: u64,
    connect_time_s: f64,
    connect: Option<LatencyMs>,
    phases: Vec<PhaseLatency>,
}

/// The connect ramp: the connections opened before the measurement (a persistent
/// client's, a pool's), paced by --connect-rate.
#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
struct Ramp {
    /// Connections to open, and those opened (the rest start the run unconnected and go
    /// on trying in it).
    wanted: u64,
    connected: u64,
    /// The pace asked for, connects a second; null: all at once.
    rate_per_s: Option<f64>,
    /// From the first attempt to the last connection made.
    took_s: f64,
    /// The connections after the first over `took_s`; null with fewer than two.
    achieved_per_s: Option<f64>,
    /// Attempts that failed during the ramp (a refused one is counted, backed off and
    /// tried again), and by kind.
    failed_attempts: u64,
    failures: Vec<FailureSummary>,
}

#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
struct Summary<'a> {
    transactions: u64,
    failed_transactions: u64,
    /// With -L: successful transactions slower than the limit (null without -L).
    late_transactions: Option<u64>,
    /// With -L and -R: transactions skipped, never sent, because they were already
    /// further behind schedule than the limit when due (null otherwise). Not in
    /// `transactions`.
    skipped_transactions: Option<u64>,
    measured_s: f64,
    tps: f64,
    tps_excluding_connect: f64,
    latency: Option<LatencyMs>,
    schedule_lag: Option<LatencyMs>,
    connections: Connections<'a>,
    cpu_user_s: f64,
    cpu_system_s: f64,
    cpu_per_transaction_us: Option<f64>,
    /// Cores the client's threads used on average over the window.
    client_cores: f64,
    /// The client's threads' context switches per transaction.
    client_voluntary_switches_per_transaction: Option<f64>,
    client_involuntary_switches_per_transaction: Option<f64>,
    /// Context switches of the whole machine (every CPU, every process) per transaction.
    context_switches_per_transaction: Option<f64>,
    /// Packets the whole machine sent and received (every interface; a packet between
    /// two local processes crosses loopback and counts once each way; a Unix socket sends
    /// none) per transaction.
    packets_sent_per_transaction: Option<f64>,
    packets_received_per_transaction: Option<f64>,
    /// The server's CPU over the window (every backend, those that exited included, the
    /// postmaster and its background processes); null when not measured, and then
    /// `server_cpu_not_measured` says why.
    server_cpu_s: Option<f64>,
    server_cpu_user_s: Option<f64>,
    server_cpu_system_s: Option<f64>,
    server_cpu_per_transaction_us: Option<f64>,
    /// Per connection opened during the window (per-transaction or pooled runs), the
    /// transactions' work included; null when none was opened.
    server_cpu_per_connect_us: Option<f64>,
    server_cpu_not_measured: Option<&'a str>,
    /// A pooler on the path (the sandbox's PgBouncer), apart from the server.
    pooler_cpu_s: Option<f64>,
    pooler_cpu_per_transaction_us: Option<f64>,
    /// The route's relays (a sidecar, a distance), apart from the client; null without
    /// relays.
    relay_cpu_s: Option<f64>,
    relay_cpu_per_transaction_us: Option<f64>,
    /// Where the CPU went in one sentence, and whether the run was CPU-bound.
    utilisation: Option<String>,
    /// The whole machine during the measurement: cores busy, context switches, and the
    /// hypervisor's steal (above 5% the figures describe the neighbour as much as the
    /// path); null where /proc/stat cannot be read.
    machine: Option<MachineUse>,
    round_trips_per_transaction: Option<f64>,
    bytes_sent: u64,
    bytes_received: u64,
    failures: &'a [FailureSummary],
    /// Each command of the script over the measured transactions (`-r`): completed
    /// executions, failures, and latency from the command's start to its end; null
    /// without -r.
    per_command: Option<&'a [CommandSummary]>,
    /// Per script, in the order given (settings.scripts): measured transactions that
    /// succeeded and that failed.
    scripts: Vec<ScriptFigures<'a>>,
    /// Measured transactions tried more than once under --max-tries (succeeded or
    /// failed in the end), and their retries in all; 0 with --max-tries 1.
    retried_transactions: u64,
    retries: u64,
    /// Failed transactions by pgbench's types: serialization failures (SQLSTATE 40001),
    /// deadlocks (40P01), and every other failure.
    serialization_failures: u64,
    deadlock_failures: u64,
    other_failures: u64,
}

#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
struct Report<'a> {
    connbench_version: &'static str,
    command: &'static str,
    method: &'static str,
    settings: &'a LoadSettings,
    server_version: Option<&'a str>,
    tls: Option<&'a TlsInfo>,
    interrupted: bool,
    summary: Summary<'a>,
    series: &'a [IntervalSummary],
}

/// The JSON Schema of `load --json`, generated from the types above (committed as
/// docs/schema/load.schema.json; a test keeps the file equal to this).
pub fn schema() -> serde_json::Value {
    crate::units::output_schema::<Report<'static>>()
}

/// The load report as pretty JSON.
pub fn json(
    settings: &LoadSettings,
    s: &LoadSummary,
    server_version: Option<&str>,
    tls: Option<&TlsInfo>,
    interrupted: bool,
) -> String {
    let report = Report {
        connbench_version: env!("CARGO_PKG_VERSION"),
        command: "load",
        method: METHOD,
        settings,
        server_version,
        tls,
        interrupted,
        summary: Summary {
            transactions: s.transactions,
            failed_transactions: s.failed_transactions,
            late_transactions: settings.latency_limit_ms.map(|_| s.late),
            skipped_transactions: settings
                .latency_limit_ms
                .and(settings.rate_tps)
                .map(|_| s.skipped),
            measured_s: s.measured_s,
            tps: s.tps,
            tps_excluding_connect: s.tps_excluding_connect,
            latency: s.latency.as_ref().map(ms),
            schedule_lag: s.lag.as_ref().map(ms),
            connections: Connections {
                opened_before_measurement: s.setup_connects,
                setup_connect_mean_ms: s.setup_connect_mean_ns.map(|n| n / 1e6),
                ramp: Ramp {
                    wanted: s.ramp.wanted,
                    connected: s.ramp.connected,
                    rate_per_s: s.ramp.rate,
                    took_s: s.ramp.took.as_secs_f64(),
                    achieved_per_s: s.ramp.achieved_rate(),
                    failed_attempts: s.ramp.failed_attempts,
                    failures: crate::stats::load::failure_summaries(&s.ramp.failures),
                },
                failed_attempts: s.refused_attempts,
                refused: &s.refused,
                opened_during_measurement: s.connects,
                connect_time_s: s.connect_time_s,
                connect: s.connect.as_ref().map(ms),
                phases: s
                    .connect_phases
                    .iter()
                    .map(|(p, l)| PhaseLatency {
                        name: p.as_str(),
                        latency: ms(l),
                    })
                    .collect(),
            },
            cpu_user_s: s.cpu_user_s,
            cpu_system_s: s.cpu_system_s,
            cpu_per_transaction_us: s.cpu_per_transaction_us,
            client_cores: s.client_cores,
            client_voluntary_switches_per_transaction: s.client_switches_per_transaction.map(|c| c.0),
            client_involuntary_switches_per_transaction: s.client_switches_per_transaction.map(|c| c.1),
            context_switches_per_transaction: s.context_switches_per_transaction,
            packets_sent_per_transaction: s.packets_per_transaction.map(|p| p.0),
            packets_received_per_transaction: s.packets_per_transaction.map(|p| p.1),
            server_cpu_s: s.server_cpu.map(|c| c.total_s()),
            server_cpu_user_s: s.server_cpu.map(|c| c.user_s),
            server_cpu_system_s: s.server_cpu.map(|c| c.system_s),
            server_cpu_per_transaction_us: s.server_cpu.and_then(|c| c.per_transaction_us),
            server_cpu_per_connect_us: s.server_cpu_per_connect_us,
            server_cpu_not_measured: s.server_not_measured.as_deref(),
            pooler_cpu_s: s.pooler_cpu.map(|c| c.total_s()),
            pooler_cpu_per_transaction_us: s.pooler_cpu.and_then(|c| c.per_transaction_us),
            relay_cpu_s: s.relay_cpu.map(|c| c.total_s()),
            relay_cpu_per_transaction_us: s.relay_cpu.and_then(|c| c.per_transaction_us),
            utilisation: crate::stats::load::utilisation(s),
            machine: s.machine,
            round_trips_per_transaction: s.round_trips_per_transaction,
            bytes_sent: s.bytes_sent,
            bytes_received: s.bytes_received,
            failures: &s.failures,
            per_command: s.per_command.as_deref(),
            retried_transactions: s.retried,
            retries: s.retries,
            serialization_failures: failures_of(s, "40001"),
            deadlock_failures: failures_of(s, "40P01"),
            other_failures: s
                .failed_transactions
                .saturating_sub(failures_of(s, "40001") + failures_of(s, "40P01")),
            scripts: settings
                .scripts
                .iter()
                .zip(&s.scripts)
                .map(|(w, c)| ScriptFigures {
                    name: &w.name,
                    weight: w.weight,
                    transactions: c.transactions,
                    failed_transactions: c.failed,
                })
                .collect(),
        },
        series: &s.series,
    };
    serde_json::to_string_pretty(&report).expect("serialisable") + "\n"
}

/// Failures of one kind (a SQLSTATE), counted.
fn failures_of(s: &LoadSummary, kind: &str) -> u64 {
    s.failures
        .iter()
        .filter(|f| f.kind == kind)
        .map(|f| f.count)
        .sum()
}

fn policy_words(p: &Policy) -> String {
    match p {
        Policy::Persistent => "persistent connections".into(),
        Policy::PerTransaction => "a new connection per transaction".into(),
        Policy::Pool {
            size_per_thread,
            max_lifetime,
            idle_timeout,
        } => {
            let mut s = format!("a client-side pool of {size_per_thread} per thread");
            if let Some(l) = max_lifetime {
                let _ = write!(s, ", max lifetime {}", super::format_duration(*l));
            }
            if let Some(t) = idle_timeout {
                let _ = write!(s, ", idle timeout {}", super::format_duration(*t));
            }
            s
        }
    }
}

/// The load report for the terminal (80 columns).
pub fn text(
    settings: &LoadSettings,
    s: &LoadSummary,
    server_version: Option<&str>,
    interrupted: bool,
    show_series: bool,
) -> String {
    let mut o = String::new();
    head(&mut o, settings, server_version, interrupted);
    counts(&mut o, settings, s);
    timing(&mut o, settings, s);
    resources(&mut o, s);
    failures(&mut o, s);
    if show_series {
        series(&mut o, s);
    }
    o
}

/// What was run, on what, against which server; and that Ctrl-C cut it short.
fn head(o: &mut String, settings: &LoadSettings, server_version: Option<&str>, interrupted: bool) {
    let end = match settings.end {
        End::Duration(d) => format!("{} s", d.as_secs_f64()),
        End::TransactionsPerClient(n) => format!("{n} transactions per client"),
    };
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let warmup = if settings.warmup_s > 0.0 {
        format!("after {} s warm-up", settings.warmup_s)
    } else {
        "no warm-up".to_string()
    };
    let _ = writeln!(
        o,
        "connbench load: {}, {} protocol, {} on {}, {end}, {warmup}",
        settings.workload,
        settings.mode.as_str(),
        plural(settings.clients, "client"),
        plural(settings.threads, "thread"),
    );
    let _ = writeln!(o, "  with {}", policy_words(&settings.connection));
    if let Some(tables) = &settings.tables {
        // sysbench's tables have a size, which their description says, and no scale.
        if tables.starts_with("sbtest") {
            let _ = writeln!(o, "  on tables {tables}");
        } else {
            let _ = writeln!(o, "  on tables {tables}, scale {}", settings.scale);
        }
    }
    let _ = writeln!(
        o,
        "target: {}  {}{}",
        settings.target,
        settings.conninfo,
        server_version
            .map(|v| format!(" · server {v}"))
            .unwrap_or_default()
    );
    if interrupted {
        let _ = writeln!(
            o,
            "interrupted: the figures below cover the measurement before Ctrl-C"
        );
    }
}

/// Transactions, failures by type, retries, and each script's share.
fn counts(o: &mut String, settings: &LoadSettings, s: &LoadSummary) {
    let _ = writeln!(
        o,
        "\ntransactions  {} in {:.2} s, {} failed",
        s.transactions, s.measured_s, s.failed_transactions
    );
    if settings.failures_detailed || settings.max_tries != 1 {
        let (ser, dead) = (failures_of(s, "40001"), failures_of(s, "40P01"));
        let _ = writeln!(
            o,
            "failed by type serialization {ser}, deadlock {dead}, other {}",
            s.failed_transactions.saturating_sub(ser + dead)
        );
    }
    if settings.max_tries != 1 {
        let all = s.transactions + s.failed_transactions;
        let _ = writeln!(
            o,
            "retried       {} of {} transactions ({:.3}%), {} retries in all (--max-tries {})",
            s.retried,
            all,
            100.0 * s.retried as f64 / all.max(1) as f64,
            s.retries,
            if settings.max_tries == 0 {
                "0: no limit".to_string()
            } else {
                settings.max_tries.to_string()
            }
        );
    }
    if settings.scripts.len() > 1 {
        let total_weight: u64 = settings.scripts.iter().map(|w| u64::from(w.weight)).sum();
        let all: u64 = s.scripts.iter().map(|c| c.transactions + c.failed).sum();
        for (i, (w, c)) in settings.scripts.iter().zip(&s.scripts).enumerate() {
            let _ = writeln!(
                o,
                "  script {} {} weight {} ({:.1}% targeted): {} transactions ({:.1}%), {} failed",
                i + 1,
                w.name,
                w.weight,
                100.0 * f64::from(w.weight) / total_weight.max(1) as f64,
                c.transactions,
                100.0 * (c.transactions + c.failed) as f64 / all.max(1) as f64,
                c.failed
            );
        }
    }
}

/// Throughput, latency, the latency limit, connections and the rate's schedule lag.
fn timing(o: &mut String, settings: &LoadSettings, s: &LoadSummary) {
    let _ = writeln!(
        o,
        "tps           {:.1} (including connection time), {:.1} (excluding)",
        s.tps, s.tps_excluding_connect
    );
    if let Some(l) = &s.latency {
        let _ = writeln!(
            o,
            "latency       mean {} ± {}\n              p50 {}  p90 {}  p95 {}  p99 {}  p99.9 {}  max {}",
            format_ns(l.mean_ns),
            format_ns(l.stddev_ns),
            format_ns(l.p50_ns as f64),
            format_ns(l.p90_ns as f64),
            format_ns(l.p95_ns as f64),
            format_ns(l.p99_ns as f64),
            format_ns(l.p999_ns as f64),
            format_ns(l.max_ns as f64),
        );
    }
    if let Some(limit) = settings.latency_limit_ms {
        let share = |n: u64, of: u64| 100.0 * n as f64 / of.max(1) as f64;
        let _ = writeln!(
            o,
            "late          {} of {} transactions above the {} latency limit ({:.3}%)",
            s.late,
            s.transactions,
            format_ns(limit * 1e6),
            share(s.late, s.transactions)
        );
        if settings.rate_tps.is_some() {
            let due = s.transactions + s.failed_transactions + s.skipped;
            let _ = writeln!(
                o,
                "skipped       {} of {} due ({:.3}%): already over the limit behind schedule, so never sent",
                s.skipped,
                due,
                share(s.skipped, due)
            );
        }
    }
    let mut conn = format!("connections   {} opened before the measurement", s.setup_connects);
    if let Some(m) = s.setup_connect_mean_ns {
        let _ = write!(conn, " (mean {})", format_ns(m));
    }
    let _ = write!(conn, ", {} during it", s.connects);
    ramp_lines(&mut conn, s);
    if let Some(c) = &s.connect {
        let _ = write!(
            conn,
            "\n              connect mean {}, p99 {}; {:.2} s connecting in all",
            format_ns(c.mean_ns),
            format_ns(c.p99_ns as f64),
            s.connect_time_s
        );
    }
    let _ = writeln!(o, "{conn}");
    if let Some(lag) = &s.lag {
        let achieved = s.tps;
        let _ = writeln!(
            o,
            "rate          target {:.1} tps, achieved {:.1} tps; schedule lag mean {}, p99 {}, max {}",
            settings.rate_tps.unwrap_or(0.0),
            achieved,
            format_ns(lag.mean_ns),
            format_ns(lag.p99_ns as f64),
            format_ns(lag.max_ns as f64)
        );
    }
}

/// The connect ramp (when it paced, failed or left clients unconnected) and the attempts
/// refused during the measurement, under the connections line.
fn ramp_lines(conn: &mut String, s: &LoadSummary) {
    let r = &s.ramp;
    let kinds = |m: &std::collections::BTreeMap<String, crate::connect::FailureCount>| {
        m.iter()
            .map(|(k, f)| format!("{k} ×{}", f.count))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if r.rate.is_some() || r.failed_attempts > 0 || r.connected < r.wanted {
        let _ = write!(
            conn,
            "\nconnect ramp  {} of {} connected in {:.2} s",
            r.connected,
            r.wanted,
            r.took.as_secs_f64()
        );
        if let Some(a) = r.achieved_rate() {
            let _ = write!(conn, " ({a:.0}/s");
            match r.rate {
                Some(want) => write!(conn, " of {want:.0}/s asked)"),
                None => write!(conn, ", unpaced)"),
            }
            .ok();
        }
        let _ = write!(conn, "; {} failed attempts", r.failed_attempts);
        if r.failed_attempts > 0 {
            let _ = write!(conn, " ({})", kinds(&r.failures));
        }
    }
    if s.refused_attempts > 0 {
        let listed: Vec<String> = s
            .refused
            .iter()
            .map(|f| format!("{} ×{}", f.kind, f.count))
            .collect();
        let _ = write!(
            conn,
            "\nrefused       {} connect attempts during the measurement, each backed off, none a transaction ({})",
            s.refused_attempts,
            listed.join(", ")
        );
    }
}

/// CPU of the client, server, pooler and relays; switches, cores, steal, network.
fn resources(o: &mut String, s: &LoadSummary) {
    let cpu = s.cpu_user_s + s.cpu_system_s;
    let per = s
        .cpu_per_transaction_us
        .map(|us| format!(": {} per transaction", format_ns(us * 1e3)))
        .unwrap_or_default();
    let _ = writeln!(
        o,
        "client CPU    {:.2} s (user {:.2} s, system {:.2} s){per}",
        cpu, s.cpu_user_s, s.cpu_system_s
    );
    let group = |name: &str, c: &crate::stats::load::GroupCpu, extra: &str| {
        let per = c
            .per_transaction_us
            .map(|us| format!(": {} per transaction", format_ns(us * 1e3)))
            .unwrap_or_default();
        format!(
            "{name:<13} {:.2} s (user {:.2} s, system {:.2} s){per}{extra}\n",
            c.total_s(),
            c.user_s,
            c.system_s
        )
    };
    match (&s.server_cpu, &s.server_not_measured) {
        (Some(c), _) => {
            let per_connect = s
                .server_cpu_per_connect_us
                .map(|us| format!(", {} per new connection", format_ns(us * 1e3)))
                .unwrap_or_default();
            o.push_str(&group("server CPU", c, &per_connect));
        }
        (None, Some(why)) => {
            let _ = writeln!(o, "server CPU    {why}");
        }
        (None, None) => {}
    }
    if let Some(c) = &s.pooler_cpu {
        o.push_str(&group("pooler CPU", c, ""));
    }
    if let Some(c) = &s.relay_cpu {
        o.push_str(&group("relay CPU", c, ", apart from the client's"));
    }
    if let Some(cs) = s.context_switches_per_transaction {
        let client = s
            .client_switches_per_transaction
            .map(|(v, i)| format!("; the client's {v:.2} voluntary, {i:.2} involuntary"))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "switches      {cs:.1} context switches per transaction, whole machine{client}"
        );
    }
    if let Some(u) = crate::stats::load::utilisation(s) {
        let _ = writeln!(o, "cores         {u}");
    }
    if let Some(m) = &s.machine {
        let _ = writeln!(
            o,
            "steal         {:.1}% of the machine's CPU time went to another tenant (hypervisor steal){}",
            m.steal_percent,
            if m.steal_percent > STEAL_LIMIT_PERCENT {
                ": above 5%, so these figures are slower than the path; re-run"
            } else {
                ""
            }
        );
    }
    let n = s.transactions.max(1) as f64;
    let packets = s
        .packets_per_transaction
        .map(|(out, back)| {
            format!("; the machine's packets per transaction: {out:.1} sent, {back:.1} received (every interface)")
        })
        .unwrap_or_default();
    let _ = writeln!(
        o,
        "network       {} sent, {} received ({} and {} per transaction){packets}",
        format_bytes(s.bytes_sent as f64),
        format_bytes(s.bytes_received as f64),
        format_bytes(s.bytes_sent as f64 / n),
        format_bytes(s.bytes_received as f64 / n)
    );
}

/// Failure examples, and per-command figures when measured.
fn failures(o: &mut String, s: &LoadSummary) {
    for f in &s.failures {
        let class = f.class.as_deref().map(|c| format!(" [{c}]")).unwrap_or_default();
        let _ = writeln!(o, "failed        {}x {}{class}: {}", f.count, f.kind, f.example);
    }
    if let Some(commands) = &s.per_command {
        let _ = writeln!(
            o,
            "\nper command, over the measured transactions (mean exact; p50 and p99 from HDR histograms within 1%):\n{:>10} {:>10} {:>10} {:>11} {:>8}  command",
            "mean", "p50", "p99", "executions", "failed"
        );
        let f = |ms: Option<f64>| ms.map(|ms| format_ns(ms * 1e6)).unwrap_or_else(|| "-".into());
        for c in commands {
            let _ = writeln!(
                o,
                "{:>10} {:>10} {:>10} {:>11} {:>8}  {}",
                f(c.mean_ms),
                f(c.p50_ms),
                f(c.p99_ms),
                c.executions,
                c.failures,
                c.command
            );
        }
    }
}

/// The per-interval series (`--series`).
fn series(o: &mut String, s: &LoadSummary) {
    if !s.series.is_empty() {
        let _ = writeln!(
            o,
            "\n{:>8} {:>8} {:>10} {:>10} {:>10} {:>10} {:>7} {:>8}",
            "from s", "to s", "tps", "mean ms", "p95 ms", "p99 ms", "failed", "connects"
        );
        let f = |v: Option<f64>| v.map(|v| format!("{v:.3}")).unwrap_or_else(|| "-".into());
        for iv in &s.series {
            let _ = writeln!(
                o,
                "{:>8.1} {:>8.1} {:>10.1} {:>10} {:>10} {:>10} {:>7} {:>8}",
                iv.start_s,
                iv.end_s,
                iv.tps,
                f(iv.mean_ms),
                f(iv.p95_ms),
                f(iv.p99_ms),
                iv.failures,
                iv.connects
            );
        }
    }
}

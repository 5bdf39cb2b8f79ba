//! Summaries of a load run, read from the merged measurements.
//!
//! Method. Latency percentiles come from HDR histograms (3 significant digits, so a
//! reported value is within 0.1% of the recorded one); p50 etc. are HdrHistogram's
//! `value_at_quantile`, the smallest recorded value at or above that share of samples.
//! Mean and standard deviation are the histogram's (population). `tps` is measured
//! transactions divided by the measured time (from the start of the measurement to the
//! last measured transaction's end, or the end of the window if later), so it includes
//! the time clients spent connecting. `tps_excluding_connect` divides by that time minus
//! the average time per client spent connecting during the measurement (pgbench's
//! "without connection time" in spirit); it equals `tps` when no connect happened
//! during the measurement. Interval figures use the per-interval histograms
//! (microseconds, 2 significant digits).

use hdrhistogram::Histogram;

use crate::connect::FailureCount;
use crate::load::plan::LoadRun;
use crate::proto::Phase;

/// A latency distribution from a histogram, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Latency {
    pub n: u64,
    pub mean_ns: f64,
    pub stddev_ns: f64,
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p95_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

/// Summarises a histogram scaled by `unit_ns` (1 for nanosecond histograms, 1000 for
/// microsecond ones); `None` when empty.
pub fn latency(h: &Histogram<u64>, unit_ns: u64) -> Option<Latency> {
    if h.is_empty() {
        return None;
    }
    let q = |p: f64| h.value_at_quantile(p) * unit_ns;
    Some(Latency {
        n: h.len(),
        mean_ns: h.mean() * unit_ns as f64,
        stddev_ns: h.stdev() * unit_ns as f64,
        min_ns: h.min() * unit_ns,
        p50_ns: q(0.50),
        p90_ns: q(0.90),
        p95_ns: q(0.95),
        p99_ns: q(0.99),
        p999_ns: q(0.999),
        max_ns: h.max() * unit_ns,
    })
}

/// Failures of one kind.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct FailureSummary {
    pub kind: String,
    /// SQLSTATE class and its name, for server errors.
    pub class: Option<String>,
    pub count: u64,
    pub example: String,
}

/// One interval of the series.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct IntervalSummary {
    pub start_s: f64,
    pub end_s: f64,
    pub transactions: u64,
    pub tps: f64,
    pub failures: u64,
    pub connects: u64,
    /// Connect attempts refused in the interval (each counted once, backed off; never a
    /// failed transaction).
    #[serde(default)]
    pub refused_connects: u64,
    pub mean_ms: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

/// One script command over the measured transactions (`-r`). Latency is from the
/// command's start to its end on the client: a SQL command's round trip(s) and the
/// server's work, a `\set`'s arithmetic, a `\sleep`'s pause.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CommandSummary {
    /// The command as written (a SQL command on one line).
    pub command: String,
    /// Completed executions.
    pub executions: u64,
    /// Executions that failed: the transaction failed at this command.
    pub failures: u64,
    /// Exact (a sum of nanoseconds over the executions); null with none.
    pub mean_ms: Option<f64>,
    /// From an HDR histogram at 2 significant digits (within 1%); null with none.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

/// Everything a report needs about a load run.
#[derive(Debug, Clone)]
pub struct LoadSummary {
    pub transactions: u64,
    /// With -L: successful transactions over the limit, and those skipped under -R.
    pub late: u64,
    pub skipped: u64,
    pub failed_transactions: u64,
    pub failures: Vec<FailureSummary>,
    pub measured_s: f64,
    pub tps: f64,
    pub tps_excluding_connect: f64,
    pub latency: Option<Latency>,
    pub connects: u64,
    pub connect: Option<Latency>,
    pub connect_phases: Vec<(Phase, Latency)>,
    pub connect_time_s: f64,
    pub setup_connects: u64,
    pub setup_connect_mean_ns: Option<f64>,
    /// The connect ramp before the clock: its time, pace and failed attempts.
    pub ramp: crate::load::plan::ConnectRamp,
    /// Connect attempts refused during the measurement, and by kind.
    pub refused_attempts: u64,
    pub refused: Vec<FailureSummary>,
    pub lag: Option<Latency>,
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    pub cpu_per_transaction_us: Option<f64>,
    /// Cores the client's worker threads used on average over the window.
    pub client_cores: f64,
    /// Voluntary and involuntary context switches of the client's threads, per
    /// transaction.
    pub client_switches_per_transaction: Option<(f64, f64)>,
    /// Context switches of the whole machine (every CPU, every process) per transaction.
    pub context_switches_per_transaction: Option<f64>,
    /// Packets sent and received by the whole machine (every interface, loopback
    /// included) per transaction.
    pub packets_per_transaction: Option<(f64, f64)>,
    /// The server's, the pooler's and the route's relays' CPU, apart from the client's;
    /// `None` where there is none on the path or it was not measured.
    pub server_cpu: Option<GroupCpu>,
    pub pooler_cpu: Option<GroupCpu>,
    pub relay_cpu: Option<GroupCpu>,
    /// The server's CPU per connection opened during the window (per-transaction and
    /// pooled runs), the transactions' work included.
    pub server_cpu_per_connect_us: Option<f64>,
    /// Why the server's CPU is `None`.
    pub server_not_measured: Option<String>,
    /// The whole machine during the measurement (busy cores, steal).
    pub machine: Option<crate::host::MachineUse>,
    /// Network round trips per successful transaction, counted on the socket (its
    /// statements and any connect it made): what a distance multiplies.
    pub round_trips_per_transaction: Option<f64>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Per script command, with `-r`; `None` without.
    pub per_command: Option<Vec<CommandSummary>>,
    /// Per script of the run, in its order: measured transactions that succeeded and
    /// that failed.
    pub scripts: Vec<crate::load::measurements::ScriptCount>,
    /// Transactions tried more than once (--max-tries), and their retries in all.
    pub retried: u64,
    pub retries: u64,
    pub series: Vec<IntervalSummary>,
}

/// CPU of one group of processes on the path (server, pooler, relays) over the window.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct GroupCpu {
    pub user_s: f64,
    pub system_s: f64,
    pub per_transaction_us: Option<f64>,
    /// Cores used on average over the window.
    pub cores: f64,
}

impl GroupCpu {
    fn of((user, system): crate::host::Cpu, transactions: u64, measured_s: f64) -> GroupCpu {
        let total = (user + system).as_secs_f64();
        GroupCpu {
            user_s: user.as_secs_f64(),
            system_s: system.as_secs_f64(),
            per_transaction_us: (transactions > 0).then(|| total * 1e6 / transactions as f64),
            cores: if measured_s > 0.0 { total / measured_s } else { 0.0 },
        }
    }

    pub fn total_s(&self) -> f64 {
        self.user_s + self.system_s
    }
}

/// Where the CPU went, in one sentence: "the server used 1.6 of 2 cores, the client
/// 0.4, ...", and whether the run was CPU-bound: the machine's busy cores (every
/// process, measured) at 90% or more of its cores.
pub fn utilisation(s: &LoadSummary) -> Option<String> {
    let m = s.machine?;
    let mut parts = Vec::new();
    let mut add = |name: &str, cores: f64| parts.push(format!("the {name} {cores:.2}"));
    if let Some(c) = &s.server_cpu {
        add("server", c.cores);
    }
    if let Some(c) = &s.pooler_cpu {
        add("pooler", c.cores);
    }
    if let Some(c) = &s.relay_cpu {
        add("relays", c.cores);
    }
    add("client", s.client_cores);
    let bound = m.busy_cores >= 0.9 * m.cores as f64;
    Some(format!(
        "of {} cores, {} ({:.2} busy in all, every process counted){}",
        m.cores,
        parts.join(", "),
        m.busy_cores,
        if bound {
            ": CPU-bound, so throughput here is what the cores allow"
        } else {
            ""
        }
    ))
}

/// Steal above this share of the machine's CPU time (percent) marks a window as
/// disturbed by the hypervisor: quiet windows on this project's VM read 0-2%, the
/// disturbed ones that halved throughput 20-38%.
pub const STEAL_LIMIT_PERCENT: f64 = 5.0;

/// The SQLSTATE class name of the classes a load run meets (PostgreSQL manual,
/// appendix A).
pub fn sqlstate_class(code: &str) -> Option<String> {
    let class = code.get(..2)?;
    if code.len() != 5 || !code.chars().all(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    let name = match class {
        "08" => "connection exception",
        "22" => "data exception",
        "23" => "integrity constraint violation",
        "25" => "invalid transaction state",
        "26" => "invalid SQL statement name",
        "28" => "invalid authorization specification",
        "3D" => "invalid catalog name",
        "40" => "transaction rollback",
        "42" => "syntax error or access rule violation",
        "53" => "insufficient resources",
        "54" => "program limit exceeded",
        "55" => "object not in prerequisite state",
        "57" => "operator intervention",
        "58" => "system error",
        "XX" => "internal error",
        _ => "other",
    };
    Some(format!("{class} {name}"))
}

/// Failures counted by kind, as a report lists them.
pub fn failure_summaries(m: &std::collections::BTreeMap<String, FailureCount>) -> Vec<FailureSummary> {
    m.iter()
        .map(|(kind, FailureCount { count, example })| FailureSummary {
            kind: kind.clone(),
            class: sqlstate_class(kind),
            count: *count,
            example: example.clone(),
        })
        .collect()
}

/// Summarises a run of `clients` clients with series intervals of `interval_s`.
pub fn summarize_load(run: &LoadRun, clients: usize, interval_s: f64) -> LoadSummary {
    let r = &run.measurements;
    let measured_s = run.measured.as_secs_f64();
    let connect_time_s = r.connect_ns as f64 / 1e9;
    let per_client_connect_s = connect_time_s / clients.max(1) as f64;
    let rate = |n: u64, s: f64| if s > 0.0 { n as f64 / s } else { 0.0 };
    let cpu = run.cpu_user.as_secs_f64() + run.cpu_system.as_secs_f64();
    LoadSummary {
        transactions: r.transactions,
        late: r.late,
        skipped: r.skipped,
        failed_transactions: r.failed_transactions,
        failures: failure_summaries(&r.failures),
        measured_s,
        tps: rate(r.transactions, measured_s),
        tps_excluding_connect: rate(
            r.transactions,
            (measured_s - per_client_connect_s).max(f64::MIN_POSITIVE),
        ),
        latency: latency(&r.latency, 1),
        connects: r.connects,
        connect: latency(&r.connect, 1),
        connect_phases: Phase::ALL
            .iter()
            .filter_map(|&p| latency(&r.connect_phases[p.index()], 1).map(|l| (p, l)))
            .collect(),
        connect_time_s,
        setup_connects: run.setup_connects,
        ramp: run.ramp.clone(),
        refused_attempts: r.refused_attempts,
        refused: failure_summaries(&r.refused),
        setup_connect_mean_ns: (run.setup_connects > 0)
            .then(|| run.setup_connect_ns as f64 / run.setup_connects as f64),
        lag: latency(&r.lag, 1),
        cpu_user_s: run.cpu_user.as_secs_f64(),
        cpu_system_s: run.cpu_system.as_secs_f64(),
        cpu_per_transaction_us: (r.transactions > 0).then(|| cpu * 1e6 / r.transactions as f64),
        client_cores: if measured_s > 0.0 { cpu / measured_s } else { 0.0 },
        client_switches_per_transaction: (r.transactions > 0).then(|| {
            let n = r.transactions as f64;
            (
                run.context_switches.0 as f64 / n,
                run.context_switches.1 as f64 / n,
            )
        }),
        context_switches_per_transaction: run
            .machine
            .filter(|_| r.transactions > 0)
            .map(|m| m.context_switches as f64 / r.transactions as f64),
        packets_per_transaction: run.machine.filter(|_| r.transactions > 0).and_then(|m| {
            let n = r.transactions as f64;
            Some((m.packets_sent? as f64 / n, m.packets_received? as f64 / n))
        }),
        server_cpu: run
            .server_cpu
            .map(|c| GroupCpu::of(c, r.transactions, measured_s)),
        pooler_cpu: run
            .pooler_cpu
            .map(|c| GroupCpu::of(c, r.transactions, measured_s)),
        relay_cpu: run.relay_cpu.map(|c| GroupCpu::of(c, r.transactions, measured_s)),
        server_cpu_per_connect_us: run
            .server_cpu
            .filter(|_| r.connects > 0)
            .map(|(u, s)| (u + s).as_secs_f64() * 1e6 / r.connects as f64),
        server_not_measured: run.server_not_measured.clone(),
        machine: run.machine,
        round_trips_per_transaction: (r.transactions > 0)
            .then(|| r.round_trips as f64 / r.transactions as f64),
        bytes_sent: r.bytes.bytes_sent,
        bytes_received: r.bytes.bytes_received,
        scripts: r.scripts.clone(),
        retried: r.retried,
        retries: r.retries,
        per_command: per_command(run),
        series: series(run, interval_s, measured_s),
    }
}

/// Per command of a script, when they were timed (`--report-per-command`): executions,
/// failures, and the mean, p50, p99 and maximum in ms.
fn per_command(run: &LoadRun) -> Option<Vec<CommandSummary>> {
    let r = &run.measurements;
    (!run.command_texts.is_empty()).then(|| {
        run.command_texts
            .iter()
            .zip(&r.commands)
            .map(|(text, c)| {
                let n = c.latency.len();
                let at = |q: f64| (n > 0).then(|| c.latency.value_at_quantile(q) as f64 / 1e6);
                CommandSummary {
                    command: text.clone(),
                    executions: n,
                    failures: c.failures,
                    mean_ms: (n > 0).then(|| c.sum_ns as f64 / n as f64 / 1e6),
                    p50_ms: at(0.50),
                    p99_ms: at(0.99),
                    max_ms: (n > 0).then(|| c.latency.max() as f64 / 1e6),
                }
            })
            .collect()
    })
}

/// The run per `interval_s` interval: throughput and latency of each.
fn series(run: &LoadRun, interval_s: f64, measured_s: f64) -> Vec<IntervalSummary> {
    let r = &run.measurements;
    let rate = |n: u64, s: f64| if s > 0.0 { n as f64 / s } else { 0.0 };
    let mut h = crate::load::measurements::interval_histogram();
    let n = r.series.len();
    // A last interval shorter than a twentieth of the others (the measurement ended just
    // past an interval's end: a transaction answered in that sliver) is folded into the
    // one before; its own rate would be one transaction over microseconds (6912 tps
    // printed for a 2 s run at 3000-5000 tps, seen under load).
    let sliver = n >= 2 && measured_s - (n - 1) as f64 * interval_s < interval_s / 20.0;
    let shown = if sliver { n - 1 } else { n };
    r.series[..shown]
        .iter()
        .enumerate()
        .map(|(i, iv)| {
            iv.histogram_into(&mut h);
            let (mut transactions, mut failures, mut connects) = (iv.transactions, iv.failures, iv.connects);
            let mut refused_connects = iv.refused;
            let folded = sliver && i + 1 == shown;
            if folded {
                let last = &r.series[n - 1];
                for &(v, k) in &last.latency_us {
                    h.saturating_record_n(v, k);
                }
                transactions += last.transactions;
                failures += last.failures;
                connects += last.connects;
                refused_connects += last.refused;
            }
            let l = latency(&h, 1_000);
            let ms = |f: fn(&Latency) -> f64| l.as_ref().map(f);
            // The last interval may be cut short by the end of the measurement.
            let start_s = i as f64 * interval_s;
            let end_s = if folded {
                measured_s
            } else {
                ((i + 1) as f64 * interval_s).min(measured_s.max(start_s))
            };
            IntervalSummary {
                start_s,
                end_s,
                transactions,
                tps: rate(transactions, end_s - start_s),
                failures,
                connects,
                refused_connects,
                mean_ms: ms(|l| l.mean_ns / 1e6),
                p50_ms: ms(|l| l.p50_ns as f64 / 1e6),
                p95_ms: ms(|l| l.p95_ns as f64 / 1e6),
                p99_ms: ms(|l| l.p99_ns as f64 / 1e6),
                max_ms: ms(|l| l.max_ns as f64 / 1e6),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_summary_is_within_its_precision() {
        let mut h = crate::load::measurements::latency_histogram();
        for v in 1..=10_000u64 {
            h.record(v * 1_000).unwrap();
        }
        let l = latency(&h, 1).unwrap();
        assert_eq!(l.n, 10_000);
        let close = |got: u64, want: u64| (got as f64 - want as f64).abs() / want as f64 <= 0.001;
        assert!(close(l.p50_ns, 5_000_000), "{}", l.p50_ns);
        assert!(close(l.p99_ns, 9_900_000), "{}", l.p99_ns);
        assert!(close(l.max_ns, 10_000_000), "{}", l.max_ns);
        assert!((l.mean_ns - 5_000_500.0).abs() / 5_000_500.0 < 0.001);
    }

    #[test]
    fn sqlstate_classes() {
        assert_eq!(
            sqlstate_class("57P01").as_deref(),
            Some("57 operator intervention")
        );
        assert_eq!(
            sqlstate_class("40001").as_deref(),
            Some("40 transaction rollback")
        );
        assert_eq!(sqlstate_class("query:io-unexpectedeof"), None);
    }
}

//! Load from many machines: each worker process runs its share of one load run and
//! saves what it measured to a shared store, and the run is read back merged.
//!
//! A worker joins the named run (the first creates it), registers its index, measures
//! its clock's offset from the store's database server, connects its clients, says it is
//! ready, and waits for the others. The first to see every worker ready proposes a start
//! half a second ahead on the store's clock; one atomic update makes the first proposal
//! the run's, and every worker sleeps until that instant on its own clock (corrected by
//! its offset). Each saves its intervals as they end and its whole record at the end.
//!
//! Merging is exact: HDR histograms add without loss, so the merged percentiles are those
//! of one histogram of every sample, never averages of percentiles. Counts add; tps is
//! over the span from the first worker's measured start to the last one's end, on the
//! store's clock; the start skew is the spread of the instants the workers passed the
//! agreed start, as each measured it. The connect ramps are put on the store's clock
//! too (each worker's offset) and merged from the first attempt of any worker to the
//! last connection of any, their attempts and refusals summed, as are the connects
//! refused in each interval.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;

use super::store::{self, Status, Store, WorkerEnd, WorkerInterval, WorkerRow};
use crate::connect::FailureCount;
use crate::host::{Cpu, MachineUse};
use crate::load::measurements::{interval_histogram, latency_histogram, Interval, Measurements, SeriesEntry};
use crate::load::plan::{ConnectRamp, LoadRun, StartGate};
use crate::net::transport::TlsInfo;

/// How far ahead of the moment every worker is ready the run starts: enough for every
/// worker to poll the store (every 10 ms) and for a worker on another continent to see it.
const START_LEAD: Duration = Duration::from_millis(500);
/// How often a waiting worker polls the store.
const POLL: Duration = Duration::from_millis(10);

/// Worker `index`'s share of a run of `total` clients over `workers` workers: its first
/// client's id and its number of clients (the first `total % workers` workers take one
/// more).
pub fn share(total: usize, workers: usize, index: usize) -> Result<(usize, usize)> {
    if workers == 0 || index >= workers {
        bail!(
            "--worker-index {index} is not below --workers {workers}: indices run from 0 to {}",
            workers.max(1) - 1
        );
    }
    if total < workers {
        bail!("--clients {total} cannot be split over --workers {workers}: each worker needs at least one client");
    }
    let (base, extra) = (total / workers, total % workers);
    Ok((index * base + index.min(extra), base + usize::from(index < extra)))
}

/// This machine's clock in microseconds since the epoch.
fn local_clock_us() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// The store server's clock minus this machine's, in µs, from the reading with the
/// shortest round trip of a few (its error is at most half that round trip, which is
/// returned too). A SQLite store's clock is this machine's: (0, 0).
pub fn clock_offset(store: &Store) -> Result<(i64, i64)> {
    let mut best: Option<(i64, i64)> = None;
    for _ in 0..16 {
        let t0 = local_clock_us();
        let Some(server) = store.db().server_clock_us()? else {
            return Ok((0, 0));
        };
        let t1 = local_clock_us();
        let (rtt, offset) = (t1 - t0, server - (t0 + t1) / 2);
        if best.is_none_or(|(_, r)| rtt < r) {
            best = Some((offset, rtt));
        }
    }
    best.context("no clock reading")
}

/// The host name, as workers are listed.
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into the buffer we own.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    if ok && end > 0 {
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        "unknown".into()
    }
}

/// One worker of a many-machine run, joined and registered.
pub struct Worker {
    pub store: Arc<Mutex<Store>>,
    pub run: i64,
    pub name: String,
    pub index: usize,
    pub workers: usize,
    /// When this worker passed the agreed start, on the store's clock (µs).
    pub started_at_us: Arc<Mutex<Option<i64>>>,
}

impl Worker {
    /// Joins run `name` (creating it if first) with the whole run's `settings`, and
    /// registers worker `index`.
    pub fn join(
        store: Store,
        name: &str,
        workers: usize,
        index: usize,
        settings: &serde_json::Value,
        env: &store::Environment,
    ) -> Result<Worker> {
        let run = store.join_worker_run(name, workers as i64, settings, env)?;
        store.register_worker(run.id, index as i64, &host_name())?;
        Ok(Worker {
            store: Arc::new(Mutex::new(store)),
            run: run.id,
            name: name.to_string(),
            index,
            workers,
            started_at_us: Arc::new(Mutex::new(None)),
        })
    }

    fn with_store<T>(&self, f: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
        f(&*self
            .store
            .lock()
            .map_err(|_| anyhow::anyhow!("the store's lock was poisoned"))?)
    }

    /// The load's start gate: says this worker is ready, waits up to `timeout` for the
    /// others, agrees the start, and sleeps until it.
    pub fn gate(&self, timeout: Duration, stop: tokio::sync::watch::Receiver<bool>) -> StartGate {
        let (store, run, index, workers, name) = (
            self.store.clone(),
            self.run,
            self.index as i64,
            self.workers,
            self.name.clone(),
        );
        let started = self.started_at_us.clone();
        StartGate(Arc::new(move || {
            let store = store
                .lock()
                .map_err(|_| anyhow::anyhow!("the store's lock was poisoned"))?;
            let (offset, rtt) = clock_offset(&store).context("cannot read the store's clock")?;
            store.worker_ready(run, index, offset, rtt)?;
            let waiting_since = Instant::now();
            loop {
                let ready = store.ready_workers(run)?;
                if ready.len() >= workers {
                    break;
                }
                if store.worker_run(&name)?.is_some_and(|r| r.status == "failed") {
                    bail!("run {name:?} failed while this worker waited for the others to start (see `connbench runs show {name}`)");
                }
                if *stop.borrow() {
                    bail!("interrupted while this worker waited for the others to start");
                }
                if waiting_since.elapsed() >= timeout {
                    let missing: Vec<String> = (0..workers as i64)
                        .filter(|i| !ready.contains(i))
                        .map(|i| i.to_string())
                        .collect();
                    bail!(
                        "worker{} {} of run {name:?} did not arrive within {} (ready: {} of {workers}); \
                         start every worker with the same --workers and its own --worker-index, or raise --worker-timeout",
                        if missing.len() == 1 { "" } else { "s" },
                        missing.join(", "),
                        crate::units::format_duration(timeout),
                        ready.len()
                    );
                }
                std::thread::sleep(POLL);
            }
            let proposed = local_clock_us() + offset + START_LEAD.as_micros() as i64;
            let start_us = store.agree_start(run, proposed)?;
            drop(store);
            // The agreed instant on this machine's clock.
            let wait_us = start_us - offset - local_clock_us();
            if wait_us > 0 {
                std::thread::sleep(Duration::from_micros(wait_us as u64));
            }
            let now = Instant::now();
            *started.lock().map_err(|_| anyhow::anyhow!("poisoned"))? = Some(local_clock_us() + offset);
            Ok(now)
        }))
    }

    /// One interval of this worker, as the store keeps it: its counts (transactions,
    /// failures, connects, refused connects) and latencies.
    fn interval(
        &self,
        interval: usize,
        (transactions, failures, connects, refused): (u64, u64, u64, u64),
        latency_us: &Histogram<u64>,
    ) -> Result<WorkerInterval> {
        Ok(WorkerInterval {
            worker: self.index as i64,
            interval: interval as i64,
            transactions: transactions as i64,
            failures: failures as i64,
            connects: connects as i64,
            refused: refused as i64,
            latency_histogram: (!latency_us.is_empty())
                .then(|| store::serialize_histogram(latency_us))
                .transpose()?,
        })
    }

    /// Saves one interval as it ends (progress reports arrive per interval).
    pub fn save_interval(&self, interval: usize, period: &Interval) -> Result<()> {
        let p = period;
        let counts = (p.transactions, p.failures, p.connects, p.refused);
        let i = self.interval(interval, counts, &p.latency_us)?;
        self.with_store(|s| s.save_worker_intervals(self.run, &[i]))
    }

    /// Saves the worker's whole record (its exact intervals replace those saved as they
    /// went) and its end.
    pub fn finish(&self, run: &LoadRun, warmup: Duration) -> Result<()> {
        let started = *self
            .started_at_us
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?;
        let r = &run.measurements;
        let mut h = interval_histogram();
        let intervals = r
            .series
            .iter()
            .enumerate()
            .map(|(i, e)| {
                e.histogram_into(&mut h);
                self.interval(i, (e.transactions, e.failures, e.connects, e.refused), &h)
            })
            .collect::<Result<Vec<_>>>()?;
        self.with_store(|s| s.save_worker_intervals(self.run, &intervals))?;
        let record = WorkerRecord::of(run, warmup)?;
        let status = if run.interrupted {
            Status::Interrupted
        } else {
            Status::Done
        };
        let latency = store::serialize_histogram(&r.latency)?;
        let end = WorkerEnd {
            status,
            error: None,
            started_at_us: started,
            result: Some(serde_json::to_value(&record)?),
            latency_histogram: Some(latency),
        };
        self.with_store(|s| s.finish_worker(self.run, self.index as i64, &end))
    }

    /// Saves that this worker failed, with why; the run fails with it.
    pub fn fail(&self, error: &str) -> Result<()> {
        let end = WorkerEnd {
            status: Status::Failed,
            error: Some(error.to_string()),
            started_at_us: None,
            result: None,
            latency_histogram: None,
        };
        self.with_store(|s| s.finish_worker(self.run, self.index as i64, &end))
    }
}

/// Counts by kind as a record keeps them: (count, first message).
type Counts = BTreeMap<String, (u64, String)>;

fn counts_of(m: &BTreeMap<String, FailureCount>) -> Counts {
    m.iter()
        .map(|(k, f)| (k.clone(), (f.count, f.example.clone())))
        .collect()
}

fn failures_of(c: &Counts) -> BTreeMap<String, FailureCount> {
    c.iter()
        .map(|(k, (count, example))| {
            (
                k.clone(),
                FailureCount {
                    count: *count,
                    example: example.clone(),
                },
            )
        })
        .collect()
}

/// A worker's connect ramp as its record keeps it: the counts, its pace (the worker's
/// share of `--connect-rate`), and its first attempt and last connection on the
/// worker's own clock, which the merge moves to the store's by the worker's offset.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct SavedRamp {
    pub wanted: u64,
    pub connected: u64,
    pub rate_per_s: Option<f64>,
    pub took_s: f64,
    pub failed_attempts: u64,
    pub failures: Counts,
    pub first_attempt_unix_us: Option<i64>,
    pub last_connected_unix_us: Option<i64>,
}

impl SavedRamp {
    fn of(r: &ConnectRamp) -> SavedRamp {
        SavedRamp {
            wanted: r.wanted,
            connected: r.connected,
            rate_per_s: r.rate,
            took_s: r.took.as_secs_f64(),
            failed_attempts: r.failed_attempts,
            failures: counts_of(&r.failures),
            first_attempt_unix_us: r.first_attempt_unix_us,
            last_connected_unix_us: r.last_connected_unix_us,
        }
    }

    /// The ramp with its instants on the store's clock: `offset_us` is the store's
    /// clock minus the worker's.
    fn on_store_clock(&self, offset_us: i64) -> ConnectRamp {
        ConnectRamp {
            wanted: self.wanted,
            connected: self.connected,
            rate: self.rate_per_s,
            took: Duration::from_secs_f64(self.took_s.max(0.0)),
            failed_attempts: self.failed_attempts,
            failures: failures_of(&self.failures),
            first_attempt_unix_us: self.first_attempt_unix_us.map(|t| t + offset_us),
            last_connected_unix_us: self.last_connected_unix_us.map(|t| t + offset_us),
        }
    }
}

/// What a worker saves beside its latency histogram and intervals: everything else a
/// load run measured, so the merged run is what one process would have recorded.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WorkerRecord {
    pub warmup_s: f64,
    pub measured_s: f64,
    pub transactions: u64,
    pub failed_transactions: u64,
    /// Failures by kind: (count, first message).
    pub failures: Counts,
    /// Connect attempts refused during the measurement, by kind, and in all (none in a
    /// record saved before they were kept, hence the defaults).
    #[serde(default)]
    pub refused: Counts,
    #[serde(default)]
    pub refused_attempts: u64,
    /// The connect ramp before the clock; `None` in a record saved before it was kept.
    #[serde(default)]
    pub ramp: Option<SavedRamp>,
    pub connects: u64,
    pub connect_ns: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub round_trips: u64,
    pub setup_connects: u64,
    pub setup_connect_ns: u64,
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    pub context_switches: (u64, u64),
    pub server_cpu_s: Option<(f64, f64)>,
    pub pooler_cpu_s: Option<(f64, f64)>,
    pub relay_cpu_s: Option<(f64, f64)>,
    pub server_not_measured: Option<String>,
    pub machine: Option<MachineUse>,
    pub interrupted: bool,
    pub first_error: Option<String>,
    pub server_version: Option<String>,
    pub tls: Option<TlsInfo>,
    /// HdrHistogram V2 serialisations, hex: schedule lag, connect, and per connect phase.
    pub lag_histogram: String,
    pub connect_histogram: String,
    pub connect_phase_histograms: Vec<String>,
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(s: &str) -> Result<Vec<u8>> {
    if s.len() % 2 != 0 {
        bail!("odd-length hex");
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).context("not hex"))
        .collect()
}

fn cpu_s(c: Option<Cpu>) -> Option<(f64, f64)> {
    c.map(|(u, s)| (u.as_secs_f64(), s.as_secs_f64()))
}

fn cpu_of(c: Option<(f64, f64)>) -> Option<Cpu> {
    c.map(|(u, s)| {
        (
            Duration::from_secs_f64(u.max(0.0)),
            Duration::from_secs_f64(s.max(0.0)),
        )
    })
}

impl WorkerRecord {
    pub fn of(run: &LoadRun, warmup: Duration) -> Result<WorkerRecord> {
        let r = &run.measurements;
        let hex = |h: &Histogram<u64>| store::serialize_histogram(h).map(|b| to_hex(&b));
        Ok(WorkerRecord {
            warmup_s: warmup.as_secs_f64(),
            measured_s: run.measured.as_secs_f64(),
            transactions: r.transactions,
            failed_transactions: r.failed_transactions,
            failures: counts_of(&r.failures),
            refused: counts_of(&r.refused),
            refused_attempts: r.refused_attempts,
            ramp: Some(SavedRamp::of(&run.ramp)),
            connects: r.connects,
            connect_ns: r.connect_ns,
            bytes_sent: r.bytes.bytes_sent,
            bytes_received: r.bytes.bytes_received,
            round_trips: r.round_trips,
            setup_connects: run.setup_connects,
            setup_connect_ns: run.setup_connect_ns,
            cpu_user_s: run.cpu_user.as_secs_f64(),
            cpu_system_s: run.cpu_system.as_secs_f64(),
            context_switches: run.context_switches,
            server_cpu_s: cpu_s(run.server_cpu),
            pooler_cpu_s: cpu_s(run.pooler_cpu),
            relay_cpu_s: cpu_s(run.relay_cpu),
            server_not_measured: run.server_not_measured.clone(),
            machine: run.machine,
            interrupted: run.interrupted,
            first_error: run.first_error.clone(),
            server_version: run.server_version.clone(),
            tls: run.tls.clone(),
            lag_histogram: hex(&r.lag)?,
            connect_histogram: hex(&r.connect)?,
            connect_phase_histograms: r.connect_phases.iter().map(hex).collect::<Result<_>>()?,
        })
    }

    /// The measurements this record, its latency histogram and its intervals describe.
    fn measurements(&self, latency: &[u8], intervals: &[&WorkerInterval]) -> Result<Measurements> {
        let hist = |s: &str| from_hex(s).and_then(|b| store::deserialize_histogram(&b));
        let mut r = Measurements::new();
        r.latency = rebound(store::deserialize_histogram(latency)?, latency_histogram())?;
        r.lag = rebound(hist(&self.lag_histogram)?, latency_histogram())?;
        r.connect = rebound(hist(&self.connect_histogram)?, latency_histogram())?;
        for (mine, stored) in r.connect_phases.iter_mut().zip(&self.connect_phase_histograms) {
            *mine = rebound(hist(stored)?, latency_histogram())?;
        }
        r.transactions = self.transactions;
        r.failed_transactions = self.failed_transactions;
        r.failures = failures_of(&self.failures);
        r.refused = failures_of(&self.refused);
        r.refused_attempts = self.refused_attempts;
        r.connects = self.connects;
        r.connect_ns = self.connect_ns;
        r.bytes.bytes_sent = self.bytes_sent;
        r.bytes.bytes_received = self.bytes_received;
        r.round_trips = self.round_trips;
        for i in intervals {
            let index = usize::try_from(i.interval).context("a negative interval")?;
            if r.series.len() <= index {
                r.series.resize_with(index + 1, SeriesEntry::default);
            }
            let e = &mut r.series[index];
            e.transactions = i.transactions as u64;
            e.failures = i.failures as u64;
            e.connects = i.connects as u64;
            e.refused = i.refused as u64;
            if let Some(b) = &i.latency_histogram {
                let h = store::deserialize_histogram(b)?;
                e.latency_us = h
                    .iter_recorded()
                    .map(|v| (v.value_iterated_to(), v.count_at_value()))
                    .collect();
            }
        }
        Ok(r)
    }
}

/// A deserialised histogram carries the bounds it was written with; adding it to ours
/// needs ours (the same, from any connbench), so its counts are added into a fresh one.
fn rebound(h: Histogram<u64>, mut into: Histogram<u64>) -> Result<Histogram<u64>> {
    into.add(&h)
        .map_err(|e| anyhow::anyhow!("a stored histogram does not fit: {e:?}"))?;
    Ok(into)
}

/// A many-machine run, merged.
#[derive(Debug, Clone)]
pub struct Merged {
    pub id: i64,
    pub name: String,
    pub status: String,
    pub workers: usize,
    /// The whole run's settings as the workers stated them (JSON of the load report's
    /// settings).
    pub settings: serde_json::Value,
    /// What every finished worker measured, as one run.
    pub run: LoadRun,
    /// The spread of the instants the workers passed the agreed start, in ms; `None`
    /// until two workers have started.
    pub start_skew_ms: Option<f64>,
    pub rows: Vec<WorkerRow>,
    /// Workers whose record is missing (failed, or still running), with why.
    pub missing: Vec<(i64, String)>,
}

/// Reads run `id` back, its finished workers merged into one run.
pub fn merge(store: &Store, id: i64) -> Result<Merged> {
    let stored = store.load_run(id)?.with_context(|| format!("no run {id}"))?;
    let workers = stored.run.workers.context("not a run of many workers")? as usize;
    let name = stored.run.name.clone().unwrap_or_else(|| id.to_string());
    let (rows, intervals) = store.load_workers(id)?;
    let mut merged = Measurements::new();
    let mut run = LoadRun::empty();
    let (mut first_start, mut last_end): (Option<f64>, Option<f64>) = (None, None);
    let mut missing = Vec::new();
    for w in 0..workers as i64 {
        let Some(row) = rows.iter().find(|r| r.worker == w) else {
            missing.push((w, "never registered".to_string()));
            continue;
        };
        let (Some(result), Some(latency)) = (&row.result, &row.latency_histogram) else {
            let why = match (&row.error, row.status.as_str()) {
                (Some(e), _) => format!("failed: {e}"),
                (None, "running") => "still running, or died without saying".to_string(),
                (None, s) => format!("{s}, with no record"),
            };
            missing.push((w, why));
            continue;
        };
        let record: WorkerRecord = serde_json::from_value(result.clone())
            .with_context(|| format!("worker {w}'s record cannot be read"))?;
        let mine: Vec<&WorkerInterval> = intervals.iter().filter(|i| i.worker == w).collect();
        merged += &record
            .measurements(latency, &mine)
            .with_context(|| format!("worker {w}'s histograms"))?;
        run.cpu_user += Duration::from_secs_f64(record.cpu_user_s);
        run.cpu_system += Duration::from_secs_f64(record.cpu_system_s);
        run.context_switches.0 += record.context_switches.0;
        run.context_switches.1 += record.context_switches.1;
        // The server, pooler, relays and machine are one each, seen by every worker on
        // that machine over nearly the same window: the first worker's reading, not a sum.
        if run.server_cpu.is_none() && run.pooler_cpu.is_none() && run.machine.is_none() {
            run.server_cpu = cpu_of(record.server_cpu_s);
            run.pooler_cpu = cpu_of(record.pooler_cpu_s);
            run.relay_cpu = cpu_of(record.relay_cpu_s);
            run.machine = record.machine;
            run.server_not_measured = record.server_not_measured.clone();
        }
        run.setup_connects += record.setup_connects;
        run.setup_connect_ns += record.setup_connect_ns;
        // The ramps on the store's clock, so the merged one ends when the last client of
        // any worker connected.
        if let Some(ramp) = &record.ramp {
            run.ramp
                .add(&ramp.on_store_clock(row.clock_offset_us.unwrap_or(0)));
        }
        run.interrupted |= record.interrupted;
        run.first_error = run.first_error.take().or(record.first_error.clone());
        run.server_version = run.server_version.take().or(record.server_version.clone());
        run.tls = run.tls.take().or(record.tls.clone());
        if let Some(s) = row.started_at_us {
            let start = s as f64 / 1e6 + record.warmup_s;
            let end = start + record.measured_s;
            first_start = Some(first_start.map_or(start, |f| f.min(start)));
            last_end = Some(last_end.map_or(end, |l| l.max(end)));
        } else {
            // No agreed start (a SQLite store's worker that never got one): its own window.
            last_end = Some(last_end.unwrap_or(0.0).max(record.measured_s));
            first_start = first_start.or(Some(0.0));
        }
    }
    run.measurements = merged;
    run.measured = match (first_start, last_end) {
        (Some(a), Some(b)) if b > a => Duration::from_secs_f64(b - a),
        _ => Duration::ZERO,
    };
    let starts: Vec<i64> = rows.iter().filter_map(|r| r.started_at_us).collect();
    let start_skew_ms = (starts.len() >= 2)
        .then(|| (starts.iter().max().unwrap_or(&0) - starts.iter().min().unwrap_or(&0)) as f64 / 1e3);
    Ok(Merged {
        id,
        name,
        status: stored.run.status,
        workers,
        settings: stored.suite,
        run,
        start_skew_ms,
        rows,
        missing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_split_as_evenly_as_possible() {
        let shares: Vec<_> = (0..3).map(|i| share(10, 3, i).unwrap()).collect();
        assert_eq!(shares, vec![(0, 4), (4, 3), (7, 3)]);
        assert_eq!(shares.iter().map(|s| s.1).sum::<usize>(), 10);
        assert!(share(2, 3, 0)
            .unwrap_err()
            .to_string()
            .contains("at least one client"));
        assert!(share(9, 3, 3)
            .unwrap_err()
            .to_string()
            .contains("--worker-index 3"));
    }

    /// Two workers' ramps, their clocks 3 s apart: on the store's clock the merged ramp
    /// runs from the earlier first attempt to the later last connection, counts and
    /// paces summed; a record saved before ramps were kept still reads, with none.
    #[test]
    fn ramps_merge_on_the_store_s_clock() {
        let refused = |n| BTreeMap::from([("53300".to_string(), (n, "too many connections".to_string()))]);
        let a = SavedRamp {
            wanted: 4,
            connected: 4,
            rate_per_s: Some(10.0),
            took_s: 0.3,
            failed_attempts: 2,
            failures: refused(2),
            first_attempt_unix_us: Some(1_000_000),
            last_connected_unix_us: Some(1_300_000),
        };
        // Its clock is 3 s ahead of the store's (offset -3 s): 1.1 s to 1.5 s there.
        let b = SavedRamp {
            wanted: 3,
            connected: 2,
            rate_per_s: Some(7.5),
            took_s: 0.4,
            failed_attempts: 5,
            failures: refused(5),
            first_attempt_unix_us: Some(4_100_000),
            last_connected_unix_us: Some(4_500_000),
        };
        let mut merged = ConnectRamp::default();
        merged.add(&a.on_store_clock(0));
        merged.add(&b.on_store_clock(-3_000_000));
        assert_eq!((merged.wanted, merged.connected), (7, 6));
        assert_eq!(merged.rate, Some(17.5));
        assert_eq!(merged.failed_attempts, 7);
        assert_eq!(merged.failures["53300"].count, 7);
        assert_eq!(merged.took, Duration::from_millis(500));
        assert_eq!(
            (merged.first_attempt_unix_us, merged.last_connected_unix_us),
            (Some(1_000_000), Some(1_500_000))
        );
        let mut old =
            serde_json::to_value(WorkerRecord::of(&LoadRun::empty(), Duration::ZERO).unwrap()).unwrap();
        for key in ["ramp", "refused", "refused_attempts"] {
            old.as_object_mut().unwrap().remove(key);
        }
        let back: WorkerRecord = serde_json::from_value(old).unwrap();
        assert_eq!((back.ramp, back.refused_attempts), (None, 0));
    }

    #[test]
    fn hex_round_trips() {
        let b = vec![0u8, 1, 0xab, 0xff];
        assert_eq!(from_hex(&to_hex(&b)).unwrap(), b);
        assert!(from_hex("abc").is_err());
        assert!(from_hex("zz").is_err());
    }
}

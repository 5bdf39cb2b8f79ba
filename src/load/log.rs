//! pgbench's transaction logs (`-l`): one file per worker thread, written by that thread
//! alone, in pgbench 15's formats, so the tools people already run on pgbench's logs read
//! connbench's.
//!
//! The files are created before the run starts ([`LogSettings::create`]), so a prefix
//! that cannot be written is refused before anything connects. Each worker then owns a
//! [`TxLog`]: a `BufWriter` on its own file, fed by its clients after each measured
//! transaction has ended (never inside the timed part), with no lock shared between
//! workers, and flushed when the worker ends, Ctrl-C included. Warm-up transactions are
//! not measured, so they are not logged either.
//!
//! Formats (pgbench 15, `doLog()` in `src/bin/pgbench/pgbench.c`, checked against the
//! pgbench 15 binary):
//!
//! - per transaction: `client_id transaction_no time script_no time_epoch time_us
//!   [schedule_lag] [retries]`: `time` is the latency in µs (from the intended start
//!   under -R), or `failed` (`serialization`/`deadlock` with --failures-detailed), or
//!   `skipped`; `time_epoch time_us` is when the transaction ended (when it was skipped),
//!   as Unix seconds and microseconds; `schedule_lag` (µs, 0 unless it committed) only
//!   with -R, `retries` only when --max-tries is not 1.
//! - aggregated (`--aggregate-interval S`): `interval_start num_transactions sum_latency
//!   sum_latency_2 min_latency max_latency sum_lag sum_lag_2 min_lag max_lag skipped
//!   retried retries serialization_failures deadlock_failures`, every column always
//!   there and 0 where its option is off (lag without -R, skipped without -L, retries
//!   with --max-tries 1, failures without --failures-detailed). pgbench 15's
//!   documentation lists a `failures` column before the last two, which its code never
//!   writes: 15 columns, as pgbench 15 writes them. The first interval starts at the
//!   measurement's start rounded down to a whole second, as pgbench's does; empty
//!   intervals between two transactions are written, and so is the last, partial
//!   interval (pgbench 15 drops it), so the lines' `num_transactions` add up to the
//!   run's transactions.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use rand::SeedableRng;

/// The log's settings: pgbench's `-l`, `--log-prefix`, `--sampling-rate`,
/// `--aggregate-interval`, and `--failures-detailed` for the failures' words.
#[derive(Debug, Clone, PartialEq)]
pub struct LogSettings {
    /// Files are PREFIX.PID for thread 0 and PREFIX.PID.N for thread N.
    pub prefix: String,
    /// Log each transaction with this probability (per-transaction logs only).
    pub sampling_rate: Option<f64>,
    /// One line per this many seconds instead of one per transaction.
    pub aggregate_interval_s: Option<u64>,
    /// Failed transactions say `serialization` or `deadlock` (and the aggregate counts
    /// them) rather than `failed`.
    pub failures_detailed: bool,
}

impl LogSettings {
    /// pgbench's default prefix.
    pub const DEFAULT_PREFIX: &'static str = "pgbench_log";

    /// The file of worker thread `thread` of process `pid`, as pgbench names it.
    pub fn path(&self, pid: u32, thread: usize) -> PathBuf {
        let name = if thread == 0 {
            format!("{}.{pid}", self.prefix)
        } else {
            format!("{}.{pid}.{thread}", self.prefix)
        };
        PathBuf::from(name)
    }

    /// Creates (or truncates) the files of `threads` worker threads of this process; the
    /// error names the file and the OS's reason.
    pub fn create(&self, threads: usize) -> Result<LogFiles> {
        let pid = std::process::id();
        let files = (0..threads.max(1))
            .map(|t| {
                let path = self.path(pid, t);
                let file = File::create(&path).with_context(|| {
                    format!(
                        "cannot create the transaction log {:?} (-l, --log-prefix {:?})",
                        path.display().to_string(),
                        self.prefix
                    )
                })?;
                Ok((path, Arc::new(file)))
            })
            .collect::<Result<_>>()?;
        Ok(LogFiles {
            settings: self.clone(),
            files,
        })
    }
}

/// The open log files of a run, one per worker thread, and their settings.
#[derive(Debug, Clone)]
pub struct LogFiles {
    pub settings: LogSettings,
    files: Vec<(PathBuf, Arc<File>)>,
}

impl LogFiles {
    /// The log of worker thread `thread`: its file behind a buffer of its own.
    pub fn writer(&self, thread: usize, columns: Columns, clock: Clock, seed: u64) -> Option<TxLog> {
        let (path, file) = self.files.get(thread)?;
        let aggregate = self.settings.aggregate_interval_s.map(|s| {
            // pgbench rounds the first interval's start down to a whole second.
            let start_us = clock.measure_start_us / 1_000_000 * 1_000_000;
            Aggregate {
                interval_us: s * 1_000_000,
                start_us,
                stats: AggStats::default(),
            }
        });
        Some(TxLog {
            out: BufWriter::with_capacity(256 * 1024, SharedFile(file.clone())),
            path: path.clone(),
            columns,
            detailed: self.settings.failures_detailed,
            clock,
            sample: self
                .settings
                .sampling_rate
                .map(|r| (r, rand::rngs::SmallRng::seed_from_u64(seed))),
            aggregate,
            error: None,
        })
    }
}

/// A file several owners may hold (the plan, a worker); only its worker writes to it.
#[derive(Debug)]
struct SharedFile(Arc<File>);

impl Write for SharedFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        (&*self.0).write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        (&*self.0).flush()
    }
}

/// The optional columns of a run: `schedule_lag` under -R, `retries` when --max-tries
/// is not 1 (and, aggregated, `skipped` under -L).
#[derive(Debug, Clone, Copy, Default)]
pub struct Columns {
    pub lag: bool,
    pub retries: bool,
    pub skipped: bool,
}

/// Unix time of the run's instants: one reading of both clocks, taken once for the run,
/// so every worker maps an `Instant` to the same microsecond.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    pub at: Instant,
    pub at_us: u64,
    /// The measurement's start, in Unix microseconds.
    pub measure_start_us: u64,
}

impl Clock {
    /// A reading now, for a measurement that starts at `measure_start`.
    pub fn new(measure_start: Instant) -> Clock {
        let at = Instant::now();
        let at_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_micros() as u64;
        let mut c = Clock {
            at,
            at_us,
            measure_start_us: 0,
        };
        c.measure_start_us = c.unix_us(measure_start);
        c
    }

    /// `i` in Unix microseconds.
    pub fn unix_us(&self, i: Instant) -> u64 {
        match i.checked_duration_since(self.at) {
            Some(d) => self.at_us + d.as_micros() as u64,
            None => self
                .at_us
                .saturating_sub(self.at.duration_since(i).as_micros() as u64),
        }
    }
}

/// How a logged transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Committed: its latency and schedule lag, in nanoseconds.
    Committed {
        latency_ns: u64,
        lag_ns: u64,
    },
    Failed(Failure),
    /// Skipped under -R and -L: never sent.
    Skipped,
}

/// A failed transaction's kind, as pgbench names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// 40001
    Serialization,
    /// 40P01
    Deadlock,
    /// Anything else (pgbench aborts the client on these; connbench counts them and goes
    /// on): `failed` in the log, and in no aggregate column.
    Other,
}

/// One measured transaction, as its client saw it.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub client: usize,
    /// The client's measured transactions so far, this one included (from 1).
    pub number: u64,
    pub script: usize,
    pub outcome: Outcome,
    /// When it ended (was skipped).
    pub at: Instant,
    pub retries: u32,
}

/// One worker's log.
#[derive(Debug)]
pub struct TxLog {
    out: BufWriter<SharedFile>,
    path: PathBuf,
    columns: Columns,
    detailed: bool,
    clock: Clock,
    sample: Option<(f64, rand::rngs::SmallRng)>,
    aggregate: Option<Aggregate>,
    /// The first write error: later lines are dropped, and `finish` reports it.
    error: Option<std::io::Error>,
}

/// Nanoseconds to whole microseconds, rounded.
fn us(ns: u64) -> u64 {
    (ns + 500) / 1_000
}

impl TxLog {
    /// Logs a transaction (or adds it to its interval).
    pub fn record(&mut self, e: &Entry) {
        if self.error.is_some() {
            return;
        }
        if let Some((rate, rng)) = &mut self.sample {
            // pgbench keeps a transaction when a uniform draw in [0, 1) is at most the rate.
            if rand::RngExt::random::<f64>(rng) > *rate {
                return;
            }
        }
        let at_us = self.clock.unix_us(e.at);
        let result = match &mut self.aggregate {
            Some(agg) => {
                let written = agg.advance(at_us, &mut self.out, self.columns, self.detailed);
                agg.stats.add(e, self.columns);
                written
            }
            None => self.write_line(e, at_us),
        };
        if let Err(err) = result {
            self.error = Some(err);
        }
    }

    fn write_line(&mut self, e: &Entry, at_us: u64) -> std::io::Result<()> {
        let out = &mut self.out;
        write!(out, "{} {} ", e.client, e.number)?;
        let lag_us = match e.outcome {
            Outcome::Committed { latency_ns, lag_ns } => {
                write!(out, "{}", us(latency_ns))?;
                us(lag_ns)
            }
            Outcome::Skipped => {
                out.write_all(b"skipped")?;
                0
            }
            Outcome::Failed(f) => {
                out.write_all(match (self.detailed, f) {
                    (true, Failure::Serialization) => b"serialization",
                    (true, Failure::Deadlock) => b"deadlock",
                    _ => b"failed",
                })?;
                0
            }
        };
        write!(out, " {} {} {}", e.script, at_us / 1_000_000, at_us % 1_000_000)?;
        if self.columns.lag {
            write!(out, " {lag_us}")?;
        }
        if self.columns.retries {
            write!(out, " {}", e.retries)?;
        }
        out.write_all(b"\n")
    }

    /// Writes the interval in progress (aggregated logs) and flushes the file: at the
    /// worker's end, Ctrl-C included. The error names the file.
    pub fn finish(mut self) -> Result<()> {
        if self.error.is_none() {
            if let Some(agg) = &self.aggregate {
                if let Err(e) = agg.write(&mut self.out, self.columns, self.detailed) {
                    self.error = Some(e);
                }
            }
        }
        if self.error.is_none() {
            if let Err(e) = self.out.flush() {
                self.error = Some(e);
            }
        }
        match self.error {
            None => Ok(()),
            Some(e) => Err(anyhow::Error::new(e).context(format!(
                "cannot write the transaction log {:?}; it stops at the first line that failed",
                self.path.display().to_string()
            ))),
        }
    }
}

/// The interval in progress of an aggregated log.
#[derive(Debug)]
struct Aggregate {
    interval_us: u64,
    /// Unix microseconds.
    start_us: u64,
    stats: AggStats,
}

impl Aggregate {
    /// Writes every interval that ended at or before `at_us` (empty ones included, as
    /// pgbench does) and moves to the one `at_us` falls in.
    fn advance(
        &mut self,
        at_us: u64,
        out: &mut impl Write,
        c: Columns,
        detailed: bool,
    ) -> std::io::Result<()> {
        while at_us >= self.start_us + self.interval_us {
            self.write(out, c, detailed)?;
            self.stats = AggStats::default();
            self.start_us += self.interval_us;
        }
        Ok(())
    }

    fn write(&self, out: &mut impl Write, c: Columns, detailed: bool) -> std::io::Result<()> {
        let s = &self.stats;
        let zero = Simple::default();
        let lag = if c.lag { &s.lag } else { &zero };
        let (retried, retries) = if c.retries { (s.retried, s.retries) } else { (0, 0) };
        let (serialization, deadlock) = if detailed {
            (s.serialization, s.deadlock)
        } else {
            (0, 0)
        };
        writeln!(
            out,
            "{} {} {} {} {} {} {} {} {} {} {} {} {} {} {}",
            self.start_us / 1_000_000,
            s.committed,
            s.latency.sum,
            s.latency.sum2,
            s.latency.min,
            s.latency.max,
            lag.sum,
            lag.sum2,
            lag.min,
            lag.max,
            if c.skipped { s.skipped } else { 0 },
            retried,
            retries,
            serialization,
            deadlock
        )
    }
}

/// Counts and sums of one interval (pgbench's `StatsData`), in microseconds. Sums are
/// integers, so they stay exact where pgbench's doubles would round.
#[derive(Debug, Default, Clone)]
struct AggStats {
    committed: u64,
    latency: Simple,
    lag: Simple,
    skipped: u64,
    retried: u64,
    retries: u64,
    serialization: u64,
    deadlock: u64,
}

impl AggStats {
    fn add(&mut self, e: &Entry, c: Columns) {
        if e.outcome == Outcome::Skipped {
            self.skipped += 1;
            return;
        }
        if e.retries > 0 {
            self.retried += 1;
            self.retries += u64::from(e.retries);
        }
        match e.outcome {
            Outcome::Committed { latency_ns, lag_ns } => {
                self.committed += 1;
                self.latency.add(us(latency_ns));
                if c.lag {
                    self.lag.add(us(lag_ns));
                }
            }
            Outcome::Failed(Failure::Serialization) => self.serialization += 1,
            Outcome::Failed(Failure::Deadlock) => self.deadlock += 1,
            Outcome::Failed(Failure::Other) | Outcome::Skipped => {}
        }
    }
}

/// n, sum, sum of squares, min and max (0 when empty, as pgbench writes them).
#[derive(Debug, Default, Clone)]
struct Simple {
    n: u64,
    sum: u64,
    sum2: u128,
    min: u64,
    max: u64,
}

impl Simple {
    fn add(&mut self, v: u64) {
        if self.n == 0 || v < self.min {
            self.min = v;
        }
        if self.n == 0 || v > self.max {
            self.max = v;
        }
        self.n += 1;
        self.sum += v;
        self.sum2 += u128::from(v) * u128::from(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn settings(aggregate: Option<u64>, detailed: bool) -> LogSettings {
        LogSettings {
            prefix: "x".into(),
            sampling_rate: None,
            aggregate_interval_s: aggregate,
            failures_detailed: detailed,
        }
    }

    /// A log writing into memory, on a clock whose measurement starts at Unix time
    /// 1000.25 s.
    fn log(s: &LogSettings, columns: Columns) -> (TxLog, Instant) {
        let at = Instant::now();
        let clock = Clock {
            at,
            at_us: 1_000_250_000,
            measure_start_us: 1_000_250_000,
        };
        let file = tempfile();
        let files = LogFiles {
            settings: s.clone(),
            files: vec![(PathBuf::from("mem"), Arc::new(file))],
        };
        (files.writer(0, columns, clock, 1).unwrap(), at)
    }

    fn tempfile() -> File {
        let path = std::env::temp_dir().join(format!(
            "cb-txlog-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        f
    }

    fn contents(log: TxLog) -> String {
        use std::io::{Read, Seek};
        let file = log.out.get_ref().0.clone();
        log.finish().unwrap();
        let mut f = &*file;
        f.seek(std::io::SeekFrom::Start(0)).unwrap();
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        s
    }

    fn entry(number: u64, outcome: Outcome, at: Instant, retries: u32) -> Entry {
        Entry {
            client: 3,
            number,
            script: 1,
            outcome,
            at,
            retries,
        }
    }

    #[test]
    fn per_transaction_lines_have_pgbench_s_columns() {
        let cols = Columns {
            lag: true,
            retries: true,
            skipped: true,
        };
        let (mut l, t0) = log(&settings(None, true), cols);
        let ms = Duration::from_millis;
        l.record(&entry(
            1,
            Outcome::Committed {
                latency_ns: 1_234_567,
                lag_ns: 89_400,
            },
            t0 + ms(10),
            0,
        ));
        l.record(&entry(
            2,
            Outcome::Failed(Failure::Serialization),
            t0 + ms(1_000),
            2,
        ));
        l.record(&entry(3, Outcome::Failed(Failure::Other), t0 + ms(1_001), 0));
        l.record(&entry(4, Outcome::Skipped, t0 + ms(1_002), 0));
        assert_eq!(
            contents(l),
            "3 1 1235 1 1000 260000 89 0\n\
             3 2 serialization 1 1001 250000 0 2\n\
             3 3 failed 1 1001 251000 0 0\n\
             3 4 skipped 1 1001 252000 0 0\n"
        );
        // Without -R and --max-tries, six columns; failures are `failed` without
        // --failures-detailed.
        let (mut l, t0) = log(&settings(None, false), Columns::default());
        l.record(&entry(1, Outcome::Failed(Failure::Deadlock), t0, 0));
        assert_eq!(contents(l), "3 1 failed 1 1000 250000\n");
    }

    #[test]
    fn aggregates_are_pgbench_s_fifteen_columns_with_empty_and_last_intervals() {
        let cols = Columns {
            lag: true,
            retries: true,
            skipped: true,
        };
        let (mut l, t0) = log(&settings(Some(1), true), cols);
        let ms = Duration::from_millis;
        let ok = |latency_ms: u64, lag_us: u64| Outcome::Committed {
            latency_ns: latency_ms * 1_000_000,
            lag_ns: lag_us * 1_000,
        };
        // Interval 1000 (from 1000.0, the start rounded down): two commits, one retried.
        l.record(&entry(1, ok(2, 10), t0, 0));
        l.record(&entry(2, ok(4, 30), t0 + ms(700), 1));
        // Nothing in 1001; in 1002 a skip, a deadlock after 2 retries and a commit.
        l.record(&entry(3, Outcome::Skipped, t0 + ms(1_800), 0));
        l.record(&entry(4, Outcome::Failed(Failure::Deadlock), t0 + ms(1_900), 2));
        l.record(&entry(5, ok(1, 0), t0 + ms(2_000), 0));
        assert_eq!(
            contents(l),
            "1000 2 6000 20000000 2000 4000 40 1000 10 30 0 1 1 0 0\n\
             1001 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n\
             1002 1 1000 1000000 1000 1000 0 0 0 0 1 1 2 0 1\n"
        );
        // Options off: their columns are 0, and there are still fifteen.
        let (mut l, t0) = log(&settings(Some(5), false), Columns::default());
        l.record(&entry(1, ok(3, 7), t0, 4));
        l.record(&entry(2, Outcome::Failed(Failure::Serialization), t0, 0));
        assert_eq!(contents(l), "1000 1 3000 9000000 3000 3000 0 0 0 0 0 0 0 0 0\n");
    }

    #[test]
    fn sampling_keeps_about_its_fraction() {
        let mut s = settings(None, false);
        s.sampling_rate = Some(0.25);
        let (mut l, t0) = log(&s, Columns::default());
        for n in 1..=4_000 {
            l.record(&entry(n, Outcome::Skipped, t0, 0));
        }
        let lines = contents(l).lines().count();
        // Binomial(4000, 0.25): mean 1000, sd 27; 6 sd either side.
        assert!((840..=1160).contains(&lines), "{lines} of 4000 at 0.25");
    }

    #[test]
    fn file_names_are_pgbench_s() {
        let s = settings(None, false);
        assert_eq!(s.path(42, 0), PathBuf::from("x.42"));
        assert_eq!(s.path(42, 3), PathBuf::from("x.42.3"));
    }
}

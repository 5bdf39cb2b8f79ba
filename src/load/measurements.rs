//! Measuring a load run: per-worker measurements, merged at the end.
//!
//! Each worker thread owns one [`Measurements`]; its clients (tasks on that thread's
//! runtime) record into it without atomics or locks. Latencies go into HDR histograms
//! with fixed bounds (1 ns to 1 hour, 3 significant digits), so recording never
//! allocates; values are nanoseconds, and floats appear only in statistics and reports.
//! The per-interval series keeps one live histogram (microseconds, 2 significant digits)
//! for the interval in progress; when the next interval starts, the finished one is
//! compacted to its non-empty buckets, a lossless form a few hundred bytes long, so a
//! long run's memory grows by that much per interval rather than by a whole histogram.
//! Workers hand their measurements to the coordinator, which merges them with `+=`.

use std::collections::BTreeMap;
use std::ops::AddAssign;

use hdrhistogram::Histogram;

use crate::connect::FailureCount;
use crate::net::transport::Counters;
use crate::proto::{Phase, Timeline};

/// The largest latency a histogram holds: one hour, in nanoseconds.
pub const MAX_NS: u64 = 3_600_000_000_000;
/// The largest latency an interval histogram holds: one hour, in microseconds.
pub const MAX_US: u64 = 3_600_000_000;

/// A latency histogram in nanoseconds.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_NS, 3).expect("valid bounds")
}

/// An interval histogram in microseconds.
pub fn interval_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, 2).expect("valid bounds")
}

/// A per-command histogram (`-r`) in nanoseconds, at 2 significant digits: one per
/// command of the script per worker, so a tenth of the transaction histogram's memory.
pub fn command_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_NS, 2).expect("valid bounds")
}

/// One script command's executions in measured transactions (`-r`).
#[derive(Debug, Clone)]
pub struct CommandRecord {
    /// Latency of each completed execution; its mean is approximate, hence `sum_ns`.
    pub latency: Histogram<u64>,
    pub sum_ns: u64,
    /// Executions that failed (the transaction failed at this command).
    pub failures: u64,
}

impl CommandRecord {
    pub fn new() -> CommandRecord {
        CommandRecord {
            latency: command_histogram(),
            sum_ns: 0,
            failures: 0,
        }
    }
}

impl Default for CommandRecord {
    fn default() -> Self {
        CommandRecord::new()
    }
}

/// One script's measured transactions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScriptCount {
    pub transactions: u64,
    pub failed: u64,
}

/// Transactions and latencies of one period (progress reports use it live).
#[derive(Debug, Clone)]
pub struct Interval {
    pub transactions: u64,
    pub failures: u64,
    pub connects: u64,
    /// Refused connect attempts (each counted once, never as a transaction).
    pub refused: u64,
    /// Transaction latencies in microseconds.
    pub latency_us: Histogram<u64>,
    /// Live figures only (progress periods, for the metrics endpoint): failures by kind,
    /// the connects' time, and the largest schedule lag under -R (µs).
    pub failure_kinds: BTreeMap<String, u64>,
    pub connect_ns: u64,
    pub lag_max_us: Option<u64>,
}

impl Interval {
    pub fn new() -> Interval {
        Interval {
            transactions: 0,
            failures: 0,
            connects: 0,
            refused: 0,
            latency_us: interval_histogram(),
            failure_kinds: BTreeMap::new(),
            connect_ns: 0,
            lag_max_us: None,
        }
    }
}

impl Default for Interval {
    fn default() -> Self {
        Interval::new()
    }
}

impl AddAssign<&Interval> for Interval {
    fn add_assign(&mut self, o: &Interval) {
        self.transactions += o.transactions;
        self.failures += o.failures;
        self.connects += o.connects;
        self.refused += o.refused;
        self.latency_us.add(&o.latency_us).expect("same bounds");
        for (k, n) in &o.failure_kinds {
            *self.failure_kinds.entry(k.clone()).or_default() += n;
        }
        self.connect_ns += o.connect_ns;
        self.lag_max_us = self.lag_max_us.max(o.lag_max_us);
    }
}

/// Everything one worker measured.
#[derive(Debug, Clone)]
pub struct Measurements {
    /// Latency of each successful measured transaction (from its intended start under
    /// -R, else its actual start; including any connect or pool wait it needed).
    pub latency: Histogram<u64>,
    /// Schedule lag under -R: actual start minus intended start.
    pub lag: Histogram<u64>,
    /// Connection set-up time of every connect made during the measurement.
    pub connect: Histogram<u64>,
    /// Per phase, of those connects.
    pub connect_phases: Vec<Histogram<u64>>,
    pub transactions: u64,
    /// With -L: successful transactions slower than the limit, and (under -R)
    /// transactions skipped because they were already later than it when due.
    pub late: u64,
    pub skipped: u64,
    /// Failed transactions and connects, by kind (SQLSTATE, or phase and I/O error).
    pub failures: BTreeMap<String, FailureCount>,
    pub failed_transactions: u64,
    /// Connect attempts refused during the measurement ([`crate::load::connecting`]):
    /// each counted once, by kind, never as a transaction.
    pub refused: BTreeMap<String, FailureCount>,
    pub refused_attempts: u64,
    /// Time of the measured transactions: the successful ones' latencies summed (exact,
    /// where `latency` holds them at 3 significant digits), and the failed ones' from
    /// their (intended) start to their failure, so what failures cost is measured, not
    /// estimated from a count.
    pub latency_sum_ns: u64,
    pub failed_ns: u64,
    pub connects: u64,
    pub connect_ns: u64,
    /// Bytes of measured transactions (and the connects they made).
    pub bytes: Counters,
    /// Round trips of measured transactions (and their connects), counted on the socket;
    /// apart from `bytes` because a u32 would wrap on a long run.
    pub round_trips: u64,
    /// Per script command, with `-r` (empty without): see [`Measurements::record_commands`].
    pub commands: Vec<CommandRecord>,
    /// Per script of the run, in its order: measured transactions that succeeded and
    /// that failed (see [`Measurements::with_scripts`]).
    pub scripts: Vec<ScriptCount>,
    /// Measured transactions (succeeded or failed in the end) tried more than once
    /// (`--max-tries`), and their retries in all.
    pub retried: u64,
    pub retries: u64,
    /// Per interval since the measurement started (call [`Measurements::finish`] before
    /// reading the last one).
    pub series: Vec<SeriesEntry>,
    /// The histogram of the interval in progress, and its index.
    live: Histogram<u64>,
    live_index: usize,
}

/// One finished interval: counts, and latencies as (value, count) pairs of the
/// non-empty buckets of a microsecond histogram.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeriesEntry {
    pub transactions: u64,
    pub failures: u64,
    pub connects: u64,
    pub refused: u64,
    pub latency_us: Vec<(u64, u64)>,
}

impl SeriesEntry {
    /// The interval's latencies as a histogram (in microseconds), rebuilt into `h`.
    pub fn histogram_into(&self, h: &mut Histogram<u64>) {
        h.reset();
        for &(v, n) in &self.latency_us {
            h.saturating_record_n(v, n);
        }
    }
}

impl Default for Measurements {
    fn default() -> Self {
        Measurements::new()
    }
}

impl Measurements {
    pub fn new() -> Measurements {
        Measurements {
            latency: latency_histogram(),
            lag: latency_histogram(),
            connect: latency_histogram(),
            connect_phases: (0..Phase::COUNT).map(|_| latency_histogram()).collect(),
            transactions: 0,
            late: 0,
            skipped: 0,
            failures: BTreeMap::new(),
            failed_transactions: 0,
            refused: BTreeMap::new(),
            refused_attempts: 0,
            latency_sum_ns: 0,
            failed_ns: 0,
            connects: 0,
            connect_ns: 0,
            bytes: Counters::default(),
            round_trips: 0,
            commands: Vec::new(),
            scripts: Vec::new(),
            retried: 0,
            retries: 0,
            series: Vec::new(),
            live: interval_histogram(),
            live_index: 0,
        }
    }

    fn interval(&mut self, index: usize) -> &mut SeriesEntry {
        if self.series.len() <= index {
            // Once per interval per worker, never per transaction.
            self.series.resize_with(index + 1, SeriesEntry::default);
        }
        &mut self.series[index]
    }

    /// Moves the live histogram's buckets into its series entry and empties it (keeping
    /// its memory for the next interval).
    fn compact_live(&mut self) {
        if self.live.is_empty() {
            return;
        }
        let pairs: Vec<(u64, u64)> = self
            .live
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect();
        let index = self.live_index;
        self.interval(index).latency_us.extend(pairs);
        self.live.reset();
    }

    /// Compacts the interval in progress; call once recording has ended.
    pub fn finish(&mut self) {
        self.compact_live();
    }

    /// A successful transaction that ended in interval `index`.
    pub fn record_transaction(&mut self, index: usize, latency_ns: u64, bytes: Counters) {
        self.transactions += 1;
        self.latency_sum_ns += latency_ns;
        self.latency.saturating_record(latency_ns.max(1));
        self.bytes.bytes_sent += bytes.bytes_sent;
        self.bytes.bytes_received += bytes.bytes_received;
        self.round_trips += bytes.round_trips as u64;
        let us = (latency_ns / 1_000).max(1);
        self.interval(index).transactions += 1;
        if index > self.live_index {
            self.compact_live();
            self.live_index = index;
        }
        if index == self.live_index {
            self.live.saturating_record(us);
        } else {
            // A late record for a finished interval (one worker's transactions end in
            // order, so this does not happen in practice): keep it as a pair.
            self.interval(index).latency_us.push((us, 1));
        }
    }

    /// Prepares the per-command records (`-r`), so recording them never allocates.
    pub fn with_commands(mut self, n: usize) -> Measurements {
        self.commands = (0..n).map(|_| CommandRecord::new()).collect();
        self
    }

    /// Counts per script for a run of `n` scripts.
    pub fn with_scripts(mut self, n: usize) -> Measurements {
        self.scripts = vec![ScriptCount::default(); n];
        self
    }

    /// A measured transaction's retries (0: it ran once).
    pub fn record_retries(&mut self, retries: u32) {
        if retries > 0 {
            self.retried += 1;
            self.retries += u64::from(retries);
        }
    }

    /// A measured transaction of script `i` that succeeded or failed.
    pub fn record_script(&mut self, i: usize, ok: bool) {
        if let Some(c) = self.scripts.get_mut(i) {
            if ok {
                c.transactions += 1;
            } else {
                c.failed += 1;
            }
        }
    }

    /// The per-command times of a measured transaction, failed or not: every command
    /// it completed, and the one it failed at. pgbench's -r counts the same way.
    pub fn record_commands(&mut self, t: &crate::workload::CommandTimes) {
        self.record_commands_at(0, t);
    }

    /// As [`Measurements::record_commands`], for a script whose commands start at `offset`
    /// among the run's (several scripts share one list).
    pub fn record_commands_at(&mut self, offset: usize, t: &crate::workload::CommandTimes) {
        let commands = self.commands.get_mut(offset..).unwrap_or_default();
        for (rec, &ns) in commands.iter_mut().zip(&t.ns[..t.reached]) {
            // A command a branch of \if skipped did not run in this transaction.
            if ns == crate::workload::CommandTimes::SKIPPED {
                continue;
            }
            rec.latency.saturating_record(ns.max(1));
            rec.sum_ns += ns;
        }
        if let Some(rec) = t.failed.and_then(|i| self.commands.get_mut(offset + i)) {
            rec.failures += 1;
        }
    }

    /// A transaction skipped under -R and -L (it was due longer ago than the limit).
    pub fn record_skip(&mut self) {
        self.skipped += 1;
    }

    pub fn record_lag(&mut self, lag_ns: u64) {
        self.lag.saturating_record(lag_ns.max(1));
    }

    /// A connect made during the measurement.
    pub fn record_connect(&mut self, index: usize, t: &Timeline) {
        self.connects += 1;
        self.connect_ns += t.total_ns;
        self.connect.saturating_record(t.total_ns.max(1));
        for p in Phase::ALL {
            if let Some(span) = t.phase(p) {
                self.connect_phases[p.index()].saturating_record(span.ns.max(1));
            }
        }
        self.interval(index).connects += 1;
    }

    /// The time a failed measured transaction took, from its (intended) start to its
    /// failure (after its tries).
    pub fn record_failed_time(&mut self, ns: u64) {
        self.failed_ns += ns;
    }

    /// A failure of `kind`; `message` is formatted only for the first of its kind.
    pub fn record_failure(
        &mut self,
        index: usize,
        kind: &str,
        message: impl FnOnce() -> String,
        transaction: bool,
    ) {
        match self.failures.get_mut(kind) {
            Some(f) => f.count += 1,
            None => {
                self.failures.insert(
                    kind.to_string(),
                    FailureCount {
                        count: 1,
                        example: message(),
                    },
                );
            }
        }
        if transaction {
            self.failed_transactions += 1;
        }
        self.interval(index).failures += 1;
    }

    /// A refused connect attempt of `kind` in interval `index`; `message` is formatted
    /// only for the first of its kind.
    pub fn record_refused(&mut self, index: usize, kind: &str, message: impl FnOnce() -> String) {
        match self.refused.get_mut(kind) {
            Some(f) => f.count += 1,
            None => {
                self.refused.insert(
                    kind.to_string(),
                    FailureCount {
                        count: 1,
                        example: message(),
                    },
                );
            }
        }
        self.refused_attempts += 1;
        self.interval(index).refused += 1;
    }
}

/// Adds `from`'s failure counts to `into`'s, key by key: a key new to `into` comes with
/// its first message.
pub fn add_failures(into: &mut BTreeMap<String, FailureCount>, from: &BTreeMap<String, FailureCount>) {
    for (k, f) in from {
        into.entry(k.clone())
            .and_modify(|mine| mine.count += f.count)
            .or_insert_with(|| f.clone());
    }
}

impl AddAssign<&Measurements> for Measurements {
    fn add_assign(&mut self, o: &Measurements) {
        self.latency.add(&o.latency).expect("same bounds");
        self.lag.add(&o.lag).expect("same bounds");
        self.connect.add(&o.connect).expect("same bounds");
        for (a, b) in self.connect_phases.iter_mut().zip(&o.connect_phases) {
            a.add(b).expect("same bounds");
        }
        self.transactions += o.transactions;
        self.late += o.late;
        self.skipped += o.skipped;
        self.failed_transactions += o.failed_transactions;
        self.latency_sum_ns += o.latency_sum_ns;
        self.failed_ns += o.failed_ns;
        add_failures(&mut self.failures, &o.failures);
        add_failures(&mut self.refused, &o.refused);
        self.refused_attempts += o.refused_attempts;
        self.connects += o.connects;
        self.connect_ns += o.connect_ns;
        self.bytes.bytes_sent += o.bytes.bytes_sent;
        self.bytes.bytes_received += o.bytes.bytes_received;
        self.round_trips += o.round_trips;
        if self.commands.len() < o.commands.len() {
            self.commands.resize_with(o.commands.len(), CommandRecord::new);
        }
        for (a, b) in self.commands.iter_mut().zip(&o.commands) {
            a.latency.add(&b.latency).expect("same bounds");
            a.sum_ns += b.sum_ns;
            a.failures += b.failures;
        }
        self.retried += o.retried;
        self.retries += o.retries;
        if self.scripts.len() < o.scripts.len() {
            self.scripts.resize(o.scripts.len(), ScriptCount::default());
        }
        for (a, b) in self.scripts.iter_mut().zip(&o.scripts) {
            a.transactions += b.transactions;
            a.failed += b.failed;
        }
        if self.series.len() < o.series.len() {
            self.series.resize_with(o.series.len(), SeriesEntry::default);
        }
        for (a, b) in self.series.iter_mut().zip(&o.series) {
            a.transactions += b.transactions;
            a.failures += b.failures;
            a.connects += b.connects;
            a.refused += b.refused;
            a.latency_us.extend_from_slice(&b.latency_us);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_equals_recording_everything_in_one() {
        let mut a = Measurements::new();
        let mut b = Measurements::new();
        let mut all = Measurements::new();
        let mut x: u64 = 12345;
        for i in 0..10_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = (x >> 40) + 1_000;
            let idx = (i / 1000) as usize;
            let c = Counters {
                bytes_sent: 10,
                bytes_received: 20,
                round_trips: 1,
            };
            if i % 3 == 0 { &mut a } else { &mut b }.record_transaction(idx, v, c);
            all.record_transaction(idx, v, c);
            if i % 1000 == 0 {
                a.record_failure(idx, "57P01", || "terminated".into(), true);
                a.record_failed_time(v);
                all.record_failure(idx, "57P01", || "terminated".into(), true);
                all.record_failed_time(v);
            }
        }
        a.finish();
        b.finish();
        all.finish();
        let mut merged = Measurements::new();
        merged += &a;
        merged += &b;
        assert_eq!(merged.transactions, all.transactions);
        assert_eq!(merged.latency, all.latency);
        assert_eq!(merged.failures, all.failures);
        assert_eq!(merged.failed_transactions, 10);
        assert_eq!(
            (merged.latency_sum_ns, merged.failed_ns),
            (all.latency_sum_ns, all.failed_ns)
        );
        assert!(merged.failed_ns > 0);
        assert_eq!(
            merged.bytes,
            Counters {
                bytes_sent: 100_000,
                bytes_received: 200_000,
                round_trips: 0
            }
        );
        assert_eq!(merged.series.len(), 10);
        let (mut hm, mut hw) = (interval_histogram(), interval_histogram());
        for (m, w) in merged.series.iter().zip(&all.series) {
            assert_eq!(m.transactions, w.transactions);
            m.histogram_into(&mut hm);
            w.histogram_into(&mut hw);
            assert_eq!(hm, hw, "compacted intervals merge losslessly");
            assert!(
                m.latency_us.len() < 1_000,
                "compact: {} pairs",
                m.latency_us.len()
            );
        }
        assert_eq!(
            merged.latency.value_at_quantile(0.99),
            all.latency.value_at_quantile(0.99)
        );
    }

    #[test]
    fn per_command_records_merge_and_count_failures_where_they_happened() {
        use crate::workload::CommandTimes;
        let (mut a, mut b) = (
            Measurements::new().with_commands(3),
            Measurements::new().with_commands(3),
        );
        // A transaction that completed all three commands, and one that failed at the second.
        let done = CommandTimes {
            ns: vec![100, 2_000, 3_000],
            reached: 3,
            failed: None,
        };
        let broken = CommandTimes {
            ns: vec![200, 9_999, 9_999],
            reached: 1,
            failed: Some(1),
        };
        a.record_commands(&done);
        b.record_commands(&done);
        b.record_commands(&broken);
        let mut merged = Measurements::new();
        merged += &a;
        merged += &b;
        let c = &merged.commands;
        assert_eq!(c.len(), 3);
        assert_eq!((c[0].latency.len(), c[0].sum_ns, c[0].failures), (3, 400, 0));
        // The failed execution is a failure, not a latency (its stale 9,999 is ignored).
        assert_eq!((c[1].latency.len(), c[1].sum_ns, c[1].failures), (2, 4_000, 1));
        assert_eq!((c[2].latency.len(), c[2].sum_ns, c[2].failures), (2, 6_000, 0));
        assert!(
            Measurements::new().commands.is_empty(),
            "nothing allocated without -r"
        );
    }

    #[test]
    fn out_of_range_values_saturate_instead_of_failing() {
        let mut r = Measurements::new();
        r.record_transaction(0, 0, Counters::default());
        r.record_transaction(0, u64::MAX, Counters::default());
        assert_eq!(r.transactions, 2);
        assert!(r.latency.max() >= MAX_NS - MAX_NS / 1000);
    }
}

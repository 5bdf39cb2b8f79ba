//! Transaction shapes: the application's transactions grouped by what they run. A shape
//! is the ordered list of statement fingerprints of one transaction, from its first
//! request to the response that leaves the session idle; a lone autocommit statement is
//! a shape of its own. One mean over every transaction hides an application whose
//! transactions differ (a pool's one-round-trip pre-ping beside a six-round-trip
//! transfer: their mean is neither), so each shape gets its own count, share of time,
//! round trips and time distribution, and the round-trip model predicts each.
//!
//! Bounded, because a trace can be huge and hostile: a transaction's key keeps at most
//! [`MAX_SHAPE_STATEMENTS`] fingerprints (the rest mark it truncated: transactions alike
//! that far are one shape), at most [`MAX_SHAPES`] shapes are kept apart (later new ones
//! are counted together as one row, "(other shapes)"), and each statement's text is cut
//! to [`MAX_TEXT_CHARS`] (the statements table has it whole, by fingerprint). What grows
//! with the trace is one time per transaction, as the profile's own distribution keeps;
//! what a shape hands on of its distribution is bounded (a percentile curve of at most
//! 41 points), whatever its count.

use std::collections::HashMap;

use super::spread::{percentile_curve, Spread};

/// Distinct shapes kept apart; the transactions of any later one are one row.
pub const MAX_SHAPES: usize = 1_000;
/// Fingerprints kept in a shape's key; a longer transaction's is marked truncated.
pub const MAX_SHAPE_STATEMENTS: usize = 64;
/// A statement's text as a shape keeps it, in characters.
pub const MAX_TEXT_CHARS: usize = 240;
/// The fingerprint a shape records for a statement that ran without SQL in the trace (a
/// function call, a prepared statement whose preparation was not recorded).
pub const UNKNOWN_STATEMENT: u64 = 0;

/// One shape of transaction and how the application's transactions of it went.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ShapeProfile {
    /// 16 hex digits: FNV-1a 64 of the fingerprints' ids (little-endian bytes, in
    /// order, then one byte 1 if truncated); "-" for the "(other shapes)" row.
    pub id: String,
    /// Its statements' fingerprints in order (16 hex digits each, as `statements[]`'s).
    pub fingerprints: Vec<String>,
    /// Their normalised texts, each cut to [`MAX_TEXT_CHARS`] characters.
    pub statements: Vec<String>,
    /// The transactions ran more statements than the key keeps.
    pub truncated: bool,
    /// Transactions of this shape.
    pub count: u64,
    /// Its transactions' recorded time, as a share of all transactions' (0 to 1).
    pub share: Option<f64>,
    /// Requests and round trips per transaction, means.
    pub requests: f64,
    pub round_trips: f64,
    /// A transaction's recorded time, first request to last response, ms.
    pub time_ms: Spread,
    /// The same times' percentile curve, `(quantile, ms)` pairs (`spread::percentile_curve`:
    /// at most 41, by nearest rank, as far into the tail as the count supports): the
    /// shape's distribution, drawn by `trace --html` and beside the times now by
    /// `replay --html`.
    pub percentiles_ms: Vec<(f64, f64)>,
    /// Per statement, in order (as `statements`): the mean time from the previous
    /// statement's answer (the transaction's first request, for the first) to its own,
    /// and the mean round trips in it: the shape's waterfall. Empty for "(other
    /// shapes)".
    pub steps: Vec<ShapeStep>,
}

/// One statement's part of its shape's time.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ShapeStep {
    pub mean_ms: f64,
    pub round_trips: f64,
}

/// What a transaction ran, gathered as its requests are read (by the profile, and by
/// replay's schedule, which names each recorded transaction's shape by the same id).
#[derive(Debug, Default, Clone)]
pub struct TxShape {
    ids: Vec<u64>,
    truncated: bool,
    /// Per statement kept: the time from the previous statement's end (the
    /// transaction's start, for the first) to its own, ns, and the round trips in it.
    steps: Vec<(u64, u64)>,
    /// Where the next step starts, and the round trips since.
    mark_ns: Option<u64>,
    pending_round_trips: u64,
}

impl TxShape {
    /// A statement the transaction executed, by fingerprint id.
    pub fn push(&mut self, id: u64) {
        if self.ids.len() < MAX_SHAPE_STATEMENTS {
            self.ids.push(id);
        } else {
            self.truncated = true;
        }
    }

    /// One of the transaction's requests, in order: sent at `at_ns`, answered by
    /// `end_ns` (the session's time) after `round_trips`; `runs`, the fingerprint ids of
    /// the statements it executed, in order (a pipelined group's several). The time and
    /// round trips up to a request's answer (a preparation's before it, the
    /// application's think) are its first statement's step; the others of the same
    /// request were answered with it, steps of no time of their own.
    pub fn request(&mut self, at_ns: u64, end_ns: u64, round_trips: u64, runs: &[u64]) {
        let mark = *self.mark_ns.get_or_insert(at_ns);
        self.pending_round_trips += round_trips;
        for (k, &id) in runs.iter().enumerate() {
            let kept = self.ids.len() < MAX_SHAPE_STATEMENTS;
            self.push(id);
            let step = if k == 0 {
                (
                    end_ns.saturating_sub(mark),
                    std::mem::take(&mut self.pending_round_trips),
                )
            } else {
                (0, 0)
            };
            match self.steps.last_mut() {
                // Beyond the key's statements, the last kept step takes the rest.
                Some(last) if !kept => {
                    last.0 += step.0;
                    last.1 += step.1;
                }
                _ => self.steps.push(step),
            }
        }
        if !runs.is_empty() {
            self.mark_ns = Some(end_ns.max(mark));
        }
    }

    /// Its id, as [`ShapeProfile::id`] has it.
    pub fn id(&self) -> String {
        format!("{:016x}", shape_id(&self.ids, self.truncated))
    }
}

/// One shape's sums so far.
struct Tally {
    texts: Vec<String>,
    times: Vec<f64>,
    requests: u64,
    round_trips: u64,
    /// Per statement: its steps' time (ns) and round trips, summed.
    steps: Vec<(u64, u64)>,
}

impl Tally {
    fn new(texts: Vec<String>) -> Tally {
        Tally {
            texts,
            times: Vec::new(),
            requests: 0,
            round_trips: 0,
            steps: Vec::new(),
        }
    }
}

/// The shapes of the transactions read so far.
#[derive(Default)]
pub(crate) struct Shapes {
    kept: HashMap<(Vec<u64>, bool), Tally>,
    other: Option<Tally>,
}

impl Shapes {
    /// A transaction that ended: its shape, recorded time, requests and round trips;
    /// `text` names a fingerprint id's statement (asked only for a new shape's).
    pub(crate) fn add(
        &mut self,
        shape: TxShape,
        ms: f64,
        requests: u64,
        round_trips: u64,
        text: impl Fn(u64) -> String,
    ) {
        let steps = shape.steps;
        let key = (shape.ids, shape.truncated);
        let tally = if self.kept.len() < MAX_SHAPES || self.kept.contains_key(&key) {
            self.kept
                .entry(key)
                .or_insert_with_key(|(ids, _)| Tally::new(ids.iter().map(|&id| cut(&text(id))).collect()))
        } else {
            self.other
                .get_or_insert_with(|| Tally::new(vec!["(other shapes)".into()]))
        };
        tally.times.push(ms);
        tally.requests += requests;
        tally.round_trips += round_trips;
        if tally.steps.len() < steps.len() {
            tally.steps.resize(steps.len(), (0, 0));
        }
        for (sum, s) in tally.steps.iter_mut().zip(steps) {
            sum.0 += s.0;
            sum.1 += s.1;
        }
    }

    /// The shapes by share of time, most first (then by count, then by id, so the
    /// order is stable); `total_ms` is every transaction's time, summed.
    pub(crate) fn finish(self, total_ms: f64) -> Vec<ShapeProfile> {
        let row = |id: String, fingerprints: Vec<String>, truncated: bool, mut t: Tally| {
            let n = t.times.len().max(1) as f64;
            let percentiles_ms = percentile_curve(&mut t.times);
            let sum: f64 = t.times.iter().sum();
            ShapeProfile {
                id,
                fingerprints,
                statements: t.texts,
                truncated,
                count: t.times.len() as u64,
                share: (total_ms > 0.0).then(|| sum / total_ms),
                requests: t.requests as f64 / n,
                round_trips: t.round_trips as f64 / n,
                steps: t
                    .steps
                    .iter()
                    .map(|&(ns, rts)| ShapeStep {
                        mean_ms: ns as f64 / 1e6 / n,
                        round_trips: rts as f64 / n,
                    })
                    .collect(),
                time_ms: Spread::of(t.times),
                percentiles_ms,
            }
        };
        let mut out: Vec<ShapeProfile> = self
            .kept
            .into_iter()
            .map(|((ids, truncated), t)| {
                let fingerprints = ids.iter().map(|id| format!("{id:016x}")).collect();
                row(
                    format!("{:016x}", shape_id(&ids, truncated)),
                    fingerprints,
                    truncated,
                    t,
                )
            })
            .collect();
        if let Some(mut t) = self.other {
            // Steps of different shapes, summed by position, mean nothing.
            t.steps.clear();
            out.push(row("-".into(), Vec::new(), false, t));
        }
        out.sort_by(|a, b| {
            let share = |s: &ShapeProfile| s.share.unwrap_or(0.0);
            share(b)
                .total_cmp(&share(a))
                .then(b.count.cmp(&a.count))
                .then(a.id.cmp(&b.id))
        });
        out
    }
}

/// FNV-1a 64 of the ids' little-endian bytes and the truncation mark: stable across
/// versions and machines, as the fingerprints' own ids are.
fn shape_id(ids: &[u64], truncated: bool) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let bytes = ids
        .iter()
        .flat_map(|id| id.to_le_bytes())
        .chain([u8::from(truncated)]);
    for x in bytes {
        h ^= x as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_TEXT_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tx(ids: &[u64]) -> TxShape {
        let mut s = TxShape::default();
        for &id in ids {
            s.push(id);
        }
        s
    }

    /// More distinct shapes than kept: the first [`MAX_SHAPES`] are rows of their own,
    /// every later one's transactions are counted in "(other shapes)"; a transaction
    /// longer than the key keeps is one truncated shape however it ends.
    #[test]
    fn the_caps_hold_for_many_distinct_shapes() {
        let mut s = Shapes::default();
        let extra = 250;
        for i in 0..(MAX_SHAPES + extra) as u64 {
            s.add(tx(&[i + 1]), 1.0, 1, 1, |id| format!("SELECT {id}"));
        }
        // Shapes already kept still count on their own row once the cap is reached.
        s.add(tx(&[1]), 1.0, 1, 1, |_| {
            unreachable!("a kept shape's texts are not asked again")
        });
        let long: Vec<u64> = (0..200).collect();
        let mut longer = long.clone();
        longer.push(7);
        let mut t = Shapes::default();
        t.add(tx(&long), 2.0, 200, 200, |_| "x".repeat(1_000));
        t.add(tx(&longer), 2.0, 201, 201, |_| "x".repeat(1_000));

        let rows = s.finish((MAX_SHAPES + extra + 1) as f64);
        assert_eq!(rows.len(), MAX_SHAPES + 1);
        let other = rows.iter().find(|r| r.id == "-").unwrap();
        assert_eq!(other.count, extra as u64);
        assert_eq!(other.statements, ["(other shapes)"]);
        assert_eq!(
            rows.iter().map(|r| r.count).sum::<u64>(),
            (MAX_SHAPES + extra + 1) as u64
        );
        let first = rows
            .iter()
            .find(|r| r.fingerprints == ["0000000000000001"])
            .unwrap();
        assert_eq!(first.count, 2);

        let rows = t.finish(4.0);
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert!(r.truncated);
        assert_eq!((r.count, r.fingerprints.len()), (2, MAX_SHAPE_STATEMENTS));
        assert_eq!(r.statements[0].chars().count(), MAX_TEXT_CHARS + 1);
        assert_eq!(r.requests, 200.5);
        assert_eq!(r.share, Some(1.0));
    }

    /// BEGIN; a Parse alone then the SELECT it prepared (two round trips, one step);
    /// COMMIT: three steps, each from the previous answer to its own.
    #[test]
    fn a_shapes_steps_run_from_answer_to_answer() {
        let mut t = TxShape::default();
        t.request(100, 200, 1, &[1]);
        t.request(300, 400, 1, &[]);
        t.request(450, 600, 1, &[2]);
        t.request(700, 750, 1, &[3]);
        assert_eq!(t.steps, vec![(100, 1), (400, 2), (150, 1)]);
        let mut s = Shapes::default();
        s.add(t.clone(), 0.65, 4, 4, |_| "x".into());
        s.add(t, 0.65, 4, 4, |_| "x".into());
        let rows = s.finish(1.3);
        let steps: Vec<(f64, f64)> = rows[0].steps.iter().map(|s| (s.mean_ms, s.round_trips)).collect();
        assert_eq!(steps, vec![(0.0001, 1.0), (0.0004, 2.0), (0.00015, 1.0)]);
    }
}

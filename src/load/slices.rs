//! Time slices: several load runs ("arms") on one machine at once, taking turns every
//! few dozen milliseconds, so each arm's figures come from the same stretches of the
//! machine as the others'.
//!
//! Why: on a shared VM a run's throughput wanders with the machine (other tenants in the
//! shared cache, where the scheduler puts threads), and the wander is slow: 50 ms windows
//! of one run correlate at 0.7-0.9 with their neighbours, and still at 0.4-0.7 400 ms
//! apart. Arms measured one after another, a second or more apart, see different
//! machines; arms that alternate every 100 ms see nearly the same one, so their ratio
//! cancels most of the wander. The connect suites get the same from interleaving
//! connection by connection.
//!
//! How: one [`Slices`] per group of arms. A driver ([`Slices::drive`]) opens one arm's
//! turn at a time. A client enters a transaction only during its arm's turn (it waits
//! otherwise, untimed), and when a turn closes the driver waits until the arm's
//! transactions in flight have ended before it opens the next, so arms never overlap.
//! An arm's measured time is the sum of its turns, each the mean of its clients' spans
//! from the opening to the end of the client's last transaction: a transaction that
//! straddles the closing counts, and so does the time it took, charged to its own client
//! only. The first turns warm every arm up and are not counted.
//!
//! CPU: the server, the pooler and the machine serve every arm in turn, so the driver
//! reads each arm's groups (its server, pooler, relay threads, its load's worker
//! threads and the machine's counters) just before its turn opens and just after it
//! drains, while no arm runs, and adds the differences up per arm.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use tokio::sync::{watch, Notify};

use crate::host::{cpu_between, Accounting, Cpu, MachineCpu, MachineUse};

/// No arm's turn: between turns, before the first and while draining.
const CLOSED: usize = usize::MAX;
/// The run is over: waiting clients leave.
const DONE: usize = usize::MAX - 1;

/// How long the arms may take to connect before the group gives up.
pub const ARRIVAL_LIMIT: Duration = Duration::from_secs(60);

/// The turns of a group of arms.
#[derive(Debug)]
pub struct Slices {
    arms: usize,
    /// Whose turn it is (an arm, `CLOSED` or `DONE`); the watch wakes waiting clients.
    turn: AtomicUsize,
    wake: watch::Sender<usize>,
    /// Whether transactions entered now are measured (after the warm-up turns).
    measuring: AtomicBool,
    in_flight: Vec<AtomicUsize>,
    /// Per arm, the transactions that were in flight when its turn closed: the sum of
    /// their ends (nanoseconds since `base`) and their count.
    tail_ns: Vec<AtomicU64>,
    tail_n: Vec<AtomicU64>,
    /// Per arm, its clients (0: not said, and a turn's mean is over the clients in flight
    /// at its closing).
    clients: Vec<AtomicUsize>,
    drained: Notify,
    base: Instant,
    /// Arms whose clients are all connected, for the start line.
    arrived: (Mutex<usize>, Condvar),
    /// Per arm: whose CPU to read, and its load's worker threads.
    accounting: Mutex<Vec<(Accounting, Vec<i32>)>>,
}

/// One arm's CPU over its counted turns; `None` where a group was not read at both ends
/// of every turn (or the arm has none: no pooler on its path).
#[derive(Debug, Clone, Default)]
pub struct ArmCpu {
    pub clients: Option<Cpu>,
    /// The clients' threads' context switches (voluntary, involuntary).
    pub switches: Option<(u64, u64)>,
    /// The whole machine during the arm's turns.
    pub machine: Option<MachineUse>,
    pub server: Option<Cpu>,
    pub pooler: Option<Cpu>,
    pub relays: Option<Cpu>,
}

/// One reading of an arm's groups.
#[derive(Clone, Copy)]
struct Reading {
    clients: Option<Cpu>,
    switches: Option<(u64, u64)>,
    machine: Option<MachineCpu>,
    server: Option<Cpu>,
    pooler: Option<Cpu>,
    relays: Option<Cpu>,
}

/// What a driven group measured.
#[derive(Debug, Clone)]
pub struct Turns {
    /// Per arm, the sum of its measured turns.
    pub measured: Vec<Duration>,
    /// Measured turns per arm.
    pub turns: u32,
    /// Per arm, its CPU over its counted turns.
    pub cpu: Vec<ArmCpu>,
}

/// A client's transaction inside its arm's turn; dropping it (or [`InTurn::end`]) leaves
/// the turn.
pub struct InTurn {
    slices: Arc<Slices>,
    arm: usize,
    pub measured: bool,
}

impl InTurn {
    /// The transaction ended at `at`.
    pub fn end(self, at: Instant) {
        let s = &self.slices;
        let ns = at.saturating_duration_since(s.base).as_nanos() as u64;
        // Ended after the turn closed: the client's last transaction of the turn.
        if s.turn.load(SeqCst) != self.arm {
            s.tail_ns[self.arm].fetch_add(ns, SeqCst);
            s.tail_n[self.arm].fetch_add(1, SeqCst);
        }
    }
}

impl Drop for InTurn {
    fn drop(&mut self) {
        self.slices.leave(self.arm);
    }
}

/// One arm's handle, which its load's clients hold.
#[derive(Debug, Clone)]
pub struct Turn {
    pub slices: Arc<Slices>,
    pub arm: usize,
}

impl Turn {
    /// Says whose CPU this arm's turns are charged with (the groups on its path).
    pub fn account(&self, accounting: Accounting) {
        self.slices.accounting.lock().unwrap_or_else(|e| e.into_inner())[self.arm].0 = accounting;
    }

    /// Says how many clients this arm's load runs, so that a turn's time is the mean of
    /// its clients' spans ([`Slices::drive`]).
    pub fn clients(&self, n: usize) {
        self.slices.clients[self.arm].store(n, SeqCst);
    }

    /// Registers the calling thread as one of this arm's load workers.
    pub fn register_worker(&self) {
        let tid = crate::host::current_thread_id();
        self.slices.accounting.lock().unwrap_or_else(|e| e.into_inner())[self.arm]
            .1
            .push(tid);
    }

    /// Waits for this arm's turn and enters it; `None` once the run is over.
    pub async fn enter(&self) -> Option<InTurn> {
        let s = &self.slices;
        let mut wake = s.wake.subscribe();
        loop {
            wake.borrow_and_update();
            // Counted in before the turn is read: the driver closes the turn before it
            // reads the count, so (all SeqCst) either it sees this transaction and waits
            // for it, or this client sees the turn closed.
            s.in_flight[self.arm].fetch_add(1, SeqCst);
            let turn = s.turn.load(SeqCst);
            if turn == self.arm {
                return Some(InTurn {
                    slices: s.clone(),
                    arm: self.arm,
                    measured: s.measuring.load(SeqCst),
                });
            }
            s.leave(self.arm);
            if turn == DONE || wake.changed().await.is_err() {
                return None;
            }
        }
    }

    /// Blocks until every arm has arrived (its clients are connected), at most
    /// [`ARRIVAL_LIMIT`]; the load's start gate.
    pub fn arrive(&self) -> Result<Instant> {
        let limit = ARRIVAL_LIMIT;
        let (count, all) = &self.slices.arrived;
        let mut n = count.lock().unwrap_or_else(|e| e.into_inner());
        *n += 1;
        all.notify_all();
        let deadline = Instant::now() + limit;
        while *n < self.slices.arms {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!(
                    "time slices: {} of {} arms connected within {}; the others never did",
                    *n,
                    self.slices.arms,
                    crate::units::format_duration(limit)
                );
            }
            n = all.wait_timeout(n, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        Ok(Instant::now())
    }
}

impl Slices {
    pub fn new(arms: usize) -> Arc<Slices> {
        Arc::new(Slices {
            arms,
            turn: AtomicUsize::new(CLOSED),
            wake: watch::channel(CLOSED).0,
            measuring: false.into(),
            in_flight: (0..arms).map(|_| AtomicUsize::new(0)).collect(),
            tail_ns: (0..arms).map(|_| AtomicU64::new(0)).collect(),
            tail_n: (0..arms).map(|_| AtomicU64::new(0)).collect(),
            clients: (0..arms).map(|_| AtomicUsize::new(0)).collect(),
            drained: Notify::new(),
            base: Instant::now(),
            arrived: (Mutex::new(0), Condvar::new()),
            accounting: Mutex::new(vec![Default::default(); arms]),
        })
    }

    /// Reads `arms`' groups at one moment: one reading of the machine and one pass over
    /// `/proc` for all of them.
    fn read(&self, arms: &[usize]) -> Vec<Reading> {
        let accounting = self.accounting.lock().unwrap_or_else(|e| e.into_inner());
        let machine = MachineCpu::read();
        let procs = std::cell::OnceCell::new();
        arms.iter()
            .map(|&arm| {
                let (a, workers) = &accounting[arm];
                Reading {
                    clients: crate::host::threads_cpu(workers).filter(|_| !workers.is_empty()),
                    switches: crate::host::threads_switches(workers).filter(|_| !workers.is_empty()),
                    machine,
                    server: a.server.as_ref().and_then(|s| s.cpu_in(&procs)),
                    pooler: a.pooler.as_ref().and_then(|s| s.cpu_in(&procs)),
                    relays: crate::host::threads_cpu(&a.relays).filter(|_| !a.relays.is_empty()),
                }
            })
            .collect()
    }

    /// A drained turn's time: the mean of its clients' spans, each from the opening to
    /// the end of the client's last transaction (the closing for a client with none in
    /// flight then). Clients finish their last transactions one by one after the
    /// closing; the mean span charges each client its own overrun, so a turn of eight
    /// clients at 50 ms a transaction is not charged as if all eight had worked until the
    /// slowest finished.
    fn turn_time(&self, arm: usize, opened: Instant, closed: Instant) -> Duration {
        let clients = self.clients[arm].load(SeqCst);
        let closed_ns = closed.saturating_duration_since(self.base).as_nanos() as u64;
        let (sum, n) = (self.tail_ns[arm].load(SeqCst), self.tail_n[arm].load(SeqCst));
        let overrun = sum.saturating_sub(n * closed_ns);
        closed.saturating_duration_since(opened)
            + Duration::from_nanos(overrun / clients.max(n as usize).max(1) as u64)
    }

    pub fn turn(self: &Arc<Slices>, arm: usize) -> Turn {
        Turn {
            slices: self.clone(),
            arm,
        }
    }

    fn leave(&self, arm: usize) {
        if self.in_flight[arm].fetch_sub(1, SeqCst) == 1 {
            self.drained.notify_one();
        }
    }

    fn set(&self, turn: usize) {
        self.turn.store(turn, SeqCst);
        self.wake.send_replace(turn);
    }

    /// Runs the turns: `warm_turns` rounds of turns uncounted, then `turns` rounds
    /// counted, each arm `slice` long, the first arm of each round one further along (A B
    /// C, B C A, ...). Waits for every arm's clients to be connected first. `stop`
    /// turning true ends it early. Returns each arm's measured time.
    pub async fn drive(
        self: &Arc<Slices>,
        slice: Duration,
        warm_turns: u32,
        turns: u32,
        mut stop: watch::Receiver<bool>,
    ) -> Turns {
        let mut measured = vec![Duration::ZERO; self.arms];
        let mut done_turns = 0;
        // Per arm and group: the sum so far, `None` once a reading failed.
        let mut cpu: Vec<[Option<Cpu>; 4]> = vec![[Some((Duration::ZERO, Duration::ZERO)); 4]; self.arms];
        let mut switches: Vec<Option<(u64, u64)>> = vec![Some((0, 0)); self.arms];
        let mut machine: Vec<Option<MachineCpu>> = vec![Some(MachineCpu::zero()); self.arms];
        // The start line: every arm's load has arrived at its start gate (or, after
        // the gates' own limit, one never will: the gates fail and the run ends).
        let waiting = Instant::now();
        loop {
            let arrived = *self.arrived.0.lock().unwrap_or_else(|e| e.into_inner());
            if arrived >= self.arms {
                break;
            }
            if *stop.borrow() || waiting.elapsed() > ARRIVAL_LIMIT {
                self.set(DONE);
                return Turns {
                    measured,
                    turns: 0,
                    cpu: vec![ArmCpu::default(); self.arms],
                };
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        // The next turn's "before", read with the last turn's "after": nothing runs
        // between the two, so one reading serves both and the gap between turns halves.
        let mut carried: Option<(usize, Reading)> = None;
        let passes = warm_turns + turns;
        'rounds: for round in 0..passes {
            let counted = round >= warm_turns;
            self.measuring.store(counted, SeqCst);
            for k in 0..self.arms {
                if *stop.borrow_and_update() {
                    break 'rounds;
                }
                let arm = (round as usize + k) % self.arms;
                // Read while no arm runs, so the reading costs no arm's time.
                let before = counted.then(|| match carried.take() {
                    Some((a, r)) if a == arm => r,
                    _ => self.read(&[arm]).remove(0),
                });
                self.tail_ns[arm].store(0, SeqCst);
                self.tail_n[arm].store(0, SeqCst);
                let opened = Instant::now();
                self.set(arm);
                tokio::select! {
                    _ = tokio::time::sleep(slice) => {}
                    _ = stop.changed() => {}
                }
                self.set(CLOSED);
                let closed = Instant::now();
                while self.in_flight[arm].load(SeqCst) != 0 {
                    self.drained.notified().await;
                }
                if let Some(before) = before {
                    measured[arm] += self.turn_time(arm, opened, closed);
                    // The next turn's arm: this pass's next, or the next pass's first.
                    let next = if k + 1 < self.arms {
                        Some((round as usize + k + 1) % self.arms)
                    } else {
                        (round + 1 < passes).then(|| (round as usize + 1) % self.arms)
                    };
                    let readings = match next {
                        Some(next) => self.read(&[arm, next]),
                        None => self.read(&[arm]),
                    };
                    carried = next.zip(readings.get(1).copied());
                    add_turn(
                        &before,
                        &readings[0],
                        &mut cpu[arm],
                        &mut switches[arm],
                        &mut machine[arm],
                    );
                }
            }
            if counted {
                done_turns += 1;
            }
        }
        self.set(DONE);
        let cpu = cpu
            .into_iter()
            .zip(switches)
            .zip(machine)
            .map(
                |(([clients, server, pooler, relays], switches), machine)| ArmCpu {
                    clients,
                    switches,
                    machine: machine.and_then(|m| m.since(&MachineCpu::zero())),
                    server,
                    pooler,
                    relays,
                },
            )
            .collect();
        Turns {
            measured,
            turns: done_turns,
            cpu,
        }
    }
}

/// Adds one turn of an arm, read `before` and `after`, to the arm's sums: CPU per
/// group, context switches and the machine's; a sum turns `None` once a reading failed.
fn add_turn(
    before: &Reading,
    after: &Reading,
    cpu: &mut [Option<Cpu>; 4],
    switches: &mut Option<(u64, u64)>,
    machine: &mut Option<MachineCpu>,
) {
    let pairs = [
        (before.clients, after.clients),
        (before.server, after.server),
        (before.pooler, after.pooler),
        (before.relays, after.relays),
    ];
    *machine = match (machine.take(), &before.machine, &after.machine) {
        (Some(mut sum), Some(a), Some(b)) => {
            sum.add(a, b);
            Some(sum)
        }
        _ => None,
    };
    *switches = match (*switches, before.switches, after.switches) {
        (Some(s), Some(a), Some(b)) => Some((s.0 + b.0.saturating_sub(a.0), s.1 + b.1.saturating_sub(a.1))),
        _ => None,
    };
    for (sum, (a, b)) in cpu.iter_mut().zip(pairs) {
        *sum = match (*sum, a, b) {
            (Some(s), Some(a), Some(b)) => {
                let d = cpu_between(a, b);
                Some((s.0 + d.0, s.1 + d.1))
            }
            _ => None,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two arms' "transactions" on one runtime: they never overlap, each arm's measured
    /// time is its turns, and every transaction is counted in the turn it entered.
    #[tokio::test]
    async fn arms_take_turns_and_never_overlap() {
        let slices = Slices::new(2);
        slices.turn(0).clients(3);
        slices.turn(1).clients(3);
        let running = Arc::new(AtomicUsize::new(0));
        let overlaps = Arc::new(AtomicUsize::new(0));
        let mut clients = Vec::new();
        for arm in 0..2 {
            for _ in 0..3 {
                let (turn, running, overlaps) = (slices.turn(arm), running.clone(), overlaps.clone());
                clients.push(tokio::spawn(async move {
                    let mut counted = 0u32;
                    while let Some(t) = turn.enter().await {
                        // Another arm's transaction in flight now would be an overlap.
                        let bit = 1 << (arm * 8);
                        if running.fetch_add(bit, SeqCst) & !(0xff << (arm * 8)) != 0 {
                            overlaps.fetch_add(1, SeqCst);
                        }
                        tokio::time::sleep(Duration::from_micros(700)).await;
                        running.fetch_sub(bit, SeqCst);
                        counted += u32::from(t.measured);
                        t.end(Instant::now());
                    }
                    counted
                }));
            }
        }
        let gate = slices.turn(0);
        let gate2 = slices.turn(1);
        std::thread::spawn(move || gate.arrive().unwrap());
        std::thread::spawn(move || gate2.arrive().unwrap());
        let (_tx, stop) = watch::channel(false);
        let t = slices.drive(Duration::from_millis(20), 1, 5, stop).await;
        let mut total = 0;
        for c in clients {
            total += c.await.unwrap();
        }
        assert_eq!(overlaps.load(SeqCst), 0, "arms ran at the same time");
        assert_eq!(t.turns, 5);
        for m in &t.measured {
            // Five turns of 20 ms, each plus at most one transaction's drain.
            assert!(
                *m >= Duration::from_millis(100) && *m < Duration::from_millis(140),
                "{m:?}"
            );
        }
        // Three clients at about 1 ms per transaction, 100 ms each arm: on the order of
        // 300 per arm counted, never none.
        assert!(total > 100, "{total}");
    }

    /// One arm, two clients: one with short transactions, one whose every transaction
    /// outlasts the turn. A turn's time is the mean of the two clients' spans, not the
    /// slow one's: about (20 + 60) / 2 ms a turn, where the slowest end would give 60.
    #[tokio::test]
    async fn a_turn_lasts_its_clients_mean_span() {
        let slices = Slices::new(1);
        let turn = slices.turn(0);
        turn.clients(2);
        let mut clients = Vec::new();
        for long in [false, true] {
            let turn = slices.turn(0);
            clients.push(tokio::spawn(async move {
                while let Some(t) = turn.enter().await {
                    let ms = if long { 60 } else { 1 };
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    t.end(Instant::now());
                }
            }));
        }
        std::thread::spawn(move || turn.arrive().unwrap());
        let (_tx, stop) = watch::channel(false);
        let t = slices.drive(Duration::from_millis(20), 1, 3, stop).await;
        for c in clients {
            c.await.unwrap();
        }
        let per_turn = t.measured[0] / 3;
        assert!(
            per_turn >= Duration::from_millis(38) && per_turn < Duration::from_millis(52),
            "{per_turn:?} a turn"
        );
    }
}

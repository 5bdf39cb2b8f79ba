//! What the clients of one worker thread share: the run's clock ([`Times`]) and the
//! worker's state ([`WorkerShared`]: its plan, measurements, pool, first error, ramp and
//! back-off generator), and the one way a first error is kept. Apart from `client` so
//! that `connecting`, which opens the clients' connections, and `client`, which runs
//! them, both read it without importing each other.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::watch;

use super::plan::{ConnectRamp, LoadPlan};
use super::pool::Pool;
use crate::load::log::{Clock, TxLog};
use crate::load::measurements::{add_failures, Interval, Measurements};
use crate::net::transport::TlsInfo;

/// The shared clock of a run.
#[derive(Debug, Clone, Copy)]
pub struct Times {
    /// Set when the start gate failed: the workers close their connections and return.
    pub cancelled: bool,
    pub warm_start: Instant,
    pub measure_start: Instant,
    pub end: Option<Instant>,
    /// The run's instants in Unix time (the transaction log's timestamps).
    pub clock: Clock,
}

/// One worker's share of the connect ramp, merged into [`ConnectRamp`] at the end.
#[derive(Debug, Default)]
pub struct RampRecord {
    pub ramp: ConnectRamp,
    pub first_attempt: Option<Instant>,
    pub last_connected: Option<Instant>,
}

impl RampRecord {
    /// Adds another worker's ramp: counts summed, the first attempt and the last
    /// connection across the workers.
    pub fn add(&mut self, r: &RampRecord) {
        let (a, b) = (&mut self.ramp, &r.ramp);
        a.wanted += b.wanted;
        a.connected += b.connected;
        a.failed_attempts += b.failed_attempts;
        add_failures(&mut a.failures, &b.failures);
        self.first_attempt = match (self.first_attempt, r.first_attempt) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        self.last_connected = self.last_connected.max(r.last_connected);
    }
}

/// State shared by the clients of one worker (one thread, so `Rc` and `RefCell`).
pub struct WorkerShared {
    pub plan: Arc<LoadPlan>,
    pub measurements: RefCell<Measurements>,
    pub progress: RefCell<Interval>,
    pub pool: Option<Pool>,
    pub first_error: RefCell<Option<String>>,
    pub aborted: RefCell<Vec<String>>,
    pub server_version: RefCell<Option<String>>,
    pub tls: RefCell<Option<TlsInfo>>,
    pub last_end: RefCell<Option<Instant>>,
    pub setup: RefCell<(u64, u64)>,
    pub times: RefCell<Option<Times>>,
    /// This worker's transaction log (-l), written by its clients after each measured
    /// transaction, flushed when the worker ends.
    pub log: RefCell<Option<TxLog>>,
    /// Set when Ctrl-C stopped this worker's clients.
    pub stopped: std::cell::Cell<bool>,
    /// --exit-on-abort's switch, shared by every worker (see `threads::run`).
    pub halt: Arc<watch::Sender<bool>>,
    /// This worker's part of the connect ramp (the connections opened before the clock).
    pub ramp: RefCell<RampRecord>,
    /// The jitter of the clients' back-off after a refused connect: connbench's choice,
    /// not a script's, so it draws from a generator of its own and leaves the scripts'
    /// random values as a seed makes them.
    pub backoff_rng: RefCell<crate::rng::Rng>,
}

/// Keeps the run's first error; later ones are only counted, never formatted.
pub fn note_first_error(shared: &WorkerShared, message: impl FnOnce() -> String) {
    let mut first = shared.first_error.borrow_mut();
    if first.is_none() {
        *first = Some(message());
    }
}

//! What the runner tells a live view of a run while it measures (the Prometheus
//! endpoint of `run --metrics-listen`, `crate::live::Exporter`): the cell and repetition
//! it starts, its connect ramp as it goes, each progress period of that repetition, and
//! the exact figures it finished.
//! The runner sees only this trait, so it imports nothing above its stage; the command
//! hands the exporter in.

use std::sync::Arc;

use crate::load::measurements::{Interval, Measurements};
use crate::load::plan::RampProgress;

/// A live view of the counted repetitions (warm-up and prewarm steps are not told).
pub trait Sink {
    /// A repetition of `cell` (on `target`, by its redacted name, with `clients`) begins.
    fn begin(&self, cell: &str, target: &str, clients: u64);
    /// One merged progress period of `cell`'s repetition in progress.
    fn add_period(&self, cell: &str, period: &Interval);
    /// `cell`'s repetition ended with these exact figures.
    fn finish(&self, cell: &str, rec: &Measurements);
    /// What the run of `cell`'s repetition (once begun) counts its connect ramp into,
    /// so the view sees the connections before the clock as they are made.
    fn ramp(&self, cell: &str) -> Option<Arc<RampProgress>>;
}

//! A recorded application as a suite's workload: `workload = "trace:FILE"` in a cell (or
//! `[defaults]`), or `connbench run SUITE --workload trace:FILE` over every cell. A
//! repetition of such a cell replays the whole trace (`crate::replay`) at the recorded
//! pace through the cell's path (target, sslmode, distance, sidecar, the server's quota),
//! capped by the suite's `duration`, and its figures are the replay's, per request.
//!
//! What the trace decides is not a cell's to set: the application's clients, think time,
//! pace, protocol and connections are what was recorded. A cell that sets one is refused
//! (`run --workload` removes them, and says so); a cell whose question replay cannot ask
//! yet (a fault) is refused by name, or left out by `run
//! --workload` with a note, never run as something else. The one connection a cell may
//! set is `connection = "pool"` (with `pool_size`, `pool_max_lifetime`,
//! `pool_idle_timeout`, read as a load cell reads them): the pooling question, asked of
//! the application as `replay --pool` asks it ([`crate::replay::PoolSettings`]).
//! A per-request response time leaves a connect out, so what a pool saves shows in
//! `intended_to_answer_*`: each request's intended send to its answer, lag included.
//!
//! The trace's own predictions (`stats::app`, what `connbench trace` prints) are kept in
//! each repetition's figures (`trace_*`), so a stored run reports them as a live one does;
//! `summary` sets them beside the measured figure.
//!
//! A trace that writes writes again in each repetition: on connbench's sandbox (and on a
//! target whose cell sets `restore = "template"`) each repetition starts from a copy of
//! the database taken before the first (`restore`).
//!
//! The jobs, a file each: `check` (a trace cell's settings checked, and `run --workload`'s
//! rewrite of a suite's cells), `traces` (each trace read once, with its pre-flight),
//! `measure` (a repetition: the replay and its figures), `prediction` (the trace's own
//! prediction for a cell's path) and `restore` (which cells' repetitions start from the
//! same data, and the copy's life).

mod check;
mod measure;
mod prediction;
mod restore;
mod traces;

pub use check::{
    check_cell, check_files, is_shape_figure, pool_settings, replace_workload, resolve_paths, set_restore,
    trace_of, DEFAULT_POOL_SIZE, FIGURES, PREFIX,
};
pub use measure::{measure, Replayed};
pub use prediction::{prediction, scenario, TracePrediction};
pub use restore::{plan as plan_restores, Restores};
pub use traces::{prepare, Trace, Traces};

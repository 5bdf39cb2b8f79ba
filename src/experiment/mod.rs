//! Experiments: a suite file becomes cells and an interleaved plan (`suite`); the runner
//! turns each cell's settings into the same plans `connect` and `load` run (through
//! `crate::options`), measures every step and saves it at once (`store`), then hands the
//! values across repetitions to `stats::compare`.

pub mod suite;
pub mod db;
pub mod store;
pub mod runner;
pub mod sink;
pub mod failure;
pub mod suggest;
pub mod workers;

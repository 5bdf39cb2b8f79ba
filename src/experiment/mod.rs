//! Experiments: a suite file becomes cells and an interleaved plan (`suite`); `context`
//! resolves what the cells run against once, before anything is measured; the `runner`
//! loops over the plan, `cells` measures each step (turning a cell's settings into the
//! same plans `connect` and `load` run, through `crate::options`), every repetition is
//! saved at once (`store`), and `summary` hands the values across repetitions to
//! `stats::compare`. A cell whose workload is a recorded application's trace is replayed
//! (`replayed`). The runner tells a live view what it measures through `sink`.

pub mod suite;
pub mod db;
pub mod store;
pub mod context;
pub mod runner;
pub mod cells;
pub mod replayed;
pub mod summary;
pub mod sink;
pub mod failure;
pub mod suggest;
pub mod workers;

//! Load: what a transaction does and how many clients do it. `init` creates the
//! TPC-B-like tables; `workload` parses pgbench-syntax scripts and runs one transaction
//! on a session; `engine` runs clients under a connection policy and pacing, as the
//! `LoadPlan` it is given says; `record` holds each worker's histograms and counters,
//! merged at the end; `log` writes pgbench's transaction logs (`-l`), a file per worker;
//! `slices` lets several engines take turns on one machine; `sysbench` makes sysbench's
//! OLTP scripts and tables. The plan
//! is built by `crate::options` from flags or a suite cell; the run it returns is plain
//! data that `stats` reads.

pub mod init;
pub mod workload;
pub mod record;
pub mod log;
pub mod engine;
pub mod slices;
pub mod sysbench;

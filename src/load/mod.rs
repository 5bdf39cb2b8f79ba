//! Load: how many clients run a workload, and how. `plan` holds the `LoadPlan` and the
//! `LoadRun` it comes back as; `threads` runs the worker threads as the plan says;
//! `client` runs one client's loop under a connection policy and pacing, with pgbench's
//! retries, on what a worker's clients share (`shared`); `connecting` opens their
//! connections (the paced ramp before the clock, a refused connect backed off and counted
//! apart, the open-file limit); `pool` is one worker thread's pool (`--connection pool`); `measurements` holds
//! each worker's histograms and counters, merged at the end; `log` writes pgbench's
//! transaction logs (`-l`), a file per worker; `slices` lets several load runs take turns
//! on one machine. What a transaction does is [`crate::workload`]'s; the tables it reads
//! are [`crate::dataset`]'s. The plan is built by `crate::options` from flags or a suite
//! cell; the run it returns is plain data that `stats` reads.

pub mod measurements;
pub mod log;
pub mod plan;
pub mod pool;
mod client;
pub mod connecting;
mod shared;
pub mod threads;
pub mod slices;

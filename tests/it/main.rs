//! connbench's integration tests: one binary, run against real PostgreSQL and PgBouncer
//! processes started by connbench's own sandbox (the code users run). No mock databases.

mod architecture;
mod cgroups;
mod cleanup;
mod cli;
mod common;
mod connect;
mod failures;
mod faults;
mod fuzz;
mod guides;
mod hostile;
mod install;
mod load;
mod metrics;
mod mysql;
mod netpath;
mod paths;
mod pgbench_cli;
mod pgbench_log;
mod pgbench_script;
mod pgbench_tap;
mod readme;
mod relay;
mod replay;
mod replay_cancel;
mod replay_pool;
mod report;
mod sandboxes;
mod secrets;
mod suite_trace;
mod suites;
mod sysbench;
mod trace;
mod workers;

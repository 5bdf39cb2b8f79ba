//! Datasets: the tables a workload reads, made and found at a target. `pgbench` owns
//! the TPC-B-like tables (connbench's own schema, or pgbench's `pgbench_*`); `sysbench`
//! owns sysbench's `sbtest1..N`. Each creates and drops only tables it marked as
//! connbench's, and hands the run what it found (which tables, their scale or size).
//! `snapshot` owns a database's copy that a trace's repetitions each start from.

pub mod pgbench;
pub mod snapshot;
pub mod sysbench;

use anyhow::{Context, Result};

use crate::proto::{self, Endpoint, PhaseCursor, Session};

/// A session on `ep` for the dataset's DDL and look-ups.
async fn open(ep: &Endpoint) -> Result<Session> {
    let (s, _) = proto::connect(ep, &PhaseCursor::default())
        .await
        .with_context(|| format!("cannot connect to {}", ep.target.name()))?;
    Ok(s)
}

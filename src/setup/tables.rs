//! The tables a fresh sandbox is given before a run: pgbench's, and sysbench's.

use anyhow::Result;

use crate::proto::Endpoint;
use crate::sandbox::Sandbox;

/// Creates the tables in a fresh sandbox and lets every sandbox role use them.
pub async fn init_sandbox_tables(sb: &Sandbox, schema: &str, scale: u32) -> Result<()> {
    let ep = Endpoint::new(sb.info.target("unix")?.target()?)?;
    let report = crate::dataset::pgbench::init(&ep, schema, scale).await?;
    eprintln!(
        "sandbox: {} rows at scale {scale} in schema {schema} ({:.2} s)",
        report.rows,
        report.elapsed.as_secs_f64()
    );
    crate::dataset::pgbench::grant(&ep, schema, crate::sandbox::TRUST_ROLE).await?;
    // MariaDB, when the sandbox runs it: the same tables in the database of that name,
    // which every MariaDB role of the sandbox is granted.
    if let Ok(t) = sb.info.target("mariadb_unix") {
        let ep = Endpoint::new(t.target()?)?;
        let report = crate::dataset::pgbench::init(&ep, schema, scale).await?;
        eprintln!(
            "sandbox: {} rows at scale {scale} in MariaDB database {schema} ({:.2} s)",
            report.rows,
            report.elapsed.as_secs_f64()
        );
    }
    Ok(())
}

/// sysbench's tables (sbtest1, 10,000 rows: sysbench's defaults) in a fresh sandbox,
/// on PostgreSQL and on MariaDB when it runs, for the oltp-* workloads.
pub async fn init_sandbox_sysbench_tables(sb: &Sandbox) -> Result<()> {
    let o = crate::workload::sysbench::SysbenchOptions::default();
    let ep = Endpoint::new(sb.info.target("unix")?.target()?)?;
    let report = crate::dataset::sysbench::init(&ep, &o).await?;
    crate::dataset::sysbench::grant(&ep, crate::sandbox::TRUST_ROLE).await?;
    if let Ok(t) = sb.info.target("mariadb_unix") {
        crate::dataset::sysbench::init(&Endpoint::new(t.target()?)?, &o).await?;
    }
    eprintln!(
        "sandbox: sysbench's sbtest1 of {} rows ({:.2} s on PostgreSQL)",
        report.table_size,
        report.elapsed.as_secs_f64()
    );
    Ok(())
}

//! `connbench init`: create or drop the TPC-B-like tables on a target.

use anyhow::Result;

use crate::cli::InitArgs;
use crate::exit::Exit;
use crate::proto::Endpoint;
use crate::setup::emit;
use crate::setup::targets::parse_target;

pub async fn run_init(args: InitArgs) -> Result<Exit> {
    let ep = Endpoint::new(parse_target(args.target.as_deref())?)?;
    if args.tables == "sysbench" {
        return run_init_sysbench(&ep, &args).await;
    }
    if args.drop {
        let dropped = crate::dataset::pgbench::drop(&ep, &args.schema).await?;
        if dropped.is_empty() {
            eprintln!(
                "init: no connbench tables in schema {}; nothing to drop",
                args.schema
            );
        } else {
            eprintln!("init: dropped {}", dropped.join(", "));
        }
        return Ok(Exit::Success);
    }
    let report = crate::dataset::pgbench::init(&ep, &args.schema, args.scale).await?;
    if !report.replaced.is_empty() {
        eprintln!(
            "init: replaced connbench's earlier tables: {}",
            report.replaced.join(", ")
        );
    }
    let how = match ep.engine() {
        crate::proto::Engine::Postgres => "loaded with COPY, keys added, vacuumed and analysed",
        crate::proto::Engine::Mysql => "loaded into InnoDB tables with multi-row INSERTs and analysed",
    };
    emit(&format!(
        "init: schema {} at scale {}: {} rows {how} in {:.2} s\n",
        report.schema,
        report.scale,
        report.rows,
        report.elapsed.as_secs_f64()
    ));
    Ok(Exit::Success)
}

/// `init --tables sysbench`: sysbench's sbtest1..N, marked as connbench's.
async fn run_init_sysbench(ep: &Endpoint, args: &InitArgs) -> Result<Exit> {
    let o = crate::cli::sysbench_options(&args.sysbench)?;
    if args.drop {
        let dropped = crate::dataset::sysbench::drop(ep).await?;
        if dropped.is_empty() {
            eprintln!("init: no sysbench tables (sbtest1, ...) made by connbench; nothing to drop");
        } else {
            eprintln!("init: dropped {}", dropped.join(", "));
        }
        return Ok(Exit::Success);
    }
    let r = crate::dataset::sysbench::init(ep, &o).await?;
    if !r.replaced.is_empty() {
        eprintln!(
            "init: replaced connbench's earlier tables: {}",
            r.replaced.join(", ")
        );
    }
    emit(&format!(
        "init: sysbench's tables sbtest1..{} of {} rows each: {} rows loaded, index k_N made, analysed in {:.2} s\n",
        r.tables,
        r.table_size,
        r.rows,
        r.elapsed.as_secs_f64()
    ));
    Ok(Exit::Success)
}

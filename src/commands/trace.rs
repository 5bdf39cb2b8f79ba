//! `connbench trace TRACE`: what a recorded application does, the round-trip model's
//! predictions for it, and its housekeeping (what its driver and pool sent) priced.

use anyhow::{Context, Result};

use crate::cli::record::TraceArgs;
use crate::exit::Exit;
use crate::setup::{emit, write_new};

pub fn run_trace(args: TraceArgs) -> Result<Exit> {
    let path = args.trace.display().to_string();
    let (profile, cut) =
        connbench_trace::profile::read(&args.trace).with_context(|| format!("trace {path}"))?;
    // Where it was measured, which the method says: the recorder, or a capture's point.
    let header = connbench_trace::TraceReader::open(&args.trace).with_context(|| format!("trace {path}"))?;
    let capture = header.header().capture.clone();
    let rtts: Vec<f64> = if args.rtt.is_empty() {
        vec![1.0, 10.0, 50.0]
    } else {
        args.rtt.iter().map(|d| d.as_secs_f64() * 1e3).collect()
    };
    let mut predictions = crate::stats::app::predict(&profile, &rtts);
    let shapes = crate::stats::app::predict_shapes(&profile, &rtts);
    // What the driver and pool sent, priced: a second pass over the file, the tally
    // keeping its own per-session state apart from the profiler's.
    let chores = connbench_trace::housekeeping::read(&args.trace).with_context(|| format!("trace {path}"))?;
    let costs = crate::stats::housekeeping::costs(&chores, &rtts);
    let without = crate::stats::housekeeping::predict_without(&chores, &rtts);
    // Each scenario without the housekeeping, from the saving the section prints.
    crate::stats::app::with_housekeeping(&mut predictions, &profile, &chores, &without);
    if args.json {
        let mut v = crate::report::trace::json(&profile, &predictions, &shapes, &path, capture.as_ref());
        v["housekeeping"] = crate::report::housekeeping::json(&chores, &costs, &without);
        emit(&(serde_json::to_string_pretty(&v)? + "\n"));
    } else {
        let mut text =
            crate::report::trace::text(&profile, &predictions, &shapes, &path, capture.as_ref(), args.top);
        text.push_str(&crate::report::housekeeping::text(&chores, &costs, &without));
        emit(&text);
    }
    if let Some(file) = &args.html {
        let chores = crate::report::housekeeping::html(&chores, &costs, &without);
        let page = crate::report::trace_html::html(
            &profile,
            &predictions,
            &chores,
            (&path, capture.as_ref()),
            args.top,
        );
        write_new(file, &page).with_context(|| format!("--html {}", file.display()))?;
        eprintln!("trace: wrote {}", file.display());
    }
    if let Some(why) = cut {
        eprintln!("warning: trace {path}: {why}; the profile covers what came before");
    }
    Ok(Exit::Success)
}

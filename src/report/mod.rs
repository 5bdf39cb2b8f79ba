//! Reports: turn statistics into what people read (terminal tables, Markdown, an HTML
//! page with charts) and what programs read (JSON with stable keys, CSV). Reports only
//! read `stats` values and stored runs; they measure and compute nothing of their own
//! beyond unit conversion and ratios for display.
//!
//! `data` rebuilds a stored run's statistics and chart inputs; `text`, `load` and `suite`
//! are the terminal and JSON output of live commands; `markdown`, `csv` and `html` (with
//! `chart`, one file per chart kind) are the published forms; `size` reads a server-size axis as a
//! curve against the smallest size; `failures` says what failed and stalled transactions
//! cost a cell, in its answer and its tables; `style` holds colour and wrapping for the terminal;
//! `trace`, `trace_html`, `trace_charts`, `replay` and `replay_html` are `connbench trace`'s and
//! `connbench replay`'s text, JSON and pages.

pub mod data;
pub mod style;
pub mod text;
pub mod json;
pub mod load;
pub mod workers;
pub mod suite;
pub mod size;
pub mod failures;
pub mod markdown;
pub mod csv;
pub mod chart;
pub mod html;
pub mod trace;
pub mod trace_charts;
pub mod trace_html;
pub mod housekeeping;
pub mod replay;
pub mod replay_html;

pub use crate::units::{format_bytes, format_duration, format_ns};

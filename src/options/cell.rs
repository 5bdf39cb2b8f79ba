//! A suite cell's settings and what each becomes: the text a suite file gives per cell
//! ([`Settings`]), read into the connect settings, the network path, the route, the
//! fault and the CPU accounting of the cell. Apart from `load` because a cell has knobs
//! a command line has not (netpath, fault, server_cpus), and here rather than in
//! `experiment` so the options layer reads cells without importing the stage above it.

use std::collections::BTreeMap;

/// A setting's value, as text (validated when the cell is turned into a run).
pub type Settings = BTreeMap<String, String>;
